//! Harness for black-box tests that start the real `strata` binary. Empty until the HTTP API
//! lands.

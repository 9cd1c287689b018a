//! Black-box tests of the real `strata` binary, one module per area (added with the HTTP API).

//! Strata load generator and benchmark reports. Empty until the HTTP API lands.

//! Strata's server: the storage engine (`log`), its disk layer (`io`) and, in later issues, the
//! HTTP API. `main.rs` only parses the command line and calls into this library, so tests and
//! benchmarks use exactly the code the binary runs.

pub mod clock;
pub mod config;
pub mod io;
pub mod limits;
pub mod log;

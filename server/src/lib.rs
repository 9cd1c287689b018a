//! Strata's server: the storage engine (`log`), its disk layer (`io`), topics, the service floor
//! (`broker`: what each operation means) and the HTTP API over it (`http`).
//! `main.rs` only parses the command line and calls into this library ([`server::run`]), so tests
//! and benchmarks use exactly the code the binary runs.

pub mod allocator;
pub mod archive;
pub mod audit;
pub mod broker;
pub mod build_info;
pub mod check;
pub mod cleaner;
pub mod cli;
pub mod clock;
pub mod config;
pub mod groups;
pub mod http;
pub mod io;
pub mod limits;
pub mod log;
pub mod logging;
pub mod metrics;
pub mod names;
pub mod producers;
pub mod security;
pub mod serve;
pub mod server;
pub mod status;
pub mod tiering;
pub mod topics;

pub use server::{StartError, run};

#[cfg(test)]
mod tidy;

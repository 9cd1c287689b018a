//! Black-box tests of the real `strata` binary, one module per area. Every test starts its own
//! server on 127.0.0.1:0 with a temporary data directory (see `strata_tests::Server`).

// Test code may unwrap (clippy.toml allows it in tests; helpers outside #[test] fns need this).
#![allow(clippy::unwrap_used)]

mod archive;
mod cleaning;
mod corruption;
mod crash;
mod disk_full;
mod errors;
mod generated_client;
mod groups;
mod health;
mod idempotence;
mod internal_topics;
mod kafka_compat;
mod legal_holds;
mod observability;
mod page_cache;
mod preallocation;
mod produce_fetch;
mod read_audit;
mod readme;
mod security;
mod streamed_appends;
mod streaming;
mod tiering;
mod toolchain;
mod topics;
mod transport;

//! Integration tests of strata-tiering, one module per area. The S3 cases run against the real
//! SeaweedFS server that `scripts/start-s3.sh` starts on 127.0.0.1 (see
//! `strata_tiering::testing`); if it can't start, they fail, they never skip.

// Test code may unwrap (clippy.toml allows it in tests; helpers outside #[test] fns need this).
#![allow(clippy::unwrap_used)]

mod chunk_cache;
mod conformance;
mod faults;
mod object_lock;
mod probe;
mod upload;

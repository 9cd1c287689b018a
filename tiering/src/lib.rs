//! Object-storage tiering for Strata. This is the foundation (issue #6): opening the object store
//! (a local folder by default, or S3), the start-up check that it honours conditional writes,
//! Object Lock retention, and the fault injector and S3 test server the tests use. Uploads,
//! manifests, cold reads and restore build on these.
//!
//! - [`store_url`]: parse the object-store setting (`/path`, `file:///path`, `s3://bucket/prefix`).
//! - [`store`]: open it as a [`TierStore`] (`object_store` handle + key prefix); retries.
//! - [`probe`]: refuse stores that ignore `PutMode::Create` / `PutMode::Update`.
//! - [`object_lock`]: retention and lock-aware version deletes via aws-sdk-s3.
//! - `faults` (tests, `test-util`): `FaultyObjectStore`.
//! - `testing` (tests, `test-util`): the SeaweedFS server of `scripts/start-s3.sh`.
//!
//! Tiering never sees segment internals: it moves files and byte ranges by name.
#![warn(missing_docs)]

pub mod chunk_cache;
pub mod digest;
pub mod layout;
pub mod manifest;
pub mod object_lock;
pub mod probe;
pub mod store;
pub mod store_url;
pub mod tlog;
pub mod upload;

#[cfg(any(test, feature = "test-util"))]
pub mod faults;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;

pub use probe::{ConditionalWrites, ProbeError, UpdateSupport, probe_conditional_writes};
pub use store::{OpenStoreError, S3Connection, S3Credentials, StoreSettings, TierStore};
pub use store_url::{StoreUrl, StoreUrlError};

//! What tiering counts for `/metrics`: uploads, failures, manifest writes and fences, remote
//! deletes. Plain atomics read at scrape time; upload lag is computed from the partitions and
//! the manifests then (no counter can say how old the oldest waiting segment is).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters since start.
#[derive(Debug, Default)]
pub struct TieringStats {
    /// Segments uploaded (their manifest entry written).
    pub segments_uploaded: AtomicU64,
    /// Bytes of the uploaded segments' log files.
    pub bytes_uploaded: AtomicU64,
    /// Partition syncs that failed (retried by the next sweep).
    pub sync_failures: AtomicU64,
    /// Manifests written.
    pub manifest_writes: AtomicU64,
    /// Manifest writes that lost to another writer (the partition stops tiering).
    pub manifest_fences: AtomicU64,
    /// Objects deleted from the bucket (retention, delete-records, topic deletion, orphans).
    pub remote_deletes: AtomicU64,
    /// Deletes refused because Object Lock still protects the object (retried later).
    pub locked_delete_retries: AtomicU64,
}

impl TieringStats {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// A counter's value.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

//! What the partition writers count, for `/metrics`: where an append's time goes (waiting in
//! the queue, the write, the fdatasync), how big group-commit rounds are, and how appends were
//! acknowledged.
//!
//! One process-wide set shared by every partition, so the engine needs no handle passed down
//! and the labels stay bounded (no topic or partition here; per-partition state is read at
//! scrape time). The types are `prometheus-client`'s lock-light atomics; the engine only
//! records, the metrics floor registers and exports them.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// The part of an append a duration belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct StageLabel {
    /// `queue` (enqueued until its round starts), `write`, `fsync`, or `write_fsync` (a round
    /// of only `acks=all` requests hands write and fdatasync to the disk as one operation).
    pub stage: &'static str,
}

/// How an append was acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct AcksLabel {
    /// `all` (after fdatasync) or `leader` (after the write).
    pub acks: &'static str,
}

/// How a streamed append's lease ended (see `log::stream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct StreamLabel {
    /// `committed` (the streamed bytes became the append), `rewritten` (valid, but appended by
    /// an ordinary write: duplicates, too many batches, a full segment), `revoked` (another
    /// command needed the writer), `abandoned` (the body was invalid, incomplete, or its
    /// request went away), or `refused` (no lease: other appends were waiting).
    pub outcome: &'static str,
}

/// The writers' counters and histograms.
#[derive(Debug)]
pub struct WriterStats {
    /// Seconds per stage of an append.
    pub stage_seconds: Family<StageLabel, Histogram>,
    /// Requests per group-commit round (one fdatasync).
    pub round_requests: Histogram,
    /// Bytes per group-commit round.
    pub round_bytes: Histogram,
    /// Append requests by acknowledgement.
    pub requests: Family<AcksLabel, Counter>,
    /// Batches answered as duplicates of ones already in the log (idempotent retries).
    pub duplicates: Counter,
    /// Streamed appends by how their lease ended.
    pub streams: Family<StreamLabel, Counter>,
}

fn latency_histogram() -> Histogram {
    // 10 µs .. ~5 s, doubling: fdatasync on NVMe is tens of µs, on network disks milliseconds.
    Histogram::new(exponential_buckets(0.000_01, 2.0, 20))
}

/// The process-wide writer statistics.
pub static WRITER: LazyLock<WriterStats> = LazyLock::new(|| WriterStats {
    stage_seconds: Family::new_with_constructor(latency_histogram),
    round_requests: Histogram::new(exponential_buckets(1.0, 2.0, 12)),
    round_bytes: Histogram::new(exponential_buckets(256.0, 4.0, 12)),
    requests: Family::default(),
    duplicates: Counter::default(),
    streams: Family::default(),
});

impl WriterStats {
    /// Counts a streamed append's lease by how it ended.
    pub fn stream(&self, outcome: &'static str) {
        self.streams.get_or_create(&StreamLabel { outcome }).inc();
    }

    /// Records how long one stage took.
    pub fn observe(&self, stage: &'static str, took: Duration) {
        self.stage_seconds
            .get_or_create(&StageLabel { stage })
            .observe(took.as_secs_f64());
    }
}

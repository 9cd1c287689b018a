//! The state a partition shares between its handle, its writer task, readers and the cleaner:
//! the segment map, the published offsets, the configuration. Its own module so that the
//! writer and compaction can reach it without importing the partition.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::watch;

use super::config::LogConfig;
use super::segment::Segment;
use super::types::LogOffsets;
use crate::clock::Clock;
use crate::io::Io;

/// State shared by the handle, the writer task and readers.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) dir: PathBuf,
    pub(crate) config: RwLock<LogConfig>,
    pub(crate) io: Io,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) segments: RwLock<BTreeMap<u64, Arc<Segment>>>,
    pub(crate) offsets: watch::Sender<LogOffsets>,
    /// True until the partition holds a compacted segment: then every segment's batches are
    /// contiguous, so a batch whose base offset does not follow on is damaged.
    pub(crate) contiguous: std::sync::atomic::AtomicBool,
    /// Why the writer stopped taking appends (a failed fdatasync): the writer refuses appends
    /// while it is set, and readiness and metrics report it.
    pub(crate) poisoned: RwLock<Option<String>>,
    /// Set by the writer while it waits for commands and would lend the tail to a stream: a
    /// request checks it before asking, so it never queues a lease request behind a busy
    /// writer's round (it would wait that round out before reading its body).
    pub(crate) lendable: std::sync::atomic::AtomicBool,
    /// Clock ms before which no tail is lent: another appender showed up during a lease, and
    /// group commit serves competing appenders better (see `writer::lease`).
    pub(crate) lend_after_ms: std::sync::atomic::AtomicI64,
}

impl Shared {
    /// Whether a stream may ask for the tail now: the writer said it would lend, and no
    /// appender competed recently.
    pub(crate) fn may_lend(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.lendable.load(Ordering::Acquire) && !self.competed_recently()
    }

    /// Whether another appender showed up during a lease too recently for the tail to be lent
    /// again (`lend_after_ms`).
    pub(crate) fn competed_recently(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.clock.now_ms() < self.lend_after_ms.load(Ordering::Acquire)
    }

    pub(crate) fn active_segment(&self) -> Arc<Segment> {
        self.segments
            .read()
            .values()
            .next_back()
            .cloned()
            .expect("invariant: a partition always has an active segment")
    }
}

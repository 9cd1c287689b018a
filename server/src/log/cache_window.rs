//! Keeps only the newest bytes of the active segment in the page cache.
//!
//! Why: on a VM whose free memory is handed back to the host (virtio-balloon free page
//! reporting, as on this project's Firecracker machines), a growing log takes a never-touched
//! page for every 4 KiB it writes, and the host's fault for each made the copy into the page
//! cache the slowest part of a large append: 7.9 ms of a 1 MiB write + fdatasync that takes
//! 0.27 ms when the pages already exist. Dropping the cached copy of bytes that are durable and
//! `window` behind the end returns their pages to the kernel while they are still backed, and
//! the next writes take them again. Consumers near the end still read from memory; one further
//! behind reads from disk, as it would once the kernel evicted those pages anyway. Advice on
//! clean pages never touches the data; pages a reader has mapped stay.

use std::sync::Arc;

use super::segment::Segment;

/// Advice is given in steps of this many bytes, so small rounds cost no syscall.
const STEP: u64 = 1 << 20;

/// How far the active segment's cached copy has been dropped.
#[derive(Debug, Default)]
pub(crate) struct CacheWindow {
    /// `(base offset of the segment, bytes from its start already dropped)`.
    dropped: Option<(u64, u64)>,
}

impl CacheWindow {
    /// Drops the cached pages of `segment` from where the last call stopped up to `window`
    /// bytes before its durable end. `window = 0` keeps everything (the kernel decides).
    pub(crate) fn advance(&mut self, io: &crate::io::Io, segment: &Arc<Segment>, window: u64) {
        if window == 0 {
            return;
        }
        let base = segment.base_offset();
        let from = match self.dropped {
            Some((dropped_base, to)) if dropped_base == base => to,
            _ => 0,
        };
        let durable = segment.snapshot().durable_size;
        let until = durable.saturating_sub(window) / STEP * STEP;
        if until < from + STEP {
            return;
        }
        if let Err(error) = io.drop_cached(segment.log_file(), from, until - from) {
            tracing::debug!(%error, "dropping cached log pages failed; keeping them");
        }
        self.dropped = Some((base, until));
    }
}

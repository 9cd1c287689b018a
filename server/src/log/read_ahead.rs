//! Deep read-ahead for catch-up readers of data the page cache no longer holds.
//!
//! Where the page-cache window is on (ADR 0014), everything behind the active segment's last
//! few MiB is read from disk. The kernel's own read-ahead keeps one window in flight and a
//! sequential reader waits for each: on this project's VMs, 1 MiB `pread`s of a cold file ran
//! at 530-610 MiB/s, and 1.85 GB/s when `POSIX_FADV_WILLNEED` kept 32 MiB requested ahead of
//! them (`docs/benchmarks.md`, sixth step). So each segment remembers how far ahead it has
//! asked for, and a read far from the tail asks for the next [`READ_AHEAD_BYTES`] once less than
//! half of that is left. The advice only starts reads into the page cache; it never changes
//! what a read returns.

use std::ops::Range;

/// How far ahead of a catch-up read the kernel is asked to read.
pub(crate) const READ_AHEAD_BYTES: u64 = 32 << 20;

/// The region of one segment already asked for.
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    requested: Range<u64>,
}

impl ReadAhead {
    /// What to ask for around a read of `range` in a segment `durable` bytes long: nothing while
    /// the read continues inside the requested region with at least half of
    /// [`READ_AHEAD_BYTES`] left ahead of it; otherwise the bytes from the end of what was
    /// asked (or from the read, when it jumped elsewhere) to [`READ_AHEAD_BYTES`] past it.
    pub(crate) fn plan(&mut self, range: &Range<u64>, durable: u64) -> Option<Range<u64>> {
        let target = range.end.saturating_add(READ_AHEAD_BYTES).min(durable);
        let continuing = range.start >= self.requested.start && range.start <= self.requested.end;
        if continuing && self.requested.end >= range.end.saturating_add(READ_AHEAD_BYTES / 2) {
            return None;
        }
        let (from, start) = if continuing {
            (self.requested.end, self.requested.start)
        } else {
            (range.start, range.start)
        };
        if target <= from {
            return None;
        }
        self.requested = start..target;
        Some(from..target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_sequential_reader_asks_again_only_when_half_the_read_ahead_is_used() {
        let mut ahead = ReadAhead::default();
        let durable = 1 << 30;
        assert_eq!(ahead.plan(&(0..MIB), durable), Some(0..33 * MIB));
        let mut asked = Vec::new();
        for step in 1..40 {
            if let Some(range) = ahead.plan(&(step * MIB..(step + 1) * MIB), durable) {
                asked.push(range);
            }
        }
        // Each request continues the last one, and none is repeated.
        assert_eq!(asked.first(), Some(&(33 * MIB..50 * MIB)));
        for pair in asked.windows(2) {
            assert_eq!(pair[0].end, pair[1].start);
        }
        assert!(asked.len() <= 3, "{asked:?}");
    }

    #[test]
    fn a_jump_starts_a_new_region_and_the_segment_end_bounds_it() {
        let mut ahead = ReadAhead::default();
        assert_eq!(ahead.plan(&(0..MIB), 100 * MIB), Some(0..33 * MIB));
        assert_eq!(
            ahead.plan(&(80 * MIB..81 * MIB), 100 * MIB),
            Some(80 * MIB..100 * MIB)
        );
        assert_eq!(ahead.plan(&(81 * MIB..82 * MIB), 100 * MIB), None);
        assert_eq!(ahead.plan(&(99 * MIB..100 * MIB), 100 * MIB), None);
    }
}

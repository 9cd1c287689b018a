//! Reserving the active segment's next bytes ahead of the writes (`fallocate`, mode 0).
//!
//! On ext4 and XFS, an fdatasync after a write that grows the file must also commit the new
//! size and block map to the journal; after a write inside bytes that are already allocated
//! and inside the file's size, it only flushes the data. Measured on this project's VMs
//! (`docs/benchmarks.md`, sixth step), 170 B write + fdatasync: 0.116 ms appending, 0.080 ms
//! inside a reservation. So the writer reserves `step` bytes at a time ahead of its writes,
//! and each reservation costs one journal commit instead of one per fdatasync. Redpanda does
//! the same (its `segment_fallocation_step`).
//!
//! The reserved bytes are unwritten extents: they read as zeros and cost no disk writes.
//! Because the file is longer than the log while it is active, the log's length is always the
//! segment's `durable_size`, never the file's; the reservation is cut off when the segment is
//! rolled or closed, and recovery drops an all-zero tail left by a crash (`scan.rs`).

/// The writer's view of how far the active segment's file is reserved.
#[derive(Debug, Default)]
pub(crate) struct Preallocation {
    /// The segment this describes (its base offset); another one starts from scratch.
    segment: Option<u64>,
    /// The file's length: bytes below it are the log or reserved zeros.
    reserved_end: u64,
    /// A reservation failed (no space, a file system without `fallocate`): stop trying until
    /// the next segment, and let the writes grow the file as they would without one.
    disabled: bool,
}

/// A reservation to make: `fallocate(offset, len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reservation {
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

impl Preallocation {
    /// What to reserve before writing up to `write_end` in segment `segment`, whose file is
    /// `file_len` long when the writer first sees it. Reservations grow in whole `step`s and
    /// stop at `limit` (the size past which the segment rolls). `None`: nothing to do.
    pub(crate) fn plan(
        &mut self,
        segment: u64,
        file_len: u64,
        write_end: u64,
        step: u64,
        limit: u64,
    ) -> Option<Reservation> {
        if self.segment != Some(segment) {
            *self = Preallocation {
                segment: Some(segment),
                reserved_end: file_len,
                disabled: false,
            };
        }
        // A write past the limit grows the file itself; the segment rolls after it.
        if step == 0 || self.disabled || write_end <= self.reserved_end || write_end > limit {
            return None;
        }
        let end = write_end.checked_next_multiple_of(step)?.min(limit);
        (end > self.reserved_end).then(|| Reservation {
            offset: self.reserved_end,
            len: end - self.reserved_end,
        })
    }

    /// The reservation was made.
    pub(crate) fn reserved(&mut self, reservation: Reservation) {
        self.reserved_end = self.reserved_end.max(reservation.offset + reservation.len);
    }

    /// The reservation failed: write without one until the next segment. A failed
    /// `fallocate` may still have grown the file, so it counts as reserved for the trim.
    pub(crate) fn failed(&mut self, reservation: Reservation) {
        self.reserved(reservation);
        self.disabled = true;
    }

    /// The file was cut back to `len` (a failed write is cut off, a roll trims the tail).
    pub(crate) fn cut(&mut self, len: u64) {
        self.reserved_end = self.reserved_end.min(len);
    }

    /// Whether the file may be longer than the log: then it must be trimmed before the
    /// segment is closed.
    pub(crate) fn reserved_beyond(&self, segment: u64, log_len: u64) -> bool {
        self.segment == Some(segment) && self.reserved_end > log_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn reserves_whole_steps_ahead_and_only_when_the_write_passes_the_reservation() {
        let mut p = Preallocation::default();
        let first = p.plan(0, 0, 170, 4 * MIB, 64 * MIB);
        assert_eq!(
            first,
            Some(Reservation {
                offset: 0,
                len: 4 * MIB
            })
        );
        p.reserved(first.unwrap());
        assert_eq!(p.plan(0, 0, 4 * MIB, 4 * MIB, 64 * MIB), None);
        let next = p.plan(0, 0, 4 * MIB + 1, 4 * MIB, 64 * MIB);
        assert_eq!(
            next,
            Some(Reservation {
                offset: 4 * MIB,
                len: 4 * MIB
            })
        );
    }

    #[test]
    fn never_reserves_past_the_roll_limit_but_always_covers_the_write() {
        let mut p = Preallocation::default();
        assert_eq!(
            p.plan(0, 0, 100, 4 * MIB, MIB),
            Some(Reservation {
                offset: 0,
                len: MIB
            })
        );
        p.reserved(Reservation {
            offset: 0,
            len: MIB,
        });
        // A write that crosses the limit (the segment rolls after it) needs no reservation.
        assert_eq!(p.plan(0, 0, MIB + 10, 4 * MIB, MIB), None);
    }

    #[test]
    fn a_new_segment_starts_from_its_file_length_and_a_failure_stops_reservations() {
        let mut p = Preallocation::default();
        let first = p.plan(0, 0, 1, MIB, 64 * MIB).unwrap();
        p.reserved(first);
        assert!(p.reserved_beyond(0, 1));
        assert!(!p.reserved_beyond(7, 1), "another segment");
        let planned = p.plan(7, 300, 400, MIB, 64 * MIB).unwrap();
        assert_eq!(planned.offset, 300, "starts at the new file's length");
        p.failed(planned);
        assert!(
            p.reserved_beyond(7, 400),
            "a failed fallocate may have grown the file"
        );
        assert_eq!(p.plan(7, 300, 2 * MIB, MIB, 64 * MIB), None);
        assert_eq!(
            p.plan(9, 0, 10, MIB, 64 * MIB).map(|r| r.len),
            Some(MIB),
            "the next segment tries again"
        );
    }

    #[test]
    fn a_cut_moves_the_reservation_back_and_step_zero_turns_it_off() {
        let mut p = Preallocation::default();
        let first = p.plan(0, 0, 10, MIB, 64 * MIB).unwrap();
        p.reserved(first);
        p.cut(10);
        assert!(!p.reserved_beyond(0, 10));
        assert_eq!(p.plan(0, 0, 20, MIB, 64 * MIB).map(|r| r.offset), Some(10));
        assert_eq!(p.plan(0, 0, 20, 0, 64 * MIB), None);
    }
}

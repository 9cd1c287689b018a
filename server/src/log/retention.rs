//! The one retention rule, for local and remote segments alike: a pure, clock-free function
//! of the segments, their sizes and newest timestamps, the policy and the time. The local
//! cleaner, local retention of tiered topics and total retention in the bucket all call
//! [`retention_cut`], so the two tiers cannot disagree on which segment is due.

use super::segments::SegmentMap;

/// Retention settings; `-1` disables either bound (Kafka's convention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Segments whose newest record is older than this (ms) go.
    pub retention_ms: i64,
    /// Oldest segments go while the log would still hold at least this many bytes without
    /// them (Kafka's rule: retention never takes the log below `retention.bytes`).
    pub retention_bytes: i64,
}

impl RetentionPolicy {
    /// Whether either bound is set.
    pub fn is_enabled(&self) -> bool {
        self.retention_ms >= 0 || self.retention_bytes >= 0
    }
}

/// A segment that retention may remove, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionCandidate {
    /// The offset after the segment: the log start once it is gone.
    pub end_offset: u64,
    /// Its bytes.
    pub size: u64,
    /// Its newest record's timestamp; `None` when the segment holds no timestamped record.
    pub max_timestamp: Option<i64>,
}

/// Whether a segment is past `retention_ms` at `now_ms`.
///
/// A segment without a timestamp counts as expired: it holds no record whose age could keep
/// it (compaction emptied it, or it never held one), and keeping it would pin the log start
/// forever. Local and remote segments follow this one rule.
pub fn is_expired(max_timestamp: Option<i64>, retention_ms: i64, now_ms: i64) -> bool {
    retention_ms >= 0
        && max_timestamp.is_none_or(|newest| newest < now_ms.saturating_sub(retention_ms))
}

/// Where retention moves the log start: past every candidate, oldest first, that is expired or
/// that the log can lose and still hold at least `retention_bytes` (as Kafka decides: a
/// segment goes only if the log keeps `retention.bytes` without it, so a user who sets 1 GB
/// keeps at least 1 GB, never up to a segment less). `total_bytes` is the size
/// of the whole log, candidates and the rest (the active segment, segments not eligible).
/// Stops at the first candidate that may stay. `None` when nothing is due.
pub fn retention_cut(
    candidates: impl IntoIterator<Item = RetentionCandidate>,
    total_bytes: u64,
    policy: RetentionPolicy,
    now_ms: i64,
) -> Option<u64> {
    let mut remaining = total_bytes;
    let mut cut = None;
    for segment in candidates {
        let expired = is_expired(segment.max_timestamp, policy.retention_ms, now_ms);
        let oversized = u64::try_from(policy.retention_bytes)
            .is_ok_and(|limit| remaining.saturating_sub(segment.size) >= limit);
        if !(expired || oversized) {
            break;
        }
        remaining = remaining.saturating_sub(segment.size);
        cut = Some(segment.end_offset);
    }
    cut
}

/// Where a legal hold begins in one partition, as retention sees it (the engine knows nothing
/// else of holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldFrom {
    /// Every offset from this one is kept.
    Offset(u64),
    /// Every record with a timestamp at or after this one (ms) is kept.
    Time(i64),
}

/// The lowest offset one hold keeps in a partition whose segments are `segments`: the log
/// start may not pass it. A time hold keeps from the first segment whose newest record is at
/// or after its start (no earlier segment holds such a record); one that matches no segment
/// keeps nothing yet.
pub fn held_offset(hold: HeldFrom, segments: &SegmentMap) -> Option<u64> {
    match hold {
        HeldFrom::Offset(offset) => Some(offset),
        HeldFrom::Time(start_ms) => segments.locate_time(start_ms).map(|s| s.base_offset),
    }
}

/// The lowest offset any of `holds` keeps ([`held_offset`]); `None` when nothing is held.
/// The segment map is only built when there is a hold: retention passes over every partition,
/// and almost none carries one.
pub fn hold_floor(holds: &[HeldFrom], segments: impl FnOnce() -> SegmentMap) -> Option<u64> {
    if holds.is_empty() {
        return None;
    }
    let segments = segments();
    holds
        .iter()
        .filter_map(|hold| held_offset(*hold, &segments))
        .min()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::log::segments::{SegmentMap, SegmentSpan, Tier};

    fn segment(end_offset: u64, size: u64, max_timestamp: Option<i64>) -> RetentionCandidate {
        RetentionCandidate {
            end_offset,
            size,
            max_timestamp,
        }
    }

    const NOW: i64 = 1_000_000;

    #[test]
    fn expired_segments_go_oldest_first_and_the_first_young_one_stops_the_cut() {
        let policy = RetentionPolicy {
            retention_ms: 100,
            retention_bytes: -1,
        };
        let segments = [
            segment(10, 5, Some(NOW - 500)),
            segment(20, 5, Some(NOW - 200)),
            segment(30, 5, Some(NOW - 50)),
            segment(40, 5, Some(NOW - 500)),
        ];
        assert_eq!(retention_cut(segments, 100, policy, NOW), Some(20));
    }

    #[test]
    fn a_segment_without_a_timestamp_is_expired() {
        assert!(is_expired(None, 0, NOW));
        assert!(!is_expired(None, -1, NOW), "time retention off keeps it");
        assert!(!is_expired(Some(NOW), 100, NOW));
    }

    #[test]
    fn size_retention_drops_oldest_while_the_rest_still_holds_the_limit() {
        let policy = RetentionPolicy {
            retention_ms: -1,
            retention_bytes: 25,
        };
        let segments = [segment(10, 10, Some(NOW)), segment(20, 10, Some(NOW))];
        // 50 bytes in all (30 of them not candidates): both can go and leave 30 >= 25.
        assert_eq!(retention_cut(segments, 50, policy, NOW), Some(20));
        // 40: the first goes (30 left); the second would leave 20 < 25, so it stays.
        assert_eq!(retention_cut(segments, 40, policy, NOW), Some(10));
        assert_eq!(retention_cut(segments, 35, policy, NOW), Some(10));
        // 34: without the first, 24 < 25: Kafka keeps it, and so does Strata.
        assert_eq!(retention_cut(segments, 34, policy, NOW), None);
        assert_eq!(retention_cut(segments, 25, policy, NOW), None);
    }

    proptest! {
        /// The cut equals a direct model: the longest prefix of candidates each of which is
        /// expired or leaves at least `retention_bytes` behind it.
        #[test]
        fn the_cut_is_the_longest_removable_prefix(
            sizes in proptest::collection::vec((1u64..100, proptest::option::of(0i64..2_000_000)), 0..12),
            extra in 0u64..500,
            retention_ms in -1i64..1_000_000,
            retention_bytes in -1i64..1_000,
        ) {
            let candidates: Vec<RetentionCandidate> = sizes
                .iter()
                .enumerate()
                .map(|(i, (size, ts))| segment((i as u64 + 1) * 10, *size, *ts))
                .collect();
            let total: u64 = extra + candidates.iter().map(|c| c.size).sum::<u64>();
            let policy = RetentionPolicy { retention_ms, retention_bytes };
            let mut left = total;
            let mut expected = None;
            for c in &candidates {
                let old = retention_ms >= 0 && c.max_timestamp.is_none_or(|t| t < NOW - retention_ms);
                let big = retention_bytes >= 0 && left - c.size >= retention_bytes as u64;
                if !(old || big) { break; }
                left -= c.size;
                expected = Some(c.end_offset);
            }
            prop_assert_eq!(retention_cut(candidates, total, policy, NOW), expected);
        }
    }

    fn span(base_offset: u64, next_offset: u64, max_timestamp: Option<i64>) -> SegmentSpan {
        SegmentSpan {
            base_offset,
            next_offset,
            max_timestamp,
            tier: Tier::Local,
        }
    }

    #[test]
    fn holds_floor_at_their_lowest_kept_offset() {
        let map = SegmentMap::new(
            &[
                span(0, 10, Some(100)),
                span(10, 20, None),
                span(20, 30, Some(300)),
            ],
            0,
            &[],
        );
        let map = || map.clone();
        assert_eq!(hold_floor(&[], map), None);
        assert_eq!(hold_floor(&[HeldFrom::Offset(15)], map), Some(15));
        assert_eq!(hold_floor(&[HeldFrom::Time(100)], map), Some(0));
        // The middle segment has no timestamp: it holds no record a time hold keeps.
        assert_eq!(hold_floor(&[HeldFrom::Time(101)], map), Some(20));
        assert_eq!(hold_floor(&[HeldFrom::Time(301)], map), None);
        let both = [HeldFrom::Time(200), HeldFrom::Offset(12)];
        assert_eq!(hold_floor(&both, map), Some(12));
    }
}

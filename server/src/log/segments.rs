//! The segment map: a partition's local and remote segments in one ordered map, so every reader
//! finds the segment holding an offset (or a timestamp) by one floor search instead of asking
//! "is this below the local start?" in each read path. Local segments win where both tiers hold
//! an offset: the local copy is the one the writer still owns (and reads from it are zero-copy).

use std::collections::BTreeMap;

/// Which tier holds a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// On this node's disk.
    Local,
    /// Only in the object store.
    Remote,
}

/// The readable offsets of one segment and the newest record time in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSpan {
    /// The first readable offset (a segment's base, or the log start inside it).
    pub base_offset: u64,
    /// The offset after the segment's last batch.
    pub next_offset: u64,
    /// The largest record timestamp, `None` when the segment holds no records yet.
    pub max_timestamp: Option<i64>,
    /// Where the segment lives.
    pub tier: Tier,
}

/// Every readable segment of a partition, ordered by offset, at most one per offset.
#[derive(Debug, Clone, Default)]
pub struct SegmentMap {
    spans: BTreeMap<u64, SegmentSpan>,
}

impl SegmentMap {
    /// The map of `local` segments (readable from `local_start`) over `remote` ones: remote
    /// segments count only below the local start, cut to end there.
    pub fn new(local: &[SegmentSpan], local_start: u64, remote: &[SegmentSpan]) -> Self {
        let mut spans = BTreeMap::new();
        for span in remote.iter().filter(|s| s.base_offset < local_start) {
            let next_offset = span.next_offset.min(local_start);
            if next_offset > span.base_offset {
                let span = SegmentSpan {
                    next_offset,
                    tier: Tier::Remote,
                    ..*span
                };
                spans.insert(span.base_offset, span);
            }
        }
        for span in local.iter().filter(|s| s.next_offset > local_start) {
            let span = SegmentSpan {
                base_offset: span.base_offset.max(local_start),
                tier: Tier::Local,
                ..*span
            };
            spans.insert(span.base_offset, span);
        }
        Self { spans }
    }

    /// The first readable offset, `None` when no segment holds records.
    pub fn start_offset(&self) -> Option<u64> {
        self.spans
            .values()
            .find(|s| s.next_offset > s.base_offset)
            .map(|s| s.base_offset)
    }

    /// The segment holding `offset`, or when `offset` falls in a gap (records removed by
    /// compaction or a bucket that ends below the local start), the first one after it.
    pub fn locate(&self, offset: u64) -> Option<&SegmentSpan> {
        let floor = self
            .spans
            .range(..=offset)
            .next_back()
            .map(|(_, span)| span)
            .filter(|span| offset < span.next_offset);
        floor.or_else(|| {
            self.spans
                .range(offset..)
                .map(|(_, span)| span)
                .find(|span| span.next_offset > span.base_offset)
        })
    }

    /// The first segment that may hold a record at or after `timestamp`.
    pub fn locate_time(&self, timestamp: i64) -> Option<&SegmentSpan> {
        self.spans
            .values()
            .find(|s| s.max_timestamp.is_some_and(|max| max >= timestamp))
    }

    /// The largest record timestamp of the readable segments.
    pub fn max_timestamp(&self) -> Option<i64> {
        self.spans.values().filter_map(|s| s.max_timestamp).max()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn span(base: u64, next: u64, max_ts: Option<i64>, tier: Tier) -> SegmentSpan {
        SegmentSpan {
            base_offset: base,
            next_offset: next,
            max_timestamp: max_ts,
            tier,
        }
    }

    #[test]
    fn local_wins_where_the_tiers_overlap_and_remote_serves_below() {
        let remote = [
            span(0, 10, Some(5), Tier::Remote),
            span(10, 20, Some(15), Tier::Remote),
        ];
        let local = [
            span(10, 20, Some(15), Tier::Local),
            span(20, 25, Some(22), Tier::Local),
        ];
        let map = SegmentMap::new(&local, 14, &remote);
        assert_eq!(map.start_offset(), Some(0));
        assert_eq!(map.locate(3).map(|s| s.tier), Some(Tier::Remote));
        assert_eq!(map.locate(12).map(|s| s.tier), Some(Tier::Remote));
        let local_hit = map.locate(14).copied();
        assert_eq!(local_hit, Some(span(14, 20, Some(15), Tier::Local)));
        assert_eq!(map.locate(24).map(|s| s.base_offset), Some(20));
        assert_eq!(map.locate(25), None);
        assert_eq!(map.max_timestamp(), Some(22));
    }

    #[test]
    fn a_gap_between_the_tiers_leads_to_the_next_segment() {
        let remote = [span(0, 10, Some(5), Tier::Remote)];
        let local = [span(30, 40, Some(35), Tier::Local)];
        let map = SegmentMap::new(&local, 30, &remote);
        assert_eq!(map.locate(15).map(|s| s.base_offset), Some(30));
        assert_eq!(map.locate_time(6).map(|s| s.tier), Some(Tier::Local));
        assert_eq!(map.locate_time(5).map(|s| s.tier), Some(Tier::Remote));
        assert_eq!(map.locate_time(36), None);
    }

    #[test]
    fn an_empty_active_segment_is_not_a_start() {
        let local = [span(7, 7, None, Tier::Local)];
        let map = SegmentMap::new(&local, 7, &[]);
        assert_eq!(map.start_offset(), None);
        assert_eq!(map.locate(7), None);
        assert_eq!(map.max_timestamp(), None);
    }

    proptest! {
        /// Against a brute-force model: for tiers that overlap anywhere (the bucket may still
        /// hold segments the local log also holds) and any local start inside the overlap, the
        /// located segment holds the offset and comes from the right tier, for every offset.
        #[test]
        fn locate_agrees_with_a_linear_scan(
            sizes in proptest::collection::vec(1u64..20, 1..12),
            a in 0usize..12,
            b in 0usize..12,
            cut in 0u64..400,
        ) {
            let mut bounds = vec![0u64];
            for size in &sizes {
                bounds.push(bounds[bounds.len() - 1] + size);
            }
            let end = bounds[bounds.len() - 1];
            let remote_split = a.max(b).min(sizes.len());
            let local_split = a.min(b).min(sizes.len());
            let overlap = bounds[remote_split] - bounds[local_split];
            let local_start = bounds[local_split] + cut % (overlap + 1);
            let remote: Vec<_> = (0..remote_split)
                .map(|i| span(bounds[i], bounds[i + 1], Some(bounds[i] as i64), Tier::Remote))
                .collect();
            let local: Vec<_> = (local_split..sizes.len())
                .map(|i| span(bounds[i], bounds[i + 1], Some(bounds[i] as i64), Tier::Local))
                .collect();
            let map = SegmentMap::new(&local, local_start, &remote);
            prop_assert_eq!(map.start_offset(), Some(0));
            for offset in 0..end {
                let Some(found) = map.locate(offset) else {
                    return Err(TestCaseError::fail(format!("offset {offset} not found")));
                };
                prop_assert!(found.base_offset <= offset && offset < found.next_offset);
                let expected = if offset < local_start { Tier::Remote } else { Tier::Local };
                prop_assert_eq!(found.tier, expected);
            }
            prop_assert_eq!(map.locate(end), None);
        }
    }
}

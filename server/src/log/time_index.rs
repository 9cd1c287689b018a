//! The sparse time index of one segment: `(max timestamp so far, relative offset)` pairs.
//!
//! On disk each entry is 12 bytes, big-endian: `i64` largest record timestamp seen in the segment
//! up to and including the batch, `u32` base offset of that batch relative to the segment base.
//! Entries are added next to offset-index entries, and only when the running maximum grows, so
//! both fields strictly increase. Because the timestamp is a running maximum, every record at or
//! before an entry's offset is no newer than the entry's timestamp: a search for the first record
//! with timestamp `>= T` may start at the last entry whose timestamp is `< T`.

use super::offset_index::IndexError;

/// Size of one on-disk entry.
pub const TIME_INDEX_ENTRY_LEN: usize = 12;

/// One time-index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeIndexEntry {
    /// Largest record timestamp in the segment up to this batch (ms since the epoch).
    pub timestamp: i64,
    /// Base offset of the batch, relative to the segment's base offset.
    pub relative_offset: u32,
}

/// The in-memory copy of a segment's time index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<TimeIndexEntry>,
}

impl TimeIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a time-index file and checks that entries strictly increase.
    ///
    /// # Errors
    /// [`IndexError`] when the bytes are torn or out of order.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, IndexError> {
        if !bytes.len().is_multiple_of(TIME_INDEX_ENTRY_LEN) {
            return Err(IndexError::TornEntry {
                len: bytes.len(),
                entry_len: TIME_INDEX_ENTRY_LEN,
            });
        }
        let mut index = Self::new();
        for (i, chunk) in bytes.chunks_exact(TIME_INDEX_ENTRY_LEN).enumerate() {
            let mut timestamp = [0u8; 8];
            timestamp.copy_from_slice(&chunk[..8]);
            let entry = TimeIndexEntry {
                timestamp: i64::from_be_bytes(timestamp),
                relative_offset: u32::from_be_bytes([chunk[8], chunk[9], chunk[10], chunk[11]]),
            };
            if !index.push(entry) {
                return Err(IndexError::NotIncreasing { index: i });
            }
        }
        Ok(index)
    }

    /// Appends an entry if both fields grow; returns whether it did.
    pub fn push(&mut self, entry: TimeIndexEntry) -> bool {
        if let Some(last) = self.entries.last()
            && (entry.timestamp <= last.timestamp || entry.relative_offset <= last.relative_offset)
        {
            return false;
        }
        self.entries.push(entry);
        true
    }

    /// The last entry whose timestamp is strictly below `timestamp`: records up to its offset are
    /// all older than `timestamp`, so a search can start there. `None` means "start at the
    /// segment's first batch".
    pub fn last_before(&self, timestamp: i64) -> Option<TimeIndexEntry> {
        let after = self.entries.partition_point(|e| e.timestamp < timestamp);
        after
            .checked_sub(1)
            .and_then(|i| self.entries.get(i))
            .copied()
    }

    /// The last entry, if any.
    pub fn last(&self) -> Option<TimeIndexEntry> {
        self.entries.last().copied()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the index has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// All entries, in order.
    pub fn entries(&self) -> &[TimeIndexEntry] {
        &self.entries
    }

    /// The on-disk bytes of entries `from..`.
    pub fn encode_from(&self, from: usize) -> Vec<u8> {
        let tail = self.entries.get(from..).unwrap_or(&[]);
        let mut out = Vec::with_capacity(tail.len() * TIME_INDEX_ENTRY_LEN);
        for entry in tail {
            out.extend_from_slice(&entry.timestamp.to_be_bytes());
            out.extend_from_slice(&entry.relative_offset.to_be_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn build(steps: &[(i64, u32)]) -> TimeIndex {
        let mut index = TimeIndex::new();
        let (mut timestamp, mut offset) = (1_000_000i64, 0u32);
        for &(d_ts, d_off) in steps {
            timestamp += d_ts + 1;
            offset += d_off + 1;
            assert!(index.push(TimeIndexEntry {
                timestamp,
                relative_offset: offset
            }));
        }
        index
    }

    proptest! {
        #[test]
        fn last_before_equals_linear_scan(
            steps in proptest::collection::vec((0i64..1000, 0u32..100), 0..200),
            probe in 999_000i64..1_300_000,
        ) {
            let index = build(&steps);
            let oracle = index.entries().iter().rev().find(|e| e.timestamp < probe).copied();
            prop_assert_eq!(index.last_before(probe), oracle);
        }

        #[test]
        fn bytes_round_trip(steps in proptest::collection::vec((0i64..1000, 0u32..100), 0..100)) {
            let index = build(&steps);
            prop_assert_eq!(TimeIndex::from_bytes(&index.encode_from(0)).unwrap(), index);
        }
    }

    #[test]
    fn entries_that_do_not_grow_are_refused() {
        let mut index = TimeIndex::new();
        assert!(index.push(TimeIndexEntry {
            timestamp: 10,
            relative_offset: 1
        }));
        assert!(!index.push(TimeIndexEntry {
            timestamp: 10,
            relative_offset: 2
        }));
        assert!(!index.push(TimeIndexEntry {
            timestamp: 11,
            relative_offset: 1
        }));
        assert!(TimeIndex::from_bytes(&[0; 13]).is_err());
    }
}

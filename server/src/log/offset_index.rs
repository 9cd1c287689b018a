//! The sparse offset index of one segment: `(relative offset, byte position)` pairs.
//!
//! On disk each entry is 8 bytes, big-endian: `u32` offset relative to the segment's base offset,
//! `u32` byte position of the batch in the `.log` file. One entry is added per
//! `index_interval_bytes` of log data, so a lookup lands at most one interval before the batch it
//! wants and the reader walks batch headers from there. Entries are strictly increasing in both
//! fields; [`OffsetIndex::from_bytes`] refuses a file that breaks that, so recovery rebuilds it.

use thiserror::Error;

/// Size of one on-disk entry.
pub const OFFSET_INDEX_ENTRY_LEN: usize = 8;

/// One index entry: the batch starting at `position` has base offset `segment base + relative_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetIndexEntry {
    /// Offset relative to the segment's base offset.
    pub relative_offset: u32,
    /// Byte position of the batch inside the segment's `.log` file.
    pub position: u32,
}

/// Why an index file cannot be trusted.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum IndexError {
    /// The file size is not a whole number of entries (a torn write).
    #[error("index length {len} is not a multiple of the {entry_len}-byte entry size")]
    TornEntry {
        /// File length in bytes.
        len: usize,
        /// Entry size in bytes.
        entry_len: usize,
    },
    /// An entry does not move forward.
    #[error("index entry {index} does not increase over the previous entry")]
    NotIncreasing {
        /// Position of the offending entry in the file, counted in entries.
        index: usize,
    },
}

/// The in-memory copy of a segment's offset index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<OffsetIndexEntry>,
}

impl OffsetIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses an index file and checks that entries strictly increase.
    ///
    /// # Errors
    /// [`IndexError`] when the bytes are torn or out of order.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, IndexError> {
        if !bytes.len().is_multiple_of(OFFSET_INDEX_ENTRY_LEN) {
            return Err(IndexError::TornEntry {
                len: bytes.len(),
                entry_len: OFFSET_INDEX_ENTRY_LEN,
            });
        }
        let mut index = Self::new();
        for (i, chunk) in bytes.chunks_exact(OFFSET_INDEX_ENTRY_LEN).enumerate() {
            let entry = OffsetIndexEntry {
                relative_offset: u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]),
                position: u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]),
            };
            if !index.push(entry) {
                return Err(IndexError::NotIncreasing { index: i });
            }
        }
        Ok(index)
    }

    /// Appends an entry if it moves forward in both offset and position; returns whether it did.
    pub fn push(&mut self, entry: OffsetIndexEntry) -> bool {
        if let Some(last) = self.entries.last()
            && (entry.relative_offset <= last.relative_offset || entry.position <= last.position)
        {
            return false;
        }
        self.entries.push(entry);
        true
    }

    /// The entry with the largest relative offset `<= relative_offset`: where a reader looking for
    /// that offset starts walking batch headers. `None` means "start at position 0".
    pub fn lookup(&self, relative_offset: u32) -> Option<OffsetIndexEntry> {
        let after = self
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        after
            .checked_sub(1)
            .and_then(|i| self.entries.get(i))
            .copied()
    }

    /// The last entry, if any.
    pub fn last(&self) -> Option<OffsetIndexEntry> {
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
    pub fn entries(&self) -> &[OffsetIndexEntry] {
        &self.entries
    }

    /// The on-disk bytes of entries `from..`.
    pub fn encode_from(&self, from: usize) -> Vec<u8> {
        let tail = self.entries.get(from..).unwrap_or(&[]);
        let mut out = Vec::with_capacity(tail.len() * OFFSET_INDEX_ENTRY_LEN);
        for entry in tail {
            out.extend_from_slice(&entry.relative_offset.to_be_bytes());
            out.extend_from_slice(&entry.position.to_be_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn build(steps: &[(u32, u32)]) -> OffsetIndex {
        let mut index = OffsetIndex::new();
        let (mut offset, mut position) = (0u32, 0u32);
        for &(d_off, d_pos) in steps {
            offset += d_off + 1;
            position += d_pos + 1;
            assert!(index.push(OffsetIndexEntry {
                relative_offset: offset,
                position
            }));
        }
        index
    }

    proptest! {
        #[test]
        fn lookup_equals_linear_scan(
            steps in proptest::collection::vec((0u32..50, 0u32..5000), 0..200),
            probe in 0u32..12_000,
        ) {
            let index = build(&steps);
            let oracle = index.entries().iter().rev().find(|e| e.relative_offset <= probe).copied();
            prop_assert_eq!(index.lookup(probe), oracle);
        }

        #[test]
        fn bytes_round_trip(steps in proptest::collection::vec((0u32..50, 0u32..5000), 0..100)) {
            let index = build(&steps);
            let bytes = index.encode_from(0);
            prop_assert_eq!(OffsetIndex::from_bytes(&bytes).unwrap(), index);
        }
    }

    #[test]
    fn torn_and_unordered_files_are_rejected() {
        assert_eq!(
            OffsetIndex::from_bytes(&[0; 12]),
            Err(IndexError::TornEntry {
                len: 12,
                entry_len: 8
            })
        );
        let mut bytes = build(&[(1, 10), (1, 10)]).encode_from(0);
        bytes.extend_from_slice(&build(&[(1, 10)]).encode_from(0));
        assert_eq!(
            OffsetIndex::from_bytes(&bytes),
            Err(IndexError::NotIncreasing { index: 2 })
        );
    }

    #[test]
    fn push_refuses_entries_that_do_not_advance() {
        let mut index = OffsetIndex::new();
        assert!(index.push(OffsetIndexEntry {
            relative_offset: 5,
            position: 100
        }));
        assert!(!index.push(OffsetIndexEntry {
            relative_offset: 5,
            position: 200
        }));
        assert!(!index.push(OffsetIndexEntry {
            relative_offset: 6,
            position: 100
        }));
        assert_eq!(index.len(), 1);
        assert_eq!(index.encode_from(1), Vec::<u8>::new());
    }
}

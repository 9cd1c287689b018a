//! One segment: a `.log` file of whole record batches plus its `.index` and `.timeindex`.
//!
//! The log file is memory-mapped read-only once (the active segment at its maximum size), so
//! readers slice record bytes out of the page cache without copying them. Only the partition's
//! writer task changes a segment; it publishes progress through [`SegmentState`] under a lock,
//! and readers never look past `durable_size`, the end of the bytes that are on disk for sure.
//! Index entries are written to their files without fsync on every round (recovery rebuilds them
//! when a crash tears them) and fsynced when the segment is closed.

use std::ops::Range;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use parking_lot::RwLock;

use super::batch::BatchError;
pub use super::batch::batch_offsets;
use super::read::{Choice, ChoiceError, OffsetBounds, choose_batches};
use super::read_ahead::ReadAhead;
use super::scan::{Resync, next_sound_batch};
pub use super::segment_state::{AppendedBatch, SegmentState};
use crate::io::{Io, IoError, IoFile, MappedFile, OpenMode};

/// Extension of the record data file.
pub const LOG_SUFFIX: &str = "log";
/// Extension of the offset index file.
pub const INDEX_SUFFIX: &str = "index";
/// Extension of the time index file.
pub const TIME_INDEX_SUFFIX: &str = "timeindex";

/// `{base_offset:020}.{suffix}`: zero padding makes a directory listing sort in offset order.
pub fn segment_file_name(base_offset: u64, suffix: &str) -> String {
    format!("{base_offset:020}.{suffix}")
}

/// The base offset encoded in a segment file name, if `name` is one with the given suffix.
pub fn parse_segment_file_name(name: &str, suffix: &str) -> Option<u64> {
    let stem = name.strip_suffix(suffix)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Why a read inside a segment failed.
#[derive(Debug, thiserror::Error)]
pub enum SegmentReadError {
    /// A batch header inside the durable range does not parse; the file changed under us or the
    /// disk returned garbage.
    #[error("segment {path} is corrupt at position {position}: {source}")]
    Corrupt {
        /// The `.log` file.
        path: PathBuf,
        /// Byte position of the bad header.
        position: u64,
        /// What the decoder found.
        #[source]
        source: BatchError,
    },
    /// The batches where a read must start do not parse or claim inconsistent offsets.
    #[error("segment {path} cannot be read from position {position}: {source}")]
    Unreadable {
        /// The `.log` file.
        path: PathBuf,
        /// Byte position the walk started at.
        position: u64,
        /// What the batch choice found.
        #[source]
        source: ChoiceError,
    },
}

/// A byte range of whole batches chosen for a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRange {
    /// Byte range in the log file.
    pub bytes: Range<u64>,
    /// Base offset of the first batch (may be below the requested offset).
    pub first_offset: u64,
    /// Offset after the last batch in the range.
    pub next_offset: u64,
}

/// An open segment.
#[derive(Debug)]
pub struct Segment {
    base_offset: u64,
    dir: PathBuf,
    log: IoFile,
    index_file: IoFile,
    time_index_file: IoFile,
    map: MappedFile,
    state: RwLock<SegmentState>,
    read_ahead: parking_lot::Mutex<ReadAhead>,
}

impl Segment {
    /// Creates the three files of a new, empty segment and maps `map_len` bytes of the log.
    ///
    /// # Errors
    /// Any I/O error, including an existing file with the same name.
    pub async fn create(
        io: &Io,
        dir: &Path,
        base_offset: u64,
        map_len: usize,
    ) -> Result<Segment, IoError> {
        let log = io
            .open(
                &dir.join(segment_file_name(base_offset, LOG_SUFFIX)),
                OpenMode::CreateNew,
            )
            .await?;
        let index_path = dir.join(segment_file_name(base_offset, INDEX_SUFFIX));
        let index_file = io.open(&index_path, OpenMode::CreateOrOpen).await?;
        io.set_len(&index_file, 0).await?;
        let time_path = dir.join(segment_file_name(base_offset, TIME_INDEX_SUFFIX));
        let time_index_file = io.open(&time_path, OpenMode::CreateOrOpen).await?;
        io.set_len(&time_index_file, 0).await?;
        let state = SegmentState {
            next_offset: base_offset,
            ..SegmentState::default()
        };
        Self::from_parts(
            dir,
            base_offset,
            [log, index_file, time_index_file],
            map_len,
            state,
        )
    }

    /// Assembles a segment from already opened files (used by recovery).
    ///
    /// # Errors
    /// When the log cannot be mapped.
    pub fn from_parts(
        dir: &Path,
        base_offset: u64,
        [log, index_file, time_index_file]: [IoFile; 3],
        map_len: usize,
        state: SegmentState,
    ) -> Result<Segment, IoError> {
        let map = MappedFile::map(&log, map_len)?;
        Ok(Segment {
            base_offset,
            dir: dir.to_path_buf(),
            log,
            index_file,
            time_index_file,
            map,
            state: RwLock::new(state),
            read_ahead: parking_lot::Mutex::new(ReadAhead::default()),
        })
    }

    /// The offset of the segment's first batch, also its name.
    pub fn base_offset(&self) -> u64 {
        self.base_offset
    }

    /// The open `.log` file.
    pub fn log_file(&self) -> &IoFile {
        &self.log
    }

    /// Paths of the segment's three files.
    pub fn paths(&self) -> [PathBuf; 3] {
        [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX]
            .map(|suffix| self.dir.join(segment_file_name(self.base_offset, suffix)))
    }

    /// A copy of the fields readers need most, taken under the lock.
    pub fn snapshot(&self) -> SegmentSnapshot {
        let state = self.state.read();
        SegmentSnapshot {
            base_offset: self.base_offset,
            durable_size: state.durable_size,
            next_offset: state.next_offset,
            max_timestamp: state.max_timestamp,
            roll_basis_ms: state.roll_basis_ms,
        }
    }

    /// Runs `f` with the state under the read lock.
    pub fn with_state<T>(&self, f: impl FnOnce(&SegmentState) -> T) -> T {
        f(&self.state.read())
    }

    /// Makes appended batches visible: indexes them and advances the durable size. Called by the
    /// writer only after the bytes are on disk, so readers never see what a crash could take back.
    pub fn publish(&self, batches: &[AppendedBatch], index_interval_bytes: u64, now_ms: i64) {
        let mut state = self.state.write();
        for batch in batches {
            state.add_batch(self.base_offset, batch, index_interval_bytes, now_ms);
        }
    }

    /// Writes index entries not yet in the index files (no fsync: recovery can rebuild them).
    ///
    /// # Errors
    /// Any I/O error; the in-memory index stays authoritative.
    pub async fn persist_indexes(&self, io: &Io) -> Result<(), IoError> {
        let (index_bytes, index_at, time_bytes, time_at, counts) = {
            let state = self.state.read();
            (
                state.index.encode_from(state.index_persisted),
                state.index_persisted * super::offset_index::OFFSET_INDEX_ENTRY_LEN,
                state.time_index.encode_from(state.time_index_persisted),
                state.time_index_persisted * super::time_index::TIME_INDEX_ENTRY_LEN,
                (state.index.len(), state.time_index.len()),
            )
        };
        if !index_bytes.is_empty() {
            io.write_at(
                &self.index_file,
                index_at as u64,
                vec![Bytes::from(index_bytes)],
            )
            .await?;
        }
        if !time_bytes.is_empty() {
            io.write_at(
                &self.time_index_file,
                time_at as u64,
                vec![Bytes::from(time_bytes)],
            )
            .await?;
        }
        let mut state = self.state.write();
        state.index_persisted = counts.0;
        state.time_index_persisted = counts.1;
        Ok(())
    }

    /// Persists and fsyncs the indexes and the log: called when the segment is closed.
    ///
    /// # Errors
    /// Any I/O error.
    pub async fn sync_all(&self, io: &Io) -> Result<(), IoError> {
        self.persist_indexes(io).await?;
        io.sync_data(&self.index_file).await?;
        io.sync_data(&self.time_index_file).await?;
        io.sync_data(&self.log).await
    }

    /// Finds the whole batches to return for a read starting at `offset`: the batch that holds
    /// `offset` (or the first one after it, when compaction left a gap) and the batches after it
    /// while they fit in `max_bytes` (always at least one) and start below `high_watermark`;
    /// every offset is below `upper` (the next segment's base, or the high watermark);
    /// `contiguous`: the partition never held compacted segments, so offsets have no gaps;
    /// `closed`: a later segment exists, so (when contiguous) this one ends right before
    /// `upper`. `None`
    /// when the segment has nothing at or after `offset`. The choice is [`choose_batches`].
    ///
    /// # Errors
    /// A header inside the durable range that does not parse, or a batch with inconsistent
    /// offsets where the read must start.
    pub fn locate(
        &self,
        offset: u64,
        max_bytes: u64,
        high_watermark: u64,
        upper: u64,
        contiguous: bool,
        closed: bool,
    ) -> Result<Option<BatchRange>, SegmentReadError> {
        let (entry, durable) = {
            let state = self.state.read();
            let relative =
                u32::try_from(offset.saturating_sub(self.base_offset)).unwrap_or(u32::MAX);
            (state.index.lookup(relative), state.durable_size)
        };
        let bounds_from = |anchor: Option<u64>| OffsetBounds {
            anchor,
            lower: self.base_offset,
            upper,
            high_watermark,
            contiguous,
        };
        let from_entry = entry.map(|e| {
            (
                u64::from(e.position),
                bounds_from(Some(self.base_offset + u64::from(e.relative_offset))),
            )
        });
        let mut attempt = from_entry.unwrap_or((0, bounds_from(None)));
        loop {
            let (start, bounds) = attempt;
            let Some(window) = self.map.as_slice().get(start as usize..durable as usize) else {
                return Ok(None);
            };
            match choose_batches(window, offset, max_bytes, bounds, true) {
                Ok(Choice::Found {
                    bytes,
                    first_offset,
                    next_offset,
                }) => {
                    return Ok(Some(BatchRange {
                        bytes: start + bytes.start as u64..start + bytes.end as u64,
                        first_offset,
                        next_offset,
                    }));
                }
                Ok(Choice::Nothing | Choice::Skip { .. } | Choice::Grow) => return Ok(None),
                Err(ChoiceError::IndexMismatch { expected, found }) if start > 0 => {
                    tracing::warn!(path = %self.log.path().display(), expected, found,
                        "offset index entry disagrees with the log; reading from the start");
                    attempt = (0, bounds_from(None));
                }
                // Damage that recovery has not seen (a closed segment is not rescanned): find
                // the next sound batch as recovery would, and read on from there if the
                // offset lies beyond the damage.
                Err(
                    error @ ChoiceError::BadHeader {
                        expected_offset,
                        search_from,
                        ..
                    },
                ) => {
                    let resync = Resync {
                        damaged: start + search_from as u64,
                        expected: expected_offset,
                        max_end_position: durable,
                        upper: upper.min(high_watermark),
                        contiguous,
                        end_offset: (closed && contiguous).then_some(upper),
                    };
                    match next_sound_batch(&self.map.slice(0..durable as usize), resync) {
                        Some((next, base)) if base <= offset => {
                            attempt = (next, bounds_from(Some(base)));
                        }
                        _ => return Err(self.corrupt(start, error)),
                    }
                }
                Err(error) => return Err(self.corrupt(start, error)),
            }
        }
    }

    /// The mapped bytes of `range` without copying, if the pages are in memory.
    pub fn resident_slice(&self, range: &Range<u64>) -> Option<Bytes> {
        let range = range.start as usize..range.end as usize;
        self.map
            .is_resident(range.clone())
            .then(|| self.map.slice(range))
    }

    /// Asks the kernel to start reading the bytes a catch-up reader of `range` needs next, unless
    /// an earlier read already did (`read_ahead`). Returns at once; the reads run in the
    /// background.
    pub fn read_ahead(&self, io: &Io, range: &Range<u64>) {
        let durable = self.state.read().durable_size;
        let planned = self.read_ahead.lock().plan(range, durable);
        if let Some(ahead) = planned {
            io.read_ahead(&self.log, ahead.start, ahead.end - ahead.start);
        }
    }

    /// Mapped bytes of the whole durable log, for scans that only look at headers.
    pub fn durable_bytes(&self) -> Bytes {
        let durable = self.state.read().durable_size;
        self.map.slice(0..durable as usize)
    }

    fn corrupt(&self, start: u64, source: ChoiceError) -> SegmentReadError {
        SegmentReadError::Unreadable {
            path: self.log.path().to_path_buf(),
            position: start,
            source,
        }
    }
}

/// Plain-data view of a segment's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSnapshot {
    /// The segment's base offset.
    pub base_offset: u64,
    /// Durable bytes in the log file.
    pub durable_size: u64,
    /// Offset after the last durable batch.
    pub next_offset: u64,
    /// Largest durable record timestamp.
    pub max_timestamp: Option<i64>,
    /// Time the segment's age counts from.
    pub roll_basis_ms: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_sort_by_offset_and_parse_back() {
        let name = segment_file_name(42, LOG_SUFFIX);
        assert_eq!(name, "00000000000000000042.log");
        assert_eq!(parse_segment_file_name(&name, LOG_SUFFIX), Some(42));
        assert_eq!(parse_segment_file_name(&name, INDEX_SUFFIX), None);
        assert_eq!(parse_segment_file_name("42.log", LOG_SUFFIX), None);
        assert_eq!(
            parse_segment_file_name("0000000000000000004x.log", LOG_SUFFIX),
            None
        );
        assert!(segment_file_name(9, LOG_SUFFIX) < segment_file_name(10, LOG_SUFFIX));
    }
}

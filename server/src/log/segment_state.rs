//! What a segment's writer publishes to its readers: how many bytes and offsets are durable,
//! the newest timestamp, and the in-memory indexes, plus writing those indexes out. Its own
//! module so that recovery, the scanner and compaction can build a segment's state without
//! importing the segment (which imports them).

use bytes::Bytes;

use super::offset_index::{OffsetIndex, OffsetIndexEntry};
use super::time_index::{TimeIndex, TimeIndexEntry};
use crate::io::{Io, IoError, IoFile};

/// Where a batch landed, as the writer reports it after the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendedBatch {
    /// Byte position in the log file.
    pub position: u64,
    /// Length in bytes.
    pub len: u64,
    /// Broker-assigned base offset.
    pub base_offset: u64,
    /// Offset of the batch's last record.
    pub last_offset: u64,
    /// Largest record timestamp in the batch.
    pub max_timestamp: i64,
}

/// Progress of a segment that readers may rely on.
#[derive(Debug, Clone, Default)]
pub struct SegmentState {
    /// Bytes of the log file that are durable and readable; nothing past it is ever served.
    pub durable_size: u64,
    /// The offset after the last durable batch (the base offset while the segment is empty).
    pub next_offset: u64,
    /// Largest durable record timestamp, `None` while empty.
    pub max_timestamp: Option<i64>,
    /// Time the segment's age is counted from for `segment_ms` rolls (ms since the epoch).
    pub roll_basis_ms: Option<i64>,
    /// In-memory offset index.
    pub index: OffsetIndex,
    /// In-memory time index.
    pub time_index: TimeIndex,
    /// Log bytes appended since the last index entry.
    pub bytes_since_index: u64,
    /// Entries of `index` already written to the `.index` file.
    pub index_persisted: usize,
    /// Entries of `time_index` already written to the `.timeindex` file.
    pub time_index_persisted: usize,
}

impl SegmentState {
    /// Accounts for one more batch at the end of the segment, adding index entries every
    /// `index_interval_bytes`. Index entries use the batch's base offset, so a lookup never lands
    /// past the batch that holds the wanted offset. `roll_basis_ms` is used when the segment had no
    /// age yet.
    ///
    /// # Panics
    /// When the batch is not contiguous with the previous one or its relative offset or position
    /// do not fit `u32`: the writer and recovery check these limits first.
    pub fn add_batch(
        &mut self,
        segment_base: u64,
        batch: &AppendedBatch,
        index_interval_bytes: u64,
        roll_basis_ms: i64,
    ) {
        assert!(
            batch.position == self.durable_size,
            "invariant: batches are contiguous"
        );
        assert!(
            batch.base_offset >= self.next_offset,
            "invariant: offsets increase"
        );
        let relative = u32::try_from(batch.base_offset - segment_base)
            .expect("invariant: writer rolls before relative offsets overflow u32");
        let position =
            u32::try_from(batch.position).expect("invariant: segments are smaller than 4 GiB");
        let max_so_far = self
            .max_timestamp
            .map_or(batch.max_timestamp, |m| m.max(batch.max_timestamp));
        if self.bytes_since_index >= index_interval_bytes && batch.position > 0 {
            self.index.push(OffsetIndexEntry {
                relative_offset: relative,
                position,
            });
            self.time_index.push(TimeIndexEntry {
                timestamp: max_so_far,
                relative_offset: relative,
            });
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += batch.len;
        self.durable_size = batch.position + batch.len;
        self.next_offset = batch.last_offset + 1;
        self.max_timestamp = Some(max_so_far);
        self.roll_basis_ms.get_or_insert(roll_basis_ms);
    }
}

impl SegmentState {
    /// Accounts for a quarantined byte range at the end of the segment (see `scan.rs`): its
    /// bytes count as durable so later batches keep their positions, its offsets up to
    /// `end_offset` stay taken, and the next batch gets an index entry, so that a lookup of an
    /// offset after the damage starts after it.
    ///
    /// # Panics
    /// When the range does not start at the end of the segment.
    pub fn add_damage(
        &mut self,
        position: u64,
        len: u64,
        end_offset: u64,
        index_interval_bytes: u64,
    ) {
        assert!(
            position == self.durable_size,
            "invariant: damage is accounted in file order"
        );
        self.durable_size = position + len;
        self.next_offset = self.next_offset.max(end_offset);
        self.bytes_since_index = self.bytes_since_index.max(index_interval_bytes);
    }
}

/// Replaces both index files with the in-memory indexes of `state`, fsynced.
pub async fn rewrite_indexes(
    io: &Io,
    index_file: &IoFile,
    time_file: &IoFile,
    state: &mut SegmentState,
) -> Result<(), IoError> {
    for (file, bytes) in [
        (index_file, state.index.encode_from(0)),
        (time_file, state.time_index.encode_from(0)),
    ] {
        io.set_len(file, 0).await?;
        if !bytes.is_empty() {
            io.write_at(file, 0, vec![Bytes::from(bytes)]).await?;
        }
        io.sync_data(file).await?;
    }
    state.index_persisted = state.index.len();
    state.time_index_persisted = state.time_index.len();
    Ok(())
}

//! The cleaner's data path: which records survive, which segments merge, and writing the new
//! segment files. Nothing here touches the live segment map; the swap does that.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::CompactionError;
use super::swap::cleaned_paths;
use super::throttle::Throttle;
use crate::io::{Io, OpenMode};
use crate::log::batch::{Record, RecordBatch};
use crate::log::segment::{AppendedBatch, Segment, SegmentReadError, SegmentState, batch_offsets};
use crate::log::segment_state::rewrite_indexes;

/// Bytes the cleaner hands to one write call.
const WRITE_CHUNK_BYTES: usize = 1 << 20;
/// Written bytes between two flushes of the new log: one flush of a whole 1 GiB segment would
/// queue seconds of writeback in front of every append's fsync.
const SYNC_EVERY_BYTES: u64 = 16 << 20;
/// Input decoded between two yields to the runtime (well under a millisecond of work).
const YIELD_EVERY_BYTES: usize = 256 << 10;

/// Decides record by record what a pass keeps: the latest record of each key, and a tombstone
/// only while it is younger than the tombstone horizon.
#[derive(Debug, Default)]
pub struct Retention {
    latest: HashMap<Bytes, u64>,
    tombstone_horizon: u64,
}

/// What a pass would do to one group of segments.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GroupTally {
    /// Records the pass removes.
    pub dropped: u64,
    /// Of those, tombstones.
    pub tombstones_dropped: u64,
    /// Tombstones the pass keeps.
    pub tombstones_kept: u64,
}

impl Retention {
    /// Builds the latest-offset map over the dirty part of `segments` (every cleanable segment,
    /// oldest first; dirty = holding offsets at or after `clean_offset`), stopping before a
    /// segment once the map holds `max_keys` keys, after at least one dirty segment. Returns the
    /// map and how many leading segments of `segments` it covers: the pass may clean only those.
    ///
    /// The clean part needs no mapping: an earlier pass left at most one record per key there,
    /// so a record in it goes only when the dirty part holds a newer one.
    ///
    /// # Errors
    /// A batch that fails validation: the pass stops rather than guess.
    pub async fn build(
        segments: &[Arc<Segment>],
        clean_offset: u64,
        tombstone_horizon: u64,
        max_keys: usize,
        throttle: &Throttle,
    ) -> Result<(Retention, usize), CompactionError> {
        let mut latest = HashMap::new();
        let mut mapped_any = false;
        for (index, segment) in segments.iter().enumerate() {
            if !super::is_dirty(&segment.snapshot(), clean_offset) {
                continue;
            }
            if mapped_any && latest.len() >= max_keys {
                let retention = Retention {
                    latest,
                    tombstone_horizon,
                };
                return Ok((retention, index));
            }
            for_each_batch(segment, |batch| {
                for record in batch.records() {
                    let record = record?;
                    if let (Some(key), Ok(offset)) = (record.key, u64::try_from(record.offset)) {
                        latest.insert(key, offset);
                    }
                }
                Ok(())
            })
            .await?;
            mapped_any = true;
            throttle.consume(segment.snapshot().durable_size).await;
            tokio::task::yield_now().await;
        }
        let retention = Retention {
            latest,
            tombstone_horizon,
        };
        Ok((retention, segments.len()))
    }

    /// Whether `record` survives the pass. Keyless records (written before the topic became
    /// compacted) are kept: nothing supersedes them.
    pub fn keeps(&self, record: &Record) -> bool {
        let Some(key) = &record.key else {
            return true;
        };
        let Ok(offset) = u64::try_from(record.offset) else {
            return true;
        };
        let newest = self.latest.get(key).is_none_or(|&latest| latest <= offset);
        newest && (record.value.is_some() || offset >= self.tombstone_horizon)
    }

    /// Counts what the pass would remove from `group` without writing anything, so a segment
    /// with nothing to remove is not rewritten.
    ///
    /// # Errors
    /// A batch that fails validation.
    pub async fn tally(&self, group: &[Arc<Segment>]) -> Result<GroupTally, CompactionError> {
        let mut tally = GroupTally::default();
        for segment in group {
            for_each_batch(segment, |batch| {
                if batch.header().is_control() {
                    return Ok(());
                }
                for record in batch.records() {
                    let record = record?;
                    let tombstone = record.value.is_none();
                    match (self.keeps(&record), tombstone) {
                        (true, true) => tally.tombstones_kept += 1,
                        (true, false) => {}
                        (false, true) => {
                            tally.dropped += 1;
                            tally.tombstones_dropped += 1;
                        }
                        (false, false) => tally.dropped += 1,
                    }
                }
                Ok(())
            })
            .await?;
        }
        Ok(tally)
    }
}

/// Calls `f` for every validated batch of a segment's durable bytes, yielding to the runtime
/// after every [`YIELD_EVERY_BYTES`] so that decoding a large segment never holds a runtime
/// worker for long: on a small machine, appends' handlers run on the same workers.
async fn for_each_batch(
    segment: &Segment,
    mut f: impl FnMut(&RecordBatch) -> Result<(), crate::log::BatchError>,
) -> Result<(), CompactionError> {
    let bytes = segment.durable_bytes();
    let mut position = 0usize;
    let mut since_yield = 0usize;
    while position < bytes.len() {
        let corrupt = |source| SegmentReadError::Corrupt {
            path: segment.log_file().path().to_path_buf(),
            position: position as u64,
            source,
        };
        let batch = RecordBatch::decode_first(&bytes.slice(position..)).map_err(corrupt)?;
        f(&batch).map_err(corrupt)?;
        position += batch.len();
        since_yield += batch.len();
        if since_yield >= YIELD_EVERY_BYTES {
            since_yield = 0;
            tokio::task::yield_now().await;
        }
    }
    Ok(())
}

/// Splits cleanable segments into runs of neighbours whose combined size stays within
/// `segment_bytes` and whose offsets stay within a segment's `u32` relative range, so small
/// segments left by earlier passes merge.
pub fn group_segments(segments: &[Arc<Segment>], segment_bytes: u64) -> Vec<Vec<Arc<Segment>>> {
    let mut groups: Vec<Vec<Arc<Segment>>> = Vec::new();
    let mut size = 0u64;
    for segment in segments {
        let snapshot = segment.snapshot();
        let fits = groups.last().is_some_and(|group| {
            let base = group[0].base_offset();
            size + snapshot.durable_size <= segment_bytes
                && snapshot.next_offset.saturating_sub(base) <= u64::from(u32::MAX)
        });
        if fits {
            size += snapshot.durable_size;
            if let Some(group) = groups.last_mut() {
                group.push(Arc::clone(segment));
            }
        } else {
            size = snapshot.durable_size;
            groups.push(vec![Arc::clone(segment)]);
        }
    }
    groups
}

/// Writes the compacted copy of `group` as `{base}.*.cleaned` files, fsynced with their
/// directory entry, and returns the new segment's state (indexes included).
///
/// # Errors
/// I/O errors and invalid batches; the caller removes the partial files.
pub async fn write_group(
    io: &Io,
    dir: &Path,
    group: &[Arc<Segment>],
    retention: &Retention,
    index_interval_bytes: u64,
    throttle: &Throttle,
) -> Result<SegmentState, CompactionError> {
    let base = group[0].base_offset();
    let [log_path, index_path, time_path] = cleaned_paths(dir, base);
    let log = io.open(&log_path, OpenMode::CreateOrOpen).await?;
    io.set_len(&log, 0).await?;
    let index_file = io.open(&index_path, OpenMode::CreateOrOpen).await?;
    let time_file = io.open(&time_path, OpenMode::CreateOrOpen).await?;
    let mut state = SegmentState {
        next_offset: base,
        ..SegmentState::default()
    };
    let mut pending: Vec<Bytes> = Vec::new();
    let mut pending_len = 0usize;
    let mut written = 0u64;
    let mut synced = 0u64;
    for segment in group {
        let mut kept: Vec<(Bytes, AppendedBatch)> = Vec::new();
        let mut position = state.durable_size;
        for_each_batch(segment, |batch| {
            let retained = if batch.header().is_control() {
                Some(batch.bytes().clone())
            } else {
                batch.retain_records(|record| retention.keeps(record))?
            };
            if let Some(bytes) = retained {
                let (base_offset, last_offset) = batch_offsets(batch.header());
                let appended = AppendedBatch {
                    position,
                    len: bytes.len() as u64,
                    base_offset,
                    last_offset,
                    max_timestamp: batch.header().max_timestamp,
                };
                position += appended.len;
                kept.push((bytes, appended));
            }
            Ok(())
        })
        .await?;
        for (bytes, appended) in kept {
            state.add_batch(
                base,
                &appended,
                index_interval_bytes,
                appended.max_timestamp,
            );
            pending_len += bytes.len();
            pending.push(bytes);
            if pending_len >= WRITE_CHUNK_BYTES {
                let chunk = std::mem::take(&mut pending);
                io.write_at(&log, written, chunk).await?;
                written += pending_len as u64;
                throttle.consume(pending_len as u64).await;
                pending_len = 0;
                if written - synced >= SYNC_EVERY_BYTES {
                    io.sync_data(&log).await?;
                    synced = written;
                }
            }
        }
        tokio::task::yield_now().await;
    }
    if !pending.is_empty() {
        io.write_at(&log, written, pending).await?;
        throttle.consume(pending_len as u64).await;
    }
    io.sync_data(&log).await?;
    rewrite_indexes(io, &index_file, &time_file, &mut state).await?;
    io.sync_dir(dir).await?;
    // The cleaner's segment is closed from birth: its age plays no role.
    state.roll_basis_ms = None;
    Ok(state)
}

//! Reads of offsets that only the bucket holds. The remote segment's offset index (fetched whole
//! once, SHA-256-checked, cached) gives the byte position to start from, exactly as for a local
//! segment; record data then comes through the chunk cache (aligned ranged GETs, each chunk
//! checked against the segment's chunk digests), and every returned batch passes the same CRC
//! validation as a produced one, so corrupt bytes are an error, never served.

use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use strata_tiering::chunk_cache::RemoteObject;
use strata_tiering::digest::ChunkDigests;
use strata_tiering::manifest::RemoteSegment;

use super::{RemotePartition, Tiering, TieringError};
use crate::log::RecordBatch;
use crate::log::batch::batch_headers;
use crate::log::offset_index::OffsetIndex;
use crate::log::segment::batch_offsets;
use crate::log::time_index::TimeIndex;

/// Bytes read beyond `max_bytes` at first, so the batch holding the wanted offset usually
/// arrives with the first range.
const WINDOW_SLACK: u64 = 64 * 1024;

/// Whole batches read from the bucket.
#[derive(Debug, Clone)]
pub struct ColdSlice {
    /// Record batches, as stored.
    pub data: Bytes,
    /// Base offset of the first batch.
    pub first_offset: u64,
    /// Offset after the last batch.
    pub next_offset: u64,
}

impl Tiering {
    /// Whole batches from the one holding `offset` (or the first after it), up to `max_bytes`
    /// (at least one batch), within one remote segment. `None` when the manifest has nothing at
    /// or after `offset`.
    ///
    /// # Errors
    /// Store errors, digest or CRC mismatches.
    pub async fn read_cold(
        &self,
        remote: &RemotePartition,
        offset: u64,
        max_bytes: u64,
    ) -> Result<Option<ColdSlice>, TieringError> {
        let manifest = remote.manifest();
        let Some(segment) = manifest.segment_for(offset) else {
            return Ok(None);
        };
        let index = self.remote_index(remote, segment).await?;
        let relative =
            u32::try_from(offset.saturating_sub(segment.base_offset)).unwrap_or(u32::MAX);
        let mut start = index.lookup(relative).map_or(0, |e| u64::from(e.position));
        let object = RemoteObject {
            key: Path::from(segment.log.key.as_str()),
            len: segment.log.size,
            digests: Some(self.remote_digests(remote, segment).await?),
        };
        let len = segment.log.size;
        let mut window = max_bytes.max(1) + WINDOW_SLACK;
        while start < len {
            let end = start.saturating_add(window).min(len);
            let bytes = self.cache.read(&object, start..end).await?;
            match pick_batches(
                &bytes,
                offset,
                max_bytes,
                end == len,
                &segment.log.key,
                start,
            )? {
                Picked::Found(range, first_offset, next_offset) => {
                    let data = bytes.slice(range);
                    validate(&data, &segment.log.key)?;
                    return Ok(Some(ColdSlice {
                        data,
                        first_offset,
                        next_offset,
                    }));
                }
                Picked::Skip(consumed) => start += consumed as u64,
                Picked::Grow => window = window.saturating_mul(2),
            }
        }
        Ok(None)
    }

    /// The first offset at or after `timestamp` in the remote segments, if any: the manifest's
    /// max timestamps pick the segment, its time index the starting point.
    ///
    /// # Errors
    /// As [`Tiering::read_cold`].
    pub async fn offset_for_timestamp_cold(
        &self,
        remote: &RemotePartition,
        timestamp: i64,
    ) -> Result<Option<u64>, TieringError> {
        let manifest = remote.manifest();
        let Some(segment) = manifest
            .segments
            .iter()
            .find(|s| s.max_timestamp >= timestamp && s.last_offset >= manifest.log_start_offset)
        else {
            return Ok(None);
        };
        let bytes = self
            .cache
            .get_whole(
                &Path::from(segment.time_index.key.as_str()),
                Some(&segment.time_index.sha256),
            )
            .await?;
        let time_index =
            TimeIndex::from_bytes(&bytes).map_err(|e| corrupt(&segment.time_index.key, &e))?;
        let mut offset = time_index
            .last_before(timestamp)
            .map_or(segment.base_offset, |e| {
                segment.base_offset + u64::from(e.relative_offset)
            })
            .max(manifest.log_start_offset);
        while offset <= segment.last_offset {
            let Some(slice) = self.read_cold(remote, offset, 1 << 20).await? else {
                break;
            };
            let mut rest = slice.data.clone();
            while !rest.is_empty() {
                let batch =
                    RecordBatch::decode_first(&rest).map_err(|e| corrupt(&segment.log.key, &e))?;
                for record in batch.records() {
                    let record = record.map_err(|e| corrupt(&segment.log.key, &e))?;
                    let at = u64::try_from(record.offset).unwrap_or(0);
                    if at >= offset && record.timestamp >= timestamp {
                        return Ok(Some(at));
                    }
                }
                rest = rest.slice(batch.len()..);
            }
            offset = slice.next_offset;
        }
        Ok(None)
    }

    async fn remote_index(
        &self,
        remote: &RemotePartition,
        segment: &RemoteSegment,
    ) -> Result<Arc<OffsetIndex>, TieringError> {
        if let Some(index) = RemotePartition::cached(&remote.indexes, segment.base_offset) {
            return Ok(index);
        }
        let bytes = self
            .cache
            .get_whole(
                &Path::from(segment.index.key.as_str()),
                Some(&segment.index.sha256),
            )
            .await?;
        let index =
            Arc::new(OffsetIndex::from_bytes(&bytes).map_err(|e| corrupt(&segment.index.key, &e))?);
        RemotePartition::remember(&remote.indexes, segment.base_offset, Arc::clone(&index));
        Ok(index)
    }

    async fn remote_digests(
        &self,
        remote: &RemotePartition,
        segment: &RemoteSegment,
    ) -> Result<Arc<ChunkDigests>, TieringError> {
        if let Some(digests) = RemotePartition::cached(&remote.digests, segment.base_offset) {
            return Ok(digests);
        }
        let bytes = self
            .cache
            .get_whole(
                &Path::from(segment.chunks.key.as_str()),
                Some(&segment.chunks.sha256),
            )
            .await?;
        let digests =
            Arc::new(ChunkDigests::decode(&bytes).map_err(|e| corrupt(&segment.chunks.key, &e))?);
        RemotePartition::remember(&remote.digests, segment.base_offset, Arc::clone(&digests));
        Ok(digests)
    }
}

enum Picked {
    /// Bytes range of whole batches, their first and next offsets.
    Found(std::ops::Range<usize>, u64, u64),
    /// Every complete batch in the window ends before the offset: continue after them.
    Skip(usize),
    /// The batch holding the offset does not fit in the window.
    Grow,
}

/// Chooses the batches to return from a window of segment bytes starting at a batch boundary.
fn pick_batches(
    window: &[u8],
    offset: u64,
    max_bytes: u64,
    reaches_end: bool,
    key: &str,
    window_start: u64,
) -> Result<Picked, TieringError> {
    let mut found: Option<(usize, usize, u64, u64)> = None;
    let mut consumed = 0usize;
    for item in batch_headers(window) {
        let (position, header) = match item {
            Ok(item) => item,
            Err(error) => {
                if reaches_end {
                    return Err(corrupt(
                        key,
                        &format!("at byte {}: {error}", window_start + consumed as u64),
                    ));
                }
                break;
            }
        };
        let (base, last) = batch_offsets(&header);
        let end = position + header.total_len();
        consumed = end;
        match &mut found {
            None if last < offset => {}
            None => found = Some((position, end, base, last + 1)),
            Some((first, until, _, next)) => {
                if (end - *first) as u64 > max_bytes {
                    break;
                }
                *until = end;
                *next = last + 1;
            }
        }
    }
    Ok(match found {
        Some((first, until, base, next)) => Picked::Found(first..until, base, next),
        None if consumed > 0 => Picked::Skip(consumed),
        None => Picked::Grow,
    })
}

/// Full validation (CRC, records) of every batch in `data`.
fn validate(data: &Bytes, key: &str) -> Result<(), TieringError> {
    let mut rest = data.clone();
    while !rest.is_empty() {
        let batch = RecordBatch::decode_first(&rest).map_err(|e| corrupt(key, &e))?;
        rest = rest.slice(batch.len()..);
    }
    Ok(())
}

fn corrupt(key: &str, reason: &dyn std::fmt::Display) -> TieringError {
    TieringError::Corrupt {
        key: key.to_string(),
        reason: reason.to_string(),
    }
}

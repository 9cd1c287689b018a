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
use crate::log::offset_index::OffsetIndex;
use crate::log::read::{Choice, OffsetBounds, choose_batches, first_at_or_after_time};
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
        let entry = index.lookup(relative);
        let mut start = entry.map_or(0, |e| u64::from(e.position));
        let mut bounds = OffsetBounds {
            anchor: entry.map(|e| segment.base_offset + u64::from(e.relative_offset)),
            lower: segment.base_offset,
            upper: segment.last_offset.saturating_add(1),
            high_watermark: u64::MAX,
            contiguous: false,
        };
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
            let choice = choose_batches(&bytes, offset, max_bytes, bounds, end == len)
                .map_err(|e| corrupt(&segment.log.key, &format!("at byte {start}: {e}")))?;
            match choice {
                Choice::Found {
                    bytes: range,
                    first_offset,
                    next_offset,
                } => {
                    let data = bytes.slice(range);
                    let (valid, next_offset) = valid_prefix(&data, next_offset, &segment.log.key)?;
                    return Ok(Some(ColdSlice {
                        data: data.slice(..valid),
                        first_offset,
                        next_offset,
                    }));
                }
                Choice::Skip { consumed, lower } => {
                    start += consumed as u64;
                    bounds.anchor = None;
                    bounds.lower = lower;
                }
                Choice::Grow => window = window.saturating_mul(2),
                Choice::Nothing => return Ok(None),
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
            let upper = segment.last_offset.saturating_add(1);
            let found = first_at_or_after_time(&slice.data, offset, upper, timestamp)
                .map_err(|e| corrupt(&segment.log.key, &e))?;
            if found.is_some() {
                return Ok(found);
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

/// Full validation (CRC, records) of the batches in `data`: the length of the valid prefix
/// and the offset after it (`next_offset` when all are valid). A corrupt first batch is an
/// error; a later one ends the prefix, so the batches before it are served, as Kafka does.
fn valid_prefix(data: &Bytes, next_offset: u64, key: &str) -> Result<(usize, u64), TieringError> {
    let mut valid = 0;
    let mut next = None;
    for batch in crate::log::Batches::new(data.clone()) {
        match batch {
            Ok(batch) => {
                valid += batch.len();
                next = Some(u64::try_from(batch.header().last_offset()).unwrap_or(0) + 1);
            }
            Err(error) if valid == 0 => return Err(corrupt(key, &error)),
            Err(_) => break,
        }
    }
    let next = if valid == data.len() {
        next_offset
    } else {
        next.unwrap_or(next_offset)
    };
    Ok((valid, next))
}

fn corrupt(key: &str, reason: &dyn std::fmt::Display) -> TieringError {
    TieringError::Corrupt {
        key: key.to_string(),
        reason: reason.to_string(),
    }
}

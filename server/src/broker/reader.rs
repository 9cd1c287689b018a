//! One partition as readers see it: the local log, plus the bucket below the local log start
//! when the topic is tiered. Every read of the broker (fetch in each format, member fetch, lag,
//! timestamp lookups) goes through this one reader, so cold offsets are served the same way as
//! hot ones and the local-or-remote decision is made in one place. The remote part is the
//! engine's [`RemoteLog`] trait, so this reader knows nothing of buckets or manifests.

use std::sync::Arc;

use tokio::sync::watch;

use crate::log::error::OffsetOutOfRange;
use crate::log::remote::{RemoteLog, RemoteReadError};
use crate::log::segments::{SegmentMap, SegmentSpan, Tier};
use crate::log::{LogOffsets, Partition, ReadError, ReadSlice};

/// A partition's local log and, for tiered topics, its remote part.
#[derive(Debug, Clone)]
pub struct PartitionReader {
    local: Arc<Partition>,
    remote: Option<Arc<dyn RemoteLog>>,
}

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReaderError {
    /// The local read failed.
    #[error(transparent)]
    Local(#[from] ReadError),
    /// The remote read failed.
    #[error(transparent)]
    Remote(#[from] RemoteReadError),
}

impl PartitionReader {
    /// A partition without a remote part.
    pub fn local(local: Arc<Partition>) -> Self {
        Self {
            local,
            remote: None,
        }
    }

    /// A tiered partition: `remote` serves the offsets below the local log start.
    pub fn tiered(local: Arc<Partition>, remote: Arc<dyn RemoteLog>) -> Self {
        Self {
            local,
            remote: Some(remote),
        }
    }

    /// The local partition.
    pub fn partition(&self) -> &Arc<Partition> {
        &self.local
    }

    /// The remote part, if the topic is tiered.
    pub fn remote(&self) -> Option<&Arc<dyn RemoteLog>> {
        self.remote.as_ref()
    }

    /// The partition's local and remote segments in one ordered map, as of now.
    pub fn segment_map(&self) -> SegmentMap {
        let local_start = self.local.offsets().log_start_offset;
        let remote = self.remote().map(|r| r.segments()).unwrap_or_default();
        SegmentMap::new(&self.local.segment_spans(), local_start, &remote)
    }

    /// The bucket's segment spans, oldest first (none for a local topic).
    fn remote_spans(&self) -> Vec<SegmentSpan> {
        self.remote().map(|r| r.segments()).unwrap_or_default()
    }

    /// Offsets with the log start of the whole log: the remote start when the bucket holds
    /// records below the local start.
    pub fn offsets(&self) -> LogOffsets {
        whole_log(self.local.offsets(), &self.remote_spans())
    }

    /// Changes of the local offsets (new data arrives locally only).
    pub fn subscribe(&self) -> watch::Receiver<LogOffsets> {
        self.local.subscribe()
    }

    /// Like [`Partition::read`], from whichever tier the segment map says holds `offset`.
    ///
    /// # Errors
    /// Out of range (against the whole log), local or remote failures.
    pub async fn read(&self, offset: u64, max_bytes: u64) -> Result<ReadSlice, ReaderError> {
        // One listing of the bucket's spans serves both the whole log's start and the tier.
        let local = self.local.offsets();
        let local_start = local.log_start_offset;
        let remote_spans = self.remote_spans();
        let offsets = whole_log(local, &remote_spans);
        let in_range = offset >= offsets.log_start_offset;
        // Only offsets below the local start of a tiered partition need the map: the local
        // log holds every offset from its start on.
        if let (true, Some(remote)) = (in_range, &self.remote)
            && offset < local_start
            && SegmentMap::new(&self.local.segment_spans(), local_start, &remote_spans)
                .locate(offset)
                .map(|span| span.tier)
                == Some(Tier::Remote)
            && let Some(cold) = remote.read(offset, max_bytes).await?
        {
            self.local.count_copied_read(cold.data.len() as u64);
            return Ok(ReadSlice {
                data: cold.data,
                first_offset: cold.first_offset,
                next_offset: cold.next_offset,
                offsets,
                zero_copy: false,
            });
        }
        // Below the local start but within the whole log (a gap the bucket does not cover):
        // continue at the local start.
        let local_offset = if in_range {
            offset.max(local_start)
        } else {
            offset
        };
        let mut slice =
            self.local
                .read(local_offset, max_bytes)
                .await
                .map_err(|error| match error {
                    ReadError::OffsetOutOfRange(OffsetOutOfRange {
                        requested, latest, ..
                    }) => ReadError::OffsetOutOfRange(OffsetOutOfRange {
                        requested,
                        earliest: offsets.log_start_offset,
                        latest,
                    }),
                    other => other,
                })?;
        slice.offsets.log_start_offset = offsets.log_start_offset;
        Ok(slice)
    }

    /// The largest record timestamp in the readable log (local and remote), `None` when empty.
    pub fn max_timestamp(&self) -> Option<i64> {
        self.segment_map().max_timestamp()
    }

    /// The first offset with a timestamp at or after `timestamp`, asking the tier of the first
    /// segment the map says may hold one.
    ///
    /// # Errors
    /// Local or remote failures.
    pub async fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<u64>, ReaderError> {
        let Some(remote) = &self.remote else {
            return Ok(self.local.offset_for_timestamp(timestamp)?);
        };
        let tier = self.segment_map().locate_time(timestamp).map(|s| s.tier);
        if tier == Some(Tier::Remote)
            && let Some(offset) = remote.offset_for_timestamp(timestamp).await?
            && offset < self.local.offsets().log_start_offset
        {
            return Ok(Some(offset));
        }
        Ok(self.local.offset_for_timestamp(timestamp)?)
    }
}

/// `local` with the whole log's start: the bucket's first offset when it holds records below
/// the local start.
fn whole_log(mut local: LogOffsets, remote: &[SegmentSpan]) -> LogOffsets {
    if let Some(start) = remote.first().map(|s| s.base_offset)
        && start < local.log_start_offset
    {
        local.log_start_offset = start;
    }
    local
}

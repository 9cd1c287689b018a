//! The engine's [`RemoteLog`] over a tiered partition: cold reads and timestamp lookups through
//! the manifest and the chunk cache, and the one classification of tiering failures into what
//! a client can do about them ([`failure_kind`]).

use std::sync::Arc;

use futures::future::BoxFuture;
use strata_tiering::chunk_cache::ChunkError;
use strata_tiering::manifest::ManifestError;

use super::{RemotePartition, Tiering, TieringError};
use crate::log::remote::{RemoteLog, RemoteReadError, RemoteSlice};
use crate::log::segments::{SegmentSpan, Tier};

/// A tiered partition's remote segments.
#[derive(Debug, Clone)]
pub struct TieredSegments {
    tiering: Arc<Tiering>,
    remote: Arc<RemotePartition>,
}

impl TieredSegments {
    /// The remote segments `remote` lists, read through `tiering`.
    pub fn new(tiering: Arc<Tiering>, remote: Arc<RemotePartition>) -> Self {
        Self { tiering, remote }
    }

    /// The partition's manifest state (for listings of where segments live).
    pub fn partition(&self) -> &Arc<RemotePartition> {
        &self.remote
    }
}

impl RemoteLog for TieredSegments {
    fn segments(&self) -> Vec<SegmentSpan> {
        let manifest = self.remote.manifest();
        let start = manifest.log_start_offset;
        // The first readable segment starts at the log start even when that falls in a gap
        // before it (compaction): offsets there are served from the next batch.
        manifest
            .segments
            .iter()
            .filter(|s| s.last_offset >= start)
            .enumerate()
            .map(|(i, s)| SegmentSpan {
                base_offset: if i == 0 { start } else { s.base_offset },
                next_offset: s.last_offset + 1,
                max_timestamp: Some(s.max_timestamp),
                tier: Tier::Remote,
            })
            .collect()
    }

    fn end_offset(&self) -> u64 {
        self.remote.manifest().next_offset()
    }

    fn read(
        &self,
        offset: u64,
        max_bytes: u64,
    ) -> BoxFuture<'_, Result<Option<RemoteSlice>, RemoteReadError>> {
        Box::pin(async move {
            let cold = self
                .tiering
                .read_cold(&self.remote, offset, max_bytes)
                .await
                .map_err(as_read_error)?;
            Ok(cold.map(|cold| RemoteSlice {
                data: cold.data,
                first_offset: cold.first_offset,
                next_offset: cold.next_offset,
            }))
        })
    }

    fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> BoxFuture<'_, Result<Option<u64>, RemoteReadError>> {
        Box::pin(async move {
            self.tiering
                .offset_for_timestamp_cold(&self.remote, timestamp)
                .await
                .map_err(as_read_error)
        })
    }
}

/// What a tiering failure means for a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Damaged or lost data: not retryable.
    Corrupt,
    /// The store is unreachable or refused: retry later.
    Unavailable,
    /// Work could not run (a task went away): retry.
    Interrupted,
    /// Another writer owns the partition's manifest.
    Conflict,
    /// A broken promise of our own code.
    Internal,
}

/// The one classification of tiering failures: bytes that fail a digest or CRC, invalid
/// manifests and objects a manifest names but the store lacks are corrupt; store errors are
/// unavailable.
pub fn failure_kind(error: &TieringError) -> FailureKind {
    match error {
        TieringError::Corrupt { .. } => FailureKind::Corrupt,
        TieringError::Read(chunk) => chunk_failure_kind(chunk),
        TieringError::Manifest(manifest) => match manifest {
            ManifestError::Invalid { .. } => FailureKind::Corrupt,
            ManifestError::Fenced { .. } => FailureKind::Conflict,
            ManifestError::LandedEarlier(_) | ManifestError::Store(_) => FailureKind::Unavailable,
        },
        TieringError::Store(store) => store_failure_kind(store),
        TieringError::Fenced { .. } => FailureKind::Conflict,
        TieringError::Tlog(tlog) => match tlog {
            strata_tiering::tlog::log::TlogError::Inconsistent { .. }
            | strata_tiering::tlog::log::TlogError::BadBundle { .. } => FailureKind::Corrupt,
            strata_tiering::tlog::log::TlogError::Store(store)
            | strata_tiering::tlog::log::TlogError::Unreadable { source: store, .. } => {
                store_failure_kind(store)
            }
        },
        TieringError::Open(_)
        | TieringError::Probe(_)
        | TieringError::KeyList(_)
        | TieringError::Upload(_)
        | TieringError::CacheConfig(_)
        | TieringError::Local { .. }
        | TieringError::Lock(_)
        | TieringError::DeleteVersion(_) => FailureKind::Unavailable,
    }
}

fn chunk_failure_kind(error: &ChunkError) -> FailureKind {
    match error {
        ChunkError::Corrupt { .. }
        | ChunkError::Sha256Mismatch { .. }
        | ChunkError::WrongLength { .. }
        | ChunkError::DigestsDoNotFit { .. } => FailureKind::Corrupt,
        ChunkError::Get { source, .. } | ChunkError::GetWhole { source, .. } => {
            store_failure_kind(source)
        }
        ChunkError::OutOfRange { .. } => FailureKind::Internal,
        ChunkError::TaskFailed { .. } => FailureKind::Interrupted,
    }
}

/// An object the manifest references but the store does not have is lost data, not an outage.
fn store_failure_kind(error: &object_store::Error) -> FailureKind {
    match error {
        object_store::Error::NotFound { .. } => FailureKind::Corrupt,
        _ => FailureKind::Unavailable,
    }
}

/// A failed read (or a failed load of what a read needs) as the engine sees it. A read never
/// writes a manifest, so a conflict there can only be a store that answered strangely:
/// unavailable.
pub fn as_read_error(error: TieringError) -> RemoteReadError {
    let cause = Box::new(error);
    match failure_kind(&cause) {
        FailureKind::Corrupt => RemoteReadError::Corrupt(cause),
        FailureKind::Unavailable | FailureKind::Conflict => RemoteReadError::Unavailable(cause),
        FailureKind::Interrupted => RemoteReadError::Interrupted(cause),
        FailureKind::Internal => RemoteReadError::Internal(cause),
    }
}

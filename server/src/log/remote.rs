//! Segments that only the object store holds, as the engine sees them: a trait, so readers
//! combine local and remote segments without the engine knowing buckets, manifests or chunk
//! caches (the tiering glue implements it, `tiering/remote_log.rs`). Failures come in kinds
//! that decide what a client can do: damaged or lost data is never retried into an answer, an
//! unreachable store is.

use std::error::Error;
use std::fmt::Debug;

use bytes::Bytes;
use futures::future::BoxFuture;

use super::segments::SegmentSpan;

/// Whole batches read from remote segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSlice {
    /// Record batches, as stored, every one validated (CRC, records).
    pub data: Bytes,
    /// Base offset of the first batch.
    pub first_offset: u64,
    /// Offset after the last batch.
    pub next_offset: u64,
}

/// A cause from the layer below, kept whole for the log.
pub type RemoteCause = Box<dyn Error + Send + Sync>;

/// Why a remote read failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteReadError {
    /// Bytes that fail a digest or CRC, or an object the bucket's index names that the store
    /// does not have: lost or damaged data, the same however often it is read.
    #[error("remote data is corrupt or lost: {0}")]
    Corrupt(#[source] RemoteCause),
    /// The store did not answer or refused: retry later.
    #[error("remote storage is unavailable: {0}")]
    Unavailable(#[source] RemoteCause),
    /// A read the remote side could not schedule (its worker went away): retry.
    #[error("remote read could not run: {0}")]
    Interrupted(#[source] RemoteCause),
    /// A broken promise of the remote side (a range outside an object it described).
    #[error("remote read failed: {0}")]
    Internal(#[source] RemoteCause),
}

/// A partition's remote segments.
pub trait RemoteLog: Debug + Send + Sync {
    /// The readable remote segments in offset order (the first one starting at the remote log
    /// start), for the partition's [`SegmentMap`](super::segments::SegmentMap).
    fn segments(&self) -> Vec<SegmentSpan>;

    /// The offset after the last one the remote segments hold.
    fn end_offset(&self) -> u64;

    /// Whole batches from the one holding `offset` (or the first after it), up to `max_bytes`
    /// (at least one batch), within one segment; `None` when nothing is at or after `offset`.
    fn read(
        &self,
        offset: u64,
        max_bytes: u64,
    ) -> BoxFuture<'_, Result<Option<RemoteSlice>, RemoteReadError>>;

    /// The first offset whose record timestamp is at or after `timestamp`, if any.
    fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> BoxFuture<'_, Result<Option<u64>, RemoteReadError>>;
}

//! The engine's errors, one enum per operation (append, read, open, close), with the causes
//! they carry. In a module of their own so that every part of the engine can name them without
//! importing the partition (which imports those parts).

use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;

use super::compaction::swap::SwapFileError;
use super::config::LogConfigError;
use super::meta::MetaError;
use super::producer_state::ProducerError;
use super::segment::SegmentReadError;
use crate::io::IoError;

/// An offset outside the readable log: below the log start or above the high watermark. Every
/// operation that checks an offset range returns this one shape, with the valid range.
#[derive(Debug, Clone, Copy, Error, PartialEq, Eq)]
#[error(
    "offset {requested} is out of range: valid offsets are {earliest} to {latest} \
     (the high watermark)"
)]
pub struct OffsetOutOfRange {
    /// The offset asked for.
    pub requested: u64,
    /// The log start offset.
    pub earliest: u64,
    /// The high watermark.
    pub latest: u64,
}

/// Why an append failed. Nothing of a failed append ever becomes readable. `Clone`, because one
/// failed group-commit round answers every request in it with the same error.
#[derive(Debug, Clone, Error)]
pub enum AppendError {
    /// A batch is larger than the partition accepts.
    #[error(
        "batch of {size} bytes exceeds the topic's max_message_bytes of {limit} (the limit is per \
         batch: a JSON produce stores one partition's records as one batch, so send fewer or \
         smaller records per request, or raise max_message_bytes)"
    )]
    BatchTooLarge {
        /// Size of the batch.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The writer's queue is full; retry later.
    #[error("partition writer is busy, retry later")]
    Busy,
    /// Writing failed (for example the disk is full); the partition truncated the partial write
    /// and accepts appends again.
    #[error("append failed: {0}")]
    Io(#[source] Arc<IoError>),
    /// An fsync failed, so the kernel may have dropped data it claimed to hold; the partition
    /// refuses writes until a restart re-reads the disk.
    #[error("partition is unavailable after a storage failure: {reason}")]
    Poisoned {
        /// What failed.
        reason: String,
    },
    /// The partition is closing or closed.
    #[error("partition is closed")]
    Closed,
    /// A conditional append expected another log end offset; nothing was written.
    #[error("expected the log end offset to be {expected} but it is {actual}")]
    OffsetMismatch {
        /// What the caller expected.
        expected: u64,
        /// The actual log end offset.
        actual: u64,
    },
    /// delete-records beyond the high watermark.
    #[error(transparent)]
    OffsetOutOfRange(OffsetOutOfRange),
    /// An idempotent producer's batch was refused (fenced epoch or sequence gap).
    #[error(transparent)]
    Producer(#[from] ProducerError),
}

/// Why a read failed.
#[derive(Debug, Error)]
pub enum ReadError {
    /// The offset is below the log start or above the high watermark.
    #[error(transparent)]
    OffsetOutOfRange(OffsetOutOfRange),
    /// Stored data does not decode.
    #[error(transparent)]
    Corrupt(#[from] SegmentReadError),
    /// Reading from disk failed.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Why a partition could not be opened.
#[derive(Debug, Error)]
pub enum OpenError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] LogConfigError),
    /// Disk I/O failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The metadata file is unreadable.
    #[error(transparent)]
    Meta(#[from] MetaError),
    /// An interrupted compaction swap could not be finished.
    #[error(transparent)]
    Swap(#[from] SwapFileError),
    /// The directory is not usable.
    #[error("partition directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
}

/// Why a clean close failed; the next start will then run recovery.
#[derive(Debug, Error)]
pub enum CloseError {
    /// Flushing or writing the metadata failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Writing the metadata failed.
    #[error(transparent)]
    Meta(#[from] MetaError),
    /// The writer stopped earlier.
    #[error("partition writer is gone")]
    WriterGone,
}

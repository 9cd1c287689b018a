//! The errors of the broker's operations: one enum per operation, holding only what that
//! operation can fail with, built from small shared pieces ([`LookupError`],
//! [`OffsetOutOfRange`]). The HTTP layer maps each enum to an error code with one exhaustive
//! match, so a new variant forces a decision there; nothing here knows about status codes.

use thiserror::Error;

use super::reader::ReaderError;
use crate::groups::coordinator::GroupError;
use crate::groups::offsets::OffsetStoreError;
use crate::log::batch::BatchError;
pub use crate::log::error::OffsetOutOfRange;
use crate::log::{AppendError, ReadError};
use crate::names::InvalidName;
use crate::producers::ProducerRegistryError;
use crate::security::Denied;
use crate::tiering::TieringError;
use crate::topics::catalog::CatalogError;

/// A topic or partition an operation named that is not there, or that clients may not change.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum LookupError {
    /// No topic of that name.
    #[error("topic {topic} not found")]
    TopicNotFound {
        /// The name asked for.
        topic: String,
    },
    /// The topic has fewer partitions.
    #[error("topic {topic} has no partition {partition} (it has {count})")]
    PartitionNotFound {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: u32,
        /// How many partitions the topic has.
        count: u32,
    },
    /// One of the server's own topics, whose records only the server writes (one foreign record
    /// in `__consumer_offsets` would be read back at every start).
    #[error(
        "topic {topic} is internal: only the server writes to it, and consumer groups do not \
         read it (fetch its partitions directly)"
    )]
    InternalTopic {
        /// The topic.
        topic: String,
    },
    /// The caller may not do this to the resource (checked before it is looked up).
    #[error(transparent)]
    Forbidden(#[from] Denied),
}

/// Why a fetch (or a read on behalf of another operation: lag, timestamp lookups) failed.
#[derive(Debug, Error)]
pub enum FetchError {
    /// The topic or partition does not exist.
    #[error(transparent)]
    Lookup(#[from] LookupError),
    /// Both a start offset and a start timestamp were given.
    #[error("give offset or timestamp, not both")]
    OffsetAndTimestamp,
    /// A negative timestamp that is not one of Kafka's special values.
    #[error("timestamp must be >= 0, or -1 (latest), -2 (earliest) or -3 (max timestamp)")]
    InvalidTimestamp(i64),
    /// The start offset is outside the log.
    #[error(transparent)]
    OutOfRange(#[from] OffsetOutOfRange),
    /// Reading the stored batches failed (local disk or bucket).
    #[error(transparent)]
    Read(#[from] ReaderError),
    /// A stored batch or record failed validation while being decoded.
    #[error("stored batch failed validation: {0}")]
    Corrupt(#[source] BatchError),
    /// The read's audit entry could not be written, so nothing may be sent.
    #[error(transparent)]
    Audit(#[from] super::audit::AuditUnavailable),
}

/// Why a timestamp lookup (`GET .../offsets?timestamp=`) failed.
#[derive(Debug, Error)]
pub enum ListOffsetsError {
    /// A negative timestamp that is not one of Kafka's special values.
    #[error("timestamp must be >= 0, or -1 (latest), -2 (earliest) or -3 (max timestamp)")]
    InvalidTimestamp {
        /// The timestamp given.
        timestamp: i64,
    },
    /// The partition could not be opened (no such topic or partition, an unloadable
    /// manifest), or reading the found record failed.
    #[error(transparent)]
    Fetch(#[from] FetchError),
}

/// Records of one request stored in one partition, as a partial failure reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredRange {
    /// The partition.
    pub partition: u32,
    /// Offset of the first of the request's records there.
    pub base_offset: u64,
    /// How many of the request's records are there.
    pub record_count: u64,
}

/// Why a produce failed. Nothing of a failed produce is stored, except in
/// [`ProduceError::Partial`]: records of one request that go to different partitions are
/// separate appends, and one can fail after another was stored.
#[derive(Debug, Error)]
pub enum ProduceError {
    /// Some partitions' records were stored, then another partition's append failed.
    #[error("partition {failed}: {source}")]
    Partial {
        /// What was stored, per partition.
        stored: Vec<StoredRange>,
        /// The first partition whose append failed.
        failed: u32,
        /// Whether the request came from an idempotent producer (its retry is safe).
        idempotent: bool,
        /// Why that partition's append failed.
        #[source]
        source: Box<ProduceError>,
    },
    /// The topic or partition does not exist, or is internal.
    #[error(transparent)]
    Lookup(#[from] LookupError),
    /// The request is well-formed but unacceptable (no records, too many, a bad timestamp or
    /// sequence).
    #[error("{0}")]
    Invalid(String),
    /// A compacted topic got a record without a key.
    #[error("{0}")]
    KeyRequired(String),
    /// Raw bytes that are not valid Kafka record batches.
    #[error("{0}")]
    BadRecordBatch(String),
    /// A batch feature Strata does not implement (transactions, control batches).
    #[error("{0}")]
    UnsupportedRecordBatch(String),
    /// A producer id or epoch this server did not issue.
    #[error("{0}")]
    InvalidProducer(String),
    /// A producer id issued to another principal.
    #[error(
        "producer id {producer_id} belongs to another principal; request your own with POST /v1/producers"
    )]
    NotProducerOwner {
        /// The producer id.
        producer_id: i64,
    },
    /// An epoch older than the newest issued for the id: another session took over.
    #[error("producer {producer_id} epoch {epoch} is fenced by epoch {current}")]
    ProducerFenced {
        /// The producer id.
        producer_id: i64,
        /// The epoch of the request.
        epoch: i16,
        /// The newest epoch issued.
        current: i16,
    },
    /// The engine refused or failed the append.
    #[error(transparent)]
    Append(#[from] AppendError),
    /// Reading back what an idempotent retry stored the first time failed.
    #[error(transparent)]
    StoredRead(#[from] ReadError),
    /// A stored batch failed validation while its timestamps were read back.
    #[error("stored batch failed validation: {0}")]
    Corrupt(#[source] BatchError),
    /// The engine broke one of its promises (an append without an acknowledgement).
    #[error("internal error: {0}")]
    Internal(&'static str),
}

/// Why delete-records failed. The bucket is trimmed before the local log, so a failure leaves
/// either nothing changed or only the bucket trimmed (readers still see the records locally
/// until a retry trims the local log too); the records are never half gone.
#[derive(Debug, Error)]
pub enum DeleteRecordsError {
    /// The topic or partition does not exist, or is internal.
    #[error(transparent)]
    Lookup(#[from] LookupError),
    /// The offset is above the high watermark.
    #[error(transparent)]
    OutOfRange(#[from] OffsetOutOfRange),
    /// Opening the partition's remote part or writing its manifest failed.
    #[error(transparent)]
    Remote(#[from] TieringError),
    /// Moving the local log start failed.
    #[error(transparent)]
    Local(#[from] AppendError),
    /// A legal hold keeps records below the requested offset.
    #[error(
        "partition {partition}: legal hold {id} ({reason}) keeps offset {held_from} and later; \
         delete-records may go up to {held_from}"
    )]
    Held {
        /// The partition.
        partition: u32,
        /// The lowest offset the holds keep.
        held_from: u64,
        /// The id of a hold that keeps it.
        id: String,
        /// That hold's reason.
        reason: String,
    },
}

/// Why a topic operation (create, configure, grow, delete, describe segments) failed.
#[derive(Debug, Error)]
pub enum TopicError {
    /// The topic does not exist or is internal.
    #[error(transparent)]
    Lookup(#[from] LookupError),
    /// The catalog refused or failed the change.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// An Object Lock setting on a store that cannot lock objects.
    #[error(
        "remote_object_lock_days: the tiered store is a local folder, which cannot lock \
         objects (WORM); use an S3 bucket with Object Lock enabled"
    )]
    LockWithoutWorm,
    /// The partition's remote part could not be opened.
    #[error(transparent)]
    Remote(#[from] TieringError),
    /// A deleted topic's committed offsets could not be deleted before its name was reused.
    #[error(transparent)]
    Offsets(#[from] OffsetStoreError),
    /// A legal hold from an offset whose records are already deleted.
    #[error(
        "partition {partition} starts at offset {log_start}: the records from \
         {start_offset} to {} are already deleted and no hold can keep them; hold from \
         {log_start} on",
        log_start.saturating_sub(1)
    )]
    HoldOnDeleted {
        /// The partition.
        partition: u32,
        /// The hold's first offset.
        start_offset: u64,
        /// The partition's first stored offset (in the bucket too).
        log_start: u64,
        /// The partition's high watermark.
        high_watermark: u64,
    },
    /// A deleted topic of this name still has objects in tiered storage.
    #[error("a deleted topic named '{0}' is still being removed from tiered storage; retry later")]
    StillDeleting(String),
}

/// Why issuing a producer identity failed.
pub type InitProducerError = ProducerRegistryError;

/// Why a consumer-group operation failed.
#[derive(Debug, Error)]
pub enum GroupOpError {
    /// A topic or partition does not exist, or is internal.
    #[error(transparent)]
    Lookup(#[from] LookupError),
    /// A group id outside `[A-Za-z0-9._-]{1,255}`.
    #[error(transparent)]
    InvalidGroupId(#[from] InvalidName),
    /// A well-formed but unacceptable request.
    #[error("{0}")]
    Invalid(String),
    /// The group has neither members nor committed offsets.
    #[error("group {group} not found")]
    GroupNotFound {
        /// The group id.
        group: String,
    },
    /// The change needs a group without live members.
    #[error("group {group} has live members{hint}")]
    LiveMembers {
        /// The group id.
        group: String,
        /// What the caller can do about it.
        hint: &'static str,
    },
    /// Membership refused the request (unknown member, stale generation, ...).
    #[error(transparent)]
    Membership(#[from] GroupError),
    /// Committed offsets could not be stored or read.
    #[error(transparent)]
    Offsets(#[from] OffsetStoreError),
    /// With `auto_offset_reset = none`, a partition has no usable committed offset.
    #[error("{0}")]
    NoValidOffset(String),
    /// An explicit offset outside the log.
    #[error(transparent)]
    OutOfRange(#[from] OffsetOutOfRange),
    /// A commit past the partition's high watermark.
    #[error(
        "offset {requested} is past the high watermark {high_watermark} of topic '{topic}' \
         partition {partition}: a group can commit at most the high watermark"
    )]
    CommitPastEnd {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The committed offset.
        requested: u64,
        /// The partition's first stored offset.
        log_start: u64,
        /// The partition's high watermark.
        high_watermark: u64,
    },
    /// Reading records for the member (or for lag) failed.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// A local timestamp lookup failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The read's audit entry could not be written, so nothing may be sent.
    #[error(transparent)]
    Audit(#[from] super::audit::AuditUnavailable),
}

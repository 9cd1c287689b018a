//! The error contract: every 4xx and 5xx response carries an [`ErrorBody`] whose `code` is an
//! [`ErrorCode`].
//!
//! Clients branch on `code`, never on `message` or on the HTTP status alone: several codes share a
//! status (`topic_not_found` and `partition_not_found` are both 404), and the code says which
//! thing went wrong. The code also decides the status and whether a retry can succeed, so the
//! server cannot answer `offset_out_of_range` with anything but 416.
//!
//! Invariant: a code's wire name, status and retryability never change once released. Codes are
//! never renamed or reused; a code that is no longer produced moves to the retired list below.
//!
//! Retired codes (never reuse these names): none yet.

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Stable, machine-readable reason for an error response.
///
/// Branch on this, not on `message`. The HTTP status follows from the code; `retryable` in the
/// body says whether repeating the same request can succeed. Codes (status in parentheses):
///
/// - `audit_unavailable` (503, retryable): the read could not be recorded in the read audit, so no records were sent.
/// - `bad_header` (400): a request header could not be parsed.
/// - `bad_json` (400): the body is not valid JSON or does not match the request schema.
/// - `bad_path` (400): a path segment could not be parsed, such as a non-numeric partition.
/// - `bad_query` (400): a query parameter could not be parsed or is unknown.
/// - `bad_record_batch` (400): raw Kafka RecordBatch bytes do not decode (CRC, length or magic).
/// - `busy` (503, retryable): the server is overloaded; retry after a short backoff.
/// - `conflict` (409): the request conflicts with the current state of the resource.
/// - `corrupt` (500): stored data failed an integrity check while serving the request.
/// - `disk_full` (503, retryable): the data disk has no space left; retry after `Retry-After`.
/// - `forbidden` (403): the caller may not do this operation on this resource; the message names both.
/// - `group_not_found` (404): no consumer group has this id.
/// - `hold_not_found` (404): the topic has no legal hold with this id.
/// - `internal` (500): an unexpected server error; the server logs the detail.
/// - `internal_topic` (409): internal topics (`__` prefix) are not writable or configurable.
/// - `invalid` (422): the request is well-formed but a value is not acceptable.
/// - `invalid_config` (422): a topic config key is unknown or its value is out of range.
/// - `invalid_producer` (422): the producer id is unknown to the server.
/// - `invalid_topic_name` (422): the topic name breaks the naming rules.
/// - `key_not_found` (404): no API key has this id.
/// - `key_required` (422): a record without a key was sent to a compacted topic.
/// - `legal_hold` (409): a legal hold keeps records the request would remove.
/// - `method_not_allowed` (405): the route exists but not for this HTTP method.
/// - `no_valid_offset` (409): a member has no usable committed offset and `auto_offset_reset` is `none`.
/// - `not_acceptable` (406): no representation matches the `Accept` header.
/// - `not_found` (404): no such route.
/// - `offset_mismatch` (412): conditional append failed; `log_end_offset` holds the actual end.
/// - `offset_out_of_range` (416): the offset is outside the log; the body holds the valid range.
/// - `partition_not_assigned` (409): the group member does not own the partition.
/// - `partition_not_found` (404): the topic has no such partition.
/// - `producer_not_found` (404): no producer id like this was issued by this server.
/// - `producer_fenced` (409): a newer epoch of this producer id exists; this session is stale.
/// - `quota_exceeded` (429, retryable): the caller used up its quota; retry after `Retry-After` seconds. Nothing of the request took effect.
/// - `record_too_large` (413): a batch exceeds the topic's `max_message_bytes` (per batch, as
///   in Kafka: a raw batch, or one JSON request's records for one partition).
/// - `request_timeout` (408, retryable): the request body did not arrive within the server's time limit.
/// - `request_too_large` (413): the request body exceeds the server's limit.
/// - `sequence_gap` (409): the producer sequence is not the next one expected for the partition.
/// - `stale_generation` (409): the request carries an old group generation.
/// - `storage_unavailable` (503, retryable): the storage layer cannot serve the request now.
/// - `timeout` (504, retryable): the server gave up waiting; the request may have taken effect.
/// - `topic_already_exists` (409): a topic with this name exists.
/// - `too_many_open_files` (503, retryable): the server reached its open-file limit.
/// - `topic_not_found` (404): no topic has this name.
/// - `unauthenticated` (401): no valid `Authorization: Bearer` token; the message never says whether a key exists.
/// - `unavailable` (503, retryable): the server is starting up or shutting down.
/// - `unknown_member` (409): the member left, was evicted or was replaced.
/// - `unsupported_media_type` (415): the `Content-Type` is not accepted by this endpoint.
/// - `unsupported_record_batch` (422): a record batch uses a feature Strata does not implement.
// The identity of a code is its snake_case wire name, not a discriminant, so variants carry no
// explicit values. Keep variants sorted by wire name; the tests check it.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The topic audits reads (`audit_reads`) and the audit entry of this read could not be
    /// written durably, so the records were not sent: an audited topic never discloses a
    /// record its audit log does not hold. Retry later.
    AuditUnavailable,
    /// A request header could not be parsed (for example `Last-Event-ID` is not an offset).
    BadHeader,
    /// The body is not valid JSON, has a value of the wrong type, or has an unknown field.
    BadJson,
    /// A path segment could not be parsed, such as a partition that is not a number.
    BadPath,
    /// A query parameter could not be parsed, or the endpoint does not know it.
    BadQuery,
    /// Raw Kafka RecordBatch bytes do not decode: wrong CRC, length or magic byte.
    BadRecordBatch,
    /// The server is overloaded (queues full); retry after a short backoff.
    Busy,
    /// The request conflicts with the current state of the resource.
    Conflict,
    /// Stored data failed an integrity check while serving the request.
    Corrupt,
    /// The data disk is full. Nothing of the request was stored; the server recovers by itself
    /// once space is freed, so retry after the `Retry-After` header's delay.
    DiskFull,
    /// The authenticated caller may not do this operation on this resource (an ACL denies it,
    /// or none allows it). The message names the operation and the resource, never the rule.
    Forbidden,
    /// No consumer group has this id (it has no members and no committed offsets).
    GroupNotFound,
    /// The topic has no legal hold with this id (it was released, or never existed).
    HoldNotFound,
    /// An unexpected server error; the message says nothing internal, the server log does.
    Internal,
    /// Internal topics (names starting with `__`, such as `__consumer_offsets`) belong to the
    /// server: they can be read, but never produced to, reconfigured, grown, trimmed, deleted or
    /// subscribed to through the public API.
    InternalTopic,
    /// The request is well-formed but a value is not acceptable (for example `partitions: 0`).
    Invalid,
    /// A topic config key is unknown, or its value has the wrong type or is out of range.
    InvalidConfig,
    /// The producer id is unknown to the server; obtain one from `POST /v1/producers`.
    InvalidProducer,
    /// The topic name is not 1 to 249 characters of `[A-Za-z0-9._-]`, is `.` or `..`, or uses
    /// the `__` prefix reserved for internal topics.
    InvalidTopicName,
    /// No API key has this id (it was revoked, or never existed).
    KeyNotFound,
    /// A record without a key was sent to a compacted topic, where the key is the identity.
    KeyRequired,
    /// A legal hold keeps records the request would remove (delete-records, topic deletion);
    /// the message names the hold and its reason. Release the hold first.
    LegalHold,
    /// The route exists, but not for this HTTP method.
    MethodNotAllowed,
    /// A group member has no usable committed offset for a partition (none, or deleted by
    /// retention) and joined with `auto_offset_reset: none`; the message names the partition.
    NoValidOffset,
    /// None of the media types in the `Accept` header can be served by this endpoint.
    NotAcceptable,
    /// No route matches the request path.
    NotFound,
    /// Conditional append failed: the log end offset differs from `expected_offset`. The body's
    /// `log_end_offset` holds the actual value.
    OffsetMismatch,
    /// The offset is below the log start or above the high watermark. The body's
    /// `earliest_offset` and `latest_offset` hold the valid range.
    OffsetOutOfRange,
    /// The group member does not own this partition in the current generation.
    PartitionNotAssigned,
    /// The topic exists but has no partition with this number.
    PartitionNotFound,
    /// A newer epoch of this producer id was initialized; this producer session is stale and
    /// must stop.
    ProducerFenced,
    /// `POST /v1/producers` named a producer id this server never issued.
    ProducerNotFound,
    /// The caller used up its quota of requests or bytes per second. Nothing of the request
    /// took effect; retry after the `Retry-After` header's delay.
    QuotaExceeded,
    /// A record batch exceeds the topic's `max_message_bytes`. As in Kafka the limit is per
    /// batch: a raw batch as sent, or the records of one JSON request that go to one partition,
    /// which are stored as one batch.
    RecordTooLarge,
    /// The request body did not arrive whole within the server's time limit
    /// (`request_body_timeout_ms`); nothing of the request took effect.
    RequestTimeout,
    /// The request body exceeds the server's request size limit.
    RequestTooLarge,
    /// The producer sequence for a partition is not the next one the server expects: records
    /// were lost or reordered between the producer and the server.
    SequenceGap,
    /// The request carries an old group generation: heartbeat to learn the current one and
    /// the assignment that goes with it.
    StaleGeneration,
    /// The storage layer (disk or object store) cannot serve the request right now.
    StorageUnavailable,
    /// The server gave up waiting (for example for an fsync). The request may still have taken
    /// effect; retrying with producer fields makes the retry safe.
    Timeout,
    /// The server has as many files open as its limit allows (`ulimit -n`); retry later, and
    /// raise the limit or reduce the number of partitions.
    TooManyOpenFiles,
    /// A topic with this name already exists.
    TopicAlreadyExists,
    /// No topic has this name.
    TopicNotFound,
    /// The request has no `Authorization: Bearer` token, or one the server does not accept
    /// (unknown, revoked or malformed): the response never says which. The response carries
    /// `WWW-Authenticate: Bearer`.
    Unauthenticated,
    /// The server is starting up (recovering) or shutting down.
    Unavailable,
    /// The member id is not in the group: it left, was evicted (see the group description for
    /// the reason) or was replaced by a static member rejoining. Join again.
    UnknownMember,
    /// The request's `Content-Type` is not accepted by this endpoint.
    UnsupportedMediaType,
    /// A record batch uses a feature Strata does not implement yet: transactional or control
    /// batches. The message names the feature.
    UnsupportedRecordBatch,
}

impl ErrorCode {
    /// Every code, sorted by wire name. Useful for documentation and exhaustive tests.
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::AuditUnavailable,
        ErrorCode::BadHeader,
        ErrorCode::BadJson,
        ErrorCode::BadPath,
        ErrorCode::BadQuery,
        ErrorCode::BadRecordBatch,
        ErrorCode::Busy,
        ErrorCode::Conflict,
        ErrorCode::Corrupt,
        ErrorCode::DiskFull,
        ErrorCode::Forbidden,
        ErrorCode::GroupNotFound,
        ErrorCode::HoldNotFound,
        ErrorCode::Internal,
        ErrorCode::InternalTopic,
        ErrorCode::Invalid,
        ErrorCode::InvalidConfig,
        ErrorCode::InvalidProducer,
        ErrorCode::InvalidTopicName,
        ErrorCode::KeyNotFound,
        ErrorCode::KeyRequired,
        ErrorCode::LegalHold,
        ErrorCode::MethodNotAllowed,
        ErrorCode::NoValidOffset,
        ErrorCode::NotAcceptable,
        ErrorCode::NotFound,
        ErrorCode::OffsetMismatch,
        ErrorCode::OffsetOutOfRange,
        ErrorCode::PartitionNotAssigned,
        ErrorCode::PartitionNotFound,
        ErrorCode::ProducerFenced,
        ErrorCode::ProducerNotFound,
        ErrorCode::QuotaExceeded,
        ErrorCode::RecordTooLarge,
        ErrorCode::RequestTimeout,
        ErrorCode::RequestTooLarge,
        ErrorCode::SequenceGap,
        ErrorCode::StaleGeneration,
        ErrorCode::StorageUnavailable,
        ErrorCode::Timeout,
        ErrorCode::TooManyOpenFiles,
        ErrorCode::TopicAlreadyExists,
        ErrorCode::TopicNotFound,
        ErrorCode::Unauthenticated,
        ErrorCode::Unavailable,
        ErrorCode::UnknownMember,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::UnsupportedRecordBatch,
    ];

    /// The HTTP status code that every response with this code carries.
    pub fn status(&self) -> u16 {
        match self {
            ErrorCode::BadHeader
            | ErrorCode::BadJson
            | ErrorCode::BadPath
            | ErrorCode::BadQuery
            | ErrorCode::BadRecordBatch => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::GroupNotFound
            | ErrorCode::HoldNotFound
            | ErrorCode::KeyNotFound
            | ErrorCode::NotFound
            | ErrorCode::PartitionNotFound
            | ErrorCode::ProducerNotFound
            | ErrorCode::TopicNotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::NotAcceptable => 406,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::Conflict
            | ErrorCode::InternalTopic
            | ErrorCode::LegalHold
            | ErrorCode::NoValidOffset
            | ErrorCode::PartitionNotAssigned
            | ErrorCode::ProducerFenced
            | ErrorCode::SequenceGap
            | ErrorCode::StaleGeneration
            | ErrorCode::TopicAlreadyExists
            | ErrorCode::UnknownMember => 409,
            ErrorCode::OffsetMismatch => 412,
            ErrorCode::RecordTooLarge | ErrorCode::RequestTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::OffsetOutOfRange => 416,
            ErrorCode::QuotaExceeded => 429,
            ErrorCode::Invalid
            | ErrorCode::InvalidConfig
            | ErrorCode::InvalidProducer
            | ErrorCode::InvalidTopicName
            | ErrorCode::KeyRequired
            | ErrorCode::UnsupportedRecordBatch => 422,
            ErrorCode::Corrupt | ErrorCode::Internal => 500,
            ErrorCode::AuditUnavailable
            | ErrorCode::Busy
            | ErrorCode::DiskFull
            | ErrorCode::StorageUnavailable
            | ErrorCode::TooManyOpenFiles
            | ErrorCode::Unavailable => 503,
            ErrorCode::Timeout => 504,
        }
    }

    /// Whether repeating the identical request later can succeed without the client changing
    /// anything. Only transient server-side conditions are retryable.
    pub fn is_retryable(&self) -> bool {
        match self {
            ErrorCode::AuditUnavailable
            | ErrorCode::Busy
            | ErrorCode::DiskFull
            | ErrorCode::QuotaExceeded
            | ErrorCode::RequestTimeout
            | ErrorCode::StorageUnavailable
            | ErrorCode::Timeout
            | ErrorCode::TooManyOpenFiles
            | ErrorCode::Unavailable => true,
            ErrorCode::BadHeader
            | ErrorCode::BadJson
            | ErrorCode::BadPath
            | ErrorCode::BadQuery
            | ErrorCode::BadRecordBatch
            | ErrorCode::Conflict
            | ErrorCode::Corrupt
            | ErrorCode::Forbidden
            | ErrorCode::GroupNotFound
            | ErrorCode::HoldNotFound
            | ErrorCode::Internal
            | ErrorCode::InternalTopic
            | ErrorCode::Invalid
            | ErrorCode::InvalidConfig
            | ErrorCode::InvalidProducer
            | ErrorCode::InvalidTopicName
            | ErrorCode::KeyNotFound
            | ErrorCode::KeyRequired
            | ErrorCode::LegalHold
            | ErrorCode::MethodNotAllowed
            | ErrorCode::NotAcceptable
            | ErrorCode::NotFound
            | ErrorCode::NoValidOffset
            | ErrorCode::OffsetMismatch
            | ErrorCode::OffsetOutOfRange
            | ErrorCode::PartitionNotAssigned
            | ErrorCode::PartitionNotFound
            | ErrorCode::ProducerFenced
            | ErrorCode::ProducerNotFound
            | ErrorCode::RecordTooLarge
            | ErrorCode::RequestTooLarge
            | ErrorCode::SequenceGap
            | ErrorCode::StaleGeneration
            | ErrorCode::TopicAlreadyExists
            | ErrorCode::TopicNotFound
            | ErrorCode::Unauthenticated
            | ErrorCode::UnknownMember
            | ErrorCode::UnsupportedMediaType
            | ErrorCode::UnsupportedRecordBatch => false,
        }
    }

    /// The snake_case wire name, identical to the serde serialization.
    pub fn as_str(&self) -> &'static str {
        match self {
            ErrorCode::AuditUnavailable => "audit_unavailable",
            ErrorCode::BadHeader => "bad_header",
            ErrorCode::BadJson => "bad_json",
            ErrorCode::BadPath => "bad_path",
            ErrorCode::BadQuery => "bad_query",
            ErrorCode::BadRecordBatch => "bad_record_batch",
            ErrorCode::Busy => "busy",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Corrupt => "corrupt",
            ErrorCode::DiskFull => "disk_full",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::GroupNotFound => "group_not_found",
            ErrorCode::HoldNotFound => "hold_not_found",
            ErrorCode::Internal => "internal",
            ErrorCode::InternalTopic => "internal_topic",
            ErrorCode::Invalid => "invalid",
            ErrorCode::InvalidConfig => "invalid_config",
            ErrorCode::InvalidProducer => "invalid_producer",
            ErrorCode::InvalidTopicName => "invalid_topic_name",
            ErrorCode::KeyNotFound => "key_not_found",
            ErrorCode::KeyRequired => "key_required",
            ErrorCode::LegalHold => "legal_hold",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::NotAcceptable => "not_acceptable",
            ErrorCode::NotFound => "not_found",
            ErrorCode::NoValidOffset => "no_valid_offset",
            ErrorCode::OffsetMismatch => "offset_mismatch",
            ErrorCode::OffsetOutOfRange => "offset_out_of_range",
            ErrorCode::PartitionNotAssigned => "partition_not_assigned",
            ErrorCode::PartitionNotFound => "partition_not_found",
            ErrorCode::ProducerFenced => "producer_fenced",
            ErrorCode::ProducerNotFound => "producer_not_found",
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::RecordTooLarge => "record_too_large",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::RequestTooLarge => "request_too_large",
            ErrorCode::SequenceGap => "sequence_gap",
            ErrorCode::StaleGeneration => "stale_generation",
            ErrorCode::StorageUnavailable => "storage_unavailable",
            ErrorCode::Timeout => "timeout",
            ErrorCode::TooManyOpenFiles => "too_many_open_files",
            ErrorCode::TopicAlreadyExists => "topic_already_exists",
            ErrorCode::TopicNotFound => "topic_not_found",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::UnknownMember => "unknown_member",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::UnsupportedRecordBatch => "unsupported_record_batch",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The body of every error response: `{"error": {"code": ..., "message": ..., "retryable": ...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(
    json!({"error": {
        "code": "offset_out_of_range",
        "message": "offset 120 is outside the log of orders/0, valid offsets are 100..=118",
        "retryable": false,
        "earliest_offset": 100,
        "latest_offset": 118
    }}),
    json!({"error": {
        "code": "topic_not_found",
        "message": "topic 'orders' does not exist",
        "retryable": false
    }})
))]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong, as a stable code, a human-readable message and offset context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorDetail {
    /// Stable reason to branch on; decides the HTTP status.
    pub code: ErrorCode,
    /// Human-readable explanation for logs and people. Its wording may change between
    /// releases: do not parse it.
    pub message: String,
    /// Whether repeating the identical request later can succeed. True only for the transient
    /// conditions marked retryable in `ErrorCode` (`audit_unavailable`, `busy`, `disk_full`,
    /// `quota_exceeded`, `request_timeout`, `storage_unavailable`, `timeout`,
    /// `too_many_open_files`, `unavailable`).
    pub retryable: bool,
    /// On `offset_out_of_range`: the first offset still readable in the partition (log start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earliest_offset: Option<u64>,
    /// On `offset_out_of_range`: the high watermark, the last valid fetch position (fetching at
    /// it waits for new records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_offset: Option<u64>,
    /// On `offset_mismatch`: the actual log end offset, the offset the next appended record
    /// would get. Retry the conditional append with this as `expected_offset` if that is still
    /// what you intend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_end_offset: Option<u64>,
    /// On a produce whose records went to several partitions: the partitions whose records
    /// were stored before another partition's append failed (each partition is a separate
    /// append). Send only the other partitions' records again, or repeat the whole request if
    /// it came from an idempotent producer (stored batches are then answered as duplicates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<Vec<crate::records::PartitionAppend>>,
}

impl ErrorBody {
    /// An error body for `code` with `message`; `retryable` follows from the code.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            error: ErrorDetail {
                code,
                message: message.into(),
                retryable: code.is_retryable(),
                earliest_offset: None,
                latest_offset: None,
                log_end_offset: None,
                stored: None,
            },
        }
    }

    /// Adds the valid offset range, as an `offset_out_of_range` response carries it.
    pub fn with_offset_range(mut self, earliest_offset: u64, latest_offset: u64) -> Self {
        self.error.earliest_offset = Some(earliest_offset);
        self.error.latest_offset = Some(latest_offset);
        self
    }

    /// Adds the actual log end offset, as an `offset_mismatch` response carries it.
    pub fn with_log_end_offset(mut self, log_end_offset: u64) -> Self {
        self.error.log_end_offset = Some(log_end_offset);
        self
    }

    /// Adds what a partly failed produce stored.
    pub fn with_stored(mut self, stored: Vec<crate::records::PartitionAppend>) -> Self {
        self.error.stored = Some(stored);
        self
    }

    /// The HTTP status of this error, from its code.
    pub fn status(&self) -> u16 {
        self.error.code.status()
    }
}

#[cfg(test)]
mod tests;

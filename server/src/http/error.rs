//! `ApiError`: every failure a handler can return, rendered as our one error body
//! `{"error": {"code", "message", "retryable", ...}}` with the status the code implies.
//!
//! Conversions from the engine's and catalog's errors match every variant explicitly, so a new
//! variant forces a decision here. 5xx bodies say nothing internal; the full error chain is logged
//! once.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use strata_openapi::{ErrorBody, ErrorCode, PartitionAppend};

use crate::broker::audit::AuditUnavailable;
use crate::broker::error::{
    DeleteRecordsError, FetchError, GroupOpError, ListOffsetsError, LookupError, OffsetOutOfRange,
    ProduceError, StoredRange, TopicError,
};
use crate::broker::reader::ReaderError;
use crate::groups::coordinator::GroupError;
use crate::groups::offsets::OffsetStoreError;
use crate::log::producer_state::ProducerError;
use crate::log::remote::RemoteReadError;
use crate::log::{AppendError, OpenError, ReadError};
use crate::producers::ProducerRegistryError;
use crate::tiering::remote_log::{FailureKind, failure_kind};
use crate::topics::catalog::CatalogError;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    body: ErrorBody,
    /// Seconds for `Retry-After` when the code's default does not fit (quotas).
    retry_after: Option<u64>,
}

impl ApiError {
    /// An error with a code and a message for the client.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            body: ErrorBody::new(code, message),
            retry_after: None,
        }
    }

    /// 416 with the valid range.
    pub fn out_of_range(requested: u64, earliest: u64, latest: u64) -> Self {
        let message = format!(
            "offset {requested} is out of range: valid offsets are {earliest} to {latest} \
             (the high watermark)"
        );
        Self::new(ErrorCode::OffsetOutOfRange, message)
            .with(|b| b.with_offset_range(earliest, latest))
    }

    /// An internal failure: logged with its cause, answered without details.
    pub fn internal(code: ErrorCode, error: &dyn std::error::Error) -> Self {
        let mut chain = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            chain.push_str(": ");
            chain.push_str(&cause.to_string());
            source = cause.source();
        }
        tracing::error!(code = code.as_str(), error = %chain, "request failed");
        let message = match code {
            ErrorCode::StorageUnavailable => "storage is unavailable; retry later",
            ErrorCode::Corrupt => "stored data failed validation",
            ErrorCode::DiskFull => "the data disk is full; nothing was stored; retry later",
            ErrorCode::TooManyOpenFiles => {
                "the server reached its open-file limit; nothing was stored; retry later"
            }
            ErrorCode::AuditUnavailable => {
                "the topic audits reads and this read could not be recorded, so no records were \
                 sent; retry later"
            }
            _ => "internal error",
        };
        Self::new(code, message)
    }

    fn with(mut self, f: impl FnOnce(ErrorBody) -> ErrorBody) -> Self {
        self.body = f(self.body);
        self
    }

    /// The body this error is answered with.
    pub fn body(&self) -> &ErrorBody {
        &self.body
    }

    /// The error code.
    pub fn code(&self) -> ErrorCode {
        self.body.error.code
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.body.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let code = self.body.error.code;
        let explicit = self.retry_after;
        let mut response = (status, axum::Json(self.body)).into_response();
        // For the error counter and the access log (http/observe.rs).
        response.extensions_mut().insert(code);
        // Retryable answers say when: a full disk needs an operator or a retention pass.
        let retry_after = match code {
            _ if explicit.is_some() => explicit,
            ErrorCode::DiskFull => Some(crate::limits::DISK_FULL_RETRY_AFTER_S),
            code if code.is_retryable() => Some(crate::limits::RETRY_AFTER_S),
            _ => None,
        };
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds),
            );
        }
        // RFC 6750: a 401 names the scheme that would be accepted.
        if code == ErrorCode::Unauthenticated {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer realm=\"strata\""),
            );
        }
        response
    }
}

/// The code of a failed disk operation: a full disk and the open-file limit are named as such
/// (clients and operators act differently on them), anything else is storage unavailable.
pub fn io_error_code(error: &crate::io::IoError) -> ErrorCode {
    os_error_code(&error.source)
}

/// [`io_error_code`] for a plain `std::io::Error`.
fn os_error_code(error: &std::io::Error) -> ErrorCode {
    match error.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => ErrorCode::DiskFull,
        Some(libc::EMFILE) | Some(libc::ENFILE) => ErrorCode::TooManyOpenFiles,
        _ => ErrorCode::StorageUnavailable,
    }
}

impl From<CatalogError> for ApiError {
    fn from(error: CatalogError) -> Self {
        match &error {
            CatalogError::InvalidName { .. } => {
                ApiError::new(ErrorCode::InvalidTopicName, error.to_string())
            }
            CatalogError::InvalidPartitions { .. } => {
                ApiError::new(ErrorCode::Invalid, error.to_string())
            }
            CatalogError::Config(_) => ApiError::new(ErrorCode::InvalidConfig, error.to_string()),
            CatalogError::AlreadyExists(_) => {
                ApiError::new(ErrorCode::TopicAlreadyExists, error.to_string())
            }
            CatalogError::NotFound(_) => ApiError::new(ErrorCode::TopicNotFound, error.to_string()),
            CatalogError::Internal(_) => ApiError::new(ErrorCode::InternalTopic, error.to_string()),
            CatalogError::Io(io) => ApiError::internal(io_error_code(io), &error),
            CatalogError::Partition(open) => {
                let code = match open {
                    OpenError::Io(io) => io_error_code(io),
                    OpenError::Dir { source, .. } => os_error_code(source),
                    OpenError::Config(_) | OpenError::Meta(_) | OpenError::Swap(_) => {
                        ErrorCode::StorageUnavailable
                    }
                };
                ApiError::internal(code, &error)
            }
            CatalogError::Dir { source, .. } => ApiError::internal(os_error_code(source), &error),
            CatalogError::Corrupt { .. } => ApiError::internal(ErrorCode::Corrupt, &error),
            CatalogError::Held { .. } => ApiError::new(ErrorCode::LegalHold, error.to_string()),
            CatalogError::InvalidHold(_) => ApiError::new(ErrorCode::Invalid, error.to_string()),
            CatalogError::HoldNotFound { .. } => {
                ApiError::new(ErrorCode::HoldNotFound, error.to_string())
            }
        }
    }
}

impl From<AppendError> for ApiError {
    fn from(error: AppendError) -> Self {
        match &error {
            AppendError::BatchTooLarge { .. } => {
                ApiError::new(ErrorCode::RecordTooLarge, error.to_string())
            }
            AppendError::Busy => ApiError::new(ErrorCode::Busy, error.to_string()),
            AppendError::Io(io) => ApiError::internal(io_error_code(io), &error),
            AppendError::Poisoned { .. } => {
                ApiError::internal(ErrorCode::StorageUnavailable, &error)
            }
            AppendError::Closed => ApiError::new(ErrorCode::Unavailable, error.to_string()),
            AppendError::OffsetMismatch { actual, .. } => {
                let actual = *actual;
                ApiError::new(ErrorCode::OffsetMismatch, error.to_string())
                    .with(|b| b.with_log_end_offset(actual))
            }
            AppendError::OffsetOutOfRange(range) => (*range).into(),
            AppendError::Producer(producer) => match producer {
                ProducerError::Fenced { .. } => {
                    ApiError::new(ErrorCode::ProducerFenced, error.to_string())
                }
                ProducerError::SequenceGap { .. } => {
                    ApiError::new(ErrorCode::SequenceGap, error.to_string())
                }
            },
        }
    }
}

impl From<ReadError> for ApiError {
    fn from(error: ReadError) -> Self {
        match &error {
            ReadError::OffsetOutOfRange(range) => (*range).into(),
            ReadError::Corrupt(_) => ApiError::internal(ErrorCode::Corrupt, &error),
            ReadError::Io(io) => ApiError::internal(io_error_code(io), &error),
        }
    }
}

impl From<crate::tiering::TieringError> for ApiError {
    fn from(error: crate::tiering::TieringError) -> Self {
        // Bytes that fail a digest or CRC stay corrupt however often they are read again.
        match failure_kind(&error) {
            FailureKind::Corrupt => ApiError::internal(ErrorCode::Corrupt, &error),
            FailureKind::Unavailable => ApiError::internal(ErrorCode::StorageUnavailable, &error),
            FailureKind::Interrupted => ApiError::internal(ErrorCode::Unavailable, &error),
            FailureKind::Conflict => ApiError::new(ErrorCode::Conflict, error.to_string()),
            FailureKind::Internal => ApiError::internal(ErrorCode::Internal, &error),
        }
    }
}

impl From<RemoteReadError> for ApiError {
    fn from(error: RemoteReadError) -> Self {
        let code = match &error {
            RemoteReadError::Corrupt(_) => ErrorCode::Corrupt,
            RemoteReadError::Unavailable(_) => ErrorCode::StorageUnavailable,
            RemoteReadError::Interrupted(_) => ErrorCode::Unavailable,
            RemoteReadError::Internal(_) => ErrorCode::Internal,
        };
        ApiError::internal(code, &error)
    }
}

impl From<ReaderError> for ApiError {
    fn from(error: ReaderError) -> Self {
        match error {
            ReaderError::Local(error) => error.into(),
            ReaderError::Remote(error) => error.into(),
        }
    }
}

impl From<LookupError> for ApiError {
    fn from(error: LookupError) -> Self {
        let code = match &error {
            LookupError::TopicNotFound { .. } => ErrorCode::TopicNotFound,
            LookupError::PartitionNotFound { .. } => ErrorCode::PartitionNotFound,
            LookupError::InternalTopic { .. } => ErrorCode::InternalTopic,
            LookupError::Forbidden(_) => ErrorCode::Forbidden,
        };
        ApiError::new(code, error.to_string())
    }
}

impl From<OffsetOutOfRange> for ApiError {
    fn from(range: OffsetOutOfRange) -> Self {
        ApiError::out_of_range(range.requested, range.earliest, range.latest)
    }
}

impl From<FetchError> for ApiError {
    fn from(error: FetchError) -> Self {
        match error {
            FetchError::Lookup(lookup) => lookup.into(),
            FetchError::OffsetAndTimestamp | FetchError::InvalidTimestamp(_) => {
                ApiError::new(ErrorCode::Invalid, error.to_string())
            }
            FetchError::OutOfRange(range) => range.into(),
            FetchError::Read(read) => read.into(),
            FetchError::Corrupt(_) => ApiError::internal(ErrorCode::Corrupt, &error),
            FetchError::Audit(audit) => audit.into(),
        }
    }
}

impl From<ListOffsetsError> for ApiError {
    fn from(error: ListOffsetsError) -> Self {
        match error {
            ListOffsetsError::InvalidTimestamp { .. } => {
                ApiError::new(ErrorCode::Invalid, error.to_string())
            }
            ListOffsetsError::Fetch(fetch) => fetch.into(),
        }
    }
}

impl From<ProduceError> for ApiError {
    fn from(error: ProduceError) -> Self {
        let plain = |code: ErrorCode, error: ProduceError| ApiError::new(code, error.to_string());
        match error {
            ProduceError::Partial {
                stored,
                failed,
                idempotent,
                source,
            } => partial_produce(stored, failed, idempotent, (*source).into()),
            ProduceError::Lookup(lookup) => lookup.into(),
            ProduceError::Append(append) => append.into(),
            ProduceError::StoredRead(read) => read.into(),
            error @ ProduceError::Invalid(_) => plain(ErrorCode::Invalid, error),
            error @ ProduceError::KeyRequired(_) => plain(ErrorCode::KeyRequired, error),
            error @ ProduceError::BadRecordBatch(_) => plain(ErrorCode::BadRecordBatch, error),
            error @ ProduceError::UnsupportedRecordBatch(_) => {
                plain(ErrorCode::UnsupportedRecordBatch, error)
            }
            error @ ProduceError::InvalidProducer(_) => plain(ErrorCode::InvalidProducer, error),
            error @ ProduceError::ProducerFenced { .. } => plain(ErrorCode::ProducerFenced, error),
            error @ ProduceError::NotProducerOwner { .. } => plain(ErrorCode::Forbidden, error),
            error @ ProduceError::Corrupt(_) => ApiError::internal(ErrorCode::Corrupt, &error),
            error @ ProduceError::Internal(_) => ApiError::internal(ErrorCode::Internal, &error),
        }
    }
}

/// A produce that stored some partitions' records before another partition failed: the failed
/// partition's error, with what was stored in `stored` and the message. Repeating the request
/// would store those records twice unless its producer is idempotent, so only then can it be
/// `retryable`.
fn partial_produce(
    stored: Vec<StoredRange>,
    failed: u32,
    idempotent: bool,
    failure: ApiError,
) -> ApiError {
    let ranges: Vec<String> = stored
        .iter()
        .map(|range| {
            let last = range.base_offset + range.record_count.saturating_sub(1);
            format!(
                "partition {} (offsets {} to {last})",
                range.partition, range.base_offset
            )
        })
        .collect();
    let advice = if idempotent {
        "repeating the request is safe: the stored batches are answered as duplicates"
    } else {
        "send only the other partitions' records again"
    };
    let message = format!(
        "partition {failed}: {}; the request's records for {} were stored (see `stored`); {advice}",
        failure.body.error.message,
        ranges.join(", ")
    );
    let appends = stored
        .into_iter()
        .map(|range| PartitionAppend {
            partition: range.partition,
            base_offset: range.base_offset,
            record_count: range.record_count,
        })
        .collect();
    failure.with(|mut body| {
        body.error.retryable &= idempotent;
        body.error.message = message;
        body.with_stored(appends)
    })
}

impl From<DeleteRecordsError> for ApiError {
    fn from(error: DeleteRecordsError) -> Self {
        match error {
            DeleteRecordsError::Lookup(lookup) => lookup.into(),
            DeleteRecordsError::OutOfRange(range) => range.into(),
            DeleteRecordsError::Remote(remote) => remote.into(),
            DeleteRecordsError::Local(local) => local.into(),
            held @ DeleteRecordsError::Held { .. } => {
                ApiError::new(ErrorCode::LegalHold, held.to_string())
            }
        }
    }
}

impl From<TopicError> for ApiError {
    fn from(error: TopicError) -> Self {
        match error {
            TopicError::Lookup(lookup) => lookup.into(),
            TopicError::Catalog(catalog) => catalog.into(),
            TopicError::LockWithoutWorm => {
                ApiError::new(ErrorCode::InvalidConfig, error.to_string())
            }
            TopicError::Remote(remote) => remote.into(),
            TopicError::Offsets(offsets) => offsets.into(),
            TopicError::HoldOnDeleted {
                log_start,
                high_watermark,
                ..
            } => ApiError::new(ErrorCode::OffsetOutOfRange, error.to_string())
                .with(|b| b.with_offset_range(log_start, high_watermark)),
            TopicError::StillDeleting(_) => {
                ApiError::new(ErrorCode::StorageUnavailable, error.to_string())
            }
        }
    }
}

impl From<GroupOpError> for ApiError {
    fn from(error: GroupOpError) -> Self {
        match error {
            GroupOpError::Lookup(lookup) => lookup.into(),
            GroupOpError::InvalidGroupId(_) | GroupOpError::Invalid(_) => {
                ApiError::new(ErrorCode::Invalid, error.to_string())
            }
            GroupOpError::GroupNotFound { .. } => {
                ApiError::new(ErrorCode::GroupNotFound, error.to_string())
            }
            GroupOpError::LiveMembers { .. } => {
                ApiError::new(ErrorCode::Conflict, error.to_string())
            }
            GroupOpError::Membership(membership) => membership.into(),
            GroupOpError::Offsets(offsets) => offsets.into(),
            GroupOpError::NoValidOffset(_) => {
                ApiError::new(ErrorCode::NoValidOffset, error.to_string())
            }
            GroupOpError::OutOfRange(range) => range.into(),
            GroupOpError::CommitPastEnd {
                log_start,
                high_watermark,
                ..
            } => ApiError::new(ErrorCode::OffsetOutOfRange, error.to_string())
                .with(|b| b.with_offset_range(log_start, high_watermark)),
            GroupOpError::Fetch(fetch) => fetch.into(),
            GroupOpError::Read(read) => read.into(),
            GroupOpError::Audit(audit) => audit.into(),
        }
    }
}

impl From<AuditUnavailable> for ApiError {
    fn from(error: AuditUnavailable) -> Self {
        // The detail (a disk or catalog error) is logged, not shown to the reader.
        ApiError::internal(ErrorCode::AuditUnavailable, &error)
    }
}

impl From<GroupError> for ApiError {
    fn from(error: GroupError) -> Self {
        let code = match &error {
            GroupError::UnknownMember { .. } => ErrorCode::UnknownMember,
            GroupError::StaleGeneration { .. } => ErrorCode::StaleGeneration,
            GroupError::NotAssigned { .. } => ErrorCode::PartitionNotAssigned,
            GroupError::GroupHasMembers(_) | GroupError::InconsistentStrategy { .. } => {
                ErrorCode::Conflict
            }
            GroupError::Invalid(_) => ErrorCode::Invalid,
        };
        ApiError::new(code, error.to_string())
    }
}

impl From<OffsetStoreError> for ApiError {
    fn from(error: OffsetStoreError) -> Self {
        match error {
            OffsetStoreError::Append(error) => error.into(),
            OffsetStoreError::Read(error) => error.into(),
            error @ OffsetStoreError::Corrupt { .. } => {
                ApiError::internal(ErrorCode::Corrupt, &error)
            }
        }
    }
}

impl From<ProducerRegistryError> for ApiError {
    fn from(error: ProducerRegistryError) -> Self {
        match &error {
            ProducerRegistryError::Unknown(_) => {
                ApiError::new(ErrorCode::ProducerNotFound, error.to_string())
            }
            ProducerRegistryError::EpochExhausted(_) => {
                ApiError::new(ErrorCode::InvalidProducer, error.to_string())
            }
            ProducerRegistryError::NotOwner { .. } => {
                ApiError::new(ErrorCode::Forbidden, error.to_string())
            }
            ProducerRegistryError::Io(_) => {
                ApiError::internal(ErrorCode::StorageUnavailable, &error)
            }
            ProducerRegistryError::Corrupt { .. } => ApiError::internal(ErrorCode::Corrupt, &error),
        }
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;

impl From<crate::broker::admin::AdminError> for ApiError {
    fn from(error: crate::broker::admin::AdminError) -> Self {
        use crate::broker::admin::AdminError;
        let code = match &error {
            AdminError::Forbidden(lookup) => return lookup.clone().into(),
            AdminError::Invalid(_) => ErrorCode::Invalid,
            AdminError::KeyNotFound(_) => ErrorCode::KeyNotFound,
            AdminError::Storage(storage) => {
                tracing::error!(error = %storage, "security file write failed");
                return ApiError::new(
                    ErrorCode::StorageUnavailable,
                    "the key or ACL file could not be written; nothing changed, retry later",
                );
            }
        };
        ApiError::new(code, error.to_string())
    }
}

impl From<crate::security::quota::QuotaExceeded> for ApiError {
    fn from(error: crate::security::quota::QuotaExceeded) -> Self {
        // Whole seconds, rounded up: a client that waits that long passes.
        let seconds = error.retry_after.as_millis().div_ceil(1000).max(1);
        let mut api = ApiError::new(ErrorCode::QuotaExceeded, error.to_string());
        api.retry_after = Some(u64::try_from(seconds).unwrap_or(u64::MAX));
        api
    }
}

impl From<crate::security::streams::TooManyStreams> for ApiError {
    fn from(error: crate::security::streams::TooManyStreams) -> Self {
        ApiError::new(ErrorCode::QuotaExceeded, error.to_string())
    }
}

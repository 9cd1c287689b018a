//! Partition offsets: earliest, latest (the high watermark) and log end, or the first offset at
//! or after a timestamp.

use axum::Json;
use axum::extract::State;
use strata_openapi::{
    DeleteRecordsRequest, DeleteRecordsResponse, ErrorBody, OffsetsQuery, OffsetsResponse,
    PartitionOffsets, TimestampOffset,
};

use super::AppState;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::paths;
use crate::security::Caller;

/// Offsets of a partition.
///
/// Without `timestamp`: `earliest` (log start), `latest` (the high watermark: the next offset to
/// be readable) and `log_end`. With `timestamp=T`: the first offset whose record timestamp is
/// `>= T`, or `null` when every record is older.
///
/// Needs `describe` on the topic.
#[utoipa::path(get, path = paths::PARTITION_OFFSETS, tag = "records",
    params(("topic" = String, Path, description = "Topic name"),
           ("partition" = u32, Path, description = "Partition number"), OffsetsQuery),
    responses(
        (status = 200, description = "Offsets (`PartitionOffsets`), or with `timestamp` a `TimestampOffset`",
            body = OffsetsResponse),
        (status = 400, description = "Bad path or query", body = ErrorBody),
        (status = 404, description = "No such topic or partition", body = ErrorBody),
        (status = 422, description = "A negative timestamp other than -1, -2, -3", body = ErrorBody),
        (status = 503, description = "Storage unavailable", body = ErrorBody),
    ))]
pub async fn offsets(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((topic, partition)): ApiPath<(String, u32)>,
    ApiQuery(query): ApiQuery<OffsetsQuery>,
) -> Result<Json<OffsetsResponse>, ApiError> {
    if let Some(timestamp) = query.timestamp {
        let found = state
            .broker
            .offset_for_timestamp(&caller, &topic, partition, timestamp)
            .await?;
        return Ok(Json(OffsetsResponse::Timestamp(TimestampOffset {
            timestamp,
            offset: found.offset,
            record_timestamp: found.record_timestamp,
        })));
    }
    let view = state
        .broker
        .partition_offsets(&caller, &topic, partition)
        .await?;
    Ok(Json(OffsetsResponse::Offsets(PartitionOffsets {
        earliest: view.offsets.log_start_offset,
        latest: view.offsets.high_watermark,
        log_end: view.offsets.log_end_offset,
        earliest_local: view.tiered.map(|t| t.local_start),
        latest_tiered: view.tiered.map(|t| t.uploaded_end),
    })))
}

/// Delete every record of a partition below an offset (Kafka's DeleteRecords), for example to
/// erase history on request. The log start offset moves there durably; fetches below it get 416
/// with the new earliest offset. Readers in the middle of a fetch finish it.
///
/// Needs `delete` on the topic.
#[utoipa::path(post, path = paths::DELETE_RECORDS, tag = "records",
    params(("topic" = String, Path, description = "Topic name"),
           ("partition" = u32, Path, description = "Partition number")),
    request_body = DeleteRecordsRequest,
    responses(
        (status = 200, description = "The new log start offset", body = DeleteRecordsResponse),
        (status = 400, description = "Bad path or JSON", body = ErrorBody),
        (status = 404, description = "No such topic or partition", body = ErrorBody),
        (status = 409, description = "Internal topics cannot be trimmed (`internal_topic`); a legal hold keeps records below the offset (`legal_hold`)", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 416, description = "Offset above the high watermark", body = ErrorBody),
        (status = 422, description = "Invalid request", body = ErrorBody),
        (status = 503, description = "Storage unavailable", body = ErrorBody),
    ))]
pub async fn delete_records(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((topic, partition)): ApiPath<(String, u32)>,
    ApiJson(request): ApiJson<DeleteRecordsRequest>,
) -> Result<Json<DeleteRecordsResponse>, ApiError> {
    let log_start_offset = state
        .broker
        .delete_records(&caller, &topic, partition, request.offset)
        .await?;
    Ok(Json(DeleteRecordsResponse { log_start_offset }))
}

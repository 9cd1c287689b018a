//! Partition offsets: earliest, latest (the high watermark) and log end, or the first offset at
//! or after a timestamp.

use axum::Json;
use axum::extract::State;
use strata_openapi::{
    DeleteRecordsRequest, DeleteRecordsResponse, ErrorBody, ErrorCode, OffsetsQuery,
    OffsetsResponse, PartitionOffsets, TimestampOffset,
};

use super::AppState;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::fetch::{FetchRequest, read_records};
use crate::tiering::tiered_log::TieredLog;

/// Offsets of a partition.
///
/// Without `timestamp`: `earliest` (log start), `latest` (the high watermark: the next offset to
/// be readable) and `log_end`. With `timestamp=T`: the first offset whose record timestamp is
/// `>= T`, or `null` when every record is older.
#[utoipa::path(get, path = "/v1/topics/{topic}/partitions/{partition}/offsets", tag = "records",
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
    ApiPath((topic, partition)): ApiPath<(String, u32)>,
    ApiQuery(query): ApiQuery<OffsetsQuery>,
) -> Result<Json<OffsetsResponse>, ApiError> {
    let topic = state.topic(&topic)?;
    let log = state.tiered_log(&topic, partition).await?;
    if let Some(timestamp) = query.timestamp {
        return Ok(Json(OffsetsResponse::Timestamp(
            lookup(&log, partition, timestamp).await?,
        )));
    }
    let offsets = log.offsets();
    let tiered = log.remote().map(|remote| {
        (
            log.partition().offsets().log_start_offset,
            remote.manifest().next_offset(),
        )
    });
    Ok(Json(OffsetsResponse::Offsets(PartitionOffsets {
        earliest: offsets.log_start_offset,
        latest: offsets.high_watermark,
        log_end: offsets.log_end_offset,
        earliest_local: tiered.map(|(local, _)| local),
        latest_tiered: tiered.map(|(_, uploaded)| uploaded),
    })))
}

/// Kafka's ListOffsets special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// A timestamp lookup (or one of Kafka's special values), with the found record's timestamp.
async fn lookup(
    log: &TieredLog,
    partition: u32,
    timestamp: i64,
) -> Result<TimestampOffset, ApiError> {
    let offsets = log.offsets();
    let position = |offset| TimestampOffset {
        timestamp,
        offset: Some(offset),
        record_timestamp: None,
    };
    let found = match timestamp {
        LATEST => return Ok(position(offsets.high_watermark)),
        EARLIEST => return Ok(position(offsets.log_start_offset)),
        MAX_TIMESTAMP => match log.max_timestamp() {
            Some(max) => log.offset_for_timestamp(max).await?,
            None => None,
        },
        t if t < 0 => {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                "timestamp must be >= 0, or -1 (latest), -2 (earliest) or -3 (max timestamp)",
            ));
        }
        t => log.offset_for_timestamp(t).await?,
    };
    let record_timestamp = match found {
        Some(offset) => {
            let request = FetchRequest {
                partition,
                offset,
                max_bytes: 1,
                max_records: 1,
                format: strata_openapi::ValueFormat::Base64,
            };
            read_records(log, &request)
                .await?
                .response
                .records
                .first()
                .map(|r| r.timestamp)
        }
        None => None,
    };
    Ok(TimestampOffset {
        timestamp,
        offset: found,
        record_timestamp,
    })
}

/// Delete every record of a partition below an offset (Kafka's DeleteRecords), for example to
/// erase history on request. The log start offset moves there durably; fetches below it get 416
/// with the new earliest offset. Readers in the middle of a fetch finish it.
#[utoipa::path(post, path = "/v1/topics/{topic}/partitions/{partition}/delete-records", tag = "records",
    params(("topic" = String, Path, description = "Topic name"),
           ("partition" = u32, Path, description = "Partition number")),
    request_body = DeleteRecordsRequest,
    responses(
        (status = 200, description = "The new log start offset", body = DeleteRecordsResponse),
        (status = 400, description = "Bad path or JSON", body = ErrorBody),
        (status = 404, description = "No such topic or partition", body = ErrorBody),
        (status = 409, description = "Internal topics cannot be trimmed (`internal_topic`)", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 416, description = "Offset above the high watermark", body = ErrorBody),
        (status = 422, description = "Invalid request", body = ErrorBody),
        (status = 503, description = "Storage unavailable", body = ErrorBody),
    ))]
pub async fn delete_records(
    State(state): State<AppState>,
    ApiPath((topic, partition)): ApiPath<(String, u32)>,
    ApiJson(request): ApiJson<DeleteRecordsRequest>,
) -> Result<Json<DeleteRecordsResponse>, ApiError> {
    let topic = state.writable_topic(&topic)?;
    let log = state.tiered_log(&topic, partition).await?;
    let local = log.partition();
    let log_start_offset = local.delete_records(request.offset).await?;
    if log.remote().is_some() {
        state
            .tiering
            .delete_records(topic.name(), partition, local, request.offset)
            .await?;
    }
    Ok(Json(DeleteRecordsResponse {
        log_start_offset: log.offsets().log_start_offset.max(log_start_offset),
    }))
}

//! Partition offsets: earliest, latest (the high watermark) and log end, or the first offset at
//! or after a timestamp.

use axum::Json;
use axum::extract::State;
use strata_openapi::{ErrorBody, OffsetsQuery, OffsetsResponse, PartitionOffsets, TimestampOffset};

use super::AppState;
use super::error::ApiError;
use super::extract::{ApiPath, ApiQuery};

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
    ))]
pub async fn offsets(
    State(state): State<AppState>,
    ApiPath((topic, partition)): ApiPath<(String, u32)>,
    ApiQuery(query): ApiQuery<OffsetsQuery>,
) -> Result<Json<OffsetsResponse>, ApiError> {
    let partition = state.partition(&topic, partition)?;
    if let Some(timestamp) = query.timestamp {
        let offset = partition.offset_for_timestamp(timestamp)?;
        return Ok(Json(OffsetsResponse::Timestamp(TimestampOffset {
            timestamp,
            offset,
        })));
    }
    let offsets = partition.offsets();
    Ok(Json(OffsetsResponse::Offsets(PartitionOffsets {
        earliest: offsets.log_start_offset,
        latest: offsets.high_watermark,
        log_end: offsets.log_end_offset,
    })))
}

//! Fetch from one partition, in the format the `Accept` header asks for:
//!
//! - `application/json` (default): records with offset, timestamp, key, value and headers, plus
//!   `next_offset`, `high_watermark` and `log_start_offset`;
//! - `application/x-ndjson`: the same records, one JSON object per line, streamed;
//! - `text/event-stream` (SSE): follows the tail forever; each `records` event carries a batch of
//!   records and has `id` = the next offset, so `Last-Event-ID` resumes exactly; `ping` events
//!   keep idle streams open;
//! - `application/vnd.strata.record-batches`: the stored Kafka RecordBatch v2 bytes as they are,
//!   sliced from the page cache without a copy in user space. The first batch may start before
//!   the requested offset (Kafka semantics: the client skips those records); the headers
//!   `Strata-Next-Offset`, `Strata-High-Watermark` and `Strata-Log-Start-Offset` say where to go on.
//!
//! A fetch at the high watermark long-polls for up to `max_wait_ms` (bounded by the server's
//! `fetch_max_wait_ms`) and answers as soon as data arrives.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use strata_openapi::{ErrorBody, ErrorCode, FetchQuery, FetchResponse, FetchedRecord, ValueFormat};

use super::AppState;
use super::codec::to_fetched_record;
use super::error::ApiError;
use super::extract::{ApiPath, ApiQuery};
use super::produce::RECORD_BATCHES;
use crate::limits::FETCH_DEFAULT_MAX_RECORDS;
use crate::log::{Batches, LogOffsets};
use crate::tiering::tiered_log::TieredLog;

const NDJSON: &str = "application/x-ndjson";
const EVENT_STREAM: &str = "text/event-stream";

/// The response format picked from `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Ndjson,
    Sse,
    Batches,
}

/// Fetch records from a partition.
///
/// Starts at `offset`, or at the first record with timestamp `>= timestamp`, or at the log start.
/// Offsets below the log start or above the high watermark get 416 `offset_out_of_range` with the
/// valid range. Returns whole records up to `max_bytes` of stored batches (at least one batch) and
/// `max_records`. A corrupt batch after some good ones ends the answer early (`next_offset` is the
/// corrupt batch); a fetch that starts at it gets 500 `corrupt`.
///
/// **NDJSON** (`application/x-ndjson`): one record per line; when the read stopped at a corrupt
/// batch after some records, the last line is the error body (`{"error": ...}`).
///
/// **SSE** (`text/event-stream`) follows the tail. The first message sets `retry: 1000`. Events
/// (each `data` is one JSON document, see `PartitionStreamData`): `records` (a `FetchResponse`;
/// `id` = the next offset, so a reconnect's `Last-Event-ID` resumes exactly), `ping` (data `{}`,
/// while idle), `end` (a `StreamEnd`: the topic was deleted, or the server is shutting down),
/// `server_error` (an `ErrorBody`; the stream closes, and a reconnect gets the error's status,
/// so a browser's EventSource stops instead of looping). Server errors are not named `error`,
/// which browsers use for their own connection failures.
#[utoipa::path(get, path = "/v1/topics/{topic}/partitions/{partition}/records", tag = "records",
    params(("topic" = String, Path, description = "Topic name"),
           ("partition" = u32, Path, description = "Partition number"), FetchQuery,
           ("Last-Event-ID" = Option<u64>, Header, description = "SSE: resume at this offset")),
    responses(
        (status = 200, description = "Records", content(
            (FetchResponse = "application/json"),
            (FetchedRecord = "application/x-ndjson"),
            (strata_openapi::PartitionStreamData = "text/event-stream"),
            (strata_openapi::RecordBatchBytes = "application/vnd.strata.record-batches"))),
        (status = 400, description = "Bad path or query", body = ErrorBody,
            example = json!({"error": {"code": "bad_query", "message": "max_records: invalid digit found in string", "retryable": false}})),
        (status = 404, description = "No such topic or partition", body = ErrorBody,
            example = json!({"error": {"code": "topic_not_found", "message": "topic orders not found", "retryable": false}})),
        (status = 406, description = "Unsupported Accept", body = ErrorBody,
            example = json!({"error": {"code": "not_acceptable", "message": "Accept must allow one of application/json, ...", "retryable": false}})),
        (status = 416, description = "Offset out of range", body = ErrorBody,
            example = json!({"error": {"code": "offset_out_of_range", "message": "offset 120 is out of range: valid offsets are 100 to 118 (the high watermark)", "retryable": false, "earliest_offset": 100, "latest_offset": 118}})),
        (status = 422, description = "Both offset and timestamp", body = ErrorBody,
            example = json!({"error": {"code": "invalid", "message": "give offset or timestamp, not both", "retryable": false}})),
        (status = 500, description = "The batch at the offset failed validation (`corrupt`)", body = ErrorBody,
            example = json!({"error": {"code": "corrupt", "message": "stored data failed validation", "retryable": false}})),
        (status = 503, description = "Storage unavailable; retry", body = ErrorBody,
            example = json!({"error": {"code": "storage_unavailable", "message": "storage is unavailable; retry later", "retryable": true}})),
    ))]
pub async fn fetch(
    State(state): State<AppState>,
    ApiPath((topic, partition)): ApiPath<(String, u32)>,
    ApiQuery(query): ApiQuery<FetchQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let format = negotiate(&headers)?;
    let topic = state.topic(&topic)?;
    let log = Arc::new(state.tiered_log(&topic, partition).await?);
    if query.offset.is_some() && query.timestamp.is_some() {
        return Err(ApiError::new(
            ErrorCode::Invalid,
            "give offset or timestamp, not both",
        ));
    }
    let max_bytes = query
        .max_bytes
        .unwrap_or(state.config.fetch_default_max_bytes);
    let max_bytes = max_bytes.clamp(1, state.config.fetch_max_bytes);
    let max_records = query
        .max_records
        .unwrap_or(FETCH_DEFAULT_MAX_RECORDS)
        .max(1);
    let wait = Duration::from_millis(
        query
            .max_wait_ms
            .unwrap_or(0)
            .min(state.config.fetch_max_wait_ms),
    );
    let resume = headers
        .get("last-event-id")
        .map(|v| v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()))
        .map(|parsed| {
            parsed.ok_or_else(|| {
                ApiError::new(ErrorCode::BadHeader, "Last-Event-ID must be an offset")
            })
        })
        .transpose()?;
    let offset = match (
        resume.filter(|_| format == Format::Sse),
        query.offset,
        query.timestamp,
    ) {
        (Some(offset), _, _) | (None, Some(offset), _) => offset,
        (None, None, Some(timestamp)) => log
            .offset_for_timestamp(timestamp)
            .await?
            .unwrap_or_else(|| log.offsets().high_watermark),
        (None, None, None) => log.offsets().log_start_offset,
    };
    check_range(&log, offset)?;
    let request = FetchRequest {
        partition,
        offset,
        max_bytes,
        max_records,
        format: query.value_format,
    };
    match format {
        Format::Sse => {
            // The first read happens before the answer, so a stream that cannot start gets the
            // error's status: a browser's EventSource then stops instead of reconnecting.
            let first = if offset < log.offsets().high_watermark {
                Some(read_records(&log, &request).await?)
            } else {
                None
            };
            Ok(super::sse::partition_stream(state, topic, log, request, first).into_response())
        }
        Format::Ndjson => {
            wait_for_data(&state, &log, offset, wait).await;
            let read = read_records(&log, &request).await?;
            Ok(ndjson(read))
        }
        Format::Json => {
            wait_for_data(&state, &log, offset, wait).await;
            let read = read_records(&log, &request).await?;
            Ok(axum::Json(read.response).into_response())
        }
        Format::Batches => {
            wait_for_data(&state, &log, offset, wait).await;
            batches(&log, offset, max_bytes).await
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct FetchRequest {
    pub(crate) partition: u32,
    pub(crate) offset: u64,
    pub(crate) max_bytes: u64,
    pub(crate) max_records: u32,
    pub(crate) format: ValueFormat,
}

/// What fetch can answer with, in the server's order of preference (ties in `Accept` go to the
/// earlier one).
const OFFERS: &[(&str, Format)] = &[
    ("application/json", Format::Json),
    (NDJSON, Format::Ndjson),
    (EVENT_STREAM, Format::Sse),
    (RECORD_BATCHES, Format::Batches),
    ("application/octet-stream", Format::Batches),
];

fn negotiate(headers: &HeaderMap) -> Result<Format, ApiError> {
    let media: Vec<&str> = OFFERS.iter().map(|(media, _)| *media).collect();
    let index = super::accept::negotiate(headers, &media)?;
    Ok(OFFERS
        .get(index)
        .map_or(Format::Json, |(_, format)| *format))
}

fn check_range(log: &TieredLog, offset: u64) -> Result<(), ApiError> {
    let offsets = log.offsets();
    if offset < offsets.log_start_offset || offset > offsets.high_watermark {
        return Err(ApiError::out_of_range(
            offset,
            offsets.log_start_offset,
            offsets.high_watermark,
        ));
    }
    Ok(())
}

/// Waits until records at `offset` are readable, `wait` has passed, or the server shuts down.
async fn wait_for_data(state: &AppState, log: &TieredLog, offset: u64, wait: Duration) {
    if wait.is_zero() {
        return;
    }
    let mut offsets = log.subscribe();
    let mut shutdown = state.shutdown.clone();
    let arrived = offsets.wait_for(|o: &LogOffsets| o.high_watermark > offset);
    tokio::select! {
        _ = tokio::time::timeout(wait, arrived) => {}
        _ = shutdown.wait_for(|stopping| *stopping) => {}
    }
}

/// Records read by [`read_records`]: what could be served, and the error that stopped the read
/// early, if one did after the first record.
pub(crate) struct RecordsRead {
    /// The records and positions to answer with.
    pub(crate) response: FetchResponse,
    /// Set when a batch after the returned records failed (corrupt, unreadable): the records
    /// before it are served, as Kafka serves the batches before a corrupt one, and the next read
    /// at `response.next_offset` gets this error.
    pub(crate) stopped_by: Option<ApiError>,
}

/// Decodes records from `request.offset` on, within the byte and record budgets.
///
/// # Errors
/// When the very first batch cannot be read or fails validation; a failure after that ends the
/// read early instead ([`RecordsRead::stopped_by`]).
pub(crate) async fn read_records(
    log: &TieredLog,
    request: &FetchRequest,
) -> Result<RecordsRead, ApiError> {
    let mut records: Vec<FetchedRecord> = Vec::new();
    let mut next = request.offset;
    let mut bytes_left = request.max_bytes;
    let mut offsets = log.offsets();
    let mut stopped_by = None;
    'reading: while next < offsets.high_watermark && bytes_left > 0 {
        let slice = match log.read(next, bytes_left).await {
            Ok(slice) => slice,
            Err(error) => {
                stopped_by = Some(ApiError::from(error));
                break;
            }
        };
        offsets = slice.offsets;
        if slice.data.is_empty() {
            break;
        }
        bytes_left = bytes_left.saturating_sub(slice.data.len() as u64);
        for batch in Batches::new(slice.data.clone()) {
            let batch = match batch {
                Ok(batch) => batch,
                Err(error) => {
                    stopped_by = Some(ApiError::internal(ErrorCode::Corrupt, &error));
                    break 'reading;
                }
            };
            for record in batch.records() {
                let record = match record {
                    Ok(record) => record,
                    Err(error) => {
                        stopped_by = Some(ApiError::internal(ErrorCode::Corrupt, &error));
                        break 'reading;
                    }
                };
                let offset = u64::try_from(record.offset).unwrap_or(0);
                if offset < next {
                    continue;
                }
                records.push(to_fetched_record(
                    request.partition,
                    &record,
                    request.format,
                ));
                next = offset + 1;
                if records.len() >= request.max_records as usize {
                    break 'reading;
                }
            }
            // Compaction may leave the last offsets of a batch empty: continue after it.
            next = next.max(batch.header().last_offset().saturating_add(1).max(0) as u64);
        }
        // Compaction may leave the last offsets of a range empty: continue after the range.
        next = next.max(slice.next_offset);
    }
    if records.is_empty()
        && let Some(error) = stopped_by
    {
        return Err(error);
    }
    Ok(RecordsRead {
        response: FetchResponse {
            records,
            next_offset: next,
            high_watermark: offsets.high_watermark,
            log_start_offset: offsets.log_start_offset,
        },
        stopped_by,
    })
}

async fn batches(log: &TieredLog, offset: u64, max_bytes: u64) -> Result<Response, ApiError> {
    let slice = log.read(offset, max_bytes).await?;
    let mut response = Response::new(Body::from(slice.data));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(RECORD_BATCHES));
    for (name, value) in [
        ("strata-first-offset", slice.first_offset),
        ("strata-next-offset", slice.next_offset),
        ("strata-high-watermark", slice.offsets.high_watermark),
        ("strata-log-start-offset", slice.offsets.log_start_offset),
    ] {
        headers.insert(name, HeaderValue::from(value));
    }
    Ok(response)
}

/// The records as NDJSON lines. The body is computed before the answer, so a read that fails
/// at its first batch gets the error's status; one that fails after some records ends with one
/// last line holding the error body (`{"error": {...}}`), so a client can tell a cut-short
/// answer from a complete one.
fn ndjson(read: RecordsRead) -> Response {
    let mut body = Vec::new();
    for record in &read.response.records {
        if serde_json::to_writer(&mut body, record).is_ok() {
            body.push(b'\n');
        }
    }
    if let Some(error) = &read.stopped_by
        && serde_json::to_writer(&mut body, error.body()).is_ok()
    {
        body.push(b'\n');
    }
    let mut response = Response::new(Body::from(body));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    *response.status_mut() = StatusCode::OK;
    response
}

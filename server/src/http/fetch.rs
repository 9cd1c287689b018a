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

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use strata_openapi::{ErrorBody, ErrorCode, FetchQuery, FetchResponse, FetchedRecord, ValueFormat};

use super::AppState;
use super::codec::to_fetched_record;
use super::error::ApiError;
use super::extract::{ApiPath, ApiQuery};
use super::produce::RECORD_BATCHES;
use crate::limits::FETCH_DEFAULT_MAX_RECORDS;
use crate::log::{LogOffsets, RecordBatch};
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
/// `max_records`.
#[utoipa::path(get, path = "/v1/topics/{topic}/partitions/{partition}/records", tag = "records",
    params(("topic" = String, Path, description = "Topic name"),
           ("partition" = u32, Path, description = "Partition number"), FetchQuery,
           ("Last-Event-ID" = Option<u64>, Header, description = "SSE: resume at this offset")),
    responses(
        (status = 200, description = "Records", content(
            (FetchResponse = "application/json"),
            (FetchedRecord = "application/x-ndjson"),
            (String = "text/event-stream"),
            (strata_openapi::RecordBatchBytes = "application/vnd.strata.record-batches"))),
        (status = 400, description = "Bad path or query", body = ErrorBody),
        (status = 404, description = "No such topic or partition", body = ErrorBody),
        (status = 406, description = "Unsupported Accept", body = ErrorBody),
        (status = 416, description = "Offset out of range", body = ErrorBody),
        (status = 503, description = "Storage unavailable; retry", body = ErrorBody),
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
            ErrorCode::BadQuery,
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
        Format::Sse => Ok(sse(state, log, request).into_response()),
        Format::Ndjson => {
            wait_for_data(&state, &log, offset, wait).await;
            Ok(ndjson(log, request))
        }
        Format::Json => {
            wait_for_data(&state, &log, offset, wait).await;
            let response = read_records(&log, &request).await?;
            Ok(axum::Json(response).into_response())
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

fn negotiate(headers: &HeaderMap) -> Result<Format, ApiError> {
    let Some(accept) = headers.get(ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(Format::Json);
    };
    for media in accept.split(',').map(|m| {
        m.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    }) {
        match media.as_str() {
            "application/json" | "*/*" | "application/*" => return Ok(Format::Json),
            NDJSON => return Ok(Format::Ndjson),
            EVENT_STREAM => return Ok(Format::Sse),
            RECORD_BATCHES | "application/octet-stream" => return Ok(Format::Batches),
            _ => {}
        }
    }
    Err(ApiError::new(
        ErrorCode::NotAcceptable,
        format!("Accept must be application/json, {NDJSON}, {EVENT_STREAM} or {RECORD_BATCHES}"),
    ))
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

/// Decodes records from `request.offset` on, within the byte and record budgets.
pub(crate) async fn read_records(
    log: &TieredLog,
    request: &FetchRequest,
) -> Result<FetchResponse, ApiError> {
    let mut records: Vec<FetchedRecord> = Vec::new();
    let mut next = request.offset;
    let mut bytes_left = request.max_bytes;
    let mut offsets = log.offsets();
    'reading: while next < offsets.high_watermark && bytes_left > 0 {
        let slice = log.read(next, bytes_left).await?;
        offsets = slice.offsets;
        if slice.data.is_empty() {
            break;
        }
        bytes_left = bytes_left.saturating_sub(slice.data.len() as u64);
        let mut rest = slice.data.clone();
        while !rest.is_empty() {
            let batch = RecordBatch::decode_first(&rest)
                .map_err(|e| ApiError::internal(ErrorCode::Corrupt, &e))?;
            for record in batch.records() {
                let record = record.map_err(|e| ApiError::internal(ErrorCode::Corrupt, &e))?;
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
            rest = rest.slice(batch.len()..);
        }
        // Compaction may leave the last offsets of a range empty: continue after the range.
        next = next.max(slice.next_offset);
    }
    Ok(FetchResponse {
        records,
        next_offset: next,
        high_watermark: offsets.high_watermark,
        log_start_offset: offsets.log_start_offset,
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

fn ndjson(log: Arc<TieredLog>, request: FetchRequest) -> Response {
    let stream = async_stream::stream! {
        match read_records(&log, &request).await {
            Ok(response) => {
                for record in response.records {
                    let mut line = serde_json::to_vec(&record).unwrap_or_default();
                    line.push(b'\n');
                    yield Ok::<_, Infallible>(axum::body::Bytes::from(line));
                }
            }
            Err(error) => {
                tracing::warn!(code = error.code().as_str(), "ndjson fetch failed mid-stream");
            }
        }
    };
    let mut response = Response::new(Body::from_stream(stream));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    *response.status_mut() = StatusCode::OK;
    response
}

/// Follows the partition's tail until the client leaves or the server shuts down.
fn sse(state: AppState, log: Arc<TieredLog>, request: FetchRequest) -> impl IntoResponse {
    let ping = Duration::from_millis(state.config.sse_ping_interval_ms);
    let mut shutdown = state.shutdown.clone();
    let stream = async_stream::stream! {
        let mut next = request.offset;
        let mut offsets = log.subscribe();
        loop {
            let ready = offsets.wait_for(|o: &LogOffsets| o.high_watermark > next);
            let stop = shutdown.wait_for(|stopping| *stopping);
            tokio::select! {
                result = ready => if result.is_err() { break },
                _ = stop => break,
            }
            let batch = FetchRequest { offset: next, ..request };
            match read_records(&log, &batch).await {
                Ok(response) => {
                    next = response.next_offset;
                    let event = Event::default()
                        .event("records")
                        .id(response.next_offset.to_string())
                        .json_data(&response);
                    match event {
                        Ok(event) => yield Ok::<_, Infallible>(event),
                        Err(_) => break,
                    }
                }
                Err(error) => {
                    if let Some(event) = super::sse::error_event(error.code()) {
                        yield Ok(event);
                    }
                    break;
                }
            }
        }
    };
    super::sse::with_pings(stream, ping)
}

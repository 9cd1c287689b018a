//! Fetch from one partition, in the format the `Accept` header asks for:
//!
//! - `application/json` (default): records with offset, timestamp, key, value and headers, plus
//!   `next_offset`, `high_watermark` and `log_start_offset`;
//! - `application/x-ndjson`: the same records, one JSON object per line; the headers
//!   `Strata-Next-Offset`, `Strata-High-Watermark` and `Strata-Log-Start-Offset` say where to go
//!   on;
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

use axum::body::Body;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use strata_openapi::{ErrorBody, ErrorCode, FetchQuery, FetchResponse, FetchedRecord, ValueFormat};

use super::AppState;
use super::accept::{Accepted, Offers};
use super::codec::to_fetched_record;
use super::error::ApiError;
use super::extract::{ApiPath, ApiQuery};
use super::paths;
use super::produce::RECORD_BATCHES;
use crate::audit::entry::ReadFormat;
use crate::broker::Broker;
use crate::broker::audit::{Disclosed, ReadOrigin};
use crate::broker::fetch::{FetchStart, ReadRequest, RecordsRead, read_records};
use crate::broker::reader::PartitionReader;
use crate::log::ReadSlice;
use crate::security::Caller;
use crate::topics::catalog::Topic;

const NDJSON: &str = "application/x-ndjson";
const EVENT_STREAM: &str = "text/event-stream";

/// The response format picked from `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
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
///
/// Needs `read` on the topic.
#[utoipa::path(get, path = paths::PARTITION_RECORDS, tag = "records",
    params(("topic" = String, Path, description = "Topic name"),
           ("partition" = u32, Path, description = "Partition number"), FetchQuery,
           ("Last-Event-ID" = Option<u64>, Header, nullable = false, description = "SSE: resume at this offset")),
    responses(
        (status = 200, description = "Records", content(
            (FetchResponse = "application/json"),
            (FetchedRecord = "application/x-ndjson"),
            (strata_openapi::PartitionStreamData = "text/event-stream"),
            (strata_openapi::RecordBatchBytes = "application/vnd.strata.record-batches")),
            headers(
                ("Strata-Next-Offset" = u64, description = "NDJSON and record batches: the offset to fetch next (past records compaction removed, so not always the last record's offset + 1)"),
                ("Strata-High-Watermark" = u64, description = "NDJSON and record batches: the partition's high watermark"),
                ("Strata-Log-Start-Offset" = u64, description = "NDJSON and record batches: the partition's first offset"),
                ("Strata-First-Offset" = u64, description = "Record batches: the base offset of the first batch, which may be before the requested offset"))),
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
    caller: Caller,
    ApiPath((topic, partition)): ApiPath<(String, u32)>,
    ApiQuery(query): ApiQuery<FetchQuery>,
    Accepted(format): Accepted<Format>,
    origin: ReadOrigin,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let broker = &state.broker;
    let (topic, reader) = broker
        .open_for_fetch(&caller, &origin, format.audited_as(), &topic, partition)
        .await?;
    let start = FetchStart::new(query.offset, query.timestamp)?;
    let resume = headers
        .get("last-event-id")
        .map(|v| v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()))
        .map(|parsed| {
            parsed.ok_or_else(|| {
                ApiError::new(ErrorCode::BadHeader, "Last-Event-ID must be an offset")
            })
        })
        .transpose()?;
    let mut bounds = broker.fetch_bounds(query.max_bytes, query.max_records, query.max_wait_ms);
    bounds.max_bytes = broker.admit_fetch(&caller, bounds.max_bytes)?;
    let start = start.resuming_at(resume.filter(|_| format == Format::Sse));
    let offset = broker.start_offset(&reader, start).await?;
    let request = FetchRequest {
        partition,
        offset,
        max_bytes: bounds.max_bytes,
        max_records: bounds.max_records,
        format: query.value_format,
    };
    // Streams and long polls hold a connection: at most so many per principal.
    let slot = if format == Format::Sse || !bounds.wait.is_zero() {
        Some(broker.open_stream(&caller)?)
    } else {
        None
    };
    let audit = ReadAudit {
        caller,
        origin,
        topic,
    };
    if format == Format::Sse {
        // The first read happens before the answer, so a stream that cannot start gets the
        // error's status: a browser's EventSource then stops instead of reconnecting.
        let first = if offset < reader.offsets().high_watermark {
            let page = read_page(&reader, &request).await?;
            audit.sent(broker, Format::Sse, page.disclosed).await?;
            Some(page)
        } else {
            None
        };
        let stream = super::sse::partition_stream(state, audit, reader, request, first, slot);
        return Ok(stream.into_response());
    }
    broker
        .wait_for_data(&audit.topic, &reader, offset, bounds.wait)
        .await?;
    drop(slot);
    let stats = &state.http_stats;
    match format {
        Format::Ndjson => {
            let page = read_page(&reader, &request).await?;
            audit.sent(broker, format, page.disclosed).await?;
            page.count(stats, "ndjson");
            Ok(ndjson(page))
        }
        Format::Batches => {
            let slice = reader.read(offset, bounds.max_bytes).await?;
            let sent = Disclosed::of_batches(partition, &slice.data, slice.first_offset);
            audit.sent(broker, format, sent).await?;
            Ok(batches(slice, stats))
        }
        Format::Json | Format::Sse => {
            let read = read_records(&reader, &request.read_request()).await?;
            let sent = Disclosed::of_records(partition, &read.records);
            audit.sent(broker, format, sent).await?;
            Ok(json(&read, &request, stats))
        }
    }
}

/// Who reads which topic, for the read audit of what a fetch sends.
pub(crate) struct ReadAudit {
    pub(crate) caller: Caller,
    pub(crate) origin: ReadOrigin,
    pub(crate) topic: Arc<Topic>,
}

impl ReadAudit {
    /// Records what an answer in `format` is about to send (when the topic audits reads);
    /// the answer may only be sent when this succeeds.
    pub(crate) async fn sent(
        &self,
        broker: &Broker,
        format: Format,
        sent: Option<Disclosed>,
    ) -> Result<(), ApiError> {
        if let Some(sent) = sent {
            let reads = [(self.topic.as_ref(), sent)];
            broker
                .audit_served(
                    &self.caller,
                    &self.origin,
                    format.audited_as(),
                    None,
                    &reads,
                )
                .await?;
        }
        Ok(())
    }
}

/// A JSON answer, written straight from the stored records (see `fetch_json`).
fn json(read: &RecordsRead, request: &FetchRequest, stats: &super::observe::HttpStats) -> Response {
    stats.fetched(
        "json",
        read.records.len() as u64,
        payload_bytes(&read.records),
    );
    let body = super::fetch_json::fetch_response_json(request.partition, read, request.format);
    let mut response = Response::new(Body::from(body));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// One read of a fetch in the API's shape.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FetchRequest {
    pub(crate) partition: u32,
    pub(crate) offset: u64,
    pub(crate) max_bytes: u64,
    pub(crate) max_records: u32,
    pub(crate) format: ValueFormat,
}

impl FetchRequest {
    fn read_request(&self) -> ReadRequest {
        ReadRequest {
            offset: self.offset,
            max_bytes: self.max_bytes,
            max_records: self.max_records,
        }
    }
}

/// Key and value bytes of `records`, for the fetch byte counters.
fn payload_bytes(records: &[crate::log::Record]) -> u64 {
    let length = |b: &Option<bytes::Bytes>| b.as_ref().map_or(0, |b| b.len() as u64);
    records
        .iter()
        .map(|r| length(&r.key) + length(&r.value))
        .sum()
}

impl Format {
    /// The format's name in the read audit.
    pub(crate) fn audited_as(self) -> ReadFormat {
        match self {
            Format::Json => ReadFormat::Json,
            Format::Ndjson => ReadFormat::Ndjson,
            Format::Sse => ReadFormat::Sse,
            Format::Batches => ReadFormat::RecordBatches,
        }
    }
}

impl Offers for Format {
    const OFFERS: &'static [(&'static str, Format)] = &[
        ("application/json", Format::Json),
        (NDJSON, Format::Ndjson),
        (EVENT_STREAM, Format::Sse),
        (RECORD_BATCHES, Format::Batches),
        ("application/octet-stream", Format::Batches),
    ];
}

/// Records read for an answer, in the API's shape: what could be served, and the error that
/// stopped the read early, if one did after the first record.
pub(crate) struct Page {
    /// The records and positions to answer with.
    pub(crate) response: FetchResponse,
    /// Set when a batch after the returned records failed: the next read at
    /// `response.next_offset` gets this error.
    pub(crate) stopped_by: Option<ApiError>,
    /// Key and value bytes of the records, for the fetch byte counters.
    pub(crate) payload_bytes: u64,
    /// What the page sends, for the read audit.
    pub(crate) disclosed: Option<Disclosed>,
}

impl Page {
    /// Counts the page as served in `format`.
    pub(crate) fn count(&self, stats: &super::observe::HttpStats, format: &'static str) {
        let records = self.response.records.len() as u64;
        stats.fetched(format, records, self.payload_bytes);
    }
}

/// Reads records (see [`read_records`]) and shapes them for the answer.
///
/// # Errors
/// When the very first batch cannot be read or fails validation.
pub(crate) async fn read_page(
    reader: &PartitionReader,
    request: &FetchRequest,
) -> Result<Page, ApiError> {
    let read = read_records(reader, &request.read_request()).await?;
    Ok(page(request.partition, read, request.format))
}

/// A read in the API's shape.
pub(crate) fn page(partition: u32, read: RecordsRead, format: ValueFormat) -> Page {
    let records = read
        .records
        .iter()
        .map(|record| to_fetched_record(partition, record, format))
        .collect();
    let payload_bytes = payload_bytes(&read.records);
    Page {
        payload_bytes,
        disclosed: Disclosed::of_records(partition, &read.records),
        response: FetchResponse {
            records,
            next_offset: read.next_offset,
            high_watermark: read.offsets.high_watermark,
            log_start_offset: read.offsets.log_start_offset,
        },
        stopped_by: read.stopped_by.map(ApiError::from),
    }
}

fn batches(slice: ReadSlice, stats: &super::observe::HttpStats) -> Response {
    let records = slice.next_offset.saturating_sub(slice.first_offset);
    stats.fetched("record_batches", records, slice.data.len() as u64);
    let mut response = Response::new(Body::from(slice.data));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(RECORD_BATCHES));
    headers.insert("strata-first-offset", HeaderValue::from(slice.first_offset));
    insert_positions(
        headers,
        slice.next_offset,
        slice.offsets.high_watermark,
        slice.offsets.log_start_offset,
    );
    response
}

/// Where to go on, for the formats whose body holds only records: `Strata-Next-Offset` (past
/// records compaction removed, so not always the last record's offset + 1),
/// `Strata-High-Watermark` and `Strata-Log-Start-Offset`.
fn insert_positions(headers: &mut HeaderMap, next: u64, high_watermark: u64, log_start: u64) {
    for (name, value) in [
        ("strata-next-offset", next),
        ("strata-high-watermark", high_watermark),
        ("strata-log-start-offset", log_start),
    ] {
        headers.insert(name, HeaderValue::from(value));
    }
}

/// The records as NDJSON lines. The body is computed before the answer, so a read that fails
/// at its first batch gets the error's status; one that fails after some records ends with one
/// last line holding the error body (`{"error": {...}}`), so a client can tell a cut-short
/// answer from a complete one.
fn ndjson(read: Page) -> Response {
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
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    insert_positions(
        headers,
        read.response.next_offset,
        read.response.high_watermark,
        read.response.log_start_offset,
    );
    *response.status_mut() = StatusCode::OK;
    response
}

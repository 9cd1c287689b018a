//! Produce: JSON records to a topic (partition by key) or to one partition, and raw Kafka
//! RecordBatch v2 bytes to one partition.
//!
//! Records of one request that go to the same partition become one batch and commit atomically;
//! records for different partitions are appended concurrently. Keyless records without an explicit
//! partition all go to one partition per request (sticky), as Kafka's sticky partitioner does per
//! producer batch.

use axum::Json;
use axum::extract::{FromRequest, Request, State};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use strata_openapi::{
    Acks as AcksParam, AnswerShape, CompactProduceResponse, ErrorBody, ErrorCode, PartitionAppend,
    ProduceAnswer, ProduceQuery, ProduceRequest, ProduceResponse, RecordOffset,
};

use super::AppState;
use super::body_guard::UnreadBody;
use super::error::ApiError;
use super::extract::{ApiBytes, ApiJsonBytes, ApiPath, ApiQuery};
use super::paths;
use super::produce_body::ProduceBody;
use super::produce_stream;
use crate::broker::produce::{
    AppendTerms, ProduceRecords, ProduceTarget, Produced, ProducerSession,
};
use crate::log::Acks;
use crate::security::Caller;

/// Media type of raw Kafka RecordBatch v2 bytes, as stored.
pub const RECORD_BATCHES: &str = "application/vnd.strata.record-batches";

/// Produce records to a topic.
///
/// Each record goes to its `partition` if given, else to Kafka's murmur2 hash of its key modulo
/// the partition count (the partition a Kafka client's default partitioner picks), else to one
/// partition chosen per request. `value_format` says how `value` is stored (`json`: compact JSON
/// text; `string`: UTF-8 text; `base64`: the decoded bytes). `"value": null` is a null value (a
/// tombstone on compacted topics). The response lists partition, offset and timestamp for every
/// record, in request order; with `answer=compact`, the first offset and record count per
/// partition instead. With `acks=all` (default) the answer comes after the records are
/// fsynced; with `acks=leader` after they reached the page cache.
///
/// Needs `write` on the topic, and with a producer id, to be the principal it was issued to (or
/// a super user).
#[utoipa::path(post, path = paths::TOPIC_RECORDS, tag = "records",
    params(("topic" = String, Path, description = "Topic name"), ProduceQuery),
    request_body = ProduceRequest,
    responses(
        (status = 200, description = "Offsets of the records (per record, or per partition with `answer=compact`)", body = ProduceAnswer),
        (status = 400, description = "Malformed JSON or query", body = ErrorBody),
        (status = 404, description = "No such topic or partition", body = ErrorBody),
        (status = 409, description = "Producer fenced, sequence gap, or an internal topic (`internal_topic`)", body = ErrorBody),
        (status = 413, description = "Request or record too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "Invalid records", body = ErrorBody),
        (status = 503, description = "Storage unavailable or busy; retry", body = ErrorBody),
    ))]
pub async fn produce_to_topic(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(topic): ApiPath<String>,
    ApiQuery(query): ApiQuery<ProduceQuery>,
    ApiJsonBytes(body): ApiJsonBytes,
) -> Result<Json<ProduceAnswer>, ApiError> {
    let request = ProduceBody::parse(&body)?;
    let topic = state.broker.producible_topic(&caller, &topic)?;
    let records = decode_records(&query, request)?;
    state.broker.admit_produce(&caller, body.len() as u64)?;
    let produced = state
        .broker
        .produce(&caller, &topic, ProduceTarget::Topic, records)
        .await?;
    Ok(Json(response(produced, query.answer)))
}

/// Produce records to one partition, as JSON or as raw Kafka RecordBatch v2 bytes.
///
/// With `Content-Type: application/vnd.strata.record-batches` the body is one or more Kafka
/// RecordBatch v2 batches (magic 2; records uncompressed or compressed with gzip, snappy, lz4
/// or zstd): each is validated (length, CRC, records, maxTimestamp) and stored exactly as
/// sent, except that the broker writes `baseOffset` (and, on a `LogAppendTime` topic, the
/// append time; with a topic `compression_type`, that codec). A body sent with
/// `Content-Encoding: gzip` is decoded first; other codings get 415. Producer id, epoch and
/// sequence in a batch header make it idempotent. `expected_offset` (query parameter for raw
/// bytes, body field for JSON) makes the append conditional: it happens only if the partition's
/// log end offset equals it, else 412 `offset_mismatch` with the actual log end.
///
/// Needs `write` on the topic, and with a producer id, to be the principal it was issued to (or
/// a super user).
#[utoipa::path(post, path = paths::PARTITION_RECORDS, tag = "records",
    params(("topic" = String, Path, description = "Topic name"),
           ("partition" = u32, Path, description = "Partition number"),
           ProduceQuery,
           ("expected_offset" = Option<u64>, Query, description = "Raw bodies only: append only if the log end offset equals this")),
    request_body(content(
        (ProduceRequest = "application/json"),
        (strata_openapi::RecordBatchBytes = "application/vnd.strata.record-batches"))),
    responses(
        (status = 200, description = "Offsets of the records (per record, or per partition with `answer=compact`)", body = ProduceAnswer),
        (status = 400, description = "Malformed JSON, query or record batch", body = ErrorBody),
        (status = 404, description = "No such topic or partition", body = ErrorBody),
        (status = 409, description = "Producer fenced, sequence gap, or an internal topic (`internal_topic`)", body = ErrorBody),
        (status = 412, description = "Log end offset differs from expected_offset", body = ErrorBody),
        (status = 413, description = "Request or record too large", body = ErrorBody),
        (status = 415, description = "Neither JSON nor record batches", body = ErrorBody),
        (status = 422, description = "Invalid records", body = ErrorBody),
        (status = 503, description = "Storage unavailable or busy; retry", body = ErrorBody),
    ))]
pub async fn produce_to_partition(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((topic, partition)): ApiPath<(String, u32)>,
    ApiQuery(query): ApiQuery<PartitionProduceQuery>,
    request: Request,
) -> Result<Json<ProduceAnswer>, ApiError> {
    let topic = state.broker.producible_topic(&caller, &topic)?;
    crate::broker::local_partition(topic.topic(), partition)?;
    let media = media_type(request.headers());
    // The body guard leaves only large raw bodies unread; their lease streams them in.
    let (body, lease) = match request.extensions().get::<UnreadBody>().copied() {
        Some(unread) => {
            state.broker.admit_produce(&caller, unread.length as u64)?;
            let body = request.into_body();
            produce_stream::receive(&state.broker, &topic, partition, body, unread).await?
        }
        None => {
            let ApiBytes(body) = ApiBytes::from_request(request, &state).await?;
            state.broker.admit_produce(&caller, body.len() as u64)?;
            (body, None)
        }
    };
    let produced = match media.as_str() {
        "application/json" => {
            if query.expected_offset.is_some() {
                return Err(ApiError::new(
                    ErrorCode::Invalid,
                    "for JSON bodies, put expected_offset in the body",
                ));
            }
            let request = ProduceBody::parse(&body)?;
            let produce = ProduceQuery {
                value_format: query.value_format,
                acks: query.acks,
                answer: query.answer,
            };
            let records = decode_records(&produce, request)?;
            let target = ProduceTarget::Partition(partition);
            state
                .broker
                .produce(&caller, &topic, target, records)
                .await?
        }
        raw if is_raw_media(raw) => {
            let terms = AppendTerms {
                acks: acks(query.acks),
                expected_offset: query.expected_offset,
            };
            let broker = &state.broker;
            broker
                .produce_batches(&caller, &topic, partition, body, lease, terms)
                .await?
        }
        _ => {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                format!("Content-Type must be application/json or {RECORD_BATCHES}"),
            ));
        }
    };
    Ok(Json(response(produced, query.answer)))
}

/// The request's media type (`Content-Type` without parameters), lower case.
pub fn media_type(headers: &HeaderMap) -> String {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Whether a media type names raw RecordBatch bytes.
pub fn is_raw_media(media: &str) -> bool {
    matches!(media, RECORD_BATCHES | "application/octet-stream")
}

/// Query of the per-partition produce.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PartitionProduceQuery {
    #[serde(default)]
    value_format: strata_openapi::ValueFormat,
    #[serde(default)]
    acks: AcksParam,
    #[serde(default)]
    answer: AnswerShape,
    expected_offset: Option<u64>,
}

/// The request's records decoded from their JSON shapes (`value_format`), with the producer.
fn decode_records(query: &ProduceQuery, body: ProduceBody<'_>) -> Result<ProduceRecords, ApiError> {
    let (records, fields) = body.into_records(query.value_format)?;
    Ok(ProduceRecords {
        records,
        producer: fields.producer.map(|fields| ProducerSession {
            producer_id: fields.producer_id,
            producer_epoch: fields.producer_epoch,
            sequences: fields.sequences,
        }),
        acks: acks(query.acks),
        expected_offset: fields.expected_offset,
    })
}

fn response(produced: Produced, shape: AnswerShape) -> ProduceAnswer {
    match shape {
        AnswerShape::Records => ProduceAnswer::Records(ProduceResponse {
            offsets: produced
                .positions
                .into_iter()
                .map(|p| RecordOffset {
                    partition: p.partition,
                    offset: p.offset,
                    timestamp: p.timestamp,
                })
                .collect(),
            duplicate: produced.duplicate,
        }),
        AnswerShape::Compact => ProduceAnswer::Compact(compact(produced)),
    }
}

/// One range per partition: a request's records in one partition form one batch, so their
/// offsets are consecutive in request order.
fn compact(produced: Produced) -> CompactProduceResponse {
    let mut partitions: Vec<PartitionAppend> = Vec::new();
    for position in produced.positions {
        match partitions
            .iter_mut()
            .find(|p| p.partition == position.partition)
        {
            Some(range) => range.record_count += 1,
            None => partitions.push(PartitionAppend {
                partition: position.partition,
                base_offset: position.offset,
                record_count: 1,
            }),
        }
    }
    CompactProduceResponse {
        partitions,
        duplicate: produced.duplicate,
    }
}

fn acks(param: AcksParam) -> Acks {
    match param {
        AcksParam::All => Acks::All,
        AcksParam::Leader => Acks::Leader,
    }
}

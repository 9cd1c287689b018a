//! Produce: JSON records to a topic (partition by key) or to one partition, and raw Kafka
//! RecordBatch v2 bytes to one partition.
//!
//! Records of one request that go to the same partition become one batch and commit atomically;
//! records for different partitions are appended concurrently. Keyless records without an explicit
//! partition all go to one partition per request (sticky), as Kafka's sticky partitioner does per
//! producer batch.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use strata_openapi::{
    Acks as AcksParam, ErrorBody, ErrorCode, ProduceQuery, ProduceRequest, ProduceResponse,
    ProducerFields, RecordOffset,
};

use super::AppState;
use super::codec::to_new_record;
use super::error::ApiError;
use super::extract::{ApiBytes, ApiJson, ApiPath, ApiQuery};
use crate::limits::MAX_RECORDS_PER_REQUEST;
use crate::log::batch::{BatchHeader, BatchOptions, Compression, TimestampType, encode_batch};
use crate::log::{Acks, BatchAck, NewRecord, Partition, RecordBatch};
use crate::topics::catalog::Topic;
use crate::topics::config::{CompressionType, MessageTimestampType, TopicConfig};
use crate::topics::partitioner::{StickyPartitioner, partition_for_key};

/// Media type of raw Kafka RecordBatch v2 bytes, as stored.
pub const RECORD_BATCHES: &str = "application/vnd.strata.record-batches";

static STICKY_SEED: AtomicU64 = AtomicU64::new(0x5eed);

/// Produce records to a topic.
///
/// Each record goes to its `partition` if given, else to Kafka's murmur2 hash of its key modulo
/// the partition count (the partition a Kafka client's default partitioner picks), else to one
/// partition chosen per request. `value_format` says how `value` is stored (`json`: compact JSON
/// text; `string`: UTF-8 text; `base64`: the decoded bytes). `"value": null` is a null value (a
/// tombstone on compacted topics). The response lists partition, offset and timestamp for every
/// record, in request order. With `acks=all` (default) the answer comes after the records are
/// fsynced; with `acks=leader` after they reached the page cache.
#[utoipa::path(post, path = "/v1/topics/{topic}/records", tag = "records",
    params(("topic" = String, Path, description = "Topic name"), ProduceQuery),
    request_body = ProduceRequest,
    responses(
        (status = 200, description = "Offsets of the records", body = ProduceResponse),
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
    ApiPath(topic): ApiPath<String>,
    ApiQuery(query): ApiQuery<ProduceQuery>,
    ApiJson(request): ApiJson<ProduceRequest>,
) -> Result<Json<ProduceResponse>, ApiError> {
    let topic = state.writable_topic(&topic)?;
    if request.expected_offset.is_some() {
        return Err(ApiError::new(
            ErrorCode::Invalid,
            "expected_offset applies to one partition: use /v1/topics/{topic}/partitions/{p}/records",
        ));
    }
    produce_json(&state, &topic, None, &query, request)
        .await
        .map(Json)
}

/// Produce records to one partition, as JSON or as raw Kafka RecordBatch v2 bytes.
///
/// With `Content-Type: application/vnd.strata.record-batches` the body is one or more Kafka
/// RecordBatch v2 batches (magic 2, uncompressed): each is validated (length, CRC, records) and
/// stored exactly as sent, except that the broker writes `baseOffset`. Producer id, epoch and
/// sequence in a batch header make it idempotent. `expected_offset` (query parameter for raw
/// bytes, body field for JSON) makes the append conditional: it happens only if the partition's
/// log end offset equals it, else 412 `offset_mismatch` with the actual log end.
#[utoipa::path(post, path = "/v1/topics/{topic}/partitions/{partition}/records", tag = "records",
    params(("topic" = String, Path, description = "Topic name"),
           ("partition" = u32, Path, description = "Partition number"),
           ProduceQuery,
           ("expected_offset" = Option<u64>, Query, description = "Raw bodies only: append only if the log end offset equals this")),
    request_body(content(
        (ProduceRequest = "application/json"),
        (strata_openapi::RecordBatchBytes = "application/vnd.strata.record-batches"))),
    responses(
        (status = 200, description = "Offsets of the records", body = ProduceResponse),
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
    ApiPath((topic, partition)): ApiPath<(String, u32)>,
    ApiQuery(query): ApiQuery<PartitionProduceQuery>,
    headers: HeaderMap,
    ApiBytes(body): ApiBytes,
) -> Result<Json<ProduceResponse>, ApiError> {
    let topic = state.writable_topic(&topic)?;
    let log = topic
        .partition(partition)
        .ok_or_else(|| partition_not_found(&topic, partition))?;
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let produce = ProduceQuery {
        value_format: query.value_format,
        acks: query.acks,
    };
    match media.as_str() {
        "application/json" => {
            if query.expected_offset.is_some() {
                return Err(ApiError::new(
                    ErrorCode::Invalid,
                    "for JSON bodies, put expected_offset in the body",
                ));
            }
            let request: ProduceRequest = super::extract::parse_json(&body)?;
            if let Some(bad) = request
                .records
                .iter()
                .position(|r| r.partition.is_some_and(|p| p != partition))
            {
                return Err(ApiError::new(
                    ErrorCode::Invalid,
                    format!("records[{bad}].partition differs from the partition in the path"),
                ));
            }
            produce_json(&state, &topic, Some(partition), &produce, request)
                .await
                .map(Json)
        }
        RECORD_BATCHES | "application/octet-stream" => {
            produce_raw(&state, &topic, partition, &log, &query, body)
                .await
                .map(Json)
        }
        _ => Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            format!("Content-Type must be application/json or {RECORD_BATCHES}"),
        )),
    }
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
    expected_offset: Option<u64>,
}

async fn produce_json(
    state: &AppState,
    topic: &Arc<Topic>,
    fixed_partition: Option<u32>,
    query: &ProduceQuery,
    request: ProduceRequest,
) -> Result<ProduceResponse, ApiError> {
    if request.records.is_empty() {
        return Err(ApiError::new(
            ErrorCode::Invalid,
            "records must not be empty",
        ));
    }
    if request.records.len() > MAX_RECORDS_PER_REQUEST {
        return Err(ApiError::new(
            ErrorCode::Invalid,
            format!("at most {MAX_RECORDS_PER_REQUEST} records per request"),
        ));
    }
    let config = topic.config();
    let count = topic.partition_count();
    let now = state.clock.now_ms();
    let sticky = StickyPartitioner::new(count, STICKY_SEED.fetch_add(1, Ordering::Relaxed));
    // Records per partition, remembering each one's index in the request.
    let mut groups: BTreeMap<u32, Vec<(usize, NewRecord)>> = BTreeMap::new();
    for (index, record) in request.records.iter().enumerate() {
        if record.timestamp.is_some_and(|t| t < 0) {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                format!("records[{index}].timestamp must be >= 0 (ms since the Unix epoch)"),
            ));
        }
        let timestamp = match config.message_timestamp_type {
            MessageTimestampType::LogAppendTime => now,
            MessageTimestampType::CreateTime => record.timestamp.unwrap_or(now),
        };
        let new = to_new_record(record, query.value_format, timestamp, index)?;
        if config.cleanup_policy.compacts() && new.key.is_none() {
            return Err(ApiError::new(
                ErrorCode::KeyRequired,
                format!("records[{index}]: compacted topics need a key on every record"),
            ));
        }
        let partition = match (fixed_partition, record.partition, &new.key) {
            (Some(fixed), _, _) => fixed,
            (None, Some(explicit), _) => explicit,
            (None, None, Some(key)) => partition_for_key(key, count),
            (None, None, None) => sticky.partition(),
        };
        if partition >= count {
            return Err(partition_not_found(topic, partition));
        }
        groups.entry(partition).or_default().push((index, new));
    }
    let producer = match &request.producer {
        Some(fields) => Some(check_producer(state, fields).await?),
        None => None,
    };
    let mut appends = Vec::with_capacity(groups.len());
    for (partition, records) in &groups {
        let options = batch_options(&config, producer.as_ref(), *partition)?;
        let new: Vec<NewRecord> = records.iter().map(|(_, r)| r.clone()).collect();
        let bytes = encode_batch(&options, &new).map_err(|e| {
            ApiError::new(ErrorCode::Invalid, format!("cannot encode records: {e}"))
        })?;
        let batch = RecordBatch::decode_exact(bytes).map_err(|e| {
            ApiError::new(ErrorCode::Invalid, format!("cannot encode records: {e}"))
        })?;
        let log = topic
            .partition(*partition)
            .ok_or_else(|| partition_not_found(topic, *partition))?;
        appends.push(append(
            log,
            batch,
            acks(query.acks),
            request.expected_offset,
        ));
    }
    let results = futures::future::join_all(appends).await;
    let mut offsets = vec![None; request.records.len()];
    let mut duplicate = false;
    for ((partition, records), result) in groups.iter().zip(results) {
        let ack = result?;
        duplicate |= ack.duplicate;
        // A retry's answer carries what the first attempt stored, not the retry's timestamps.
        let stored = match ack.duplicate {
            true => stored_timestamps(topic, *partition, &ack).await?,
            false => records.iter().map(|(_, r)| r.timestamp).collect(),
        };
        for (position, ((index, _), timestamp)) in records.iter().zip(stored).enumerate() {
            offsets[*index] = Some(RecordOffset {
                partition: *partition,
                offset: ack.base_offset + position as u64,
                timestamp,
            });
        }
    }
    let offsets = offsets.into_iter().flatten().collect();
    Ok(ProduceResponse { offsets, duplicate })
}

async fn append(
    log: Arc<Partition>,
    batch: RecordBatch,
    acks: Acks,
    expected_offset: Option<u64>,
) -> Result<BatchAck, ApiError> {
    let acks = log.append_if(vec![batch], acks, expected_offset).await?;
    acks.into_iter()
        .next()
        .ok_or_else(|| ApiError::new(ErrorCode::Internal, "append returned no offsets"))
}

/// Identity of an idempotent producer, checked against the registry.
struct CheckedProducer {
    fields: ProducerFields,
}

async fn check_producer(
    state: &AppState,
    fields: &ProducerFields,
) -> Result<CheckedProducer, ApiError> {
    check_epoch(state, fields.producer_id, fields.producer_epoch).await?;
    Ok(CheckedProducer {
        fields: fields.clone(),
    })
}

/// Refuses ids this server did not issue, epochs it did not issue, and epochs older than the
/// newest one issued for the id (fenced sessions).
async fn check_epoch(state: &AppState, producer_id: i64, epoch: i16) -> Result<(), ApiError> {
    let Some(current) = state.producers.epoch(producer_id).await else {
        return Err(ApiError::new(
            ErrorCode::InvalidProducer,
            format!("producer id {producer_id} was not issued by this server (POST /v1/producers)"),
        ));
    };
    if epoch < current {
        return Err(ApiError::new(
            ErrorCode::ProducerFenced,
            format!("producer {producer_id} epoch {epoch} is fenced by epoch {current}"),
        ));
    }
    if epoch > current {
        return Err(ApiError::new(
            ErrorCode::InvalidProducer,
            format!("producer {producer_id} epoch {epoch} was never issued (current {current})"),
        ));
    }
    Ok(())
}

fn batch_options(
    config: &TopicConfig,
    producer: Option<&CheckedProducer>,
    partition: u32,
) -> Result<BatchOptions, ApiError> {
    let timestamp_type = match config.message_timestamp_type {
        MessageTimestampType::CreateTime => TimestampType::CreateTime,
        MessageTimestampType::LogAppendTime => TimestampType::LogAppendTime,
    };
    let mut options = BatchOptions {
        timestamp_type,
        compression: topic_codec(config).unwrap_or(Compression::None),
        ..BatchOptions::default()
    };
    if let Some(producer) = producer {
        let fields = &producer.fields;
        let sequence = fields
            .sequences
            .get(&partition.to_string())
            .copied()
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::Invalid,
                    format!("producer.sequences has no sequence for partition {partition}"),
                )
            })?;
        if sequence < 0 {
            return Err(ApiError::new(ErrorCode::Invalid, "sequences must be >= 0"));
        }
        options.producer_id = fields.producer_id;
        options.producer_epoch = fields.producer_epoch;
        options.base_sequence = sequence;
    }
    Ok(options)
}

async fn produce_raw(
    state: &AppState,
    topic: &Arc<Topic>,
    partition: u32,
    log: &Arc<Partition>,
    query: &PartitionProduceQuery,
    body: Bytes,
) -> Result<ProduceResponse, ApiError> {
    let mut batches = Vec::new();
    let mut position = 0;
    while position < body.len() {
        let bad = |e: &dyn std::fmt::Display| {
            ApiError::new(
                ErrorCode::BadRecordBatch,
                format!("batch at byte {position}: {e}"),
            )
        };
        let batch = RecordBatch::decode_first(&body.slice(position..)).map_err(|e| bad(&e))?;
        refuse_unsupported(batch.header(), position)?;
        batch.validate_for_append().map_err(|e| bad(&e))?;
        let header = batch.header();
        if header.producer_id >= 0 {
            check_epoch(state, header.producer_id, header.producer_epoch).await?;
        }
        position += batch.len();
        batches.push(batch);
    }
    if batches.is_empty() {
        return Err(ApiError::new(
            ErrorCode::BadRecordBatch,
            "the body holds no record batch",
        ));
    }
    let compacted = topic.config().cleanup_policy.compacts();
    let mut timestamps = Vec::with_capacity(batches.len());
    for batch in &batches {
        let mut stamps = Vec::new();
        for record in batch.records() {
            let record =
                record.map_err(|e| ApiError::new(ErrorCode::BadRecordBatch, e.to_string()))?;
            if compacted && record.key.is_none() {
                return Err(ApiError::new(
                    ErrorCode::KeyRequired,
                    "compacted topics need keys",
                ));
            }
            if record.timestamp < 0 {
                return Err(ApiError::new(
                    ErrorCode::Invalid,
                    format!(
                        "record at offset delta {} has timestamp {}: timestamps must be >= 0",
                        record.offset - batch.header().base_offset,
                        record.timestamp
                    ),
                ));
            }
            stamps.push(record.timestamp);
        }
        timestamps.push(stamps);
    }
    if let Some(codec) = topic_codec(&topic.config()) {
        for batch in &mut batches {
            *batch = batch.with_compression(codec).map_err(|e| {
                ApiError::new(ErrorCode::BadRecordBatch, format!("cannot recompress: {e}"))
            })?;
        }
    }
    let acks = log
        .append_if(batches, acks(query.acks), query.expected_offset)
        .await?;
    let mut offsets = Vec::new();
    let mut duplicate = false;
    for (ack, stamps) in acks.iter().zip(timestamps) {
        duplicate |= ack.duplicate;
        let stamps = match ack.duplicate {
            true => stored_timestamps(topic, partition, ack).await?,
            false => stamps,
        };
        for (i, timestamp) in stamps.into_iter().enumerate() {
            offsets.push(RecordOffset {
                partition,
                offset: ack.base_offset + i as u64,
                timestamp,
            });
        }
    }
    Ok(ProduceResponse { offsets, duplicate })
}

/// The codec a topic stores batches with; `None` keeps the producer's.
fn topic_codec(config: &TopicConfig) -> Option<Compression> {
    match config.compression_type {
        CompressionType::Producer => None,
        CompressionType::Uncompressed => Some(Compression::None),
        CompressionType::Gzip => Some(Compression::Gzip),
        CompressionType::Snappy => Some(Compression::Snappy),
        CompressionType::Lz4 => Some(Compression::Lz4),
        CompressionType::Zstd => Some(Compression::Zstd),
    }
}

/// 422 `unsupported_record_batch` for batch features Strata does not implement yet.
fn refuse_unsupported(header: &BatchHeader, position: usize) -> Result<(), ApiError> {
    let feature = if header.is_control() {
        "control batches (transaction markers)"
    } else if header.is_transactional() {
        "transactional batches (Strata has no transactions yet)"
    } else {
        return Ok(());
    };
    Err(ApiError::new(
        ErrorCode::UnsupportedRecordBatch,
        format!("batch at byte {position}: {feature} are not supported"),
    ))
}

/// Timestamps of the stored records of a batch the log already held (an idempotent retry).
async fn stored_timestamps(
    topic: &Topic,
    partition: u32,
    ack: &BatchAck,
) -> Result<Vec<i64>, ApiError> {
    let log = topic
        .partition(partition)
        .ok_or_else(|| partition_not_found(topic, partition))?;
    let slice = log.read(ack.base_offset, 1).await?;
    let mut stamps = Vec::new();
    for batch in crate::log::Batches::new(slice.data) {
        let batch = batch.map_err(|e| ApiError::internal(ErrorCode::Corrupt, &e))?;
        for record in batch.records().flatten() {
            let offset = u64::try_from(record.offset).unwrap_or(0);
            if (ack.base_offset..=ack.last_offset).contains(&offset) {
                stamps.push(record.timestamp);
            }
        }
    }
    Ok(stamps)
}

fn acks(param: AcksParam) -> Acks {
    match param {
        AcksParam::All => Acks::All,
        AcksParam::Leader => Acks::Leader,
    }
}

/// 404 for a partition number the topic does not have.
pub fn partition_not_found(topic: &Topic, partition: u32) -> ApiError {
    ApiError::new(
        ErrorCode::PartitionNotFound,
        format!(
            "topic {} has no partition {partition} (it has {})",
            topic.name(),
            topic.partition_count()
        ),
    )
}

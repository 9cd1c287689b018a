//! Produce and fetch bodies and their query parameters.
//!
//! How bytes travel in JSON: Strata stores keys, values and header values as raw bytes, and the
//! JSON forms below map onto those bytes exactly.
//! - Keys: `key` is a UTF-8 string stored as its bytes (so a key lands on the partition a Kafka
//!   client with a string serializer picks); `key_base64` carries any other bytes.
//! - Values follow [`ValueFormat`]: `json` stores the value as its JSON text less the whitespace
//!   between tokens (numbers keep every digit, objects their key order) and returns that text,
//!   `string` stores UTF-8 text as is, `base64` carries arbitrary bytes.
//! - A `null` or absent value is a null value: a tombstone on compacted topics.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::{IntoParams, PartialSchema, ToSchema};

/// Raw Kafka RecordBatch v2 bytes, the body of `application/vnd.strata.record-batches` on
/// per-partition produce and fetch: a binary string in the OpenAPI document, so that generated
/// clients and fuzzers send and expect bytes rather than a JSON array.
///
/// Schema only: the server reads and writes these bodies as bytes.
pub enum RecordBatchBytes {}

impl PartialSchema for RecordBatchBytes {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)))
            .description(Some(
                "Kafka RecordBatch v2 bytes (magic 2; records uncompressed or compressed with \
                 gzip, snappy, lz4 or zstd), one batch after another.",
            ))
            .build()
            .into()
    }
}

impl ToSchema for RecordBatchBytes {}

/// How record values (and header values) are written in JSON, chosen with the `value_format`
/// query parameter on produce and fetch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ValueFormat {
    /// Any JSON value, stored as its JSON text less the whitespace between tokens and returned
    /// as that text: numbers keep every digit as written and objects their key order. A number
    /// beyond a double's range (such as `1e400`) is refused. Header values are UTF-8 strings.
    #[default]
    Json,
    /// A JSON string whose UTF-8 text is stored as is. Header values are UTF-8 strings.
    String,
    /// A base64 string (RFC 4648 standard alphabet, padded) carrying arbitrary bytes. Header
    /// values are base64 too.
    Base64,
}

/// When the server answers a produce request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Acks {
    /// After the records are fsynced to disk: an acknowledged record survives a crash.
    #[default]
    All,
    /// After the records are written to the log but before fsync: faster, but a crash of the
    /// machine can lose acknowledged records.
    Leader,
}

/// How a produce request is answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnswerShape {
    /// One entry per record (partition, offset, timestamp), in request order.
    #[default]
    Records,
    /// One entry per partition written: the first offset and the record count (as Kafka's
    /// produce response does). A 1,000-record request is answered in about 80 bytes instead of
    /// 55 KB.
    Compact,
}

/// Query parameters of both produce endpoints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ProduceQuery {
    /// How `value` and header values are written in the request body.
    #[serde(default)]
    pub value_format: ValueFormat,
    /// When to answer: `all` (default) after fsync, `leader` after the write.
    #[serde(default)]
    pub acks: Acks,
    /// `records` (default): an offset per record; `compact`: a range per partition.
    #[serde(default)]
    pub answer: AnswerShape,
}

/// One record to append. Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({
    "key": "customer-42",
    "value": {"order_id": 1001, "total": 25.5},
    "headers": {"trace_id": "4bf92f3577b34da6"}
})))]
pub struct ProduceRecord {
    /// Record key as UTF-8 text, stored as its bytes; it picks the partition (Kafka's murmur2
    /// partitioner) unless `partition` is given. Do not combine with `key_base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Record key as base64 (RFC 4648 standard alphabet, padded), for keys that are not UTF-8.
    /// Do not combine with `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_base64: Option<String>,
    /// Record value in the request's `value_format`. `null` or absent: a null value, which is a
    /// tombstone on compacted topics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Record headers: name to value in the request's header encoding (UTF-8 text, or base64
    /// with `value_format=base64`); `null` is a header without a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, Option<String>>>,
    /// Record timestamp in milliseconds since the Unix epoch. Absent: the server's clock. Topics
    /// with `message_timestamp_type` = `LogAppendTime` always use the server's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// Partition to write to. Absent: the key's partition, or for keyless records one partition
    /// chosen per request. On the per-partition endpoint it must be absent or equal the path's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
}

/// Body of `POST /v1/topics/{topic}/records` and of the per-partition produce endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(
    json!({
        "records": [
            {"key": "customer-42", "value": {"order_id": 1001, "total": 25.5}},
            {"key": "customer-7", "value": {"order_id": 1002, "total": 9.0}}
        ]
    }),
    json!({
        "records": [{"key": "customer-42", "value": {"order_id": 1003}}],
        "producer": {"producer_id": 7, "producer_epoch": 0, "sequences": {"1": 12}}
    })
))]
pub struct ProduceRequest {
    /// Records to append. Records for the same partition commit atomically and get
    /// consecutive offsets in request order. Each partition is a separate append: when one
    /// fails after others were stored, the error lists those in `stored`.
    #[schema(min_items = 1)]
    pub records: Vec<ProduceRecord>,
    /// Idempotent producer identity and sequences. With it, a retried request is answered
    /// with the original offsets instead of appending the records again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer: Option<ProducerFields>,
    /// Conditional append, per-partition endpoint only: the offset the caller expects the first
    /// record to get. If the log end offset differs, nothing is appended and the answer is 412
    /// `offset_mismatch` with the actual `log_end_offset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_offset: Option<u64>,
}

/// Idempotent producer fields, with Kafka's semantics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProducerFields {
    /// Producer id from `POST /v1/producers`.
    #[schema(minimum = 0)]
    pub producer_id: i64,
    /// Producer epoch from `POST /v1/producers`. A request with an epoch older than the
    /// newest one for this id is rejected with 409 `producer_fenced`.
    #[schema(minimum = 0, maximum = 32767)]
    pub producer_epoch: i16,
    /// For each partition this request writes to (the partition number as a string, since JSON
    /// object keys are strings), the sequence number of that partition's first record in this
    /// request. Per producer and partition, sequences start at 0 and advance by the number of
    /// records sent. Resending the same sequence is a retry (answered with the original
    /// offsets, `duplicate: true`); skipping ahead is 409 `sequence_gap`.
    pub sequences: BTreeMap<String, i32>,
}

/// Response of a produce request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(json!({
    "offsets": [
        {"partition": 1, "offset": 1200, "timestamp": 1735689600000_i64},
        {"partition": 0, "offset": 877, "timestamp": 1735689600000_i64}
    ],
    "duplicate": false
})))]
pub struct ProduceResponse {
    /// Where each record landed, in request order.
    pub offsets: Vec<RecordOffset>,
    /// True when this request was a retry of one already appended: the offsets are the
    /// original ones and nothing was appended again. False when anything of the request was
    /// appended now, even if some of its batches were retries.
    pub duplicate: bool,
}

/// Response of a produce request with `answer=compact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(json!({
    "partitions": [
        {"partition": 1, "base_offset": 1200, "record_count": 3},
        {"partition": 0, "base_offset": 877, "record_count": 1}
    ],
    "duplicate": false
})))]
pub struct CompactProduceResponse {
    /// One entry per partition the request wrote to, in the order the partitions first appear
    /// in the request. A partition's records got consecutive offsets from `base_offset`, in
    /// request order.
    pub partitions: Vec<PartitionAppend>,
    /// True when this request was a retry of one already appended: the offsets are the
    /// original ones and nothing was appended again. False when anything of the request was
    /// appended now, even if some of its batches were retries.
    pub duplicate: bool,
}

/// The records one produce request appended to one partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PartitionAppend {
    /// The partition.
    pub partition: u32,
    /// Offset of the partition's first record of the request.
    pub base_offset: u64,
    /// How many records of the request went to this partition.
    pub record_count: u64,
}

/// Either answer of a produce request: per record (default) or per partition (`answer=compact`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ProduceAnswer {
    /// `answer=records` (default).
    Records(ProduceResponse),
    /// `answer=compact`.
    Compact(CompactProduceResponse),
}

/// Where one produced record landed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RecordOffset {
    /// Partition the record was written to.
    pub partition: u32,
    /// Offset the record got in that partition.
    pub offset: u64,
    /// Timestamp stored with the record, in milliseconds since the Unix epoch.
    pub timestamp: i64,
}

/// Query parameters of `GET /v1/topics/{topic}/partitions/{partition}/records`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct FetchQuery {
    /// First offset to read. Do not combine with `timestamp`. Neither given: the log start.
    /// Below the log start or above the high watermark: 416 `offset_out_of_range`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Start at the first record whose timestamp (milliseconds since the Unix epoch) is at or
    /// after this, or at one of Kafka's positions: `-1` the high watermark (only new records),
    /// `-2` the log start, `-3` the record with the largest timestamp. Other negative values:
    /// 422 `invalid`. Do not combine with `offset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// Upper bound on the record bytes returned (at least one record is returned if any is
    /// available). Absent: the server's limit; larger values are capped by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Upper bound on the number of records returned, at least 1. Absent: the server's limit;
    /// larger values are capped by it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::query::at_least_one"
    )]
    #[param(minimum = 1, maximum = 4294967295.0, format = Int64)]
    pub max_records: Option<u32>,
    /// When reading at the high watermark, how long to wait for new records before answering
    /// with none. Absent or 0: answer at once. Capped by the server's limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<u64>,
    /// How values and header values are written in the response.
    #[serde(default)]
    pub value_format: ValueFormat,
}

/// A JSON value carried as its text.
///
/// Fetch answers a `json` value as the producer wrote it: a `serde_json::Value` would round
/// numbers past 64 bits to a float and sort object keys, which changes the producer's data
/// (a 30-digit amount, a signed document whose bytes must not move).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JsonText(Box<RawValue>);

impl JsonText {
    /// Wraps text already known to be one valid JSON value.
    pub fn new(raw: Box<RawValue>) -> Self {
        JsonText(raw)
    }

    /// A JSON string holding `text`.
    pub fn string(text: &str) -> Self {
        JsonText(serde_json::value::to_raw_value(text).expect("a str always serializes"))
    }

    /// The value's JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The value parsed (numbers past 64 bits become floats).
    ///
    /// # Errors
    /// Never for a value built by this type's constructors; kept fallible for deserialized ones.
    pub fn parse(&self) -> serde_json::Result<Value> {
        serde_json::from_str(self.0.get())
    }
}

impl From<&Value> for JsonText {
    fn from(value: &Value) -> Self {
        JsonText(serde_json::value::to_raw_value(value).expect("a Value always serializes"))
    }
}

/// Two values are equal when their texts are: `1.0` and `1` differ, as they do on the wire.
impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// One record as returned by fetch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FetchedRecord {
    /// Partition the record belongs to.
    pub partition: u32,
    /// Offset of the record in its partition.
    pub offset: u64,
    /// Record timestamp in milliseconds since the Unix epoch.
    pub timestamp: i64,
    /// Record key as UTF-8 text; `null` when the record has no key or its key is not UTF-8
    /// (then `key_base64` is set).
    #[schema(required = true)]
    pub key: Option<String>,
    /// Record key as base64, present only when the key bytes are not valid UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_base64: Option<String>,
    /// Record value in the requested `value_format`; `null` for a null value (a tombstone) or
    /// when the bytes cannot be shown in that format (then `value_base64` is set).
    #[schema(required = true, value_type = Option<Value>)]
    pub value: Option<JsonText>,
    /// Record value as base64, present only when the stored bytes are not valid in the
    /// requested `value_format` (for example non-JSON bytes with `value_format=json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_base64: Option<String>,
    /// Record headers: name to value (UTF-8 text, or base64 with `value_format=base64`);
    /// `null` is a header without a value. Empty object when the record has no headers.
    /// Kafka allows a name more than once and any bytes as a value, which a map of text cannot
    /// hold: a repeated name shows its last text value here (as Kafka's `lastHeader`), a value
    /// that is not UTF-8 text is left out, and `header_list` then carries every header.
    pub headers: BTreeMap<String, Option<String>>,
    /// Every header in record order, present only when `headers` cannot show them all (a
    /// repeated name, or a value that is not UTF-8 text in the `json` and `string` formats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_list: Option<Vec<FetchedHeader>>,
}

/// One record header, in `header_list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FetchedHeader {
    /// Header name.
    pub key: String,
    /// Header value as in `headers` (UTF-8 text, or base64 with `value_format=base64`);
    /// `null` for a header without a value, or when the bytes are not UTF-8 text (then
    /// `value_base64` is set).
    #[schema(required = true)]
    pub value: Option<String>,
    /// The value as base64, present only when its bytes are not UTF-8 text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_base64: Option<String>,
}

/// JSON response of fetch (`Accept: application/json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(json!({
    "records": [{
        "partition": 0,
        "offset": 877,
        "timestamp": 1735689600000_i64,
        "key": "customer-7",
        "value": {"order_id": 1002, "total": 9.0},
        "headers": {}
    }],
    "next_offset": 878,
    "high_watermark": 878,
    "log_start_offset": 0
})))]
pub struct FetchResponse {
    /// Records in offset order; empty when none arrived within `max_wait_ms`.
    pub records: Vec<FetchedRecord>,
    /// Offset to fetch from next: one past the last record returned, or the requested offset
    /// when none were.
    pub next_offset: u64,
    /// High watermark when the response was made: records below it are readable.
    pub high_watermark: u64,
    /// First offset still readable in the partition when the response was made.
    pub log_start_offset: u64,
}

#[cfg(test)]
mod tests;

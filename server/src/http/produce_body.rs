//! The JSON produce body, read without a `serde_json::Value` or a `String` per record.
//!
//! Produce is the hottest JSON path: a request of 1,000 base64 values of 1 KiB used to cost a
//! `String` per value (the base64 text), a `Vec` per decoded value and two copies of every
//! value before batching. Here each record's value stays a borrowed slice of the request body
//! until it is decoded, and every key and value of a request is decoded into one shared
//! buffer, so a request costs a handful of allocations whatever its record count.
//!
//! The borrowed reader is a fast path, not a second definition of the body: whatever it does
//! not take (numbers of 19 digits or more, floats written for integers, any malformed body)
//! goes through [`parse_general`] into the API's own `ProduceRequest`, so errors and edge cases
//! answer exactly as they always did.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use strata_openapi::{ErrorCode, ProduceRequest, ProducerFields, ValueFormat};

use super::codec::to_incoming_record;
use super::error::ApiError;
use crate::broker::produce::IncomingRecord;
use crate::log::RecordHeader;

/// A produce body, parsed but not yet turned into records (that needs the topic, which is
/// looked up in between so a malformed body still answers 400 before an unknown topic's 404).
pub enum ProduceBody<'a> {
    /// Read by the borrowed fast path.
    Borrowed(BorrowedBody<'a>),
    /// Read by the general JSON path.
    Owned(ProduceRequest),
}

/// The body's fields other than the records.
pub struct BodyFields {
    /// The idempotent producer, if any.
    pub producer: Option<ProducerFields>,
    /// The conditional append's expected offset, if any.
    pub expected_offset: Option<u64>,
}

/// Mirrors `ProduceRequest` field for field (at least as strict), borrowing from the body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BorrowedBody<'a> {
    #[serde(borrow)]
    records: Vec<BorrowedRecord<'a>>,
    #[serde(default)]
    producer: Option<ProducerFields>,
    #[serde(default)]
    expected_offset: Option<u64>,
}

/// Mirrors `ProduceRecord`, with the value left as raw JSON text.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BorrowedRecord<'a> {
    #[serde(default, borrow)]
    key: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    key_base64: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    value: Option<&'a RawValue>,
    #[serde(default)]
    headers: Option<BTreeMap<String, Option<String>>>,
    #[serde(default)]
    timestamp: Option<i64>,
    #[serde(default)]
    partition: Option<u32>,
}

/// Nesting a value may have before the general path decides: serde_json refuses a body
/// nested 128 deep, and a raw value is skipped without that limit, so deeply nested values
/// go the general way and get its answer.
const FAST_PATH_MAX_DEPTH: usize = 100;

/// Only the records' values of a body, as raw text.
#[derive(Deserialize)]
struct RawValues<'a> {
    #[serde(borrow)]
    records: Vec<RawValueOf<'a>>,
}

#[derive(Deserialize)]
struct RawValueOf<'a> {
    #[serde(default, borrow)]
    value: Option<&'a RawValue>,
}

impl<'a> BorrowedBody<'a> {
    /// `request`'s fields with each record's value replaced by its raw text in `values`.
    fn with_raw_values(request: ProduceRequest, values: Vec<RawValueOf<'a>>) -> Self {
        let records = request
            .records
            .into_iter()
            .zip(values)
            .map(|(record, raw)| BorrowedRecord {
                key: record.key.map(Cow::Owned),
                key_base64: record.key_base64.map(Cow::Owned),
                value: raw.value,
                headers: record.headers,
                timestamp: record.timestamp,
                partition: record.partition,
            })
            .collect();
        BorrowedBody {
            records,
            producer: request.producer,
            expected_offset: request.expected_offset,
        }
    }

    fn has_deep_value(&self) -> bool {
        self.records
            .iter()
            .filter_map(|r| r.value)
            .filter(|raw| raw.get().starts_with(['[', '{']))
            .any(|raw| nesting_depth(raw.get().as_bytes()) > FAST_PATH_MAX_DEPTH)
    }
}

/// The deepest nesting of arrays and objects in valid JSON text.
fn nesting_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for (_, byte) in super::json_text::outside_strings(text) {
        match byte {
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The fast reader: `None` for whatever it leaves to the general path.
fn read_fast(body: &[u8]) -> Option<BorrowedBody<'_>> {
    let is_object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if !is_object || super::extract::has_long_digit_run(body) {
        return None;
    }
    serde_json::from_slice::<BorrowedBody<'_>>(body)
        .ok()
        .filter(|borrowed| !borrowed.has_deep_value())
}

/// The general path: the API's own `ProduceRequest`, with records' values exempt from the
/// int64 rule (they are the producer's JSON, see `parse_json_except`).
pub(super) fn parse_general(body: &[u8]) -> Result<ProduceRequest, ApiError> {
    super::extract::parse_json_except(body, |body| {
        if let Some(serde_json::Value::Array(records)) = body.get_mut("records") {
            for record in records {
                if let serde_json::Value::Object(fields) = record {
                    fields.remove("value");
                }
            }
        }
    })
}

impl<'a> ProduceBody<'a> {
    /// Parses `body`.
    ///
    /// # Errors
    /// 400 `bad_json` exactly as [`super::extract::parse_json`] answers it.
    pub fn parse(body: &'a [u8]) -> Result<Self, ApiError> {
        if let Some(borrowed) = read_fast(body) {
            return Ok(ProduceBody::Borrowed(borrowed));
        }
        let request = parse_general(body)?;
        // The general path checked the body; its values are taken raw from the same bytes,
        // as the fast path takes them, so a value keeps its text whichever path read it.
        match serde_json::from_slice::<RawValues<'a>>(body) {
            Ok(raw) if raw.records.len() == request.records.len() => Ok(ProduceBody::Borrowed(
                BorrowedBody::with_raw_values(request, raw.records),
            )),
            _ => Ok(ProduceBody::Owned(request)),
        }
    }

    /// The records, decoded per `format`, and the other fields.
    ///
    /// # Errors
    /// `invalid`, naming the record, for a key given twice, a value that does not fit the
    /// format, or bad base64.
    pub fn into_records(
        self,
        format: ValueFormat,
    ) -> Result<(Vec<IncomingRecord>, BodyFields), ApiError> {
        match self {
            ProduceBody::Owned(request) => {
                let records = request
                    .records
                    .iter()
                    .enumerate()
                    .map(|(index, record)| to_incoming_record(record, format, index))
                    .collect::<Result<Vec<_>, _>>()?;
                let fields = BodyFields {
                    producer: request.producer,
                    expected_offset: request.expected_offset,
                };
                Ok((records, fields))
            }
            ProduceBody::Borrowed(body) => {
                let fields = BodyFields {
                    producer: body.producer,
                    expected_offset: body.expected_offset,
                };
                Ok((decode_borrowed(body.records, format)?, fields))
            }
        }
    }
}

/// A record whose key and value are ranges of the request's shared buffer.
struct Pending {
    partition: Option<u32>,
    timestamp: Option<i64>,
    key: Option<Range<usize>>,
    value: Option<Range<usize>>,
    headers: Vec<RecordHeader>,
}

fn decode_borrowed(
    records: Vec<BorrowedRecord<'_>>,
    format: ValueFormat,
) -> Result<Vec<IncomingRecord>, ApiError> {
    // Decoded base64 is shorter than its text and a key is as long as its text, so the raw
    // lengths bound the buffer: it is allocated once.
    let capacity = records
        .iter()
        .map(|r| {
            let key = r.key.as_ref().map_or(0, |k| k.len());
            let key_base64 = r.key_base64.as_ref().map_or(0, |k| k.len());
            key + key_base64 + r.value.map_or(0, |v| v.get().len())
        })
        .sum();
    let mut buffer: Vec<u8> = Vec::with_capacity(capacity);
    let mut pending = Vec::with_capacity(records.len());
    for (index, record) in records.into_iter().enumerate() {
        pending.push(decode_record(record, format, index, &mut buffer)?);
    }
    let buffer = Bytes::from(buffer);
    Ok(pending
        .into_iter()
        .map(|p| IncomingRecord {
            partition: p.partition,
            timestamp: p.timestamp,
            key: p.key.map(|range| buffer.slice(range)),
            value: p.value.map(|range| buffer.slice(range)),
            headers: p.headers,
        })
        .collect())
}

/// The same rules as [`to_incoming_record`], writing key and value into `buffer`.
fn decode_record(
    record: BorrowedRecord<'_>,
    format: ValueFormat,
    index: usize,
    buffer: &mut Vec<u8>,
) -> Result<Pending, ApiError> {
    let invalid =
        |message: String| ApiError::new(ErrorCode::Invalid, format!("records[{index}]: {message}"));
    let key = match (&record.key, &record.key_base64) {
        (Some(_), Some(_)) => {
            return Err(invalid("give either key or key_base64, not both".into()));
        }
        (Some(key), None) => Some(copy_into(buffer, key.as_bytes())),
        (None, Some(encoded)) => Some(
            append(buffer, |b| decode_base64_into(encoded, b))
                .map_err(|e| invalid(format!("key_base64: {e}")))?,
        ),
        (None, None) => None,
    };
    let not_a_string = || invalid("value must be a JSON string for this value_format".into());
    let value = match (record.value, format) {
        (None, _) => None,
        (Some(raw), _) if raw.get() == "null" => None,
        (Some(raw), ValueFormat::Json) => {
            Some(append(buffer, |b| compact_json(raw, b)).map_err(invalid)?)
        }
        (Some(raw), ValueFormat::String) => {
            let text = json_string(raw)
                .map_err(invalid)?
                .ok_or_else(not_a_string)?;
            Some(copy_into(buffer, text.as_bytes()))
        }
        (Some(raw), ValueFormat::Base64) => {
            let encoded = json_string(raw)
                .map_err(invalid)?
                .ok_or_else(not_a_string)?;
            Some(
                append(buffer, |b| decode_base64_into(&encoded, b))
                    .map_err(|e| invalid(format!("value: {e}")))?,
            )
        }
    };
    let headers = super::codec::decode_headers(record.headers.as_ref(), format, index)?;
    Ok(Pending {
        partition: record.partition,
        timestamp: record.timestamp,
        key,
        value,
        headers,
    })
}

/// Runs `write` on `buffer` and returns the range it appended.
fn append(
    buffer: &mut Vec<u8>,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), String>,
) -> Result<Range<usize>, String> {
    let start = buffer.len();
    write(buffer)?;
    Ok(start..buffer.len())
}

/// Appends `bytes` to `buffer` and returns their range.
fn copy_into(buffer: &mut Vec<u8>, bytes: &[u8]) -> Range<usize> {
    let start = buffer.len();
    buffer.extend_from_slice(bytes);
    start..buffer.len()
}

/// The text of a JSON string, borrowed when it holds no escapes; `None` when `raw` is not a
/// string.
///
/// # Errors
/// A string whose escapes are not Unicode text (a lone surrogate).
fn json_string(raw: &RawValue) -> Result<Option<Cow<'_, str>>, String> {
    let text = raw.get();
    let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
        return Ok(None);
    };
    if !inner.contains('\\') {
        return Ok(Some(Cow::Borrowed(inner)));
    }
    serde_json::from_str::<String>(text)
        .map(|unescaped| Some(Cow::Owned(unescaped)))
        .map_err(|e| format!("value: {}", super::json_text::describe(&e)))
}

/// A JSON value as its compact text, keeping its numbers and key order (see `json_text`).
fn compact_json(raw: &RawValue, buffer: &mut Vec<u8>) -> Result<(), String> {
    let text = raw.get().as_bytes();
    super::json_text::check(text)
        .map_err(|e| format!("value: {}", super::json_text::describe(&e)))?;
    super::json_text::append_compact(text, buffer);
    Ok(())
}

fn decode_base64_into(text: &str, buffer: &mut Vec<u8>) -> Result<(), String> {
    base64_simd::STANDARD
        .decode_append(text, buffer)
        .map_err(|_| super::codec::BAD_BASE64.to_string())
}

#[cfg(test)]
#[path = "produce_body_tests.rs"]
mod tests;

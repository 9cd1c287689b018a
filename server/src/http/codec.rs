//! Conversions between the JSON record shapes of the API and the bytes stored in batches.
//!
//! Keys are UTF-8 strings stored as their raw bytes (so a key lands where a Kafka client with a
//! string serializer would put it) or `key_base64` for other bytes; fetch shows a key as `key`
//! when it is UTF-8 and as `key_base64` otherwise. Values follow `value_format`: `json` stores
//! compact JSON text and shows it parsed, `string` stores UTF-8 text, `base64` stores the decoded
//! bytes. When stored bytes do not fit the requested format (say, non-JSON bytes read with
//! `json`), fetch puts them in `value_base64` instead, so every byte round-trips. Header values
//! are strings, or base64 with `value_format=base64`; non-UTF-8 header values are exact only
//! with `base64` (other formats replace invalid bytes with U+FFFD).

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::Value;
use strata_openapi::{
    ErrorCode, FetchedHeader, FetchedRecord, JsonText, ProduceRecord, ValueFormat,
};

use super::error::ApiError;
use crate::broker::produce::IncomingRecord;
use crate::log::{Record, RecordHeader};

/// Turns one API record into the broker's record; `index` names it in error messages.
///
/// # Errors
/// `invalid` for a key given twice, a value that does not fit the format, or bad base64.
pub fn to_incoming_record(
    record: &ProduceRecord,
    format: ValueFormat,
    index: usize,
) -> Result<IncomingRecord, ApiError> {
    let invalid =
        |message: String| ApiError::new(ErrorCode::Invalid, format!("records[{index}]: {message}"));
    let key = match (&record.key, &record.key_base64) {
        (Some(_), Some(_)) => {
            return Err(invalid("give either key or key_base64, not both".into()));
        }
        (Some(key), None) => Some(Bytes::copy_from_slice(key.as_bytes())),
        (None, Some(encoded)) => {
            Some(decode_base64(encoded).map_err(|e| invalid(format!("key_base64: {e}")))?)
        }
        (None, None) => None,
    };
    let value = match (&record.value, format) {
        (None | Some(Value::Null), _) => None,
        (Some(value), ValueFormat::Json) => Some(Bytes::from(value.to_string())),
        (Some(Value::String(text)), ValueFormat::String) => {
            Some(Bytes::copy_from_slice(text.as_bytes()))
        }
        (Some(Value::String(encoded)), ValueFormat::Base64) => {
            Some(decode_base64(encoded).map_err(|e| invalid(format!("value: {e}")))?)
        }
        (Some(_), ValueFormat::String | ValueFormat::Base64) => {
            return Err(invalid(
                "value must be a JSON string for this value_format".into(),
            ));
        }
    };
    let headers = decode_headers(record.headers.as_ref(), format, index)?;
    Ok(IncomingRecord {
        partition: record.partition,
        timestamp: record.timestamp,
        key,
        value,
        headers,
    })
}

/// A produce record's headers in the request's header encoding (base64 with
/// `value_format=base64`, else UTF-8 text); `index` names the record in error messages.
///
/// # Errors
/// `invalid` for bad base64.
pub fn decode_headers(
    headers: Option<&BTreeMap<String, Option<String>>>,
    format: ValueFormat,
    index: usize,
) -> Result<Vec<RecordHeader>, ApiError> {
    let mut decoded = Vec::new();
    for (name, value) in headers.into_iter().flatten() {
        let value = match (value, format) {
            (None, _) => None,
            (Some(encoded), ValueFormat::Base64) => Some(decode_base64(encoded).map_err(|e| {
                ApiError::new(
                    ErrorCode::Invalid,
                    format!("records[{index}]: header {name:?}: {e}"),
                )
            })?),
            (Some(text), _) => Some(Bytes::copy_from_slice(text.as_bytes())),
        };
        decoded.push(RecordHeader {
            key: name.clone(),
            value,
        });
    }
    Ok(decoded)
}

/// Turns a stored record into its API shape.
pub fn to_fetched_record(partition: u32, record: &Record, format: ValueFormat) -> FetchedRecord {
    let (key, key_base64) = match &record.key {
        None => (None, None),
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => (Some(text.to_string()), None),
            Err(_) => (None, Some(encode_base64(bytes))),
        },
    };
    let (value, value_base64) = match &record.value {
        None => (None, None),
        Some(bytes) => match format {
            ValueFormat::Json => match super::json_text::stored_json(bytes) {
                Some(text) => (Some(text), None),
                None => (None, Some(encode_base64(bytes))),
            },
            ValueFormat::String => match std::str::from_utf8(bytes) {
                Ok(text) => (Some(JsonText::string(text)), None),
                Err(_) => (None, Some(encode_base64(bytes))),
            },
            ValueFormat::Base64 => (Some(JsonText::string(&encode_base64(bytes))), None),
        },
    };
    let (headers, header_list) = fetched_headers(&record.headers, format);
    FetchedRecord {
        partition,
        offset: u64::try_from(record.offset).unwrap_or(0),
        timestamp: record.timestamp,
        key,
        key_base64,
        value,
        value_base64,
        headers,
        header_list,
    }
}

/// A record's headers as the `headers` map, plus `header_list` when the map cannot show them
/// all: it used to replace bytes that are not UTF-8 with U+FFFD and keep only the last value
/// of a repeated name, silently.
fn fetched_headers(
    stored: &[RecordHeader],
    format: ValueFormat,
) -> (BTreeMap<String, Option<String>>, Option<Vec<FetchedHeader>>) {
    let list: Vec<FetchedHeader> = stored
        .iter()
        .map(|header| {
            let (value, value_base64) = match (&header.value, format) {
                (None, _) => (None, None),
                (Some(bytes), ValueFormat::Base64) => (Some(encode_base64(bytes)), None),
                (Some(bytes), ValueFormat::Json | ValueFormat::String) => {
                    match std::str::from_utf8(bytes) {
                        Ok(text) => (Some(text.to_string()), None),
                        Err(_) => (None, Some(encode_base64(bytes))),
                    }
                }
            };
            FetchedHeader {
                key: header.key.clone(),
                value,
                value_base64,
            }
        })
        .collect();
    let mut map = BTreeMap::new();
    let mut faithful = true;
    for header in &list {
        if header.value_base64.is_some() {
            faithful = false;
            continue;
        }
        faithful &= map
            .insert(header.key.clone(), header.value.clone())
            .is_none();
    }
    (map, (!faithful).then_some(list))
}

/// Base64 is most of the CPU of a JSON fetch or produce of binary values: the SIMD codec
/// (AVX2/SSSE3 chosen at run time) does it several times faster than a scalar one.
fn encode_base64(bytes: &[u8]) -> String {
    base64_simd::STANDARD.encode_to_string(bytes)
}

/// The error text for base64 that does not decode.
pub const BAD_BASE64: &str = "invalid base64 (RFC 4648 standard alphabet, padded)";

fn decode_base64(text: &str) -> Result<Bytes, String> {
    base64_simd::STANDARD
        .decode_to_vec(text)
        .map(Bytes::from)
        .map_err(|_| BAD_BASE64.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn produce(value: Value, format: ValueFormat) -> Result<IncomingRecord, ApiError> {
        let record = ProduceRecord {
            value: Some(value),
            ..ProduceRecord::default()
        };
        to_incoming_record(&record, format, 0)
    }

    fn stored(new: IncomingRecord) -> Record {
        Record {
            offset: 3,
            timestamp: new.timestamp.unwrap_or(5),
            key: new.key,
            value: new.value,
            headers: new.headers,
        }
    }

    #[test]
    fn json_values_are_stored_compact_and_shown_parsed() {
        let new = produce(
            serde_json::json!({"a": [1, 2], "b": "x"}),
            ValueFormat::Json,
        )
        .unwrap();
        assert_eq!(
            new.value.as_deref(),
            Some(&b"{\"a\":[1,2],\"b\":\"x\"}"[..])
        );
        let fetched = to_fetched_record(0, &stored(new), ValueFormat::Json);
        assert_eq!(
            fetched.value.map(|v| v.parse().unwrap()),
            Some(serde_json::json!({"a": [1, 2], "b": "x"}))
        );
    }

    #[test]
    fn stored_json_is_answered_as_its_own_text() {
        let stored_value = Record {
            value: Some(Bytes::from_static(
                b"{\"z\": 1, \"n\": 123456789012345678901234567890, \"p\": 1.10}",
            )),
            ..stored(produce(Value::Null, ValueFormat::Json).unwrap())
        };
        let fetched = to_fetched_record(0, &stored_value, ValueFormat::Json);
        assert_eq!(
            fetched.value.as_ref().map(JsonText::get),
            Some(r#"{"z":1,"n":123456789012345678901234567890,"p":1.10}"#)
        );
        let document = serde_json::to_string(&fetched).unwrap();
        assert!(document.contains(r#""value":{"z":1,"n":123456789012345678901234567890"#));
    }

    #[test]
    fn bytes_that_do_not_fit_the_format_travel_as_base64() {
        let new = produce(Value::String("/w==".into()), ValueFormat::Base64).unwrap();
        assert_eq!(new.value.as_deref(), Some(&[0xffu8][..]));
        let fetched = to_fetched_record(0, &stored(new.clone()), ValueFormat::Json);
        assert_eq!(
            (fetched.value, fetched.value_base64.as_deref()),
            (None, Some("/w=="))
        );
        let fetched = to_fetched_record(0, &stored(new), ValueFormat::String);
        assert_eq!(fetched.value_base64.as_deref(), Some("/w=="));
    }

    #[test]
    fn keys_round_trip_as_text_or_base64() {
        let record = ProduceRecord {
            key_base64: Some("gA==".into()),
            ..ProduceRecord::default()
        };
        let new = to_incoming_record(&record, ValueFormat::Json, 0).unwrap();
        let fetched = to_fetched_record(0, &stored(new), ValueFormat::Json);
        assert_eq!(
            (fetched.key, fetched.key_base64.as_deref()),
            (None, Some("gA=="))
        );
        let record = ProduceRecord {
            key: Some("user-1".into()),
            ..ProduceRecord::default()
        };
        let fetched = to_fetched_record(
            0,
            &stored(to_incoming_record(&record, ValueFormat::Json, 0).unwrap()),
            ValueFormat::Json,
        );
        assert_eq!(fetched.key.as_deref(), Some("user-1"));
    }

    #[test]
    fn bad_input_is_invalid_not_a_panic() {
        assert!(produce(Value::String("%%%".into()), ValueFormat::Base64).is_err());
        assert!(produce(serde_json::json!(5), ValueFormat::String).is_err());
        let both = ProduceRecord {
            key: Some("a".into()),
            key_base64: Some("YQ==".into()),
            ..ProduceRecord::default()
        };
        assert_eq!(
            to_incoming_record(&both, ValueFormat::Json, 0)
                .unwrap_err()
                .code(),
            ErrorCode::Invalid
        );
        let null = produce(Value::Null, ValueFormat::Json).unwrap();
        assert_eq!(null.value, None, "null is a tombstone");
    }
}

//! Unit tests of `records`.

use serde_json::json;
use utoipa::PartialSchema;

use super::*;

#[test]
fn produce_record_rejects_unknown_fields() {
    let result: Result<ProduceRecord, _> =
        serde_json::from_value(json!({"key": "k", "value": 1, "valeu": 2}));
    let message = result.unwrap_err().to_string();
    assert!(message.contains("unknown field `valeu`"), "{message}");
}

#[test]
fn produce_request_rejects_unknown_fields() {
    let result: Result<ProduceRequest, _> =
        serde_json::from_value(json!({"records": [], "acks": "all"}));
    assert!(result.is_err());
}

#[test]
fn produce_record_with_every_field_absent_is_a_null_record() {
    let record: ProduceRecord = serde_json::from_value(json!({})).unwrap();
    assert_eq!(record, ProduceRecord::default());
}

#[test]
fn produce_record_null_value_equals_absent_value() {
    let record: ProduceRecord = serde_json::from_value(json!({"value": null})).unwrap();
    assert_eq!(record.value, None);
    assert_eq!(serde_json::to_value(&record).unwrap(), json!({}));
}

#[test]
fn produce_record_keeps_a_header_without_value() {
    let record: ProduceRecord =
        serde_json::from_value(json!({"headers": {"a": "1", "b": null}})).unwrap();
    let headers = record.headers.unwrap();
    assert_eq!(headers["a"].as_deref(), Some("1"));
    assert_eq!(headers["b"], None);
}

#[test]
fn produce_request_with_producer_fields_round_trips() {
    let body = json!({
        "records": [{"key": "k", "value": {"a": 1}}],
        "producer": {"producer_id": 7, "producer_epoch": 2, "sequences": {"0": 5}},
        "expected_offset": 40
    });
    let request: ProduceRequest = serde_json::from_value(body.clone()).unwrap();
    let producer = request.producer.as_ref().unwrap();
    assert_eq!(producer.sequences["0"], 5);
    assert_eq!(serde_json::to_value(&request).unwrap(), body);
}

#[test]
fn value_format_and_acks_default_and_use_snake_case() {
    assert_eq!(ValueFormat::default(), ValueFormat::Json);
    assert_eq!(Acks::default(), Acks::All);
    assert_eq!(serde_json::to_value(ValueFormat::Base64).unwrap(), "base64");
    assert_eq!(serde_json::to_value(Acks::Leader).unwrap(), "leader");
    let query: ProduceQuery = serde_json::from_value(json!({})).unwrap();
    assert_eq!(query, ProduceQuery::default());
}

#[test]
fn fetch_query_rejects_unknown_parameters() {
    let result: Result<FetchQuery, _> = serde_json::from_value(json!({"max_record": 5}));
    assert!(result.is_err());
}

#[test]
fn fetched_record_always_has_key_value_and_headers() {
    let record = FetchedRecord {
        partition: 0,
        offset: 3,
        timestamp: 1,
        key: None,
        key_base64: None,
        value: None,
        value_base64: None,
        headers: BTreeMap::new(),
        header_list: None,
    };
    assert_eq!(
        serde_json::to_value(&record).unwrap(),
        json!({"partition": 0, "offset": 3, "timestamp": 1, "key": null, "value": null,
               "headers": {}})
    );
}

#[test]
fn fetched_record_schema_requires_the_nullable_key_and_value() {
    let schema = serde_json::to_value(FetchedRecord::schema()).unwrap();
    let required = schema["required"].as_array().unwrap();
    for field in [
        "key",
        "value",
        "headers",
        "partition",
        "offset",
        "timestamp",
    ] {
        assert!(required.contains(&json!(field)), "{field} not required");
    }
    assert!(!required.contains(&json!("key_base64")));
    assert!(!required.contains(&json!("value_base64")));
}

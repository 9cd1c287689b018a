use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// What the general path makes of `body`: the reference the fast path must equal.
fn general(body: &[u8], format: ValueFormat) -> Result<Vec<IncomingRecord>, (ErrorCode, String)> {
    let request: ProduceRequest =
        parse_general(body).map_err(|e| (e.code(), e.body().error.message.clone()))?;
    request
        .records
        .iter()
        .enumerate()
        .map(|(index, record)| to_incoming_record(record, format, index))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| (e.code(), e.body().error.message.clone()))
}

fn fast(body: &[u8], format: ValueFormat) -> Result<Vec<IncomingRecord>, (ErrorCode, String)> {
    let err = |e: ApiError| (e.code(), e.body().error.message.clone());
    let parsed = ProduceBody::parse(body).map_err(err)?;
    parsed
        .into_records(format)
        .map(|(records, _)| records)
        .map_err(err)
}

fn is_borrowed(body: &Value) -> bool {
    let bytes = serde_json::to_vec(body).unwrap();
    read_fast(&bytes).is_some()
}

#[test]
fn typical_bodies_take_the_borrowed_path() {
    let body = json!({"records": [{"key": "k", "value": "aGVsbG8=", "partition": 0}]});
    assert!(is_borrowed(&body));
    let with_producer = json!({
        "records": [{"value": {"a": 1}, "headers": {"h": "v"}, "timestamp": 5}],
        "producer": {"producer_id": 7, "producer_epoch": 0, "sequences": {"0": 3}},
        "expected_offset": 9
    });
    assert!(is_borrowed(&with_producer));
}

#[test]
fn base64_values_share_one_buffer() {
    let body =
        br#"{"records": [{"value": "aGVsbG8="}, {"key_base64": "AAE=", "value": "d29ybGQ="}]}"#;
    let records = fast(body, ValueFormat::Base64).unwrap();
    assert_eq!(records[0].value.as_deref(), Some(&b"hello"[..]));
    assert_eq!(records[1].key.as_deref(), Some(&[0u8, 1][..]));
    assert_eq!(records[1].value.as_deref(), Some(&b"world"[..]));
    let first = records[0].value.as_ref().unwrap().as_ptr() as usize;
    let last = records[1].value.as_ref().unwrap().as_ptr() as usize;
    assert_eq!(
        last - first,
        5 + 2,
        "the second value follows the first key and value"
    );
}

#[test]
fn escaped_strings_are_unescaped() {
    // "\/" is a legal JSON escape of "/", a base64 character; "\u0041" is "A".
    let body = br#"{"records": [{"value": "\/\/8=", "key": "a\"b"}, {"value": "\u0041A=="}]}"#;
    let records = fast(body, ValueFormat::Base64).unwrap();
    assert_eq!(records[0].value.as_deref(), Some(&[0xff_u8, 0xff][..]));
    assert_eq!(records[0].key.as_deref(), Some(&b"a\"b"[..]));
    assert_eq!(records[1].value.as_deref(), Some(&[0u8][..]));
    assert_eq!(
        fast(body, ValueFormat::Base64),
        general(body, ValueFormat::Base64)
    );
}

#[test]
fn bodies_the_fast_reader_refuses_answer_as_before() {
    // A float written for an integer is accepted by the general path's second try.
    let float_timestamp = br#"{"records": [{"value": "eA==", "timestamp": 1000.0}]}"#;
    assert!(read_fast(float_timestamp).is_none());
    let records = fast(float_timestamp, ValueFormat::Base64).unwrap();
    assert_eq!(records[0].timestamp, Some(1000));
    for body in [
        &br#"{"records": [{"value": "eA==", "timestamp": 99999999999999999999}]}"#[..],
        br#"{"records": [{"value": "eA==", "colour": 1}]}"#,
        br#"{"records": [{"value": "eA=="}], "records": []}"#,
        br#"[[{"value": "eA=="}]]"#,
        br#"{"records": [{"value": "eA=="}"#,
        br#"{"records": {}}"#,
        b"",
    ] {
        let answer = fast(body, ValueFormat::Base64);
        assert_eq!(
            answer,
            general(body, ValueFormat::Base64),
            "{}",
            String::from_utf8_lossy(body)
        );
        assert!(answer.is_err());
    }
}

#[test]
fn deeply_nested_values_answer_as_before() {
    for depth in [100, 127, 128, 129, 200] {
        let value = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        let body = format!(r#"{{"records": [{{"value": {value}}}]}}"#);
        for format in [ValueFormat::Json, ValueFormat::Base64] {
            assert_eq!(
                fast(body.as_bytes(), format),
                general(body.as_bytes(), format),
                "depth {depth}"
            );
        }
    }
}

/// A JSON value that fits each format some of the time and not at other times.
fn arb_value() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        any::<Vec<u8>>()
            .prop_map(|b| Some(Value::String(base64_simd::STANDARD.encode_to_string(b)))),
        "[a-zA-Z0-9+/=\\\\\"é ]{0,12}".prop_map(|s| Some(Value::String(s))),
        any::<i64>().prop_map(|n| Some(json!(n))),
        (any::<bool>(), "[a-z]{0,4}").prop_map(|(b, s)| Some(json!({"z": b, "a": [s, 1.5]}))),
    ]
}

fn arb_record() -> impl Strategy<Value = Value> {
    (
        proptest::option::of("[a-z\"\\\\]{0,6}"),
        proptest::option::of(prop_oneof![
            Just("AAE=".to_string()),
            Just("not base64".to_string())
        ]),
        arb_value(),
        proptest::option::of(proptest::collection::btree_map(
            "[a-z]{1,3}",
            proptest::option::of(prop_oneof![
                Just("aGk=".to_string()),
                Just("plain?".to_string())
            ]),
            0..3,
        )),
        proptest::option::of(any::<i64>()),
        proptest::option::of(0u32..4),
    )
        .prop_map(|(key, key_base64, value, headers, timestamp, partition)| {
            let mut record = serde_json::Map::new();
            let fields = [
                ("key", key.map(Value::String)),
                ("key_base64", key_base64.map(Value::String)),
                ("value", value),
                ("headers", headers.map(|h| json!(h))),
                ("timestamp", timestamp.map(|t| json!(t))),
                ("partition", partition.map(|p| json!(p))),
            ];
            for (name, field) in fields {
                if let Some(field) = field {
                    record.insert(name.to_string(), field);
                }
            }
            Value::Object(record)
        })
}

fn arb_format() -> impl Strategy<Value = ValueFormat> {
    prop_oneof![
        Just(ValueFormat::Json),
        Just(ValueFormat::String),
        Just(ValueFormat::Base64)
    ]
}

proptest! {
    /// The fast path is an optimisation only: the same records, or the same error, as the
    /// general path for any body.
    #[test]
    fn fast_path_equals_general_path(
        records in proptest::collection::vec(arb_record(), 0..6),
        format in arb_format(),
        pretty in any::<bool>(),
    ) {
        let body = json!({"records": records});
        let bytes = if pretty {
            serde_json::to_vec_pretty(&body).unwrap()
        } else {
            serde_json::to_vec(&body).unwrap()
        };
        // Only bodies with a number of 19 digits or more go the general way (int64 check).
        let long_number = super::super::extract::has_long_digit_run(&bytes);
        prop_assert_eq!(is_borrowed(&body), !long_number);
        prop_assert_eq!(fast(&bytes, format), general(&bytes, format));
    }
}

/// A record's JSON value is the producer's data: an id above int64 (found by schemathesis as
/// "schema-valid request rejected") is stored as sent, while the API's own numbers stay int64.
#[test]
fn values_may_hold_integers_above_int64_and_api_fields_may_not() {
    let body =
        br#"{"records": [{"value": {"id": 12439531016720173056, "n": [18446744073709551615]}}]}"#;
    let records = fast(body, ValueFormat::Json).expect("accepted");
    assert_eq!(
        records[0].value.as_deref(),
        Some(&br#"{"id":12439531016720173056,"n":[18446744073709551615]}"#[..])
    );
    for refused in [
        &br#"{"records": [{"value": 1, "timestamp": 9223372036854775808}]}"#[..],
        br#"{"records": [{"value": 1}], "expected_offset": 9223372036854775808}"#,
        br#"{"records": [{"value": 1}], "producer": {"producer_id": 9223372036854775808, "producer_epoch": 0, "sequences": {}}}"#,
    ] {
        let (code, message) = fast(refused, ValueFormat::Json).unwrap_err();
        assert_eq!(code, ErrorCode::BadJson, "{}", String::from_utf8_lossy(refused));
        assert!(message.contains("int64"), "{message}");
    }
}

#[test]
fn nesting_depth_skips_strings() {
    assert_eq!(nesting_depth(b"1"), 0);
    assert_eq!(nesting_depth(br#"["[[", {"a": "]\"]{"}, [[]]]"#), 3);
    assert_eq!(nesting_depth(br#"{"\\": [1]}"#), 2);
}

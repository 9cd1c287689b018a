//! Unit tests of `error`.

use serde_json::json;
use utoipa::PartialSchema;

use super::*;

/// The contract table from the API issue: code, wire name, status, retryable.
const TABLE: &[(ErrorCode, &str, u16, bool)] = &[
    (ErrorCode::AuditUnavailable, "audit_unavailable", 503, true),
    (ErrorCode::BadHeader, "bad_header", 400, false),
    (ErrorCode::BadJson, "bad_json", 400, false),
    (ErrorCode::BadPath, "bad_path", 400, false),
    (ErrorCode::BadQuery, "bad_query", 400, false),
    (ErrorCode::BadRecordBatch, "bad_record_batch", 400, false),
    (ErrorCode::Busy, "busy", 503, true),
    (ErrorCode::Conflict, "conflict", 409, false),
    (ErrorCode::Corrupt, "corrupt", 500, false),
    (ErrorCode::DiskFull, "disk_full", 503, true),
    (ErrorCode::Forbidden, "forbidden", 403, false),
    (ErrorCode::GroupNotFound, "group_not_found", 404, false),
    (ErrorCode::HoldNotFound, "hold_not_found", 404, false),
    (ErrorCode::Internal, "internal", 500, false),
    (ErrorCode::InternalTopic, "internal_topic", 409, false),
    (ErrorCode::Invalid, "invalid", 422, false),
    (ErrorCode::InvalidConfig, "invalid_config", 422, false),
    (ErrorCode::InvalidProducer, "invalid_producer", 422, false),
    (
        ErrorCode::InvalidTopicName,
        "invalid_topic_name",
        422,
        false,
    ),
    (ErrorCode::KeyNotFound, "key_not_found", 404, false),
    (ErrorCode::KeyRequired, "key_required", 422, false),
    (ErrorCode::LegalHold, "legal_hold", 409, false),
    (
        ErrorCode::MethodNotAllowed,
        "method_not_allowed",
        405,
        false,
    ),
    (ErrorCode::NoValidOffset, "no_valid_offset", 409, false),
    (ErrorCode::NotAcceptable, "not_acceptable", 406, false),
    (ErrorCode::NotFound, "not_found", 404, false),
    (ErrorCode::OffsetMismatch, "offset_mismatch", 412, false),
    (
        ErrorCode::OffsetOutOfRange,
        "offset_out_of_range",
        416,
        false,
    ),
    (
        ErrorCode::PartitionNotAssigned,
        "partition_not_assigned",
        409,
        false,
    ),
    (
        ErrorCode::PartitionNotFound,
        "partition_not_found",
        404,
        false,
    ),
    (ErrorCode::ProducerFenced, "producer_fenced", 409, false),
    (
        ErrorCode::ProducerNotFound,
        "producer_not_found",
        404,
        false,
    ),
    (ErrorCode::QuotaExceeded, "quota_exceeded", 429, true),
    (ErrorCode::RecordTooLarge, "record_too_large", 413, false),
    (ErrorCode::RequestTimeout, "request_timeout", 408, true),
    (ErrorCode::RequestTooLarge, "request_too_large", 413, false),
    (ErrorCode::SequenceGap, "sequence_gap", 409, false),
    (ErrorCode::StaleGeneration, "stale_generation", 409, false),
    (
        ErrorCode::StorageUnavailable,
        "storage_unavailable",
        503,
        true,
    ),
    (ErrorCode::Timeout, "timeout", 504, true),
    (
        ErrorCode::TooManyOpenFiles,
        "too_many_open_files",
        503,
        true,
    ),
    (
        ErrorCode::TopicAlreadyExists,
        "topic_already_exists",
        409,
        false,
    ),
    (ErrorCode::TopicNotFound, "topic_not_found", 404, false),
    (ErrorCode::Unauthenticated, "unauthenticated", 401, false),
    (ErrorCode::Unavailable, "unavailable", 503, true),
    (ErrorCode::UnknownMember, "unknown_member", 409, false),
    (
        ErrorCode::UnsupportedMediaType,
        "unsupported_media_type",
        415,
        false,
    ),
    (
        ErrorCode::UnsupportedRecordBatch,
        "unsupported_record_batch",
        422,
        false,
    ),
];

fn schema_json() -> serde_json::Value {
    serde_json::to_value(ErrorCode::schema()).unwrap()
}

#[test]
fn every_code_has_the_contract_status_and_retryability() {
    for &(code, name, status, retryable) in TABLE {
        assert_eq!(code.status(), status, "{name}");
        assert_eq!(code.is_retryable(), retryable, "{name}");
        assert_eq!(code.as_str(), name);
        assert_eq!(code.to_string(), name);
    }
}

#[test]
fn every_code_serializes_as_its_snake_case_name_and_round_trips() {
    assert_eq!(
        serde_json::to_value(ErrorCode::OffsetOutOfRange).unwrap(),
        "offset_out_of_range"
    );
    for &(code, name, _, _) in TABLE {
        assert_eq!(serde_json::to_value(code).unwrap(), json!(name));
        let back: ErrorCode = serde_json::from_value(json!(name)).unwrap();
        assert_eq!(back, code);
    }
}

#[test]
fn all_lists_every_variant_once_sorted_by_wire_name() {
    // The derived schema enumerates the real variants, so this catches a variant that is
    // missing from ALL or from the table.
    let schema = schema_json();
    let derived: Vec<&str> = schema["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let listed: Vec<&str> = ErrorCode::ALL.iter().map(ErrorCode::as_str).collect();
    let table: Vec<&str> = TABLE.iter().map(|row| row.1).collect();
    assert_eq!(listed, derived);
    assert_eq!(listed, table);
    assert!(
        listed.windows(2).all(|pair| pair[0] < pair[1]),
        "sorted, no duplicates"
    );
}

#[test]
fn schema_description_states_every_code_with_its_status() {
    let schema = schema_json();
    let description = schema["description"].as_str().unwrap();
    for code in ErrorCode::ALL {
        let retry = if code.is_retryable() {
            ", retryable"
        } else {
            ""
        };
        let entry = format!("`{}` ({}{retry})", code.as_str(), code.status());
        assert!(description.contains(&entry), "description lacks {entry}");
    }
}

#[test]
fn the_retryable_field_names_exactly_the_retryable_codes() {
    let schema = serde_json::to_value(ErrorDetail::schema()).unwrap();
    let description = schema["properties"]["retryable"]["description"]
        .as_str()
        .unwrap();
    for code in ErrorCode::ALL {
        let named = description.contains(&format!("`{}`", code.as_str()));
        assert_eq!(
            named,
            code.is_retryable(),
            "{}: {description}",
            code.as_str()
        );
    }
}

#[test]
fn unknown_code_is_rejected() {
    assert!(serde_json::from_value::<ErrorCode>(json!("OffsetOutOfRange")).is_err());
}

#[test]
fn error_body_has_the_documented_shape_without_absent_offsets() {
    let body = ErrorBody::new(ErrorCode::TopicNotFound, "topic 'orders' does not exist");
    assert_eq!(body.status(), 404);
    assert_eq!(
        serde_json::to_value(&body).unwrap(),
        json!({"error": {
            "code": "topic_not_found",
            "message": "topic 'orders' does not exist",
            "retryable": false
        }})
    );
}

#[test]
fn error_body_retryable_follows_the_code() {
    assert!(
        ErrorBody::new(ErrorCode::Unavailable, "recovering")
            .error
            .retryable
    );
    assert!(
        !ErrorBody::new(ErrorCode::Invalid, "partitions must be > 0")
            .error
            .retryable
    );
}

#[test]
fn offset_out_of_range_body_carries_the_valid_range() {
    let body = ErrorBody::new(ErrorCode::OffsetOutOfRange, "offset 5 is below log start")
        .with_offset_range(10, 20);
    let value = serde_json::to_value(&body).unwrap();
    assert_eq!(value["error"]["earliest_offset"], 10);
    assert_eq!(value["error"]["latest_offset"], 20);
    assert!(value["error"].get("log_end_offset").is_none());
    let back: ErrorBody = serde_json::from_value(value).unwrap();
    assert_eq!(back, body);
}

#[test]
fn offset_mismatch_body_carries_the_log_end() {
    let body = ErrorBody::new(ErrorCode::OffsetMismatch, "log end is 42, expected 40")
        .with_log_end_offset(42);
    let value = serde_json::to_value(&body).unwrap();
    assert_eq!(body.status(), 412);
    assert_eq!(value["error"]["log_end_offset"], 42);
    assert!(value["error"].get("earliest_offset").is_none());
}

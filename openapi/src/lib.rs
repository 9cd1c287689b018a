//! Strata's HTTP wire contract: the request and response bodies of API v1, their query
//! parameters, and the error codes, all with OpenAPI schemas (utoipa).
//!
//! This crate owns the names clients see. It holds plain serde data and no behavior beyond
//! mapping an [`ErrorCode`] to its HTTP status and retryability; the server validates values
//! and converts these types into domain types. It must not depend on the server, axum or the
//! storage engine, so that clients (the load generator, tests) can use it alone.
//!
//! Invariants: field and code names are part of the public API. Request bodies reject unknown
//! fields, so a misspelled field is a `bad_json` error instead of being silently ignored.
//! New optional fields are added with `#[serde(default)]`; nothing is renamed.

#![warn(missing_docs)]

pub mod error;
pub mod groups;
pub mod health;
pub mod holds;
pub mod offsets;
pub mod producers;
pub mod query;
pub mod records;
pub mod streams;
pub mod topics;

pub use error::{ErrorBody, ErrorCode, ErrorDetail};
pub use groups::{
    AssignmentStrategyName, AutoOffsetResetName, CommitOffsetsRequest, CommittedOffset,
    DeleteOffsetsQuery, EvictionInfo, GroupDescription, GroupLag, GroupList, GroupOffsets,
    GroupSummary, HeartbeatRequest, JoinGroupRequest, LagBasis, MemberAssignment, MemberFetchQuery,
    MemberFetchResponse, MemberInfo, MemberRecord, OffsetCommit, PartitionLag, PartitionPosition,
    ResetOffsetsRequest, ResetTarget, TopicPartitionRef,
};
pub use health::{Health, Readiness};
pub use holds::{CreateLegalHoldRequest, LegalHold, LegalHoldList};
pub use offsets::{
    DeleteRecordsRequest, DeleteRecordsResponse, OffsetsQuery, OffsetsResponse, PartitionOffsets,
    TimestampOffset,
};
pub use producers::{InitProducerRequest, ProducerIdentity};
pub use records::{
    Acks, AnswerShape, CompactProduceResponse, FetchQuery, FetchResponse, FetchedHeader,
    FetchedRecord, JsonText, PartitionAppend, ProduceAnswer, ProduceQuery, ProduceRecord,
    ProduceRequest, ProduceResponse, ProducerFields, RecordBatchBytes, RecordOffset, ValueFormat,
};
pub use streams::{MemberStreamData, PartitionStreamData, StreamEnd, StreamEndReason, StreamPing};
pub use topics::{
    AddPartitionsRequest, AddPartitionsResponse, CleanerStatus, ColdCacheStats, ConfigUpdateValue,
    ConfigValue, CreateTopicRequest, PartitionDescription, SegmentInfo, SegmentList,
    SegmentLocation, TopicDescription, TopicList, TopicSummary, UpdateTopicConfigsRequest,
};

#[cfg(test)]
mod tests {
    use utoipa::OpenApi;

    use super::*;

    #[derive(OpenApi)]
    #[openapi(components(schemas(
        ErrorBody,
        ErrorCode,
        ErrorDetail,
        Health,
        Readiness,
        OffsetsQuery,
        OffsetsResponse,
        PartitionOffsets,
        TimestampOffset,
        InitProducerRequest,
        ProducerIdentity,
        Acks,
        AnswerShape,
        FetchQuery,
        FetchResponse,
        FetchedHeader,
        FetchedRecord,
        ProduceQuery,
        ProduceRecord,
        ProduceRequest,
        ProduceResponse,
        ProducerFields,
        RecordBatchBytes,
        RecordOffset,
        ValueFormat,
        AddPartitionsRequest,
        AddPartitionsResponse,
        ConfigUpdateValue,
        ConfigValue,
        CleanerStatus,
        ColdCacheStats,
        SegmentInfo,
        SegmentList,
        SegmentLocation,
        CreateTopicRequest,
        PartitionDescription,
        TopicDescription,
        TopicList,
        TopicSummary,
        UpdateTopicConfigsRequest,
        CreateLegalHoldRequest,
        LegalHold,
        LegalHoldList,
    )))]
    struct TestDoc;

    const SCHEMA_NAMES: &[&str] = &[
        "ErrorBody",
        "ErrorCode",
        "ErrorDetail",
        // `ErrorDetail.stored`.
        "PartitionAppend",
        "Health",
        "Readiness",
        "OffsetsQuery",
        "OffsetsResponse",
        "PartitionOffsets",
        "TimestampOffset",
        "InitProducerRequest",
        "ProducerIdentity",
        "Acks",
        "AnswerShape",
        "FetchQuery",
        "FetchResponse",
        "FetchedHeader",
        "FetchedRecord",
        "ProduceQuery",
        "ProduceRecord",
        "ProduceRequest",
        "ProduceResponse",
        "ProducerFields",
        "RecordBatchBytes",
        "RecordOffset",
        "ValueFormat",
        "AddPartitionsRequest",
        "AddPartitionsResponse",
        "ConfigUpdateValue",
        "ConfigValue",
        "CleanerStatus",
        "ColdCacheStats",
        "SegmentInfo",
        "SegmentList",
        "SegmentLocation",
        "CreateTopicRequest",
        "PartitionDescription",
        "TopicDescription",
        "TopicList",
        "TopicSummary",
        "UpdateTopicConfigsRequest",
        "CreateLegalHoldRequest",
        "LegalHold",
        "LegalHoldList",
    ];

    #[test]
    fn openapi_document_serializes_with_every_schema() {
        let json = TestDoc::openapi().to_pretty_json().unwrap();
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for name in SCHEMA_NAMES {
            assert!(schemas.contains_key(*name), "schema {name} missing");
        }
        assert_eq!(
            schemas.len(),
            SCHEMA_NAMES.len(),
            "unexpected extra schemas"
        );
    }

    #[test]
    fn every_schema_and_property_has_a_description() {
        let doc = serde_json::to_value(TestDoc::openapi()).unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for (name, schema) in schemas {
            assert!(
                schema.get("description").is_some(),
                "{name} has no description"
            );
            let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) else {
                continue;
            };
            for (field, property) in properties {
                // utoipa puts a $ref property's description next to the $ref or in a oneOf
                // wrapper; either way the key exists somewhere in the property.
                let text = property.to_string();
                assert!(
                    text.contains("\"description\""),
                    "{name}.{field} has no description"
                );
            }
        }
    }

    #[test]
    fn query_structs_become_optional_query_parameters() {
        use utoipa::IntoParams;
        use utoipa::openapi::path::{Parameter, ParameterIn};

        let parameters: Vec<Parameter> = FetchQuery::into_params(|| None);
        let names: Vec<&str> = parameters.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "offset",
                "timestamp",
                "max_bytes",
                "max_records",
                "max_wait_ms",
                "value_format"
            ]
        );
        for parameter in &parameters {
            assert!(matches!(parameter.parameter_in, ParameterIn::Query));
            assert!(
                !matches!(parameter.required, utoipa::openapi::Required::True),
                "{} must be optional",
                parameter.name
            );
        }
        assert_eq!(ProduceQuery::into_params(|| None).len(), 3);
        assert_eq!(OffsetsQuery::into_params(|| None).len(), 1);
    }

    /// Deserializes every `examples` entry of `T`'s schema into `T`, so that Swagger UI never
    /// shows an example the server would reject or could not have produced.
    fn assert_examples_parse<T>() -> usize
    where
        T: utoipa::PartialSchema + serde::de::DeserializeOwned,
    {
        let schema = serde_json::to_value(T::schema()).unwrap();
        let examples = schema["examples"].as_array().cloned().unwrap_or_default();
        for example in &examples {
            let name = std::any::type_name::<T>();
            if let Err(error) = serde_json::from_value::<T>(example.clone()) {
                panic!("{name}: example {example} does not parse: {error}");
            }
        }
        examples.len()
    }

    #[test]
    fn every_schema_example_deserializes_into_its_type() {
        let count = assert_examples_parse::<ErrorBody>()
            + assert_examples_parse::<Health>()
            + assert_examples_parse::<Readiness>()
            + assert_examples_parse::<PartitionOffsets>()
            + assert_examples_parse::<TimestampOffset>()
            + assert_examples_parse::<InitProducerRequest>()
            + assert_examples_parse::<ProducerIdentity>()
            + assert_examples_parse::<FetchResponse>()
            + assert_examples_parse::<ProduceRecord>()
            + assert_examples_parse::<ProduceRequest>()
            + assert_examples_parse::<ProduceResponse>()
            + assert_examples_parse::<CompactProduceResponse>()
            + assert_examples_parse::<AddPartitionsRequest>()
            + assert_examples_parse::<CreateTopicRequest>()
            + assert_examples_parse::<TopicDescription>()
            + assert_examples_parse::<TopicList>()
            + assert_examples_parse::<UpdateTopicConfigsRequest>();
        assert!(count >= 20, "only {count} examples found");
    }
}

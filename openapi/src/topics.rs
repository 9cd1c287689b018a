//! Topic administration bodies: create, list, describe, update configs, add partitions.
//!
//! Config maps use Kafka's config names with underscores instead of dots (`retention_ms` for
//! `retention.ms`) and JSON strings, integers or booleans as values. The server validates keys
//! and values (`invalid_config`); these types only carry them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::json;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::{PartialSchema, ToSchema};

/// A topic config value as it appears in the OpenAPI document: a JSON string, integer, number
/// or boolean, whichever the key's type is (`min_cleanable_dirty_ratio` is a fraction).
///
/// Schema only: config maps hold [`serde_json::Value`] so that the server can answer a value of
/// the wrong type with `invalid_config` naming the key, instead of a generic parse error.
pub enum ConfigValue {}

impl PartialSchema for ConfigValue {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(SchemaType::Array(vec![
                Type::String,
                Type::Integer,
                Type::Number,
                Type::Boolean,
            ]))
            .description(Some(
                "A topic config value: a string, integer, number or boolean, whichever the key's \
                 type is.",
            ))
            .examples([json!(604800000), json!("compact"), json!(false)])
            .build()
            .into()
    }
}

impl ToSchema for ConfigValue {}

/// A topic config value in an update: like [`ConfigValue`], or `null` to reset the key to its
/// default.
///
/// Schema only, like [`ConfigValue`].
pub enum ConfigUpdateValue {}

impl PartialSchema for ConfigUpdateValue {
    fn schema() -> RefOr<Schema> {
        let types = vec![
            Type::String,
            Type::Integer,
            Type::Number,
            Type::Boolean,
            Type::Null,
        ];
        ObjectBuilder::new()
            .schema_type(SchemaType::Array(types))
            .description(Some(
                "A topic config value (string, integer, number or boolean), or null to reset the \
                 key to its default.",
            ))
            .examples([json!(86400000), json!(null)])
            .build()
            .into()
    }
}

impl ToSchema for ConfigUpdateValue {}

/// Body of `POST /v1/topics`: creates a topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({
    "name": "orders",
    "partitions": 3,
    "configs": {"retention_ms": 604800000, "cleanup_policy": "delete"}
})))]
pub struct CreateTopicRequest {
    /// Topic name: 1 to 249 characters of `[A-Za-z0-9._-]`, not `.` or `..`; the `__` prefix is
    /// reserved for internal topics.
    #[schema(min_length = 1, max_length = 249, pattern = "^[A-Za-z0-9._-]+$")]
    pub name: String,
    /// Number of partitions, from 1 to the server's `max_partitions_per_topic` (1024 unless
    /// the operator changed it). Absent: 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1024)]
    pub partitions: Option<u32>,
    /// Topic configs by Kafka name with underscores (`retention_ms`, `retention_bytes`,
    /// `segment_bytes`, `segment_ms`, `cleanup_policy`, `delete_retention_ms`,
    /// `min_compaction_lag_ms`, `max_compaction_lag_ms`, `max_message_bytes`,
    /// `message_timestamp_type`, `local_retention_ms`, `local_retention_bytes`,
    /// `remote_storage_enable`, `min_cleanable_dirty_ratio`, `index_interval_bytes`,
    /// `remote_upload_idle_ms`, `remote_object_lock_mode`, `remote_object_lock_days`). Values
    /// are strings, numbers or booleans. Unknown keys are rejected; absent keys, and keys
    /// given as `null` (as in Kafka's CreateTopics), take the default.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "unique_keys"
    )]
    #[schema(value_type = BTreeMap<String, ConfigValue>)]
    pub configs: BTreeMap<String, Value>,
}

/// A topic with its per-partition state and effective configs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(json!({
    "name": "orders",
    "internal": false,
    "partitions": [{
        "partition": 0,
        "earliest_offset": 0,
        "latest_offset": 1200,
        "log_end_offset": 1200,
        "size_bytes": 524288,
        "segment_count": 1
    }],
    "configs": {"cleanup_policy": "delete", "retention_ms": 604800000}
})))]
pub struct TopicDescription {
    /// Topic name.
    pub name: String,
    /// True for the server's own topics (names starting with `__`), which clients should not
    /// write to.
    pub internal: bool,
    /// Every partition, ordered by partition number.
    pub partitions: Vec<PartitionDescription>,
    /// Effective value of every config, defaults included.
    #[schema(value_type = BTreeMap<String, ConfigValue>)]
    pub configs: BTreeMap<String, Value>,
    /// Legal holds in force (absent when none): what retention, delete-records and topic
    /// deletion keep.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub legal_holds: Vec<crate::holds::LegalHold>,
}

/// The state of one partition of a topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PartitionDescription {
    /// Partition number, from 0.
    pub partition: u32,
    /// First offset still readable (log start offset); older records were removed by retention.
    pub earliest_offset: u64,
    /// High watermark: records below it are committed and readable.
    pub latest_offset: u64,
    /// The offset the next appended record will get.
    pub log_end_offset: u64,
    /// Bytes the partition occupies in local storage.
    pub size_bytes: u64,
    /// Number of segment files the partition log consists of.
    pub segment_count: u64,
    /// Compaction state; present on topics whose `cleanup_policy` contains `compact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleaner: Option<CleanerStatus>,
}

/// What the compaction cleaner has done to one partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(json!({
    "dirty_ratio": 0.25, "runs": 12, "last_run_ms": 1764547200000_i64, "bytes_reclaimed": 73400320
})))]
pub struct CleanerStatus {
    /// Share of the closed segments' bytes written since the last compaction pass (0 to 1).
    /// A pass runs once it reaches `min_cleanable_dirty_ratio`.
    pub dirty_ratio: f64,
    /// Completed compaction passes.
    pub runs: u64,
    /// When the last pass finished, in ms since the epoch; absent before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_ms: Option<i64>,
    /// Bytes freed by compaction so far.
    pub bytes_reclaimed: u64,
    /// Why the cleaner stopped working on this partition (until restart), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Response of `GET /v1/topics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(json!({
    "topics": [
        {"name": "orders", "partitions": 3, "internal": false},
        {"name": "payments", "partitions": 1, "internal": false}
    ]
})))]
pub struct TopicList {
    /// Every topic, ordered by name.
    pub topics: Vec<TopicSummary>,
}

/// One entry of the topic list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TopicSummary {
    /// Topic name.
    pub name: String,
    /// Number of partitions.
    pub partitions: u32,
    /// True for the server's own topics (names starting with `__`).
    pub internal: bool,
}

/// Body of `PATCH /v1/topics/{topic}/configs`: changes some configs, leaves the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"configs": {"retention_ms": 86400000, "segment_bytes": null}})))]
pub struct UpdateTopicConfigsRequest {
    /// Configs to change, by Kafka name with underscores. A `null` value resets the key to its
    /// default; keys not mentioned keep their value. Unknown keys are rejected.
    #[schema(value_type = BTreeMap<String, ConfigUpdateValue>)]
    #[serde(deserialize_with = "unique_keys")]
    pub configs: BTreeMap<String, Value>,
}

/// A JSON object of configs, refusing a key given twice: serde keeps the last, so
/// `{"retention_ms": 1000, "retention_ms": 2000}` quietly meant 2000.
fn unique_keys<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, Value>, D::Error> {
    struct UniqueKeys;
    impl<'de> serde::de::Visitor<'de> for UniqueKeys {
        type Value = BTreeMap<String, Value>;

        fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
            formatter.write_str("an object of configs")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut configs = BTreeMap::new();
            while let Some((key, value)) = map.next_entry::<String, Value>()? {
                if configs.contains_key(&key) {
                    return Err(serde::de::Error::custom(format!(
                        "config {key:?} is given twice"
                    )));
                }
                configs.insert(key, value);
            }
            Ok(configs)
        }
    }
    deserializer.deserialize_map(UniqueKeys)
}

/// Body of `POST /v1/topics/{topic}/partitions`: raises the partition count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"partitions": 6})))]
pub struct AddPartitionsRequest {
    /// The new total partition count; must be greater than the current count and at most the
    /// server's `max_partitions_per_topic` (1024 unless the operator changed it). Partitions
    /// cannot be removed.
    #[schema(minimum = 1, maximum = 1024)]
    pub partitions: u32,
}

/// Response of adding partitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AddPartitionsResponse {
    /// The topic after the change.
    pub topic: TopicDescription,
    /// Says that keys now hash to different partitions, so per-key ordering holds only among
    /// records written after the change.
    pub warning: String,
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use utoipa::PartialSchema;

    use super::*;

    #[test]
    fn create_topic_request_defaults_partitions_and_configs() {
        let request: CreateTopicRequest =
            serde_json::from_value(json!({"name": "orders"})).unwrap();
        assert_eq!(request.partitions, None);
        assert!(request.configs.is_empty());
    }

    #[test]
    fn create_topic_request_rejects_unknown_fields() {
        let result: Result<CreateTopicRequest, _> =
            serde_json::from_value(json!({"name": "orders", "replication_factor": 3}));
        assert!(result.is_err());
    }

    #[test]
    fn config_update_accepts_null_to_reset() {
        let request: UpdateTopicConfigsRequest =
            serde_json::from_value(json!({"configs": {"retention_ms": null}})).unwrap();
        assert_eq!(request.configs["retention_ms"], Value::Null);
    }

    #[test]
    fn config_maps_reference_config_value_and_allow_null_only_on_update() {
        let create = serde_json::to_value(CreateTopicRequest::schema()).unwrap();
        let values = &create["properties"]["configs"]["additionalProperties"];
        assert_eq!(values, &json!({"$ref": "#/components/schemas/ConfigValue"}));
        let update = serde_json::to_value(UpdateTopicConfigsRequest::schema()).unwrap();
        let values = &update["properties"]["configs"]["additionalProperties"];
        assert_eq!(
            values,
            &json!({"$ref": "#/components/schemas/ConfigUpdateValue"})
        );
        let value = serde_json::to_value(ConfigValue::schema()).unwrap();
        assert_eq!(
            value["type"],
            json!(["string", "integer", "number", "boolean"])
        );
        let value = serde_json::to_value(ConfigUpdateValue::schema()).unwrap();
        assert_eq!(
            value["type"],
            json!(["string", "integer", "number", "boolean", "null"])
        );
    }
}

/// Where a segment's records are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SegmentLocation {
    /// Only on the local disk (not uploaded yet, or the topic is not tiered).
    Local,
    /// Only in the bucket (local retention removed the local copy).
    Remote,
    /// On the local disk and in the bucket.
    Both,
}

/// One segment of a partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SegmentInfo {
    /// Offset of its first record (and its file name).
    pub base_offset: u64,
    /// Offset after its last record (for the active segment, the log end).
    pub end_offset: u64,
    /// Bytes of record data.
    pub size_bytes: u64,
    /// Largest record timestamp, absent while empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_timestamp: Option<i64>,
    /// Where it lives.
    pub location: SegmentLocation,
    /// True for the segment appends go to.
    pub active: bool,
}

/// Statistics of the cold-read cache (shared by every tiered partition of the server).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ColdCacheStats {
    /// Chunk reads answered from memory.
    pub hits: u64,
    /// Chunk reads that needed a GET.
    pub misses: u64,
    /// Ranged GETs issued (read-ahead included).
    pub gets: u64,
    /// Bytes fetched from the bucket.
    pub bytes_fetched: u64,
    /// Bytes held in the cache now.
    pub bytes_cached: u64,
    /// Chunks evicted to stay within the size limit.
    pub evictions: u64,
    /// GETs started by read-ahead.
    pub read_ahead_gets: u64,
}

/// Response of `GET /v1/topics/{topic}/partitions/{partition}/segments`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(json!({
    "segments": [
        {"base_offset": 0, "end_offset": 1000, "size_bytes": 1048576, "max_timestamp": 1764547200000_i64, "location": "remote", "active": false},
        {"base_offset": 1000, "end_offset": 2000, "size_bytes": 1048576, "max_timestamp": 1764547260000_i64, "location": "both", "active": false},
        {"base_offset": 2000, "end_offset": 2100, "size_bytes": 104857, "max_timestamp": 1764547270000_i64, "location": "local", "active": true}
    ],
    "tiered": true,
    "cache": {"hits": 10, "misses": 2, "gets": 4, "bytes_fetched": 4194304, "bytes_cached": 4194304, "evictions": 0, "read_ahead_gets": 2}
})))]
pub struct SegmentList {
    /// Segments, oldest first.
    pub segments: Vec<SegmentInfo>,
    /// Whether the topic uploads to tiered storage.
    pub tiered: bool,
    /// Cold-read cache statistics (tiered topics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<ColdCacheStats>,
}

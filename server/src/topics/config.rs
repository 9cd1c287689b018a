//! Per-topic configuration: Kafka's topic configs, under Kafka's names (with `_` for `.`) and
//! Kafka's defaults.
//!
//! Users coming from Kafka already know what `retention.ms` or `cleanup.policy` mean, so Strata
//! keeps the vocabulary and the defaults, and validates the same way: every update is checked,
//! unknown keys are rejected (a typo must not silently fall back to a default), and all
//! problems in one request are reported together so a client can fix them in one round trip.
//!
//! Values arrive as JSON from the HTTP API and may be given the way Kafka tools print them
//! (strings such as `"604800000"` or `"true"`) or as native JSON numbers and booleans. `null`
//! resets a key to its default. An update is all-or-nothing: on any error the configuration is
//! left exactly as it was.
//!
//! Strata deviates from Kafka in one bound: `segment_bytes` must be at least 1024 (Kafka allows
//! 14), since tiny segments would only multiply files and index entries.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Sentinel for "no limit" in the retention settings (Kafka's `-1`).
pub const UNLIMITED: i64 = -1;

/// Sentinel for "same as the corresponding `retention_*` setting" in the `local_retention_*`
/// settings (Kafka's `-2`).
pub const USE_RETENTION: i64 = -2;

/// What happens to old data: Kafka's `cleanup.policy`.
///
/// An enum rather than a string so the retention and compaction code cannot misspell a policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CleanupPolicy {
    /// Delete whole segments past `retention_ms` / `retention_bytes` (Kafka's default).
    #[default]
    #[serde(rename = "delete")]
    Delete,
    /// Keep only the latest record per key.
    #[serde(rename = "compact")]
    Compact,
    /// Compact, and also delete by retention.
    #[serde(rename = "compact,delete", alias = "delete,compact")]
    CompactDelete,
}

impl CleanupPolicy {
    /// The wire form, as Kafka writes it (`"delete"`, `"compact"`, `"compact,delete"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Compact => "compact",
            Self::CompactDelete => "compact,delete",
        }
    }

    /// Parses Kafka's list syntax: `delete`, `compact`, or both in either order, with optional
    /// spaces around the comma (Kafka trims list items). Case-sensitive, like Kafka.
    pub fn parse(s: &str) -> Option<Self> {
        let mut delete = false;
        let mut compact = false;
        for item in s.split(',') {
            match item.trim() {
                "delete" if !delete => delete = true,
                "compact" if !compact => compact = true,
                _ => return None,
            }
        }
        match (delete, compact) {
            (true, false) => Some(Self::Delete),
            (false, true) => Some(Self::Compact),
            (true, true) => Some(Self::CompactDelete),
            (false, false) => None,
        }
    }

    /// Whether retention-based deletion applies.
    pub fn deletes(self) -> bool {
        matches!(self, Self::Delete | Self::CompactDelete)
    }

    /// Whether the log is compacted.
    pub fn compacts(self) -> bool {
        matches!(self, Self::Compact | Self::CompactDelete)
    }
}

impl fmt::Display for CleanupPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which timestamp a stored record carries: Kafka's `message.timestamp.type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MessageTimestampType {
    /// The producer's timestamp is kept (Kafka's default).
    #[default]
    CreateTime,
    /// The server stamps each batch with its append time; the time index follows it.
    LogAppendTime,
}

impl MessageTimestampType {
    /// The wire form, as Kafka writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CreateTime => "CreateTime",
            Self::LogAppendTime => "LogAppendTime",
        }
    }

    /// Parses the wire form (exact, case-sensitive, like Kafka).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "CreateTime" => Some(Self::CreateTime),
            "LogAppendTime" => Some(Self::LogAppendTime),
            _ => None,
        }
    }
}

impl fmt::Display for MessageTimestampType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Kafka's `compression.type`: the codec a topic stores batches with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompressionType {
    /// Keep the producer's codec: raw batches are stored as sent; JSON produce is stored
    /// uncompressed (Kafka's default).
    #[default]
    Producer,
    /// Store records uncompressed.
    Uncompressed,
    /// gzip.
    Gzip,
    /// Snappy.
    Snappy,
    /// LZ4.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl CompressionType {
    /// The config value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Producer => "producer",
            Self::Uncompressed => "uncompressed",
            Self::Gzip => "gzip",
            Self::Snappy => "snappy",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
        }
    }

    /// Parses the config value (as Kafka spells it).
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Producer,
            Self::Uncompressed,
            Self::Gzip,
            Self::Snappy,
            Self::Lz4,
            Self::Zstd,
        ]
        .into_iter()
        .find(|c| c.as_str() == s)
    }
}

/// One rejected config key and why, so an API error can point at the exact key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    /// The key as the client sent it.
    pub key: String,
    /// What a valid value looks like.
    pub message: String,
}

/// Every problem found in one update, so a client sees them all at once.
///
/// Displays as `"retention_ms: must be an integer >= -1; foo: unknown config"`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{}", join_errors(.errors))]
pub struct ConfigErrors {
    /// In key order for per-key errors, followed by cross-field errors.
    pub errors: Vec<ConfigError>,
}

fn join_errors(errors: &[ConfigError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The settings of one topic. Field names are Kafka's topic-config names with `_` for `.`.
///
/// Persisted with topic metadata: unknown fields are rejected so a corrupted or newer file is
/// noticed, and missing fields take their default so configs written before a field existed
/// still load. A loaded config should be checked with [`TopicConfig::validate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopicConfig {
    /// Delete segments whose newest record is older than this; `-1` = forever.
    pub retention_ms: i64,
    /// Per-partition size cap, oldest segments deleted first while the rest still holds at
    /// least this much (Kafka's rule); `-1` = no cap.
    pub retention_bytes: i64,
    /// Roll to a new segment at this size.
    pub segment_bytes: i64,
    /// Roll to a new segment after this long, so slow topics still age out.
    pub segment_ms: i64,
    /// Delete, compact, or both.
    pub cleanup_policy: CleanupPolicy,
    /// How long tombstones survive compaction.
    pub delete_retention_ms: i64,
    /// Minimum age of a record before compaction may remove it.
    pub min_compaction_lag_ms: i64,
    /// Maximum time a record stays uncompacted: a dirty segment this old makes a pass run
    /// whatever the dirty ratio (Kafka KIP-354; for deletion guarantees such as erasure).
    pub max_compaction_lag_ms: i64,
    /// Largest record batch accepted.
    pub max_message_bytes: i64,
    /// Producer timestamps or server append time.
    pub message_timestamp_type: MessageTimestampType,
    /// Local copy retention when tiered; `-2` = use `retention_ms`, `-1` = forever.
    pub local_retention_ms: i64,
    /// Local size cap when tiered; `-2` = use `retention_bytes`, `-1` = no cap.
    pub local_retention_bytes: i64,
    /// Whether closed segments are uploaded to remote storage.
    pub remote_storage_enable: bool,
    /// Dirty fraction of the log that triggers compaction.
    pub min_cleanable_dirty_ratio: f64,
    /// Bytes between sparse index entries.
    pub index_interval_bytes: i64,
    /// On tiered topics the active segment rolls after this long without filling, so a quiet
    /// topic's records reach the bucket within it.
    pub remote_upload_idle_ms: i64,
    /// Object Lock mode set on every uploaded object, when `remote_object_lock_days > 0`.
    pub remote_object_lock_mode: ObjectLockMode,
    /// Days uploaded objects are locked against deletion; 0 = no lock.
    pub remote_object_lock_days: i64,
    /// The codec stored batches use; `producer` keeps what was sent.
    pub compression_type: CompressionType,
    /// Every read that discloses records (and every denied read) is recorded in the internal
    /// topic `__audit_reads` before the records leave. Not a Kafka key: Strata's read audit.
    /// Left out of `topic.json` while false, so files of topics that never set it stay as
    /// they were.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub audit_reads: bool,
}

/// S3 Object Lock retention mode of uploaded objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectLockMode {
    /// Users with the `s3:BypassGovernanceRetention` permission may still delete.
    Governance,
    /// Nobody can delete before the retain-until date, not even the root account.
    Compliance,
}

impl ObjectLockMode {
    /// The config value.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectLockMode::Governance => "governance",
            ObjectLockMode::Compliance => "compliance",
        }
    }
}

impl Default for TopicConfig {
    /// Kafka's topic-config defaults.
    fn default() -> Self {
        Self {
            retention_ms: 604_800_000,
            retention_bytes: UNLIMITED,
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            max_message_bytes: 1_048_588,
            message_timestamp_type: MessageTimestampType::CreateTime,
            local_retention_ms: USE_RETENTION,
            local_retention_bytes: USE_RETENTION,
            remote_storage_enable: false,
            min_cleanable_dirty_ratio: 0.5,
            index_interval_bytes: 4096,
            remote_upload_idle_ms: 600_000,
            remote_object_lock_mode: ObjectLockMode::Governance,
            remote_object_lock_days: 0,
            compression_type: CompressionType::Producer,
            audit_reads: false,
        }
    }
}

/// Bounds of an integer-valued key.
struct IntRule {
    key: &'static str,
    min: i64,
    max: i64,
}

impl IntRule {
    fn message(&self) -> String {
        if self.max == i64::MAX {
            format!("must be an integer >= {}", self.min)
        } else {
            format!("must be an integer between {} and {}", self.min, self.max)
        }
    }
}

/// Largest value of Kafka's `int`-typed size settings.
const INT_MAX: i64 = i32::MAX as i64;

const INT_RULES: [IntRule; 13] = [
    int_rule("retention_ms", UNLIMITED, i64::MAX),
    int_rule("retention_bytes", UNLIMITED, i64::MAX),
    int_rule("segment_bytes", 1024, INT_MAX),
    int_rule("segment_ms", 1, i64::MAX),
    int_rule("delete_retention_ms", 0, i64::MAX),
    int_rule("min_compaction_lag_ms", 0, i64::MAX),
    int_rule("max_compaction_lag_ms", 1, i64::MAX),
    int_rule("max_message_bytes", 1, INT_MAX),
    int_rule("local_retention_ms", USE_RETENTION, i64::MAX),
    int_rule("local_retention_bytes", USE_RETENTION, i64::MAX),
    int_rule("index_interval_bytes", 0, INT_MAX),
    int_rule("remote_upload_idle_ms", 1, i64::MAX),
    int_rule("remote_object_lock_days", 0, 36_500),
];

const fn int_rule(key: &'static str, min: i64, max: i64) -> IntRule {
    IntRule { key, min, max }
}

const CLEANUP_POLICY_MESSAGE: &str = r#"must be one of "delete", "compact", "compact,delete""#;
const TIMESTAMP_TYPE_MESSAGE: &str = r#"must be "CreateTime" or "LogAppendTime""#;
const BOOL_MESSAGE: &str = "must be a boolean (true or false)";
const RATIO_MESSAGE: &str = "must be a number between 0 and 1";
const LOCK_MODE_MESSAGE: &str = r#"must be "governance" or "compliance""#;
const COMPRESSION_MESSAGE: &str =
    r#"must be one of "producer", "uncompressed", "gzip", "snappy", "lz4", "zstd""#;

impl TopicConfig {
    /// Every config key, in declaration order: what `to_map` returns and `apply` accepts.
    pub const KEYS: [&'static str; 20] = [
        "retention_ms",
        "retention_bytes",
        "segment_bytes",
        "segment_ms",
        "cleanup_policy",
        "delete_retention_ms",
        "min_compaction_lag_ms",
        "max_compaction_lag_ms",
        "max_message_bytes",
        "message_timestamp_type",
        "local_retention_ms",
        "local_retention_bytes",
        "remote_storage_enable",
        "min_cleanable_dirty_ratio",
        "index_interval_bytes",
        "remote_upload_idle_ms",
        "remote_object_lock_mode",
        "remote_object_lock_days",
        "compression_type",
        "audit_reads",
    ];

    /// Applies a set of updates from the API, all or nothing.
    ///
    /// Each value may be a JSON string (`"604800000"`, `"compact"`, `"true"`), an integer, a
    /// number (only `min_cleanable_dirty_ratio` takes fractions) or a boolean; `null` resets
    /// the key to its default. Unknown keys are errors. Every error is collected, then the
    /// cross-field rules are checked on the result; if anything failed, `self` is unchanged.
    pub fn apply(&mut self, updates: &BTreeMap<String, Value>) -> Result<(), ConfigErrors> {
        let mut next = self.clone();
        let mut errors = Vec::new();
        for (key, value) in updates {
            if let Err(message) = next.set(key, value) {
                errors.push(ConfigError {
                    key: key.clone(),
                    message,
                });
            }
        }
        // A cross-field error about a key that was itself rejected would only repeat it.
        let rejected = |key: &str| errors.iter().any(|e: &ConfigError| e.key == key);
        let cross: Vec<ConfigError> = next
            .cross_field_errors()
            .into_iter()
            .filter(|(involved, _)| !involved.iter().any(|k| rejected(k)))
            .map(|(_, e)| e)
            .collect();
        errors.extend(cross);
        if errors.is_empty() {
            *self = next;
            Ok(())
        } else {
            Err(ConfigErrors { errors })
        }
    }

    /// Every key with its current value as JSON (numbers, strings, booleans), for describe
    /// responses. Feeding the result back to [`TopicConfig::apply`] reproduces `self`.
    pub fn to_map(&self) -> BTreeMap<String, Value> {
        let mut map = BTreeMap::new();
        for rule in &INT_RULES {
            if let Some(v) = self.int_field(rule.key) {
                map.insert(rule.key.to_string(), Value::from(v));
            }
        }
        map.insert(
            "cleanup_policy".to_string(),
            Value::from(self.cleanup_policy.as_str()),
        );
        map.insert(
            "message_timestamp_type".to_string(),
            Value::from(self.message_timestamp_type.as_str()),
        );
        map.insert(
            "compression_type".to_string(),
            Value::from(self.compression_type.as_str()),
        );
        map.insert(
            "remote_storage_enable".to_string(),
            Value::from(self.remote_storage_enable),
        );
        map.insert(
            "min_cleanable_dirty_ratio".to_string(),
            Value::from(self.min_cleanable_dirty_ratio),
        );
        map.insert("audit_reads".to_string(), Value::from(self.audit_reads));
        map.insert(
            "remote_object_lock_mode".to_string(),
            Value::from(self.remote_object_lock_mode.as_str()),
        );
        map
    }

    /// The JSON Schema of a config map (every key with its type and bounds; unknown keys are
    /// refused), for the OpenAPI document. `nullable`: an update, where `null` resets a key.
    pub fn json_schema(nullable: bool) -> Value {
        let typed = |kind: &str, mut schema: serde_json::Map<String, Value>| {
            let kinds = if nullable {
                serde_json::json!([kind, "null"])
            } else {
                Value::from(kind)
            };
            schema.insert("type".into(), kinds);
            Value::Object(schema)
        };
        let mut properties = serde_json::Map::new();
        for rule in &INT_RULES {
            let mut schema = serde_json::Map::new();
            schema.insert("minimum".into(), Value::from(rule.min));
            schema.insert("maximum".into(), Value::from(rule.max));
            properties.insert(rule.key.into(), typed("integer", schema));
        }
        let enumerated = |values: &[&str]| {
            let mut schema = serde_json::Map::new();
            let mut values: Vec<Value> = values.iter().map(|v| Value::from(*v)).collect();
            if nullable {
                values.push(Value::Null);
            }
            schema.insert("enum".into(), Value::Array(values));
            typed("string", schema)
        };
        properties.insert(
            "cleanup_policy".into(),
            enumerated(&["delete", "compact", "compact,delete"]),
        );
        properties.insert(
            "message_timestamp_type".into(),
            enumerated(&["CreateTime", "LogAppendTime"]),
        );
        properties.insert(
            "compression_type".into(),
            enumerated(&["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]),
        );
        properties.insert(
            "remote_object_lock_mode".into(),
            enumerated(&["governance", "compliance"]),
        );
        properties.insert(
            "remote_storage_enable".into(),
            typed("boolean", serde_json::Map::new()),
        );
        properties.insert(
            "audit_reads".into(),
            typed("boolean", serde_json::Map::new()),
        );
        let mut ratio = serde_json::Map::new();
        ratio.insert("minimum".into(), Value::from(0.0));
        ratio.insert("maximum".into(), Value::from(1.0));
        properties.insert("min_cleanable_dirty_ratio".into(), typed("number", ratio));
        debug_assert_eq!(properties.len(), Self::KEYS.len(), "every key has a schema");
        serde_json::json!({
            "type": "object",
            "description": "Topic configs: Kafka's topic settings with `_` for `.`. Unknown keys \
                are rejected with every problem listed (`invalid_config`), as are values out of \
                range and combinations that contradict each other.",
            "properties": properties,
            "additionalProperties": false,
        })
    }

    /// Checks every bound and cross-field rule; for configs that did not come through
    /// [`TopicConfig::apply`], such as ones loaded from disk.
    pub fn validate(&self) -> Result<(), ConfigErrors> {
        let mut errors = Vec::new();
        for rule in &INT_RULES {
            if let Some(v) = self.int_field(rule.key)
                && !(rule.min..=rule.max).contains(&v)
            {
                errors.push(ConfigError {
                    key: rule.key.to_string(),
                    message: rule.message(),
                });
            }
        }
        if !valid_ratio(self.min_cleanable_dirty_ratio) {
            errors.push(ConfigError {
                key: "min_cleanable_dirty_ratio".to_string(),
                message: RATIO_MESSAGE.to_string(),
            });
        }
        errors.extend(self.cross_field_errors().into_iter().map(|(_, e)| e));
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors { errors })
        }
    }

    /// How long the local copy is kept, with `-2` resolved to `retention_ms`; `-1` = forever.
    pub fn effective_local_retention_ms(&self) -> i64 {
        if self.local_retention_ms == USE_RETENTION {
            self.retention_ms
        } else {
            self.local_retention_ms
        }
    }

    /// The local size cap, with `-2` resolved to `retention_bytes`; `-1` = no cap.
    pub fn effective_local_retention_bytes(&self) -> i64 {
        if self.local_retention_bytes == USE_RETENTION {
            self.retention_bytes
        } else {
            self.local_retention_bytes
        }
    }

    /// Sets one key from its JSON value; the error is the message for [`ConfigError`].
    fn set(&mut self, key: &str, value: &Value) -> Result<(), String> {
        if value.is_null() {
            return match Self::default().to_map().get(key) {
                Some(default) => self.set(key, default),
                None => Err(unknown_key_message(key)),
            };
        }
        if let Some(rule) = INT_RULES.iter().find(|r| r.key == key) {
            let parsed = parse_int(value)
                .filter(|v| (rule.min..=rule.max).contains(v))
                .ok_or_else(|| rule.message())?;
            if let Some(field) = self.int_field_mut(key) {
                *field = parsed;
            }
            return Ok(());
        }
        match key {
            "cleanup_policy" => {
                self.cleanup_policy = value
                    .as_str()
                    .and_then(CleanupPolicy::parse)
                    .ok_or(CLEANUP_POLICY_MESSAGE)?;
            }
            "message_timestamp_type" => {
                self.message_timestamp_type = value
                    .as_str()
                    .and_then(MessageTimestampType::parse)
                    .ok_or(TIMESTAMP_TYPE_MESSAGE)?;
            }
            "compression_type" => {
                self.compression_type = value
                    .as_str()
                    .and_then(CompressionType::parse)
                    .ok_or(COMPRESSION_MESSAGE)?;
            }
            "remote_storage_enable" => {
                self.remote_storage_enable = parse_bool(value).ok_or(BOOL_MESSAGE)?;
            }
            "audit_reads" => {
                self.audit_reads = parse_bool(value).ok_or(BOOL_MESSAGE)?;
            }
            "min_cleanable_dirty_ratio" => {
                self.min_cleanable_dirty_ratio = parse_f64(value)
                    .filter(|r| valid_ratio(*r))
                    .ok_or(RATIO_MESSAGE)?;
            }
            "remote_object_lock_mode" => {
                self.remote_object_lock_mode = match value.as_str() {
                    Some("governance") => ObjectLockMode::Governance,
                    Some("compliance") => ObjectLockMode::Compliance,
                    _ => return Err(LOCK_MODE_MESSAGE.to_string()),
                };
            }
            _ => return Err(unknown_key_message(key)),
        }
        Ok(())
    }

    fn int_field_mut(&mut self, key: &str) -> Option<&mut i64> {
        Some(match key {
            "retention_ms" => &mut self.retention_ms,
            "retention_bytes" => &mut self.retention_bytes,
            "segment_bytes" => &mut self.segment_bytes,
            "segment_ms" => &mut self.segment_ms,
            "delete_retention_ms" => &mut self.delete_retention_ms,
            "min_compaction_lag_ms" => &mut self.min_compaction_lag_ms,
            "max_compaction_lag_ms" => &mut self.max_compaction_lag_ms,
            "max_message_bytes" => &mut self.max_message_bytes,
            "local_retention_ms" => &mut self.local_retention_ms,
            "local_retention_bytes" => &mut self.local_retention_bytes,
            "index_interval_bytes" => &mut self.index_interval_bytes,
            "remote_upload_idle_ms" => &mut self.remote_upload_idle_ms,
            "remote_object_lock_days" => &mut self.remote_object_lock_days,
            _ => return None,
        })
    }

    fn int_field(&self, key: &str) -> Option<i64> {
        // All fields are plain values, so the copy is cheap and keeps one key-to-field table.
        self.clone().int_field_mut(key).map(|v| *v)
    }

    /// Rules between keys, each with the keys it involves. Mirrors Kafka's `LogConfig`
    /// validation: the local copy cannot outlive the whole log (so `-1` locally is only allowed
    /// when the total is unlimited too), and tiered storage only supports `delete` topics.
    fn cross_field_errors(&self) -> Vec<([&'static str; 2], ConfigError)> {
        let mut errors = Vec::new();
        let pairs = [
            (
                "local_retention_ms",
                self.local_retention_ms,
                "retention_ms",
                self.retention_ms,
            ),
            (
                "local_retention_bytes",
                self.local_retention_bytes,
                "retention_bytes",
                self.retention_bytes,
            ),
        ];
        for (local_key, local, total_key, total) in pairs {
            if total == UNLIMITED || local == USE_RETENTION {
                continue;
            }
            let message = if local == UNLIMITED {
                format!(
                    "must not be -1 (unlimited) while {total_key} is {total}; \
                     use -2 to follow {total_key}"
                )
            } else if local > total {
                format!("must be <= {total_key} ({total}), or -2 to follow {total_key}")
            } else {
                continue;
            };
            errors.push((
                [local_key, total_key],
                ConfigError {
                    key: local_key.to_string(),
                    message,
                },
            ));
        }
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms {
            errors.push((
                ["min_compaction_lag_ms", "max_compaction_lag_ms"],
                ConfigError {
                    key: "min_compaction_lag_ms".to_string(),
                    message: format!(
                        "must be <= max_compaction_lag_ms ({})",
                        self.max_compaction_lag_ms
                    ),
                },
            ));
        }
        if self.remote_storage_enable && self.cleanup_policy != CleanupPolicy::Delete {
            errors.push((
                ["remote_storage_enable", "cleanup_policy"],
                ConfigError {
                    key: "remote_storage_enable".to_string(),
                    message: format!(
                        "requires cleanup_policy \"delete\" (is \"{}\"): tiered storage does \
                         not support compacted topics",
                        self.cleanup_policy
                    ),
                },
            ));
        }
        errors
    }
}

fn unknown_key_message(key: &str) -> String {
    let underscored = key.replace('.', "_");
    if underscored != key && TopicConfig::KEYS.contains(&underscored.as_str()) {
        format!("unknown config (did you mean {underscored}?)")
    } else {
        "unknown config".to_string()
    }
}

/// An integer from a JSON integer or a decimal string (Kafka tools send strings).
fn parse_int(value: &Value) -> Option<i64> {
    match value {
        // JSON has one number type: 5.0 is the integer 5 (as JSON Schema's `integer` says).
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < i64::MAX as f64)
                .map(|f| f as i64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A number from any JSON number or a numeric string.
fn parse_f64(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A boolean from a JSON boolean or `"true"`/`"false"` (any case, as Kafka accepts).
fn parse_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s.trim().eq_ignore_ascii_case("true") => Some(true),
        Value::String(s) if s.trim().eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

fn valid_ratio(r: f64) -> bool {
    r.is_finite() && (0.0..=1.0).contains(&r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn updates(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    fn applied(pairs: &[(&str, Value)]) -> Result<TopicConfig, ConfigErrors> {
        let mut config = TopicConfig::default();
        config.apply(&updates(pairs)).map(|()| config)
    }

    fn error_keys(err: &ConfigErrors) -> Vec<&str> {
        err.errors.iter().map(|e| e.key.as_str()).collect()
    }

    #[test]
    fn defaults_are_kafkas() {
        let c = TopicConfig::default();
        assert_eq!(c.retention_ms, 604_800_000);
        assert_eq!(c.retention_bytes, -1);
        assert_eq!(c.segment_bytes, 1_073_741_824);
        assert_eq!(c.segment_ms, 604_800_000);
        assert_eq!(c.cleanup_policy, CleanupPolicy::Delete);
        assert_eq!(c.delete_retention_ms, 86_400_000);
        assert_eq!(c.min_compaction_lag_ms, 0);
        assert_eq!(c.max_message_bytes, 1_048_588);
        assert_eq!(c.message_timestamp_type, MessageTimestampType::CreateTime);
        assert_eq!(c.local_retention_ms, -2);
        assert_eq!(c.local_retention_bytes, -2);
        assert!(!c.remote_storage_enable);
        assert_eq!(c.min_cleanable_dirty_ratio, 0.5);
        assert_eq!(c.index_interval_bytes, 4096);
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn keys_and_map_agree() {
        let map = TopicConfig::default().to_map();
        let mut keys: Vec<&str> = TopicConfig::KEYS.to_vec();
        keys.sort_unstable();
        assert_eq!(map.keys().map(String::as_str).collect::<Vec<_>>(), keys);
        assert_eq!(map["retention_ms"], json!(604_800_000));
        assert_eq!(map["cleanup_policy"], json!("delete"));
        assert_eq!(map["message_timestamp_type"], json!("CreateTime"));
        assert_eq!(map["remote_storage_enable"], json!(false));
        assert_eq!(map["min_cleanable_dirty_ratio"], json!(0.5));
    }

    /// For every integer key: the bounds, string form, and the kinds of JSON it refuses.
    #[test]
    fn integer_keys_accept_their_range_and_reject_the_rest() {
        for rule in &INT_RULES {
            let key = rule.key;
            let get = |c: &TopicConfig| c.int_field(key);
            // Cross-field rules need a bounded retention at least as large as the local one.
            let base = [("retention_ms", json!(-1)), ("retention_bytes", json!(-1))];
            let with = |v: Value| {
                let mut pairs = base.to_vec();
                pairs.retain(|(k, _)| *k != key);
                pairs.push((key, v));
                applied(&pairs)
            };
            assert_eq!(
                get(&with(json!(rule.min)).unwrap()),
                Some(rule.min),
                "{key} min"
            );
            assert_eq!(
                get(&with(json!(rule.max)).unwrap()),
                Some(rule.max),
                "{key} max"
            );
            let s = (rule.min + 1).to_string();
            assert_eq!(
                get(&with(json!(s)).unwrap()),
                Some(rule.min + 1),
                "{key} string"
            );
            assert_eq!(
                get(&with(json!(format!(" {} ", rule.min))).unwrap()),
                Some(rule.min),
                "{key} padded string"
            );

            // JSON has one number type: an integral float is that integer.
            assert_eq!(
                get(&with(json!(rule.min as f64)).unwrap()),
                Some(rule.min),
                "{key} as an integral float"
            );
            let mut bad = vec![
                json!(rule.min - 1),
                json!((rule.min - 1).to_string()),
                json!(1.5),
                json!("1.5"),
                json!("abc"),
                json!(""),
                json!(true),
                json!([1]),
                json!({"v": 1}),
                json!(u64::MAX),
            ];
            if rule.max < i64::MAX {
                bad.push(json!(rule.max + 1));
            }
            for value in bad {
                let err = with(value.clone()).unwrap_err();
                assert_eq!(
                    err.errors,
                    vec![ConfigError {
                        key: key.to_string(),
                        message: rule.message()
                    }],
                    "{key} = {value}"
                );
            }
        }
    }

    #[test]
    fn integer_messages_name_the_bounds() {
        let err = applied(&[("retention_ms", json!(-2))]).unwrap_err();
        assert_eq!(err.to_string(), "retention_ms: must be an integer >= -1");
        let err = applied(&[("segment_bytes", json!(1023))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "segment_bytes: must be an integer between 1024 and 2147483647"
        );
        let err = applied(&[("max_message_bytes", json!(0))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "max_message_bytes: must be an integer between 1 and 2147483647"
        );
        let err = applied(&[("segment_ms", json!(0))]).unwrap_err();
        assert_eq!(err.to_string(), "segment_ms: must be an integer >= 1");
    }

    #[test]
    fn cleanup_policy_forms() {
        let cases = [
            ("delete", CleanupPolicy::Delete),
            ("compact", CleanupPolicy::Compact),
            ("compact,delete", CleanupPolicy::CompactDelete),
            ("delete,compact", CleanupPolicy::CompactDelete),
            (" compact , delete ", CleanupPolicy::CompactDelete),
        ];
        for (wire, policy) in cases {
            let c = applied(&[("cleanup_policy", json!(wire))]).unwrap();
            assert_eq!(c.cleanup_policy, policy, "{wire}");
        }
        for bad in [
            json!("Delete"),
            json!("compact,compact"),
            json!("delete,"),
            json!(""),
            json!("none"),
            json!(1),
            json!(["compact", "delete"]),
        ] {
            let err = applied(&[("cleanup_policy", bad.clone())]).unwrap_err();
            assert_eq!(
                err.to_string(),
                r#"cleanup_policy: must be one of "delete", "compact", "compact,delete""#,
                "{bad}"
            );
        }
        assert!(CleanupPolicy::CompactDelete.deletes() && CleanupPolicy::CompactDelete.compacts());
        assert!(!CleanupPolicy::Compact.deletes() && !CleanupPolicy::Delete.compacts());
    }

    #[test]
    fn message_timestamp_type_forms() {
        let c = applied(&[("message_timestamp_type", json!("LogAppendTime"))]).unwrap();
        assert_eq!(
            c.message_timestamp_type,
            MessageTimestampType::LogAppendTime
        );
        let c = applied(&[("message_timestamp_type", json!("CreateTime"))]).unwrap();
        assert_eq!(c.message_timestamp_type, MessageTimestampType::CreateTime);
        for bad in [
            json!("createtime"),
            json!("LOG_APPEND_TIME"),
            json!(0),
            json!(false),
        ] {
            let err = applied(&[("message_timestamp_type", bad.clone())]).unwrap_err();
            assert_eq!(
                err.to_string(),
                r#"message_timestamp_type: must be "CreateTime" or "LogAppendTime""#,
                "{bad}"
            );
        }
    }

    #[test]
    fn remote_storage_enable_forms() {
        for (value, expected) in [
            (json!(true), true),
            (json!(false), false),
            (json!("true"), true),
            (json!("FALSE"), false),
            (json!(" True "), true),
        ] {
            let c = applied(&[("remote_storage_enable", value.clone())]).unwrap();
            assert_eq!(c.remote_storage_enable, expected, "{value}");
        }
        for bad in [json!(1), json!("yes"), json!("1"), json!(""), json!([true])] {
            let err = applied(&[("remote_storage_enable", bad.clone())]).unwrap_err();
            assert_eq!(
                err.to_string(),
                "remote_storage_enable: must be a boolean (true or false)",
                "{bad}"
            );
        }
    }

    #[test]
    fn min_cleanable_dirty_ratio_forms() {
        for (value, expected) in [
            (json!(0), 0.0),
            (json!(1), 1.0),
            (json!(0.25), 0.25),
            (json!("0.75"), 0.75),
            (json!(1.0), 1.0),
        ] {
            let c = applied(&[("min_cleanable_dirty_ratio", value.clone())]).unwrap();
            assert_eq!(c.min_cleanable_dirty_ratio, expected, "{value}");
        }
        for bad in [
            json!(-0.1),
            json!(1.01),
            json!("NaN"),
            json!("inf"),
            json!("half"),
            json!(true),
        ] {
            let err = applied(&[("min_cleanable_dirty_ratio", bad.clone())]).unwrap_err();
            assert_eq!(
                err.to_string(),
                "min_cleanable_dirty_ratio: must be a number between 0 and 1",
                "{bad}"
            );
        }
    }

    #[test]
    fn null_resets_to_default() {
        let mut c = applied(&[
            ("retention_ms", json!(1000)),
            ("cleanup_policy", json!("compact")),
            ("min_cleanable_dirty_ratio", json!(0.9)),
            ("remote_storage_enable", json!(false)),
            ("message_timestamp_type", json!("LogAppendTime")),
        ])
        .unwrap();
        let all_null: BTreeMap<String, Value> = TopicConfig::KEYS
            .iter()
            .map(|k| (k.to_string(), Value::Null))
            .collect();
        c.apply(&all_null).unwrap();
        assert_eq!(c, TopicConfig::default());
    }

    #[test]
    fn null_for_unknown_key_is_still_unknown() {
        let err = applied(&[("nope", Value::Null)]).unwrap_err();
        assert_eq!(err.to_string(), "nope: unknown config");
    }

    #[test]
    fn unknown_keys_are_rejected_with_a_hint_for_kafka_spelling() {
        let err = applied(&[("foo", json!(1))]).unwrap_err();
        assert_eq!(err.to_string(), "foo: unknown config");
        let err = applied(&[("retention.ms", json!(1))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "retention.ms: unknown config (did you mean retention_ms?)"
        );
        let err = applied(&[("min_insync_replicas", json!(1))]).unwrap_err();
        assert_eq!(error_keys(&err), ["min_insync_replicas"]);
    }

    #[test]
    fn all_errors_are_reported_at_once_and_nothing_changes() {
        let mut c = TopicConfig::default();
        let before = c.clone();
        let err = c
            .apply(&updates(&[
                ("retention_ms", json!("soon")),
                ("foo", json!(1)),
                ("segment_bytes", json!(10)),
                ("cleanup_policy", json!("compact")), // valid, but must not be applied
            ]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "foo: unknown config; retention_ms: must be an integer >= -1; \
             segment_bytes: must be an integer between 1024 and 2147483647"
        );
        assert_eq!(c, before);
    }

    #[test]
    fn display_matches_documented_format() {
        let err = applied(&[("retention_ms", json!(-5)), ("foo", json!("x"))]).unwrap_err();
        // Keys are visited in sorted order.
        assert_eq!(
            err.to_string(),
            "foo: unknown config; retention_ms: must be an integer >= -1"
        );
        let single = &err.errors[1];
        assert_eq!(single.to_string(), "retention_ms: must be an integer >= -1");
    }

    #[test]
    fn local_retention_ms_must_not_exceed_retention_ms() {
        // -2 follows retention, any value when retention is unlimited.
        assert!(applied(&[("local_retention_ms", json!(-2))]).is_ok());
        assert!(
            applied(&[
                ("retention_ms", json!(-1)),
                ("local_retention_ms", json!(-1))
            ])
            .is_ok()
        );
        assert!(
            applied(&[
                ("retention_ms", json!(-1)),
                ("local_retention_ms", json!(5))
            ])
            .is_ok()
        );
        // Equal and smaller are fine.
        assert!(applied(&[("local_retention_ms", json!(604_800_000))]).is_ok());
        assert!(applied(&[("local_retention_ms", json!(0))]).is_ok());

        let err = applied(&[("local_retention_ms", json!(604_800_001))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "local_retention_ms: must be <= retention_ms (604800000), or -2 to follow retention_ms"
        );
        // Kafka also refuses an unlimited local copy of a bounded log.
        let err = applied(&[("local_retention_ms", json!(-1))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "local_retention_ms: must not be -1 (unlimited) while retention_ms is 604800000; \
             use -2 to follow retention_ms"
        );

        // Lowering retention below an existing local setting is caught too.
        let mut c = applied(&[("local_retention_ms", json!(3_600_000))]).unwrap();
        let err = c
            .apply(&updates(&[("retention_ms", json!(60_000))]))
            .unwrap_err();
        assert_eq!(error_keys(&err), ["local_retention_ms"]);
        assert_eq!(c.retention_ms, 604_800_000);
        // Both changed together in one request.
        c.apply(&updates(&[
            ("retention_ms", json!(60_000)),
            ("local_retention_ms", json!(30_000)),
        ]))
        .unwrap();
        assert_eq!((c.retention_ms, c.local_retention_ms), (60_000, 30_000));
    }

    #[test]
    fn local_retention_bytes_must_not_exceed_retention_bytes() {
        // Default retention_bytes is unlimited: any local value works.
        assert!(applied(&[("local_retention_bytes", json!(1 << 30))]).is_ok());
        assert!(applied(&[("local_retention_bytes", json!(-1))]).is_ok());
        let bounded = ("retention_bytes", json!(1_000_000));
        assert!(applied(&[bounded.clone(), ("local_retention_bytes", json!(1_000_000))]).is_ok());
        assert!(applied(&[bounded.clone(), ("local_retention_bytes", json!(-2))]).is_ok());
        let err =
            applied(&[bounded.clone(), ("local_retention_bytes", json!(1_000_001))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "local_retention_bytes: must be <= retention_bytes (1000000), \
             or -2 to follow retention_bytes"
        );
        let err = applied(&[bounded, ("local_retention_bytes", json!(-1))]).unwrap_err();
        assert_eq!(error_keys(&err), ["local_retention_bytes"]);
    }

    #[test]
    fn cross_field_check_is_skipped_for_a_rejected_key() {
        // retention_ms is invalid; do not also complain that local exceeds the old retention.
        let err = applied(&[
            ("retention_ms", json!("x")),
            ("local_retention_ms", json!(999_999_999_999i64)),
        ])
        .unwrap_err();
        assert_eq!(error_keys(&err), ["retention_ms"]);
    }

    #[test]
    fn tiered_topics_must_use_delete() {
        let err = applied(&[
            ("remote_storage_enable", json!(true)),
            ("cleanup_policy", json!("compact,delete")),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "remote_storage_enable: requires cleanup_policy \"delete\" (is \"compact,delete\"): \
             tiered storage does not support compacted topics"
        );
        assert!(applied(&[("remote_storage_enable", json!("true"))]).is_ok());
    }

    #[test]
    fn cross_field_errors_are_reported_with_per_key_errors() {
        let err = applied(&[("foo", json!(1)), ("local_retention_ms", json!(-1))]).unwrap_err();
        assert_eq!(error_keys(&err), ["foo", "local_retention_ms"]);
    }

    #[test]
    fn min_compaction_lag_above_max_compaction_lag_is_rejected() {
        let err = applied(&[
            ("min_compaction_lag_ms", json!(10_000)),
            ("max_compaction_lag_ms", json!(5_000)),
        ])
        .unwrap_err();
        assert_eq!(error_keys(&err), ["min_compaction_lag_ms"]);
        let ok = applied(&[
            ("min_compaction_lag_ms", json!(5_000)),
            ("max_compaction_lag_ms", json!(5_000)),
        ])
        .unwrap();
        assert_eq!(ok.max_compaction_lag_ms, 5_000);
        assert!(applied(&[("max_compaction_lag_ms", json!(0))]).is_err());
    }

    fn custom() -> TopicConfig {
        TopicConfig {
            retention_ms: 3_600_000,
            retention_bytes: 1 << 40,
            segment_bytes: 1 << 20,
            segment_ms: 60_000,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: 0,
            min_compaction_lag_ms: 5,
            max_compaction_lag_ms: 600_000,
            max_message_bytes: 2_147_483_647,
            message_timestamp_type: MessageTimestampType::LogAppendTime,
            local_retention_ms: 600_000,
            local_retention_bytes: -2,
            remote_storage_enable: true,
            min_cleanable_dirty_ratio: 0.1,
            index_interval_bytes: 0,
            remote_upload_idle_ms: 1_000,
            remote_object_lock_mode: ObjectLockMode::Compliance,
            remote_object_lock_days: 30,
            compression_type: CompressionType::Zstd,
            audit_reads: true,
        }
    }

    #[test]
    fn to_map_then_apply_round_trips() {
        for original in [
            TopicConfig::default(),
            custom(),
            TopicConfig {
                cleanup_policy: CleanupPolicy::CompactDelete,
                ..TopicConfig::default()
            },
        ] {
            let mut c = TopicConfig::default();
            c.apply(&original.to_map()).unwrap();
            assert_eq!(c, original);
        }
    }

    #[test]
    fn string_forms_from_kafka_tools_round_trip() {
        // What `kafka-configs --describe` would print, underscored.
        let stringly: BTreeMap<String, Value> = custom()
            .to_map()
            .into_iter()
            .map(|(k, v)| {
                let s = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, Value::String(s))
            })
            .collect();
        let mut c = TopicConfig::default();
        c.apply(&stringly).unwrap();
        assert_eq!(c, custom());
    }

    #[test]
    fn effective_local_retention_resolves_minus_two() {
        let c = TopicConfig::default();
        assert_eq!(c.effective_local_retention_ms(), 604_800_000);
        assert_eq!(c.effective_local_retention_bytes(), -1);
        let c = custom();
        assert_eq!(c.effective_local_retention_ms(), 600_000);
        assert_eq!(c.effective_local_retention_bytes(), 1 << 40);
    }

    #[test]
    fn serde_round_trip_and_strictness() {
        let c = custom();
        let text = serde_json::to_string(&c).unwrap();
        assert!(text.contains(r#""cleanup_policy":"delete""#), "{text}");
        assert!(
            text.contains(r#""message_timestamp_type":"LogAppendTime""#),
            "{text}"
        );
        let back: TopicConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, c);

        // Missing fields (an older file) take defaults.
        let old: TopicConfig = serde_json::from_str(r#"{"retention_ms": 5}"#).unwrap();
        assert_eq!(
            old,
            TopicConfig {
                retention_ms: 5,
                ..TopicConfig::default()
            }
        );
        // Unknown fields are refused.
        assert!(serde_json::from_str::<TopicConfig>(r#"{"retention_mss": 5}"#).is_err());
        // Both orders of the combined policy load.
        let both: TopicConfig =
            serde_json::from_str(r#"{"cleanup_policy": "delete,compact"}"#).unwrap();
        assert_eq!(both.cleanup_policy, CleanupPolicy::CompactDelete);
    }

    #[test]
    fn validate_catches_what_deserialization_lets_through() {
        let loaded: TopicConfig = serde_json::from_str(
            r#"{"segment_bytes": 14, "min_cleanable_dirty_ratio": 2.0,
                "local_retention_ms": 999999999999}"#,
        )
        .unwrap();
        let err = loaded.validate().unwrap_err();
        assert_eq!(
            error_keys(&err),
            [
                "segment_bytes",
                "min_cleanable_dirty_ratio",
                "local_retention_ms"
            ]
        );
        assert_eq!(custom().validate(), Ok(()));
    }

    #[test]
    fn errors_serialize_for_api_bodies() {
        let err = applied(&[("foo", json!(1))]).unwrap_err();
        assert_eq!(
            serde_json::to_value(&err).unwrap(),
            json!({"errors": [{"key": "foo", "message": "unknown config"}]})
        );
    }

    fn arb_config() -> impl Strategy<Value = TopicConfig> {
        (
            (
                -1i64..=i64::MAX,
                -1i64..=i64::MAX,
                1024i64..=INT_MAX,
                1i64..=i64::MAX,
            ),
            (
                0i64..=i64::MAX,
                0i64..=i64::MAX,
                1i64..=INT_MAX,
                0i64..=INT_MAX,
            ),
            (prop::bool::ANY, prop::bool::ANY, 0.0f64..=1.0),
            (0usize..3, -2i64..=i64::MAX, -2i64..=i64::MAX),
        )
            .prop_map(
                |((rms, rb, sb, sms), (drm, lag, mmb, iib), (lat, remote, ratio), l)| {
                    let (policy, lrms, lrb) = l;
                    let cleanup_policy = [
                        CleanupPolicy::Delete,
                        CleanupPolicy::Compact,
                        CleanupPolicy::CompactDelete,
                    ][policy];
                    let local = |v: i64, total: i64| {
                        if total == -1 || v == -2 {
                            v
                        } else {
                            v.clamp(0, total)
                        }
                    };
                    TopicConfig {
                        retention_ms: rms,
                        retention_bytes: rb,
                        segment_bytes: sb,
                        segment_ms: sms,
                        cleanup_policy: if remote {
                            CleanupPolicy::Delete
                        } else {
                            cleanup_policy
                        },
                        delete_retention_ms: drm,
                        min_compaction_lag_ms: lag,
                        // Never below the min lag, as validation requires.
                        max_compaction_lag_ms: lag.saturating_add(drm).max(1),
                        max_message_bytes: mmb,
                        message_timestamp_type: if lat {
                            MessageTimestampType::LogAppendTime
                        } else {
                            MessageTimestampType::CreateTime
                        },
                        local_retention_ms: local(lrms, rms),
                        local_retention_bytes: local(lrb, rb),
                        remote_storage_enable: remote,
                        min_cleanable_dirty_ratio: ratio,
                        index_interval_bytes: iib,
                        remote_upload_idle_ms: sms,
                        remote_object_lock_mode: if lat {
                            ObjectLockMode::Compliance
                        } else {
                            ObjectLockMode::Governance
                        },
                        remote_object_lock_days: iib % 36_500,
                        compression_type: if lat {
                            CompressionType::Lz4
                        } else {
                            CompressionType::Producer
                        },
                        audit_reads: remote,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn any_valid_config_round_trips(original in arb_config()) {
            prop_assert_eq!(original.validate(), Ok(()));
            let mut c = TopicConfig::default();
            prop_assert_eq!(c.apply(&original.to_map()), Ok(()));
            prop_assert_eq!(&c, &original);
            let back: TopicConfig =
                serde_json::from_str(&serde_json::to_string(&original).unwrap()).unwrap();
            prop_assert_eq!(back, original);
        }

        #[test]
        fn rejected_updates_never_change_the_config(
            key in prop::sample::select(TopicConfig::KEYS.to_vec()),
            garbage in "[a-z]{1,8}",
        ) {
            let mut c = custom();
            let result = c.apply(&updates(&[(key, json!(garbage))]));
            // Only enum keys could accept a lowercase word.
            if result.is_err() {
                prop_assert_eq!(c, custom());
            }
        }
    }
}

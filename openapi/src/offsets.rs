//! Partition offset bodies: `GET /v1/topics/{topic}/partitions/{partition}/offsets`.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// Query parameters of the offsets endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OffsetsQuery {
    /// Look up the first offset whose record timestamp (milliseconds since the Unix epoch) is
    /// at or after this; the answer is then a `TimestampOffset`. Kafka's special values work
    /// too: `-1` the latest offset (the high watermark), `-2` the earliest, `-3` the record with
    /// the largest timestamp (KIP-734). Absent: the answer is `PartitionOffsets`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = -3)]
    #[schema(minimum = -3)]
    pub timestamp: Option<i64>,
}

/// The offset bounds of a partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(
    json!({"earliest": 100, "latest": 1200, "log_end": 1200}),
    json!({"earliest": 0, "latest": 1200, "log_end": 1200, "earliest_local": 900, "latest_tiered": 1000})
))]
pub struct PartitionOffsets {
    /// First offset still readable (log start offset).
    pub earliest: u64,
    /// High watermark: records below it are committed and readable; fetching at it waits for
    /// new records.
    pub latest: u64,
    /// The offset the next appended record will get. Equals `latest` once every appended
    /// record is committed.
    pub log_end: u64,
    /// Tiered topics: first offset held on the local disk; below it reads come from the
    /// bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earliest_local: Option<u64>,
    /// Tiered topics: the offset after the last record uploaded to the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_tiered: Option<u64>,
}

/// The answer to a timestamp lookup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(
    json!({"timestamp": 1735689600000_i64, "offset": 877, "record_timestamp": 1735689600123_i64}),
    json!({"timestamp": 1893456000000_i64, "offset": null, "record_timestamp": null})
))]
pub struct TimestampOffset {
    /// The timestamp that was looked up, as given in the query.
    pub timestamp: i64,
    /// The first offset whose record timestamp is at or after `timestamp` (for `-3`: the
    /// record with the largest timestamp; `-1`/`-2`: the latest/earliest offset); `null` when
    /// no record is that recent.
    #[schema(required = true)]
    pub offset: Option<u64>,
    /// The timestamp of the record found at `offset`; `null` when none was found, and for the
    /// `-1`/`-2` lookups (which name a position, not a record).
    #[serde(default)]
    #[schema(required = true)]
    pub record_timestamp: Option<i64>,
}

/// Response of the offsets endpoint: `PartitionOffsets`, or with `timestamp` a
/// `TimestampOffset`. The two have no required field in common, so a body matches exactly one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum OffsetsResponse {
    /// Without `timestamp`.
    Offsets(PartitionOffsets),
    /// With `timestamp`.
    Timestamp(TimestampOffset),
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn timestamp_offset_serializes_a_missing_offset_as_null() {
        let answer = TimestampOffset {
            timestamp: 5,
            offset: None,
            record_timestamp: None,
        };
        assert_eq!(
            serde_json::to_value(&answer).unwrap(),
            json!({"timestamp": 5, "offset": null, "record_timestamp": null})
        );
    }

    #[test]
    fn partition_offsets_use_the_issue_names() {
        let offsets = PartitionOffsets {
            earliest: 1,
            latest: 2,
            log_end: 3,
            earliest_local: None,
            latest_tiered: None,
        };
        assert_eq!(
            serde_json::to_value(&offsets).unwrap(),
            json!({"earliest": 1, "latest": 2, "log_end": 3})
        );
        let tiered = PartitionOffsets {
            earliest_local: Some(2),
            latest_tiered: Some(2),
            ..offsets
        };
        assert_eq!(
            serde_json::to_value(&tiered).unwrap(),
            json!({"earliest": 1, "latest": 2, "log_end": 3, "earliest_local": 2, "latest_tiered": 2})
        );
    }
}

/// Delete every record below an offset (Kafka's DeleteRecords).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteRecordsRequest {
    /// The new log start offset: records below it are deleted for good. At most the high
    /// watermark.
    pub offset: u64,
}

/// The partition's log start after a delete-records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeleteRecordsResponse {
    /// The first offset still readable.
    pub log_start_offset: u64,
}

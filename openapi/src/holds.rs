//! Legal holds: ranges of a topic's records that retention, delete-records and topic deletion
//! keep until the hold is released.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `POST /v1/topics/{topic}/legal-holds`: an offset range of one partition
/// (`partition` and `start_offset`, optionally `end_offset`) or a time range over every
/// partition (`start_ms`, optionally `end_ms`). An absent end holds everything after the start
/// until the hold is released.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(
    json!({"reason": "case 2026-114: customer 42", "partition": 0, "start_offset": 1200, "end_offset": 1500}),
    json!({"reason": "regulator request R-7", "start_ms": 1764547200000_i64, "end_ms": 1767225600000_i64})
))]
pub struct CreateLegalHoldRequest {
    /// Why the records are held (a case number, a request id); 1 to 1024 bytes.
    pub reason: String,
    /// Partition of an offset range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// First held offset of an offset range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_offset: Option<u64>,
    /// Last held offset (inclusive) of an offset range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_offset: Option<u64>,
    /// Earliest held record timestamp (ms since the epoch) of a time range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ms: Option<i64>,
    /// Latest held record timestamp (inclusive) of a time range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<i64>,
}

/// A legal hold in force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(json!({
    "id": "3", "reason": "case 2026-114: customer 42", "partition": 0,
    "start_offset": 1200, "end_offset": 1500, "created_ms": 1764547200000_i64, "created_by": "legal"
})))]
pub struct LegalHold {
    /// The hold's id within its topic; ids are never reused.
    pub id: String,
    /// Why the records are held.
    pub reason: String,
    /// Partition of an offset range; absent for a time range (every partition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// First held offset of an offset range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_offset: Option<u64>,
    /// Last held offset (inclusive) of an offset range; absent: no end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_offset: Option<u64>,
    /// Earliest held timestamp of a time range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ms: Option<i64>,
    /// Latest held timestamp (inclusive) of a time range; absent: no end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<i64>,
    /// When it was placed (ms since the epoch).
    pub created_ms: i64,
    /// The principal that placed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
}

/// The legal holds in force on a topic, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LegalHoldList {
    /// The holds.
    pub holds: Vec<LegalHold>,
}

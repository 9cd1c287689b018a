//! Consumer groups: membership, reading as a member, committed offsets, reset and lag.
//!
//! Groups are stateless HTTP: every request can go to any server process; positions live in the
//! log (`__consumer_offsets`). A committed offset is the **next** offset to read.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::records::{FetchedRecord, ValueFormat};

/// How the server spreads partitions over a group's members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AssignmentStrategyName {
    /// Contiguous ranges of each topic's partitions (Kafka's RangeAssignor).
    #[default]
    Range,
    /// Partitions dealt out one by one across members.
    RoundRobin,
    /// Balanced, moving as few partitions as possible on a rebalance.
    Sticky,
}

/// Where a member starts without a usable committed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AutoOffsetResetName {
    /// The log start.
    Earliest,
    /// The high watermark: only records produced from now on.
    #[default]
    Latest,
    /// Fail the fetch with `no_valid_offset`, naming the partition.
    None,
}

/// Join a group.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinGroupRequest {
    /// Topics to read (at least one).
    #[schema(min_items = 1)]
    pub topics: Vec<String>,
    /// Evicted after this long without a heartbeat (default 45000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1000, maximum = 1800000)]
    pub session_timeout_ms: Option<u64>,
    /// Evicted after this long without a fetch, even while heartbeating (default 300000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 86400000)]
    pub max_poll_interval_ms: Option<u64>,
    /// Assignment strategy; all members of a group use the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignment_strategy: Option<AssignmentStrategyName>,
    /// Where to start without a usable committed offset (default `latest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_offset_reset: Option<AutoOffsetResetName>,
    /// Static membership: a member rejoining with the same instance id within its session
    /// timeout keeps its partitions without a rebalance (and fences its previous member id).
    /// 1-249 characters of `[A-Za-z0-9._-]`, as Kafka's `group.instance.id`: it starts the
    /// member id, which goes into URL paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = r"^[A-Za-z0-9._-]{1,249}$")]
    pub instance_id: Option<String>,
}

/// A topic partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TopicPartitionRef {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: u32,
}

/// A member's state in its group, answered by join and heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemberAssignment {
    /// The member's id: put it in the path of heartbeat, fetch and leave, and in commits.
    pub member_id: String,
    /// The group's current generation: send it with heartbeats, fetches and commits.
    pub generation: u32,
    /// Partitions the member owns now. Stop processing any partition not listed.
    pub assignment: Vec<TopicPartitionRef>,
    /// True while a rebalance is still moving partitions: heartbeat again soon.
    pub rebalancing: bool,
}

/// A heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    /// The generation the member knows. Sending the current one acknowledges its assignment:
    /// partitions it no longer lists are released to their new owners.
    pub generation: u32,
}

/// Query of a member fetch.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MemberFetchQuery {
    /// The current generation (from join or heartbeat); a stale one gets `stale_generation`.
    pub generation: u32,
    /// Long-poll up to this long when no owned partition has new records.
    pub max_wait_ms: Option<u64>,
    /// Byte budget over all partitions (at least one batch per partition with data).
    pub max_bytes: Option<u64>,
    /// Most records in the answer, at least 1.
    #[serde(default, deserialize_with = "crate::query::at_least_one")]
    #[param(minimum = 1, maximum = 4294967295.0, format = Int64)]
    pub max_records: Option<u32>,
    /// How values are shown.
    #[serde(default)]
    pub value_format: ValueFormat,
    /// Commit the positions the previous fetch returned before reading (at-least-once: a crash
    /// between processing and the next fetch re-reads the last batch).
    #[serde(default)]
    pub commit: bool,
}

/// Query of a group offsets delete: without `topic`, the whole group goes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeleteOffsetsQuery {
    /// Delete only this topic's committed offsets (Kafka's OffsetDelete); the group stays.
    pub topic: Option<String>,
    /// With `topic`: only this partition's.
    #[param(minimum = 0, maximum = 4294967295.0, format = Int64)]
    pub partition: Option<u32>,
}

/// Where a member continues in a partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PartitionPosition {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: u32,
    /// The next offset the member will read (what to commit once the records are processed).
    pub next_offset: u64,
}

/// Records for a group member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemberFetchResponse {
    /// Records from the member's partitions; `partition` says which, and `topic` is in
    /// `positions`.
    pub records: Vec<MemberRecord>,
    /// The member's position in every owned partition after this fetch.
    pub positions: Vec<PartitionPosition>,
    /// The generation this answer belongs to.
    pub generation: u32,
}

/// A record read by a group member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemberRecord {
    /// Topic of the record.
    pub topic: String,
    /// The record.
    #[serde(flatten)]
    pub record: FetchedRecord,
}

/// One offset to commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OffsetCommit {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// The next offset to read (commit 42 = "processed everything up to 41").
    pub offset: u64,
    /// Free text stored with the offset, at most 4096 characters (as Kafka's
    /// `offset.metadata.max.bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 4096)]
    pub metadata: Option<String>,
}

/// Commit offsets for many partitions at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CommitOffsetsRequest {
    /// The committing member; required while the group has members, absent for a group used
    /// without membership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_id: Option<String>,
    /// The member's current generation (required with `member_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u32>,
    /// The offsets.
    pub offsets: Vec<OffsetCommit>,
}

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CommittedOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// The next offset to read.
    pub offset: u64,
    /// Free text stored with it.
    pub metadata: String,
    /// When it was committed (ms since the epoch).
    pub commit_time_ms: i64,
}

/// A group's committed offsets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupOffsets {
    /// Group id.
    pub group: String,
    /// Offsets by topic and partition.
    pub offsets: Vec<CommittedOffset>,
}

/// Move a group's committed offsets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetOffsetsRequest {
    /// Topic whose offsets move.
    pub topic: String,
    /// Partitions (default: all of the topic's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Vec<u32>>,
    /// `earliest`, `latest`, `timestamp` (first offset at or after `value` ms; `-1`, `-2` and
    /// `-3` are Kafka's latest, earliest and largest timestamp, as in the offsets lookup, and
    /// other negative values are refused with 422 `invalid`), `offset` (exactly
    /// `value`) or `shift` (committed offset plus `value`, which may be negative; clamped to the
    /// log).
    pub to: ResetTarget,
    /// Needed by `timestamp`, `offset` and `shift`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// Reset even while the group has live members (they keep their in-memory positions until
    /// their partitions are reassigned).
    #[serde(default)]
    pub force: bool,
}

/// Reset targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResetTarget {
    /// The log start.
    Earliest,
    /// The high watermark.
    Latest,
    /// The first offset whose timestamp is at or after `value`.
    Timestamp,
    /// Exactly `value`.
    Offset,
    /// Committed offset plus `value`.
    Shift,
}

/// Where a group's lag of a partition is counted from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LagBasis {
    /// The committed offset.
    Committed,
    /// No commit, or one below the log start (its records were deleted): a member starts at
    /// the log start (`auto_offset_reset: earliest`, also when no member says).
    Earliest,
    /// No commit, or one below the log start: a member starts at the high watermark
    /// (`auto_offset_reset: latest`).
    Latest,
    /// No usable commit and `auto_offset_reset: none`: a member's fetch fails until offsets
    /// are committed or reset; counted from the log start.
    None,
}

/// Lag of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PartitionLag {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// The committed offset; `null` when the group has committed none for this partition.
    #[schema(required = true)]
    pub committed_offset: Option<u64>,
    /// Where the group reads from next, and so where the lag counts from (see `basis`).
    pub start_offset: u64,
    /// Why `start_offset` is where it is.
    pub basis: LagBasis,
    /// The partition's high watermark.
    pub high_watermark: u64,
    /// Records the group has not consumed yet: high watermark minus `start_offset`.
    pub lag_records: u64,
    /// Age in ms of the record at `start_offset` (how far behind in time the group is); 0 when
    /// caught up. Read like a fetch, so records only in tiered storage count too.
    pub lag_ms: i64,
}

/// A group's lag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupLag {
    /// Group id.
    pub group: String,
    /// Every partition the group has committed to or that a member subscribes to.
    pub partitions: Vec<PartitionLag>,
    /// Sum of `lag_records`.
    pub total_lag_records: u64,
    /// Largest `lag_records`.
    pub max_lag_records: u64,
    /// Largest `lag_ms`.
    pub max_lag_ms: i64,
}

/// A member in a group description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemberInfo {
    /// Member id.
    pub member_id: String,
    /// Static instance id, if any.
    pub instance_id: Option<String>,
    /// Subscribed topics.
    pub topics: Vec<String>,
    /// Partitions it owns now.
    pub assignment: Vec<TopicPartitionRef>,
    /// Partitions the current generation assigns it (owned once their old owners let go).
    pub target_assignment: Vec<TopicPartitionRef>,
    /// The generation it last acknowledged.
    pub acknowledged_generation: u32,
    /// Its session timeout.
    pub session_timeout_ms: u64,
    /// Its max poll interval.
    pub max_poll_interval_ms: u64,
    /// Last heartbeat (ms since the epoch).
    pub last_heartbeat_ms: i64,
    /// Last fetch (ms since the epoch).
    pub last_fetch_ms: i64,
}

/// A member eviction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EvictionInfo {
    /// The evicted member.
    pub member_id: String,
    /// Why: session timeout (no heartbeats) or max poll interval (no fetches).
    pub reason: String,
    /// When (ms since the epoch).
    pub at_ms: i64,
}

/// A group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupDescription {
    /// Group id.
    pub group: String,
    /// `empty`, `rebalancing` or `stable`.
    pub state: String,
    /// Current generation.
    pub generation: u32,
    /// Assignment strategy.
    pub assignment_strategy: AssignmentStrategyName,
    /// Live members.
    pub members: Vec<MemberInfo>,
    /// Recent evictions, newest last.
    pub evictions: Vec<EvictionInfo>,
}

/// A group in the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupSummary {
    /// Group id.
    pub group: String,
    /// `empty`, `rebalancing` or `stable`.
    pub state: String,
    /// Live members.
    pub members: u32,
}

/// All groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupList {
    /// Groups with members or committed offsets.
    pub groups: Vec<GroupSummary>,
}

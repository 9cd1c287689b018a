//! Every route of the API, written once: the router and the `#[utoipa::path]` annotations of
//! the handlers both use these, so the served routes and the documented ones cannot drift.

/// Liveness.
pub const HEALTHZ: &str = "/healthz";
/// Readiness.
pub const READYZ: &str = "/readyz";
/// Prometheus metrics.
pub const METRICS: &str = "/metrics";
/// Topics: create, list.
pub const TOPICS: &str = "/v1/topics";
/// One topic: describe, delete.
pub const TOPIC: &str = "/v1/topics/{topic}";
/// A topic's settings.
pub const TOPIC_CONFIGS: &str = "/v1/topics/{topic}/configs";
/// A topic's partition count.
pub const PARTITIONS: &str = "/v1/topics/{topic}/partitions";
/// Produce to a topic (partition by key).
pub const TOPIC_RECORDS: &str = "/v1/topics/{topic}/records";
/// Produce to and fetch from one partition.
pub const PARTITION_RECORDS: &str = "/v1/topics/{topic}/partitions/{partition}/records";
/// A partition's offsets, or the offset of a timestamp.
pub const PARTITION_OFFSETS: &str = "/v1/topics/{topic}/partitions/{partition}/offsets";
/// Where a partition's segments live.
pub const PARTITION_SEGMENTS: &str = "/v1/topics/{topic}/partitions/{partition}/segments";
/// Delete a partition's records below an offset.
pub const DELETE_RECORDS: &str = "/v1/topics/{topic}/partitions/{partition}/delete-records";
/// A topic's legal holds: place, list.
pub const LEGAL_HOLDS: &str = "/v1/topics/{topic}/legal-holds";
/// One legal hold: read, release.
pub const LEGAL_HOLD: &str = "/v1/topics/{topic}/legal-holds/{id}";
/// Idempotent-producer identities.
pub const PRODUCERS: &str = "/v1/producers";
/// Consumer groups.
pub const GROUPS: &str = "/v1/groups";
/// One group.
pub const GROUP: &str = "/v1/groups/{group}";
/// Join a group.
pub const GROUP_MEMBERS: &str = "/v1/groups/{group}/members";
/// Leave a group.
pub const GROUP_MEMBER: &str = "/v1/groups/{group}/members/{member}";
/// A member's heartbeat.
pub const MEMBER_HEARTBEAT: &str = "/v1/groups/{group}/members/{member}/heartbeat";
/// Read as a member.
pub const MEMBER_RECORDS: &str = "/v1/groups/{group}/members/{member}/records";
/// A group's committed offsets.
pub const GROUP_OFFSETS: &str = "/v1/groups/{group}/offsets";
/// Move a group's committed offsets.
pub const GROUP_OFFSETS_RESET: &str = "/v1/groups/{group}/offsets/reset";
/// A group's lag.
pub const GROUP_LAG: &str = "/v1/groups/{group}/lag";
pub const AUTH_KEYS: &str = "/v1/auth/keys";
pub const AUTH_KEY: &str = "/v1/auth/keys/{id}";
pub const ACLS: &str = "/v1/acls";

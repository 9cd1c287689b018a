//! One audit entry: the JSON value of one record of `__audit_reads` (its key is the audited
//! topic's name, its timestamp the entry's `time_ms`). `FORMAT.md` documents the fields for
//! auditors; readers must ignore fields they do not know, since later versions may add some.

use serde::{Deserialize, Serialize};

/// Whether the records were sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadOutcome {
    /// The records were sent (the entry was durable first).
    Served,
    /// The caller was refused the read: nothing was sent.
    Denied,
}

/// The endpoint and representation the read used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadFormat {
    /// `GET .../records` as JSON.
    Json,
    /// `GET .../records` as NDJSON.
    Ndjson,
    /// `GET .../records` as a Server-Sent Events stream: one entry per `records` event.
    Sse,
    /// `GET .../records` as the stored Kafka RecordBatch bytes.
    RecordBatches,
    /// A consumer-group member's read (`GET /v1/groups/{g}/records`), JSON.
    GroupJson,
    /// A consumer-group member's stream: one entry per partition of each `records` event.
    GroupSse,
}

/// One read of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadAuditEntry {
    /// When the read was answered (or refused), ms since the epoch.
    pub time_ms: i64,
    /// Served or denied.
    pub outcome: ReadOutcome,
    /// The authenticated principal (`anonymous` when authentication is off).
    pub principal: String,
    /// The client's IP address and port, as the server's socket saw it (a proxy's address when
    /// one is in front).
    pub client_address: Option<String>,
    /// The audited topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
    /// First offset sent (served reads with records).
    pub first_offset: Option<u64>,
    /// Last offset sent, inclusive.
    pub last_offset: Option<u64>,
    /// Records sent. Record-batch reads send whole stored batches, so this may count records
    /// before the requested offset, as the bytes did hold them.
    pub records: u64,
    /// The request's `x-request-id` (the client's, or the one the server gave it).
    pub request_id: String,
    /// How the records were read.
    pub format: ReadFormat,
    /// The consumer group of a group read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

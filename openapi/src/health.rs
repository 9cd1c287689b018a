//! Liveness and readiness bodies: `GET /healthz` and `GET /readyz`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Response of `GET /healthz`: the process is up and serving HTTP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(json!({"status": "ok", "io_backend": "io_uring"})))]
pub struct Health {
    /// `ok` while the process serves requests.
    pub status: String,
    /// The storage I/O backend in use, such as `io_uring`, or `sync` where io_uring is
    /// unavailable.
    pub io_backend: String,
}

/// Response of `GET /readyz`: whether the server accepts produce and fetch requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(examples(
    json!({"ready": true, "status": "ready"}),
    json!({"ready": false, "status": "recovering", "reason": "recovering partitions: opening topics"}),
    json!({"ready": false, "status": "disk_full", "reason": "the data disk is full: appends fail until space is freed"})
))]
pub struct Readiness {
    /// True once recovery has finished, while the data disk has room, and until shutdown
    /// begins; the status code is 200 when true and 503 when false.
    pub ready: bool,
    /// The state in one word: `ready`, `recovering`, `restoring`, `disk_full` or
    /// `shutting_down`.
    pub status: String,
    /// What is going on, for people, when not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

//! The Server-Sent Events contract of the streaming endpoints (`Accept: text/event-stream` on a
//! partition fetch or a group member's records).
//!
//! Every event's `data` is one JSON document. Event names:
//!
//! | event          | data                    | id                 | meaning |
//! |----------------|-------------------------|--------------------|---------|
//! | `records`      | `FetchResponse` (partition) or `MemberFetchResponse` (member) | the resume position | records, oldest first |
//! | `ping`         | `StreamPing` (`{}`)     | none               | sent while idle so proxies keep the connection |
//! | `server_error` | `ErrorBody`             | none               | the stream failed and ends; `retryable` says whether reconnecting can help |
//! | `end`          | `StreamEnd`             | none               | the server ended the stream on purpose (`reason`) |
//! | `rebalance`    | `ErrorBody`             | none               | member streams: the generation moved on; join or heartbeat, then open a new stream |
//!
//! The first message of every stream carries `retry: <ms>`, the delay a browser's EventSource
//! waits before reconnecting. A partition stream's `records` ids are the next offset to read,
//! so the `Last-Event-ID` of a reconnect resumes exactly after the last event received. Server
//! errors are not named `error`, because browsers give that name to their own connection
//! failures.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Data of an SSE `ping` event: an empty object. Pings carry data so that browsers dispatch
/// them (an event without a `data:` line is dropped) and a page can tell the stream is alive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamPing {}

/// Why the server ended a stream on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StreamEndReason {
    /// The topic was deleted. A topic created later under the same name is another topic: the
    /// stream never continues into it, and a reconnect gets 404 or 416.
    TopicDeleted,
    /// The server is shutting down; reconnect (with `Last-Event-ID`) to resume.
    ShuttingDown,
}

/// Data of an SSE `end` event: the last event of a stream the server ended on purpose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamEnd {
    /// Why the stream ended.
    pub reason: StreamEndReason,
    /// Human-readable explanation.
    pub message: String,
}

/// The `data` of one event of a partition stream (`GET .../partitions/{p}/records` with
/// `Accept: text/event-stream`), by event name: `records` a `FetchResponse` (id: the next
/// offset, so `Last-Event-ID` resumes after it); `ping` a `StreamPing`; `end` a `StreamEnd`
/// (the stream then closes); `server_error` an `ErrorBody` (the stream then closes; reconnect
/// only if `retryable`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum PartitionStreamData {
    /// `records`.
    Records(crate::FetchResponse),
    /// `end`.
    End(StreamEnd),
    /// `server_error`.
    ServerError(crate::ErrorBody),
    /// `ping`.
    Ping(StreamPing),
}

/// The `data` of one event of a group member's stream (`GET .../members/{m}/records` with
/// `Accept: text/event-stream`), by event name: `records` a `MemberFetchResponse` (id: the
/// positions after it, `topic:partition:offset,...`; a reconnect with that `Last-Event-ID` in the
/// same generation reads on exactly from there); `ping` a `StreamPing`; `rebalance` an
/// `ErrorBody` (the generation moved on: heartbeat or join, then open a new stream with the new
/// generation; a reconnect with the old one gets 409); `end` a `StreamEnd`; `server_error` an
/// `ErrorBody`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum MemberStreamData {
    /// `records`.
    Records(crate::MemberFetchResponse),
    /// `end`.
    End(StreamEnd),
    /// `rebalance` and `server_error`.
    Error(crate::ErrorBody),
    /// `ping`.
    Ping(StreamPing),
}

//! Consumer groups over stateless HTTP: join/heartbeat/leave, reading as a member (JSON or SSE),
//! committing, resetting and deleting offsets, lag, and group descriptions.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use strata_openapi::{
    AssignmentStrategyName, AutoOffsetResetName, CommitOffsetsRequest, CommittedOffset,
    DeleteOffsetsQuery, ErrorBody, ErrorCode, EvictionInfo, GroupDescription, GroupLag, GroupList,
    GroupOffsets, GroupSummary, HeartbeatRequest, JoinGroupRequest, LagBasis, MemberAssignment,
    MemberFetchQuery, MemberFetchResponse, MemberInfo, MemberRecord, PartitionLag,
    PartitionPosition, ResetOffsetsRequest, ResetTarget, StreamEndReason, TopicPartitionRef,
};

use super::AppState;
use super::accept::{Accepted, Offers};
use super::codec::to_fetched_record;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::paths;
use crate::audit::entry::ReadFormat;
use crate::broker::audit::ReadOrigin;
use crate::broker::groups::{
    CommitRequest, LagBasis as Basis, MemberReadBounds, MemberRecords, ResetRequest, ResetTo,
};
use crate::groups::assignment::{AssignmentStrategy, TopicPartition};
use crate::groups::coordinator::{AutoOffsetReset, JoinRequest, MemberView};
use crate::groups::offsets::Commit;
use crate::security::Caller;

fn refs(partitions: &[TopicPartition]) -> Vec<TopicPartitionRef> {
    partitions
        .iter()
        .map(|(topic, partition)| TopicPartitionRef {
            topic: topic.clone(),
            partition: *partition,
        })
        .collect()
}

fn member_assignment(view: MemberView) -> MemberAssignment {
    MemberAssignment {
        member_id: view.member_id,
        generation: view.generation,
        assignment: refs(&view.assignment),
        rebalancing: view.rebalancing,
    }
}

/// Join a group (or rejoin with a static `instance_id`).
///
/// Starts a rebalance: the answer holds the new generation and the partitions this member owns
/// right away (partitions still held by other members follow once they acknowledge, so
/// heartbeat while `rebalancing` is true).
///
/// Needs `read` on the group and on every topic subscribed to.
#[utoipa::path(post, path = paths::GROUP_MEMBERS, tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$")),
    request_body = JoinGroupRequest,
    responses(
        (status = 200, description = "Joined", body = MemberAssignment),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 404, description = "A topic does not exist", body = ErrorBody),
        (status = 409, description = "Strategy differs from the group's, or an internal topic (`internal_topic`)", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "Invalid timeouts, group id or topics", body = ErrorBody),
    ))]
pub async fn join(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(group): ApiPath<String>,
    ApiJson(request): ApiJson<JoinGroupRequest>,
) -> Result<Json<MemberAssignment>, ApiError> {
    let join = JoinRequest {
        topics: request.topics,
        session_timeout_ms: request.session_timeout_ms,
        max_poll_interval_ms: request.max_poll_interval_ms,
        strategy: request.assignment_strategy.map(|s| match s {
            AssignmentStrategyName::Range => AssignmentStrategy::Range,
            AssignmentStrategyName::RoundRobin => AssignmentStrategy::RoundRobin,
            AssignmentStrategyName::Sticky => AssignmentStrategy::Sticky,
        }),
        auto_offset_reset: match request.auto_offset_reset.unwrap_or_default() {
            AutoOffsetResetName::Earliest => AutoOffsetReset::Earliest,
            AutoOffsetResetName::Latest => AutoOffsetReset::Latest,
            AutoOffsetResetName::None => AutoOffsetReset::None,
        },
        instance_id: request.instance_id,
    };
    Ok(Json(member_assignment(
        state.broker.join_group(&caller, &group, &join).await?,
    )))
}

/// Heartbeat: stay in the group and learn the current generation and assignment.
///
/// Sending the current generation acknowledges it, which releases partitions this member no
/// longer owns to their new owners.
///
/// Needs `read` on the group.
#[utoipa::path(post, path = paths::MEMBER_HEARTBEAT, tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$"), ("member" = String, Path, description = "Member id")),
    request_body = HeartbeatRequest,
    responses(
        (status = 200, description = "Current generation and assignment", body = MemberAssignment),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 409, description = "Unknown member (`unknown_member`): join again", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "A generation the group never had", body = ErrorBody),
    ))]
pub async fn heartbeat(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((group, member)): ApiPath<(String, String)>,
    ApiJson(request): ApiJson<HeartbeatRequest>,
) -> Result<Json<MemberAssignment>, ApiError> {
    let view = state
        .broker
        .heartbeat(&caller, &group, &member, request.generation)?;
    Ok(Json(member_assignment(view)))
}

/// Leave the group now (its partitions move without waiting for the session timeout).
///
/// Needs `read` on the group.
#[utoipa::path(delete, path = paths::GROUP_MEMBER, tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$"), ("member" = String, Path, description = "Member id")),
    responses(
        (status = 204, description = "Left"),
        (status = 409, description = "Unknown member", body = ErrorBody),
    ))]
pub async fn leave(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((group, member)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    state.broker.leave_group(&caller, &group, &member)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Read records from the member's partitions.
///
/// Each partition starts at the member's position: after the previous fetch, or initially the
/// committed offset, or `auto_offset_reset` when there is none (or retention deleted it). Nothing
/// is committed implicitly; `commit=true` commits what the previous fetch returned before
/// reading (at-least-once). With `Accept: text/event-stream` the records stream as SSE `records`
/// events (see `MemberStreamData`) until a rebalance takes partitions away, which ends the stream
/// with a `rebalance` event. Each `records` event's `id` holds the positions after it, so a
/// reconnect with `Last-Event-ID` in the same generation reads on exactly where the client got
/// to. Browser flow after `rebalance`: close the EventSource (its reconnect would carry the old
/// generation and get 409), heartbeat until `rebalancing` is false, then open a new EventSource
/// with the new generation.
///
/// Needs `read` on the group and on every assigned topic.
#[utoipa::path(get, path = paths::MEMBER_RECORDS, tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$"), ("member" = String, Path, description = "Member id"), MemberFetchQuery),
    responses(
        (status = 200, description = "Records and positions", content(
            (MemberFetchResponse = "application/json"),
            (strata_openapi::MemberStreamData = "text/event-stream"))),
        (status = 400, description = "Bad query, or a `Last-Event-ID` that is not an id of this stream (`bad_header`)", body = ErrorBody),
        (status = 406, description = "Unsupported Accept: `application/json` or `text/event-stream` (`not_acceptable`)", body = ErrorBody),
        (status = 409, description = "Unknown member, stale generation, or no valid offset with auto_offset_reset=none", body = ErrorBody),
        (status = 416, description = "A `Last-Event-ID` position is outside its partition's log (`offset_out_of_range`); the body holds the valid range", body = ErrorBody),
        (status = 422, description = "A generation newer than the group's (`invalid`)", body = ErrorBody),
    ))]
pub async fn member_fetch(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((group, member)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<MemberFetchQuery>,
    Accepted(format): Accepted<MemberFormat>,
    origin: ReadOrigin,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let sse = format == MemberFormat::Sse;
    // Check membership and generation before answering, also for SSE.
    let grant = state
        .broker
        .poll_member(&caller, &group, &member, query.generation)?;
    if query.commit {
        state
            .broker
            .commit_member_positions(&group, &member)
            .await?;
    }
    if sse {
        // A reconnecting EventSource sends the id of the last event it received: the positions
        // after those records. Records sent after it never arrived, so read them again.
        if let Some(resume) = last_event_id(&headers)? {
            let positions = decode_positions(&resume).ok_or_else(|| {
                ApiError::new(
                    ErrorCode::BadHeader,
                    "Last-Event-ID must be an id of this stream (topic:partition:offset,...)",
                )
            })?;
            state
                .broker
                .resume_member(&caller, (&group, &member), &grant, &positions)
                .await?;
        }
        let slot = state.broker.open_stream(&caller)?;
        let stream = member_stream(state, caller, origin, (group, member), query, slot);
        return Ok(stream.into_response());
    }
    let mut bounds = member_bounds(&state, &query, None);
    bounds.max_bytes = state.broker.admit_fetch(&caller, bounds.max_bytes)?;
    // A member read long-polls: it counts against the principal's open streams while it waits.
    let slot = state.broker.open_stream(&caller)?;
    let read = state
        .broker
        .read_for_member(
            &caller,
            (&group, &member),
            grant,
            bounds,
            (&origin, ReadFormat::GroupJson),
        )
        .await?;
    drop(slot);
    let response = member_response(read, &query);
    let bytes = response
        .records
        .iter()
        .map(|r| json_payload_bytes(&r.record))
        .sum();
    let records = response.records.len() as u64;
    state.http_stats.fetched("member", records, bytes);
    Ok(Json(response).into_response())
}

/// Key and value bytes of a record in the API's shape (as answered: base64 or text).
fn json_payload_bytes(record: &strata_openapi::FetchedRecord) -> u64 {
    let key = record
        .key
        .as_ref()
        .or(record.key_base64.as_ref())
        .map_or(0, String::len);
    // A string's text without its quotes (escapes counted as written).
    let value = record.value.as_ref().map_or(0, |value| {
        let text = value.get();
        match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
            Some(inner) => inner.len(),
            None if text == "null" => 0,
            None => text.len(),
        }
    });
    (key + value) as u64
}

/// What a member read can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberFormat {
    Json,
    Sse,
}

impl Offers for MemberFormat {
    const OFFERS: &'static [(&'static str, MemberFormat)] = &[
        ("application/json", MemberFormat::Json),
        ("text/event-stream", MemberFormat::Sse),
    ];
}

/// The budgets of a member read; `wait` overrides the query's (streams poll in steps).
fn member_bounds(
    state: &AppState,
    query: &MemberFetchQuery,
    wait: Option<Duration>,
) -> MemberReadBounds {
    let bounds = state
        .broker
        .fetch_bounds(query.max_bytes, query.max_records, query.max_wait_ms);
    MemberReadBounds {
        max_bytes: bounds.max_bytes,
        max_records: bounds.max_records,
        wait: wait.unwrap_or(bounds.wait),
    }
}

/// A member read in the API's shape.
fn member_response(read: MemberRecords, query: &MemberFetchQuery) -> MemberFetchResponse {
    MemberFetchResponse {
        records: read
            .records
            .iter()
            .flat_map(|((topic, partition), records)| {
                records.iter().map(|record| MemberRecord {
                    topic: topic.clone(),
                    record: to_fetched_record(*partition, record, query.value_format),
                })
            })
            .collect(),
        positions: read
            .positions
            .into_iter()
            .map(|((topic, partition), next_offset)| PartitionPosition {
                topic,
                partition,
                next_offset,
            })
            .collect(),
        generation: query.generation,
    }
}

/// The `Last-Event-ID` header, if any.
fn last_event_id(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .map(|s| s.trim().to_string())
                .map_err(|_| ApiError::new(ErrorCode::BadHeader, "Last-Event-ID is not text"))
        })
        .transpose()
}

/// A member stream's event id: the positions after the event's records,
/// `topic:partition:offset` joined by commas (topic names never hold `:` or `,`).
fn encode_positions(positions: &[PartitionPosition]) -> String {
    positions
        .iter()
        .map(|p| format!("{}:{}:{}", p.topic, p.partition, p.next_offset))
        .collect::<Vec<_>>()
        .join(",")
}

fn decode_positions(id: &str) -> Option<BTreeMap<TopicPartition, u64>> {
    let mut positions = BTreeMap::new();
    for item in id.split(',').filter(|item| !item.is_empty()) {
        let mut parts = item.rsplitn(3, ':');
        let offset = parts.next()?.parse().ok()?;
        let partition = parts.next()?.parse().ok()?;
        let topic = parts.next()?.to_string();
        positions.insert((topic, partition), offset);
    }
    Some(positions)
}

/// SSE: polls in a loop (each poll keeps the member alive) and ends with a `rebalance` event when
/// the generation moves on. Each `records` event's id holds the positions after it, so a
/// reconnect with `Last-Event-ID` in the same generation resumes exactly.
fn member_stream(
    state: AppState,
    caller: Caller,
    origin: ReadOrigin,
    (group, member): (String, String),
    query: MemberFetchQuery,
    slot: crate::security::streams::StreamSlot,
) -> impl IntoResponse {
    let ping = Duration::from_millis(state.config.sse_ping_interval_ms);
    let stream = async_stream::stream! {
        // Held while the stream lives: it counts against the principal's open streams.
        let _slot = slot;
        yield Ok::<_, Infallible>(super::sse::retry_event());
        loop {
            if *state.shutdown.borrow() {
                if let Some(event) = super::sse::end_event(StreamEndReason::ShuttingDown,
                    "the server is shutting down; reconnect to resume") {
                    yield Ok(event);
                }
                break;
            }
            // A revoked key ends the stream; a denied topic is refused by the read below.
            if !state.broker.still_authenticated(&caller) {
                if let Some(event) = super::sse::error_event(&super::auth::unauthenticated()) {
                    yield Ok(event);
                }
                break;
            }
            let grant = match state.broker.poll_member(&caller, &group, &member, query.generation) {
                Ok(grant) => grant,
                Err(error) => {
                    let message = error.to_string();
                    let body = ErrorBody::new(ApiError::from(error).code(), message);
                    if let Some(event) = super::sse::error_body_event("rebalance", &body) {
                        yield Ok(event);
                    }
                    break;
                }
            };
            let mut bounds = member_bounds(&state, &query, Some(Duration::from_millis(1000)));
            match state.broker.admit_fetch(&caller, bounds.max_bytes) {
                Ok(allowed) => bounds.max_bytes = allowed,
                // Over the fetch quota: the stream waits instead of failing.
                Err(over) => {
                    wait_for_quota(over.retry_after).await;
                    continue;
                }
            }
            let read = state.broker.read_for_member(
                &caller,
                (&group, &member),
                grant,
                bounds,
                (&origin, ReadFormat::GroupSse),
            );
            match read.await {
                Ok(read) if read.records.is_empty() => {
                    // Hand the thread back before the next poll: a read that answers at once
                    // with nothing must not keep this stream from noticing its client left,
                    // or the runtime's other tasks from running.
                    tokio::task::yield_now().await;
                    continue;
                }
                Ok(read) => {
                    let response = member_response(read, &query);
                    let event = Event::default()
                        .event(super::sse::RECORDS)
                        .id(encode_positions(&response.positions))
                        .json_data(&response);
                    if let Ok(event) = event {
                        yield Ok(event);
                    }
                }
                Err(error) => {
                    if let Some(event) = super::sse::error_event(&ApiError::from(error)) {
                        yield Ok(event);
                    }
                    break;
                }
            }
        }
    };
    super::sse::with_pings(stream, ping)
}

/// Commit offsets (the next offsets to read) for many partitions at once.
///
/// While the group has members, a commit must come from a current member (`member_id` and
/// `generation`) that owns every partition in it; a zombie's commit gets 409 and changes nothing.
/// Acknowledged after the commit is durable.
///
/// Needs `read` on the group and on every topic committed to.
#[utoipa::path(post, path = paths::GROUP_OFFSETS, tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$")),
    request_body = CommitOffsetsRequest,
    responses(
        (status = 200, description = "Committed; the group's offsets", body = GroupOffsets),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 404, description = "Unknown topic or partition", body = ErrorBody),
        (status = 409, description = "Fenced: unknown member, stale generation, or partition not owned; or an internal topic", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 416, description = "An offset past the partition's high watermark (`offset_out_of_range`)", body = ErrorBody),
        (status = 422, description = "Invalid request, or a generation newer than the group's (`invalid`)", body = ErrorBody),
    ))]
pub async fn commit(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(group): ApiPath<String>,
    ApiJson(request): ApiJson<CommitOffsetsRequest>,
) -> Result<Json<GroupOffsets>, ApiError> {
    let member = match (request.member_id, request.generation) {
        (Some(member), Some(generation)) => Some((member, generation)),
        (None, None) => None,
        _ => {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                "member_id and generation go together",
            ));
        }
    };
    let commits = request
        .offsets
        .into_iter()
        .map(|o| Commit {
            topic: o.topic,
            partition: o.partition,
            offset: o.offset,
            metadata: o.metadata.unwrap_or_default(),
        })
        .collect();
    let request = CommitRequest { member, commits };
    let offsets = state
        .broker
        .commit_offsets(&caller, &group, &request)
        .await?;
    Ok(Json(group_offsets(group, offsets)))
}

fn group_offsets(group: String, offsets: crate::groups::offsets::GroupOffsets) -> GroupOffsets {
    let offsets = offsets
        .into_iter()
        .map(|((topic, partition), committed)| CommittedOffset {
            topic,
            partition,
            offset: committed.offset,
            metadata: committed.metadata,
            commit_time_ms: committed.commit_time_ms,
        })
        .collect();
    GroupOffsets { group, offsets }
}

/// A group's committed offsets.
///
/// Needs `describe` on the group.
#[utoipa::path(get, path = paths::GROUP_OFFSETS, tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$")),
    responses(
        (status = 200, description = "Committed offsets", body = GroupOffsets),
        (status = 404, description = "No such group", body = ErrorBody),
    ))]
pub async fn get_offsets(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<GroupOffsets>, ApiError> {
    let offsets = state.broker.group_offsets(&caller, &group)?;
    Ok(Json(group_offsets(group, offsets)))
}

/// Delete a group that has no live members: every committed offset, and the group itself
/// (as Kafka's DeleteGroups). Afterwards the group is not listed and describing it answers
/// 404, until a member joins or an offset is committed again.
///
/// With `topic` (and optionally `partition`), only those committed offsets go, as Kafka's
/// OffsetDelete; that is refused while a live member reads the topic.
///
/// Needs `delete` on the group (and `read` on the topic with `topic`).
#[utoipa::path(delete, path = paths::GROUP_OFFSETS, tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$"), DeleteOffsetsQuery),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Unknown query parameters, or a `partition` that is not a non-negative integer (`bad_query`)", body = ErrorBody),
        (status = 404, description = "No such group, topic or partition", body = ErrorBody),
        (status = 409, description = "The group has live members (reading the topic, with `topic`), or an internal topic", body = ErrorBody),
        (status = 422, description = "`partition` without `topic`, or an empty `topic` (`invalid`)", body = ErrorBody),
    ))]
pub async fn delete_offsets(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(group): ApiPath<String>,
    ApiQuery(query): ApiQuery<DeleteOffsetsQuery>,
) -> Result<StatusCode, ApiError> {
    match (query.topic, query.partition) {
        (Some(topic), _) if topic.is_empty() => {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                "topic is empty: name the topic whose committed offsets go",
            ));
        }
        (Some(topic), partition) => {
            state
                .broker
                .delete_topic_offsets(&caller, &group, &topic, partition)
                .await?;
        }
        (None, Some(_)) => {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                "partition needs topic: give both to delete one partition's committed offset",
            ));
        }
        (None, None) => state.broker.delete_group_offsets(&caller, &group).await?,
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Move a group's committed offsets: to the earliest or latest offset, a timestamp, an exact
/// offset, or shifted by N. Only while the group has no live members, unless `force`.
///
/// Needs `read` on the group and on the topic.
#[utoipa::path(post, path = paths::GROUP_OFFSETS_RESET, tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$")),
    request_body = ResetOffsetsRequest,
    responses(
        (status = 200, description = "The group's offsets after the reset", body = GroupOffsets),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 404, description = "No such topic or partition", body = ErrorBody),
        (status = 409, description = "The group has live members (use force), or an internal topic", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 416, description = "An explicit offset outside the log", body = ErrorBody),
        (status = 422, description = "Missing value", body = ErrorBody),
    ))]
pub async fn reset_offsets(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(group): ApiPath<String>,
    ApiJson(request): ApiJson<ResetOffsetsRequest>,
) -> Result<Json<GroupOffsets>, ApiError> {
    let to = match (request.to, request.value) {
        (ResetTarget::Earliest, _) => Some(ResetTo::Earliest),
        (ResetTarget::Latest, _) => Some(ResetTo::Latest),
        (ResetTarget::Timestamp, value) => value.map(ResetTo::Timestamp),
        (ResetTarget::Offset, value) => value.map(ResetTo::Offset),
        (ResetTarget::Shift, value) => value.map(ResetTo::Shift),
    };
    let reset = ResetRequest {
        topic: request.topic,
        partitions: request.partitions,
        to,
        force: request.force,
    };
    let offsets = state
        .broker
        .reset_group_offsets(&caller, &group, &reset)
        .await?;
    Ok(Json(group_offsets(group, offsets)))
}

/// Lag of every partition the group committed to or subscribes to, in records and in time,
/// with a summary.
///
/// A partition without a commit counts from where a member would start reading (its
/// `auto_offset_reset`); `basis` says which. Ages are read like fetches, so a committed offset
/// that only tiered storage still holds has a real age too.
///
/// Needs `describe` on the group; partitions of topics the caller may not describe are left out.
#[utoipa::path(get, path = paths::GROUP_LAG, tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$")),
    responses(
        (status = 200, description = "Lag", body = GroupLag),
        (status = 404, description = "No such group", body = ErrorBody),
        (status = 503, description = "Storage unavailable", body = ErrorBody),
    ))]
pub async fn lag(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<GroupLag>, ApiError> {
    let partitions: Vec<PartitionLag> = state
        .broker
        .group_lag(&caller, &group)
        .await?
        .into_iter()
        .map(|lag| PartitionLag {
            topic: lag.partition.0,
            partition: lag.partition.1,
            committed_offset: lag.committed_offset,
            start_offset: lag.start_offset,
            basis: match lag.basis {
                Basis::Committed => LagBasis::Committed,
                Basis::Earliest => LagBasis::Earliest,
                Basis::Latest => LagBasis::Latest,
                Basis::None => LagBasis::None,
            },
            high_watermark: lag.high_watermark,
            lag_records: lag.lag_records,
            lag_ms: lag.lag_ms,
        })
        .collect();
    Ok(Json(GroupLag {
        group,
        total_lag_records: partitions.iter().map(|p| p.lag_records).sum(),
        max_lag_records: partitions.iter().map(|p| p.lag_records).max().unwrap_or(0),
        max_lag_ms: partitions.iter().map(|p| p.lag_ms).max().unwrap_or(0),
        partitions,
    }))
}

/// All groups (with members or committed offsets).
///
/// Needs nothing: lists only the groups the caller may describe.
#[utoipa::path(get, path = paths::GROUPS, tag = "groups",
    responses(
        (status = 200, description = "Groups", body = GroupList),
        (status = 400, description = "Query parameters given (`bad_query`): this endpoint takes none", body = ErrorBody),
    ))]
pub async fn list_groups(State(state): State<AppState>, caller: Caller) -> Json<GroupList> {
    let groups = state
        .broker
        .list_groups(&caller)
        .into_iter()
        .map(|listing| GroupSummary {
            state: listing
                .description
                .as_ref()
                .map_or("empty", |d| d.state)
                .to_string(),
            members: listing
                .description
                .map_or(0, |d| u32::try_from(d.members.len()).unwrap_or(u32::MAX)),
            group: listing.group,
        })
        .collect();
    Json(GroupList { groups })
}

/// Describe a group: state, generation, members with their assignments, recent evictions.
///
/// Needs `describe` on the group.
#[utoipa::path(get, path = paths::GROUP, tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$")),
    responses(
        (status = 200, description = "The group", body = GroupDescription),
        (status = 404, description = "No such group", body = ErrorBody),
    ))]
pub async fn describe_group(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<GroupDescription>, ApiError> {
    let Some(description) = state.broker.describe_group(&caller, &group)? else {
        return Ok(Json(GroupDescription {
            group,
            state: "empty".into(),
            generation: 0,
            assignment_strategy: AssignmentStrategyName::Range,
            members: Vec::new(),
            evictions: Vec::new(),
        }));
    };
    Ok(Json(GroupDescription {
        group,
        state: description.state.to_string(),
        generation: description.generation,
        assignment_strategy: match description.strategy {
            AssignmentStrategy::Range => AssignmentStrategyName::Range,
            AssignmentStrategy::RoundRobin => AssignmentStrategyName::RoundRobin,
            AssignmentStrategy::Sticky => AssignmentStrategyName::Sticky,
        },
        members: description
            .members
            .into_iter()
            .map(|m| MemberInfo {
                member_id: m.member_id,
                instance_id: m.instance_id,
                topics: m.topics,
                assignment: refs(&m.assignment),
                target_assignment: refs(&m.target),
                acknowledged_generation: m.acknowledged_generation,
                session_timeout_ms: m.session_timeout_ms,
                max_poll_interval_ms: m.max_poll_interval_ms,
                last_heartbeat_ms: m.last_heartbeat_ms,
                last_fetch_ms: m.last_poll_ms,
            })
            .collect(),
        evictions: description
            .evictions
            .into_iter()
            .map(|e| EvictionInfo {
                member_id: e.member_id,
                reason: e.reason,
                at_ms: e.at_ms,
            })
            .collect(),
    }))
}

/// A member stream over its fetch quota waits until the quota allows its next read.
// A timer the runtime controls, not a clock reading: the quota says how long.
#[allow(clippy::disallowed_methods)]
async fn wait_for_quota(wait: Duration) {
    tokio::time::sleep(wait).await;
}

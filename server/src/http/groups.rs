//! Consumer groups over stateless HTTP: join/heartbeat/leave, reading as a member (JSON or SSE),
//! committing, resetting and deleting offsets, lag, and group descriptions.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use strata_openapi::{
    AssignmentStrategyName, AutoOffsetResetName, CommitOffsetsRequest, CommittedOffset, ErrorBody,
    ErrorCode, EvictionInfo, GroupDescription, GroupLag, GroupList, GroupOffsets, GroupSummary,
    HeartbeatRequest, JoinGroupRequest, LagBasis, MemberAssignment, MemberFetchQuery,
    MemberFetchResponse, MemberInfo, MemberRecord, PartitionLag, PartitionPosition,
    ResetOffsetsRequest, ResetTarget, StreamEndReason, TopicPartitionRef,
};

use super::AppState;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::fetch::{FetchRequest, read_records};
use crate::groups::assignment::{AssignmentStrategy, TopicPartition};
use crate::groups::coordinator::{AutoOffsetReset, GroupError, JoinRequest, MemberView, PollGrant};
use crate::groups::offsets::{Commit, OffsetStoreError};
use crate::log::LogOffsets;
use crate::tiering::tiered_log::TieredLog;

impl From<GroupError> for ApiError {
    fn from(error: GroupError) -> Self {
        let code = match &error {
            GroupError::UnknownMember { .. } => ErrorCode::UnknownMember,
            GroupError::StaleGeneration { .. } => ErrorCode::StaleGeneration,
            GroupError::NotAssigned { .. } => ErrorCode::PartitionNotAssigned,
            GroupError::GroupHasMembers(_) | GroupError::InconsistentStrategy { .. } => {
                ErrorCode::Conflict
            }
            GroupError::Invalid(_) => ErrorCode::Invalid,
        };
        ApiError::new(code, error.to_string())
    }
}

impl From<OffsetStoreError> for ApiError {
    fn from(error: OffsetStoreError) -> Self {
        match error {
            OffsetStoreError::Append(error) => error.into(),
            OffsetStoreError::Read(error) => error.into(),
            error @ OffsetStoreError::Corrupt { .. } => {
                ApiError::internal(ErrorCode::Corrupt, &error)
            }
        }
    }
}

fn validate_group_id(group: &str) -> Result<(), ApiError> {
    let valid = !group.is_empty()
        && group.len() <= 255
        && group
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::Invalid,
            "group ids are 1-255 characters of [A-Za-z0-9._-]",
        ))
    }
}

/// Partition counts of `topics`; 404 for a topic that does not exist.
fn counts(state: &AppState, topics: &BTreeSet<String>) -> Result<BTreeMap<String, u32>, ApiError> {
    topics
        .iter()
        .map(|t| Ok((t.clone(), state.topic(t)?.partition_count())))
        .collect()
}

/// Partition counts of the topics that still exist (a deleted topic just stops being assigned).
pub fn existing_counts(state: &AppState, topics: &BTreeSet<String>) -> BTreeMap<String, u32> {
    topics
        .iter()
        .filter_map(|t| {
            state
                .catalog
                .get(t)
                .map(|topic| (t.clone(), topic.partition_count()))
        })
        .collect()
}

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
#[utoipa::path(post, path = "/v1/groups/{group}/members", tag = "groups",
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
    ApiPath(group): ApiPath<String>,
    ApiJson(request): ApiJson<JoinGroupRequest>,
) -> Result<Json<MemberAssignment>, ApiError> {
    validate_group_id(&group)?;
    let mut topics: BTreeSet<String> = request.topics.iter().cloned().collect();
    for topic in &topics {
        state.writable_topic(topic)?;
    }
    let counts = counts(&state, &topics)?;
    topics.extend(state.coordinator.topics(&group));
    let counts = counts
        .into_iter()
        .chain(existing_counts(&state, &topics))
        .collect();
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
        state.coordinator.join(&group, &join, &counts)?,
    )))
}

/// Heartbeat: stay in the group and learn the current generation and assignment.
///
/// Sending the current generation acknowledges it, which releases partitions this member no
/// longer owns to their new owners.
#[utoipa::path(post, path = "/v1/groups/{group}/members/{member}/heartbeat", tag = "groups",
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
    ApiPath((group, member)): ApiPath<(String, String)>,
    ApiJson(request): ApiJson<HeartbeatRequest>,
) -> Result<Json<MemberAssignment>, ApiError> {
    Ok(Json(member_assignment(state.coordinator.heartbeat(
        &group,
        &member,
        request.generation,
    )?)))
}

/// Leave the group now (its partitions move without waiting for the session timeout).
#[utoipa::path(delete, path = "/v1/groups/{group}/members/{member}", tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$"), ("member" = String, Path, description = "Member id")),
    responses(
        (status = 204, description = "Left"),
        (status = 409, description = "Unknown member", body = ErrorBody),
    ))]
pub async fn leave(
    State(state): State<AppState>,
    ApiPath((group, member)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let topics = state.coordinator.topics(&group);
    state
        .coordinator
        .leave(&group, &member, &existing_counts(&state, &topics))?;
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
#[utoipa::path(get, path = "/v1/groups/{group}/members/{member}/records", tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$"), ("member" = String, Path, description = "Member id"), MemberFetchQuery),
    responses(
        (status = 200, description = "Records and positions", content(
            (MemberFetchResponse = "application/json"),
            (strata_openapi::MemberStreamData = "text/event-stream"))),
        (status = 400, description = "Bad query", body = ErrorBody),
        (status = 409, description = "Unknown member, stale generation, or no valid offset with auto_offset_reset=none", body = ErrorBody),
    ))]
pub async fn member_fetch(
    State(state): State<AppState>,
    ApiPath((group, member)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<MemberFetchQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let sse = super::accept::negotiate(&headers, &["application/json", "text/event-stream"])? == 1;
    // Check membership and generation before answering, also for SSE.
    let grant = state.coordinator.poll(&group, &member, query.generation)?;
    if query.commit {
        commit_positions(&state, &group, &member).await?;
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
            state.coordinator.advance(&group, &member, &positions);
        }
        return Ok(member_stream(state, group, member, query).into_response());
    }
    let wait = Duration::from_millis(
        query
            .max_wait_ms
            .unwrap_or(0)
            .min(state.config.fetch_max_wait_ms),
    );
    let response = read_for_member(&state, &group, &member, &query, grant, wait).await?;
    Ok(Json(response).into_response())
}

async fn commit_positions(state: &AppState, group: &str, member: &str) -> Result<(), ApiError> {
    let positions = state.coordinator.positions(group, member);
    if positions.is_empty() {
        return Ok(());
    }
    let commits: Vec<Commit> = positions
        .iter()
        .map(|((topic, partition), offset)| Commit {
            topic: topic.clone(),
            partition: *partition,
            offset: *offset,
            metadata: String::new(),
        })
        .collect();
    state
        .offsets
        .commit(group, &commits, state.clock.now_ms())
        .await?;
    Ok(())
}

/// Where a member starts in one partition.
fn start_offset(
    state: &AppState,
    group: &str,
    (topic, partition): &TopicPartition,
    log: &TieredLog,
    position: Option<u64>,
    reset: AutoOffsetReset,
) -> Result<u64, ApiError> {
    let offsets = log.offsets();
    let in_range =
        |offset: u64| offset >= offsets.log_start_offset && offset <= offsets.high_watermark;
    if let Some(position) = position.filter(|p| in_range(*p)) {
        return Ok(position);
    }
    let committed = state
        .offsets
        .get(group, topic, *partition)
        .map(|c| c.offset);
    if let Some(offset) = committed.filter(|o| in_range(*o)) {
        return Ok(offset);
    }
    match reset {
        AutoOffsetReset::Earliest => Ok(offsets.log_start_offset),
        AutoOffsetReset::Latest => Ok(offsets.high_watermark),
        AutoOffsetReset::None => Err(ApiError::new(
            ErrorCode::NoValidOffset,
            match committed {
                Some(offset) => format!(
                    "{topic}/{partition}: committed offset {offset} is outside [{}, {}] and auto_offset_reset is none",
                    offsets.log_start_offset, offsets.high_watermark
                ),
                None => format!(
                    "{topic}/{partition}: no committed offset and auto_offset_reset is none"
                ),
            },
        )),
    }
}

async fn read_for_member(
    state: &AppState,
    group: &str,
    member: &str,
    query: &MemberFetchQuery,
    grant: PollGrant,
    wait: Duration,
) -> Result<MemberFetchResponse, ApiError> {
    let mut plans = Vec::new();
    for (tp, position) in &grant.positions {
        let Some(topic) = state.catalog.get(&tp.0) else {
            continue;
        };
        let Ok(log) = state.tiered_log(&topic, tp.1).await else {
            continue;
        };
        let start = start_offset(state, group, tp, &log, *position, grant.auto_offset_reset)?;
        plans.push((tp.clone(), log, start));
    }
    if !wait.is_zero()
        && plans
            .iter()
            .all(|(_, log, start)| log.offsets().high_watermark <= *start)
    {
        wait_any(state, &plans, wait).await;
    }
    let max_bytes = query
        .max_bytes
        .unwrap_or(state.config.fetch_default_max_bytes)
        .clamp(1, state.config.fetch_max_bytes);
    let per_partition = (max_bytes / plans.len().max(1) as u64).max(1);
    let mut records_left = query
        .max_records
        .unwrap_or(crate::limits::FETCH_DEFAULT_MAX_RECORDS)
        .max(1);
    let mut records = Vec::new();
    let mut positions = BTreeMap::new();
    for (tp, log, start) in &plans {
        let mut next = *start;
        if records_left > 0 && *start < log.offsets().high_watermark {
            let request = FetchRequest {
                partition: tp.1,
                offset: *start,
                max_bytes: per_partition,
                max_records: records_left,
                format: query.value_format,
            };
            let response = read_records(log, &request).await?.response;
            records_left = records_left
                .saturating_sub(u32::try_from(response.records.len()).unwrap_or(u32::MAX));
            next = response.next_offset;
            records.extend(response.records.into_iter().map(|record| MemberRecord {
                topic: tp.0.clone(),
                record,
            }));
        }
        positions.insert(tp.clone(), next);
    }
    state.coordinator.advance(group, member, &positions);
    Ok(MemberFetchResponse {
        records,
        positions: positions
            .into_iter()
            .map(|((topic, partition), next_offset)| PartitionPosition {
                topic,
                partition,
                next_offset,
            })
            .collect(),
        generation: query.generation,
    })
}

/// Waits until any of the partitions has records past its start, `wait` passes, or shutdown.
async fn wait_any(state: &AppState, plans: &[(TopicPartition, TieredLog, u64)], wait: Duration) {
    if plans.is_empty() {
        return;
    }
    let waits = plans.iter().map(|(_, log, start)| {
        let mut offsets = log.subscribe();
        let start = *start;
        Box::pin(async move {
            let _ = offsets
                .wait_for(|o: &LogOffsets| o.high_watermark > start)
                .await;
        })
    });
    let mut shutdown = state.shutdown.clone();
    tokio::select! {
        _ = tokio::time::timeout(wait, futures::future::select_all(waits)) => {}
        _ = shutdown.wait_for(|stopping| *stopping) => {}
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
    group: String,
    member: String,
    query: MemberFetchQuery,
) -> impl IntoResponse {
    let ping = Duration::from_millis(state.config.sse_ping_interval_ms);
    let stream = async_stream::stream! {
        yield Ok::<_, Infallible>(super::sse::retry_event());
        loop {
            if *state.shutdown.borrow() {
                if let Some(event) = super::sse::end_event(StreamEndReason::ShuttingDown,
                    "the server is shutting down; reconnect to resume") {
                    yield Ok(event);
                }
                break;
            }
            let grant = match state.coordinator.poll(&group, &member, query.generation) {
                Ok(grant) => grant,
                Err(error) => {
                    let body = ErrorBody::new(ApiError::from(error.clone()).code(), error.to_string());
                    if let Some(event) = super::sse::error_body_event("rebalance", &body) {
                        yield Ok(event);
                    }
                    break;
                }
            };
            match read_for_member(&state, &group, &member, &query, grant, Duration::from_millis(1000)).await {
                Ok(response) if response.records.is_empty() => continue,
                Ok(response) => {
                    let event = Event::default()
                        .event(super::sse::RECORDS)
                        .id(encode_positions(&response.positions))
                        .json_data(&response);
                    if let Ok(event) = event {
                        yield Ok(event);
                    }
                }
                Err(error) => {
                    if let Some(event) = super::sse::error_event(&error) {
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
#[utoipa::path(post, path = "/v1/groups/{group}/offsets", tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$")),
    request_body = CommitOffsetsRequest,
    responses(
        (status = 200, description = "Committed; the group's offsets", body = GroupOffsets),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 404, description = "Unknown topic or partition", body = ErrorBody),
        (status = 409, description = "Fenced: unknown member, stale generation, or partition not owned; or an internal topic", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "Invalid request", body = ErrorBody),
    ))]
pub async fn commit(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    ApiJson(request): ApiJson<CommitOffsetsRequest>,
) -> Result<Json<GroupOffsets>, ApiError> {
    validate_group_id(&group)?;
    if request.offsets.is_empty() {
        return Err(ApiError::new(
            ErrorCode::Invalid,
            "offsets must not be empty",
        ));
    }
    let member = match (&request.member_id, request.generation) {
        (Some(member), Some(generation)) => Some((member.as_str(), generation)),
        (None, None) => None,
        _ => {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                "member_id and generation go together",
            ));
        }
    };
    for offset in &request.offsets {
        state.writable_topic(&offset.topic)?;
        state.partition(&offset.topic, offset.partition)?;
    }
    let partitions: Vec<TopicPartition> = request
        .offsets
        .iter()
        .map(|o| (o.topic.clone(), o.partition))
        .collect();
    state
        .coordinator
        .check_commit(&group, member, &partitions)?;
    let commits: Vec<Commit> = request
        .offsets
        .iter()
        .map(|o| Commit {
            topic: o.topic.clone(),
            partition: o.partition,
            offset: o.offset,
            metadata: o.metadata.clone().unwrap_or_default(),
        })
        .collect();
    state
        .offsets
        .commit(&group, &commits, state.clock.now_ms())
        .await?;
    Ok(Json(group_offsets(&state, &group)))
}

fn group_offsets(state: &AppState, group: &str) -> GroupOffsets {
    let offsets = state
        .offsets
        .committed(group)
        .into_iter()
        .map(|((topic, partition), committed)| CommittedOffset {
            topic,
            partition,
            offset: committed.offset,
            metadata: committed.metadata,
            commit_time_ms: committed.commit_time_ms,
        })
        .collect();
    GroupOffsets {
        group: group.to_string(),
        offsets,
    }
}

fn known(state: &AppState, group: &str) -> Result<(), ApiError> {
    if state.offsets.committed(group).is_empty() && state.coordinator.describe(group).is_none() {
        return Err(ApiError::new(
            ErrorCode::GroupNotFound,
            format!("group {group} not found"),
        ));
    }
    Ok(())
}

/// A group's committed offsets.
#[utoipa::path(get, path = "/v1/groups/{group}/offsets", tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$")),
    responses(
        (status = 200, description = "Committed offsets", body = GroupOffsets),
        (status = 404, description = "No such group", body = ErrorBody),
    ))]
pub async fn get_offsets(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<GroupOffsets>, ApiError> {
    known(&state, &group)?;
    Ok(Json(group_offsets(&state, &group)))
}

/// Delete every committed offset of a group that has no live members.
#[utoipa::path(delete, path = "/v1/groups/{group}/offsets", tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such group", body = ErrorBody),
        (status = 409, description = "The group has live members", body = ErrorBody),
    ))]
pub async fn delete_offsets(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    known(&state, &group)?;
    if state.coordinator.member_count(&group) > 0 {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("group {group} has live members"),
        ));
    }
    state
        .offsets
        .delete_group(&group, state.clock.now_ms())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Move a group's committed offsets: to the earliest or latest offset, a timestamp, an exact
/// offset, or shifted by N. Only while the group has no live members, unless `force`.
#[utoipa::path(post, path = "/v1/groups/{group}/offsets/reset", tag = "groups",
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
    ApiPath(group): ApiPath<String>,
    ApiJson(request): ApiJson<ResetOffsetsRequest>,
) -> Result<Json<GroupOffsets>, ApiError> {
    validate_group_id(&group)?;
    if !request.force && state.coordinator.member_count(&group) > 0 {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("group {group} has live members; pass force to reset anyway"),
        ));
    }
    let topic = state.writable_topic(&request.topic)?;
    let partitions = match &request.partitions {
        Some(list) => list.clone(),
        None => (0..topic.partition_count()).collect(),
    };
    let mut commits = Vec::new();
    for partition in partitions {
        let log = state.partition(&request.topic, partition)?;
        let offsets = log.offsets();
        let value = || {
            request
                .value
                .ok_or_else(|| ApiError::new(ErrorCode::Invalid, "this reset target needs a value"))
        };
        let clamp = |o: i128| {
            o.clamp(
                i128::from(offsets.log_start_offset),
                i128::from(offsets.high_watermark),
            ) as u64
        };
        let offset = match request.to {
            ResetTarget::Earliest => offsets.log_start_offset,
            ResetTarget::Latest => offsets.high_watermark,
            ResetTarget::Timestamp => log
                .offset_for_timestamp(value()?)?
                .unwrap_or(offsets.high_watermark),
            ResetTarget::Offset => {
                let wanted = u64::try_from(value()?)
                    .map_err(|_| ApiError::new(ErrorCode::Invalid, "offset must be >= 0"))?;
                if wanted < offsets.log_start_offset || wanted > offsets.high_watermark {
                    return Err(ApiError::out_of_range(
                        wanted,
                        offsets.log_start_offset,
                        offsets.high_watermark,
                    ));
                }
                wanted
            }
            ResetTarget::Shift => {
                let committed = state
                    .offsets
                    .get(&group, &request.topic, partition)
                    .map_or(offsets.log_start_offset, |c| c.offset);
                clamp(i128::from(committed) + i128::from(value()?))
            }
        };
        commits.push(Commit {
            topic: request.topic.clone(),
            partition,
            offset,
            metadata: String::new(),
        });
    }
    state
        .offsets
        .commit(&group, &commits, state.clock.now_ms())
        .await?;
    Ok(Json(group_offsets(&state, &group)))
}

/// Lag of every partition the group committed to or subscribes to, in records and in time,
/// with a summary.
///
/// A partition without a commit counts from where a member would start reading (its
/// `auto_offset_reset`); `basis` says which. Ages are read like fetches, so a committed offset
/// that only tiered storage still holds has a real age too.
#[utoipa::path(get, path = "/v1/groups/{group}/lag", tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$")),
    responses(
        (status = 200, description = "Lag", body = GroupLag),
        (status = 404, description = "No such group", body = ErrorBody),
        (status = 503, description = "Storage unavailable", body = ErrorBody),
    ))]
pub async fn lag(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<GroupLag>, ApiError> {
    known(&state, &group)?;
    let now = state.clock.now_ms();
    let committed = state.offsets.committed(&group);
    let subscriptions = state.coordinator.subscriptions(&group);
    let mut wanted: BTreeSet<TopicPartition> = committed.keys().cloned().collect();
    for topic in subscriptions.keys() {
        if let Some(found) = state.catalog.get(topic) {
            wanted.extend((0..found.partition_count()).map(|p| (topic.clone(), p)));
        }
    }
    let mut partitions = Vec::new();
    for (topic, partition) in wanted {
        let Some(found) = state.catalog.get(&topic) else {
            continue;
        };
        if partition >= found.partition_count() {
            continue;
        }
        let log = state.tiered_log(&found, partition).await?;
        let offsets = log.offsets();
        let commit = committed.get(&(topic.clone(), partition)).map(|c| c.offset);
        let reset = subscriptions.get(&topic).copied();
        let (basis, start) = match (commit, reset) {
            (Some(offset), _) => (LagBasis::Committed, offset.max(offsets.log_start_offset)),
            (None, Some(AutoOffsetReset::Latest)) => (LagBasis::Latest, offsets.high_watermark),
            (None, Some(AutoOffsetReset::None)) => (LagBasis::None, offsets.log_start_offset),
            (None, Some(AutoOffsetReset::Earliest) | None) => {
                (LagBasis::Earliest, offsets.log_start_offset)
            }
        };
        let start = start.min(offsets.high_watermark);
        let lag_records = offsets.high_watermark - start;
        let lag_ms = if lag_records == 0 {
            0
        } else {
            record_age(&log, start, now).await?
        };
        partitions.push(PartitionLag {
            topic,
            partition,
            committed_offset: commit,
            start_offset: start,
            basis,
            high_watermark: offsets.high_watermark,
            lag_records,
            lag_ms,
        });
    }
    Ok(Json(GroupLag {
        group,
        total_lag_records: partitions.iter().map(|p| p.lag_records).sum(),
        max_lag_records: partitions.iter().map(|p| p.lag_records).max().unwrap_or(0),
        max_lag_ms: partitions.iter().map(|p| p.lag_ms).max().unwrap_or(0),
        partitions,
    }))
}

/// Age of the first record at or after `offset`, read through the same path as fetches (local
/// or tiered).
async fn record_age(log: &TieredLog, offset: u64, now: i64) -> Result<i64, ApiError> {
    let request = FetchRequest {
        partition: 0,
        offset,
        max_bytes: 1,
        max_records: 1,
        format: strata_openapi::ValueFormat::Base64,
    };
    let read = read_records(log, &request).await?;
    Ok(read
        .response
        .records
        .first()
        .map_or(0, |r| now.saturating_sub(r.timestamp).max(0)))
}

/// All groups (with members or committed offsets).
#[utoipa::path(get, path = "/v1/groups", tag = "groups",
    responses((status = 200, description = "Groups", body = GroupList)))]
pub async fn list_groups(State(state): State<AppState>) -> Json<GroupList> {
    let mut names: BTreeSet<String> = state.offsets.groups().into_iter().collect();
    names.extend(state.coordinator.groups());
    let groups = names
        .into_iter()
        .map(|group| {
            let description = state.coordinator.describe(&group);
            GroupSummary {
                state: description
                    .as_ref()
                    .map_or("empty", |d| d.state)
                    .to_string(),
                members: description
                    .map_or(0, |d| u32::try_from(d.members.len()).unwrap_or(u32::MAX)),
                group,
            }
        })
        .collect();
    Json(GroupList { groups })
}

/// Describe a group: state, generation, members with their assignments, recent evictions.
#[utoipa::path(get, path = "/v1/groups/{group}", tag = "groups",
    params(("group" = String, Path, description = "Group id: 1-255 characters of [A-Za-z0-9._-]", pattern = r"^[A-Za-z0-9._-]{1,255}$")),
    responses(
        (status = 200, description = "The group", body = GroupDescription),
        (status = 404, description = "No such group", body = ErrorBody),
    ))]
pub async fn describe_group(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<GroupDescription>, ApiError> {
    known(&state, &group)?;
    let Some(description) = state.coordinator.describe(&group) else {
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

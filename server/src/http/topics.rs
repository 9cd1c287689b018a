//! Topic administration: create, list, describe, update settings, add partitions, delete.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use strata_openapi::{
    AddPartitionsRequest, AddPartitionsResponse, CleanerStatus, ColdCacheStats, CreateTopicRequest,
    ErrorBody, PartitionDescription, SegmentInfo, SegmentList, SegmentLocation, TopicDescription,
    TopicList, TopicSummary, UpdateTopicConfigsRequest,
};

use super::AppState;
use super::created::Created;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath};
use super::paths;
use crate::broker::Broker;
use crate::broker::topics::SegmentPlace;
use crate::security::Caller;
use crate::topics::catalog::Topic;

/// Create a topic.
///
/// Names are 1-249 characters of `[A-Za-z0-9._-]`, not `.` or `..`; names starting with `__`
/// are reserved. `configs` takes Kafka's topic settings with underscores (`retention_ms`,
/// `cleanup_policy`, ...); unknown keys are rejected.
///
/// Needs `create` on the topic.
#[utoipa::path(post, path = paths::TOPICS, tag = "topics", request_body = CreateTopicRequest,
    responses(
        (status = 201, description = "Created", body = TopicDescription,
            headers(("Location" = String, description = "Path of the new topic"))),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 409, description = "The topic exists (`topic_already_exists`)", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "Invalid name, partition count or settings", body = ErrorBody),
        (status = 503, description = "Storage unavailable; retry", body = ErrorBody),
    ))]
pub async fn create_topic(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<CreateTopicRequest>,
) -> Result<Created<TopicDescription>, ApiError> {
    let partitions = request.partitions.unwrap_or(1);
    let topic = state
        .broker
        .create_topic(&caller, &request.name, partitions, &request.configs)
        .await?;
    let description = describe(&state.broker, &topic).await;
    Ok(Created::at(
        paths::TOPIC,
        &[("topic", topic.name())],
        description,
    ))
}

/// List topics: those the caller may describe.
#[utoipa::path(get, path = paths::TOPICS, tag = "topics",
    responses(
        (status = 200, description = "All topics", body = TopicList),
        (status = 400, description = "Query parameters given (`bad_query`): this endpoint takes none", body = ErrorBody),
    ))]
pub async fn list_topics(State(state): State<AppState>, caller: Caller) -> Json<TopicList> {
    let topics = state
        .broker
        .list_topics(&caller)
        .iter()
        .map(|t| TopicSummary {
            name: t.name().to_string(),
            partitions: t.partition_count(),
            internal: t.is_internal(),
        })
        .collect();
    Json(TopicList { topics })
}

/// Describe a topic: settings and, per partition, offsets, size and segment count.
///
/// Needs `describe` on the topic.
#[utoipa::path(get, path = paths::TOPIC, tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    responses(
        (status = 400, description = "Query parameters given (`bad_query`): this endpoint takes none", body = ErrorBody),
        (status = 200, description = "The topic", body = TopicDescription),
        (status = 404, description = "No such topic (`topic_not_found`)", body = ErrorBody),
    ))]
pub async fn describe_topic(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(topic): ApiPath<String>,
) -> Result<Json<TopicDescription>, ApiError> {
    let topic = state.broker.describe_topic(&caller, &topic)?;
    Ok(Json(describe(&state.broker, &topic).await))
}

/// Change topic settings. Only the keys given change; `null` resets a key to its default.
///
/// Needs `alter` on the topic.
#[utoipa::path(patch, path = paths::TOPIC_CONFIGS, tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    request_body = UpdateTopicConfigsRequest,
    responses(
        (status = 200, description = "Updated", body = TopicDescription),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 404, description = "No such topic", body = ErrorBody),
        (status = 409, description = "Internal topics cannot be reconfigured (`internal_topic`)", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "Invalid settings (`invalid_config`)", body = ErrorBody),
        (status = 503, description = "Storage unavailable; retry", body = ErrorBody),
    ))]
pub async fn update_configs(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(topic): ApiPath<String>,
    ApiJson(request): ApiJson<UpdateTopicConfigsRequest>,
) -> Result<Json<TopicDescription>, ApiError> {
    let topic = state
        .broker
        .update_topic_configs(&caller, &topic, &request.configs)
        .await?;
    Ok(Json(describe(&state.broker, &topic).await))
}

/// Grow a topic to a new partition count.
///
/// Keys hash to partitions modulo the count, so after growing, a key's new records may go to
/// another partition than its old ones: per-key order holds only within each partition.
///
/// Needs `alter` on the topic.
#[utoipa::path(post, path = paths::PARTITIONS, tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    request_body = AddPartitionsRequest,
    responses(
        (status = 200, description = "Grown", body = AddPartitionsResponse),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 404, description = "No such topic", body = ErrorBody),
        (status = 409, description = "Internal topics cannot grow (`internal_topic`)", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "The count does not grow or exceeds the limit", body = ErrorBody),
        (status = 503, description = "Storage unavailable; retry", body = ErrorBody),
    ))]
pub async fn add_partitions(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(topic): ApiPath<String>,
    ApiJson(request): ApiJson<AddPartitionsRequest>,
) -> Result<Json<AddPartitionsResponse>, ApiError> {
    let topic = state
        .broker
        .add_partitions(&caller, &topic, request.partitions)
        .await?;
    let warning = "keys are assigned to partitions by hash modulo the partition count: records \
                   with an existing key may now go to a different partition than before"
        .to_string();
    Ok(Json(AddPartitionsResponse {
        topic: describe(&state.broker, &topic).await,
        warning,
    }))
}

/// Delete a topic and all its data. Readers in the middle of a fetch finish it. A topic under
/// a legal hold cannot be deleted until every hold is released.
///
/// Needs `delete` on the topic.
#[utoipa::path(delete, path = paths::TOPIC, tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    responses(
        (status = 400, description = "Query parameters given (`bad_query`): this endpoint takes none", body = ErrorBody),
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such topic", body = ErrorBody),
        (status = 409, description = "Internal topics cannot be deleted (`internal_topic`); a legal hold is in force (`legal_hold`)", body = ErrorBody),
        (status = 503, description = "Storage unavailable; retry", body = ErrorBody),
    ))]
pub async fn delete_topic(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(topic): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    state.broker.delete_topic(&caller, &topic).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The segments of a partition and where each lives: on the local disk, in the bucket, or
/// both (tiered topics), with the cold-read cache statistics.
///
/// Needs `describe` on the topic.
#[utoipa::path(get, path = paths::PARTITION_SEGMENTS, tag = "topics",
    params(("topic" = String, Path, description = "Topic name"),
           ("partition" = u32, Path, description = "Partition number")),
    responses(
        (status = 200, description = "Segments, oldest first", body = SegmentList),
        (status = 400, description = "Bad path", body = ErrorBody),
        (status = 404, description = "No such topic or partition", body = ErrorBody),
        (status = 503, description = "Tiered storage unavailable", body = ErrorBody),
    ))]
pub async fn list_segments(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((topic, partition)): ApiPath<(String, u32)>,
) -> Result<Json<SegmentList>, ApiError> {
    let view = state.broker.segments(&caller, &topic, partition).await?;
    let segments = view
        .segments
        .into_iter()
        .map(|segment| SegmentInfo {
            base_offset: segment.base_offset,
            end_offset: segment.end_offset,
            size_bytes: segment.size_bytes,
            max_timestamp: segment.max_timestamp,
            location: match segment.place {
                SegmentPlace::Local => SegmentLocation::Local,
                SegmentPlace::Remote => SegmentLocation::Remote,
                SegmentPlace::Both => SegmentLocation::Both,
            },
            active: segment.active,
        })
        .collect();
    let cache = view.cache.map(|stats| ColdCacheStats {
        hits: stats.hits,
        misses: stats.misses,
        gets: stats.gets,
        bytes_fetched: stats.bytes_fetched,
        bytes_cached: stats.bytes_cached,
        evictions: stats.evictions,
        read_ahead_gets: stats.read_ahead_gets,
    });
    Ok(Json(SegmentList {
        segments,
        tiered: view.tiered,
        cache,
    }))
}

/// A topic in the API's shape.
pub async fn describe(broker: &Broker, topic: &Arc<Topic>) -> TopicDescription {
    let compacts = topic.config().cleanup_policy.compacts();
    let starts = broker.log_starts(topic).await;
    let partitions = topic
        .partitions()
        .iter()
        .zip(starts)
        .enumerate()
        .map(|(number, (partition, start))| {
            let offsets = partition.offsets();
            let segments = partition.segments();
            PartitionDescription {
                partition: u32::try_from(number).unwrap_or(u32::MAX),
                earliest_offset: start,
                latest_offset: offsets.high_watermark,
                log_end_offset: offsets.log_end_offset,
                size_bytes: segments.iter().map(|s| s.durable_size).sum(),
                segment_count: segments.len() as u64,
                cleaner: compacts.then(|| {
                    let status = partition.cleaner_status();
                    CleanerStatus {
                        dirty_ratio: status.dirty_ratio,
                        runs: status.runs,
                        last_run_ms: status.last_run_ms,
                        bytes_reclaimed: status.bytes_reclaimed,
                        failure: status.failure,
                    }
                }),
            }
        })
        .collect();
    TopicDescription {
        name: topic.name().to_string(),
        internal: topic.is_internal(),
        partitions,
        configs: topic.config_map(),
        legal_holds: topic
            .legal_holds()
            .iter()
            .map(super::holds::to_api)
            .collect(),
    }
}

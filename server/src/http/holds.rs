//! Legal holds: place, list, read and release the holds on a topic's records.

use axum::Json;
use axum::extract::State;
use strata_openapi::{CreateLegalHoldRequest, ErrorBody, ErrorCode, LegalHold, LegalHoldList};

use super::AppState;
use super::created::Created;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath};
use super::paths;
use crate::security::Caller;
use crate::topics::holds::{self, HoldRange};

/// Place a legal hold on a topic's records.
///
/// An offset range of one partition (`partition`, `start_offset`, optional `end_offset`) or a
/// time range over every partition (`start_ms`, optional `end_ms`). While the hold is in force,
/// retention never removes the records it covers, delete-records refuses to go past them
/// (409 `legal_hold`) and the topic cannot be deleted. On a bucket with Object Lock, the
/// covering objects get an S3 legal hold as well. Placed durably before the answer.
///
/// Needs `alter` on the topic.
#[utoipa::path(post, path = paths::LEGAL_HOLDS, tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    request_body = CreateLegalHoldRequest,
    responses(
        (status = 201, description = "Placed", body = LegalHold,
            headers(("Location" = String, description = "Path of the new hold (to release it)"))),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 404, description = "No such topic or partition", body = ErrorBody),
        (status = 409, description = "Internal topics cannot be held (`internal_topic`)", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 416, description = "The range starts below the partition's first stored offset: those records are already deleted (`offset_out_of_range`; `earliest_offset` says where to start)", body = ErrorBody),
        (status = 422, description = "Neither or both kinds of range, a range that ends before it starts, or a bad reason (`invalid`)", body = ErrorBody),
        (status = 503, description = "Storage unavailable; retry", body = ErrorBody),
    ))]
pub async fn place(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(topic): ApiPath<String>,
    ApiJson(request): ApiJson<CreateLegalHoldRequest>,
) -> Result<Created<LegalHold>, ApiError> {
    let range = range_of(&request)?;
    let hold = state
        .broker
        .place_legal_hold(&caller, &topic, range, &request.reason)
        .await?;
    let hold = to_api(&hold);
    let id = hold.id.clone();
    Ok(Created::at(
        paths::LEGAL_HOLD,
        &[("topic", &topic), ("id", &id)],
        hold,
    ))
}

/// List the legal holds in force on a topic, oldest first.
///
/// Needs `describe` on the topic.
#[utoipa::path(get, path = paths::LEGAL_HOLDS, tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    responses(
        (status = 400, description = "Query parameters given (`bad_query`): this endpoint takes none", body = ErrorBody),
        (status = 200, description = "The holds", body = LegalHoldList),
        (status = 404, description = "No such topic", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(topic): ApiPath<String>,
) -> Result<Json<LegalHoldList>, ApiError> {
    let holds = state.broker.legal_holds(&caller, &topic)?;
    Ok(Json(LegalHoldList {
        holds: holds.iter().map(to_api).collect(),
    }))
}

/// Release a legal hold: the next retention pass may remove what only it kept.
///
/// Needs `alter` on the topic.
#[utoipa::path(delete, path = paths::LEGAL_HOLD, tag = "topics",
    params(("topic" = String, Path, description = "Topic name"),
           ("id" = String, Path, description = "Hold id")),
    responses(
        (status = 200, description = "Released; the hold as it was", body = LegalHold),
        (status = 404, description = "No such topic (`topic_not_found`) or hold (`hold_not_found`)", body = ErrorBody),
        (status = 409, description = "Internal topic (`internal_topic`)", body = ErrorBody),
        (status = 503, description = "Storage unavailable; retry", body = ErrorBody),
    ))]
pub async fn release(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((topic, id)): ApiPath<(String, String)>,
) -> Result<Json<LegalHold>, ApiError> {
    let hold = state
        .broker
        .release_legal_hold(&caller, &topic, &id)
        .await?;
    Ok(Json(to_api(&hold)))
}

/// The hold's range from the request: exactly one of the two kinds.
fn range_of(request: &CreateLegalHoldRequest) -> Result<HoldRange, ApiError> {
    let invalid = |message: &str| ApiError::new(ErrorCode::Invalid, message.to_string());
    let offsets = request.partition.is_some()
        || request.start_offset.is_some()
        || request.end_offset.is_some();
    let time = request.start_ms.is_some() || request.end_ms.is_some();
    match (offsets, time) {
        (true, true) => Err(invalid(
            "give an offset range (partition, start_offset, end_offset) or a time range \
             (start_ms, end_ms), not both",
        )),
        (false, false) => Err(invalid(
            "give an offset range (partition, start_offset, end_offset) or a time range \
             (start_ms, end_ms)",
        )),
        (true, false) => match (request.partition, request.start_offset) {
            (Some(partition), Some(start_offset)) => Ok(HoldRange::Offsets {
                partition,
                start_offset,
                end_offset: request.end_offset,
            }),
            _ => Err(invalid("an offset range needs partition and start_offset")),
        },
        (false, true) => match request.start_ms {
            Some(start_ms) => Ok(HoldRange::Time {
                start_ms,
                end_ms: request.end_ms,
            }),
            None => Err(invalid("a time range needs start_ms")),
        },
    }
}

/// A hold in the API's shape.
pub fn to_api(hold: &holds::LegalHold) -> LegalHold {
    let mut api = LegalHold {
        id: hold.id.clone(),
        reason: hold.reason.clone(),
        partition: None,
        start_offset: None,
        end_offset: None,
        start_ms: None,
        end_ms: None,
        created_ms: hold.created_ms,
        created_by: hold.created_by.clone(),
    };
    match hold.range {
        HoldRange::Offsets {
            partition,
            start_offset,
            end_offset,
        } => {
            api.partition = Some(partition);
            api.start_offset = Some(start_offset);
            api.end_offset = end_offset;
        }
        HoldRange::Time { start_ms, end_ms } => {
            api.start_ms = Some(start_ms);
            api.end_ms = end_ms;
        }
    }
    api
}

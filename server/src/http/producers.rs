//! Idempotent-producer identities.

use axum::Json;
use axum::extract::State;
use strata_openapi::{ErrorBody, ErrorCode, InitProducerRequest, ProducerIdentity};

use super::AppState;
use super::error::ApiError;
use super::extract::ApiJson;
use super::paths;
use crate::security::Caller;

/// Get a producer id and epoch for idempotent produce.
///
/// Without `producer_id`: a new id at epoch 0. With the id of an earlier session: the same id
/// with the next epoch; writes still carrying the old epoch are then refused with
/// `producer_fenced`. Sequence numbers start at 0 per partition for every epoch.
///
/// Needs an authenticated caller, no ACL: the id grants nothing by itself. An id belongs to
/// the principal it was issued to: only that principal (or a super user) may bump its epoch,
/// since that fences every session holding it (403 `forbidden` for anyone else).
#[utoipa::path(post, path = paths::PRODUCERS, tag = "producers", request_body = InitProducerRequest,
    responses(
        (status = 200, description = "The identity to put on produce requests", body = ProducerIdentity),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 403, description = "The producer id was issued to another principal (`forbidden`)", body = ErrorBody),
        (status = 404, description = "A producer id this server never issued (`producer_not_found`)", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "A negative id (`invalid`), or the id's epochs are used up (`invalid_producer`)", body = ErrorBody),
        (status = 503, description = "Storage unavailable; retry", body = ErrorBody),
    ))]
pub async fn init_producer(
    State(state): State<AppState>,
    // Any authenticated caller may get an id: it grants nothing, and every produce that
    // carries it is checked for `write` on its topic.
    caller: Caller,
    ApiJson(request): ApiJson<InitProducerRequest>,
) -> Result<Json<ProducerIdentity>, ApiError> {
    if let Some(id) = request.producer_id.filter(|id| *id < 0) {
        // Ids are issued from 0 up: a negative one was never issued, but "not found" would
        // read as if it might have been.
        return Err(ApiError::new(
            ErrorCode::Invalid,
            format!("producer_id must be >= 0 (an id POST /v1/producers issued), not {id}"),
        ));
    }
    let (producer_id, producer_epoch) = state
        .broker
        .init_producer(&caller, request.producer_id)
        .await?;
    Ok(Json(ProducerIdentity {
        producer_id,
        producer_epoch,
    }))
}

//! Authentication at the HTTP edge: a bearer token becomes a [`Caller`]. Every `/v1` handler
//! takes a `Caller`, and every broker operation needs one, so no route can reach the broker
//! unauthenticated. What the caller may do is the broker's decision, not this module's.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use strata_openapi::ErrorCode;

use super::AppState;
use super::error::ApiError;
use crate::config::AuthMode;
use crate::security::{Caller, Principal};

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match state.config.auth_mode {
            AuthMode::None => Ok(Caller::authenticated(Principal::anonymous())),
            AuthMode::ApiKey => bearer_token(parts)
                .and_then(|token| state.broker.authenticate(token))
                .map(Caller::authenticated)
                .ok_or_else(unauthenticated),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme is case-insensitive).
fn bearer_token(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

/// One answer for a missing, malformed, unknown and revoked token alike.
fn unauthenticated() -> ApiError {
    ApiError::new(
        ErrorCode::Unauthenticated,
        "authentication required: send Authorization: Bearer <API key>",
    )
}

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
use crate::serve::ClientIdentity;

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if state.config.auth_mode == AuthMode::None {
            let caller = Caller::authenticated(Principal::anonymous());
            remember_principal(parts, &caller);
            state.broker.admit_request(&caller)?;
            return Ok(caller);
        }
        // A bearer token decides when one is sent (a wrong one is never excused by a
        // certificate); otherwise the connection's verified client certificate.
        let caller = match bearer(parts) {
            Some(token) => token.and_then(|token| {
                let principal = state.broker.authenticate(token)?;
                Some(Caller::with_token(principal, token))
            }),
            None => parts
                .extensions
                .get::<ClientIdentity>()
                .map(|identity| Caller::authenticated(Principal::new(identity.0.clone()))),
        };
        let caller = caller.ok_or_else(unauthenticated)?;
        remember_principal(parts, &caller);
        state.broker.admit_request(&caller)?;
        Ok(caller)
    }
}

/// Leaves the principal where the access log finds it.
fn remember_principal(parts: &Parts, caller: &Caller) {
    if let Some(slot) = parts.extensions.get::<super::observe::PrincipalSlot>() {
        let _ = slot.0.set(caller.principal().to_string());
    }
}

/// `None` without an `Authorization` header; `Some(None)` for one that is not a usable
/// `Bearer <token>` (the scheme is case-insensitive).
fn bearer(parts: &Parts) -> Option<Option<&str>> {
    let value = parts.headers.get(AUTHORIZATION)?;
    let token = value.to_str().ok().and_then(|value| {
        let (scheme, token) = value.split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim())
            .filter(|token| !token.is_empty())
    });
    Some(token)
}

/// One answer for a missing, malformed, unknown and revoked token alike.
pub(crate) fn unauthenticated() -> ApiError {
    ApiError::new(
        ErrorCode::Unauthenticated,
        "authentication required: send Authorization: Bearer <API key>",
    )
}

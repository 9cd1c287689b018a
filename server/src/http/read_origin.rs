//! The [`ReadOrigin`] of a request: the client's address (from the accepted socket) and the
//! request id (from the `observe` middleware), for the read audit.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::observe::RequestId;
use crate::broker::audit::ReadOrigin;
use crate::serve::ClientAddress;

impl<S: Send + Sync> FromRequestParts<S> for ReadOrigin {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ReadOrigin {
            client_address: parts.extensions.get::<ClientAddress>().map(|a| a.0),
            request_id: parts
                .extensions
                .get::<RequestId>()
                .map(|id| id.0.clone())
                .unwrap_or_default(),
        })
    }
}

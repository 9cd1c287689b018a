//! Extractors that turn every kind of bad input into our error body: `ApiJson`, `ApiQuery` and
//! `ApiPath` wrap axum's, with rejections mapped to `bad_json`, `bad_query`, `bad_path`,
//! `unsupported_media_type` and `request_too_large`. Handlers never see axum's plain-text errors.

use axum::extract::FromRequest;
use axum::extract::FromRequestParts;
use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use strata_openapi::ErrorCode;

use super::error::ApiError;

/// A JSON body.
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// Query parameters.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// Path parameters.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "expected a JSON body with Content-Type: application/json",
            ),
            JsonRejection::BytesRejection(bytes) => bytes.into(),
            other => ApiError::new(ErrorCode::BadJson, other.body_text()),
        }
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                ErrorCode::RequestTooLarge,
                "request body exceeds max_request_bytes",
            )
        } else {
            ApiError::new(ErrorCode::BadJson, rejection.body_text())
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::new(ErrorCode::BadQuery, rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::new(ErrorCode::BadPath, rejection.body_text())
    }
}

/// A raw body (size-limited like every body).
#[derive(Debug)]
pub struct ApiBytes(pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        axum::body::Bytes::from_request(request, state)
            .await
            .map(ApiBytes)
            .map_err(ApiError::from)
    }
}

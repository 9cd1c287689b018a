//! Request bodies cannot hold the server's memory or connections hostage: a body must arrive
//! whole within `request_body_timeout_ms` (408 `request_timeout` otherwise, however slowly its
//! bytes trickle in), and the bodies being received at once may hold at most
//! `max_inflight_request_bytes` between them (503 `busy` with `Retry-After` beyond, before a
//! byte is read). Bodies are read here, once, and handed on whole; the reservation is held until
//! the response is ready.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use strata_openapi::ErrorCode;
use tokio::sync::Semaphore;

use super::error::ApiError;

/// The limits and the shared reservation of in-flight body bytes.
#[derive(Debug, Clone)]
pub struct BodyGuard {
    timeout: Duration,
    max_body_bytes: usize,
    budget: Arc<Semaphore>,
    budget_bytes: usize,
}

/// Permits are counted in KiB so a `u32` permit count covers budgets up to 4 TiB.
const UNIT: usize = 1024;

impl BodyGuard {
    /// Bodies of at most `max_body_bytes`, read within `timeout`, `budget_bytes` in flight.
    pub fn new(timeout: Duration, max_body_bytes: usize, budget_bytes: usize) -> Self {
        let permits = (budget_bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS);
        Self {
            timeout,
            max_body_bytes,
            budget: Arc::new(Semaphore::new(permits)),
            budget_bytes,
        }
    }

    /// KiB to reserve for a body announced as `length` bytes (the request limit when unknown).
    fn units_for(&self, length: Option<usize>) -> u32 {
        let bytes = length
            .unwrap_or(self.max_body_bytes)
            .min(self.max_body_bytes);
        let units = bytes
            .div_ceil(UNIT)
            .max(1)
            .min(self.budget_bytes / UNIT)
            .max(1);
        u32::try_from(units).unwrap_or(u32::MAX)
    }
}

/// The middleware: requests without a body pass straight through.
pub async fn guard_body(State(guard): State<BodyGuard>, request: Request, next: Next) -> Response {
    let length = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let bodiless = length == Some(0)
        || (length.is_none() && !request.headers().contains_key("transfer-encoding"));
    if bodiless {
        return next.run(request).await;
    }
    if length.is_some_and(|length| length > guard.max_body_bytes) {
        return too_large(guard.max_body_bytes).into_response();
    }
    let Ok(_reservation) =
        Arc::clone(&guard.budget).try_acquire_many_owned(guard.units_for(length))
    else {
        return ApiError::new(
            ErrorCode::Busy,
            "the server is receiving as many request bytes as it allows; retry shortly",
        )
        .into_response();
    };
    let (parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, guard.max_body_bytes);
    let bytes = match tokio::time::timeout(guard.timeout, read).await {
        Err(_) => {
            return ApiError::new(
                ErrorCode::RequestTimeout,
                format!(
                    "the request body did not arrive within {} ms",
                    guard.timeout.as_millis()
                ),
            )
            .into_response();
        }
        // Without a length, the limit is the likely cause; with one, the client went away.
        Ok(Err(_)) if length.is_none() => return too_large(guard.max_body_bytes).into_response(),
        Ok(Err(_)) => {
            return ApiError::new(
                ErrorCode::Invalid,
                "the request body could not be read whole",
            )
            .into_response();
        }
        Ok(Ok(bytes)) => bytes,
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        ErrorCode::RequestTooLarge,
        format!("the request body exceeds the server's limit of {limit} bytes"),
    )
}

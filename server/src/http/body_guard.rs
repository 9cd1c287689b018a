//! Request bodies cannot hold the server's memory or connections hostage: a body must arrive
//! whole within `request_body_timeout_ms` (408 `request_timeout` otherwise, however slowly its
//! bytes trickle in), and the bodies being received at once may hold at most
//! `max_inflight_request_bytes` between them (503 `busy` with `Retry-After` beyond, before a
//! byte is read). Bodies are read here, once, and handed on whole; the reservation is held until
//! the response is ready. One kind is handed on unread: a large raw body to one partition, which
//! its handler streams into the log as it arrives ([`UnreadBody`]); the handler then keeps the
//! same deadline and answers.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::http::header::{CONTENT_ENCODING, CONTENT_LENGTH};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use strata_openapi::ErrorCode;
use tokio::sync::Semaphore;

use super::error::ApiError;
use super::paths;
use super::produce::{is_raw_media, media_type};
use crate::clock::stopwatch;

/// Raw bodies at least this large reach the partition produce handler unread, to be streamed
/// into the log as they arrive (see `log::stream`). Below it, the transport that streaming
/// overlaps (tens of microseconds over a fast link) is about what asking the partition's
/// writer for a lease costs.
pub const STREAM_MIN_BYTES: usize = 256 * 1024;

/// Marks a request whose body the guard left unread: its handler must read all `length` bytes
/// by `timeout` after `started`, and answers as the guard would ([`timed_out`], [`unreadable`]).
#[derive(Debug, Clone, Copy)]
pub struct UnreadBody {
    /// When the guard let the request through.
    pub started: std::time::Instant,
    /// The whole body's time limit.
    pub timeout: Duration,
    /// The announced `Content-Length`.
    pub length: usize,
}

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
    if let Some(length) = length.filter(|&length| streams(&request, length)) {
        let mut request = request;
        request.extensions_mut().insert(UnreadBody {
            started: stopwatch(),
            timeout: guard.timeout,
            length,
        });
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, guard.max_body_bytes);
    let bytes = match tokio::time::timeout(guard.timeout, read).await {
        Err(_) => return timed_out(guard.timeout).into_response(),
        // Without a length, the limit is the likely cause; with one, the client went away.
        Ok(Err(_)) if length.is_none() => return too_large(guard.max_body_bytes).into_response(),
        Ok(Err(_)) => return unreadable().into_response(),
        Ok(Ok(bytes)) => bytes,
    };
    if parts.headers.contains_key(CONTENT_ENCODING) {
        match super::content_encoding::decoded(&parts.headers, bytes, guard.max_body_bytes) {
            Ok(plain) => {
                parts.headers.remove(CONTENT_ENCODING);
                parts.headers.insert(CONTENT_LENGTH, plain.len().into());
                return next
                    .run(Request::from_parts(parts, Body::from(plain)))
                    .await;
            }
            Err(refused) => return refused.into_response(),
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Whether a body of `length` bytes goes to its handler unread: a large raw (uncompressed on
/// the wire) produce to one partition.
fn streams(request: &Request, length: usize) -> bool {
    length >= STREAM_MIN_BYTES
        && request.method() == Method::POST
        && !request.headers().contains_key(CONTENT_ENCODING)
        && request
            .extensions()
            .get::<MatchedPath>()
            .is_some_and(|path| path.as_str() == paths::PARTITION_RECORDS)
        && is_raw_media(&media_type(request.headers()))
}

/// 408 `request_timeout`: the body did not arrive whole within `timeout`.
pub fn timed_out(timeout: Duration) -> ApiError {
    ApiError::new(
        ErrorCode::RequestTimeout,
        format!(
            "the request body did not arrive within {} ms",
            timeout.as_millis()
        ),
    )
}

/// 400 `invalid`: the body of announced length ended early (the client went away).
pub fn unreadable() -> ApiError {
    ApiError::new(
        ErrorCode::Invalid,
        "the request body could not be read whole",
    )
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        ErrorCode::RequestTooLarge,
        format!("the request body exceeds the server's limit of {limit} bytes"),
    )
}

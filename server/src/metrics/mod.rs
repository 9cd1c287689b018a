//! `GET /metrics`: Prometheus text (0.0.4) by default, OpenMetrics 1.0 when the scraper asks
//! for it in `Accept`, both encoded by the Prometheus project's `prometheus-client`.
//!
//! Counting happens where things happen (the writer, the broker, the HTTP edge, tiering, the
//! disk layer), in atomics that need no exporter; this floor only reads them. Each scrape
//! builds a fresh registry: the live counters and histograms (shared handles), plus gauges
//! computed from the state at that moment (per-partition offsets and sizes, group lag, upload
//! lag, process figures). Scrapes are rare (every few seconds), so building beats keeping a
//! second copy of the state in sync.
//!
//! With authentication on, scraping needs `describe` on the cluster (the monitoring right).

mod families;
mod process;

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use prometheus_client::registry::Registry;
use strata_openapi::ErrorCode;

use crate::http::AppState;
use crate::http::error::ApiError;
use crate::io::IoStats;
use crate::security::Caller;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What every scrape reads besides the broker: the disk layer's counters, what the binary is,
/// when it started and how long opening (recovering) its partitions took.
#[derive(Debug)]
pub struct Exporter {
    io: Arc<IoStats>,
    io_backend: String,
    started: Instant,
    recovery: std::time::Duration,
}

impl Exporter {
    /// An exporter for a server that starts now.
    pub fn new(io: Arc<IoStats>, io_backend: String, recovery: std::time::Duration) -> Self {
        Self {
            io,
            io_backend,
            started: crate::clock::stopwatch(),
            recovery,
        }
    }
}

/// Prometheus metrics
///
/// Every metric family of the server (README, "Observing Strata"), in the Prometheus text
/// format 0.0.4; in OpenMetrics 1.0 (`application/openmetrics-text`) when `Accept` names it.
///
/// Needs `describe` on the cluster.
#[utoipa::path(get, path = crate::http::paths::METRICS, tag = "health", operation_id = "metrics",
    responses(
        (status = 200, description = "The metrics, as Prometheus text (or OpenMetrics when asked for)",
            content_type = "text/plain", body = String),
        (status = 404, description = "Metrics are off (`metrics_enabled = false`)", body = strata_openapi::ErrorBody,
            example = json!({"error": {"code": "not_found", "message": "metrics are off (metrics_enabled = false)", "retryable": false}})),
    ))]
pub async fn serve(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(exporter) = state.metrics.clone() else {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            "metrics are off (metrics_enabled = false)",
        ));
    };
    let topics = state.broker.observe_topics(&caller)?;
    let groups = state.broker.observe_groups(&caller).await?;
    let mut registry = Registry::default();
    families::register(
        &mut registry,
        &families::Sources {
            state: &state,
            exporter: &exporter,
            topics: &topics,
            groups: &groups,
        },
    );
    let openmetrics = wants_openmetrics(&headers);
    let mut body = String::new();
    let encoded = if openmetrics {
        prometheus_client::encoding::text::encode(&mut body, &registry)
    } else {
        prometheus_client::encoding::prometheus_text::encode(&mut body, &registry)
    };
    if encoded.is_err() {
        return Err(ApiError::new(
            ErrorCode::Internal,
            "could not encode the metrics",
        ));
    }
    let content_type = if openmetrics {
        OPENMETRICS
    } else {
        prometheus_client::encoding::prometheus_text::CONTENT_TYPE
    };
    let mut response = body.into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    Ok(response)
}

/// Whether `Accept` names OpenMetrics (Prometheus sends it first when it prefers it).
fn wants_openmetrics(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| {
            media
                .trim()
                .to_ascii_lowercase()
                .starts_with("application/openmetrics-text")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_only_when_asked_for() {
        let mut headers = HeaderMap::new();
        assert!(!wants_openmetrics(&headers));
        headers.insert(ACCEPT, HeaderValue::from_static("text/plain;version=0.0.4"));
        assert!(!wants_openmetrics(&headers));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static(
                "application/openmetrics-text;version=1.0.0;q=0.9,text/plain;q=0.5",
            ),
        );
        assert!(wants_openmetrics(&headers));
    }
}

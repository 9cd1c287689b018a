//! Every request, seen from outside: a request id (the client's `X-Request-Id`, or a new one)
//! echoed in the response and carried by every log line the request causes; the HTTP metrics
//! (requests by route template, method and status; duration; in flight; errors by code); and
//! the access log line (sampled by `access_log_sample_rate`).
//!
//! Route labels are templates (`/v1/topics/{topic}`), never raw paths, so the number of series
//! stays bounded whatever clients send.

use std::sync::{Arc, OnceLock};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use strata_openapi::ErrorCode;
use tracing::Instrument;

/// The request id header (de facto standard; echoed back).
pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Client-sent ids longer than this are replaced (they end up in every log line).
const MAX_REQUEST_ID_LEN: usize = 128;

/// Route, method and status of a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    /// The route template, or `unmatched`.
    pub route: String,
    /// HTTP method.
    pub method: String,
    /// Status code.
    pub status: u16,
}

/// Route and method.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RouteLabels {
    /// The route template, or `unmatched`.
    pub route: String,
    /// HTTP method.
    pub method: String,
}

/// An error code.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CodeLabels {
    /// The stable error code of the answer.
    pub code: &'static str,
}

/// A fetch answer format.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct FormatLabels {
    /// `json`, `ndjson`, `record_batches`, `sse` or `member` (a group member's JSON fetch).
    pub format: &'static str,
}

/// The transport's counters; the metrics floor registers clones.
#[derive(Debug, Clone)]
pub struct HttpStats {
    /// Requests answered.
    pub requests: Family<RequestLabels, Counter>,
    /// Seconds from request head to response head (streams: until the stream starts).
    pub duration: Family<RouteLabels, Histogram>,
    /// Requests being handled now.
    pub in_flight: Gauge,
    /// Error answers by code (every rejection, produce and fetch included).
    pub errors: Family<CodeLabels, Counter>,
    /// Records served by fetches, by answer format.
    pub fetched_records: Family<FormatLabels, Counter>,
    /// Record bytes served by fetches, by answer format.
    pub fetched_bytes: Family<FormatLabels, Counter>,
    /// Share of requests with an access log line.
    sample_rate: f64,
    /// `metrics_enabled`: off, requests are not counted (ids and access logs stay).
    counting: bool,
}

fn duration_histogram() -> Histogram {
    // 50 µs .. ~26 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

impl HttpStats {
    /// Counters (`counting` off: none are updated) with this access-log sampling rate.
    pub fn new(counting: bool, sample_rate: f64) -> Self {
        Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            in_flight: Gauge::default(),
            errors: Family::default(),
            fetched_records: Family::default(),
            fetched_bytes: Family::default(),
            sample_rate,
            counting,
        }
    }

    /// Counts records served in one answer format.
    pub fn fetched(&self, format: &'static str, records: u64, bytes: u64) {
        if !self.counting {
            return;
        }
        let labels = FormatLabels { format };
        self.fetched_records.get_or_create(&labels).inc_by(records);
        self.fetched_bytes.get_or_create(&labels).inc_by(bytes);
    }
}

/// Where the authenticated principal is left for the access log (set by the `Caller`
/// extractor, which runs inside the handler).
#[derive(Debug, Clone, Default)]
pub struct PrincipalSlot(pub Arc<OnceLock<String>>);

/// The method as a metric label: the standard methods by name, anything else as `other`.
/// A client, authenticated or not, may send any token as a method; one series per made-up
/// method would let it grow the registry without bound, as unmatched paths would.
fn method_label(method: &str) -> String {
    const KNOWN: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE",
    ];
    let known = KNOWN.contains(&method);
    if known { method } else { "other" }.to_string()
}

/// The request's id, for handlers that record it (the read audit).
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The middleware: id, span, metrics, access log.
pub async fn observe(
    State(stats): State<Arc<HttpStats>>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = crate::clock::stopwatch();
    let id = request_id(&request);
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let method = request.method().as_str().to_string();
    let logged = stats.sample_rate > 0.0 && fastrand::f64() < stats.sample_rate;
    let path = logged.then(|| request.uri().path().to_string());
    let principal = PrincipalSlot::default();
    request.extensions_mut().insert(principal.clone());
    request.extensions_mut().insert(RequestId(id.clone()));
    let span = tracing::info_span!("request", request_id = %id);
    if stats.counting {
        stats.in_flight.inc();
    }
    let mut response = next.run(request).instrument(span.clone()).await;
    let took = started.elapsed();
    let status = response.status().as_u16();
    let code = response.extensions().get::<ErrorCode>().copied();
    if let Some(path) = path {
        let _entered = span.enter();
        tracing::info!(
            target: "strata::access",
            %method,
            %route,
            %path,
            status,
            code = code.map(|c| c.as_str()),
            bytes = response_bytes(&response),
            duration_ms = took.as_secs_f64() * 1000.0,
            principal = principal.0.get().map(String::as_str),
            "request"
        );
    }
    if stats.counting {
        stats.in_flight.dec();
        count(&stats, route, method_label(&method), status, code, took);
    }
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID.clone(), value);
    }
    response
}

fn count(
    stats: &HttpStats,
    route: String,
    method: String,
    status: u16,
    code: Option<ErrorCode>,
    took: std::time::Duration,
) {
    if let Some(code) = code {
        let code = code.as_str();
        stats.errors.get_or_create(&CodeLabels { code }).inc();
    }
    let labels = RouteLabels { route, method };
    stats
        .duration
        .get_or_create(&labels)
        .observe(took.as_secs_f64());
    let RouteLabels { route, method } = labels;
    stats
        .requests
        .get_or_create(&RequestLabels {
            route,
            method,
            status,
        })
        .inc();
}

/// The client's id when it is short printable ASCII, else a new random one.
fn request_id(request: &Request) -> String {
    request
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= MAX_REQUEST_ID_LEN)
        .filter(|v| v.bytes().all(|b| b.is_ascii_graphic()))
        .map_or_else(
            || format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..)),
            str::to_string,
        )
}

/// The body size when known up front (streams and chunked answers: none).
fn response_bytes(response: &Response) -> Option<u64> {
    use axum::body::HttpBody;
    response.body().size_hint().exact()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_header(value: &str) -> Request {
        Request::builder()
            .header("x-request-id", value)
            .body(axum::body::Body::empty())
            .unwrap()
    }

    #[test]
    fn a_client_request_id_is_kept_when_sane_and_replaced_otherwise() {
        assert_eq!(request_id(&with_header("abc-123")), "abc-123");
        for bad in ["", "has space", &"x".repeat(MAX_REQUEST_ID_LEN + 1)] {
            let id = request_id(&with_header(bad));
            assert_ne!(id, bad);
            assert_eq!(id.len(), 32, "{id}");
        }
        let fresh = request_id(&Request::new(axum::body::Body::empty()));
        assert!(fresh.bytes().all(|b| b.is_ascii_hexdigit()), "{fresh}");
    }
}

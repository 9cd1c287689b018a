//! The HTTP API (`/v1`): an adapter over the broker. Each handler extracts its input, makes one
//! broker call and turns the answer into the wire shape (a DTO of `strata_openapi`); no domain
//! decision is made here.
//!
//! One module per resource; each handler is described for OpenAPI with `#[utoipa::path]`, and
//! `openapi.rs` collects them into the document served at `/openapi.json` (Swagger UI at `/docs`,
//! served from the binary). Every error, including malformed input, unknown routes and panics,
//! leaves as our JSON error body.

pub mod accept;
pub mod admin;
pub mod auth;
pub mod body_guard;
pub mod codec;
pub mod content_encoding;
mod created;
pub mod error;
pub mod extract;
pub mod fetch;
mod fetch_json;
pub mod groups;
pub mod health;
pub mod holds;
mod json_text;
pub mod observe;
pub mod offsets;
pub mod openapi;
pub mod paths;
mod plain_errors;
pub mod produce;
mod produce_body;
mod produce_stream;
pub mod producers;
mod query_guard;
mod read_origin;
pub mod sse;
pub mod topics;

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post};
use strata_openapi::ErrorCode;
use tokio::sync::watch;
use tower::ServiceExt;
use tower_http::catch_panic::CatchPanicLayer;

use crate::broker::Broker;
use crate::config::Config;
use crate::status::ServerStatus;
use error::ApiError;

/// What every handler can reach: the broker, which every operation goes through, and what
/// only the transport needs.
#[derive(Clone)]
pub struct AppState {
    /// The service floor: every operation.
    pub broker: Arc<Broker>,
    /// Server settings (body limits, SSE pings).
    pub config: Arc<Config>,
    /// The disk I/O backend in use, for `/healthz`.
    pub io_backend: String,
    /// Becomes true when shutdown starts: long polls and SSE streams end.
    pub shutdown: watch::Receiver<bool>,
    /// What `/readyz` reports.
    pub status: Arc<crate::status::ServerStatus>,
    /// Request and fetch counters (registered in `metrics`).
    pub http_stats: Arc<observe::HttpStats>,
    /// What `/metrics` exports; `None` with `metrics_enabled = false`.
    pub metrics: Option<Arc<crate::metrics::Exporter>>,
}

impl AppState {
    /// Whether `/readyz` says ready.
    pub fn is_ready(&self) -> bool {
        self.status.is_ready() && !*self.shutdown.borrow()
    }
}

/// What the listener serves from the moment it is bound: the API once `api` is set, and until
/// then `/healthz` (200), `/readyz` (503 with the startup step) and 503 `unavailable` for
/// everything else, so probes and clients can tell a recovering server from a dead one.
pub fn front_door(status: Arc<ServerStatus>, api: Arc<OnceLock<Router>>) -> Router {
    Router::new().fallback_service(tower::service_fn(move |request: axum::extract::Request| {
        let (status, api) = (Arc::clone(&status), Arc::clone(&api));
        async move {
            if let Some(router) = api.get() {
                return router.clone().oneshot(request).await;
            }
            Ok::<_, Infallible>(while_starting(&status, request.uri().path()))
        }
    }))
}

fn while_starting(status: &ServerStatus, path: &str) -> Response {
    match path {
        paths::HEALTHZ => axum::Json(strata_openapi::Health {
            status: "ok".to_string(),
            io_backend: "starting".to_string(),
        })
        .into_response(),
        paths::READYZ => health::readiness(status).into_response(),
        _ => {
            let reason = status.readiness().reason.unwrap_or_default();
            ApiError::new(
                ErrorCode::Unavailable,
                format!("the server is starting ({reason}); retry shortly"),
            )
            .into_response()
        }
    }
}

/// The whole API.
pub fn router(state: AppState) -> Router {
    let body_limit = usize::try_from(state.config.max_request_bytes).unwrap_or(usize::MAX);
    Router::new()
        .route(paths::HEALTHZ, get(health::healthz))
        .route(paths::READYZ, get(health::readyz))
        .route(paths::METRICS, get(crate::metrics::serve))
        .route(
            paths::TOPICS,
            post(topics::create_topic).get(topics::list_topics),
        )
        .route(
            paths::TOPIC,
            get(topics::describe_topic).delete(topics::delete_topic),
        )
        .route(paths::TOPIC_CONFIGS, patch(topics::update_configs))
        .route(paths::LEGAL_HOLDS, post(holds::place).get(holds::list))
        .route(paths::LEGAL_HOLD, delete(holds::release))
        .route(paths::PARTITIONS, post(topics::add_partitions))
        .route(paths::TOPIC_RECORDS, post(produce::produce_to_topic))
        .route(
            paths::PARTITION_RECORDS,
            post(produce::produce_to_partition).get(fetch::fetch),
        )
        .route(paths::PARTITION_OFFSETS, get(offsets::offsets))
        .route(paths::PARTITION_SEGMENTS, get(topics::list_segments))
        .route(paths::DELETE_RECORDS, post(offsets::delete_records))
        .route(paths::PRODUCERS, post(producers::init_producer))
        .route(paths::GROUPS, get(groups::list_groups))
        .route(paths::GROUP, get(groups::describe_group))
        .route(paths::GROUP_MEMBERS, post(groups::join))
        .route(paths::GROUP_MEMBER, delete(groups::leave))
        .route(paths::MEMBER_HEARTBEAT, post(groups::heartbeat))
        .route(paths::MEMBER_RECORDS, get(groups::member_fetch))
        .route(
            paths::GROUP_OFFSETS,
            get(groups::get_offsets)
                .post(groups::commit)
                .delete(groups::delete_offsets),
        )
        .route(paths::GROUP_OFFSETS_RESET, post(groups::reset_offsets))
        .route(paths::GROUP_LAG, get(groups::lag))
        .route(
            paths::AUTH_KEYS,
            post(admin::create_key).get(admin::list_keys),
        )
        .route(paths::AUTH_KEY, delete(admin::revoke_key))
        .route(
            paths::ACLS,
            get(admin::list_acls)
                .post(admin::add_acl)
                .delete(admin::delete_acl),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            query_guard::QueryFree::from_document(&openapi::document()),
            query_guard::refuse_undeclared_query,
        ))
        .merge(openapi::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn_with_state(
            body_guard(&state.config),
            body_guard::guard_body,
        ))
        .layer(cors(&state.config))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state.http_stats),
            observe::observe,
        ))
        .with_state(state)
}

fn body_guard(config: &crate::config::Config) -> body_guard::BodyGuard {
    let max_body = usize::try_from(config.max_request_bytes).unwrap_or(usize::MAX);
    let budget = usize::try_from(config.max_inflight_request_bytes).unwrap_or(usize::MAX);
    body_guard::BodyGuard::new(
        std::time::Duration::from_millis(config.request_body_timeout_ms),
        max_body,
        budget,
    )
}

/// CORS for browser clients: off (no headers, so browsers refuse cross-origin calls) unless
/// `cors_allowed_origins` names origins. Credentials travel in `Authorization`, which browsers
/// send cross-origin only when allowed here.
fn cors(config: &crate::config::Config) -> tower_http::cors::CorsLayer {
    use axum::http::{HeaderName, HeaderValue, Method, header};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let origins = &config.cors_allowed_origins;
    if origins.is_empty() {
        return CorsLayer::new();
    }
    let allow_origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    CorsLayer::new()
        .allow_origin(allow_origin)
        .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::ACCEPT,
            HeaderName::from_static("last-event-id"),
        ])
        .expose_headers([header::RETRY_AFTER, header::WWW_AUTHENTICATE])
        .max_age(std::time::Duration::from_secs(600))
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no route for {}", uri.path()))
}

async fn method_not_allowed(uri: Uri) -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!("method not allowed on {}", uri.path()),
    )
}

fn panic_response(_panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    ApiError::new(ErrorCode::Internal, "internal error").into_response()
}

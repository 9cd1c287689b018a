//! Liveness and readiness: `/healthz` answers as soon as the process serves HTTP (before
//! recovery); `/readyz` only once recovery has finished, while the data disk has room, and until
//! shutdown begins (see `status.rs`), so a load balancer sends traffic only to a server that can
//! take it and a startup probe can wait out a long recovery.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use strata_openapi::{Health, Readiness};

use super::AppState;
use super::paths;
use crate::status::ServerStatus;

/// Liveness.
#[utoipa::path(get, path = paths::HEALTHZ, tag = "health",
    responses((status = 200, description = "The process is up", body = Health)))]
pub async fn healthz(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok".to_string(),
        io_backend: state.io_backend.clone(),
    })
}

/// Readiness.
#[utoipa::path(get, path = paths::READYZ, tag = "health", responses(
    (status = 200, description = "Recovered and serving", body = Readiness),
    (status = 503, description = "Recovering, restoring, disk full or shutting down; `status` and `reason` say which", body = Readiness)))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    readiness(&state.status)
}

/// The `/readyz` answer for `status` (also served before the API exists).
pub fn readiness(status: &ServerStatus) -> (StatusCode, Json<Readiness>) {
    let body = status.readiness();
    let code = if body.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body))
}

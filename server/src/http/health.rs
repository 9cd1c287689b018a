//! Liveness and readiness: `/healthz` answers as soon as the process serves HTTP; `/readyz` only
//! once recovery has finished and until shutdown begins, so a load balancer sends traffic only
//! to a server that can take it.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use strata_openapi::{Health, Readiness};

use super::AppState;

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The process is up", body = Health)))]
pub async fn healthz(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok".to_string(),
        io_backend: state.io_backend.clone(),
    })
}

/// Readiness.
#[utoipa::path(get, path = "/readyz", tag = "health", responses(
    (status = 200, description = "Recovered and serving", body = Readiness),
    (status = 503, description = "Starting or shutting down", body = Readiness)))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    if state.is_ready() {
        (
            StatusCode::OK,
            Json(Readiness {
                ready: true,
                status: "ready".to_string(),
            }),
        )
    } else {
        let body = Readiness {
            ready: false,
            status: "shutting down".to_string(),
        };
        (StatusCode::SERVICE_UNAVAILABLE, Json(body))
    }
}

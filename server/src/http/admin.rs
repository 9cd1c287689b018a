//! Access management over HTTP: API keys (`/v1/auth/keys`) and ACLs (`/v1/acls`). Every route
//! needs `admin` on the cluster; the broker checks it.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use strata_openapi::ErrorBody;
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::created::Created;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::paths;
use crate::security::Caller;
use crate::security::acl::{AclRule, Operation, PatternType, Permission, ResourceType};
use crate::security::keys::StoredKey;

/// A new API key's owner.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKeyRequest {
    /// The principal the key authenticates: 1-255 printable ASCII characters, no spaces.
    pub principal: String,
}

/// An API key without its secret.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ApiKeyInfo {
    /// Names the key for revocation.
    pub id: String,
    /// Who the key authenticates.
    pub principal: String,
    /// When it was made, ms since the epoch.
    pub created_at_ms: i64,
}

/// A new API key with its token: the only time the token is shown.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CreatedApiKey {
    /// The key.
    #[serde(flatten)]
    pub key: ApiKeyInfo,
    /// Send as `Authorization: Bearer <token>`. Only its SHA-256 is stored: keep it safe.
    pub token: String,
}

/// Every API key.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ApiKeyList {
    /// The keys, oldest first.
    pub keys: Vec<ApiKeyInfo>,
}

/// Every ACL rule.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AclList {
    /// Rules managed through this API.
    pub acls: Vec<AclRule>,
    /// Rules fixed by the server's config file (`auth_acls`); change them there.
    pub config_acls: Vec<AclRule>,
}

/// How many rules a delete removed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AclDeleteResult {
    /// Managed rules equal to the one given (0 or 1).
    pub deleted: usize,
}

/// The rule to delete, as query parameters.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AclQuery {
    /// Principal, or `*`.
    pub principal: String,
    /// Topic, group or cluster.
    pub resource_type: ResourceType,
    /// Name or prefix.
    pub resource_name: String,
    /// Literal or prefix.
    pub pattern_type: PatternType,
    /// The operation.
    pub operation: Operation,
    /// Allow or deny.
    pub permission: Permission,
}

fn info(key: StoredKey) -> ApiKeyInfo {
    ApiKeyInfo {
        id: key.id,
        principal: key.principal,
        created_at_ms: key.created_at_ms,
    }
}

/// Create an API key for a principal. The answer holds the token; it is never shown again.
///
/// Needs `admin` on the cluster.
#[utoipa::path(post, path = paths::AUTH_KEYS, tag = "security", request_body = CreateKeyRequest,
    responses(
        (status = 201, description = "Created", body = CreatedApiKey,
            headers(("Location" = String, description = "Path of the new key (to revoke it)"))),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "Invalid principal", body = ErrorBody),
        (status = 503, description = "The key file could not be written", body = ErrorBody),
    ))]
pub async fn create_key(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<CreateKeyRequest>,
) -> Result<Created<CreatedApiKey>, ApiError> {
    let (key, token) = state.broker.create_key(&caller, &request.principal)?;
    let key = info(key);
    let id = key.id.clone();
    Ok(Created::at(
        paths::AUTH_KEY,
        &[("id", &id)],
        CreatedApiKey { key, token },
    ))
}

/// List API keys (never their tokens).
///
/// Needs `admin` on the cluster.
#[utoipa::path(get, path = paths::AUTH_KEYS, tag = "security",
    responses((status = 200, description = "Keys", body = ApiKeyList)))]
pub async fn list_keys(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<ApiKeyList>, ApiError> {
    let keys = state.broker.list_keys(&caller)?;
    Ok(Json(ApiKeyList {
        keys: keys.into_iter().map(info).collect(),
    }))
}

/// Revoke an API key: the next request with its token gets 401.
///
/// Needs `admin` on the cluster.
#[utoipa::path(delete, path = paths::AUTH_KEY, tag = "security",
    params(("id" = String, Path, description = "Key id")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 404, description = "No such key (`key_not_found`)", body = ErrorBody),
        (status = 503, description = "The key file could not be written", body = ErrorBody),
    ))]
pub async fn revoke_key(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    state.broker.revoke_key(&caller, &id)?;
    Ok(StatusCode::NO_CONTENT)
}

/// List ACL rules: those managed here and those from the config file.
///
/// Needs `admin` on the cluster.
#[utoipa::path(get, path = paths::ACLS, tag = "security",
    responses((status = 200, description = "Rules", body = AclList)))]
pub async fn list_acls(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<AclList>, ApiError> {
    let listing = state.broker.list_acls(&caller)?;
    Ok(Json(AclList {
        acls: listing.managed,
        config_acls: listing.configured,
    }))
}

/// Add an ACL rule. Deny rules win over allow rules; nothing is allowed that no rule allows.
/// Adding a rule that exists already changes nothing (200 instead of 201).
///
/// Needs `admin` on the cluster.
#[utoipa::path(post, path = paths::ACLS, tag = "security", request_body = AclRule,
    responses(
        (status = 201, description = "Added", body = AclRule),
        (status = 200, description = "The rule existed already", body = AclRule),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "A rule that cannot mean anything", body = ErrorBody),
        (status = 503, description = "The ACL file could not be written", body = ErrorBody),
    ))]
pub async fn add_acl(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(rule): ApiJson<AclRule>,
) -> Result<(StatusCode, Json<AclRule>), ApiError> {
    let added = state.broker.add_acl(&caller, rule.clone())?;
    let status = if added {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(rule)))
}

/// Delete the managed ACL rule equal to the one given.
///
/// Needs `admin` on the cluster.
#[utoipa::path(delete, path = paths::ACLS, tag = "security", params(AclQuery),
    responses(
        (status = 200, description = "How many rules were deleted", body = AclDeleteResult),
        (status = 400, description = "Bad query", body = ErrorBody),
        (status = 503, description = "The ACL file could not be written", body = ErrorBody),
    ))]
pub async fn delete_acl(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<AclQuery>,
) -> Result<Json<AclDeleteResult>, ApiError> {
    let rule = AclRule {
        principal: query.principal,
        resource_type: query.resource_type,
        resource_name: query.resource_name,
        pattern_type: query.pattern_type,
        operation: query.operation,
        permission: query.permission,
    };
    let deleted = state.broker.remove_acl(&caller, &rule)?;
    Ok(Json(AclDeleteResult { deleted }))
}

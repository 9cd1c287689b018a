//! The OpenAPI 3.1 document, generated from the handlers' annotations, and its routes:
//! `/openapi.json` and Swagger UI at `/docs` (assets compiled into the binary, no CDN).

use axum::Router;
use utoipa::OpenApi;
use utoipa_swagger_ui::SwaggerUi;

use super::AppState;

/// The API description.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Strata",
        description = "Kafka-style topics, partitions and offsets over plain HTTP.\n\n\
            Errors always have the body `{\"error\": {\"code\", \"message\", \"retryable\"}}` with \
            a stable snake_case `code`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    servers((url = "/", description = "The server that serves this document")),
    paths(
        super::health::healthz,
        super::health::readyz,
        crate::metrics::serve,
        super::topics::create_topic,
        super::topics::list_topics,
        super::topics::describe_topic,
        super::topics::update_configs,
        super::topics::add_partitions,
        super::topics::delete_topic,
        super::topics::list_segments,
        super::holds::place,
        super::holds::list,
        super::holds::release,
        super::produce::produce_to_topic,
        super::produce::produce_to_partition,
        super::fetch::fetch,
        super::offsets::offsets,
        super::offsets::delete_records,
        super::producers::init_producer,
        super::groups::list_groups,
        super::groups::describe_group,
        super::groups::join,
        super::groups::heartbeat,
        super::groups::leave,
        super::groups::member_fetch,
        super::groups::commit,
        super::groups::get_offsets,
        super::groups::delete_offsets,
        super::groups::reset_offsets,
        super::groups::lag,
        super::admin::create_key,
        super::admin::list_keys,
        super::admin::revoke_key,
        super::admin::list_acls,
        super::admin::add_acl,
        super::admin::delete_acl,
    ),
    components(schemas(
        strata_openapi::ConfigValue,
        strata_openapi::ConfigUpdateValue,
        strata_openapi::TimestampOffset,
        // Referenced by query parameters, which utoipa does not collect on its own.
        strata_openapi::ValueFormat,
        strata_openapi::Acks,
        strata_openapi::AnswerShape,
    )),
    tags(
        (name = "topics", description = "Create, inspect, change and delete topics"),
        (name = "records", description = "Produce and fetch records, look up offsets"),
        (name = "groups", description = "Consumer groups: membership, reading as a member, committed offsets, lag"),
        (name = "producers", description = "Identities for idempotent produce"),
        (name = "health", description = "Liveness and readiness"),
        (name = "security", description = "API keys and access control lists (admin only)"),
    )
)]
pub struct ApiDoc;

/// The document: the annotations, plus what only the server knows exactly (every topic
/// config key with its type and bounds, from `topics::config`), as JSON. Requests take
/// `null` for a key (its default); descriptions never show it.
pub fn document() -> serde_json::Value {
    let mut value = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    for (schema, nullable) in [
        ("CreateTopicRequest", true),
        ("TopicDescription", false),
        ("UpdateTopicConfigsRequest", true),
    ] {
        if let Some(configs) = value
            .pointer_mut(&format!("/components/schemas/{schema}/properties/configs"))
            .and_then(serde_json::Value::as_object_mut)
        {
            let description = configs.get("description").cloned();
            let mut precise = crate::topics::config::TopicConfig::json_schema(nullable);
            if let (Some(description), Some(precise)) = (description, precise.as_object_mut()) {
                precise.insert("description".into(), description);
            }
            *configs = precise.as_object().cloned().unwrap_or_default();
        }
    }
    declare_unsigned_bounds(&mut value);
    declare_security(&mut value);
    declare_query_refusals(&mut value);
    // A commit from a member names both; one without the other is refused.
    if let Some(commit) = value
        .pointer_mut("/components/schemas/CommitOffsetsRequest")
        .and_then(serde_json::Value::as_object_mut)
    {
        commit.insert(
            "anyOf".into(),
            serde_json::json!([
                {"required": ["member_id", "generation"]},
                {"properties": {"member_id": {"not": {}}, "generation": {"not": {}}}}
            ]),
        );
    }
    value
}

/// Bearer API keys: the scheme, a requirement that is optional (`{}`) because a server with
/// `auth_mode = none` needs none, and on every `/v1` operation the answers any of them can
/// give: 401 and 403, 429 (quotas apply to every request), 503 (starting, overloaded, storage),
/// and 408 where a body is read.
fn declare_security(value: &mut serde_json::Value) {
    if let Some(components) = value
        .pointer_mut("/components")
        .and_then(serde_json::Value::as_object_mut)
    {
        components.insert(
            "securitySchemes".into(),
            serde_json::json!({"bearerAuth": {
                "type": "http",
                "scheme": "bearer",
                "description": "An API key made by `strata auth create-key` or `POST /v1/auth/keys`; \
                    required when the server runs with `auth_mode = api_key`."
            }}),
        );
    }
    if let Some(root) = value.as_object_mut() {
        root.insert(
            "security".into(),
            serde_json::json!([{"bearerAuth": []}, {}]),
        );
    }
    let Some(paths) = value
        .pointer_mut("/paths")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        // Health checks and the API description need no key; `/metrics` does (ADR 0008).
        let public = !path.starts_with("/v1/") && path != super::paths::METRICS;
        for operation in item
            .as_object_mut()
            .into_iter()
            .flat_map(|o| o.values_mut())
        {
            let Some(operation) = operation.as_object_mut() else {
                continue;
            };
            if public {
                operation.insert("security".into(), serde_json::json!([{}]));
                continue;
            }
            let reads_body = operation.contains_key("requestBody");
            let Some(responses) = operation
                .get_mut("responses")
                .and_then(serde_json::Value::as_object_mut)
            else {
                continue;
            };
            for (status, description) in [
                (
                    "401",
                    "No valid API key (`unauthenticated`); only with `auth_mode = api_key`",
                ),
                (
                    "403",
                    "The caller may not do this (`forbidden`); the message names the operation and resource",
                ),
                (
                    "429",
                    "A quota of the caller is used up, or it has too many open streams (`quota_exceeded`); nothing took effect; retry after `Retry-After` seconds",
                ),
                (
                    "503",
                    "Starting up or shutting down (`unavailable`), overloaded (`busy`), or storage failed (`storage_unavailable`, `disk_full`); retry after `Retry-After`",
                ),
                (
                    "408",
                    "The request body did not arrive within the server's time limit (`request_timeout`)",
                ),
            ] {
                if status == "408" && !reads_body {
                    continue;
                }
                responses
                    .entry(status)
                    .or_insert_with(|| error_response(description));
            }
        }
    }
}

/// Every `/v1` operation without query parameters refuses a query string with 400 `bad_query`
/// (`query_guard`, which reads the same rule from this document): say so where it answers.
fn declare_query_refusals(value: &mut serde_json::Value) {
    const REFUSAL: &str =
        "A query string was sent; this operation takes no query parameters (`bad_query`)";
    let free = super::query_guard::QueryFree::from_document(value);
    let Some(paths) = value
        .pointer_mut("/paths")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, operation) in item.iter_mut() {
            let Ok(method) = axum::http::Method::from_bytes(method.to_ascii_uppercase().as_bytes())
            else {
                continue;
            };
            if !free.takes_none(&method, path) {
                continue;
            }
            let Some(responses) = operation
                .get_mut("responses")
                .and_then(serde_json::Value::as_object_mut)
            else {
                continue;
            };
            match responses
                .get_mut("400")
                .and_then(serde_json::Value::as_object_mut)
            {
                Some(bad_request) => {
                    let said = bad_request
                        .get("description")
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    if !said.contains("bad_query") {
                        let joined = if said.is_empty() {
                            REFUSAL.to_string()
                        } else {
                            format!(
                                "{said}; or a query string was sent, which this operation does \
                                 not take (`bad_query`)"
                            )
                        };
                        bad_request.insert("description".into(), joined.into());
                    }
                }
                None => {
                    responses.insert("400".into(), error_response(REFUSAL));
                }
            }
        }
    }
}

/// A response with `description` and the error body.
fn error_response(description: &str) -> serde_json::Value {
    serde_json::json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    })
}

/// utoipa declares `u32` as `int32` with minimum 0, but the server takes every `u32`: declare
/// it as an `int64` of at most 2^32-1. `u64` stays `int64` (the server refuses integers above
/// 2^63-1, Kafka's int64 offsets and times).
fn declare_unsigned_bounds(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(fields) => {
            let unsigned_int32 = fields.get("format").and_then(|f| f.as_str()) == Some("int32")
                && fields.get("minimum").and_then(serde_json::Value::as_i64) == Some(0)
                && !fields.contains_key("maximum");
            if unsigned_int32 {
                fields.insert("format".into(), "int64".into());
                fields.insert("maximum".into(), u32::MAX.into());
            }
            fields.values_mut().for_each(declare_unsigned_bounds);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(declare_unsigned_bounds),
        _ => {}
    }
}

/// The document as pretty JSON, as checked in at `openapi/openapi.json`.
pub fn spec_json() -> String {
    let mut text = serde_json::to_string_pretty(&document())
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}

/// `/openapi.json` and `/docs`.
pub fn routes() -> Router<AppState> {
    Router::new().merge(SwaggerUi::new("/docs").external_url_unchecked("/openapi.json", document()))
}

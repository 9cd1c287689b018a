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
    servers((url = "http://localhost:8080", description = "A local server on its defaults")),
    paths(
        super::health::healthz,
        super::health::readyz,
        super::topics::create_topic,
        super::topics::list_topics,
        super::topics::describe_topic,
        super::topics::update_configs,
        super::topics::add_partitions,
        super::topics::delete_topic,
        super::topics::list_segments,
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
    ),
    components(schemas(
        strata_openapi::ConfigValue,
        strata_openapi::ConfigUpdateValue,
        strata_openapi::TimestampOffset,
        // Referenced by query parameters, which utoipa does not collect on its own.
        strata_openapi::ValueFormat,
        strata_openapi::Acks,
    )),
    tags(
        (name = "topics", description = "Create, inspect, change and delete topics"),
        (name = "records", description = "Produce and fetch records, look up offsets"),
        (name = "groups", description = "Consumer groups: membership, reading as a member, committed offsets, lag"),
        (name = "producers", description = "Identities for idempotent produce"),
        (name = "health", description = "Liveness and readiness"),
    )
)]
pub struct ApiDoc;

/// The document as pretty JSON, as checked in at `openapi/openapi.json`.
pub fn spec_json() -> String {
    let mut text = ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}

/// `/openapi.json` and `/docs`.
pub fn routes() -> Router<AppState> {
    Router::new().merge(SwaggerUi::new("/docs").url("/openapi.json", ApiDoc::openapi()))
}

//! The OpenAPI contract: the checked-in `openapi/openapi.json` is exactly what the code
//! generates, the router and the document list the same operations, and every operation
//! documents its error responses with the `ErrorBody` schema.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request};
use serde_json::Value;
use strata_server::clock::SystemClock;
use strata_server::config::Config;
use strata_server::http::openapi::spec_json;
use strata_server::http::router;
use strata_server::io::IoBackendChoice;
use strata_server::server::build_state;
use tower::ServiceExt;

const UPDATE: &str = "cargo run -p strata-server --bin strata -- openapi > openapi/openapi.json";

/// Routes that serve the document itself rather than API operations.
const DOC_ROUTES: &[&str] = &["/openapi.json", "/docs"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the server crate lives in the workspace")
        .to_path_buf()
}

fn spec() -> Value {
    serde_json::from_str(&spec_json()).expect("the generated spec is JSON")
}

const METHODS: &[&str] = &["get", "put", "post", "delete", "patch"];

/// `(path, method)` of every operation in the document.
fn operations(spec: &Value) -> BTreeSet<(String, String)> {
    let mut operations = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for method in METHODS {
            if item.get(*method).is_some() {
                operations.insert((path.clone(), (*method).to_string()));
            }
        }
    }
    operations
}

#[test]
fn checked_in_spec_matches_the_code() {
    let path = workspace().join("openapi/openapi.json");
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = spec_json();
    if checked_in != generated {
        let line = checked_in
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or_else(
                || checked_in.lines().count().min(generated.lines().count()) + 1,
                |i| i + 1,
            );
        panic!(
            "{} differs from the spec the code generates (first difference at line {line}).\n\
             Regenerate it from the workspace root and commit the result:\n\n    {UPDATE}\n",
            path.display()
        );
    }
}

/// The paths given to `.route(...)` in the router's source (axum cannot list its routes): the
/// router names constants of `http/paths.rs`, which hold the strings.
fn router_paths() -> BTreeSet<String> {
    let read = |file: &str| {
        std::fs::read_to_string(workspace().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let constants: std::collections::BTreeMap<String, String> = read("server/src/http/paths.rs")
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("pub const ")?;
            let (name, rest) = rest.split_once(": &str = \"")?;
            let (value, _) = rest.split_once('"')?;
            Some((name.to_string(), value.to_string()))
        })
        .collect();
    let source = read("server/src/http/mod.rs");
    let mut paths = BTreeSet::new();
    for piece in source.split(".route(").skip(1) {
        let name: String = piece
            .trim_start()
            .strip_prefix("paths::")
            .expect("routes name a constant of http/paths.rs")
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        let path = constants
            .get(&name)
            .unwrap_or_else(|| panic!("no constant {name}"));
        paths.insert(path.clone());
    }
    assert!(paths.len() >= 5, "parsed too few routes: {paths:?}");
    paths
}

#[test]
fn router_paths_and_spec_paths_are_the_same() {
    let spec = spec();
    let documented: BTreeSet<String> = spec["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .cloned()
        .collect();
    let routed = router_paths();
    let undocumented: Vec<_> = routed.difference(&documented).collect();
    let unrouted: Vec<_> = documented.difference(&routed).collect();
    assert!(
        undocumented.is_empty(),
        "routes missing from the spec (add #[utoipa::path] and list the handler in ApiDoc): \
         {undocumented:?}"
    );
    assert!(
        unrouted.is_empty(),
        "spec paths with no route: {unrouted:?}"
    );
    for path in DOC_ROUTES {
        assert!(
            !documented.contains(*path),
            "{path} is not an API operation"
        );
    }
}

/// The concrete URL for a templated path (a topic that does not exist, partition 0).
fn concrete(path: &str) -> String {
    path.replace("{topic}", "no-such-topic")
        .replace("{partition}", "0")
        .replace("{group}", "no-such-group")
        .replace("{member}", "no-such-member")
}

/// The real router over a fresh data directory (kept alive by the returned guard).
async fn test_app() -> (tempfile::TempDir, axum::Router) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        io_backend: IoBackendChoice::Sync,
        ..Config::default()
    };
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let status = Arc::new(strata_server::status::ServerStatus::new());
    let state = build_state(config, Arc::new(SystemClock), shutdown, status)
        .await
        .expect("state");
    (dir, router(state))
}

#[tokio::test]
async fn every_documented_method_is_routed_and_no_other() {
    let (_dir, app) = test_app().await;
    let documented = operations(&spec());
    let paths: BTreeSet<&String> = documented.iter().map(|(p, _)| p).collect();
    for path in paths {
        for method in METHODS {
            let request = Request::builder()
                .method(Method::from_bytes(method.to_uppercase().as_bytes()).expect("method"))
                .uri(concrete(path))
                .header("content-type", "application/json")
                .body(Body::from("{}"))
                .expect("request");
            let response = app.clone().oneshot(request).await.expect("infallible");
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .expect("body");
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let code = body["error"]["code"].as_str().unwrap_or("");
            let routed = code != "not_found" && code != "method_not_allowed";
            let is_documented = documented.contains(&(path.clone(), (*method).to_string()));
            assert_eq!(
                routed,
                is_documented,
                "{} {path}: routed = {routed} but documented = {is_documented} (answer {body})",
                method.to_uppercase()
            );
        }
    }
}

fn is_error_body(response: &Value) -> bool {
    response["content"]["application/json"]["schema"]["$ref"] == "#/components/schemas/ErrorBody"
}

#[test]
fn every_operation_documents_its_errors_with_error_body() {
    let spec = spec();
    let mut problems: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (path, method) in operations(&spec) {
        let operation = &spec["paths"][&path][&method];
        let name = format!("{} {path}", method.to_uppercase());
        let responses = operation["responses"].as_object().expect("responses");
        let mut problem = |text: String| problems.entry(name.clone()).or_default().push(text);
        for (status, response) in responses {
            let status: u16 = status.parse().expect("numeric status");
            // Readiness answers 503 with its own body: that is its documented purpose.
            if status >= 400 && !(path == "/readyz" && status == 503) && !is_error_body(response) {
                problem(format!("{status} does not use ErrorBody"));
            }
        }
        let has = |status: &str| responses.contains_key(status);
        let mut required: Vec<&str> = Vec::new();
        let parameters = operation["parameters"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if path.contains("{topic}") {
            required.push("404");
        }
        // Integer path parameters and query parameters can fail to parse.
        if path.contains("{partition}") || parameters.iter().any(|p| p["in"] == "query") {
            required.push("400");
        }
        if let Some(body) = operation.get("requestBody") {
            // Malformed body, over max_request_bytes, wrong Content-Type, invalid values.
            required.extend(["400", "413", "415", "422"]);
            assert!(
                body["content"].get("application/json").is_some(),
                "{name}: JSON request body"
            );
        }
        for status in required {
            if !has(status) {
                problem(format!("{status} is not documented"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "operations with undocumented or mis-typed error responses: {problems:#?}"
    );
}

#[tokio::test]
async fn swagger_ui_is_served_from_the_binary() {
    let (_dir, app) = test_app().await;
    for (uri, needle) in [
        ("/docs/", "swagger-ui"),
        ("/docs/swagger-ui-bundle.js", "SwaggerUIBundle"),
        ("/openapi.json", "\"openapi\""),
    ] {
        let request = Request::builder()
            .uri(uri)
            .body(Body::empty())
            .expect("request");
        let response = app.clone().oneshot(request).await.expect("infallible");
        assert_eq!(response.status().as_u16(), 200, "{uri}");
        let bytes = axum::body::to_bytes(response.into_body(), 16 << 20)
            .await
            .expect("body");
        assert!(
            String::from_utf8_lossy(&bytes).contains(needle),
            "{uri} lacks {needle}"
        );
    }
}

//! Refuses a query string on every operation whose OpenAPI description declares no query
//! parameter. A parameter the server does not read must not pass silently: a user who sends
//! `DELETE /v1/groups/g/offsets?topic=t` expects that topic's offsets to go, not the whole
//! group's. The OpenAPI document is the one list of what each operation reads, so the guard
//! takes it from there and cannot drift from the handlers; operations that do read a query
//! refuse unknown names themselves (`ApiQuery` denies unknown fields).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use strata_openapi::ErrorCode;

use super::error::ApiError;

/// Operations that take no query parameters: the methods of each path template.
#[derive(Debug, Clone, Default)]
pub struct QueryFree(Arc<HashMap<String, Vec<Method>>>);

impl QueryFree {
    /// Every `/v1` operation of `document` (an OpenAPI 3 document) without a query parameter,
    /// at path or operation level.
    pub fn from_document(document: &Value) -> Self {
        let mut free: HashMap<String, Vec<Method>> = HashMap::new();
        let Some(paths) = document.get("paths").and_then(Value::as_object) else {
            return Self::default();
        };
        // Probes and scrapes are left alone: a scraper's configured parameters must not fail
        // a scrape.
        for (path, item) in paths.iter().filter(|(path, _)| path.starts_with("/v1/")) {
            let path_level = declares_query(item);
            let Some(item) = item.as_object() else {
                continue;
            };
            for (method, operation) in item {
                let Ok(method) = Method::from_bytes(method.to_ascii_uppercase().as_bytes()) else {
                    continue;
                };
                if !path_level && !declares_query(operation) {
                    free.entry(path.clone()).or_default().push(method);
                }
            }
        }
        Self(Arc::new(free))
    }

    pub(super) fn takes_none(&self, method: &Method, path: &str) -> bool {
        // HEAD is served by the GET handler, which reads what GET reads.
        let method = if method == Method::HEAD {
            &Method::GET
        } else {
            method
        };
        self.0
            .get(path)
            .is_some_and(|methods| methods.contains(method))
    }
}

fn declares_query(item: &Value) -> bool {
    item.get("parameters")
        .and_then(Value::as_array)
        .is_some_and(|parameters| {
            parameters
                .iter()
                .any(|p| p.get("in").and_then(Value::as_str) == Some("query"))
        })
}

/// The middleware (a route layer, so the matched path is known).
pub async fn refuse_undeclared_query(
    axum::extract::State(free): axum::extract::State<QueryFree>,
    request: Request,
    next: Next,
) -> Response {
    let query = request.uri().query().filter(|query| !query.is_empty());
    if let (Some(query), Some(path)) = (query, request.extensions().get::<MatchedPath>())
        && free.takes_none(request.method(), path.as_str())
    {
        return ApiError::new(
            ErrorCode::BadQuery,
            format!("this endpoint takes no query parameters, got \"{query}\""),
        )
        .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_operations_without_a_query_parameter_are_listed() {
        let document = json!({"paths": {
            "/v1/a": {
                "get": {"parameters": [{"in": "query", "name": "x"}]},
                "delete": {"parameters": [{"in": "path", "name": "a"}]},
                "post": {}
            },
            "/v1/b": {
                "parameters": [{"in": "query", "name": "y"}],
                "get": {}
            },
            "/metrics": {"get": {}}
        }});
        let free = QueryFree::from_document(&document);
        assert!(!free.takes_none(&Method::GET, "/v1/a"));
        assert!(!free.takes_none(&Method::HEAD, "/v1/a"));
        assert!(free.takes_none(&Method::DELETE, "/v1/a"));
        assert!(free.takes_none(&Method::POST, "/v1/a"));
        assert!(!free.takes_none(&Method::GET, "/v1/b"));
        assert!(!free.takes_none(&Method::GET, "/metrics"));
    }
}

//! OpenAPI 3.1 -> 3.0 for code generators that only read 3.0 (progenitor does).
//!
//! Strata's contract is 3.1 (JSON Schema 2020-12). The conversion keeps every operation and
//! every type a JSON client needs and rewrites only what 3.0 cannot say:
//! - `type: [T, "null"]` becomes `type: T, nullable: true`; a list of several non-null types
//!   (a config value that may be a string, number or boolean) becomes an untyped schema;
//! - `oneOf: [{type: null}, X]` (an optional reference) becomes `allOf: [X], nullable: true`;
//! - `examples: [..]` inside a schema becomes `example` (the first one);
//! - keywords 3.0 does not know (`propertyNames`, `const`, `not`, license `identifier`) go;
//! - of several media types, only `application/json` stays: the Rust client is a JSON client
//!   (raw RecordBatch bodies and server-sent events have their own documented paths).

use serde_json::{Map, Value};

/// Rewrites a 3.1 document in place into a 3.0.3 document.
pub fn to_openapi_30(document: &mut Value) {
    if let Some(root) = document.as_object_mut() {
        root.insert("openapi".into(), Value::from("3.0.3"));
        if let Some(license) = root
            .get_mut("info")
            .and_then(|info| info.get_mut("license"))
            .and_then(Value::as_object_mut)
        {
            license.remove("identifier");
        }
        if let Some(paths) = root.get_mut("paths").and_then(Value::as_object_mut) {
            for operations in paths.values_mut().filter_map(Value::as_object_mut) {
                for operation in operations.values_mut() {
                    keep_only_json(operation);
                }
            }
        }
    }
    walk(document);
    if let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) {
        for operations in paths.values_mut().filter_map(Value::as_object_mut) {
            for operation in operations.values_mut() {
                not_null_parameters(operation);
            }
        }
    }
}

/// A parameter is a string on the wire and never JSON `null`: an optional one is simply left
/// out. 3.1's `[T, "null"]` on a parameter would otherwise become a `nullable` the generator
/// wraps in a second `Option`.
fn not_null_parameters(operation: &mut Value) {
    let Some(parameters) = operation
        .get_mut("parameters")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for schema in parameters
        .iter_mut()
        .filter_map(|p| p.get_mut("schema"))
        .filter_map(Value::as_object_mut)
    {
        schema.remove("nullable");
    }
}

/// Keeps `application/json` where a request body or response offers several media types.
fn keep_only_json(operation: &mut Value) {
    let Some(operation) = operation.as_object_mut() else {
        return;
    };
    let mut contents: Vec<&mut Value> = Vec::new();
    for (key, part) in operation.iter_mut() {
        match key.as_str() {
            "requestBody" => contents.extend(part.get_mut("content")),
            "responses" => {
                if let Some(responses) = part.as_object_mut() {
                    contents.extend(responses.values_mut().filter_map(|r| r.get_mut("content")));
                }
            }
            _ => {}
        }
    }
    for content in contents.into_iter().filter_map(Value::as_object_mut) {
        if content.len() > 1 && content.contains_key("application/json") {
            content.retain(|media_type, _| media_type == "application/json");
        }
    }
}

/// Rewrites every schema object found anywhere below `value`.
fn walk(value: &mut Value) {
    match value {
        Value::Object(object) => {
            rewrite_schema(object);
            for child in object.values_mut() {
                walk(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(walk),
        _ => {}
    }
}

fn rewrite_schema(object: &mut Map<String, Value>) {
    if let Some(Value::Array(kinds)) = object.get("type").cloned() {
        let nullable = kinds.iter().any(|k| k == "null");
        let others: Vec<Value> = kinds.into_iter().filter(|k| k != "null").collect();
        match others.as_slice() {
            [single] => {
                object.insert("type".into(), single.clone());
            }
            _ => {
                object.remove("type");
            }
        }
        if nullable {
            object.insert("nullable".into(), Value::Bool(true));
            if let Some(Value::Array(values)) = object.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
        }
    }
    for combinator in ["oneOf", "anyOf"] {
        let Some(Value::Array(options)) = object.get(combinator) else {
            continue;
        };
        let is_null = |o: &Value| o.get("type").is_some_and(|t| t == "null");
        if options.iter().any(is_null) {
            let rest: Vec<Value> = options.iter().filter(|o| !is_null(o)).cloned().collect();
            object.remove(combinator);
            let key = if rest.len() == 1 { "allOf" } else { combinator };
            object.insert(key.into(), Value::Array(rest));
            object.insert("nullable".into(), Value::Bool(true));
        }
    }
    // `{"not": {}}` (a property that must be absent) and `anyOf`s built from it say what 3.0
    // cannot; the server still refuses such requests.
    let says_absent = |o: &Value| {
        o.get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.values().any(|s| s.get("not").is_some()))
    };
    if let Some(Value::Array(options)) = object.get("anyOf")
        && options.iter().any(says_absent)
    {
        object.remove("anyOf");
    }
    object.remove("propertyNames");
    if let Some(constant) = object.remove("const") {
        object.insert("enum".into(), Value::Array(vec![constant]));
    }
    let examples_is_schema_list = object.get("examples").is_some_and(Value::is_array);
    if examples_is_schema_list
        && let Some(Value::Array(examples)) = object.remove("examples")
        && let Some(first) = examples.into_iter().next()
    {
        object.insert("example".into(), first);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nullable_types_become_the_30_keyword() {
        let mut doc = json!({"openapi": "3.1.0", "components": {"schemas": {
            "A": {"type": ["integer", "null"], "minimum": 0},
            "B": {"type": ["string", "integer", "number", "boolean"]},
            "C": {"type": ["string", "null"], "enum": ["x", null]},
        }}});
        to_openapi_30(&mut doc);
        assert_eq!(doc["openapi"], "3.0.3");
        let schemas = &doc["components"]["schemas"];
        assert_eq!(
            schemas["A"],
            json!({"type": "integer", "minimum": 0, "nullable": true})
        );
        assert_eq!(schemas["B"], json!({}));
        assert_eq!(
            schemas["C"],
            json!({"type": "string", "nullable": true, "enum": ["x"]})
        );
    }

    #[test]
    fn optional_reference_becomes_nullable_all_of() {
        let mut doc = json!({"properties": {"x": {"oneOf": [{"type": "null"}, {"$ref": "#/R"}]}}});
        to_openapi_30(&mut doc);
        assert_eq!(
            doc["properties"]["x"],
            json!({"allOf": [{"$ref": "#/R"}], "nullable": true})
        );
    }

    #[test]
    fn examples_constants_and_absent_properties_are_rewritten() {
        let mut doc = json!({"components": {"schemas": {"S": {
            "type": "object",
            "examples": [{"a": 1}, {"a": 2}],
            "propertyNames": {"pattern": "^x"},
            "properties": {"k": {"const": "v"}},
            "anyOf": [{"required": ["a"]}, {"properties": {"a": {"not": {}}}}],
        }}}});
        to_openapi_30(&mut doc);
        assert_eq!(
            doc["components"]["schemas"]["S"],
            json!({"type": "object", "example": {"a": 1}, "properties": {"k": {"enum": ["v"]}}})
        );
    }

    #[test]
    fn parameters_are_never_nullable() {
        let mut doc = json!({"paths": {"/r": {"get": {"parameters": [
            {"name": "Last-Event-ID", "in": "header", "schema": {"type": ["integer", "null"]}}
        ]}}}});
        to_openapi_30(&mut doc);
        assert_eq!(
            doc["paths"]["/r"]["get"]["parameters"][0]["schema"],
            json!({"type": "integer"})
        );
    }

    #[test]
    fn only_json_stays_where_several_media_types_are_offered() {
        let mut doc = json!({"paths": {"/r": {"get": {
            "requestBody": {"content": {"application/json": {}, "application/x-raw": {}}},
            "responses": {
                "200": {"content": {"application/json": {}, "text/event-stream": {}}},
                "204": {"description": "none"},
            }
        }}}});
        to_openapi_30(&mut doc);
        let get = &doc["paths"]["/r"]["get"];
        assert_eq!(
            get["requestBody"]["content"],
            json!({"application/json": {}})
        );
        assert_eq!(
            get["responses"]["200"]["content"],
            json!({"application/json": {}})
        );
    }
}

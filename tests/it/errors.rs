//! Every client mistake gets a 4xx with our error body and a stable code, and none of them
//! changes the data already stored.

use serde_json::json;
use strata_tests::{Api, Server, ServerOptions, expect_error, ok_json};

const RECORD_BATCHES: &str = "application/vnd.strata.record-batches";
const MAX_REQUEST_BYTES: usize = 4096;

async fn raw_bytes(api: &Api, topic: &str, partition: u32) -> bytes::Bytes {
    let response = api
        .client
        .get(api.url(&format!(
            "/v1/topics/{topic}/partitions/{partition}/records?offset=0"
        )))
        .header("accept", RECORD_BATCHES)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.bytes().await.unwrap()
}

#[tokio::test]
async fn client_mistakes_get_error_bodies_with_stable_codes_and_leave_data_unchanged() {
    let server = Server::start(ServerOptions::with_args(&[
        "--max-request-bytes",
        &MAX_REQUEST_BYTES.to_string(),
    ]));
    let api = Api::new(&server);
    let client = api.client.clone();
    api.create_topic("t", 2).await;
    let records = json!({"records": [
        {"key": "a", "value": {"n": 1}, "partition": 0},
        {"key": "b", "value": {"n": 2}, "partition": 0},
        {"key": "c", "value": {"n": 3}, "partition": 1},
    ]});
    api.produce("t", &records).await;
    let before_p0 = raw_bytes(&api, "t", 0).await;
    let before_p1 = raw_bytes(&api, "t", 1).await;
    let before_topic = api.get_json("/v1/topics/t").await;
    let produce_url = api.url("/v1/topics/t/records");
    let partition_url = api.url("/v1/topics/t/partitions/0/records");

    // Malformed JSON, on each endpoint that takes JSON.
    for url in [
        api.url("/v1/topics"),
        produce_url.clone(),
        partition_url.clone(),
        api.url("/v1/producers"),
    ] {
        let response = client
            .post(&url)
            .header("content-type", "application/json")
            .body("{\"records\": [")
            .send()
            .await
            .unwrap();
        expect_error(response, 400, "bad_json").await;
    }
    // Wrong types and unknown fields.
    for (url, body) in [
        (api.url("/v1/topics"), json!({"name": 5})),
        (
            api.url("/v1/topics"),
            json!({"name": "x", "partitions": "two"}),
        ),
        (produce_url.clone(), json!({"records": {"value": 1}})),
        (produce_url.clone(), json!({"records": [{"key": 7}]})),
        (
            produce_url.clone(),
            json!({"records": [{"value": 1, "partition": -1}]}),
        ),
        (
            produce_url.clone(),
            json!({"records": [{"value": 1, "surprise": true}]}),
        ),
        (
            partition_url.clone(),
            json!({"records": [{"timestamp": "now"}]}),
        ),
    ] {
        let response = client.post(&url).json(&body).send().await.unwrap();
        expect_error(response, 400, "bad_json").await;
    }
    // Not JSON.
    for url in [
        api.url("/v1/topics"),
        produce_url.clone(),
        partition_url.clone(),
    ] {
        let response = client
            .post(&url)
            .header("content-type", "text/plain")
            .body("{}")
            .send()
            .await
            .unwrap();
        expect_error(response, 415, "unsupported_media_type").await;
    }
    // Unknown topic and partition.
    expect_error(
        api.post(
            "/v1/topics/nope/records",
            &json!({"records": [{"value": 1}]}),
        )
        .await,
        404,
        "topic_not_found",
    )
    .await;
    expect_error(
        api.get("/v1/topics/nope/partitions/0/records").await,
        404,
        "topic_not_found",
    )
    .await;
    expect_error(
        api.get("/v1/topics/nope/partitions/0/offsets").await,
        404,
        "topic_not_found",
    )
    .await;
    expect_error(
        api.get("/v1/topics/t/partitions/2/records").await,
        404,
        "partition_not_found",
    )
    .await;
    expect_error(
        api.get("/v1/topics/t/partitions/9/offsets").await,
        404,
        "partition_not_found",
    )
    .await;
    expect_error(
        api.post(
            "/v1/topics/t/partitions/2/records",
            &json!({"records": [{"value": 1}]}),
        )
        .await,
        404,
        "partition_not_found",
    )
    .await;
    expect_error(
        api.post(
            "/v1/topics/t/records",
            &json!({"records": [{"value": 1, "partition": 5}]}),
        )
        .await,
        404,
        "partition_not_found",
    )
    .await;
    expect_error(
        api.get("/v1/topics/t/partitions/x/records").await,
        400,
        "bad_path",
    )
    .await;
    // Bad offsets.
    for query in [
        "offset=-1",
        "offset=abc",
        "offset=99999999999999999999999",
        "max_records=-5",
        "max_records=0",
        "max_wait_ms=soon",
        "value_format=xml",
        "no_such_param=1",
    ] {
        expect_error(
            api.get(&format!("/v1/topics/t/partitions/0/records?{query}"))
                .await,
            400,
            "bad_query",
        )
        .await;
    }
    // An upper bound of zero records is refused, not read as one record.
    let refused = expect_error(
        api.get("/v1/topics/t/partitions/0/records?max_records=0")
            .await,
        400,
        "bad_query",
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("max_records") && message.contains("at least 1"),
        "{message}"
    );
    // Well-formed parameters that cannot go together: 422, not a parse error.
    expect_error(
        api.get("/v1/topics/t/partitions/0/records?offset=0&timestamp=5")
            .await,
        422,
        "invalid",
    )
    .await;
    expect_error(
        api.get("/v1/topics/t/partitions/0/offsets?timestamp=x")
            .await,
        400,
        "bad_query",
    )
    .await;
    // Offsets are Kafka int64s: above that the query is malformed, not out of range.
    expect_error(
        api.get(&format!(
            "/v1/topics/t/partitions/0/records?offset={}",
            u64::MAX
        ))
        .await,
        400,
        "bad_query",
    )
    .await;
    for offset in [3u64, 1000, i64::MAX as u64] {
        let body = expect_error(
            api.get(&format!(
                "/v1/topics/t/partitions/0/records?offset={offset}"
            ))
            .await,
            416,
            "offset_out_of_range",
        )
        .await;
        assert_eq!(body["error"]["earliest_offset"], 0);
        assert_eq!(body["error"]["latest_offset"], 2);
    }
    // Bad base64, in values, keys and headers.
    for (query, record) in [
        ("value_format=base64", json!({"value": "%%%not base64"})),
        ("", json!({"key_base64": "***", "value": 1})),
        (
            "value_format=base64",
            json!({"value": "AA==", "headers": {"h": "!"}}),
        ),
        ("value_format=string", json!({"value": 5})),
        ("", json!({"key": "k", "key_base64": "aw==", "value": 1})),
    ] {
        let response = api
            .post(
                &format!("/v1/topics/t/records?{query}"),
                &json!({"records": [record]}),
            )
            .await;
        expect_error(response, 422, "invalid").await;
    }
    expect_error(
        api.post("/v1/topics/t/records", &json!({"records": []}))
            .await,
        422,
        "invalid",
    )
    .await;
    // A record over the topic's max_message_bytes.
    api.create_topic("small", 1).await;
    let patched = client
        .patch(api.url("/v1/topics/small/configs"))
        .json(&json!({"configs": {"max_message_bytes": 200}}))
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status().as_u16(), 200);
    expect_error(
        api.post(
            "/v1/topics/small/records",
            &json!({"records": [{"value": "x".repeat(1000)}]}),
        )
        .await,
        413,
        "record_too_large",
    )
    .await;
    ok_json(
        api.post(
            "/v1/topics/small/records",
            &json!({"records": [{"value": "fits"}]}),
        )
        .await,
    )
    .await;
    // A request body over --max-request-bytes, JSON and raw.
    let huge = json!({"records": [{"value": "y".repeat(MAX_REQUEST_BYTES * 2)}]});
    expect_error(
        api.post("/v1/topics/t/records", &huge).await,
        413,
        "request_too_large",
    )
    .await;
    let response = client
        .post(&partition_url)
        .header("content-type", RECORD_BATCHES)
        .body(vec![0u8; MAX_REQUEST_BYTES * 2])
        .send()
        .await
        .unwrap();
    expect_error(response, 413, "request_too_large").await;
    // Raw batches with a bad CRC, a truncated batch, garbage.
    let mut corrupt = before_p0.to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x55;
    let truncated = before_p0.slice(..before_p0.len() - 3).to_vec();
    for body in [
        corrupt,
        truncated,
        b"definitely not a record batch".to_vec(),
        Vec::new(),
    ] {
        let response = client
            .post(&partition_url)
            .header("content-type", RECORD_BATCHES)
            .body(body)
            .send()
            .await
            .unwrap();
        expect_error(response, 400, "bad_record_batch").await;
    }
    // Routing, methods, content negotiation.
    expect_error(api.get("/v2/nothing").await, 404, "not_found").await;
    expect_error(
        api.get("/v1/topics/t/partitions/0/nothing").await,
        404,
        "not_found",
    )
    .await;
    let response = client.put(api.url("/v1/topics")).send().await.unwrap();
    expect_error(response, 405, "method_not_allowed").await;
    let response = client
        .delete(api.url("/v1/topics/t/partitions/0/records"))
        .send()
        .await
        .unwrap();
    expect_error(response, 405, "method_not_allowed").await;
    let response = client
        .get(api.url("/v1/topics/t/partitions/0/records"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    expect_error(response, 406, "not_acceptable").await;
    let response = client
        .get(api.url("/v1/topics/t/partitions/0/records"))
        .header("accept", "text/event-stream")
        .header("last-event-id", "not-an-offset")
        .send()
        .await
        .unwrap();
    expect_error(response, 400, "bad_header").await;
    // Idempotent-producer mistakes.
    expect_error(
        api.post("/v1/producers", &json!({"producer_id": 123_456}))
            .await,
        404,
        "producer_not_found",
    )
    .await;
    // A negative id was never issued by anyone: invalid, not "not found".
    expect_error(
        api.post("/v1/producers", &json!({"producer_id": -1})).await,
        422,
        "invalid",
    )
    .await;
    let unknown_producer = json!({"records": [{"value": 1, "partition": 0}],
        "producer": {"producer_id": 123_456, "producer_epoch": 0, "sequences": {"0": 0}}});
    expect_error(
        api.post("/v1/topics/t/records", &unknown_producer).await,
        422,
        "invalid_producer",
    )
    .await;

    // None of it touched the stored data.
    assert_eq!(raw_bytes(&api, "t", 0).await, before_p0);
    assert_eq!(raw_bytes(&api, "t", 1).await, before_p1);
    assert_eq!(api.get_json("/v1/topics/t").await, before_topic);
    let values: Vec<_> = api
        .fetch_all("t", 0, 0)
        .await
        .iter()
        .map(|r| r["value"]["n"].clone())
        .collect();
    assert_eq!(values, vec![json!(1), json!(2)]);
    assert!(!server.stderr().contains("panicked"), "no handler panicked");
}

/// A lone surrogate escape (`"\ud800"`, which some encoders write for text that is not
/// Unicode) is refused wherever it appears, with a message that names the rule; serde_json's
/// own ("unexpected end of hex escape") names neither, and a `string` value was told it was
/// not a string.
#[tokio::test]
async fn a_lone_surrogate_escape_is_refused_with_a_message_that_names_it() {
    let server = Server::start(ServerOptions::default());
    let api = Api::new(&server);
    api.create_topic("u", 1).await;
    let post = |path: &'static str, body: &'static str| {
        api.client
            .post(api.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let records = "/v1/topics/u/partitions/0/records";
    let as_string = "/v1/topics/u/partitions/0/records?value_format=string";
    for (path, body, status, code) in [
        (
            records,
            r#"{"records":[{"value":"\ud800"}]}"#,
            422,
            "invalid",
        ),
        (
            records,
            r#"{"records":[{"value":{"a":["\udc00x"]}}]}"#,
            422,
            "invalid",
        ),
        (
            as_string,
            r#"{"records":[{"value":"\ud800"}]}"#,
            422,
            "invalid",
        ),
        (
            records,
            r#"{"records":[{"key":"\ud800","value":1}]}"#,
            400,
            "bad_json",
        ),
        (
            records,
            r#"{"records":[{"value":1,"headers":{"h":"\udfff"}}]}"#,
            400,
            "bad_json",
        ),
    ] {
        let refused = expect_error(post(path, body).await.unwrap(), status, code).await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("surrogate"), "{body}: {message}");
    }
    // A surrogate pair is one character and goes through.
    let stored = ok_json(
        post(as_string, r#"{"records":[{"value":"\ud83d\ude00"}]}"#)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(stored["offsets"][0]["offset"], 0, "{stored}");
    let fetched = ok_json(
        api.get("/v1/topics/u/partitions/0/records?value_format=string")
            .await,
    )
    .await;
    assert_eq!(
        fetched["records"].as_array().map(Vec::len),
        Some(1),
        "{fetched}"
    );
    assert_eq!(fetched["records"][0]["value"], "\u{1F600}", "{fetched}");
}

/// A body whose bytes are not UTF-8 was told about `\u` escapes and surrogates, which it
/// never had; the message now names the byte and the way to send binary values.
#[tokio::test]
async fn a_body_that_is_not_utf8_is_told_so() {
    let server = Server::start(ServerOptions::default());
    let api = Api::new(&server);
    api.create_topic("bytes", 1).await;
    for (path, body) in [
        (
            "/v1/topics/bytes/records",
            b"{\"records\":[{\"value\":\"\xff\xfe\"}]}".to_vec(),
        ),
        ("/v1/topics", b"{\"name\":\"\xff\"}".to_vec()),
    ] {
        let response = api
            .client
            .post(api.url(path))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let refused = expect_error(response, 400, "bad_json").await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        let at = body.iter().position(|b| *b >= 0x80).unwrap();
        assert!(
            message.contains(&format!("byte {at} is not UTF-8")) && message.contains("base64"),
            "{message}"
        );
        assert!(!message.contains("surrogate"), "{message}");
    }
    assert_eq!(api.offsets("bytes", 0).await["latest"], 0);
}

/// A gzip-encoded body is decoded before it is read (JSON and raw batches alike); a coding the
/// server does not decode is refused with 415 instead of being read as if it were plain, and a
/// body that is not the gzip data its header says gets 400. Nothing refused is stored.
#[tokio::test]
async fn gzip_bodies_are_decoded_and_other_codings_refused() {
    use std::io::Write;
    let server = Server::start(ServerOptions::default());
    let api = Api::new(&server);
    api.create_topic("zipped", 1).await;
    let gzip = |data: &[u8]| {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    };
    let post = |coding: &'static str, body: Vec<u8>| {
        api.client
            .post(api.url("/v1/topics/zipped/partitions/0/records"))
            .header("content-type", "application/json")
            .header("content-encoding", coding)
            .body(body)
            .send()
    };
    let json = br#"{"records":[{"value":"zipped"}]}"#;
    let stored = ok_json(post("gzip", gzip(json)).await.unwrap()).await;
    assert_eq!(stored["offsets"][0]["offset"], 0, "{stored}");
    expect_error(
        post("x-bogus", json.to_vec()).await.unwrap(),
        415,
        "unsupported_media_type",
    )
    .await;
    expect_error(
        post("br", json.to_vec()).await.unwrap(),
        415,
        "unsupported_media_type",
    )
    .await;
    expect_error(
        post("gzip", json.to_vec()).await.unwrap(),
        400,
        "bad_header",
    )
    .await;
    let fetched = api.get_json("/v1/topics/zipped/partitions/0/records").await;
    let values: Vec<&serde_json::Value> = fetched["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["value"])
        .collect();
    assert_eq!(values, [&json!("zipped")], "{fetched}");
}

/// `max_message_bytes` limits a batch, as in Kafka, and a JSON produce stores one partition's
/// records as one batch: three records of 1,200 bytes are refused together on a 3,000-byte
/// topic, with a message that says why and what to do, and go through one at a time.
#[tokio::test]
async fn the_batch_limit_names_itself_when_a_json_request_exceeds_it() {
    let server = Server::start(ServerOptions::default());
    let api = Api::new(&server);
    api.create_topic_with("small", 1, json!({"max_message_bytes": 3000}))
        .await;
    let record = json!({"value": "x".repeat(1200)});
    let refused = expect_error(
        api.post(
            "/v1/topics/small/records",
            &json!({"records": [record, record, record]}),
        )
        .await,
        413,
        "record_too_large",
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("max_message_bytes") && message.contains("per"),
        "{message}"
    );
    assert_eq!(api.offsets("small", 0).await["latest"], 0);
    for _ in 0..3 {
        api.produce("small", &json!({"records": [record]})).await;
    }
    assert_eq!(api.offsets("small", 0).await["latest"], 3);
}

/// A request whose batch for one partition is over the limit stores nothing, not even the
/// other partitions' records: it used to append partition 0's record and answer 413, so the
/// client's resend stored it twice.
#[tokio::test]
async fn a_batch_over_the_limit_in_one_partition_stores_nothing_of_the_request() {
    let server = Server::start(ServerOptions::default());
    let api = Api::new(&server);
    api.create_topic_with("split", 2, json!({"max_message_bytes": 3000}))
        .await;
    let big = |partition: u32| json!({"value": "x".repeat(1200), "partition": partition});
    let records = json!({"records": [{"value": "small", "partition": 0}, big(1), big(1), big(1)]});
    expect_error(
        api.post("/v1/topics/split/records", &records).await,
        413,
        "record_too_large",
    )
    .await;
    for partition in 0..2 {
        assert_eq!(api.offsets("split", partition).await["latest"], 0);
    }
}

/// Every operation whose OpenAPI description declares no query parameter refuses any, as the
/// others refuse unknown ones. `DELETE /v1/groups/g/offsets?topic=t&partition=1` deleted the
/// whole group's offsets (it now deletes that partition's), and `DELETE ...?force=true`
/// answered 204 while nothing honoured `force`. Walks the checked-in document, so an operation added later is covered too.
#[tokio::test]
async fn operations_without_query_parameters_refuse_any() {
    let server = Server::start(ServerOptions::default());
    let api = Api::new(&server);
    api.create_topic("kept", 2).await;
    let committed = api
        .post(
            "/v1/groups/g/offsets",
            &json!({"offsets": [{"topic": "kept", "partition": 0, "offset": 0}]}),
        )
        .await;
    assert_eq!(committed.status(), 200, "{:?}", committed.text().await);
    let document: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../openapi/openapi.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut refused = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let takes_query = operation["parameters"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["in"] == "query"));
            if takes_query || item["parameters"].is_array() || !path.starts_with("/v1/") {
                continue;
            }
            let concrete = path
                .replace("{topic}", "kept")
                .replace("{partition}", "1")
                .replace("{group}", "g")
                .replace("{member}", "m-1")
                .replace("{id}", "h-1")
                .replace("{principal}", "nobody");
            assert!(!concrete.contains('{'), "a placeholder left in {concrete}");
            let url = api.url(&format!("{concrete}?topic=kept&partition=1"));
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let response = api
                .client
                .request(method.clone(), url)
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap();
            let body = expect_error(response, 400, "bad_query").await;
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("takes no query parameters"),
                "{method} {path}: {body}"
            );
            // A generated client learns of the refusal from the document too.
            let documented = &operation["responses"]["400"];
            assert!(
                documented["description"]
                    .as_str()
                    .is_some_and(|d| d.contains("bad_query")),
                "{method} {path} does not document its 400: {documented}"
            );
            refused.push(format!("{method} {path}"));
        }
    }
    for operation in [
        "DELETE /v1/topics/{topic}",
        "POST /v1/topics/{topic}/partitions/{partition}/delete-records",
    ] {
        assert!(
            refused.iter().any(|r| r == operation),
            "{operation} not checked: {refused:?}"
        );
    }
    assert_eq!(
        api.get("/v1/topics/kept").await.status(),
        200,
        "not deleted"
    );
    let offsets = api.get_json("/v1/groups/g/offsets").await;
    assert_eq!(offsets["offsets"][0]["topic"], "kept", "{offsets}");
}

/// Parse errors speak the API's language: they named Rust types (`expected u64`, `to a
/// \`u32\``, `Failed to deserialize query string`), which a curl user or a generated client
/// never sees anywhere else.
#[tokio::test]
async fn parse_errors_name_no_rust_types() {
    let server = Server::start(ServerOptions::default());
    let api = Api::new(&server);
    api.create_topic("words", 1).await;
    let client = &api.client;
    let requests = [
        client
            .post(api.url("/v1/topics/words/partitions/0/delete-records"))
            .json(&json!({"offset": -1})),
        client
            .post(api.url("/v1/topics/words/records"))
            .json(&json!({"records": [{"value": 1, "timestamp": "now"}]})),
        client
            .post(api.url("/v1/topics"))
            .json(&json!({"name": "big", "partitions": 4294967296u64})),
        client.post(api.url("/v1/topics")).json(&json!([1, 2])),
        client.get(api.url("/v1/topics/words/partitions/x/records")),
        client.get(api.url("/v1/topics/words/partitions/0/records?offset=-1")),
        client.get(api.url("/v1/topics/words/partitions/0/records?offset=0&max_bytes=")),
    ];
    for request in requests {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().await.unwrap();
        assert!((400..500).contains(&status), "{status} {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        for rust in [
            "u64",
            "u32",
            "i64",
            "i32",
            "usize",
            "Failed to deserialize",
            "struct ",
            "Invalid URL",
        ] {
            assert!(!message.contains(rust), "{rust:?} in {message:?}");
        }
    }
}

/// A config key given twice is refused, on create and on update: the last one silently won.
#[tokio::test]
async fn a_config_key_given_twice_is_refused() {
    let server = Server::start(ServerOptions::default());
    let api = Api::new(&server);
    api.create_topic("twice", 1).await;
    let send = |method: reqwest::Method, path: &str, body: &str| {
        api.client
            .request(method, api.url(path))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let patched = send(
        reqwest::Method::PATCH,
        "/v1/topics/twice/configs",
        r#"{"configs": {"retention_ms": 1000, "retention_ms": 2000}}"#,
    )
    .await
    .unwrap();
    let refused = expect_error(patched, 400, "bad_json").await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("\"retention_ms\" is given twice"),
        "{message}"
    );
    let created = send(
        reqwest::Method::POST,
        "/v1/topics",
        r#"{"name": "dup", "configs": {"segment_ms": 60000, "segment_ms": 70000}}"#,
    )
    .await
    .unwrap();
    expect_error(created, 400, "bad_json").await;
    assert_eq!(api.get("/v1/topics/dup").await.status(), 404);
    let described = api.get_json("/v1/topics/twice").await;
    assert_ne!(described["configs"]["retention_ms"], 2000, "{described}");
}

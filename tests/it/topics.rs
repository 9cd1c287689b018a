//! Topic administration: create, list, describe, update configs, add partitions, delete, and
//! what survives a restart.

use serde_json::{Value, json};
use strata_tests::{Api, Server, expect_error, ok_json};

/// Names of the user topics in a topic list (the server's internal `__consumer_offsets` is
/// always there, flagged `internal`).
fn topic_names(list: &Value) -> Vec<String> {
    let topics = list["topics"].as_array().unwrap();
    let internal: Vec<&str> = topics
        .iter()
        .filter(|t| t["internal"] == true)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(internal, vec!["__consumer_offsets"], "internal topics");
    topics
        .iter()
        .filter(|t| t["internal"] == false)
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn topic_lifecycle_create_list_describe_update_grow_delete_behaves() {
    let server = Server::start_default();
    let api = Api::new(&server);

    let created = api.create_topic("orders", 2).await;
    assert_eq!(created["name"], "orders");
    assert_eq!(created["partitions"].as_array().unwrap().len(), 2);
    assert_eq!(created["configs"]["retention_ms"], 604_800_000);

    let list = api.get_json("/v1/topics").await;
    assert_eq!(topic_names(&list), vec!["orders"]);
    assert_eq!(list["topics"][1]["partitions"], 2);
    assert_eq!(list["topics"][1]["internal"], false);

    api.produce(
        "orders",
        &json!({"records": [{"value": 1, "partition": 1}, {"value": 2, "partition": 1}]}),
    )
    .await;
    let described = api.get_json("/v1/topics/orders").await;
    let p1 = &described["partitions"][1];
    assert_eq!(p1["partition"], 1);
    assert_eq!(p1["earliest_offset"], 0);
    assert_eq!(p1["latest_offset"], 2);
    assert_eq!(p1["log_end_offset"], 2);
    assert!(p1["size_bytes"].as_u64().unwrap() > 0);
    assert!(p1["segment_count"].as_u64().unwrap() >= 1);
    assert_eq!(described["partitions"][0]["latest_offset"], 0);

    let patch = |configs: Value| {
        let api = api.clone();
        async move {
            api.client
                .patch(api.url("/v1/topics/orders/configs"))
                .json(&json!({ "configs": configs }))
                .send()
                .await
                .unwrap()
        }
    };
    let updated =
        ok_json(patch(json!({"retention_ms": 86_400_000, "cleanup_policy": "delete"})).await).await;
    assert_eq!(updated["configs"]["retention_ms"], 86_400_000);
    let reset = ok_json(patch(json!({"retention_ms": null})).await).await;
    assert_eq!(
        reset["configs"]["retention_ms"], 604_800_000,
        "null resets to the default"
    );

    let grown = ok_json(
        api.post("/v1/topics/orders/partitions", &json!({"partitions": 3}))
            .await,
    )
    .await;
    assert_eq!(grown["topic"]["partitions"].as_array().unwrap().len(), 3);
    assert!(
        grown["warning"].as_str().unwrap().contains("partition"),
        "the response warns that keys remap: {grown}"
    );
    expect_error(
        api.post("/v1/topics/orders/partitions", &json!({"partitions": 2}))
            .await,
        422,
        "invalid",
    )
    .await;

    let deleted = api
        .client
        .delete(api.url("/v1/topics/orders"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
    expect_error(api.get("/v1/topics/orders").await, 404, "topic_not_found").await;
    assert!(topic_names(&api.get_json("/v1/topics").await).is_empty());
    expect_error(
        api.client
            .delete(api.url("/v1/topics/orders"))
            .send()
            .await
            .unwrap(),
        404,
        "topic_not_found",
    )
    .await;
}

#[tokio::test]
async fn deleted_topic_stays_gone_after_restart() {
    let mut server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("doomed", 2).await;
    api.create_topic("kept", 1).await;
    api.produce("doomed", &json!({"records": [{"value": "x"}]}))
        .await;
    let deleted = api
        .client
        .delete(api.url("/v1/topics/doomed"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);

    server.restart();
    let api = Api::new(&server);
    assert_eq!(topic_names(&api.get_json("/v1/topics").await), vec!["kept"]);
    expect_error(api.get("/v1/topics/doomed").await, 404, "topic_not_found").await;
    // The name is free again, and the new topic starts empty.
    let again = api.create_topic("doomed", 1).await;
    assert_eq!(again["partitions"][0]["latest_offset"], 0);

    // Also after a crash.
    let deleted = api
        .client
        .delete(api.url("/v1/topics/kept"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
    server.kill_9();
    server.restart();
    let api = Api::new(&server);
    assert_eq!(
        topic_names(&api.get_json("/v1/topics").await),
        vec!["doomed"]
    );
}

#[tokio::test]
async fn topic_metadata_survives_restart() {
    let mut server = Server::start_default();
    let api = Api::new(&server);
    let response = api
        .post(
            "/v1/topics",
            &json!({"name": "events.v1", "partitions": 2,
                    "configs": {"retention_ms": 3_600_000, "cleanup_policy": "compact"}}),
        )
        .await;
    assert_eq!(response.status().as_u16(), 201);
    let patched = api
        .client
        .patch(api.url("/v1/topics/events.v1/configs"))
        .json(&json!({"configs": {"segment_bytes": 1_048_576}}))
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status().as_u16(), 200);
    ok_json(
        api.post("/v1/topics/events.v1/partitions", &json!({"partitions": 4}))
            .await,
    )
    .await;
    api.produce(
        "events.v1",
        &json!({"records": [{"key": "k", "value": 1, "partition": 3}]}),
    )
    .await;
    let before = api.get_json("/v1/topics/events.v1").await;

    server.restart();
    let api = Api::new(&server);
    let after = api.get_json("/v1/topics/events.v1").await;
    assert_eq!(after["configs"], before["configs"]);
    assert_eq!(after["configs"]["retention_ms"], 3_600_000);
    assert_eq!(after["configs"]["cleanup_policy"], "compact");
    assert_eq!(after["configs"]["segment_bytes"], 1_048_576);
    assert_eq!(after["partitions"].as_array().unwrap().len(), 4);
    assert_eq!(after["partitions"][3]["latest_offset"], 1);

    server.kill_9();
    server.restart();
    let api = Api::new(&server);
    let crashed = api.get_json("/v1/topics/events.v1").await;
    assert_eq!(crashed["configs"], before["configs"]);
    assert_eq!(crashed["partitions"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn create_topic_with_invalid_name_returns_invalid_topic_name() {
    let server = Server::start_default();
    let api = Api::new(&server);
    let long = "a".repeat(250);
    for name in ["../x", ".", "..", "__x", "a b", "a/b", "", long.as_str()] {
        let response = api
            .post("/v1/topics", &json!({"name": name, "partitions": 1}))
            .await;
        expect_error(response, 422, "invalid_topic_name").await;
    }
    assert!(topic_names(&api.get_json("/v1/topics").await).is_empty());
    // The longest legal name is fine.
    api.create_topic(&"a".repeat(249), 1).await;
}

#[tokio::test]
async fn unknown_or_invalid_config_returns_invalid_config() {
    let server = Server::start_default();
    let api = Api::new(&server);
    let response = api
        .post(
            "/v1/topics",
            &json!({"name": "t", "configs": {"retention.ms": 1000}}),
        )
        .await;
    expect_error(response, 422, "invalid_config").await;
    let response = api
        .post(
            "/v1/topics",
            &json!({"name": "t", "configs": {"max_message_bytes": 0}}),
        )
        .await;
    expect_error(response, 422, "invalid_config").await;
    expect_error(api.get("/v1/topics/t").await, 404, "topic_not_found").await;

    api.create_topic("t", 1).await;
    let response = api
        .client
        .patch(api.url("/v1/topics/t/configs"))
        .json(&json!({"configs": {"no_such_key": 1}}))
        .send()
        .await
        .unwrap();
    expect_error(response, 422, "invalid_config").await;
}

#[tokio::test]
async fn create_existing_topic_returns_conflict() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("dup", 3).await;
    let response = api
        .post("/v1/topics", &json!({"name": "dup", "partitions": 1}))
        .await;
    expect_error(response, 409, "topic_already_exists").await;
    let described = api.get_json("/v1/topics/dup").await;
    assert_eq!(described["partitions"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn object_lock_configs_are_refused_on_the_local_folder_store_which_cannot_lock() {
    let server = Server::start_default();
    let api = Api::new(&server);
    let create = api
        .post(
            "/v1/topics",
            &json!({"name": "worm", "configs": {"remote_storage_enable": true,
                    "remote_object_lock_mode": "compliance", "remote_object_lock_days": 30}}),
        )
        .await;
    let body = expect_error(create, 422, "invalid_config").await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("local folder"),
        "{body}"
    );
    api.create_topic("plain", 1).await;
    let update = api
        .client
        .patch(api.url("/v1/topics/plain/configs"))
        .json(&json!({"configs": {"remote_object_lock_days": 7}}))
        .send()
        .await
        .unwrap();
    expect_error(update, 422, "invalid_config").await;
    let listed = api.get_json("/v1/topics").await;
    assert!(!listed.to_string().contains("worm"), "nothing was created");
}

/// Kafka's CreateTopics takes a null config value as "use the default"; the document says so
/// too, so a generated client that sends `null` and the server agree.
#[tokio::test]
async fn create_with_null_config_takes_the_default_as_documented() {
    let server = Server::start_default();
    let api = Api::new(&server);

    let created = api
        .create_topic_with(
            "nulls",
            1,
            json!({"max_compaction_lag_ms": null, "retention_ms": 60_000}),
        )
        .await;
    assert_eq!(created["configs"]["max_compaction_lag_ms"], i64::MAX);
    assert_eq!(created["configs"]["retention_ms"], 60_000);

    let document = api.get_json("/openapi.json").await;
    let lag = &document["components"]["schemas"]["CreateTopicRequest"]["properties"]["configs"]["properties"]
        ["max_compaction_lag_ms"]["type"];
    assert_eq!(lag, &json!(["integer", "null"]), "create admits null");
    let described = &document["components"]["schemas"]["TopicDescription"]["properties"]["configs"]
        ["properties"]["max_compaction_lag_ms"]["type"];
    assert_eq!(
        described,
        &json!("integer"),
        "a description never shows null"
    );
}

/// A `POST` that creates something answers 201 with a `Location` a client can follow (RFC
/// 9110), for topics, legal holds and API keys.
#[tokio::test]
async fn creates_say_where_the_new_resource_lives() {
    let server = strata_tests::Server::start_default();
    let api = strata_tests::Api::new(&server);
    let created = api
        .post(
            "/v1/topics",
            &serde_json::json!({"name": "placed", "partitions": 1}),
        )
        .await;
    assert_eq!(created.status(), 201);
    let location = created.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(location, "/v1/topics/placed");
    assert_eq!(api.get_json(&location).await["name"], "placed");
    api.produce("placed", &serde_json::json!({"records": [{"value": 1}]}))
        .await;
    let hold = api
        .post(
            "/v1/topics/placed/legal-holds",
            &serde_json::json!({"reason": "case 7", "start_ms": 0}),
        )
        .await;
    assert_eq!(hold.status(), 201);
    let location = hold.headers()["location"].to_str().unwrap().to_string();
    let body: serde_json::Value = hold.json().await.unwrap();
    assert_eq!(
        location,
        format!(
            "/v1/topics/placed/legal-holds/{}",
            body["id"].as_str().unwrap()
        )
    );
    let released = api.client.delete(api.url(&location)).send().await.unwrap();
    assert_eq!(
        released.status(),
        200,
        "the Location names the hold to release"
    );
    let key = api
        .post("/v1/auth/keys", &serde_json::json!({"principal": "svc"}))
        .await;
    assert_eq!(key.status(), 201);
    let location = key.headers()["location"].to_str().unwrap().to_string();
    let body: serde_json::Value = key.json().await.unwrap();
    assert_eq!(
        location,
        format!("/v1/auth/keys/{}", body["id"].as_str().unwrap())
    );
    let revoked = api.client.delete(api.url(&location)).send().await.unwrap();
    assert!(revoked.status().is_success(), "{}", revoked.status());
}

//! Retention and compaction as a user sees them: the worked example end to end, time
//! retention moving the earliest offset, and both surviving a restart.

use std::time::Duration;

use serde_json::{Value, json};
use strata_tests::{Api, Server, ServerOptions, eventually, expect_error, hour_ago_ms, ok_json};

const WAIT: Duration = Duration::from_secs(30);

fn cleaning_server() -> Server {
    Server::start(ServerOptions::with_args(&[
        "--retention-check-interval-ms",
        "100",
    ]))
}

async fn offsets_of(api: &Api, topic: &str) -> Vec<u64> {
    api.fetch_all(topic, 0, 0)
        .await
        .iter()
        .map(|r| r["offset"].as_u64().unwrap())
        .collect()
}

async fn patch_configs(api: &Api, topic: &str, configs: Value) {
    let response = api
        .client
        .patch(api.url(&format!("/v1/topics/{topic}/configs")))
        .json(&json!({ "configs": configs }))
        .send()
        .await
        .unwrap();
    ok_json(response).await;
}

#[tokio::test]
async fn a_compacted_topic_keeps_the_latest_value_per_key_and_drops_tombstones_later() {
    let mut server = cleaning_server();
    let api = Api::new(&server);
    let configs = json!({
        "cleanup_policy": "compact",
        "segment_ms": 200,
        "delete_retention_ms": 600_000,
    });
    api.create_topic_with("users", 1, configs).await;
    let produced = api
        .produce(
            "users",
            &json!({"records": [
                {"key": "u1", "value": "A"},
                {"key": "u2", "value": "B"},
                {"key": "u1", "value": "C"},
                {"key": "u3", "value": "D"},
                {"key": "u2", "value": null},
                {"key": "u1", "value": "E"},
            ]}),
        )
        .await;
    assert_eq!(produced["offsets"].as_array().unwrap().len(), 6);
    // The segment rolls by itself after segment_ms; the cleaner then compacts it.
    eventually(WAIT, "offsets 3, 4 and 5 remain", || async {
        offsets_of(&api, "users").await == [3, 4, 5]
    })
    .await;
    let records = api.fetch_all("users", 0, 0).await;
    let pairs: Vec<(Value, Value)> = records
        .iter()
        .map(|r| (r["key"].clone(), r["value"].clone()))
        .collect();
    assert_eq!(
        pairs,
        vec![
            (json!("u3"), json!("D")),
            (json!("u2"), Value::Null),
            (json!("u1"), json!("E")),
        ]
    );
    // The swap is visible before the pass finishes and records its statistics.
    eventually(WAIT, "the compaction pass is recorded", || async {
        let described = api.get_json("/v1/topics/users").await;
        described["partitions"][0]["cleaner"]["runs"].as_u64() >= Some(1)
    })
    .await;
    let described = api.get_json("/v1/topics/users").await;
    let cleaner = &described["partitions"][0]["cleaner"];
    assert!(cleaner["runs"].as_u64().unwrap() >= 1, "{described}");
    assert!(
        cleaner["bytes_reclaimed"].as_u64().unwrap() > 0,
        "{described}"
    );
    assert_eq!(described["partitions"][0]["earliest_offset"], 0);
    // Once delete_retention_ms has passed since the first pass, the tombstone goes too.
    patch_configs(&api, "users", json!({"delete_retention_ms": 0})).await;
    eventually(WAIT, "the tombstone at offset 4 is gone", || async {
        offsets_of(&api, "users").await == [3, 5]
    })
    .await;
    // A restart keeps the compacted log, and appends continue after the old log end.
    server.restart();
    let api = Api::new(&server);
    assert_eq!(offsets_of(&api, "users").await, [3, 5]);
    let more = api
        .produce("users", &json!({"records": [{"key": "u4", "value": "F"}]}))
        .await;
    assert_eq!(more["offsets"][0]["offset"], 6);
}

#[tokio::test]
async fn keyless_records_are_refused_on_a_compacted_topic() {
    let server = cleaning_server();
    let api = Api::new(&server);
    api.create_topic_with("table", 1, json!({"cleanup_policy": "compact"}))
        .await;
    let response = api
        .post(
            "/v1/topics/table/records",
            &json!({"records": [{"value": "x"}]}),
        )
        .await;
    expect_error(response, 422, "key_required").await;
    assert!(api.fetch_all("table", 0, 0).await.is_empty());
}

#[tokio::test]
async fn time_retention_moves_the_earliest_offset_and_it_survives_a_restart() {
    let mut server = cleaning_server();
    let api = Api::new(&server);
    let configs = json!({"retention_ms": 60_000, "segment_ms": 200});
    api.create_topic_with("events", 1, configs).await;
    let hour_ago = hour_ago_ms();
    let old: Vec<Value> = (0..3)
        .map(|i| json!({"value": format!("old-{i}"), "timestamp": hour_ago}))
        .collect();
    api.produce("events", &json!({ "records": old })).await;
    // The old segment rolls after segment_ms and is then past retention_ms.
    eventually(WAIT, "the expired segment is deleted", || async {
        api.offsets("events", 0).await["earliest"] == 3
    })
    .await;
    expect_error(
        api.get("/v1/topics/events/partitions/0/records?offset=0")
            .await,
        416,
        "offset_out_of_range",
    )
    .await;
    // The active segment is never deleted, however old: new records stay readable.
    api.produce("events", &json!({"records": [{"value": "new"}]}))
        .await;
    assert_eq!(api.fetch_values("events", 0, 3).await, vec![json!("new")]);
    server.restart();
    let api = Api::new(&server);
    assert_eq!(api.offsets("events", 0).await["earliest"], 3);
    assert_eq!(api.fetch_values("events", 0, 3).await, vec![json!("new")]);
}

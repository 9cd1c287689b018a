//! Retention and compaction as a user sees them: the worked example end to end, time
//! retention moving the earliest offset, and both surviving a restart.

use std::time::Duration;

use serde_json::{Value, json};
use strata_tests::{
    Api, Server, ServerOptions, eventually, expect_error, first_sse_event, hour_ago_ms, ok_json,
};

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

/// Compaction can remove a partition's last records (here a tombstone past
/// `delete_retention_ms`): nothing readable is left between offset 0 and the high watermark.
/// Every reader must go on to the high watermark and wait there. They used to stop at 0 and
/// answer at once without end; a member's SSE stream then held a worker thread until the
/// whole server hung, `/healthz` included.
#[tokio::test]
async fn readers_go_past_records_compaction_removed_at_the_end_of_the_log() {
    let server = cleaning_server();
    let api = Api::new(&server);
    let configs = json!({
        "cleanup_policy": "compact",
        "segment_ms": 200,
        "delete_retention_ms": 0,
        "min_cleanable_dirty_ratio": 0.01,
    });
    api.create_topic_with("tail", 1, configs).await;
    api.produce(
        "tail",
        &json!({"records": [{"key": "a", "value": 1}, {"key": "a", "value": null}]}),
    )
    .await;
    eventually(
        WAIT,
        "compaction leaves no record below offset 2",
        || async {
            let segments = api.get_json("/v1/topics/tail/partitions/0/segments").await;
            segments["segments"].as_array().is_some_and(|all| {
                all.iter()
                    .all(|s| s["active"] == true || s["size_bytes"] == 0)
                    && all
                        .iter()
                        .any(|s| s["active"] == true && s["base_offset"] == 2)
            })
        },
    )
    .await;

    let page = api
        .get_json("/v1/topics/tail/partitions/0/records?offset=0")
        .await;
    assert_eq!(page["records"], json!([]), "{page}");
    assert_eq!(page["next_offset"], 2, "past the removed records: {page}");
    assert_eq!(page["high_watermark"], 2, "{page}");
    let ndjson = api
        .client
        .get(api.url("/v1/topics/tail/partitions/0/records?offset=0"))
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .unwrap();
    assert_eq!(ndjson.status(), 200);
    assert_eq!(ndjson.headers()["strata-next-offset"], "2");
    assert_eq!(ndjson.headers()["strata-high-watermark"], "2");
    assert_eq!(ndjson.text().await.unwrap(), "");

    // A member starts at 0 (earliest) and moves to the high watermark; a commit of where it
    // stands leaves no lag.
    let joined = ok_json(
        api.post(
            "/v1/groups/readers/members",
            &json!({"topics": ["tail"], "auto_offset_reset": "earliest"}),
        )
        .await,
    )
    .await;
    let member = joined["member_id"].as_str().unwrap().to_string();
    let generation = joined["generation"].as_u64().unwrap();
    let records = format!("/v1/groups/readers/members/{member}/records?generation={generation}");
    let polled = api.get_json(&records).await;
    assert_eq!(polled["records"], json!([]), "{polled}");
    assert_eq!(polled["positions"][0]["next_offset"], 2, "{polled}");
    api.get_json(&format!("{records}&commit=true")).await;
    let lag = api.get_json("/v1/groups/readers/lag").await;
    assert_eq!(lag["total_lag_records"], 0, "{lag}");

    // The member's stream waits at the high watermark, the server keeps answering, and the
    // next record arrives on the stream.
    let stream = api
        .client
        .get(api.url(&records))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let health = api.get("/healthz").await;
    assert_eq!(health.status(), 200);
    api.produce("tail", &json!({"records": [{"key": "b", "value": "next"}]}))
        .await;
    let event = first_sse_event(stream, "records", WAIT).await;
    let event: Value = serde_json::from_str(&event.data).unwrap();
    assert_eq!(event["records"][0]["offset"], 2, "{event}");
    assert_eq!(event["records"][0]["value"], "next", "{event}");
}

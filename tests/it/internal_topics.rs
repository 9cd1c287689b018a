//! Internal topics belong to the server: no public endpoint may write, reconfigure, grow, trim,
//! delete or subscribe to `__consumer_offsets`, and no record on disk in it may keep the server
//! from starting.

use std::io::Write;

use bytes::Bytes;
use serde_json::{Value, json};
use strata_server::log::batch::{BatchOptions, encode_batch};
use strata_server::log::{NewRecord, RecordBatch};
use strata_tests::{Api, Server, expect_error};

const OFFSETS: &str = "__consumer_offsets";

/// Commits offset 3 of `orders/0` for group `g` without members (after three records: a commit
/// past the high watermark is refused).
async fn commit_something(api: &Api) {
    api.create_topic("orders", 1).await;
    api.produce(
        "orders",
        &json!({"records": [{"value": 1}, {"value": 2}, {"value": 3}]}),
    )
    .await;
    let response = api
        .post(
            "/v1/groups/g/offsets",
            &json!({"offsets": [{"topic": "orders", "partition": 0, "offset": 3}]}),
        )
        .await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
}

async fn committed(api: &Api) -> Value {
    api.get_json("/v1/groups/g/offsets").await["offsets"].clone()
}

#[tokio::test]
async fn every_mutating_endpoint_refuses_the_internal_topic_and_restarts_stay_fine() {
    let mut server = Server::start_default();
    let api = Api::new(&server);
    commit_something(&api).await;
    let client = &api.client;
    let base = format!("/v1/topics/{OFFSETS}");
    let record = json!({"records": [{"key": "x", "value": 1}]});
    let cases: Vec<(&str, reqwest::RequestBuilder)> = vec![
        (
            "produce by key",
            client
                .post(api.url(&format!("{base}/records")))
                .json(&record),
        ),
        (
            "produce to a partition",
            client
                .post(api.url(&format!("{base}/partitions/0/records")))
                .json(&record),
        ),
        (
            "raw produce",
            client
                .post(api.url(&format!("{base}/partitions/0/records")))
                .header("content-type", "application/vnd.strata.record-batches")
                .body(raw_batch(b"x", b"1")),
        ),
        (
            "configs",
            client
                .patch(api.url(&format!("{base}/configs")))
                .json(&json!({"configs": {"cleanup_policy": "delete", "retention_ms": 1}})),
        ),
        (
            "add partitions",
            client
                .post(api.url(&format!("{base}/partitions")))
                .json(&json!({"partitions": 4})),
        ),
        (
            "delete-records",
            client
                .post(api.url(&format!("{base}/partitions/0/delete-records")))
                .json(&json!({"offset": 1})),
        ),
        ("delete", client.delete(api.url(&base))),
        (
            "join",
            client
                .post(api.url("/v1/groups/h/members"))
                .json(&json!({"topics": [OFFSETS]})),
        ),
        (
            "commit",
            client
                .post(api.url("/v1/groups/h/offsets"))
                .json(&json!({"offsets": [{"topic": OFFSETS, "partition": 0, "offset": 0}]})),
        ),
        (
            "reset",
            client
                .post(api.url("/v1/groups/h/offsets/reset"))
                .json(&json!({"topic": OFFSETS, "to": "earliest"})),
        ),
    ];
    let before = api.get_json(&base).await;
    for (what, request) in cases {
        let response = request.send().await.unwrap();
        let body = expect_error(response, 409, "internal_topic").await;
        assert!(
            body["error"]["message"].as_str().unwrap().contains(OFFSETS),
            "{what}: {body}"
        );
    }
    let after = api.get_json(&base).await;
    assert_eq!(before, after, "the internal topic is unchanged");
    // Reading stays allowed.
    let read = api
        .get(&format!("{base}/partitions/0/records?offset=0"))
        .await;
    assert_eq!(read.status(), 200);
    server.restart();
    let api = Api::new(&server);
    assert_eq!(committed(&api).await[0]["offset"], 3);
}

/// A Kafka batch of one record with this key and value.
fn raw_batch(key: &[u8], value: &[u8]) -> Bytes {
    let record = NewRecord {
        timestamp: 1,
        key: Some(Bytes::copy_from_slice(key)),
        value: Some(Bytes::copy_from_slice(value)),
        headers: Vec::new(),
    };
    encode_batch(&BatchOptions::default(), &[record]).unwrap()
}

#[tokio::test]
async fn a_foreign_record_in_consumer_offsets_is_skipped_at_start() {
    let mut server = Server::start_default();
    let api = Api::new(&server);
    commit_something(&api).await;
    let status = server.terminate();
    assert!(status.success());
    // What an older release let `POST /v1/topics/__consumer_offsets/records` write: a record
    // that is not a commit, appended after the commit as the next offset.
    let segment = server
        .data_dir()
        .join(format!("topics/{OFFSETS}/0/00000000000000000000.log"));
    let mut bytes = raw_batch(b"x", b"1").to_vec();
    bytes[..8].copy_from_slice(&1i64.to_be_bytes());
    RecordBatch::decode_exact(Bytes::from(bytes.clone())).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap();
    file.write_all(&bytes).unwrap();
    file.sync_all().unwrap();
    drop(file);
    server.restart();
    let api = Api::new(&server);
    assert_eq!(committed(&api).await[0]["offset"], 3);
    // Logged during recovery.
    server.logged("skipping an invalid record").await;
    // New commits still work and survive the next restart.
    api.produce("orders", &json!({"records": [{"value": 4}]}))
        .await;
    let response = api
        .post(
            "/v1/groups/g/offsets",
            &json!({"offsets": [{"topic": "orders", "partition": 0, "offset": 4}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    server.restart();
    let api = Api::new(&server);
    assert_eq!(committed(&api).await[0]["offset"], 4);
}

/// A consumer group cannot read an internal topic, and the refusal says so and what to do
/// instead, rather than "only the server writes to it" for what is a read.
#[tokio::test]
async fn a_group_on_an_internal_topic_is_refused_with_a_message_about_reading() {
    let server = Server::start_default();
    let api = Api::new(&server);
    let refused = expect_error(
        api.post("/v1/groups/siem/members", &json!({"topics": [OFFSETS]}))
            .await,
        409,
        "internal_topic",
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("consumer groups") && message.contains("fetch"),
        "{message}"
    );
    let fetched = api
        .get(&format!("/v1/topics/{OFFSETS}/partitions/0/records"))
        .await;
    assert_eq!(fetched.status(), 200, "a plain fetch reads it");
}

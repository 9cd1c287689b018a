//! Corruption as users meet it: a flipped bit on disk or in the bucket is reported as `corrupt`
//! (500, not retryable) in every format, the records before a corrupt batch are still served,
//! and bit rot never costs acknowledged records that were not themselves damaged.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use strata_server::log::batch::batch_headers;
use strata_tests::{Api, Server, ServerOptions, SseParser, eventually, expect_error};

const SEGMENT: &str = "00000000000000000000.log";

/// Produces `batches` requests of four records each to partition 0 (values `"v{offset}"`).
async fn produce_batches(api: &Api, topic: &str, batches: u64) {
    for batch in 0..batches {
        let records: Vec<Value> = (0..4)
            .map(|i| json!({"value": format!("v{}", batch * 4 + i), "partition": 0}))
            .collect();
        api.produce(topic, &json!({ "records": records })).await;
    }
}

/// Byte ranges of the batches of a segment file.
fn batch_ranges(path: &Path) -> Vec<std::ops::Range<usize>> {
    let bytes = std::fs::read(path).unwrap();
    batch_headers(&bytes)
        .map(|item| {
            let (position, header) = item.unwrap();
            position..position + header.total_len()
        })
        .collect()
}

/// Flips one bit near the end of the batch (inside its last record, covered by the CRC).
fn flip_in_batch(path: &Path, batch: usize) {
    let range = batch_ranges(path)[batch].clone();
    let mut bytes = std::fs::read(path).unwrap();
    bytes[range.end - 3] ^= 0x04;
    std::fs::write(path, &bytes).unwrap();
}

fn segment_path(server: &Server, topic: &str) -> PathBuf {
    server
        .data_dir()
        .join(format!("topics/{topic}/0/{SEGMENT}"))
}

/// A topic of four batches (offsets 0-15) whose batch `victim` is corrupted on disk while the
/// server was stopped; returns the restarted server.
async fn damaged_topic(topic: &str, victim: usize) -> Server {
    let mut server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic(topic, 1).await;
    produce_batches(&api, topic, 4).await;
    assert!(server.terminate().success());
    flip_in_batch(&segment_path(&server, topic), victim);
    server.restart();
    server
}

fn fetch_url(api: &Api, topic: &str, offset: u64) -> String {
    api.url(&format!(
        "/v1/topics/{topic}/partitions/0/records?offset={offset}"
    ))
}

async fn get(api: &Api, url: &str, accept: &str) -> reqwest::Response {
    api.client
        .get(url)
        .header("accept", accept)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_fetch_serves_the_records_before_a_corrupt_batch_and_fails_at_it_in_every_format() {
    let server = damaged_topic("rot", 2).await;
    let api = Api::new(&server);
    // JSON: offsets 0-7 are intact; the answer stops before the damaged batch.
    let body = api
        .get_json("/v1/topics/rot/partitions/0/records?offset=0")
        .await;
    let offsets: Vec<u64> = body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, (0..8).collect::<Vec<_>>(), "{body}");
    assert_eq!(body["next_offset"], 8);
    assert_eq!(body["records"][7]["value"], "v7");
    // At the damaged batch: corrupt, not retryable; after it, intact records again.
    let error = expect_error(
        get(&api, &fetch_url(&api, "rot", 8), "application/json").await,
        500,
        "corrupt",
    )
    .await;
    assert_eq!(error["error"]["retryable"], false);
    let after = api
        .get_json("/v1/topics/rot/partitions/0/records?offset=12")
        .await;
    assert_eq!(after["records"][0]["value"], "v12", "{after}");
    assert_eq!(after["records"].as_array().unwrap().len(), 4);
    // NDJSON: the first batch fails -> the error's status; later -> a final error line.
    let failed = get(&api, &fetch_url(&api, "rot", 8), "application/x-ndjson").await;
    expect_error(failed, 500, "corrupt").await;
    let partial = get(&api, &fetch_url(&api, "rot", 0), "application/x-ndjson").await;
    assert_eq!(partial.status(), 200);
    let text = partial.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 9, "{text}");
    assert_eq!(lines[7]["offset"], 7);
    assert_eq!(lines[8]["error"]["code"], "corrupt", "{text}");
    // SSE: records, then a `server_error` event, then the end of the stream.
    let events = sse_until_end(&api, &fetch_url(&api, "rot", 0)).await;
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names, vec!["records", "server_error"], "{events:?}");
    let error: Value = serde_json::from_str(&events[1].data).unwrap();
    assert_eq!(error["error"]["code"], "corrupt");
    assert_eq!(error["error"]["retryable"], false);
    // A browser reconnecting at the damaged offset gets an error status and stops.
    let reconnect = api
        .client
        .get(fetch_url(&api, "rot", 0))
        .header("accept", "text/event-stream")
        .header("last-event-id", "8")
        .send()
        .await
        .unwrap();
    expect_error(reconnect, 500, "corrupt").await;
}

/// Every event of an SSE stream until the server ends it (10 s at most).
async fn sse_until_end(api: &Api, url: &str) -> Vec<strata_tests::SseEvent> {
    let response = get(api, url, "text/event-stream").await;
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut parser = SseParser::default();
    let mut events = Vec::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("the stream ends within 10 s");
        match chunk {
            Some(chunk) => events.extend(
                parser
                    .push(&chunk.unwrap())
                    .into_iter()
                    .filter(|e| e.event != "ping"),
            ),
            None => return events,
        }
    }
}

#[tokio::test]
async fn bit_rot_in_the_last_batch_before_a_clean_start_never_costs_later_acknowledged_records() {
    // Issue 11's reproduction: stop cleanly, flip a byte in the last batch of the segment,
    // start, append with acks=all, kill -9, start: the acknowledged append is still there.
    let mut server = damaged_topic("ack", 3).await;
    let api = Api::new(&server);
    let produced = api
        .produce(
            "ack",
            &json!({"records": [{"value": "after the damage", "partition": 0}]}),
        )
        .await;
    assert_eq!(
        produced["offsets"][0]["offset"], 16,
        "offsets are not reused"
    );
    server.kill_9();
    server.restart();
    let api = Api::new(&server);
    let body = api
        .get_json("/v1/topics/ack/partitions/0/records?offset=16")
        .await;
    assert_eq!(body["records"][0]["value"], "after the damage", "{body}");
    let before = api
        .get_json("/v1/topics/ack/partitions/0/records?offset=0")
        .await;
    assert_eq!(
        before["records"].as_array().unwrap().len(),
        12,
        "the intact batches before the damage are all served: {before}"
    );
}

/// The store folder's `.log` objects of a topic.
fn remote_logs(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "log") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

#[tokio::test]
async fn a_flipped_bit_in_the_bucket_is_corrupt_not_retryable_in_json_raw_and_sse() {
    let bucket = tempfile::tempdir().unwrap();
    let server = Server::start(ServerOptions::with_args(&[
        "--tiering-interval-ms",
        "100",
        "--retention-check-interval-ms",
        "100",
        "--tiered-storage-url",
        bucket.path().to_str().unwrap(),
    ]));
    let api = Api::new(&server);
    api.create_topic_with(
        "cold",
        1,
        json!({"remote_storage_enable": true, "segment_bytes": 4096,
               "local_retention_bytes": 4096, "remote_upload_idle_ms": 300}),
    )
    .await;
    for round in 0..40 {
        let records: Vec<Value> = (0..5)
            .map(|i| json!({"value": format!("r{round}-{i}-{}", "x".repeat(60)), "partition": 0}))
            .collect();
        api.produce("cold", &json!({ "records": records })).await;
    }
    eventually(
        Duration::from_secs(60),
        "offset 0 is only in the bucket",
        || async {
            api.offsets("cold", 0).await["earliest_local"]
                .as_u64()
                .is_some_and(|local| local > 0)
        },
    )
    .await;
    let first = remote_logs(bucket.path())
        .into_iter()
        .next()
        .expect("a remote segment object");
    let mut bytes = std::fs::read(&first).unwrap();
    bytes[100] ^= 0x01;
    std::fs::write(&first, &bytes).unwrap();
    let url = fetch_url(&api, "cold", 0);
    for accept in [
        "application/json",
        "application/vnd.strata.record-batches",
        "text/event-stream",
        "application/x-ndjson",
    ] {
        let response = get(&api, &url, accept).await;
        let body = expect_error(response, 500, "corrupt").await;
        assert_eq!(body["error"]["retryable"], false, "{accept}: {body}");
    }
}

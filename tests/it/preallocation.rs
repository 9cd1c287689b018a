//! The segment reservation (ADR 0015) as an operator meets it: `--segment-preallocate-bytes`
//! on a real server, the file's length against the log's, and a kill -9 in the middle.

use serde_json::{Value, json};
use strata_tests::{Api, Server, ServerOptions};

const MIB: u64 = 1 << 20;

fn server(step: u64, data: &std::path::Path) -> Server {
    let mut options = ServerOptions::with_args(&["--segment-preallocate-bytes", &step.to_string()]);
    options.data_dir = Some(data.to_path_buf());
    Server::start(options)
}

async fn produce(api: &Api, from: usize, count: usize) -> Vec<Value> {
    let records: Vec<Value> = (from..from + count)
        .map(|i| json!({ "value": format!("record {i}"), "partition": 0 }))
        .collect();
    api.produce("reserved", &json!({ "records": records }))
        .await;
    records.into_iter().map(|r| r["value"].clone()).collect()
}

async fn log_len(api: &Api) -> u64 {
    let described = api.get_json("/v1/topics/reserved").await;
    described["partitions"][0]["size_bytes"].as_u64().unwrap()
}

fn file_len(data: &std::path::Path) -> u64 {
    let log = data.join("topics/reserved/0/00000000000000000000.log");
    std::fs::metadata(log).unwrap().len()
}

#[tokio::test]
async fn the_reservation_is_ahead_of_the_log_and_a_kill_9_loses_nothing() {
    let data = tempfile::tempdir().unwrap();
    let mut server = server(MIB, data.path());
    let api = Api::new(&server);
    api.create_topic("reserved", 1).await;
    let mut values = produce(&api, 0, 10).await;
    values.extend(produce(&api, 10, 10).await);
    let written = log_len(&api).await;
    assert!(written > 0 && written < MIB);
    assert_eq!(file_len(data.path()), MIB, "one step reserved ahead");

    server.kill_9();
    server.restart();
    let api = Api::new(&server);
    assert_eq!(api.fetch_values("reserved", 0, 0).await, values);
    assert_eq!(log_len(&api).await, written);
    // Recovery cut the zeros off; the next write reserves again.
    values.extend(produce(&api, 20, 1).await);
    assert_eq!(file_len(data.path()), MIB);
    assert_eq!(api.fetch_values("reserved", 0, 0).await, values);
}

#[tokio::test]
async fn zero_turns_the_reservation_off() {
    let data = tempfile::tempdir().unwrap();
    let server = server(0, data.path());
    let api = Api::new(&server);
    api.create_topic("reserved", 1).await;
    produce(&api, 0, 5).await;
    assert_eq!(file_len(data.path()), log_len(&api).await);
}

//! Health while the server starts: the port is bound before recovery, `/healthz` answers 200
//! and `/readyz` 503 with the step, the API 503 `unavailable`; then ready. A full data disk is
//! named as such (`disk_full`, `Retry-After`, `/readyz`) and clears by itself.

use std::time::Duration;

use serde_json::{Value, json};
use strata_server::clock::ManualClock;
use strata_server::config::Config;
use strata_server::server::{StartHooks, run_with};
use strata_tests::{Api, Server, ServerOptions, Tmpfs, eventually, expect_error};

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn while_recovering_healthz_is_up_readyz_says_why_and_the_api_is_unavailable() {
    let data = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let config = Config {
        listen: listener.local_addr().unwrap(),
        data_dir: data.path().to_path_buf(),
        ..Config::default()
    };
    let (open_gate, gate) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut hooks = StartHooks::with_clock(ManualClock::new(1_750_000_000_000));
    hooks.before_recovery = Some(Box::pin(async move {
        let _ = gate.await;
    }));
    hooks.on_ready = Some(Box::new(move |address| {
        let _ = ready_tx.send(address);
    }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run_with(
        config,
        listener,
        async move {
            let _ = stopped.await;
        },
        hooks,
    ));
    let client = reqwest::Client::new();
    let health = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let ready = client.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let body: Value = ready.json().await.unwrap();
    assert_eq!(body["ready"], false);
    assert_eq!(body["status"], "recovering", "{body}");
    assert!(body["reason"].is_string(), "{body}");
    let api = client
        .get(format!("{base}/v1/topics"))
        .send()
        .await
        .unwrap();
    let error = expect_error(api, 503, "unavailable").await;
    assert_eq!(error["error"]["retryable"], true);
    assert!(
        ready_rx.try_recv().is_err(),
        "not ready before recovery ran"
    );
    open_gate.send(()).unwrap();
    let address = tokio::time::timeout(WAIT, ready_rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(format!("http://{address}"), base);
    let ready = client.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let topics = client
        .get(format!("{base}/v1/topics"))
        .send()
        .await
        .unwrap();
    assert_eq!(topics.status(), 200);
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_binary_prints_listening_only_once_ready_and_logs_the_open_file_limit() {
    let server = Server::start_default();
    // The harness returns after the "listening" line: by then the server must be ready.
    let api = Api::new(&server);
    let ready = api.get("/readyz").await;
    assert_eq!(ready.status(), 200);
    // Logged before "listening".
    server.logged("open-file limit").await;
}

#[tokio::test]
async fn a_full_disk_is_reported_as_disk_full_and_clears_when_space_returns() {
    let disk = Tmpfs::mount("6m");
    let data = disk.path().join("data");
    let server = Server::start(ServerOptions {
        data_dir: Some(data.clone()),
        ..ServerOptions::default()
    });
    let api = Api::new(&server);
    api.create_topic("filling", 1).await;
    let filler = disk.path().join("filler");
    let free = strata_server::io::space::available_bytes(disk.path()).unwrap();
    std::fs::write(
        &filler,
        vec![0u8; usize::try_from(free).unwrap() - 200 * 1024],
    )
    .unwrap();
    let value = "v".repeat(16 * 1024);
    let full = loop {
        let response = api
            .post(
                "/v1/topics/filling/records",
                &json!({"records": [{"value": value}]}),
            )
            .await;
        if response.status() != 200 {
            break response;
        }
    };
    let retry_after = full.headers().get("retry-after").cloned();
    let body = expect_error(full, 503, "disk_full").await;
    assert_eq!(body["error"]["retryable"], true);
    assert!(retry_after.is_some(), "disk_full says when to retry");
    let ready = api.get("/readyz").await;
    assert_eq!(ready.status(), 503);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready["status"], "disk_full", "{ready}");
    std::fs::remove_file(&filler).unwrap();
    eventually(WAIT, "ready again once space is back", || {
        let api = api.clone();
        async move { api.get("/readyz").await.status() == 200 }
    })
    .await;
    let again = api
        .post(
            "/v1/topics/filling/records",
            &json!({"records": [{"value": "after"}]}),
        )
        .await;
    assert_eq!(again.status(), 200);
    drop(server);
}

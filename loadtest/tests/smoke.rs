//! The CI smoke run: every workload of the real `strata-loadtest` binary against a real
//! Strata server, with tiny counts (seconds in all), and proof that its verification fails
//! when the server loses or duplicates records (a fault-injecting proxy in front of it).

use std::path::Path;
use std::process::{Command, Output};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use strata_tests::Server;

fn loadtest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata-loadtest"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("strata-loadtest runs")
}

/// Runs a workload briefly with `--json` and returns the report and the exit code.
fn run(workload: &str, url: &str, extra: &[&str]) -> (Value, Option<i32>) {
    let mut args = vec![
        workload,
        "--url",
        url,
        "--json",
        "--duration-s",
        "0.6",
        "--warmup-s",
        "0.2",
    ];
    args.extend_from_slice(extra);
    let output = loadtest(&args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{workload} {extra:?}: no JSON report ({e}); stdout {stdout}; stderr {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (report, output.status.code())
}

fn assert_verified(report: &Value, what: &str) {
    for key in ["verification", "consumer_verification"] {
        let Some(verdict) = report.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        assert_eq!(verdict["passed"], true, "{what}: {key} {verdict}");
        assert!(
            verdict["acknowledged"].as_u64().unwrap_or(0) > 0,
            "{what}: nothing acknowledged"
        );
        assert_eq!(
            verdict["matched"], verdict["acknowledged"],
            "{what}: {key} {verdict}"
        );
    }
    assert!(
        report["verification"]["passed"] == true,
        "{what}: the log was not read back"
    );
}

#[test]
fn every_workload_runs_and_verifies_against_a_real_server() {
    let server = Server::start_default();
    let url = server.base_url();
    let cases: &[(&str, &[&str])] = &[
        (
            "produce",
            &[
                "--partitions",
                "3",
                "--producers",
                "2",
                "--batch-records",
                "10",
                "--keys",
                "zipf:20",
                "--idempotent",
            ],
        ),
        (
            "produce",
            &[
                "--format",
                "raw",
                "--partitions",
                "2",
                "--batch-records",
                "20",
                "--record-size",
                "uniform:32-900",
                "--idempotent",
                "--acks",
                "leader",
            ],
        ),
        (
            "produce",
            &[
                "--rate",
                "200",
                "--batch-bytes",
                "300",
                "--batch-records",
                "50",
            ],
        ),
        (
            "consume",
            &[
                "--count",
                "3000",
                "--partitions",
                "2",
                "--consumers",
                "2",
                "--batch-records",
                "100",
            ],
        ),
        (
            "consume",
            &[
                "--count",
                "500",
                "--batch-records",
                "50",
                "--fetch-format",
                "json",
            ],
        ),
        (
            "e2e",
            &[
                "--partitions",
                "2",
                "--producers",
                "2",
                "--batch-records",
                "5",
            ],
        ),
        ("e2e", &["--delivery", "sse", "--batch-records", "5"]),
        (
            "groups",
            &[
                "--partitions",
                "4",
                "--producers",
                "2",
                "--consumers",
                "2",
                "--batch-records",
                "5",
            ],
        ),
    ];
    for (workload, extra) in cases {
        let what = format!("{workload} {extra:?}");
        let (report, code) = run(workload, &url, extra);
        assert_eq!(code, Some(0), "{what}: {report}");
        assert_verified(&report, &what);
        let figures = match *workload {
            "consume" => &report["fetch"],
            _ => &report["produce"],
        };
        assert!(
            figures["records"].as_u64().unwrap_or(0) > 0,
            "{what}: no records measured"
        );
        assert_eq!(figures["errors"], 0, "{what}");
        if matches!(*workload, "e2e" | "groups") {
            assert!(
                report["end_to_end"]["records"].as_u64().unwrap_or(0) > 0,
                "{what}: no deliveries timed"
            );
        }
    }
}

/// A lone producer of 64 KiB requests builds each on its own thread while the one before is in
/// flight: the run must still stop at exactly its record budget, keep idempotent sequences in
/// order (the server refuses a gap), and read every record back.
#[test]
fn producers_that_build_ahead_keep_the_budget_and_the_order() {
    let server = Server::start_default();
    let url = server.base_url();
    let (report, code) = run(
        "produce",
        &url,
        &[
            "--format",
            "raw",
            "--batch-records",
            "70",
            "--record-size",
            "1024",
            "--idempotent",
            "--count",
            "3000",
        ],
    );
    assert_eq!(code, Some(0), "{report}");
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    assert_eq!(report["settings"]["built_ahead"], cores > 1, "{report}");
    assert_verified(&report, "built ahead");
    assert_eq!(report["verification"]["acknowledged"], 3000, "{report}");
}

#[test]
fn baselines_ratios_results_plots_and_compare() {
    let server = Server::start_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    let plots = dir.path().join("plots");
    let disk = dir.path().to_str().expect("utf-8 path");
    let (report, code) = run(
        "produce",
        &server.base_url(),
        &[
            "--baselines",
            "--disk-dir",
            disk,
            "--output",
            a.to_str().expect("path"),
            "--plot-dir",
            plots.to_str().expect("path"),
        ],
    );
    assert_eq!(code, Some(0), "{report}");
    let baselines = &report["baselines"];
    assert!(
        baselines["null_server"]["requests"].as_u64().unwrap_or(0) > 0,
        "{baselines}"
    );
    assert!(
        baselines["disk"]["requests"].as_u64().unwrap_or(0) > 0,
        "{baselines}"
    );
    assert!(
        baselines["durable_server"]["requests"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{baselines}"
    );
    assert!(
        baselines["group_server"].is_null(),
        "one producer has no group commit to bound: {baselines}"
    );
    let ratios: Vec<&str> = report["ratios"]
        .as_array()
        .expect("ratios")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for ratio in [
        "produce_mean_over_transport_plus_disk",
        "produce_p99_over_transport_plus_disk_p99",
        "produce_mean_over_durable_server",
    ] {
        assert!(ratios.contains(&ratio), "{ratio} missing from {ratios:?}");
    }
    assert!(report["machine"]["cpus"].as_u64().unwrap_or(0) >= 1);
    assert!(
        report["strata_version"]
            .as_str()
            .unwrap_or("")
            .starts_with("0."),
        "{}",
        report["strata_version"]
    );
    for name in ["latency.png", "timeline.png"] {
        let bytes = std::fs::read(plots.join(name)).expect("plot drawn");
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{name} is a PNG");
    }
    for name in ["latency.svg", "timeline.svg"] {
        let text = std::fs::read_to_string(plots.join(name)).expect("plot drawn");
        assert!(
            text.contains("<svg") && text.contains("percentile") | text.contains("records/s"),
            "{name}"
        );
    }
    let (_, code) = run(
        "produce",
        &server.base_url(),
        &[
            "--output",
            b.to_str().expect("path"),
            "--batch-records",
            "10",
        ],
    );
    assert_eq!(code, Some(0));
    let compared = loadtest(&[
        "compare",
        a.to_str().expect("path"),
        b.to_str().expect("path"),
    ]);
    let text = String::from_utf8_lossy(&compared.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("produce records/s"))
        .expect(&text);
    let ratio: f64 = line
        .split_whitespace()
        .last()
        .and_then(|r| r.parse().ok())
        .expect(line);
    assert!(
        ratio > 2.0,
        "10 records per request should carry more records/s than 1: {line}"
    );
    let redrawn = dir.path().join("again");
    let plot = loadtest(&[
        "plot",
        b.to_str().expect("path"),
        "--out",
        redrawn.to_str().expect("path"),
    ]);
    assert!(plot.status.success());
    assert!(Path::new(&redrawn.join("latency.svg")).exists());
}

/// Concurrent `acks=all` producers get the group-commit bound too: the same load against a
/// no-storage server whose handlers write the bodies and share one fdatasync at a time.
#[test]
fn concurrent_durable_producers_are_measured_against_group_commit() {
    let server = Server::start_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = dir.path().to_str().expect("utf-8 path");
    let (report, code) = run(
        "produce",
        &server.base_url(),
        &["--producers", "3", "--baselines", "--disk-dir", disk],
    );
    assert_eq!(code, Some(0), "{report}");
    let group = &report["baselines"]["group_server"];
    assert!(group["requests"].as_u64().unwrap_or(0) > 0, "{group}");
    let ratio = report["ratios"]
        .as_array()
        .expect("ratios")
        .iter()
        .find(|r| r["name"] == "produce_rate_over_group_server_rate")
        .expect("the group-commit ratio");
    assert!(ratio["value"].as_f64().unwrap_or(0.0) > 0.0, "{ratio}");
}

/// `tcp-bound` prints goal 5b's floor without HTTP: every answered body written, the rate
/// set against the 1 MiB line measured before and after.
#[test]
fn the_bare_tcp_floor_prints_its_rate_against_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = loadtest(&[
        "tcp-bound",
        "--dir",
        dir.path().to_str().expect("utf-8 path"),
        "--producers",
        "2",
        "--bytes",
        "8192",
        "--duration-s",
        "0.2",
        "--warmup-s",
        "0.05",
    ]);
    assert!(output.status.success(), "{output:?}");
    let bound: Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    let answered = bound["answered"].as_u64().expect("answered");
    assert!(
        bound["group_commit"]["requests"].as_u64().unwrap_or(0) > 0,
        "{bound}"
    );
    assert_eq!(
        bound["written_bytes"].as_u64(),
        Some(answered * 8192),
        "{bound}"
    );
    assert!(
        bound["ratio_to_line"].as_f64().unwrap_or(0.0) > 0.0,
        "{bound}"
    );
    assert_eq!(bound["line_mib_per_s"].as_array().map(Vec::len), Some(2));
}

#[test]
fn impossible_settings_are_refused_with_a_reason() {
    for (args, reason) in [
        (vec!["produce", "--record-size", "16"], "at least 32"),
        (vec!["produce", "--keys", "zipf:0"], "key counts"),
        (vec!["produce", "--rate=0"], "--rate"),
        (vec!["produce", "--partitions", "0"], "at least 1"),
    ] {
        let output = loadtest(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} ran");
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
}

/// What the proxy breaks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// Raw fetches lose their second batch: a record the server acknowledged is gone.
    DropFetchedBatch,
    /// Every produce is sent twice: records are stored twice (a retry without idempotence).
    DuplicateProduce,
}

#[derive(Clone)]
struct Proxy {
    upstream: String,
    fault: Fault,
    http: reqwest::Client,
}

async fn forward(State(proxy): State<Proxy>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 64 << 20).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let send = || {
        let mut builder = proxy
            .http
            .request(parts.method.clone(), format!("{}{path}", proxy.upstream));
        for (name, value) in &parts.headers {
            if name != "host" && name != "content-length" {
                builder = builder.header(name, value);
            }
        }
        builder.body(body.clone()).send()
    };
    let produce = parts.method == "POST" && path.contains("/records");
    if proxy.fault == Fault::DuplicateProduce && produce {
        let _ = send().await;
    }
    let Ok(answer) = send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let status = answer.status();
    let mut headers = HeaderMap::new();
    for (name, value) in answer.headers() {
        if name != "content-length" && name != "transfer-encoding" {
            headers.insert(HeaderName::from(name), value.clone());
        }
    }
    let raw = headers.get("content-type").is_some_and(|v| {
        v.as_bytes()
            .starts_with(b"application/vnd.strata.record-batches")
    });
    let Ok(mut bytes) = answer.bytes().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    if proxy.fault == Fault::DropFetchedBatch && raw {
        bytes = without_second_batch(&bytes);
    }
    (status, headers, bytes).into_response()
}

/// The batches of `bytes` minus the second one (batch length is at bytes 8..12).
fn without_second_batch(bytes: &Bytes) -> Bytes {
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    let mut index = 0;
    while at + 12 <= bytes.len() {
        let len = u32::from_be_bytes([bytes[at + 8], bytes[at + 9], bytes[at + 10], bytes[at + 11]])
            as usize;
        let end = (at + 12 + len).min(bytes.len());
        if index != 1 {
            out.extend_from_slice(&bytes[at..end]);
        }
        at = end;
        index += 1;
    }
    Bytes::from(out)
}

fn start_proxy(upstream: String, fault: Fault) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            tx.send(listener.local_addr().expect("address"))
                .expect("send");
            let proxy = Proxy {
                upstream,
                fault,
                http: reqwest::Client::new(),
            };
            let app = Router::new().fallback(forward).with_state(proxy);
            let _ = axum::serve(listener, app).await;
        });
    });
    format!("http://{}", rx.recv().expect("proxy address"))
}

#[test]
fn verification_passes_through_an_honest_proxy_and_fails_through_a_faulty_one() {
    let server = Server::start_default();
    let shape = ["--batch-records", "10", "--count", "300"];
    let honest = start_proxy(server.base_url(), Fault::None);
    let (report, code) = run("produce", &honest, &shape);
    assert_eq!(code, Some(0), "{report}");
    assert_verified(&report, "through an honest proxy");

    let lossy = start_proxy(server.base_url(), Fault::DropFetchedBatch);
    let (report, code) = run("produce", &lossy, &shape);
    assert_eq!(code, Some(2), "a lost batch must fail the run: {report}");
    assert_eq!(report["verification"]["passed"], false);
    assert_eq!(
        report["verification"]["lost"], 10,
        "{}",
        report["verification"]
    );

    let doubling = start_proxy(server.base_url(), Fault::DuplicateProduce);
    let (report, code) = run("produce", &doubling, &shape);
    assert_eq!(
        code,
        Some(2),
        "records stored twice must fail the run: {report}"
    );
    assert!(
        report["verification"]["duplicates"].as_u64().unwrap_or(0) >= 300,
        "{}",
        report["verification"]
    );
}

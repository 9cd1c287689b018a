//! What an operator sees: `/metrics` parsed by the Prometheus project's own Python parsers
//! (text 0.0.4 and OpenMetrics), counters that move by exactly what a known workload did
//! (records produced and fetched, zero-copy vs copied bytes, error codes, lag in records and
//! seconds, an upload, an eviction), request ids, JSON and escape-free logs, the version line,
//! and who may scrape.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use strata_server::clock::ManualClock;
use strata_tests::{
    Api, InProcessServer, Server, ServerOptions, binary, cli_create_key, eventually, expect_error,
    ok_json, start_secured,
};

/// One parsed sample.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A scrape, parsed by `scripts/parse_metrics.py` (prometheus_client's parsers).
struct Scrape(Vec<Sample>);

impl Scrape {
    /// The samples named `name` whose labels include `labels`.
    fn matching(&self, name: &str, labels: &[(&str, &str)]) -> Vec<&Sample> {
        self.0
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// The value of the sample `name` whose labels include `labels`; panics if none or several.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let found = self.matching(name, labels);
        assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
        found[0].value
    }

    /// Like [`Scrape::value`], 0 when the series does not exist yet.
    fn value_or_zero(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        if self.matching(name, labels).is_empty() {
            0.0
        } else {
            self.value(name, labels)
        }
    }
}

fn parse(text: &str, openmetrics: bool) -> Scrape {
    let python = std::env::var("STRATA_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/parse_metrics.py");
    let mut command = Command::new(&python);
    command.arg(&script);
    if openmetrics {
        command.arg("--openmetrics");
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python} (set STRATA_PYTHON): {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the Prometheus parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    let samples = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let sample: Value = serde_json::from_str(line).unwrap();
            Sample {
                name: sample["name"].as_str().unwrap().to_string(),
                labels: serde_json::from_value(sample["labels"].clone()).unwrap(),
                value: sample["value"].as_f64().unwrap(),
            }
        })
        .collect();
    Scrape(samples)
}

async fn scrape(api: &Api) -> Scrape {
    let response = api.get("/metrics").await;
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    parse(&response.text().await.unwrap(), false)
}

async fn raw_fetch(api: &Api, topic: &str, offset: u64) -> usize {
    let response = api
        .client
        .get(api.url(&format!(
            "/v1/topics/{topic}/partitions/0/records?offset={offset}&max_bytes=2048"
        )))
        .header("accept", "application/vnd.strata.record-batches")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.bytes().await.unwrap().len()
}

// Timestamps two minutes in the past, so the lag in seconds is known from below.
#[allow(clippy::disallowed_methods)]
fn two_minutes_ago_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(now.as_millis()).unwrap() - 120_000
}

#[tokio::test]
async fn counters_move_by_what_a_known_workload_did() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("orders", 1).await;
    let old = two_minutes_ago_ms();
    for request in 0..3 {
        let records: Vec<Value> = (0..5)
            .map(|i| json!({"key": format!("k{request}-{i}"), "value": "v", "timestamp": old}))
            .collect();
        api.produce("orders", &json!({ "records": records })).await;
    }
    let fetched = api.fetch_all("orders", 0, 0).await;
    assert_eq!(fetched.len(), 15);
    expect_error(
        api.get("/v1/topics/orders/partitions/0/records?offset=99")
            .await,
        416,
        "offset_out_of_range",
    )
    .await;
    let metrics = scrape(&api).await;
    let orders = [("topic", "orders")];
    assert_eq!(metrics.value("strata_produce_records_total", &orders), 15.0);
    assert!(metrics.value("strata_produce_bytes_total", &orders) > 15.0);
    assert_eq!(
        metrics.value("strata_fetch_records_total", &[("format", "json")]),
        15.0
    );
    assert_eq!(
        metrics.value(
            "strata_http_errors_total",
            &[("code", "offset_out_of_range")]
        ),
        1.0
    );
    let route = "/v1/topics/{topic}/partitions/{partition}/records";
    let fetch_416 = [("route", route), ("method", "GET"), ("status", "416")];
    assert_eq!(metrics.value("strata_http_requests_total", &fetch_416), 1.0);
    let produced = [("route", "/v1/topics/{topic}/records"), ("method", "POST")];
    assert_eq!(
        metrics.value("strata_http_request_duration_seconds_count", &produced),
        3.0
    );
    assert_eq!(
        metrics.value("strata_append_requests_total", &[("acks", "all")]),
        3.0
    );
    let partition = [("topic", "orders"), ("partition", "0")];
    assert_eq!(
        metrics.value("strata_partition_high_watermark", &partition),
        15.0
    );
    assert_eq!(metrics.value("strata_poisoned_partitions", &[]), 0.0);
    assert!(metrics.value("strata_recovery_duration_seconds", &[]) > 0.0);
    assert!(metrics.value("process_open_fds", &[]) > 0.0);

    // Lag: committed 10 of 15; the oldest unconsumed record is two minutes old.
    let commit = json!({"offsets": [{"topic": "orders", "partition": 0, "offset": 10}]});
    ok_json(api.post("/v1/groups/billing/offsets", &commit).await).await;
    let metrics = scrape(&api).await;
    let lag = [
        ("group", "billing"),
        ("topic", "orders"),
        ("partition", "0"),
    ];
    assert_eq!(metrics.value("strata_group_lag_records", &lag), 5.0);
    let seconds = metrics.value("strata_group_lag_seconds", &lag);
    assert!((119.0..600.0).contains(&seconds), "{seconds}");

    // The same exposition as OpenMetrics, when asked for, parses with the OpenMetrics parser.
    let response = api
        .client
        .get(api.url("/metrics"))
        .header("accept", "application/openmetrics-text; version=1.0.0")
        .send()
        .await
        .unwrap();
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let open = parse(&response.text().await.unwrap(), true);
    assert_eq!(open.value("strata_produce_records_total", &orders), 15.0);
}

/// A tiered server whose local log keeps only its last segments: old offsets are cold.
fn tiered_server() -> Server {
    Server::start(ServerOptions::with_args(&[
        "--tiering-interval-ms",
        "100",
        "--retention-check-interval-ms",
        "100",
    ]))
}

#[tokio::test]
async fn uploads_and_cold_reads_show_in_metrics_and_hot_reads_count_as_zero_copy() {
    let server = tiered_server();
    let api = Api::new(&server);
    let configs = json!({"remote_storage_enable": true, "segment_bytes": 4096,
                         "local_retention_bytes": 8192, "remote_upload_idle_ms": 300});
    api.create_topic_with("archive", 1, configs).await;
    for round in 0..30 {
        let records: Vec<Value> = (0..5)
            .map(
                |i| json!({"key": format!("k{round}"), "value": format!("{i}-{}", "x".repeat(60))}),
            )
            .collect();
        api.produce("archive", &json!({ "records": records })).await;
    }
    eventually(
        Duration::from_secs(30),
        "old segments leave the local log",
        || {
            let api = api.clone();
            async move {
                let offsets = api.offsets("archive", 0).await;
                offsets["earliest_local"]
                    .as_u64()
                    .is_some_and(|start| start > 0)
            }
        },
    )
    .await;
    let metrics = scrape(&api).await;
    assert!(metrics.value("strata_tiering_uploaded_segments_total", &[]) >= 1.0);
    assert!(metrics.value("strata_tiering_uploaded_bytes_total", &[]) > 0.0);
    assert!(metrics.value("strata_tiering_manifest_writes_total", &[]) >= 1.0);
    assert_eq!(
        metrics.value("strata_tiering_sync_failures_total", &[]),
        0.0
    );
    // Documented in the README, and was never exported.
    assert_eq!(
        metrics.value("strata_tiering_locked_delete_retries_total", &[]),
        0.0
    );
    let lag = [("topic", "archive"), ("partition", "0")];
    assert!(metrics.value("strata_tiering_upload_lag_seconds", &lag) >= 0.0);

    let copied = |s: &Scrape| s.value("strata_read_copied_bytes_total", &[]);
    let zero_copy = |s: &Scrape| s.value("strata_read_zero_copy_bytes_total", &[]);
    let before = scrape(&api).await;
    let cold = raw_fetch(&api, "archive", 0).await as f64;
    let after_cold = scrape(&api).await;
    assert!(cold > 0.0);
    assert_eq!(
        copied(&after_cold) - copied(&before),
        cold,
        "a cold read is a copy"
    );
    assert_eq!(zero_copy(&after_cold), zero_copy(&before));
    assert!(after_cold.value("strata_cold_read_bytes_total", &[]) > 0.0);

    let latest = api.offsets("archive", 0).await["latest"].as_u64().unwrap();
    let hot = raw_fetch(&api, "archive", latest - 1).await as f64;
    let after_hot = scrape(&api).await;
    assert!(hot > 0.0);
    assert_eq!(
        zero_copy(&after_hot) - zero_copy(&after_cold),
        hot,
        "a hot read is mapped"
    );
    assert_eq!(copied(&after_hot), copied(&after_cold));
    assert_eq!(
        after_hot.value("strata_fetch_bytes_total", &[("format", "record_batches")]),
        cold + hot
    );
}

/// A client may send any token as a method, before authenticating: each made-up one added
/// a counter and a histogram, so 60 requests grew the scrape by 1,464 series.
#[tokio::test]
async fn made_up_methods_share_one_series() {
    let server = Server::start_default();
    let api = Api::new(&server);
    for i in 0..20 {
        let method = reqwest::Method::from_bytes(format!("X{i}Y").as_bytes()).unwrap();
        let response = api
            .client
            .request(method, api.url("/v1/topics"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 405);
    }
    let scrape = scrape(&api).await;
    let requests = scrape.matching("strata_http_requests_total", &[("route", "/v1/topics")]);
    let methods: std::collections::BTreeSet<&str> = requests
        .iter()
        .map(|s| s.labels["method"].as_str())
        .collect();
    assert!(methods.iter().all(|m| !m.starts_with('X')), "{methods:?}");
    assert_eq!(
        scrape.value(
            "strata_http_requests_total",
            &[
                ("route", "/v1/topics"),
                ("method", "other"),
                ("status", "405")
            ]
        ),
        20.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_member_is_counted_by_reason() {
    let clock = ManualClock::new(1_000_000);
    let server = InProcessServer::start(Arc::clone(&clock)).await;
    let api = server.api();
    api.create_topic("jobs", 1).await;
    let join = json!({"topics": ["jobs"], "session_timeout_ms": 10_000});
    ok_json(api.post("/v1/groups/workers/members", &join).await).await;
    let before = scrape(&api).await;
    let session = [("reason", "session_timeout")];
    assert_eq!(before.value("strata_group_evictions_total", &session), 0.0);
    assert_eq!(
        before.value("strata_group_members", &[("group", "workers")]),
        1.0
    );
    clock.advance(10_001);
    eventually(Duration::from_secs(30), "the member is evicted", || {
        let api = api.clone();
        async move {
            scrape(&api)
                .await
                .value_or_zero("strata_group_evictions_total", &session)
                == 1.0
        }
    })
    .await;
    let after = scrape(&api).await;
    assert_eq!(
        after.value(
            "strata_group_evictions_total",
            &[("reason", "max_poll_interval")]
        ),
        0.0
    );
    assert_eq!(
        after.value("strata_group_members", &[("group", "workers")]),
        0.0
    );
    server.stop().await;
}

#[tokio::test]
async fn request_ids_are_echoed_and_json_logs_parse_with_the_id() {
    let server = Server::start(ServerOptions::with_args(&["--log-format", "json"]));
    let api = Api::new(&server);
    let response = api
        .client
        .get(api.url("/v1/topics/nope"))
        .header("x-request-id", "trace-me-42")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "trace-me-42");
    assert_eq!(response.status().as_u16(), 404);
    let generated = api.get("/v1/topics").await;
    let id = generated.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(id.len(), 32, "{id}");
    // Only whole lines: the harness collects stderr as it arrives, maybe mid-line.
    let whole_lines = || {
        let stderr = server.stderr();
        let end = stderr.rfind('\n').map_or(0, |i| i + 1);
        stderr[..end].to_string()
    };
    eventually(Duration::from_secs(10), "the access line is logged", || {
        let logged = whole_lines();
        async move { logged.contains("trace-me-42") }
    })
    .await;
    let stderr = whole_lines();
    let mut access = None;
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        let parsed: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {line}"));
        if parsed["span"]["request_id"] == "trace-me-42" && parsed["target"] == "strata::access" {
            access = Some(parsed);
        }
    }
    let access = access.expect("an access line for the request");
    assert_eq!(access["route"], "/v1/topics/{topic}");
    assert_eq!(access["path"], "/v1/topics/nope");
    assert_eq!(access["status"], 404);
    assert_eq!(access["code"], "topic_not_found");
    assert_eq!(access["principal"], "anonymous");
}

#[tokio::test]
async fn text_logs_to_a_pipe_carry_no_escape_codes_and_sampling_zero_logs_no_access() {
    let server = Server::start(ServerOptions::with_args(&["--access-log-sample-rate", "0"]));
    let api = Api::new(&server);
    api.create_topic("quiet", 1).await;
    // Waited for, so the checks below can say anything.
    server.logged("created topic").await;
    let stderr = server.stderr();
    assert!(!stderr.contains('\u{1b}'), "escape codes in {stderr:?}");
    assert!(!stderr.contains("strata::access"), "{stderr}");
}

#[test]
fn version_names_the_commit() {
    let output = Command::new(binary()).arg("--version").output().unwrap();
    assert!(output.status.success());
    let line = String::from_utf8(output.stdout).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    let rest = line
        .trim()
        .strip_prefix(&format!("strata {version} ("))
        .unwrap_or_else(|| panic!("{line}"));
    let commit = rest.strip_suffix(')').unwrap_or_else(|| panic!("{line}"));
    assert!(
        commit == "unknown" || commit.chars().all(|c| c.is_ascii_hexdigit()),
        "{line}"
    );
}

#[tokio::test]
async fn scraping_needs_describe_on_the_cluster_and_can_be_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let token = |principal: &str| cli_create_key(dir.path(), principal);
    let (admin, monitor, nobody) = (token("admin"), token("prometheus"), token("nobody"));
    let server = start_secured(dir.path());
    let api = Api::new(&server);
    let get = |token: Option<String>| {
        let api = api.clone();
        async move {
            let mut request = api.client.get(api.url("/metrics"));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            request.send().await.unwrap()
        }
    };
    expect_error(get(None).await, 401, "unauthenticated").await;
    expect_error(get(Some(nobody)).await, 403, "forbidden").await;
    let acl = json!({"principal": "prometheus", "resource_type": "cluster",
                     "resource_name": "*", "pattern_type": "literal",
                     "operation": "describe", "permission": "allow"});
    let added = api
        .client
        .post(api.url("/v1/acls"))
        .bearer_auth(&admin)
        .json(&acl)
        .send()
        .await
        .unwrap();
    assert!(
        added.status().is_success(),
        "{}",
        added.text().await.unwrap()
    );
    assert_eq!(get(Some(monitor)).await.status().as_u16(), 200);
    drop(server);

    let off = Server::start(ServerOptions::with_args(&["--metrics-enabled", "false"]));
    expect_error(Api::new(&off).get("/metrics").await, 404, "not_found").await;
}

/// Metric names in a PromQL expression (`strata_*` and `process_*`).
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &expr[i..];
        let starts_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if starts_word && (rest.starts_with("strata_") || rest.starts_with("process_")) {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            names.push(rest[..end].to_string());
            i += end;
        } else {
            i += 1;
        }
    }
    names
}

fn expressions(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child) {
                    ("expr", Value::String(expr)) => out.push(expr.clone()),
                    _ => expressions(child, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| expressions(item, out)),
        _ => {}
    }
}

#[tokio::test]
async fn every_series_the_dashboard_queries_is_exported() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/strata.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut exprs = Vec::new();
    expressions(&dashboard, &mut exprs);
    assert!(exprs.len() >= 15, "panels with queries: {}", exprs.len());
    let server = Server::start_default();
    let api = Api::new(&server);
    // Labelled families appear with their first series: a little of everything.
    let tiered = json!({"remote_storage_enable": true});
    api.create_topic_with("seen", 1, tiered).await;
    api.produce("seen", &json!({"records": [{"value": 1}]}))
        .await;
    api.fetch_all("seen", 0, 0).await;
    // A raw body large enough to be streamed into the log (`strata_append_streams_total`).
    let records: Vec<strata_server::log::NewRecord> = (0..300)
        .map(|i| strata_server::log::NewRecord {
            timestamp: strata_tests::hour_ago_ms() + i,
            key: None,
            value: Some(vec![7u8; 1024].into()),
            headers: Vec::new(),
        })
        .collect();
    let options = strata_server::log::batch::BatchOptions::default();
    let body = strata_server::log::batch::encode_batch(&options, &records).unwrap();
    let raw = api
        .client
        .post(api.url("/v1/topics/seen/partitions/0/records"))
        .header("content-type", "application/vnd.strata.record-batches")
        .body(body)
        .send()
        .await
        .unwrap();
    ok_json(raw).await;
    api.get("/v1/topics/missing").await;
    let commit = json!({"offsets": [{"topic": "seen", "partition": 0, "offset": 0}]});
    ok_json(api.post("/v1/groups/watchers/offsets", &commit).await).await;
    let text = api.get("/metrics").await.text().await.unwrap();
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let exported = |name: &str| {
        families.contains(&name)
            || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
                name.strip_suffix(suffix)
                    .is_some_and(|base| families.contains(&base))
            })
    };
    let mut missing: Vec<String> = exprs
        .iter()
        .flat_map(|e| metric_names(e))
        .filter(|name| !exported(name))
        .collect();
    missing.dedup();
    assert_eq!(missing, Vec::<String>::new(), "queried but not exported");
}

#[test]
fn metric_names_are_found_in_promql() {
    assert_eq!(
        metric_names(r#"sum(rate(strata_a_total{x="y"}[5m])) / process_open_fds + foo_strata_b"#),
        ["strata_a_total", "process_open_fds"]
    );
}

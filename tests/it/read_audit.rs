//! Read audit (issue 17): every read of a topic with `audit_reads` - JSON, NDJSON, record
//! batches, SSE, a group member's JSON and SSE reads, and a denied read - is an entry of
//! `__audit_reads`, that topic reaches the bucket under its own transparency log, and
//! `strata verify --reads` lists the same entries from the bucket alone. An audited read whose
//! entry cannot be written sends nothing.

use std::process::Command;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use strata_tests::{
    Api, Server, ServerOptions, SseParser, Tmpfs, bearer_client, cli_create_key, eventually,
    expect_error, ok_json,
};

use crate::tiering::TestStore;

const AUDIT: &str = "__audit_reads";
const WAIT: Duration = Duration::from_secs(60);

fn api_as(server: &Server, token: &str) -> Api {
    Api {
        base: server.base_url(),
        client: bearer_client(Some(token)),
    }
}

async fn grant(admin: &Api, principal: &str, kind: &str, name: &str) {
    let rule = json!({
        "principal": principal, "resource_type": kind, "resource_name": name,
        "pattern_type": "literal", "operation": "read", "permission": "allow",
    });
    let response = admin.post("/v1/acls", &rule).await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
}

async fn create_key(admin: &Api, principal: &str) -> String {
    let response = admin
        .post("/v1/auth/keys", &json!({"principal": principal}))
        .await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    body["token"].as_str().unwrap().to_string()
}

/// A GET with a request id of our choosing and an `Accept` header.
async fn get(api: &Api, path: &str, accept: &str, request_id: &str) -> reqwest::Response {
    api.client
        .get(api.url(path))
        .header("accept", accept)
        .header("x-request-id", request_id)
        .send()
        .await
        .unwrap()
}

/// The audit entry we expect for a read, without the fields only the server knows (time and
/// client port).
fn expected(
    principal: &str,
    range: Option<(u64, u64, u64)>,
    format: &str,
    request_id: &str,
    group: Option<&str>,
) -> Value {
    let (first, last, records) = match range {
        Some((first, last, records)) => (json!(first), json!(last), records),
        None => (Value::Null, Value::Null, 0),
    };
    let mut entry = json!({
        "outcome": if range.is_some() { "served" } else { "denied" },
        "principal": principal, "topic": "ledger", "partition": 0,
        "first_offset": first, "last_offset": last, "records": records,
        "request_id": request_id, "format": format,
    });
    if let Some(group) = group {
        entry["group"] = json!(group);
    }
    entry
}

/// An entry with the fields [`expected`] leaves out checked and removed.
fn comparable(entry: &Value, since_ms: i64) -> Value {
    let mut entry = entry.clone();
    let object = entry.as_object_mut().unwrap();
    let time = object.remove("time_ms").unwrap().as_i64().unwrap();
    assert!(time >= since_ms, "time_ms {time} is before the test began");
    let address = object.remove("client_address").unwrap();
    assert!(
        address.as_str().unwrap().starts_with("127.0.0.1:"),
        "{address}"
    );
    object.remove("audit_offset");
    entry
}

/// The first/last offsets and count of the records in a JSON answer's `records`.
fn range_of(records: &Value) -> (u64, u64, u64) {
    let offsets: Vec<u64> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["offset"].as_u64().unwrap())
        .collect();
    assert!(!offsets.is_empty(), "the read returned records");
    (offsets[0], *offsets.last().unwrap(), offsets.len() as u64)
}

/// The data of the next `records` event of an SSE response (pings skipped).
async fn next_records_event(
    body: &mut futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    parser: &mut SseParser,
    pending: &mut std::collections::VecDeque<strata_tests::SseEvent>,
) -> Value {
    loop {
        while let Some(event) = pending.pop_front() {
            if event.event == "records" {
                return serde_json::from_str(&event.data).unwrap();
            }
            assert_eq!(event.event, "ping", "{event:?}");
        }
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("an SSE event within 10 s")
            .expect("the stream is open")
            .unwrap();
        pending.extend(parser.push(&chunk));
    }
}

async fn open_sse(
    api: &Api,
    path: &str,
    request_id: &str,
) -> futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>> {
    let response = get(api, path, "text/event-stream", request_id).await;
    assert_eq!(response.status(), 200);
    response.bytes_stream().boxed()
}

async fn audit_entries(admin: &Api) -> Vec<Value> {
    ok_json(
        admin
            .get(&format!("/v1/topics/{AUDIT}/partitions/0/records"))
            .await,
    )
    .await["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|record| {
            assert_eq!(record["key"], record["value"]["topic"], "key = topic");
            record["value"].clone()
        })
        .collect()
}

async fn every_read_is_audited_and_verify_lists_the_same_entries(store: TestStore) {
    // A minute ago: every entry is younger.
    let since_ms = strata_tests::hour_ago_ms() + 3_540_000;
    let dir = tempfile::tempdir().unwrap();
    let admin_token = cli_create_key(dir.path(), "admin");
    let mut options = store.options(Some(dir.path().to_path_buf()));
    options.args.extend(
        [
            "--auth-mode",
            "api_key",
            "--auth-super-users",
            "admin",
            "--audit-upload-idle-ms",
            "200",
        ]
        .map(String::from),
    );
    let mut server = Server::start(options);
    let admin = api_as(&server, &admin_token);
    let alice = api_as(&server, &create_key(&admin, "alice").await);
    let bob = api_as(&server, &create_key(&admin, "bob").await);
    grant(&admin, "alice", "topic", "ledger").await;
    grant(&admin, "alice", "group", "auditors").await;
    admin
        .create_topic_with("ledger", 1, json!({"audit_reads": true}))
        .await;
    admin.create_topic("plain", 1).await;
    let six: Vec<Value> = (0..6).map(|i| json!({"value": i})).collect();
    admin.produce("ledger", &json!({"records": six})).await;
    admin
        .produce("plain", &json!({"records": [{"value": 1}]}))
        .await;
    let records = "/v1/topics/ledger/partitions/0/records";
    let mut want = Vec::new();

    // JSON, NDJSON and the stored batches.
    let json_read = ok_json(
        get(
            &alice,
            &format!("{records}?offset=0"),
            "application/json",
            "r-json",
        )
        .await,
    )
    .await;
    want.push(expected(
        "alice",
        Some(range_of(&json_read["records"])),
        "json",
        "r-json",
        None,
    ));
    let ndjson = get(
        &alice,
        &format!("{records}?offset=2&max_records=2"),
        "application/x-ndjson",
        "r-ndjson",
    )
    .await;
    let lines: Value = ndjson
        .text()
        .await
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .collect();
    assert_eq!(range_of(&lines), (2, 3, 2));
    want.push(expected(
        "alice",
        Some((2, 3, 2)),
        "ndjson",
        "r-ndjson",
        None,
    ));
    let raw = get(
        &alice,
        &format!("{records}?offset=3"),
        "application/vnd.strata.record-batches",
        "r-raw",
    )
    .await;
    assert_eq!(raw.status(), 200);
    let header = |name: &str| {
        raw.headers()[name]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let (first, next) = (header("strata-first-offset"), header("strata-next-offset"));
    assert_eq!(
        (first, next),
        (0, 6),
        "one stored batch holds the six records"
    );
    want.push(expected(
        "alice",
        Some((first, next - 1, 6)),
        "record_batches",
        "r-raw",
        None,
    ));

    // A read at the end sends nothing and is not an entry; reads of other topics are not either.
    let empty = ok_json(
        get(
            &alice,
            &format!("{records}?offset=6"),
            "application/json",
            "r-empty",
        )
        .await,
    )
    .await;
    assert_eq!(empty["records"], json!([]));
    ok_json(
        get(
            &admin,
            "/v1/topics/plain/partitions/0/records",
            "application/json",
            "r-plain",
        )
        .await,
    )
    .await;

    // SSE: one entry per records event.
    let mut stream = open_sse(&alice, &format!("{records}?offset=4"), "r-sse").await;
    let (mut parser, mut pending) = (SseParser::default(), Default::default());
    let event = next_records_event(&mut stream, &mut parser, &mut pending).await;
    want.push(expected(
        "alice",
        Some(range_of(&event["records"])),
        "sse",
        "r-sse",
        None,
    ));
    admin
        .produce("ledger", &json!({"records": [{"value": 6}]}))
        .await;
    let event = next_records_event(&mut stream, &mut parser, &mut pending).await;
    assert_eq!(range_of(&event["records"]), (6, 6, 1));
    want.push(expected("alice", Some((6, 6, 1)), "sse", "r-sse", None));
    drop(stream);

    // A group member's JSON read, then its stream.
    let joined = ok_json(
        alice
            .post(
                "/v1/groups/auditors/members",
                &json!({"topics": ["ledger"], "auto_offset_reset": "earliest"}),
            )
            .await,
    )
    .await;
    let member = format!(
        "/v1/groups/auditors/members/{}/records?generation={}",
        joined["member_id"].as_str().unwrap(),
        joined["generation"]
    );
    let polled = ok_json(get(&alice, &member, "application/json", "r-group").await).await;
    want.push(expected(
        "alice",
        Some(range_of(&polled["records"])),
        "group_json",
        "r-group",
        Some("auditors"),
    ));
    admin
        .produce("ledger", &json!({"records": [{"value": 7}]}))
        .await;
    let mut stream = open_sse(&alice, &member, "r-group-sse").await;
    let event = next_records_event(&mut stream, &mut parser, &mut pending).await;
    assert_eq!(range_of(&event["records"]), (7, 7, 1));
    want.push(expected(
        "alice",
        Some((7, 7, 1)),
        "group_sse",
        "r-group-sse",
        Some("auditors"),
    ));
    drop(stream);

    // Bob may not read: refused, and recorded as denied.
    let refused = get(&bob, records, "application/json", "r-denied").await;
    expect_error(refused, 403, "forbidden").await;
    want.push(expected("bob", None, "json", "r-denied", None));

    let entries = audit_entries(&admin).await;
    let got: Vec<Value> = entries.iter().map(|e| comparable(e, since_ms)).collect();
    assert_eq!(
        got, want,
        "the audit entries are the reads performed, in order"
    );

    // The audit topic reaches the bucket, and verify lists the same entries from it alone.
    let objects = store.open().scoped();
    eventually(WAIT, "every audit entry is in the bucket", || {
        let objects = objects.clone();
        let count = want.len();
        async move {
            strata_server::archive::reads::list(objects.as_ref())
                .await
                .is_ok_and(|reads| reads.len() == count)
        }
    })
    .await;
    assert!(server.terminate().success());
    let listed = strata_server::archive::reads::list(objects.as_ref())
        .await
        .unwrap();
    let listed: Vec<Value> = listed
        .iter()
        .map(|read| serde_json::to_value(read).unwrap())
        .collect();
    assert_eq!(listed.len(), entries.len());
    for (offset, (listed, served)) in listed.iter().zip(&entries).enumerate() {
        assert_eq!(listed["audit_offset"], json!(offset));
        let mut listed = listed.clone();
        listed.as_object_mut().unwrap().remove("audit_offset");
        assert_eq!(&listed, served, "the bucket holds the entry the API served");
    }
    if let TestStore::Local(bucket) = &store {
        let output = Command::new(strata_tests::binary())
            .args(["verify", "--reads", "--json"])
            .arg(bucket.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        let partitions = report["partitions"].as_array().unwrap();
        assert!(
            partitions
                .iter()
                .any(|p| p["topic"] == AUDIT && p["status"] == "ok"),
            "the audit topic is verified against its own checkpoint: {partitions:?}"
        );
        assert_eq!(
            report["reads"],
            json!(
                listed
                    .iter()
                    .enumerate()
                    .map(|(i, l)| {
                        let mut l = l.clone();
                        l["audit_offset"] = json!(i);
                        l
                    })
                    .collect::<Vec<_>>()
            )
        );
        assert!(stderr.contains("DENIED"), "{stderr}");
    }

    // A server restored from the bucket alone has the audit, and its entries continue after it.
    // A restore onto a data directory that lost its key needs a new key allowed on purpose.
    let mut options = store.options(None);
    options.args.extend([
        "--archive-allow-new-signing-key".to_string(),
        "true".to_string(),
    ]);
    let restored = Server::start(options);
    let api = Api::new(&restored);
    let audit = api.offsets(AUDIT, 0).await;
    assert_eq!(audit["latest"], json!(entries.len()), "{audit}");
    api.create_topic_with("ledger2", 1, json!({"audit_reads": true}))
        .await;
    api.produce("ledger2", &json!({"records": [{"value": 1}]}))
        .await;
    ok_json(
        get(
            &api,
            "/v1/topics/ledger2/partitions/0/records",
            "application/json",
            "r-after",
        )
        .await,
    )
    .await;
    let next = ok_json(
        api.get(&format!(
            "/v1/topics/{AUDIT}/partitions/0/records?offset={}",
            entries.len()
        ))
        .await,
    )
    .await;
    assert_eq!(next["records"][0]["offset"], json!(entries.len()));
    assert_eq!(next["records"][0]["value"]["request_id"], "r-after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_is_audited_and_verify_lists_the_same_entries_local() {
    every_read_is_audited_and_verify_lists_the_same_entries(TestStore::local()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_is_audited_and_verify_lists_the_same_entries_s3() {
    let bucket = strata_tiering::testing::s3_test_server().bucket.clone();
    let store = TestStore::s3(&bucket, "read-audit");
    every_read_is_audited_and_verify_lists_the_same_entries(store).await;
}

/// With the data disk full, the audit entry of a read cannot be written: the read gets 503
/// `audit_unavailable` and no records, and once space returns reads are served and recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_whose_audit_entry_cannot_be_written_sends_nothing() {
    let disk = Tmpfs::mount("4m");
    let server = Server::start(ServerOptions {
        args: Vec::new(),
        data_dir: Some(disk.path().to_path_buf()),
        env: Vec::new(),
    });
    let api = Api::new(&server);
    api.create_topic_with("ledger", 1, json!({"audit_reads": true}))
        .await;
    api.produce("ledger", &json!({"records": [{"value": "secret"}]}))
        .await;
    let records = "/v1/topics/ledger/partitions/0/records";
    // The first read creates the audit topic.
    ok_json(get(&api, records, "application/json", "before").await).await;
    let filler = disk.path().join("filler");
    let mut file = std::fs::File::create(&filler).unwrap();
    while std::io::Write::write_all(&mut file, &[0u8; 4096]).is_ok() {}
    drop(file);
    // Each entry may still fit in a page the audit segment already has; the disk is full, so
    // one of the next reads needs a page it cannot get.
    let mut refused = None;
    for attempt in 0..64 {
        let response = get(
            &api,
            records,
            "application/json",
            &format!("full-{attempt}"),
        )
        .await;
        if response.status() != 200 {
            refused = Some((attempt, response));
            break;
        }
    }
    let (attempt, response) = refused.expect("a read was refused while the disk was full");
    let body = expect_error(response, 503, "audit_unavailable").await;
    assert_eq!(body["error"]["retryable"], true);
    assert!(body.get("records").is_none(), "no records in {body}");
    std::fs::remove_file(&filler).unwrap();
    let served = ok_json(get(&api, records, "application/json", "after").await).await;
    assert_eq!(served["records"][0]["value"], "secret");
    let ids: Vec<String> = audit_entries(&api)
        .await
        .iter()
        .map(|e| e["request_id"].as_str().unwrap().to_string())
        .collect();
    let refused_id = format!("full-{attempt}");
    assert!(
        !ids.contains(&refused_id),
        "the refused read left no entry: {ids:?}"
    );
    assert_eq!(ids.first().map(String::as_str), Some("before"));
    assert_eq!(ids.last().map(String::as_str), Some("after"));
    // Operators see both in /metrics.
    let metrics = api.client.get(api.url("/metrics")).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing from {metrics}"))
    };
    let written = value(r#"strata_read_audit_entries_total{outcome="served"}"#);
    assert_eq!(written, ids.len() as f64);
    assert_eq!(
        value(r#"strata_read_audit_failures_total{outcome="served"}"#),
        1.0
    );
}

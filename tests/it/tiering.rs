//! Tiered storage as a user sees it, against the local folder store and a real S3-compatible
//! server (SeaweedFS started by `scripts/start-s3.sh`): records read back byte for byte after
//! local retention removed the local copies, restore into an empty data directory, kill -9
//! during uploads, and Object Lock.

use std::collections::BTreeSet;
use std::time::Duration;

use object_store::ObjectStoreExt;
use object_store::path::Path;
use serde_json::{Value, json};
use strata_tests::{Api, Server, ServerOptions, eventually, expect_error, hour_ago_ms, ok_json};
use strata_tiering::layout;
use strata_tiering::manifest::load_latest;
use strata_tiering::store::{StoreSettings, TierStore, list_sorted};
use strata_tiering::testing::{s3_test_server, unique_prefix};

const WAIT: Duration = Duration::from_secs(60);

/// Where a test's server tiers to.
pub(crate) enum TestStore {
    Local(tempfile::TempDir),
    S3 { bucket: String, prefix: String },
}

impl TestStore {
    pub(crate) fn local() -> Self {
        TestStore::Local(tempfile::tempdir().unwrap())
    }

    pub(crate) fn s3(bucket: &str, label: &str) -> Self {
        TestStore::S3 {
            bucket: bucket.to_string(),
            prefix: unique_prefix(label),
        }
    }

    pub(crate) fn settings(&self) -> StoreSettings {
        match self {
            TestStore::Local(dir) => StoreSettings {
                url: dir.path().display().to_string(),
                ..StoreSettings::default()
            },
            TestStore::S3 { bucket, prefix } => s3_test_server().settings(bucket, prefix),
        }
    }

    pub(crate) fn open(&self) -> TierStore {
        TierStore::open(&self.settings()).unwrap()
    }

    pub(crate) fn options(&self, data_dir: Option<std::path::PathBuf>) -> ServerOptions {
        let settings = self.settings();
        let mut args = vec![
            "--tiering-interval-ms".to_string(),
            "100".to_string(),
            "--retention-check-interval-ms".to_string(),
            "100".to_string(),
            "--tiering-orphan-grace-ms".to_string(),
            "0".to_string(),
            "--tiered-storage-url".to_string(),
            settings.url.clone(),
        ];
        let mut env = Vec::new();
        if let TestStore::S3 { .. } = self {
            let server = s3_test_server();
            args.extend([
                "--tiered-storage-s3-endpoint".to_string(),
                server.endpoint.clone(),
            ]);
            args.extend([
                "--tiered-storage-s3-region".to_string(),
                server.region.clone(),
            ]);
            env.push((
                "AWS_ACCESS_KEY_ID".to_string(),
                server.credentials.access_key_id.clone(),
            ));
            env.push((
                "AWS_SECRET_ACCESS_KEY".to_string(),
                server.credentials.secret_access_key.clone(),
            ));
        }
        ServerOptions {
            args,
            data_dir,
            env,
        }
    }
}

fn tiered_configs() -> Value {
    json!({
        "remote_storage_enable": true,
        "segment_bytes": 4096,
        "local_retention_bytes": 8192,
        "remote_upload_idle_ms": 300,
    })
}

async fn produce_rounds(api: &Api, topic: &str, rounds: usize, from: usize) {
    for i in from..from + rounds {
        let records: Vec<Value> = (0..5)
            .map(|j| json!({"key": format!("k{i}"), "value": format!("value-{i}-{j}-{}", "x".repeat(60))}))
            .collect();
        api.produce(topic, &json!({ "records": records })).await;
    }
}

/// Every stored batch from `offset` to the high watermark, as raw bytes.
async fn fetch_raw(api: &Api, topic: &str, mut offset: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let response = api
            .client
            .get(api.url(&format!(
                "/v1/topics/{topic}/partitions/0/records?offset={offset}"
            )))
            .header("accept", "application/vnd.strata.record-batches")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let header =
            |name: &str| -> u64 { response.headers()[name].to_str().unwrap().parse().unwrap() };
        let next = header("strata-next-offset");
        let high = header("strata-high-watermark");
        let body = response.bytes().await.unwrap();
        if body.is_empty() {
            return out;
        }
        out.extend_from_slice(&body);
        offset = next;
        if offset >= high {
            return out;
        }
    }
}

fn is_cold(offsets: &Value) -> bool {
    offsets["earliest"] == 0
        && offsets["earliest_local"]
            .as_u64()
            .is_some_and(|local| local > 0)
        && offsets["latest_tiered"].as_u64() >= offsets["earliest_local"].as_u64()
}

async fn wait_for_cold_data(api: &Api, topic: &str) -> Value {
    eventually(
        WAIT,
        "segments were uploaded and local retention removed some",
        || async { is_cold(&api.offsets(topic, 0).await) },
    )
    .await;
    api.offsets(topic, 0).await
}

/// Produce, let the server upload and drop local copies, then read every offset from 0 again in
/// JSON and raw form; then restore into an empty data directory and append more.
async fn cold_reads_and_restore(store: TestStore) {
    let mut server = Server::start(store.options(None));
    let api = Api::new(&server);
    api.create_topic_with("cold", 1, tiered_configs()).await;
    produce_rounds(&api, "cold", 60, 0).await;
    let json_before = api.fetch_all("cold", 0, 0).await;
    let raw_before = fetch_raw(&api, "cold", 0).await;
    assert_eq!(json_before.len(), 300);
    let offsets = wait_for_cold_data(&api, "cold").await;
    assert_eq!(
        api.fetch_all("cold", 0, 0).await,
        json_before,
        "JSON after upload: {offsets}"
    );
    assert_eq!(
        fetch_raw(&api, "cold", 0).await,
        raw_before,
        "raw batches after upload"
    );
    // A cold read in the middle lands on the right record.
    let middle = api
        .get_json("/v1/topics/cold/partitions/0/records?offset=7&max_records=1")
        .await;
    assert_eq!(middle["records"][0]["offset"], 7);
    assert_eq!(middle["records"][0]["value"], json_before[7]["value"]);
    let segments = api.get_json("/v1/topics/cold/partitions/0/segments").await;
    let locations: BTreeSet<String> = segments["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["location"].as_str().unwrap().to_string())
        .collect();
    assert!(locations.contains("remote"), "{segments}");
    assert!(
        segments["cache"]["gets"].as_u64().unwrap() > 0,
        "{segments}"
    );
    // Re-reading hits the cache.
    let hits = segments["cache"]["hits"].as_u64().unwrap();
    api.fetch_all("cold", 0, 0).await;
    let again = api.get_json("/v1/topics/cold/partitions/0/segments").await;
    assert!(again["cache"]["hits"].as_u64().unwrap() > hits, "{again}");

    // A legal hold goes to the bucket with the topic's metadata.
    let placed = api
        .post(
            "/v1/topics/cold/legal-holds",
            &json!({"reason": "keep for restore", "start_ms": 0}),
        )
        .await;
    assert_eq!(placed.status().as_u16(), 201);
    let tier = store.open();
    eventually(WAIT, "the bucket's topic.json lists the hold", || {
        let tier = tier.clone();
        async move {
            let objects = tier.scoped();
            match objects.get(&layout::topic_file("cold")).await {
                Ok(found) => {
                    let body = found.bytes().await.unwrap();
                    String::from_utf8_lossy(&body).contains("keep for restore")
                }
                Err(_) => false,
            }
        }
    })
    .await;

    // A consumer group's position goes to the bucket as well.
    let committed = api
        .post(
            "/v1/groups/readers/offsets",
            &json!({"offsets": [{"topic": "cold", "partition": 0, "offset": 42, "metadata": "batch 7"}]}),
        )
        .await;
    assert_eq!(committed.status().as_u16(), 200);
    let committed = api.get_json("/v1/groups/readers/offsets").await;
    eventually(WAIT, "the bucket holds the group's commit", || {
        let tier = tier.clone();
        async move {
            let objects = tier.scoped();
            match objects.get(&layout::group_offsets_file()).await {
                Ok(found) => {
                    let body = found.bytes().await.unwrap();
                    String::from_utf8_lossy(&body).contains("batch 7")
                }
                Err(_) => false,
            }
        }
    })
    .await;

    // So do the ACL rules managed through the API.
    let rule = json!({
        "principal": "reader", "resource_type": "topic", "resource_name": "cold",
        "pattern_type": "literal", "operation": "read", "permission": "allow",
    });
    let added = api.post("/v1/acls", &rule).await;
    assert_eq!(added.status().as_u16(), 201);
    let acls = api.get_json("/v1/acls").await;
    eventually(WAIT, "the bucket holds the ACL rule", || {
        let tier = tier.clone();
        async move {
            match tier.scoped().get(&layout::acls_file()).await {
                Ok(found) => {
                    String::from_utf8_lossy(&found.bytes().await.unwrap()).contains("\"reader\"")
                }
                Err(_) => false,
            }
        }
    })
    .await;

    // Restore: a new server with an empty data directory against the same bucket.
    server.terminate();
    let fresh = tempfile::tempdir().unwrap();
    // Without the archive's signing key it refuses: a silently new key would sign every later
    // checkpoint, and an auditor holding the old key could verify none of them.
    let refused =
        strata_tests::serve_until_exit(fresh.path(), &store.options(None), Duration::from_secs(60));
    let (status, stderr) = refused.expect("a restore without the signing key must not start");
    assert!(!status.success());
    assert!(
        stderr.contains("--archive-signing-key-file") && stderr.contains(".vkey"),
        "{stderr}"
    );
    assert!(
        !fresh.path().join("archive/signing.key").exists(),
        "no key is made when the start is refused"
    );
    // With the key it was signed with, as an operator restoring the archive would.
    let key = server.data_dir().join("archive/signing.key");
    let mut options = store.options(Some(fresh.path().to_path_buf()));
    options.args.extend([
        "--archive-signing-key-file".to_string(),
        key.display().to_string(),
    ]);
    let restored = Server::start(options);
    let api = Api::new(&restored);
    let tiered_end = offsets["latest_tiered"].as_u64().unwrap();
    let described = api.get_json("/v1/topics/cold").await;
    assert_eq!(
        described["configs"]["remote_storage_enable"], true,
        "{described}"
    );
    assert_eq!(
        described["legal_holds"][0]["reason"], "keep for restore",
        "{described}"
    );
    let second = api
        .post(
            "/v1/topics/cold/legal-holds",
            &json!({"reason": "another", "start_ms": 0}),
        )
        .await;
    let second: Value = second.json().await.unwrap();
    assert_eq!(second["id"], "2", "restored ids are not reused");
    assert_eq!(
        api.get_json("/v1/acls").await,
        acls,
        "the ACL rules are back"
    );
    let restored_offsets = api.get_json("/v1/groups/readers/offsets").await;
    assert_eq!(
        restored_offsets, committed,
        "the group's commit (offset, metadata, time) is back"
    );
    let after_restore = api.fetch_all("cold", 0, 0).await;
    assert!(
        after_restore.len() as u64 >= tiered_end,
        "every uploaded record is served"
    );
    assert_eq!(after_restore[..], json_before[..after_restore.len()]);
    let produced = api
        .produce(
            "cold",
            &json!({"records": [{"key": "new", "value": "after restore"}]}),
        )
        .await;
    let next = produced["offsets"][0]["offset"].as_u64().unwrap();
    assert_eq!(
        next,
        after_restore.len() as u64,
        "appends continue after the restored log"
    );
}

#[tokio::test]
async fn cold_reads_and_restore_with_the_local_folder_store() {
    cold_reads_and_restore(TestStore::local()).await;
}

#[tokio::test]
async fn cold_reads_and_restore_with_a_real_s3_server() {
    let bucket = s3_test_server().bucket.clone();
    cold_reads_and_restore(TestStore::s3(&bucket, "cold-reads")).await;
}

/// Segment objects in the bucket are exactly the ones the newest manifest references.
async fn bucket_matches_manifest(store: &TierStore) -> bool {
    let objects = store.scoped();
    let Ok(Some(manifest)) = load_latest(objects.as_ref(), "crashy", 0).await else {
        return false;
    };
    let listed: BTreeSet<String> =
        list_sorted(objects.as_ref(), Some(&layout::segments_dir("crashy", 0)))
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.location.to_string())
            .collect();
    let referenced: BTreeSet<String> = manifest
        .segments
        .iter()
        .flat_map(|s| s.objects().map(|o| o.key.clone()))
        .collect();
    listed == referenced
}

#[tokio::test]
// Real time: record stamps for the server's clock, lock dates, and kills timed into uploads.
#[allow(clippy::disallowed_methods)]
async fn kill_9_during_uploads_leaves_partition_manifest_and_bucket_in_agreement() {
    let store = TestStore::local();
    let mut server = Server::start(store.options(None));
    let api = Api::new(&server);
    api.create_topic_with("crashy", 1, tiered_configs()).await;
    produce_rounds(&api, "crashy", 40, 0).await;
    let before = api.fetch_all("crashy", 0, 0).await;
    // Uploads are running now; kill the server in the middle of them, twice.
    for delay in [150, 350] {
        tokio::time::sleep(Duration::from_millis(delay)).await;
        server.kill_9();
        server.restart();
    }
    let api = Api::new(&server);
    wait_for_cold_data(&api, "crashy").await;
    assert_eq!(
        api.fetch_all("crashy", 0, 0).await,
        before,
        "nothing lost or duplicated"
    );
    let tier = store.open();
    eventually(WAIT, "orphans of interrupted uploads are deleted", || {
        let tier = tier.clone();
        async move { bucket_matches_manifest(&tier).await }
    })
    .await;
}

/// A tiered topic on the Object Lock bucket (with `extra` configs) holding 100 records stamped an
/// hour ago, once total retention (`retention_ms` one minute) has dropped them. Returns the store,
/// the running server and that hour-old time.
async fn expired_topic_on_the_lock_bucket(topic: &str, extra: Value) -> (TestStore, Server, i64) {
    let (store, server) = topic_on_the_lock_bucket(topic, extra).await;
    let api = Api::new(&server);
    let hour_ago = produce_hour_old(&api, topic).await;
    eventually(
        WAIT,
        "total retention moved the earliest offset",
        || async { api.offsets(topic, 0).await["earliest"].as_u64().unwrap() > 0 },
    )
    .await;
    (store, server, hour_ago)
}

/// A tiered topic on the Object Lock bucket with one-minute retention and `extra` configs.
async fn topic_on_the_lock_bucket(topic: &str, extra: Value) -> (TestStore, Server) {
    let store = TestStore::s3(&s3_test_server().lock_bucket, topic);
    let server = Server::start(store.options(None));
    let api = Api::new(&server);
    let mut configs = json!({
        "remote_storage_enable": true,
        "segment_bytes": 4096,
        "retention_ms": 60_000,
        "remote_upload_idle_ms": 300,
    });
    if let (Some(configs), Some(extra)) = (configs.as_object_mut(), extra.as_object()) {
        configs.extend(extra.clone());
    }
    api.create_topic_with(topic, 1, configs).await;
    (store, server)
}

/// Produces 100 records stamped an hour ago (20 requests of 5) and returns that time.
async fn produce_hour_old(api: &Api, topic: &str) -> i64 {
    let hour_ago = hour_ago_ms();
    for i in 0..20 {
        let records: Vec<Value> = (0..5)
            .map(|j| json!({"value": format!("{topic}-{i}-{j}-{}", "x".repeat(60)), "timestamp": hour_ago}))
            .collect();
        api.produce(topic, &json!({ "records": records })).await;
    }
    hour_ago
}

/// The Object Lock client of an S3 test store.
async fn lock_client(tier: &TierStore) -> strata_tiering::object_lock::ObjectLock {
    match tier.location() {
        strata_tiering::store::StoreLocation::S3(connection) => {
            strata_tiering::object_lock::ObjectLock::connect(connection).await
        }
        other => panic!("not S3: {other:?}"),
    }
}

#[tokio::test]
// Real time: record stamps for the server's clock, lock dates, and kills timed into uploads.
#[allow(clippy::disallowed_methods)]
async fn object_lock_keeps_objects_past_retention_until_their_retain_until_date() {
    let lock = json!({"remote_object_lock_mode": "compliance", "remote_object_lock_days": 1});
    // Everything is past retention_ms: uploaded, then dropped from the manifest...
    let (store, _server, hour_ago) = expired_topic_on_the_lock_bucket("audit", lock).await;
    // ...but every uploaded object stays, locked, until its retain-until date.
    let tier = store.open();
    let objects = tier.scoped();
    let manifest = load_latest(objects.as_ref(), "audit", 0)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !manifest.pending_deletes.is_empty(),
        "deletes wait for the lock"
    );
    let lock = lock_client(&tier).await;
    let now = std::time::SystemTime::now();
    for pending in &manifest.pending_deletes {
        assert!(pending.not_before_ms > hour_ago + 3_600_000 + 23 * 3_600_000);
        for key in &pending.keys {
            let path = object_store::path::Path::from(key.as_str());
            assert!(objects.head(&path).await.is_ok(), "{key} still exists");
            let retention = lock.retention(&tier.key(&path), None).await.unwrap();
            let retention = retention.expect("the object has a retention");
            assert_eq!(
                retention.mode,
                strata_tiering::object_lock::RetentionMode::Compliance
            );
            assert!(retention.retain_until > now + Duration::from_secs(23 * 3600));
        }
    }
}

#[tokio::test]
async fn total_retention_on_a_versioned_bucket_leaves_no_version_of_a_dropped_segment() {
    // The Object Lock bucket is versioned; this topic sets no lock, so deletes may go through.
    let (store, _server, _) = expired_topic_on_the_lock_bucket("expiring", json!({})).await;
    let tier = store.open();
    let lock = lock_client(&tier).await;
    let segments_prefix = tier.key(&layout::segments_dir("expiring", 0));
    eventually(WAIT, "only the manifest's objects keep versions", || {
        let (tier, lock, segments_prefix) = (tier.clone(), lock.clone(), segments_prefix.clone());
        async move {
            let objects = tier.scoped();
            let Ok(Some(manifest)) = load_latest(objects.as_ref(), "expiring", 0).await else {
                return false;
            };
            if !manifest.pending_deletes.is_empty() {
                return false;
            }
            let referenced: BTreeSet<String> = manifest
                .segments
                .iter()
                .flat_map(|s| {
                    s.objects()
                        .map(|o| tier.key(&Path::from(o.key.as_str())).to_string())
                })
                .collect();
            let stored: BTreeSet<String> = lock
                .versions_under(&segments_prefix)
                .await
                .unwrap()
                .into_iter()
                .map(|version| version.key)
                .collect();
            // Neither data nor delete markers of a dropped segment remain.
            stored == referenced
        }
    })
    .await;
}

#[tokio::test]
async fn lag_in_time_of_a_commit_that_only_the_bucket_holds_is_read_from_the_bucket() {
    let store = TestStore::local();
    let server = Server::start(store.options(None));
    let api = Api::new(&server);
    api.create_topic_with("agedcold", 1, tiered_configs()).await;
    produce_rounds(&api, "agedcold", 40, 0).await;
    wait_for_cold_data(&api, "agedcold").await;
    let committed = api
        .post(
            "/v1/groups/auditors/offsets",
            &json!({"offsets": [{"topic": "agedcold", "partition": 0, "offset": 0}]}),
        )
        .await;
    assert_eq!(committed.status(), 200);
    let lag = api.get_json("/v1/groups/auditors/lag").await;
    let row = &lag["partitions"][0];
    assert_eq!(row["basis"], "committed", "{lag}");
    assert!(row["lag_records"].as_u64().unwrap() >= 200, "{lag}");
    assert!(
        row["lag_ms"].as_i64().unwrap() > 0,
        "the age of offset 0 comes from the bucket: {lag}"
    );
}

#[tokio::test]
async fn a_legal_hold_blocks_total_retention_and_holds_the_objects_in_the_lock_bucket() {
    let (store, server) = topic_on_the_lock_bucket("held", json!({})).await;
    let api = Api::new(&server);
    let placed = api
        .post(
            "/v1/topics/held/legal-holds",
            &json!({"reason": "case 7", "partition": 0, "start_offset": 0, "end_offset": 9}),
        )
        .await;
    assert_eq!(placed.status().as_u16(), 201);
    produce_hour_old(&api, "held").await;
    // The first segment (offsets 0-9 and more) is uploaded and gets S3's legal hold; total
    // retention keeps every record although all are past retention_ms.
    let tier = store.open();
    let lock = lock_client(&tier).await;
    let first_log = || {
        let tier = tier.clone();
        async move {
            let objects = tier.scoped();
            let manifest = load_latest(objects.as_ref(), "held", 0).await.ok()??;
            // A sweep during the produce may upload the first segment alone; wait for more.
            if manifest.segments.len() < 2 {
                return None;
            }
            let first = manifest.segments.first()?.clone();
            (first.base_offset == 0).then(|| Path::from(first.log.key.as_str()))
        }
    };
    eventually(
        WAIT,
        "several segments are uploaded and the held one carries an S3 legal hold",
        || {
            let (tier, lock, first_log) = (tier.clone(), lock.clone(), first_log);
            async move {
                let Some(key) = first_log().await else {
                    return false;
                };
                lock.legal_hold(&tier.key(&key), None)
                    .await
                    .unwrap_or(false)
            }
        },
    )
    .await;
    let objects = tier.scoped();
    let manifest = load_latest(objects.as_ref(), "held", 0)
        .await
        .unwrap()
        .unwrap();
    assert!(manifest.segments.len() > 1, "several segments are uploaded");
    for later in &manifest.segments[1..] {
        if later.base_offset > 9 {
            let key = tier.key(&Path::from(later.log.key.as_str()));
            assert!(
                !lock.legal_hold(&key, None).await.unwrap(),
                "{key} is not held"
            );
        }
    }
    assert_eq!(api.offsets("held", 0).await["earliest"], 0);

    // Released: the S3 hold comes off and total retention deletes the segment.
    let released = api
        .client
        .delete(api.url("/v1/topics/held/legal-holds/1"))
        .send()
        .await
        .unwrap();
    assert_eq!(released.status().as_u16(), 200);
    eventually(
        WAIT,
        "total retention proceeds after the release",
        || async { api.offsets("held", 0).await["earliest"].as_u64().unwrap() > 9 },
    )
    .await;
    let first_key = manifest.segments[0].log.key.clone();
    eventually(WAIT, "the released segment's objects are deleted", || {
        let (tier, first_key) = (tier.clone(), first_key.clone());
        async move {
            let objects = tier.scoped();
            objects.head(&Path::from(first_key.as_str())).await.is_err()
        }
    })
    .await;
}

/// Once the bucket holds a tiered partition's oldest records and the local disk no longer
/// does, every place that names the log start names the whole log's: a group reset to
/// "earliest" (or to a timestamp or an offset the bucket holds) must not skip the records in
/// the bucket, and the topic's description and delete-records' answer must not report the
/// local disk's start.
#[tokio::test]
async fn the_log_start_of_a_tiered_partition_includes_the_bucket_everywhere() {
    let store = TestStore::local();
    let server = Server::start(store.options(None));
    let api = Api::new(&server);
    api.create_topic_with("deep", 1, tiered_configs()).await;
    produce_rounds(&api, "deep", 40, 0).await;
    let offsets = wait_for_cold_data(&api, "deep").await;
    let local_start = offsets["earliest_local"].as_u64().unwrap();
    assert!(local_start > 3, "{offsets}");

    let description = api.get_json("/v1/topics/deep").await;
    assert_eq!(
        description["partitions"][0]["earliest_offset"], 0,
        "{description}"
    );

    let offset_of = |body: &Value| body["offsets"][0]["offset"].as_u64();
    let earliest = reset_deep(&api, json!({"to": "earliest"})).await;
    assert_eq!(offset_of(&earliest), Some(0), "{earliest}");
    let exact = reset_deep(&api, json!({"to": "offset", "value": 2})).await;
    assert_eq!(offset_of(&exact), Some(2), "{exact}");
    let by_time = reset_deep(&api, json!({"to": "timestamp", "value": 0})).await;
    assert_eq!(offset_of(&by_time), Some(0), "{by_time}");

    let deleted = ok_json(
        api.post(
            "/v1/topics/deep/partitions/0/delete-records",
            &json!({"offset": 3}),
        )
        .await,
    )
    .await;
    assert_eq!(deleted["log_start_offset"], 3, "{deleted}");
    let description = api.get_json("/v1/topics/deep").await;
    assert_eq!(
        description["partitions"][0]["earliest_offset"], 3,
        "{description}"
    );
    let earliest = reset_deep(&api, json!({"to": "earliest"})).await;
    assert_eq!(offset_of(&earliest), Some(3), "{earliest}");

    // Turning tiering off would hide the bucket's records (the start would jump to the local
    // one) and bring them back when turned on again.
    for off in [json!(false), json!("false"), Value::Null] {
        let refused = expect_error(
            api.client
                .patch(api.url("/v1/topics/deep/configs"))
                .json(&json!({"configs": {"remote_storage_enable": off}}))
                .send()
                .await
                .unwrap(),
            422,
            "invalid_config",
        )
        .await;
        assert!(
            refused.to_string().contains("remote_storage_enable"),
            "{refused}"
        );
    }
    let offsets = api.offsets("deep", 0).await;
    assert_eq!(offsets["earliest"], 3, "{offsets}");
}

/// Resets group `replay`'s offsets of topic `deep` to `target` (`to` and `value`).
async fn reset_deep(api: &Api, target: Value) -> Value {
    let mut body = json!({"topic": "deep"});
    if let (Some(body), Some(target)) = (body.as_object_mut(), target.as_object()) {
        body.extend(target.clone());
    }
    ok_json(api.post("/v1/groups/replay/offsets/reset", &body).await).await
}

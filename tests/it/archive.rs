//! The bucket as an auditor's archive (issue 17): a real server fills it, then `strata verify`
//! (the binary, and in-process for the fast bit-flip trials) and the independent Python script
//! check it, on a copy in a folder and on SeaweedFS.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use object_store::ObjectStoreExt;
use serde_json::{Value, json};
use strata_server::archive::report::Report;
use strata_server::archive::verify::{VerifyOptions, verify};
use strata_tests::{Api, Server, eventually};
use strata_tiering::tlog::note::{NoteSigner, NoteVerifier};

use crate::tiering::TestStore;

const WAIT: Duration = Duration::from_secs(60);
const RECORDS: usize = 40;

/// A server with one tiered topic of two partitions whose every record reached the bucket;
/// returns the server and the records per partition.
async fn filled_archive(store: &TestStore, extra: Value) -> (Server, [u64; 2]) {
    let server = Server::start(store.options(None));
    let api = Api::new(&server);
    let mut configs = json!({
        "remote_storage_enable": true,
        "segment_bytes": 2048,
        "remote_upload_idle_ms": 100,
        // Index entries in every segment, so the bit-flip trials cover .index and .timeindex.
        "index_interval_bytes": 256,
    });
    for (key, value) in extra.as_object().unwrap() {
        configs[key] = value.clone();
    }
    api.create_topic_with("audit", 2, configs).await;
    let mut counts = [0u64; 2];
    for i in 0..RECORDS {
        let body = json!({"records": [{"key": format!("k{i}"), "value": format!("{i}-{}", "x".repeat(200))}]});
        let answer = api.produce("audit", &body).await;
        counts[answer["offsets"][0]["partition"].as_u64().unwrap() as usize] += 1;
    }
    // A group commit and an ACL rule, so the bucket holds its two signed snapshots too.
    let commit = json!({"offsets": [{"topic": "audit", "partition": 0, "offset": 1}]});
    assert_eq!(
        api.post("/v1/groups/g/offsets", &commit).await.status(),
        200
    );
    let rule = json!({
        "principal": "auditor", "resource_type": "topic", "resource_name": "audit",
        "pattern_type": "literal", "operation": "read", "permission": "allow",
    });
    assert_eq!(api.post("/v1/acls", &rule).await.status(), 201);
    let objects = store.open().scoped();
    eventually(WAIT, "every record is in the bucket", || {
        let objects = objects.clone();
        async move {
            let snapshots = [
                strata_tiering::layout::group_offsets_file(),
                strata_tiering::layout::acls_file(),
            ];
            for snapshot in snapshots {
                if objects.head(&snapshot).await.is_err() {
                    return false;
                }
            }
            let report = verify_store(objects.as_ref(), &[]).await;
            report.partitions.len() == 2
                && report
                    .partitions
                    .iter()
                    .all(|p| p.next_offset == counts[p.partition as usize])
        }
    })
    .await;
    (server, counts)
}

async fn verify_store(store: &dyn object_store::ObjectStore, keys: &[NoteVerifier]) -> Report {
    let options = VerifyOptions {
        keys: keys.to_vec(),
        checkpoints: Vec::new(),
        concurrency: 4,
        whole_log_sha256: true,
    };
    verify(store, &options, &|_| {}).await
}

/// The server's checkpoint key, as the operator would hand it to an auditor.
fn server_key(server: &Server) -> NoteVerifier {
    let text = std::fs::read_to_string(server.data_dir().join("archive/signing.key")).unwrap();
    NoteSigner::parse(&text).unwrap().verifier()
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in walk(from) {
        let target = to.join(entry.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &target).unwrap();
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn local_store(dir: &Path) -> std::sync::Arc<dyn object_store::ObjectStore> {
    std::sync::Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap())
}

/// What kind of object a key is, for spreading the trials over kinds.
fn kind(key: &str) -> String {
    let name = key.rsplit('/').next().unwrap_or(key);
    if key.contains("/tlog/tile/entries/") {
        "bundle".into()
    } else if key.contains("/tlog/tile/") {
        "tile".into()
    } else if key.contains("/tlog/checkpoints/") {
        "checkpoint history".into()
    } else if key.contains("/segments/") {
        name.rsplit('.').next().unwrap_or(name).to_string()
    } else if key.contains("/manifest/") {
        "manifest".into()
    } else {
        name.to_string()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_verifies_and_every_bit_flip_and_deletion_is_named() {
    let store = TestStore::local();
    let (mut server, counts) = filled_archive(&store, json!({})).await;
    let key = server_key(&server);
    assert!(server.terminate().success());
    let TestStore::Local(bucket) = &store else {
        unreachable!()
    };
    let copy = tempfile::tempdir().unwrap();
    copy_dir(bucket.path(), copy.path());

    // The binary, on the copy, with the operator's key: exit 0 and the right counts.
    let output = Command::new(strata_tests::binary())
        .args(["verify", "--json", "--key", &key.to_string()])
        .arg(copy.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["ok"], true);
    assert_eq!(report["key_source"], "given");
    for partition in report["partitions"].as_array().unwrap() {
        let number = partition["partition"].as_u64().unwrap() as usize;
        assert_eq!(partition["records"], counts[number], "{partition}");
        assert_eq!(partition["status"], "ok");
    }

    // The independent script agrees on partition 0's root.
    let python = std::env::var("STRATA_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/verify_tlog.py");
    let run_script = || {
        Command::new(&python)
            .args([
                script,
                copy.path().to_str().unwrap(),
                "audit",
                "0",
                &key.to_string(),
            ])
            .output()
            .unwrap()
    };
    let independent = run_script();
    assert!(
        independent.status.success(),
        "{}",
        String::from_utf8_lossy(&independent.stdout)
    );
    assert!(
        String::from_utf8_lossy(&independent.stdout)
            .starts_with("ok strata-archive/topics/audit/0 size ")
    );

    // 1,000 single-bit flips spread over every kind of object: each detected and named.
    let objects = local_store(copy.path());
    let files: Vec<PathBuf> = walk(copy.path())
        .into_iter()
        .filter(|f| std::fs::metadata(f).unwrap().len() > 0)
        .collect();
    let mut kinds: std::collections::BTreeMap<String, Vec<PathBuf>> = Default::default();
    for file in files {
        let relative = file
            .strip_prefix(copy.path())
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        kinds.entry(kind(&relative)).or_default().push(file);
    }
    let expected = [
        "log",
        "index",
        "timeindex",
        "chunks",
        "manifest",
        "topic.json",
        "checkpoint",
        "checkpoint history",
        "tile",
        "bundle",
        "FORMAT.md",
        "format.json",
        "offsets.note",
        "acls.note",
    ];
    for kind in expected {
        assert!(
            kinds.contains_key(kind),
            "no {kind} object: {:?}",
            kinds.keys()
        );
    }
    assert!(
        kinds.keys().any(|k| k.ends_with(".vkey")),
        "{:?}",
        kinds.keys()
    );
    let kinds: Vec<(String, Vec<PathBuf>)> = kinds.into_iter().collect();
    let mut rng = fastrand::Rng::with_seed(17);
    for trial in 0..1000 {
        let (kind, files) = &kinds[trial % kinds.len()];
        let file = &files[rng.usize(..files.len())];
        let original = std::fs::read(file).unwrap();
        let mut flipped = original.clone();
        let at = rng.usize(..flipped.len());
        flipped[at] ^= 1 << rng.u8(..8);
        std::fs::write(file, &flipped).unwrap();
        let report = verify_store(objects.as_ref(), std::slice::from_ref(&key)).await;
        std::fs::write(file, &original).unwrap();
        let relative = file.strip_prefix(copy.path()).unwrap().to_str().unwrap();
        assert!(
            !report.ok,
            "trial {trial}: a flip in {relative} ({kind}) went unnoticed"
        );
        assert!(
            report.all_failures().any(|(_, f)| f.object == relative),
            "trial {trial}: {relative} ({kind}) not named: {}",
            report.summary()
        );
    }
    assert!(
        verify_store(objects.as_ref(), std::slice::from_ref(&key))
            .await
            .ok
    );

    // The script notices a changed entry too.
    let bundle = walk(&copy.path().join("topics/audit/0/tlog/tile/entries"))
        .pop()
        .unwrap();
    let original = std::fs::read(&bundle).unwrap();
    let mut changed = original.clone();
    let last = changed.len() - 3;
    changed[last] ^= 1;
    std::fs::write(&bundle, &changed).unwrap();
    assert!(!run_script().status.success());
    std::fs::write(&bundle, &original).unwrap();

    // A segment object removed from the middle of history: an unaccounted deletion.
    let segments = walk(&copy.path().join("topics/audit/0/segments"));
    let logs: Vec<&PathBuf> = segments
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    assert!(logs.len() >= 3, "{logs:?}");
    let middle = logs[logs.len() / 2];
    std::fs::remove_file(middle).unwrap();
    let report = verify_store(objects.as_ref(), std::slice::from_ref(&key)).await;
    let relative = middle.strip_prefix(copy.path()).unwrap().to_str().unwrap();
    let failure = report
        .all_failures()
        .find(|(_, f)| f.object == relative)
        .map(|(_, f)| f.clone())
        .unwrap_or_else(|| panic!("{}", report.summary()));
    assert!(
        failure.problem.contains("without a deletion entry"),
        "{failure:?}"
    );
    assert!(failure.offsets.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_and_topic_deletion_are_logged_and_verify() {
    let store = TestStore::local();
    let (server, _) = filled_archive(&store, json!({"local_retention_bytes": 2048})).await;
    let api = Api::new(&server);
    let objects = store.open().scoped();
    let response = api
        .client
        .patch(api.url("/v1/topics/audit/configs"))
        .json(&json!({"configs": {"retention_bytes": 2048}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    eventually(WAIT, "remote retention removed old segments", || {
        let objects = objects.clone();
        async move {
            let report = verify_store(objects.as_ref(), &[]).await;
            report.ok
                && report.partitions.iter().all(|p| {
                    p.deletions.iter().any(|d| {
                        d.reason == "retention" && d.policy.contains("retention_bytes=2048")
                    })
                })
        }
    })
    .await;
    let report = verify_store(objects.as_ref(), &[]).await;
    for partition in &report.partitions {
        assert!(partition.log_start_offset > 0, "{}", report.summary());
    }
    // Deleting the topic logs it and removes the data, but never the logs.
    let response = api
        .client
        .delete(api.url("/v1/topics/audit"))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    eventually(WAIT, "the deleted topic's segments are gone", || {
        let objects = objects.clone();
        async move {
            let report = verify_store(objects.as_ref(), &[]).await;
            report.partitions.len() == 2
                && report.partitions.iter().all(|p| {
                    p.records == 0 && p.deletions.iter().any(|d| d.reason == "topic_deleted")
                })
                && strata_tiering::store::list_sorted(
                    objects.as_ref(),
                    Some(&object_store::path::Path::from("topics/audit/0/segments")),
                )
                .await
                .unwrap()
                .is_empty()
        }
    })
    .await;
    let report = verify_store(objects.as_ref(), &[]).await;
    assert!(report.ok, "{}", report.summary());
    let sizes: Vec<u64> = report.partitions.iter().map(|p| p.tree_size).collect();

    // A new topic of the same name continues each partition's log after the deletion, from
    // offset 0 and manifest generation 1 again, and the whole log still verifies.
    api.create_topic_with(
        "audit",
        2,
        json!({"remote_storage_enable": true, "segment_bytes": 2048, "remote_upload_idle_ms": 100}),
    )
    .await;
    let mut produced = 0u64;
    for i in 0..40 {
        let body = json!({"records": [{"key": format!("n{i}"), "value": format!("new-{i}-{}", "y".repeat(200))}]});
        api.produce("audit", &body).await;
        produced += 1;
    }
    eventually(WAIT, "the new topic's segments are logged", || {
        let objects = objects.clone();
        let sizes = sizes.clone();
        async move {
            let report = verify_store(objects.as_ref(), &[]).await;
            report
                .partitions
                .iter()
                .zip(&sizes)
                .all(|(p, old)| p.tree_size > *old)
                && report.partitions.iter().map(|p| p.records).sum::<u64>() > 0
        }
    })
    .await;
    let report = verify_store(objects.as_ref(), &[]).await;
    assert!(report.ok, "{}", report.summary());
    let verified: u64 = report.partitions.iter().map(|p| p.records).sum();
    assert!(verified <= produced, "{}", report.summary());
    for partition in &report.partitions {
        assert!(
            partition
                .deletions
                .iter()
                .any(|d| d.reason == "topic_deleted"),
            "{}",
            report.summary()
        );
    }
}

/// An auditor may verify a bucket a server is writing to, or one a server left when it stopped
/// mid-publish. A publish writes entry bundles and tiles, then the history note, then
/// `checkpoint`: read between those steps, the bucket holds objects beyond `checkpoint` and a
/// note larger than it. `verify` called both tampering ("beyond the signed log", "history was
/// rewritten"), and so failed this suite's retention test under load. Both states are built
/// here from a real server's bucket and must verify, with a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_read_mid_publish_verifies_with_a_warning() {
    let store = TestStore::local();
    let (mut server, _) = filled_archive(&store, json!({})).await;
    let api = Api::new(&server);
    let objects = store.open().scoped();
    let checkpoint = object_store::path::Path::from("topics/audit/0/tlog/checkpoint");
    let before = objects
        .get(&checkpoint)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let size_before = verify_store(objects.as_ref(), &[]).await.partitions[0].tree_size;
    for i in 0..20 {
        let body = json!({"records": [{"value": format!("more-{i}-{}", "z".repeat(200))}]});
        let response = api
            .post("/v1/topics/audit/partitions/0/records", &body)
            .await;
        assert_eq!(response.status(), 200);
    }
    eventually(WAIT, "partition 0's log grows", || {
        let objects = objects.clone();
        async move {
            let report = verify_store(objects.as_ref(), &[]).await;
            report.ok && report.partitions[0].tree_size > size_before
        }
    })
    .await;
    server.terminate();
    let grown = verify_store(objects.as_ref(), &[]).await;
    assert!(grown.ok, "{}", grown.summary());
    let size_after = grown.partitions[0].tree_size;

    // Stopped between the history note and `checkpoint`: the note's tree is the log.
    objects
        .put(&checkpoint, before.clone().into())
        .await
        .unwrap();
    let report = verify_store(objects.as_ref(), &[]).await;
    assert!(report.ok, "{}", report.summary());
    assert_eq!(report.partitions[0].tree_size, size_after);
    assert!(
        report.partitions[0]
            .warnings
            .iter()
            .any(|w| w.contains("stopped between the two")),
        "{:?}",
        report.partitions[0].warnings
    );

    // A signed `checkpoint` that is not a prefix of that larger tree is a fork, not a lag.
    let signer = NoteSigner::parse(
        &std::fs::read_to_string(server.data_dir().join("archive/signing.key")).unwrap(),
    )
    .unwrap();
    let signed = signer
        .verifier()
        .open_checkpoint(std::str::from_utf8(&before).unwrap())
        .unwrap();
    let forked = signer.sign_checkpoint(&signed.origin, signed.size, &[7u8; 32]);
    objects.put(&checkpoint, forked.into()).await.unwrap();
    let report = verify_store(objects.as_ref(), &[]).await;
    assert!(!report.ok, "{}", report.summary());
    assert!(
        report.summary().contains("the log forked"),
        "{}",
        report.summary()
    );
    objects.put(&checkpoint, before.into()).await.unwrap();

    // Stopped (or read) before the notes: bundles and tiles beyond `checkpoint` sign nothing.
    let history = object_store::path::Path::from("topics/audit/0/tlog/checkpoints");
    let notes = strata_tiering::store::list_sorted(objects.as_ref(), Some(&history))
        .await
        .unwrap();
    let mut removed = 0;
    for note in notes {
        let size: u64 = note.location.filename().unwrap().parse().unwrap();
        if size > size_before {
            objects.delete(&note.location).await.unwrap();
            removed += 1;
        }
    }
    assert!(removed > 0);
    let report = verify_store(objects.as_ref(), &[]).await;
    assert!(report.ok, "{}", report.summary());
    assert_eq!(report.partitions[0].tree_size, size_before);
    assert!(
        report.partitions[0]
            .warnings
            .iter()
            .any(|w| w.contains("beyond the signed log")),
        "{:?}",
        report.partitions[0].warnings
    );
    // But the part of such an object that the signed log covers must still match it.
    let bundles = object_store::path::Path::from("topics/audit/0/tlog/tile/entries");
    // The widest bundle: the one a publish beyond `checkpoint` wrote.
    let last = strata_tiering::store::list_sorted(objects.as_ref(), Some(&bundles))
        .await
        .unwrap()
        .into_iter()
        .max_by_key(|o| {
            let name = o.location.to_string();
            name.rsplit_once(".p/")
                .map_or(256, |(_, width)| width.parse::<u64>().unwrap())
        })
        .unwrap();
    let mut bytes = objects
        .get(&last.location)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    bytes[3] ^= 1;
    objects.put(&last.location, bytes.into()).await.unwrap();
    let report = verify_store(objects.as_ref(), &[]).await;
    assert!(!report.ok, "{}", report.summary());
    assert!(
        report.summary().contains("where it is signed"),
        "{}",
        report.summary()
    );
}

/// A server killed right after deleting a tiered topic finishes removing its objects at the
/// next start: the topic stays deleted, and one of the same name created then starts empty.
/// (A crash in that window used to forget the removal; the new topic then adopted the old
/// manifest and served the old records at its offsets.)
#[tokio::test]
async fn a_topic_deleted_right_before_a_kill_9_stays_deleted_and_its_successor_starts_empty() {
    let store = TestStore::local();
    let (mut server, _) = filled_archive(&store, json!({})).await;
    let api = Api::new(&server);
    let response = api
        .client
        .delete(api.url("/v1/topics/audit"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
    server.kill_9();
    server.restart();
    let api = Api::new(&server);
    assert_eq!(api.get("/v1/topics/audit").await.status(), 404);
    api.create_topic_with("audit", 2, json!({"remote_storage_enable": true}))
        .await;
    for partition in 0..2 {
        let offsets = api.offsets("audit", partition).await;
        assert_eq!(
            (offsets["earliest"].as_u64(), offsets["latest"].as_u64()),
            (Some(0), Some(0)),
            "{offsets}"
        );
    }
    let body = json!({"records": [{"value": "new", "partition": 0}]});
    api.produce("audit", &body).await;
    let values = api.fetch_values("audit", 0, 0).await;
    assert_eq!(values, [json!("new")]);
    let objects = store.open().scoped();
    for partition in 0..2 {
        let segments = object_store::path::Path::from(format!("topics/audit/{partition}/segments"));
        let left = strata_tiering::store::list_sorted(objects.as_ref(), Some(&segments))
            .await
            .unwrap();
        assert!(left.is_empty(), "old segments left: {left:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_archive_on_s3_verifies_from_the_command_line() {
    let s3 = strata_tiering::testing::s3_test_server();
    let store = TestStore::s3(&s3.bucket, "archive");
    let (server, counts) = filled_archive(&store, json!({})).await;
    let key = server_key(&server);
    let settings = store.settings();
    // `strata <args> <bucket>` against SeaweedFS, with its endpoint and credentials; must succeed.
    let run = |args: &[&str]| {
        let output = Command::new(strata_tests::binary())
            .args(args)
            .args(["--s3-endpoint", &s3.endpoint, "--s3-region", &s3.region])
            .arg(&settings.url)
            .env("AWS_ACCESS_KEY_ID", &s3.credentials.access_key_id)
            .env("AWS_SECRET_ACCESS_KEY", &s3.credentials.secret_access_key)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    };
    let report: Value =
        serde_json::from_slice(&run(&["verify", "--json", "--key", &key.to_string()])).unwrap();
    let records: u64 = report["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["records"].as_u64().unwrap())
        .sum();
    assert_eq!(records, counts.iter().sum::<u64>());
    // The records come back from the bucket alone.
    let read = run(&["archive", "read", "--topic", "audit", "--partition", "0"]);
    let lines: Vec<Value> = String::from_utf8_lossy(&read)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as u64, counts[0]);
    assert!(
        lines
            .iter()
            .enumerate()
            .all(|(i, l)| l["offset"] == i as u64)
    );
    // JSON values are stored as their JSON text.
    let value = lines[0]["value"].as_str().unwrap();
    assert!(
        value.starts_with('"') && value.ends_with(&format!("{}\"", "x".repeat(200))),
        "{value}"
    );
}

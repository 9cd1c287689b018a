//! Tiering under object-store faults: the store down, errors, and puts that land but report a
//! timeout. Produce never waits for the store, no local segment goes before the manifest lists
//! it, a manifest never names a missing object, and nothing is lost or duplicated afterwards.

use std::collections::BTreeMap;
use std::sync::Arc;

use object_store::ObjectStoreExt;
use object_store::path::Path;
use serde_json::Value;
use strata_tiering::faults::{FaultKind, Faults, FaultyObjectStore, Operation};
use strata_tiering::store::{StoreSettings, TierStore};

use super::pending_deletions::PendingDeletions;
use super::remote_log::TieredSegments;
use super::{Tiering, TieringSettings};
use crate::broker::reader::PartitionReader as TieredLog;
use crate::clock::ManualClock;
use crate::io::{Io, IoBackendChoice};
use crate::log::Acks;
use crate::log::batch::{BatchOptions, NewRecord, RecordBatch, encode_batch};
use crate::names::TopicName;
use crate::topics::catalog::Catalog;
use strata_tiering::tlog::note::NoteSigner;

struct Fixture {
    _dir: tempfile::TempDir,
    catalog: Catalog,
    tiering: Arc<Tiering>,
    faults: Faults,
    clock: Arc<ManualClock>,
    now: i64,
}

async fn fixture() -> Fixture {
    fixture_with_partitions(1).await
}

// Record stamps relative to the real clock.
#[allow(clippy::disallowed_methods)]
async fn fixture_with_partitions(partitions: u32) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let (io, _) = Io::start(IoBackendChoice::Sync, &data).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let clock = ManualClock::new(now);
    let catalog = Catalog::open(&data, io, clock.clone(), 8).await.unwrap();
    let store = TierStore::open(&StoreSettings {
        url: dir.path().join("bucket").display().to_string(),
        ..StoreSettings::default()
    })
    .unwrap();
    let mut handle = None;
    let store = store.map_store(|inner| {
        let (faulty, faults) = FaultyObjectStore::new(inner);
        handle = Some(faults);
        Arc::new(faulty)
    });
    let settings = TieringSettings {
        url: String::new(),
        s3_endpoint: String::new(),
        s3_region: String::new(),
        interval_ms: 100,
        chunk_cache_bytes: 1 << 20,
        orphan_grace_ms: 0,
        signing_key_file: String::new(),
        allow_new_signing_key: false,
    };
    let signer = NoteSigner::from_seed("strata-test", [5; 32]).unwrap();
    let pending = PendingDeletions::open(dir.path().join("deleting")).unwrap();
    let tiering = Tiering::with_store(store, settings, signer, clock.clone(), pending)
        .await
        .unwrap();
    let configs: BTreeMap<String, Value> = [
        ("remote_storage_enable", Value::from(true)),
        ("segment_bytes", Value::from(1024)),
        ("local_retention_bytes", Value::from(1024)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    catalog
        .create(&TopicName::parse("t").unwrap(), partitions, &configs)
        .await
        .unwrap();
    Fixture {
        _dir: dir,
        catalog,
        tiering,
        faults: handle.unwrap(),
        clock,
        now,
    }
}

async fn append(fixture: &Fixture, count: usize) -> Vec<Vec<u8>> {
    append_to(fixture, 0, count).await
}

async fn append_to(fixture: &Fixture, number: u32, count: usize) -> Vec<Vec<u8>> {
    let partition = fixture.catalog.get("t").unwrap().partition(number).unwrap();
    let mut values = Vec::new();
    for i in 0..count {
        let value = format!("value-{i:04}-{}", "v".repeat(150)).into_bytes();
        let record = NewRecord {
            timestamp: fixture.now,
            key: Some(bytes::Bytes::from(format!("k{i}"))),
            value: Some(bytes::Bytes::from(value.clone())),
            headers: Vec::new(),
        };
        let batch =
            RecordBatch::decode_exact(encode_batch(&BatchOptions::default(), &[record]).unwrap())
                .unwrap();
        partition.append(vec![batch], Acks::All).await.unwrap();
        values.push(value);
    }
    values
}

async fn tiered(fixture: &Fixture) -> TieredLog {
    tiered_partition(fixture, 0).await
}

async fn tiered_partition(fixture: &Fixture, number: u32) -> TieredLog {
    let partition = fixture.catalog.get("t").unwrap().partition(number).unwrap();
    let start = partition.offsets().log_start_offset;
    let remote = fixture.tiering.remote("t", number, start).await.unwrap();
    let segments = TieredSegments::new(Arc::clone(&fixture.tiering), remote);
    TieredLog::tiered(partition, Arc::new(segments))
}

/// Every value readable from offset 0, through the tiered log.
async fn read_all(log: &TieredLog) -> Vec<Vec<u8>> {
    let mut values = Vec::new();
    let mut offset = log.offsets().log_start_offset;
    loop {
        let slice = log.read(offset, 4096).await.unwrap();
        if slice.data.is_empty() {
            return values;
        }
        let mut rest = slice.data.clone();
        while !rest.is_empty() {
            let batch = RecordBatch::decode_first(&rest).unwrap();
            for record in batch.records() {
                let record = record.unwrap();
                if record.offset as u64 >= offset {
                    values.push(record.value.unwrap().to_vec());
                }
            }
            rest = rest.slice(batch.len()..);
        }
        offset = slice.next_offset;
    }
}

/// Every object the newest manifest lists exists in the store.
async fn manifest_objects_exist(fixture: &Fixture) {
    let remote = fixture.tiering.remote("t", 0, 0).await.unwrap();
    for segment in &remote.manifest().segments {
        for object in segment.objects() {
            let found = fixture
                .tiering
                .objects()
                .head(&Path::from(object.key.as_str()))
                .await;
            assert!(
                found.is_ok(),
                "the manifest lists {} but it is missing",
                object.key
            );
        }
    }
}

#[tokio::test]
async fn with_the_store_down_produce_goes_on_and_no_local_segment_is_deleted() {
    let fixture = fixture().await;
    fixture.faults.set_down(true);
    let values = append(&fixture, 40).await;
    let partition = fixture.catalog.get("t").unwrap().partition(0).unwrap();
    assert!(
        partition.segments().len() > 5,
        "segments rolled while the store was down"
    );
    fixture.tiering.sweep(&fixture.catalog, true).await;
    fixture.tiering.sweep(&fixture.catalog, true).await;
    assert_eq!(
        partition.offsets().log_start_offset,
        0,
        "local retention waits for uploads"
    );
    assert!(
        fixture.tiering.remote("t", 0, 0).await.is_err(),
        "no manifest can be read or written while the store is down"
    );
    // The store comes back: uploads resume, then local retention runs.
    fixture.faults.set_down(false);
    fixture.tiering.sweep(&fixture.catalog, true).await;
    manifest_objects_exist(&fixture).await;
    assert!(
        partition.offsets().log_start_offset > 0,
        "local copies of uploaded segments go"
    );
    let log = tiered(&fixture).await;
    assert_eq!(log.offsets().log_start_offset, 0);
    assert_eq!(read_all(&log).await, values, "nothing lost or duplicated");
}

#[tokio::test]
async fn puts_that_land_but_time_out_are_neither_lost_nor_duplicated() {
    let fixture = fixture().await;
    let mut values = append(&fixture, 10).await;
    fixture.tiering.sweep(&fixture.catalog, true).await;
    let mut planned = 0;
    for round in 0..6 {
        values.extend(append(&fixture, 6).await);
        if round % 2 == 0 {
            // The manifest create lands but reports a timeout: the sweep stops there, and the
            // next one builds a different manifest (the clock moved: new upload times) for the
            // same generation, which then already exists.
            fixture
                .faults
                .land_then_time_out_next_puts_to("/manifest/", 1);
        } else {
            // A segment object lands but times out: the upload's retry overwrites it.
            fixture
                .faults
                .land_then_time_out_next_puts_to("/segments/", 1);
        }
        planned += 1;
        fixture.clock.advance(1_000);
        fixture.tiering.sweep(&fixture.catalog, true).await;
        manifest_objects_exist(&fixture).await;
    }
    for _ in 0..3 {
        fixture.clock.advance(1_000);
        fixture.tiering.sweep(&fixture.catalog, true).await;
    }
    assert_eq!(
        fixture.faults.injected(),
        planned,
        "every planned fault was injected"
    );
    manifest_objects_exist(&fixture).await;
    let remote = fixture.tiering.remote("t", 0, 0).await.unwrap();
    assert_eq!(
        remote.fenced(),
        None,
        "our own landed manifest is not a rival's"
    );
    let manifest = remote.manifest();
    let partition = fixture.catalog.get("t").unwrap().partition(0).unwrap();
    let active_base = partition.segments().last().map(|s| s.base_offset);
    assert_eq!(
        Some(manifest.next_offset()),
        active_base,
        "every closed segment uploaded"
    );
    for pair in manifest.segments.windows(2) {
        assert_eq!(
            pair[0].last_offset + 1,
            pair[1].base_offset,
            "contiguous, no duplicates"
        );
    }
    let log = tiered(&fixture).await;
    assert!(
        log.partition().offsets().log_start_offset > 0,
        "cold reads are exercised"
    );
    assert_eq!(read_all(&log).await, values);
}

#[tokio::test]
async fn a_corrupted_remote_object_is_an_error_never_served() {
    let fixture = fixture().await;
    append(&fixture, 40).await;
    fixture.tiering.sweep(&fixture.catalog, true).await;
    let remote = fixture.tiering.remote("t", 0, 0).await.unwrap();
    let first = remote.manifest().segments[0].clone();
    // Overwrite the first segment's data with different bytes of the same length.
    let key = Path::from(first.log.key.as_str());
    let mut bytes = fixture
        .tiering
        .objects()
        .get(&key)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fixture
        .tiering
        .objects()
        .put(&key, bytes.into())
        .await
        .unwrap();
    let log = tiered(&fixture).await;
    assert!(log.partition().offsets().log_start_offset > 0);
    let error = log.read(0, 1 << 20).await.unwrap_err();
    assert!(
        error.to_string().contains("digest") || error.to_string().contains("corrupt"),
        "{error}"
    );
}

#[tokio::test]
async fn one_sweep_uploads_every_partition_of_a_topic() {
    let fixture = fixture_with_partitions(6).await;
    let mut written = Vec::new();
    for number in 0..6 {
        written.push(append_to(&fixture, number, 12 + number as usize).await);
    }
    fixture.tiering.sweep(&fixture.catalog, true).await;
    for (number, values) in (0..6).zip(written) {
        let log = tiered_partition(&fixture, number).await;
        let remote = log.remote().unwrap();
        let active_base = log.partition().segments().last().map(|s| s.base_offset);
        assert_eq!(Some(remote.end_offset()), active_base, "partition {number}");
        assert!(
            log.partition().offsets().log_start_offset > 0,
            "partition {number}"
        );
        assert_eq!(read_all(&log).await, values, "partition {number}");
    }
}

#[tokio::test]
async fn an_unreadable_store_after_a_refused_manifest_create_does_not_fence() {
    let fixture = fixture().await;
    let mut values = append(&fixture, 10).await;
    fixture.tiering.sweep(&fixture.catalog, true).await;
    values.extend(append(&fixture, 6).await);
    fixture
        .faults
        .land_then_time_out_next_puts_to("/manifest/", 1);
    fixture.clock.advance(1_000);
    fixture.tiering.sweep(&fixture.catalog, true).await;
    // The next create of that generation is refused; reading who wrote it then fails.
    values.extend(append(&fixture, 6).await);
    fixture
        .faults
        .fail_next(&[Operation::Get], 1, FaultKind::Unavailable);
    fixture.clock.advance(1_000);
    fixture.tiering.sweep(&fixture.catalog, true).await;
    assert_eq!(fixture.faults.injected(), 2, "both faults were injected");
    let remote = fixture.tiering.remote("t", 0, 0).await.unwrap();
    assert_eq!(remote.fenced(), None, "no evidence of a rival, no fence");
    for _ in 0..3 {
        fixture.clock.advance(1_000);
        fixture.tiering.sweep(&fixture.catalog, true).await;
    }
    let partition = fixture.catalog.get("t").unwrap().partition(0).unwrap();
    let active_base = partition.segments().last().map(|s| s.base_offset);
    assert_eq!(Some(remote.manifest().next_offset()), active_base);
    manifest_objects_exist(&fixture).await;
    assert_eq!(read_all(&tiered(&fixture).await).await, values);
}

#[tokio::test]
async fn total_retention_in_the_bucket_stops_at_a_legal_hold_until_it_is_released() {
    use crate::topics::holds::HoldRange;
    let fixture = fixture().await;
    let retention: BTreeMap<String, Value> = [("retention_ms".to_string(), Value::from(60_000))]
        .into_iter()
        .collect();
    fixture
        .catalog
        .update_configs("t", &retention)
        .await
        .unwrap();
    let range = HoldRange::Offsets {
        partition: 0,
        start_offset: 10,
        end_offset: None,
    };
    let hold = fixture
        .catalog
        .place_hold("t", range, "case 3", None)
        .await
        .unwrap();
    let values = append(&fixture, 30).await;
    fixture.tiering.sweep(&fixture.catalog, false).await;
    fixture.clock.advance(3_600_000);
    fixture.tiering.sweep(&fixture.catalog, false).await;
    let log = tiered(&fixture).await;
    let start = log.offsets().log_start_offset;
    assert!(
        start > 0 && start <= 10,
        "the bucket's log start {start} stops at offset 10"
    );
    assert_eq!(read_all(&log).await.len(), 30 - start as usize);
    assert_eq!(read_all(&log).await[..], values[start as usize..]);
    fixture.catalog.release_hold("t", &hold.id).await.unwrap();
    fixture.tiering.sweep(&fixture.catalog, false).await;
    let log = tiered(&fixture).await;
    assert!(
        log.offsets().log_start_offset > 10,
        "released, retention proceeds"
    );
}

/// Creating a topic waits for the removal of a deleted one of the same name (its listing would
/// otherwise find, and delete, the new topic's first uploads); other names do not wait, and
/// the wait ends once the removal has.
#[tokio::test]
async fn a_name_is_free_again_only_once_its_deleted_topics_objects_are_gone() {
    let fixture = fixture().await;
    fixture
        .faults
        .set_latency(&[Operation::List], std::time::Duration::from_millis(500));
    assert!(fixture.tiering.begin_deletion("t").unwrap());
    fixture.tiering.delete_topic("t").await;
    let soon = std::time::Duration::from_millis(50);
    assert!(
        fixture.tiering.deletion_finished("other", soon).await,
        "a name without a deletion is free at once"
    );
    assert!(
        !fixture.tiering.deletion_finished("t", soon).await,
        "the removal is still listing"
    );
    let ended = std::time::Duration::from_secs(10);
    assert!(
        fixture.tiering.deletion_finished("t", ended).await,
        "the wait ends with the removal"
    );
    assert!(fixture.faults.calls(Operation::List) >= 1);
}

/// The tiering layer of a restarted server: the same bucket and data directory, no faults.
async fn restarted(fixture: &Fixture) -> Arc<Tiering> {
    let store = TierStore::open(&StoreSettings {
        url: fixture._dir.path().join("bucket").display().to_string(),
        ..StoreSettings::default()
    })
    .unwrap();
    let settings = fixture.tiering.settings.clone();
    let signer = NoteSigner::from_seed("strata-test", [5; 32]).unwrap();
    let pending = PendingDeletions::open(fixture._dir.path().join("deleting")).unwrap();
    Tiering::with_store(store, settings, signer, fixture.clock.clone(), pending)
        .await
        .unwrap()
}

/// A removal cut short (the store down, then the process gone) used to be forgotten: the
/// objects stayed, a restore brought the deleted topic back from its `topic.json`, and a new
/// topic of the same name adopted the old manifest. Now the record of it survives the
/// restart, the restore skips the topic, the removal resumes, and only once the objects are
/// gone is the name free again, for a topic that starts empty.
#[tokio::test]
async fn a_removal_cut_short_resumes_at_the_next_start() {
    let fixture = fixture().await;
    append(&fixture, 40).await;
    fixture.tiering.sweep(&fixture.catalog, true).await;
    assert!(
        fixture
            .tiering
            .remote("t", 0, 0)
            .await
            .unwrap()
            .manifest()
            .next_offset()
            > 0
    );
    // The delete as the broker does it, with every store call failing.
    assert!(fixture.tiering.begin_deletion("t").unwrap());
    fixture.catalog.delete("t").await.unwrap();
    fixture.faults.set_down(true);
    fixture.tiering.delete_topic("t").await;
    let soon = std::time::Duration::from_millis(300);
    assert!(!fixture.tiering.deletion_finished("t", soon).await);

    let tiering = restarted(&fixture).await;
    assert!(tiering.deletion_pending("t"), "the record survives");
    let report = tiering.restore(&fixture.catalog).await.unwrap();
    assert!(report.topics.is_empty(), "restored {:?}", report.topics);
    assert!(fixture.catalog.get("t").is_none());
    tiering.resume_deletions(&fixture.catalog).await;
    let ended = std::time::Duration::from_secs(10);
    assert!(tiering.deletion_finished("t", ended).await);
    let left = strata_tiering::store::list_sorted(
        tiering.objects().as_ref(),
        Some(&strata_tiering::layout::topic_root("t")),
    )
    .await
    .unwrap();
    let kept: Vec<String> = left.iter().map(|o| o.location.to_string()).collect();
    assert!(!kept.is_empty(), "the transparency log stays");
    assert!(kept.iter().all(|key| key.contains("/tlog/")), "{kept:?}");
    assert!(
        PendingDeletions::open(fixture._dir.path().join("deleting"))
            .unwrap()
            .names()
            .is_empty(),
        "the record goes with the objects"
    );

    let configs: BTreeMap<String, Value> =
        [("remote_storage_enable".to_string(), Value::from(true))].into();
    fixture
        .catalog
        .create(&TopicName::parse("t").unwrap(), 1, &configs)
        .await
        .unwrap();
    let remote = tiering.remote("t", 0, 0).await.unwrap();
    assert_eq!(
        remote.manifest().next_offset(),
        0,
        "a new topic starts empty"
    );
    assert!(remote.manifest().segments.is_empty());
}

/// A record left by a delete that crashed before the topic left the catalog is of a delete
/// that never happened: the next start forgets it and removes nothing.
#[tokio::test]
async fn a_record_of_a_delete_that_never_happened_removes_nothing() {
    let fixture = fixture().await;
    append(&fixture, 40).await;
    fixture.tiering.sweep(&fixture.catalog, true).await;
    let next = fixture
        .tiering
        .remote("t", 0, 0)
        .await
        .unwrap()
        .manifest()
        .next_offset();
    assert!(fixture.tiering.begin_deletion("t").unwrap());

    let tiering = restarted(&fixture).await;
    tiering.resume_deletions(&fixture.catalog).await;
    assert!(!tiering.deletion_pending("t"));
    assert_eq!(
        tiering
            .remote("t", 0, 0)
            .await
            .unwrap()
            .manifest()
            .next_offset(),
        next
    );
    manifest_objects_exist(&fixture).await;
}

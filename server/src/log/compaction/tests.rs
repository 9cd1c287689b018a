//! Compaction against models: the issue's worked example, a HashMap model under random keyed
//! writes, crash injection at every swap step, readers during a swap, and the pass triggers.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;

use super::swap::{CLEANED_EXTENSION, SWAP_FILE, SwapPlan, step_count};
use super::throttle::Throttle;
use super::{CompactionPolicy, CompactionReport};
use crate::clock::ManualClock;
use crate::io::{Io, IoBackendChoice};
use crate::log::batch::{BatchOptions, NewRecord, RecordBatch, encode_batch};
use crate::log::config::LogConfig;
use crate::log::partition::{Acks, Partition};

/// `(offset, key, value)` of one stored record.
type Row = (u64, Option<Bytes>, Option<Bytes>);

const T0: i64 = 1_000_000;

fn policy(delete_retention_ms: i64) -> CompactionPolicy {
    CompactionPolicy {
        delete_retention_ms,
        min_compaction_lag_ms: 0,
        max_compaction_lag_ms: i64::MAX,
        min_cleanable_dirty_ratio: 0.5,
        max_map_keys: super::DEFAULT_MAX_MAP_KEYS,
    }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 * 1024,
        index_interval_bytes: 128,
        ..LogConfig::default()
    }
}

async fn open(dir: &Path, config: LogConfig) -> Partition {
    let (io, _) = Io::start(IoBackendChoice::Sync, dir).expect("io starts");
    Partition::open(dir, config, io, ManualClock::new(T0))
        .await
        .expect("partition opens")
}

fn record(key: &str, value: Option<&str>, timestamp: i64) -> NewRecord {
    NewRecord {
        timestamp,
        key: Some(Bytes::copy_from_slice(key.as_bytes())),
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers: Vec::new(),
    }
}

async fn append(partition: &Partition, records: &[NewRecord]) {
    let bytes = encode_batch(&BatchOptions::default(), records).expect("encode");
    let batch = RecordBatch::decode_exact(bytes).expect("decode");
    partition
        .append(vec![batch], Acks::All)
        .await
        .expect("append");
}

/// Every readable record from the log start, in offset order.
async fn rows(partition: &Partition) -> Vec<Row> {
    let mut out = Vec::new();
    let mut offset = partition.offsets().log_start_offset;
    loop {
        let slice = partition.read(offset, 4096).await.expect("read");
        if slice.data.is_empty() {
            return out;
        }
        out.extend(decode_rows(&slice.data, offset));
        offset = slice.next_offset;
    }
}

fn decode_rows(data: &Bytes, from: u64) -> Vec<Row> {
    let mut out = Vec::new();
    let mut rest = data.clone();
    while !rest.is_empty() {
        let batch = RecordBatch::decode_first(&rest).expect("stored batch decodes");
        for record in batch.records() {
            let record = record.expect("record decodes");
            let offset = record.offset as u64;
            if offset >= from {
                out.push((offset, record.key, record.value));
            }
        }
        rest = rest.slice(batch.len()..);
    }
    out
}

fn row(offset: u64, key: &str, value: Option<&str>) -> Row {
    (
        offset,
        Some(Bytes::copy_from_slice(key.as_bytes())),
        value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
    )
}

async fn compact(partition: &Partition, policy: &CompactionPolicy, now: i64) -> CompactionReport {
    partition
        .compact(policy, now, &Throttle::unlimited())
        .await
        .expect("compaction succeeds")
}

#[tokio::test]
async fn the_issue_example_keeps_the_latest_per_key_and_later_drops_the_tombstone() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), config()).await;
    let writes = [
        ("u1", Some("A")),
        ("u2", Some("B")),
        ("u1", Some("C")),
        ("u3", Some("D")),
        ("u2", None),
        ("u1", Some("E")),
    ];
    for (key, value) in writes {
        append(&partition, &[record(key, value, T0)]).await;
    }
    partition.roll().await.unwrap();
    let retention = policy(10_000);
    let report = compact(&partition, &retention, T0 + 1).await;
    assert!(report.ran);
    assert_eq!(report.records_removed, 3);
    assert_eq!(report.tombstones_removed, 0);
    let expected = vec![
        row(3, "u3", Some("D")),
        row(4, "u2", None),
        row(5, "u1", Some("E")),
    ];
    assert_eq!(rows(&partition).await, expected);
    assert_eq!(partition.offsets().log_start_offset, 0, "offsets are kept");
    // Nothing is dirty and the tombstone is young: no pass.
    assert!(!compact(&partition, &retention, T0 + 9_999).await.ran);
    assert_eq!(rows(&partition).await, expected);
    // delete_retention_ms after the first pass covered it, the tombstone goes.
    let report = compact(&partition, &retention, T0 + 10_001).await;
    assert!(report.ran);
    assert_eq!(report.tombstones_removed, 1);
    let expected = vec![row(3, "u3", Some("D")), row(5, "u1", Some("E"))];
    assert_eq!(rows(&partition).await, expected);
    let status = partition.cleaner_status();
    assert_eq!(status.runs, 2);
    assert!(status.bytes_reclaimed > 0);
    assert_eq!(status.dirty_ratio, 0.0);
    // The result and the cleaner's memory survive a restart.
    partition.close().await.unwrap();
    drop(partition);
    let reopened = open(dir.path(), config()).await;
    assert_eq!(rows(&reopened).await, expected);
    assert_eq!(reopened.cleaner_status().runs, 2);
    assert_eq!(reopened.offsets().log_end_offset, 6);
}

#[tokio::test]
async fn the_active_segment_and_young_records_are_not_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), config()).await;
    append(&partition, &[record("k", Some("old"), T0)]).await;
    partition.roll().await.unwrap();
    append(&partition, &[record("k", Some("young"), T0 + 50_000)]).await;
    partition.roll().await.unwrap();
    append(&partition, &[record("k", Some("active"), T0 + 60_000)]).await;
    let lagged = CompactionPolicy {
        min_compaction_lag_ms: 20_000,
        ..policy(0)
    };
    // At T0 + 60 000 only the first segment is older than the lag; it holds the latest "k" of
    // the cleanable part, so nothing can go.
    compact(&partition, &lagged, T0 + 60_000).await;
    assert_eq!(rows(&partition).await.len(), 3);
    // Later both closed segments are cleanable; the active one still is not.
    compact(&partition, &lagged, T0 + 100_000).await;
    assert_eq!(
        rows(&partition).await,
        vec![row(1, "k", Some("young")), row(2, "k", Some("active"))]
    );
}

#[tokio::test]
async fn small_segments_merge_and_records_keep_their_offsets_inside_batches() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), config()).await;
    for round in 0..6 {
        let value = format!("v{round}");
        // One batch with three keys; only "b" is rewritten every round.
        append(
            &partition,
            &[
                record(&format!("a{round}"), Some(&value), T0),
                record("b", Some(&value), T0),
                record(&format!("c{round}"), Some(&value), T0),
            ],
        )
        .await;
        partition.roll().await.unwrap();
    }
    let before = partition.segments().len();
    let report = compact(&partition, &policy(0), T0 + 1).await;
    assert_eq!(report.segments_rewritten, 6);
    assert_eq!(
        partition.segments().len(),
        2,
        "six closed segments became one (from {before})"
    );
    let rows = rows(&partition).await;
    assert_eq!(rows.len(), 6 * 2 + 1);
    assert!(rows.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(
        rows.iter().filter(|r| r.1.as_deref() == Some(b"b")).count(),
        1
    );
    assert_eq!(*rows.last().unwrap(), row(17, "c5", Some("v5")));
    // Reading from an offset compaction removed lands on the next kept record.
    let slice = partition.read(1, 4096).await.unwrap();
    assert_eq!(decode_rows(&slice.data, 1)[0], row(2, "c0", Some("v0")));
}

#[tokio::test]
async fn a_reader_holding_old_segments_finishes_while_they_are_swapped_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), config()).await;
    for i in 0..40 {
        append(
            &partition,
            &[record(&format!("k{}", i % 4), Some("value-bytes"), T0)],
        )
        .await;
        if i % 10 == 9 {
            partition.roll().await.unwrap();
        }
    }
    let before = rows(&partition).await;
    // A streaming reader has read the first slice and continues after the swap.
    let first = partition.read(0, 200).await.unwrap();
    compact(&partition, &policy(0), T0 + 1).await;
    let mut seen = decode_rows(&first.data, 0);
    assert_eq!(
        seen[..],
        before[..seen.len()],
        "the old slice still decodes"
    );
    let mut offset = first.next_offset;
    loop {
        let slice = partition.read(offset, 200).await.expect("reading on works");
        if slice.data.is_empty() {
            break;
        }
        seen.extend(decode_rows(&slice.data, offset));
        offset = slice.next_offset;
    }
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(seen.last(), before.last());
    // Then the same while retention deletes the compacted segment under the reader.
    let held = partition.read(0, 4096).await.unwrap();
    let start = partition.segments()[1].base_offset;
    partition.delete_records(start).await.unwrap();
    assert!(
        !decode_rows(&held.data, 0).is_empty(),
        "the deleted segment's slice decodes"
    );
}

/// A compacted segment holding k0 and k1, then a closed dirty segment with a newer k0 (appended
/// at T0 by the partition's clock): a dirty ratio well below 0.9.
async fn small_dirty_segment_after_a_clean_one(dir: &Path) -> Partition {
    let partition = open(dir, config()).await;
    for i in 0..20 {
        append(&partition, &[record(&format!("k{}", i % 2), Some("v"), T0)]).await;
    }
    partition.roll().await.unwrap();
    assert!(compact(&partition, &policy(0), T0).await.ran);
    append(&partition, &[record("k0", Some("new"), T0)]).await;
    partition.roll().await.unwrap();
    partition
}

#[tokio::test]
async fn nothing_runs_below_the_dirty_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let partition = small_dirty_segment_after_a_clean_one(dir.path()).await;
    // One small dirty segment against a larger clean one: below 0.9.
    let strict = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.9,
        ..policy(0)
    };
    let report = compact(&partition, &strict, T0).await;
    assert!(!report.ran);
    assert!(report.dirty_ratio > 0.0 && report.dirty_ratio < 0.9);
    assert!((partition.cleaner_status().dirty_ratio - report.dirty_ratio).abs() < 1e-9);
    let eager = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.1,
        ..policy(0)
    };
    assert!(compact(&partition, &eager, T0).await.ran);
    assert_eq!(rows(&partition).await.len(), 2);
}

/// Writes four small closed segments whose compaction merges them into one, and returns the
/// rows before and after a complete compaction.
async fn crash_fixture(dir: &Path) -> Partition {
    let partition = open(dir, config()).await;
    for i in 0..12 {
        let value = if i == 7 { None } else { Some("payload") };
        append(&partition, &[record(&format!("k{}", i % 5), value, T0)]).await;
        if i % 3 == 2 {
            partition.roll().await.unwrap();
        }
    }
    partition
}

#[tokio::test]
async fn a_crash_at_any_step_of_the_swap_leaves_the_old_or_the_new_segments() {
    let control = tempfile::tempdir().unwrap();
    let partition = crash_fixture(control.path()).await;
    let old = rows(&partition).await;
    let retention = policy(1_000_000);
    compact(&partition, &retention, T0 + 1).await;
    let new = rows(&partition).await;
    assert_ne!(old, new);
    let plan = SwapPlan {
        base_offset: 0,
        replaces: vec![0, 3, 6, 9],
    };
    let steps = step_count(&plan);
    let (mut saw_old, mut saw_new) = (false, false);
    for stop in 0..=steps {
        let dir = tempfile::tempdir().unwrap();
        let partition = crash_fixture(dir.path()).await;
        partition
            .compact_and_crash_in_swap(&retention, T0 + 1, stop)
            .await
            .unwrap();
        drop(partition); // kill: no close, the writer is aborted
        let reopened = open(dir.path(), config()).await;
        let after = rows(&reopened).await;
        assert!(
            after == old || after == new,
            "crash after step {stop} of {steps}: {after:?}"
        );
        saw_old |= after == old;
        saw_new |= after == new;
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().to_string();
            assert!(
                !name.ends_with(CLEANED_EXTENSION) && name != SWAP_FILE,
                "recovery left {name} after a crash at step {stop}"
            );
        }
        // The cleaner picks up again and reaches the same result.
        compact(&reopened, &retention, T0 + 1).await;
        assert_eq!(rows(&reopened).await, new, "after a crash at step {stop}");
        assert_eq!(reopened.offsets().log_end_offset, 12);
    }
    assert!(
        saw_old && saw_new,
        "the crash points cover both sides of the commit"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Write(Vec<(u8, Option<u8>)>),
    Roll,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => proptest::collection::vec((0u8..6, proptest::option::weighted(0.8, any::<u8>())), 1..4)
            .prop_map(Op::Write),
        1 => Just(Op::Roll),
    ]
}

/// Passes until one has nothing to do: with a bounded map, each pass cleans only part of the
/// dirty log, so several may be needed. Returns how many ran.
async fn compact_fully(partition: &Partition, policy: &CompactionPolicy, now: i64) -> usize {
    let mut ran = 0;
    while compact(partition, policy, now).await.ran {
        ran += 1;
        assert!(ran < 500, "passes keep running without converging");
    }
    ran
}

async fn run_model(ops: Vec<Op>, max_map_keys: usize) {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), config()).await;
    let mut written: BTreeMap<u64, (Bytes, Option<Bytes>)> = BTreeMap::new();
    let mut latest: HashMap<Bytes, Option<Bytes>> = HashMap::new();
    let mut next = 0u64;
    for op in ops {
        match op {
            Op::Write(records) => {
                let batch: Vec<NewRecord> = records
                    .iter()
                    .map(|(k, v)| NewRecord {
                        timestamp: T0,
                        key: Some(Bytes::from(format!("key{k}"))),
                        value: v.map(|v| Bytes::from(vec![v; 3])),
                        headers: Vec::new(),
                    })
                    .collect();
                append(&partition, &batch).await;
                for r in batch {
                    let key = r.key.unwrap();
                    written.insert(next, (key.clone(), r.value.clone()));
                    latest.insert(key, r.value);
                    next += 1;
                }
            }
            Op::Roll => partition.roll().await.unwrap(),
        }
    }
    partition.roll().await.unwrap();
    let check = |rows: &[Row], tombstones_kept: bool| {
        assert!(rows.windows(2).all(|w| w[0].0 < w[1].0), "offsets increase");
        let mut seen: HashMap<Bytes, Option<Bytes>> = HashMap::new();
        for (offset, key, value) in rows {
            let key = key.clone().unwrap();
            assert_eq!(
                written.get(offset),
                Some(&(key.clone(), value.clone())),
                "a kept record is unchanged at its offset"
            );
            assert!(
                seen.insert(key, value.clone()).is_none(),
                "one record per key"
            );
        }
        let expected: HashMap<Bytes, Option<Bytes>> = latest
            .iter()
            .filter(|(_, v)| tombstones_kept || v.is_some())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(seen, expected, "latest value per key equals the model");
    };
    let retention = CompactionPolicy {
        max_map_keys,
        // Any dirty byte is worth a pass, so that partial passes run until the log is clean.
        min_cleanable_dirty_ratio: 0.0,
        ..policy(5_000)
    };
    compact_fully(&partition, &retention, T0 + 1).await;
    check(&rows(&partition).await, true);
    compact_fully(&partition, &retention, T0 + 10_000).await;
    let after = rows(&partition).await;
    check(&after, false);
    assert_eq!(partition.offsets().log_end_offset, next);
    partition.close().await.unwrap();
    drop(partition);
    let reopened = open(dir.path(), config()).await;
    assert_eq!(
        rows(&reopened).await,
        after,
        "the compacted log survives a restart"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn compaction_matches_a_hashmap_of_the_latest_value_per_key(ops in proptest::collection::vec(op(), 1..40)) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run_model(ops, super::DEFAULT_MAX_MAP_KEYS));
    }

    #[test]
    fn partial_passes_of_a_tiny_map_reach_the_same_log(
        ops in proptest::collection::vec(op(), 1..40),
        max_map_keys in 1usize..4,
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run_model(ops, max_map_keys));
    }
}

#[tokio::test]
async fn the_throttle_is_shared_and_does_not_change_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let partition = crash_fixture(dir.path()).await;
    let throttle = Arc::new(Throttle::new(1 << 30));
    let report = partition
        .compact(&policy(0), T0 + 1, &throttle)
        .await
        .unwrap();
    assert!(report.ran);
    assert!(report.bytes_reclaimed > 0);
}

#[tokio::test]
async fn a_full_map_ends_the_pass_early_and_the_next_pass_continues() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), config()).await;
    // Three segments of two keys each, every key written twice.
    for (first, second) in [("a", "b"), ("c", "d"), ("e", "f")] {
        for round in ["1", "2"] {
            append(
                &partition,
                &[
                    record(first, Some(round), T0),
                    record(second, Some(round), T0),
                ],
            )
            .await;
        }
        partition.roll().await.unwrap();
    }
    let tiny = CompactionPolicy {
        max_map_keys: 2,
        min_cleanable_dirty_ratio: 0.0,
        ..policy(0)
    };
    // The map fills with the first segment's two keys: only that segment is cleaned.
    let first = compact(&partition, &tiny, T0 + 1).await;
    assert!(first.ran);
    assert_eq!(first.records_removed, 2);
    assert_eq!(rows(&partition).await.len(), 10);
    let passes = compact_fully(&partition, &tiny, T0 + 1).await;
    assert_eq!(passes, 2, "one more pass per remaining segment");
    let kept: Vec<u64> = rows(&partition).await.iter().map(|row| row.0).collect();
    assert_eq!(kept, vec![2, 3, 6, 7, 10, 11]);
}

#[tokio::test]
async fn a_dirty_segment_older_than_the_max_lag_is_compacted_below_the_dirty_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let partition = small_dirty_segment_after_a_clean_one(dir.path()).await;
    let bounded = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.9,
        max_compaction_lag_ms: 10_000,
        ..policy(0)
    };
    // Below the ratio, and the dirty segment (started at T0) is younger than the max lag:
    // nothing runs.
    let early = compact(&partition, &bounded, T0 + 9_999).await;
    assert!(!early.ran);
    assert!(early.dirty_ratio < 0.9);
    assert_eq!(rows(&partition).await.len(), 3);
    // Once the dirty segment is 10 s old, the pass runs anyway and drops the older k0.
    assert!(compact(&partition, &bounded, T0 + 10_000).await.ran);
    let kept: Vec<Row> = rows(&partition).await;
    assert_eq!(kept.len(), 2);
    assert_eq!(kept[1].2.as_deref(), Some(&b"new"[..]));
}

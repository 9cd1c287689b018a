//! Engine tests that need several modules together: partition append/read/roll/recovery against
//! models, group commit, faults. Every test runs on both I/O backends.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;

use super::batch::{BatchOptions, NewRecord, RecordBatch, encode_batch};
use super::config::LogConfig;
use super::partition::{Acks, AppendError, OffsetOutOfRange, Partition, ReadError};
use super::producer_state::ProducerError;
use super::segment::{LOG_SUFFIX, segment_file_name};
use crate::clock::{Clock, ManualClock};
use crate::io::{FaultPlan, Io, IoBackendChoice, IoBackendKind, IoOp};

const BACKENDS: [IoBackendChoice; 2] = [IoBackendChoice::Sync, IoBackendChoice::Uring];

fn start_io(choice: IoBackendChoice, dir: &Path) -> Io {
    let (io, report) = Io::start(choice, dir).expect("io backend starts");
    let expected = match choice {
        IoBackendChoice::Uring => IoBackendKind::Uring,
        _ => IoBackendKind::Sync,
    };
    assert_eq!(report.backend, expected, "{}", report.reason);
    io
}

fn record(value: &[u8], timestamp: i64) -> NewRecord {
    NewRecord {
        timestamp,
        key: Some(Bytes::from(format!("k{}", value.len()))),
        value: Some(Bytes::copy_from_slice(value)),
        headers: Vec::new(),
    }
}

fn batch_of(records: &[NewRecord]) -> RecordBatch {
    let bytes = encode_batch(&BatchOptions::default(), records).expect("encode");
    let batch = RecordBatch::decode_exact(bytes).expect("decode");
    batch.validate_for_append().expect("valid for append");
    batch
}

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

async fn open(dir: &Path, io: &Io, config: LogConfig, clock: Arc<dyn Clock>) -> Partition {
    Partition::open(dir, config, io.clone(), clock)
        .await
        .expect("partition opens")
}

/// Every record readable from `from` to the high watermark, decoded.
async fn read_all(partition: &Partition, from: u64) -> Vec<(u64, i64, Option<Bytes>)> {
    let mut out = Vec::new();
    let mut offset = from;
    loop {
        let slice = partition.read(offset, 1000).await.expect("read");
        if slice.data.is_empty() {
            return out;
        }
        let mut rest = slice.data.clone();
        let mut first = true;
        while !rest.is_empty() {
            let batch = RecordBatch::decode_first(&rest).expect("stored batch decodes");
            if first {
                let last = batch.header().base_offset + i64::from(batch.header().last_offset_delta);
                assert!(
                    last >= offset as i64,
                    "first batch must hold the requested offset"
                );
                first = false;
            }
            for record in batch.records() {
                let record = record.expect("record decodes");
                if record.offset as u64 >= offset {
                    out.push((record.offset as u64, record.timestamp, record.value.clone()));
                }
            }
            rest = rest.slice(batch.len()..);
        }
        assert!(slice.next_offset > offset);
        offset = slice.next_offset;
    }
}

#[tokio::test]
async fn appends_get_gap_free_offsets_and_read_back_on_both_backends() {
    for choice in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let io = start_io(choice, dir.path());
        let clock = ManualClock::new(1_000);
        let partition = open(&dir.path().join("p"), &io, small_config(), clock).await;
        let mut expected = Vec::new();
        for i in 0..50u64 {
            let records: Vec<_> = (0..(i % 4 + 1))
                .map(|j| record(&[i as u8; 100], 1_000 + j as i64))
                .collect();
            let acks = partition
                .append(vec![batch_of(&records)], Acks::All)
                .await
                .unwrap();
            assert_eq!(acks[0].base_offset, expected.len() as u64);
            assert_eq!(
                acks[0].last_offset,
                (expected.len() + records.len() - 1) as u64
            );
            expected.extend(records.iter().map(|r| r.value.clone()));
        }
        let offsets = partition.offsets();
        assert_eq!(offsets.high_watermark, expected.len() as u64);
        assert_eq!(offsets.log_end_offset, expected.len() as u64);
        assert!(
            partition.segments().len() > 3,
            "4 KiB segments must have rolled"
        );
        let read = read_all(&partition, 0).await;
        let values: Vec<_> = read.iter().map(|(_, _, v)| v.clone()).collect();
        assert_eq!(values, expected);
        assert!(read.iter().enumerate().all(|(i, (o, _, _))| *o == i as u64));
        // Reading from the middle starts at the batch holding the offset.
        let middle = read_all(&partition, 77).await;
        assert_eq!(middle.first().map(|r| r.0), Some(77));
        partition.close().await.unwrap();
    }
}

#[tokio::test]
async fn reads_outside_the_log_are_out_of_range_and_at_the_end_are_empty() {
    for choice in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let io = start_io(choice, dir.path());
        let partition = open(dir.path(), &io, small_config(), ManualClock::new(0)).await;
        partition
            .append(vec![batch_of(&[record(b"a", 1)])], Acks::All)
            .await
            .unwrap();
        let at_end = partition.read(1, 100).await.unwrap();
        assert!(at_end.data.is_empty());
        assert_eq!(at_end.next_offset, 1);
        match partition.read(2, 100).await {
            Err(ReadError::OffsetOutOfRange(OffsetOutOfRange {
                requested: 2,
                earliest: 0,
                latest: 1,
            })) => {}
            other => panic!("expected out of range, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_read_returns_at_least_one_batch_even_above_max_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let partition = open(dir.path(), &io, LogConfig::default(), ManualClock::new(0)).await;
    partition
        .append(vec![batch_of(&[record(&[7; 5000], 1)])], Acks::All)
        .await
        .unwrap();
    partition
        .append(vec![batch_of(&[record(&[8; 10], 1)])], Acks::All)
        .await
        .unwrap();
    let slice = partition.read(0, 10).await.unwrap();
    assert!(slice.data.len() > 5000);
    assert_eq!(slice.next_offset, 1, "only the first, oversized batch");
    let both = partition.read(0, 1 << 20).await.unwrap();
    assert_eq!(both.next_offset, 2);
}

#[tokio::test]
async fn concurrent_appends_share_one_write_and_one_fsync() {
    for choice in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let io = start_io(choice, dir.path());
        let partition = open(dir.path(), &io, LogConfig::default(), ManualClock::new(0)).await;
        let syncs_before = io.stats().ops(IoOp::SyncData);
        // On this single-threaded test runtime every append is queued before the writer runs,
        // so the writer must take them all in one round.
        let appends =
            (0..100).map(|i| partition.append(vec![batch_of(&[record(&[i; 10], 5)])], Acks::All));
        let results = futures::future::join_all(appends).await;
        let mut offsets: Vec<u64> = results
            .into_iter()
            .map(|r| r.unwrap()[0].base_offset)
            .collect();
        offsets.sort_unstable();
        assert_eq!(offsets, (0..100).collect::<Vec<_>>());
        let syncs = io.stats().ops(IoOp::SyncData) - syncs_before;
        assert_eq!(syncs, 1, "100 queued appends must share one fdatasync");
    }
}

#[tokio::test]
async fn leader_acks_come_before_the_fsync_but_readers_wait_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let faults = Arc::new(FaultPlan::new());
    let faulty = io.with_faults(Arc::clone(&faults));
    let partition = open(
        dir.path(),
        &faulty,
        LogConfig::default(),
        ManualClock::new(0),
    )
    .await;
    faults.fail_syncs(libc::EIO, 1);
    let acks = partition
        .append(vec![batch_of(&[record(b"x", 1)])], Acks::Leader)
        .await
        .unwrap();
    assert_eq!(
        acks[0].base_offset, 0,
        "acks=leader is answered after the write"
    );
    let offsets = partition.offsets();
    assert_eq!(offsets.high_watermark, 0, "not durable, so not readable");
    assert_eq!(offsets.log_end_offset, 1);
    match partition
        .append(vec![batch_of(&[record(b"y", 1)])], Acks::All)
        .await
    {
        Err(AppendError::Poisoned { .. }) => {}
        other => panic!("a failed fsync must poison the partition, got {other:?}"),
    }
}

#[tokio::test]
async fn a_failed_write_is_cut_off_and_appends_resume_when_space_returns() {
    for choice in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let io = start_io(choice, dir.path());
        let faults = Arc::new(FaultPlan::new());
        let faulty = io.with_faults(Arc::clone(&faults));
        let partition = open(
            dir.path(),
            &faulty,
            LogConfig::default(),
            ManualClock::new(0),
        )
        .await;
        partition
            .append(vec![batch_of(&[record(b"before", 1)])], Acks::All)
            .await
            .unwrap();
        let size_before = partition.segments()[0].durable_size;
        faults.short_write_then_fail(20, libc::ENOSPC);
        match partition
            .append(vec![batch_of(&[record(&[1; 300], 1)])], Acks::All)
            .await
        {
            Err(AppendError::Io(error)) => assert_eq!(error.raw_os_error(), Some(libc::ENOSPC)),
            other => panic!("expected ENOSPC, got {other:?}"),
        }
        assert_eq!(partition.offsets().high_watermark, 1);
        let file = dir.path().join(segment_file_name(0, LOG_SUFFIX));
        assert_eq!(
            std::fs::metadata(&file).unwrap().len(),
            size_before,
            "partial write cut off"
        );
        faults.clear();
        let acks = partition
            .append(vec![batch_of(&[record(b"after", 1)])], Acks::All)
            .await
            .unwrap();
        assert_eq!(acks[0].base_offset, 1, "the failed append took no offset");
        let values: Vec<_> = read_all(&partition, 0)
            .await
            .into_iter()
            .map(|r| r.2)
            .collect();
        assert_eq!(
            values,
            vec![Some(Bytes::from("before")), Some(Bytes::from("after"))]
        );
    }
}

#[tokio::test]
async fn an_idle_segment_rolls_after_segment_ms_without_new_appends() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let clock = ManualClock::new(10_000);
    let config = LogConfig {
        segment_ms: 1_000,
        ..LogConfig::default()
    };
    let partition = open(dir.path(), &io, config, clock.clone()).await;
    partition
        .append(vec![batch_of(&[record(b"a", 10_000)])], Acks::All)
        .await
        .unwrap();
    partition.tick().await.unwrap();
    assert_eq!(partition.segments().len(), 1, "not old enough yet");
    clock.advance(1_000);
    partition.tick().await.unwrap();
    let segments = partition.segments();
    assert_eq!(segments.len(), 2);
    assert_eq!(segments[1].base_offset, 1);
    // An empty active segment never rolls, however old.
    clock.advance(10_000);
    partition.tick().await.unwrap();
    assert_eq!(partition.segments().len(), 2);
}

#[tokio::test]
async fn the_background_tick_rolls_an_idle_segment() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let clock = ManualClock::new(10_000);
    let config = LogConfig {
        segment_ms: 1_000,
        roll_check_interval_ms: 5,
        ..LogConfig::default()
    };
    let partition = open(dir.path(), &io, config, clock.clone()).await;
    partition
        .append(vec![batch_of(&[record(b"a", 10_000)])], Acks::All)
        .await
        .unwrap();
    clock.advance(5_000);
    let mut rolled = false;
    for _ in 0..400 {
        if partition.segments().len() == 2 {
            rolled = true;
            break;
        }
        tokio::task::yield_now().await;
        let mut offsets = partition.subscribe();
        let _ = tokio::time::timeout(std::time::Duration::from_millis(5), offsets.changed()).await;
    }
    assert!(rolled, "no roll within 2 s of background ticks");
}

#[tokio::test]
async fn timestamp_lookup_uses_the_time_index_and_matches_a_scan() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let partition = open(dir.path(), &io, small_config(), ManualClock::new(0)).await;
    // Timestamps go up and down (CreateTime is producer-chosen).
    let stamps: Vec<i64> = (0..200).map(|i| 1_000 + (i * 37 % 101) + i * 3).collect();
    for chunk in stamps.chunks(3) {
        let records: Vec<_> = chunk.iter().map(|&t| record(&[1; 40], t)).collect();
        partition
            .append(vec![batch_of(&records)], Acks::All)
            .await
            .unwrap();
    }
    for target in [0, 1_000, 1_050, 1_300, 1_500, 1_700, 1_737, 5_000] {
        let oracle = stamps.iter().position(|&t| t >= target).map(|i| i as u64);
        assert_eq!(
            partition.offset_for_timestamp(target).unwrap(),
            oracle,
            "target {target}"
        );
    }
}

#[tokio::test]
async fn a_clean_restart_does_not_rescan_and_keeps_everything() {
    for choice in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let io = start_io(choice, dir.path());
        let clock = ManualClock::new(0);
        let partition = open(dir.path(), &io, small_config(), clock.clone()).await;
        for i in 0..40u8 {
            partition
                .append(vec![batch_of(&[record(&[i; 90], i64::from(i))])], Acks::All)
                .await
                .unwrap();
        }
        let before = read_all(&partition, 0).await;
        partition.close().await.unwrap();
        drop(partition);
        let reopened = open(dir.path(), &io, small_config(), clock.clone()).await;
        let report = reopened.recovery_report().clone();
        assert!(report.clean);
        assert_eq!(report.scanned_segments, 0);
        assert_eq!(report.rebuilt_indexes, 0);
        assert_eq!(read_all(&reopened, 0).await, before);
        let acks = reopened
            .append(vec![batch_of(&[record(b"next", 99)])], Acks::All)
            .await
            .unwrap();
        assert_eq!(acks[0].base_offset, 40);
        // The marker is cleared on open: dropping without close() is an unclean stop.
        drop(reopened);
        let again = open(dir.path(), &io, small_config(), clock).await;
        assert!(!again.recovery_report().clean);
        assert_eq!(
            again.recovery_report().scanned_segments,
            1,
            "only the active segment"
        );
        assert_eq!(again.offsets().log_end_offset, 41);
    }
}

#[tokio::test]
async fn missing_or_torn_indexes_are_rebuilt_after_a_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let partition = open(dir.path(), &io, small_config(), ManualClock::new(0)).await;
    for i in 0..40u8 {
        partition
            .append(vec![batch_of(&[record(&[i; 90], 1)])], Acks::All)
            .await
            .unwrap();
    }
    let before = read_all(&partition, 0).await;
    let segments = partition.segments();
    partition.close().await.unwrap();
    drop(partition);
    std::fs::remove_file(dir.path().join(segment_file_name(0, "index"))).unwrap();
    let torn = dir
        .path()
        .join(segment_file_name(segments[1].base_offset, "timeindex"));
    let mut bytes = std::fs::read(&torn).unwrap();
    bytes.push(0xff);
    std::fs::write(&torn, bytes).unwrap();
    let reopened = open(dir.path(), &io, small_config(), ManualClock::new(0)).await;
    assert_eq!(reopened.recovery_report().rebuilt_indexes, 2);
    assert_eq!(read_all(&reopened, 0).await, before);
    assert_eq!(std::fs::metadata(&torn).unwrap().len() % 12, 0);
}

/// Writes `batches` batches to a fresh partition, drops it without a clean close, and returns
/// the byte ranges of the batches in the (single) segment file.
async fn write_unclean(dir: &Path, io: &Io, batches: u8) -> Vec<std::ops::Range<u64>> {
    let partition = open(dir, io, LogConfig::default(), ManualClock::new(0)).await;
    let mut ranges = Vec::new();
    let mut position = 0;
    for i in 0..batches {
        let b = batch_of(&[record(&[i; 30], 1), record(&[i; 7], 2)]);
        let len = b.len() as u64;
        partition.append(vec![b], Acks::All).await.unwrap();
        ranges.push(position..position + len);
        position += len;
    }
    drop(partition);
    ranges
}

#[tokio::test]
async fn truncation_anywhere_inside_the_last_batch_recovers_exactly_the_complete_batches() {
    for choice in BACKENDS {
        let root = tempfile::tempdir().unwrap();
        let io = start_io(choice, root.path());
        let template = root.path().join("template");
        let ranges = write_unclean(&template, &io, 4).await;
        let last = ranges.last().unwrap().clone();
        let log = std::fs::read(template.join(segment_file_name(0, LOG_SUFFIX))).unwrap();
        for cut in last.start..last.end {
            let dir = root.path().join(format!("cut{cut}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join(segment_file_name(0, LOG_SUFFIX)),
                &log[..cut as usize],
            )
            .unwrap();
            let partition = open(&dir, &io, LogConfig::default(), ManualClock::new(0)).await;
            let report = partition.recovery_report().clone();
            // A torn write that kept only zero bytes looks like the reservation after it.
            let torn = &log[last.start as usize..cut as usize];
            assert_eq!(
                report.truncated_bytes + report.released_reserved_bytes,
                cut - last.start,
                "cut at {cut}"
            );
            assert_eq!(
                report.truncated_bytes > 0,
                torn.iter().any(|&b| b != 0),
                "cut at {cut}: only a tail with data counts as torn"
            );
            assert_eq!(
                partition.offsets().log_end_offset,
                6,
                "three whole batches of two records"
            );
            let values = read_all(&partition, 0).await;
            assert_eq!(values.len(), 6);
            let acks = partition
                .append(vec![batch_of(&[record(b"z", 3)])], Acks::All)
                .await
                .unwrap();
            assert_eq!(
                acks[0].base_offset, 6,
                "appends continue right after the cut"
            );
            drop(partition);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}

/// Every offset below the high watermark read one at a time: `Ok(value)` or `Err` for an offset
/// whose batch fails validation.
async fn read_each(partition: &Partition) -> Vec<Result<Option<Bytes>, String>> {
    let high = partition.offsets().high_watermark;
    let mut out = Vec::new();
    for offset in partition.offsets().log_start_offset..high {
        let value = match partition.read(offset, 1).await {
            Err(error) => Err(error.to_string()),
            Ok(slice) => match RecordBatch::decode_first(&slice.data) {
                Err(error) => Err(error.to_string()),
                Ok(batch) => {
                    let record = batch
                        .records()
                        .map(Result::unwrap)
                        .find(|r| r.offset as u64 == offset);
                    Ok(record.expect("the batch read for an offset holds it").value)
                }
            },
        };
        out.push(value);
    }
    out
}

#[tokio::test]
async fn a_garbled_byte_costs_only_its_own_batch() {
    let root = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, root.path());
    let template = root.path().join("template");
    let ranges = write_unclean(&template, &io, 5).await;
    let log = std::fs::read(template.join(segment_file_name(0, LOG_SUFFIX))).unwrap();
    let value = |batch: usize, record: usize| {
        Some(Bytes::from(vec![
            batch as u8;
            if record == 0 { 30 } else { 7 }
        ]))
    };
    for (victim, range) in ranges.iter().enumerate() {
        // partitionLeaderEpoch (bytes 12..16) is outside Kafka's CRC and unused: any value is
        // fine. Every other byte, base offset included, is checked.
        let checked =
            (range.start..range.end).filter(|p| !(range.start + 12..range.start + 16).contains(p));
        for position in checked.step_by(3) {
            let dir = root.path().join(format!("garble{position}"));
            std::fs::create_dir_all(&dir).unwrap();
            let mut garbled = log.clone();
            garbled[position as usize] ^= 0x5a;
            std::fs::write(dir.join(segment_file_name(0, LOG_SUFFIX)), &garbled).unwrap();
            let partition = open(&dir, &io, LogConfig::default(), ManualClock::new(0)).await;
            let what = format!("garbled byte at {position} in batch {victim}");
            let end = partition.offsets().log_end_offset;
            let last = victim == ranges.len() - 1;
            let base_offset_byte = position < range.start + 8;
            if last && !base_offset_byte {
                // The end of the active segment after a crash: a torn write explains it.
                assert_eq!(end, 2 * victim as u64, "{what}: cut");
            } else {
                assert_eq!(end, 10, "{what}: every offset stays taken");
            }
            let read = read_each(&partition).await;
            for (offset, got) in read.iter().enumerate() {
                let (batch, record) = (offset / 2, offset % 2);
                if batch == victim && !base_offset_byte {
                    assert!(got.is_err(), "{what}: offset {offset} must read as corrupt");
                } else {
                    assert_eq!(got, &Ok(value(batch, record)), "{what}: offset {offset}");
                }
            }
            // Appends go on after the damage, and are readable.
            let acks = partition
                .append(vec![batch_of(&[record(b"after", 3)])], Acks::All)
                .await
                .unwrap();
            assert_eq!(acks[0].base_offset, end, "{what}");
            drop(partition);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}

#[tokio::test]
async fn hot_reads_are_zero_copy_and_cold_reads_are_counted_as_copies() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let partition = open(dir.path(), &io, LogConfig::default(), ManualClock::new(0)).await;
    let big = vec![0xabu8; 512 * 1024];
    partition
        .append(vec![batch_of(&[record(&big, 1)])], Acks::All)
        .await
        .unwrap();
    let stats = io.stats();
    let hot = partition.read(0, 1 << 20).await.unwrap();
    assert!(hot.zero_copy);
    assert_eq!(stats.bytes_zero_copy(), hot.data.len() as u64);
    assert_eq!(stats.bytes_copied(), 0);
    // Drop the pages from the cache: the body's middle pages are no longer resident.
    let path = dir.path().join(segment_file_name(0, LOG_SUFFIX));
    let file = io.open(&path, crate::io::OpenMode::Read).await.unwrap();
    drop(hot);
    crate::io::evict_page_cache(&file).unwrap();
    let cold = partition.read(0, 1 << 20).await.unwrap();
    assert!(
        !cold.zero_copy,
        "non-resident pages go through the copying path"
    );
    assert_eq!(stats.bytes_copied(), cold.data.len() as u64);
    let batch = RecordBatch::decode_first(&cold.data).unwrap();
    assert_eq!(
        batch
            .records()
            .next()
            .unwrap()
            .unwrap()
            .value
            .unwrap()
            .len(),
        big.len()
    );
}

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<usize>),
    Roll,
    Read(usize, u64),
    Reopen { clean: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::collection::vec(0usize..300, 1..5).prop_map(Op::Append),
        1 => Just(Op::Roll),
        3 => (0usize..1000, 1u64..2000).prop_map(|(o, m)| Op::Read(o, m)),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

async fn run_model(choice: IoBackendChoice, ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(choice, dir.path());
    let clock = ManualClock::new(0);
    let config = LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 300,
        ..LogConfig::default()
    };
    let mut partition = open(dir.path(), &io, config.clone(), clock.clone()).await;
    let mut model: Vec<Bytes> = Vec::new();
    for op in ops {
        match op {
            Op::Append(sizes) => {
                let records: Vec<_> = sizes
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| record(&vec![(model.len() + i) as u8; n], model.len() as i64))
                    .collect();
                let acks = partition
                    .append(vec![batch_of(&records)], Acks::All)
                    .await
                    .unwrap();
                assert_eq!(acks[0].base_offset, model.len() as u64);
                model.extend(records.into_iter().map(|r| r.value.unwrap()));
            }
            Op::Roll => partition.roll().await.unwrap(),
            Op::Read(offset, max_bytes) => {
                let offset = offset as u64 % (model.len() as u64 + 1);
                let slice = partition.read(offset, max_bytes).await.unwrap();
                assert_eq!(slice.offsets.high_watermark, model.len() as u64);
                if offset == model.len() as u64 {
                    assert!(slice.data.is_empty());
                    continue;
                }
                assert!(!slice.data.is_empty());
                assert!(slice.first_offset <= offset && slice.next_offset > offset);
                let mut rest = slice.data.clone();
                let mut expected_offset = slice.first_offset;
                while !rest.is_empty() {
                    let batch = RecordBatch::decode_first(&rest).unwrap();
                    for record in batch.records() {
                        let record = record.unwrap();
                        assert_eq!(record.offset as u64, expected_offset);
                        assert_eq!(
                            record.value.as_ref(),
                            Some(&model[expected_offset as usize])
                        );
                        expected_offset += 1;
                    }
                    rest = rest.slice(batch.len()..);
                }
                assert_eq!(expected_offset, slice.next_offset);
            }
            Op::Reopen { clean } => {
                if clean {
                    partition.close().await.unwrap();
                }
                drop(partition);
                partition = open(dir.path(), &io, config.clone(), clock.clone()).await;
                assert_eq!(partition.recovery_report().truncated_bytes, 0);
                assert_eq!(partition.offsets().log_end_offset, model.len() as u64);
            }
        }
    }
    let all: Vec<_> = read_all(&partition, 0)
        .await
        .into_iter()
        .map(|r| r.2.unwrap())
        .collect();
    assert_eq!(all, model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn partition_matches_a_vec_model(
        ops in proptest::collection::vec(op(), 1..40),
        uring in any::<bool>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let choice = if uring { IoBackendChoice::Uring } else { IoBackendChoice::Sync };
        runtime.block_on(run_model(choice, ops));
    }
}

fn idempotent_batch(producer_id: i64, epoch: i16, sequence: i32, values: &[&[u8]]) -> RecordBatch {
    let options = BatchOptions {
        producer_id,
        producer_epoch: epoch,
        base_sequence: sequence,
        ..BatchOptions::default()
    };
    let records: Vec<_> = values.iter().map(|v| record(v, 1)).collect();
    RecordBatch::decode_exact(encode_batch(&options, &records).unwrap()).unwrap()
}

#[tokio::test]
async fn a_retried_idempotent_batch_gets_its_first_offsets_and_is_not_appended_again() {
    for choice in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let io = start_io(choice, dir.path());
        let clock = ManualClock::new(0);
        let partition = open(dir.path(), &io, small_config(), clock.clone()).await;
        let first = idempotent_batch(7, 0, 0, &[b"a", b"b"]);
        let acks = partition
            .append(vec![first.clone()], Acks::All)
            .await
            .unwrap();
        assert_eq!((acks[0].base_offset, acks[0].last_offset), (0, 1));
        let retry = partition
            .append(vec![first.clone()], Acks::All)
            .await
            .unwrap();
        assert_eq!(
            retry[0].base_offset, acks[0].base_offset,
            "a retry gets the original offsets"
        );
        assert_eq!(retry[0].last_offset, acks[0].last_offset);
        assert!(retry[0].duplicate && !acks[0].duplicate);
        assert_eq!(partition.offsets().log_end_offset, 2, "and appends nothing");
        match partition
            .append(vec![idempotent_batch(7, 0, 5, &[b"c"])], Acks::All)
            .await
        {
            Err(AppendError::Producer(ProducerError::SequenceGap { expected: 2, .. })) => {}
            other => panic!("expected a sequence gap, got {other:?}"),
        }
        let next = partition
            .append(vec![idempotent_batch(7, 0, 2, &[b"c"])], Acks::All)
            .await;
        assert_eq!(next.unwrap()[0].base_offset, 2);
        // A new epoch fences the old one.
        partition
            .append(vec![idempotent_batch(7, 1, 0, &[b"d"])], Acks::All)
            .await
            .unwrap();
        match partition
            .append(vec![idempotent_batch(7, 0, 3, &[b"e"])], Acks::All)
            .await
        {
            Err(AppendError::Producer(ProducerError::Fenced {
                current_epoch: 1, ..
            })) => {}
            other => panic!("expected fenced, got {other:?}"),
        }
        // The state survives an unclean restart (rebuilt from the log) and a roll + clean
        // restart (from the snapshot plus the log after it).
        drop(partition);
        let partition = open(dir.path(), &io, small_config(), clock.clone()).await;
        let retry = partition
            .append(vec![idempotent_batch(7, 1, 0, &[b"d"])], Acks::All)
            .await;
        assert_eq!(
            retry.unwrap()[0].base_offset,
            3,
            "duplicate detected after restart"
        );
        partition.roll().await.unwrap();
        partition
            .append(vec![idempotent_batch(7, 1, 1, &[b"f"])], Acks::All)
            .await
            .unwrap();
        partition.close().await.unwrap();
        drop(partition);
        let partition = open(dir.path(), &io, small_config(), clock).await;
        let retry = partition
            .append(vec![idempotent_batch(7, 1, 1, &[b"f"])], Acks::All)
            .await;
        assert_eq!(retry.unwrap()[0].base_offset, 4);
        assert_eq!(partition.offsets().log_end_offset, 5);
    }
}

#[tokio::test]
async fn a_failed_write_forgets_the_producer_sequence_it_planned() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let faults = Arc::new(FaultPlan::new());
    let faulty = io.with_faults(Arc::clone(&faults));
    let partition = open(
        dir.path(),
        &faulty,
        LogConfig::default(),
        ManualClock::new(0),
    )
    .await;
    faults.fail_writes(libc::ENOSPC, 1);
    let batch = idempotent_batch(3, 0, 0, &[b"x"]);
    assert!(matches!(
        partition.append(vec![batch.clone()], Acks::All).await,
        Err(AppendError::Io(_))
    ));
    let acks = partition.append(vec![batch], Acks::All).await.unwrap();
    assert_eq!(
        acks[0].base_offset, 0,
        "the retry is appended, not taken for a duplicate"
    );
    assert_eq!(partition.offsets().high_watermark, 1);
}

#[tokio::test]
async fn a_conditional_append_succeeds_only_at_the_expected_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let partition = open(dir.path(), &io, LogConfig::default(), ManualClock::new(0)).await;
    let acks = partition
        .append_if(vec![batch_of(&[record(b"a", 1)])], Acks::All, Some(0))
        .await;
    assert_eq!(acks.unwrap()[0].base_offset, 0);
    match partition
        .append_if(vec![batch_of(&[record(b"b", 1)])], Acks::All, Some(0))
        .await
    {
        Err(AppendError::OffsetMismatch {
            expected: 0,
            actual: 1,
        }) => {}
        other => panic!("expected a mismatch, got {other:?}"),
    }
    assert_eq!(partition.offsets().log_end_offset, 1);
    // Two conditional appends racing for the same offset: exactly one wins.
    let (a, b) = tokio::join!(
        partition.append_if(vec![batch_of(&[record(b"c", 1)])], Acks::All, Some(1)),
        partition.append_if(vec![batch_of(&[record(b"d", 1)])], Acks::All, Some(1)),
    );
    assert!(a.is_ok() != b.is_ok(), "one winner: {a:?} {b:?}");
}

#[tokio::test]
async fn delete_records_moves_the_log_start_durably_and_removes_whole_segments_below_it() {
    for choice in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let io = start_io(choice, dir.path());
        let clock = ManualClock::new(0);
        let partition = open(dir.path(), &io, small_config(), clock.clone()).await;
        for i in 0..120u8 {
            partition
                .append(vec![batch_of(&[record(&[i; 100], 1)])], Acks::All)
                .await
                .unwrap();
        }
        let segments = partition.segments();
        assert!(segments.len() > 3);
        let held = partition.read(0, 1 << 20).await.unwrap();
        let cut = segments[2].base_offset + 1;
        assert_eq!(partition.delete_records(cut).await.unwrap(), cut);
        assert_eq!(partition.offsets().log_start_offset, cut);
        match partition.read(cut - 1, 100).await {
            Err(ReadError::OffsetOutOfRange(OffsetOutOfRange { earliest, .. })) => {
                assert_eq!(earliest, cut)
            }
            other => panic!("expected out of range, got {other:?}"),
        }
        assert_eq!(
            read_all(&partition, cut).await.first().map(|r| r.0),
            Some(cut)
        );
        let remaining: Vec<u64> = partition.segments().iter().map(|s| s.base_offset).collect();
        assert_eq!(
            remaining[0], segments[2].base_offset,
            "whole segments below the cut are gone"
        );
        assert!(!dir.path().join(segment_file_name(0, LOG_SUFFIX)).exists());
        // A reader that still holds bytes of a removed segment keeps them intact.
        let batch = RecordBatch::decode_first(&held.data).unwrap();
        assert_eq!(batch.records().next().unwrap().unwrap().offset, 0);
        // Deleting beyond the high watermark is refused; below the start is a no-op.
        assert!(matches!(
            partition.delete_records(1_000).await,
            Err(AppendError::OffsetOutOfRange(OffsetOutOfRange { .. }))
        ));
        assert_eq!(partition.delete_records(1).await.unwrap(), cut);
        drop(partition);
        let reopened = open(dir.path(), &io, small_config(), clock).await;
        assert_eq!(
            reopened.offsets().log_start_offset,
            cut,
            "survives an unclean restart"
        );
        assert_eq!(reopened.offsets().log_end_offset, 120);
    }
}

#[tokio::test]
async fn segments_left_below_the_log_start_by_a_crash_are_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let clock = ManualClock::new(0);
    let partition = open(dir.path(), &io, small_config(), clock.clone()).await;
    for i in 0..80u8 {
        partition
            .append(vec![batch_of(&[record(&[i; 100], 1)])], Acks::All)
            .await
            .unwrap();
    }
    let first = partition.segments()[0];
    let names: Vec<String> = ["log", "index", "timeindex"]
        .iter()
        .map(|suffix| segment_file_name(first.base_offset, suffix))
        .collect();
    let saved: Vec<Vec<u8>> = names
        .iter()
        .map(|n| std::fs::read(dir.path().join(n)).unwrap())
        .collect();
    let cut = first.next_offset;
    partition.delete_records(cut).await.unwrap();
    drop(partition);
    // A crash between the metadata write and the unlink leaves the old files behind.
    for (name, bytes) in names.iter().zip(&saved) {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let reopened = open(dir.path(), &io, small_config(), clock).await;
    assert_eq!(reopened.offsets().log_start_offset, cut);
    assert!(
        reopened
            .segments()
            .iter()
            .all(|s| s.base_offset != first.base_offset)
    );
    assert!(
        !dir.path().join(&names[0]).exists(),
        "the stale segment's files are gone"
    );
    assert_eq!(reopened.recovery_report().removed_segments, 1);
}

#[tokio::test]
async fn a_clean_restart_rebuilds_no_index_when_many_batches_share_a_millisecond() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let config = || LogConfig {
        segment_bytes: 8192,
        index_interval_bytes: 64,
        ..LogConfig::default()
    };
    let partition = open(dir.path(), &io, config(), ManualClock::new(0)).await;
    // Every batch has the same timestamp: the time index adds an entry only when the running
    // maximum grows, so it ends up shorter than the offset index.
    for i in 0..200u32 {
        partition
            .append(vec![batch_of(&[record(&i.to_be_bytes(), 5)])], Acks::All)
            .await
            .unwrap();
    }
    assert!(partition.segments().len() >= 2, "segments rolled");
    partition.close().await.unwrap();
    drop(partition);
    let partition = open(dir.path(), &io, config(), ManualClock::new(0)).await;
    let report = partition.recovery_report().clone();
    assert!(report.clean, "{report:?}");
    assert_eq!(report.rebuilt_indexes, 0, "{report:?}");
    assert_eq!(report.scanned_segments, 0, "{report:?}");
    assert_eq!(read_all(&partition, 0).await.len(), 200);
}

#[tokio::test]
async fn leader_rounds_do_not_wait_for_the_fsync_of_the_round_before() {
    for choice in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let io = start_io(choice, dir.path());
        let faults = Arc::new(FaultPlan::new());
        let faulty = io.with_faults(Arc::clone(&faults));
        let partition = Arc::new(
            open(
                dir.path(),
                &faulty,
                LogConfig::default(),
                ManualClock::new(0),
            )
            .await,
        );
        faults.hold_syncs();
        // Without pipelining the second append would wait for the first one's fdatasync, which
        // cannot finish while syncs are held.
        for expected in 0..3 {
            let append = partition.append(vec![batch_of(&[record(b"x", 1)])], Acks::Leader);
            let acks = tokio::time::timeout(std::time::Duration::from_secs(10), append)
                .await
                .expect("a leader append waited for an earlier round's fdatasync")
                .unwrap();
            assert_eq!(acks[0].base_offset, expected);
        }
        let offsets = partition.offsets();
        assert_eq!(offsets.log_end_offset, 3);
        assert_eq!(
            offsets.high_watermark, 0,
            "nothing durable, nothing readable"
        );
        // acks=all waits for the durable point, and its own fdatasync covers all before it.
        let durable = tokio::spawn({
            let partition = Arc::clone(&partition);
            async move {
                partition
                    .append(vec![batch_of(&[record(b"y", 1)])], Acks::All)
                    .await
            }
        });
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(!durable.is_finished(), "acks=all answered before fdatasync");
        faults.release_syncs();
        let acks = durable.await.unwrap().unwrap();
        assert_eq!(acks[0].base_offset, 3);
        assert_eq!(partition.offsets().high_watermark, 4);
        let values: Vec<_> = read_all(&partition, 0)
            .await
            .into_iter()
            .map(|r| r.2)
            .collect();
        assert_eq!(values.len(), 4, "{choice:?}");
    }
}

#[tokio::test]
async fn durable_bytes_behind_the_cache_window_leave_the_page_cache() {
    const MIB: u64 = 1 << 20;
    for (window, acks) in [(MIB, Acks::All), (MIB, Acks::Leader), (0, Acks::All)] {
        // A directory on the checkout's disk: advice has no effect on tmpfs pages.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let io = start_io(IoBackendChoice::Sync, dir.path());
        let config = LogConfig {
            page_cache_window_bytes: window,
            ..LogConfig::default()
        };
        let partition = open(&dir.path().join("p"), &io, config, ManualClock::new(1_000)).await;
        let mut expected = Vec::new();
        for i in 0..16u8 {
            let records: Vec<_> = (0..32).map(|j| record(&[i ^ j; 16 << 10], 1_000)).collect();
            partition
                .append(vec![batch_of(&records)], acks)
                .await
                .unwrap();
            expected.extend(records.iter().map(|r| r.value.clone()));
        }
        // Pipelined acks=leader rounds become durable after their answers.
        let end = expected.len() as u64;
        let mut offsets = partition.subscribe();
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            offsets.wait_for(|offsets| offsets.high_watermark == end),
        )
        .await
        .expect("the last round's fdatasync finishes")
        .expect("the writer is running");
        let log = dir.path().join("p").join(segment_file_name(0, LOG_SUFFIX));
        let size = std::fs::metadata(&log).unwrap().len();
        assert!(size > 8 * MIB, "{size}");
        let resident = crate::io::map::resident_bytes(&log).unwrap();
        let data = 16 * 32 * (16 << 10);
        if window == 0 {
            assert!(
                resident > data - MIB,
                "without a window the kernel keeps it: {resident}"
            );
        } else {
            // The window plus less than one advice step.
            assert!(
                resident <= 2 * MIB,
                "{resident} of {size} bytes still cached"
            );
        }
        // Dropped bytes read back from disk, unchanged.
        let values: Vec<_> = read_all(&partition, 0)
            .await
            .into_iter()
            .map(|(_, _, v)| v)
            .collect();
        assert_eq!(values, expected);
        partition.close().await.unwrap();
    }
}

/// The file's length on disk (the log plus any reservation).
fn log_file_len(dir: &Path, base: u64) -> u64 {
    std::fs::metadata(dir.join(segment_file_name(base, LOG_SUFFIX)))
        .unwrap()
        .len()
}

fn preallocating(step: u64) -> LogConfig {
    LogConfig {
        segment_preallocate_bytes: step,
        ..LogConfig::default()
    }
}

#[tokio::test]
async fn the_active_segment_reserves_ahead_and_rolls_and_closes_trim_the_reservation() {
    const MIB: u64 = 1 << 20;
    for choice in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let io = start_io(choice, dir.path());
        let partition = open(dir.path(), &io, preallocating(MIB), ManualClock::new(0)).await;
        partition
            .append(vec![batch_of(&[record(b"first", 1)])], Acks::All)
            .await
            .unwrap();
        let first_len = partition.segments()[0].durable_size;
        assert_eq!(
            log_file_len(dir.path(), 0),
            MIB,
            "{choice:?}: one step reserved"
        );
        assert!(io.stats().ops(IoOp::Allocate) >= 1);
        partition.roll().await.unwrap();
        assert_eq!(
            log_file_len(dir.path(), 0),
            first_len,
            "{choice:?}: a closed segment is exactly its batches"
        );
        partition
            .append(vec![batch_of(&[record(&[7; 3000], 2)])], Acks::Leader)
            .await
            .unwrap();
        assert_eq!(log_file_len(dir.path(), 1), MIB);
        partition.close().await.unwrap();
        let second_len = partition.segments()[1].durable_size;
        assert_eq!(
            log_file_len(dir.path(), 1),
            second_len,
            "{choice:?}: closed"
        );
        drop(partition);
        let reopened = open(dir.path(), &io, preallocating(MIB), ManualClock::new(0)).await;
        let report = reopened.recovery_report().clone();
        assert!(report.clean, "{report:?}");
        assert_eq!(report.released_reserved_bytes + report.truncated_bytes, 0);
        assert_eq!(read_all(&reopened, 0).await.len(), 2);
    }
}

#[tokio::test]
async fn after_a_crash_recovery_releases_the_reserved_zeros_and_keeps_every_batch() {
    const MIB: u64 = 1 << 20;
    for choice in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let io = start_io(choice, dir.path());
        let partition = open(dir.path(), &io, preallocating(MIB), ManualClock::new(0)).await;
        for i in 0..5u8 {
            // Values that end in zeros: the scan must not take them for the reservation.
            partition
                .append(vec![batch_of(&[record(&[i, 0, 0, 0], 1)])], Acks::All)
                .await
                .unwrap();
        }
        let data = partition.segments()[0].durable_size;
        drop(partition);
        assert_eq!(
            log_file_len(dir.path(), 0),
            MIB,
            "the crash leaves the reservation"
        );
        let reopened = open(dir.path(), &io, preallocating(MIB), ManualClock::new(0)).await;
        let report = reopened.recovery_report().clone();
        assert!(!report.clean);
        assert_eq!(
            report.truncated_bytes, 0,
            "{choice:?}: zeros are not a torn write"
        );
        assert_eq!(report.released_reserved_bytes, MIB - data);
        assert_eq!(report.damaged_ranges, 0);
        assert_eq!(log_file_len(dir.path(), 0), data);
        let values: Vec<_> = read_all(&reopened, 0)
            .await
            .into_iter()
            .map(|r| r.2)
            .collect();
        let expected: Vec<_> = (0..5u8)
            .map(|i| Some(Bytes::from(vec![i, 0, 0, 0])))
            .collect();
        assert_eq!(values, expected);
        let acks = reopened
            .append(vec![batch_of(&[record(b"after", 1)])], Acks::All)
            .await
            .unwrap();
        assert_eq!(acks[0].base_offset, 5);
    }
}

#[tokio::test]
async fn zeros_where_a_clean_stop_recorded_batches_stay_quarantined() {
    const MIB: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let partition = open(dir.path(), &io, preallocating(MIB), ManualClock::new(0)).await;
    let mut ends = Vec::new();
    for i in 0..3u8 {
        partition
            .append(vec![batch_of(&[record(&[i + 1; 40], 1)])], Acks::All)
            .await
            .unwrap();
        ends.push(partition.segments()[0].durable_size);
    }
    partition.close().await.unwrap();
    drop(partition);
    // The disk zeroes the last acknowledged batch after a clean stop: that is damage, not a
    // reservation, because the stop recorded offset 3 as the log end.
    let path = dir.path().join(segment_file_name(0, LOG_SUFFIX));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[ends[1] as usize..].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    let reopened = open(dir.path(), &io, preallocating(MIB), ManualClock::new(0)).await;
    let report = reopened.recovery_report().clone();
    assert_eq!(report.released_reserved_bytes, 0, "{report:?}");
    assert_eq!(report.damaged_ranges, 1, "{report:?}");
    assert_eq!(reopened.offsets().log_end_offset, 3);
}

#[tokio::test]
async fn a_failed_reservation_only_costs_speed() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let faults = Arc::new(FaultPlan::new());
    let faulty = io.with_faults(Arc::clone(&faults));
    faults.fail_allocations(libc::ENOSPC, 1);
    let partition = open(
        dir.path(),
        &faulty,
        preallocating(1 << 20),
        ManualClock::new(0),
    )
    .await;
    for i in 0..3u8 {
        partition
            .append(vec![batch_of(&[record(&[i; 10], 1)])], Acks::All)
            .await
            .unwrap();
    }
    assert_eq!(faults.injected(), 1);
    let data = partition.segments()[0].durable_size;
    assert_eq!(
        log_file_len(dir.path(), 0),
        data,
        "no retry in this segment: the writes grew the file"
    );
    partition.close().await.unwrap();
    assert_eq!(read_all(&partition, 0).await.len(), 3);
}

#[tokio::test]
async fn without_a_step_the_file_is_exactly_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let partition = open(dir.path(), &io, preallocating(0), ManualClock::new(0)).await;
    partition
        .append(vec![batch_of(&[record(b"x", 1)])], Acks::All)
        .await
        .unwrap();
    assert_eq!(
        log_file_len(dir.path(), 0),
        partition.segments()[0].durable_size
    );
    assert_eq!(io.stats().ops(IoOp::Allocate), 0);
}

#[tokio::test]
async fn catch_up_reads_behind_the_cache_window_keep_the_kernel_reading_ahead() {
    const MIB: u64 = 1 << 20;
    for (window, expect_advice) in [(MIB, true), (0, false)] {
        let dir = tempfile::tempdir().unwrap();
        let io = start_io(IoBackendChoice::Sync, dir.path());
        let config = LogConfig {
            page_cache_window_bytes: window,
            ..LogConfig::default()
        };
        let partition = open(dir.path(), &io, config, ManualClock::new(0)).await;
        for i in 0..24u8 {
            let records: Vec<_> = (0..8).map(|_| record(&[i; 16 << 10], 1)).collect();
            partition
                .append(vec![batch_of(&records)], Acks::All)
                .await
                .unwrap();
        }
        let advised = || io.stats().ops(IoOp::ReadAhead);
        // The newest bytes are the tail a follower reads: never advised.
        let tail = partition.offsets().high_watermark - 8;
        partition.read(tail, 1 << 16).await.unwrap();
        assert_eq!(advised(), 0, "window {window}: a tail read");
        // A replay from the start, far behind the window.
        let mut offset = 0;
        while offset < 64 {
            let slice = partition.read(offset, 1 << 16).await.unwrap();
            offset = slice.next_offset;
        }
        if expect_advice {
            assert_eq!(advised(), 1, "one request covers a short replay");
        } else {
            assert_eq!(advised(), 0, "without a window everything is cached");
        }
        // What a replay returns does not depend on the advice.
        let values: Vec<_> = read_all(&partition, 0).await;
        assert_eq!(values.len(), 24 * 8);
    }
}

#[tokio::test]
async fn concurrent_durable_appends_share_fdatasyncs_and_a_lone_producer_gets_one_each() {
    let dir = tempfile::tempdir().unwrap();
    let io = start_io(IoBackendChoice::Sync, dir.path());
    let partition =
        Arc::new(open(dir.path(), &io, LogConfig::default(), ManualClock::new(0)).await);
    let opened = io.stats().ops(IoOp::SyncData);
    let syncs = || io.stats().ops(IoOp::SyncData) - opened;
    for i in 0..5u8 {
        partition
            .append(vec![batch_of(&[record(&[i], 1)])], Acks::All)
            .await
            .unwrap();
    }
    assert_eq!(syncs(), 5, "one round, one fdatasync per lone request");
    let tasks: Vec<_> = (0..64u8)
        .map(|i| {
            let partition = Arc::clone(&partition);
            tokio::spawn(async move {
                partition
                    .append(vec![batch_of(&[record(&[i; 8], 1)])], Acks::All)
                    .await
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let shared = syncs() - 5;
    assert!(shared <= 8, "64 waiting appends took {shared} fdatasyncs");
    assert_eq!(partition.offsets().high_watermark, 69);
}

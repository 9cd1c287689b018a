//! Engine tests of streamed appends (`log::stream`) where faults decide the path: a streamed
//! write that fails falls back to an ordinary append, and a failed commit fdatasync poisons the
//! partition as any failed fdatasync does. The HTTP path is tested black-box in
//! `tests/it/streamed_appends.rs`.

use std::sync::Arc;

use bytes::Bytes;

use super::batch::{BatchOptions, NewRecord, RecordBatch, encode_batch};
use super::config::LogConfig;
use super::partition::{Acks, AppendError, Partition};
use super::stream::StreamLease;
use crate::clock::ManualClock;
use crate::io::{FaultPlan, Io, IoBackendChoice};

/// A 300-record batch of 1 KiB values: well above one streamed write step.
fn large_batch() -> RecordBatch {
    let records: Vec<NewRecord> = (0..300)
        .map(|i| NewRecord {
            timestamp: 1_000 + i,
            key: None,
            value: Some(Bytes::from(vec![i as u8; 1024])),
            headers: Vec::new(),
        })
        .collect();
    let bytes = encode_batch(&BatchOptions::default(), &records).expect("encode");
    RecordBatch::decode_exact(bytes).expect("decode")
}

async fn faulty_partition(dir: &std::path::Path) -> (Partition, Arc<FaultPlan>) {
    let (partition, faults, _clock) = partition_with_clock(dir).await;
    (partition, faults)
}

async fn partition_with_clock(
    dir: &std::path::Path,
) -> (Partition, Arc<FaultPlan>, Arc<ManualClock>) {
    let (io, _) = Io::start(IoBackendChoice::Sync, dir).expect("io starts");
    let faults = Arc::new(FaultPlan::new());
    let faulty = io.with_faults(Arc::clone(&faults));
    let clock = ManualClock::new(0);
    let partition = Partition::open(dir, LogConfig::default(), faulty, clock.clone())
        .await
        .expect("partition opens");
    (partition, faults, clock)
}

/// A lease, once the freshly started writer waits for commands (it says so through
/// `lendable`, which a request checks before asking).
async fn lease_when_idle(partition: &Partition, len: u64) -> StreamLease {
    for _ in 0..1000 {
        if let Some(lease) = partition.stream_lease(len).await {
            return lease;
        }
        tokio::task::yield_now().await;
    }
    panic!("an idle writer lends its tail");
}

#[tokio::test]
async fn a_failed_streamed_write_falls_back_to_an_ordinary_append() {
    let dir = tempfile::tempdir().unwrap();
    let (partition, faults) = faulty_partition(dir.path()).await;
    let batch = large_batch();
    let len = batch.len() as u64;
    let mut lease = lease_when_idle(&partition, len).await;
    faults.fail_writes(libc::EIO, 1);
    let frames = [batch.bytes().clone()];
    assert!(
        !lease.advance(&frames, len),
        "the failed write loses the lease"
    );
    let acks = partition
        .append_streamed(lease, vec![batch.clone()], Acks::All, None)
        .await
        .expect("appended the usual way");
    assert_eq!((acks[0].base_offset, acks[0].last_offset), (0, 299));
    let read = partition.read(0, u64::MAX).await.expect("read");
    assert_eq!(read.data.len() as u64, len, "stored once");
    assert_eq!(read.data[8..], batch.bytes()[8..]);
}

#[tokio::test]
async fn a_failed_commit_fdatasync_poisons_the_partition() {
    let dir = tempfile::tempdir().unwrap();
    let (partition, faults) = faulty_partition(dir.path()).await;
    let batch = large_batch();
    let len = batch.len() as u64;
    let mut lease = lease_when_idle(&partition, len).await;
    assert!(lease.advance(&[batch.bytes().clone()], len));
    faults.fail_syncs(libc::EIO, 1);
    let result = partition
        .append_streamed(lease, vec![batch.clone()], Acks::All, None)
        .await;
    assert!(
        matches!(result, Err(AppendError::Poisoned { .. })),
        "{result:?}"
    );
    assert_eq!(partition.offsets().high_watermark, 0, "nothing published");
    let again = partition.append(vec![batch], Acks::All).await;
    assert!(
        matches!(again, Err(AppendError::Poisoned { .. })),
        "{again:?}"
    );
}

#[tokio::test]
async fn a_lease_is_taken_back_when_another_append_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let (partition, _faults) = faulty_partition(dir.path()).await;
    let batch = large_batch();
    let len = batch.len() as u64;
    let mut lease = lease_when_idle(&partition, len).await;
    let half = batch.bytes().slice(..(len as usize) - 1000);
    assert!(lease.advance(std::slice::from_ref(&half), half.len() as u64));
    let small = large_batch();
    let first = partition
        .append(vec![small], Acks::All)
        .await
        .expect("the other append is not held up");
    assert_eq!(first[0].base_offset, 0);
    let frames = [half, batch.bytes().slice((len as usize) - 1000..)];
    assert!(!lease.advance(&frames, len), "the lease was revoked");
    let acks = partition
        .append_streamed(lease, vec![batch], Acks::All, None)
        .await
        .expect("appended the usual way");
    assert_eq!(acks[0].base_offset, 300);
    assert_eq!(partition.offsets().high_watermark, 600);
}

#[tokio::test]
async fn one_stream_at_a_time_and_none_for_a_while_once_appenders_compete() {
    let dir = tempfile::tempdir().unwrap();
    let (partition, _faults, clock) = partition_with_clock(dir.path()).await;
    let partition = Arc::new(partition);
    let batch = large_batch();
    let len = batch.len() as u64;
    let mut lease = lease_when_idle(&partition, len).await;
    assert!(
        partition.stream_lease(len).await.is_none(),
        "a second stream is refused while the tail is lent"
    );
    // Another appender arrives while the tail is lent: it waits for the commit, briefly.
    let other = {
        let partition = Arc::clone(&partition);
        let batch = batch.clone();
        tokio::spawn(async move { partition.append(vec![batch], Acks::All).await })
    };
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(lease.advance(&[batch.bytes().clone()], len));
    let acks = partition
        .append_streamed(lease, vec![batch.clone()], Acks::All, None)
        .await
        .expect("the stream lands");
    let other = other.await.unwrap().expect("the other append lands");
    // Normally the stream keeps its place; a stall longer than the writer's patience revokes
    // it and the other append goes first. Either way both land, once each.
    let mut bases = [acks[0].base_offset, other[0].base_offset];
    bases.sort_unstable();
    assert_eq!(bases, [0, 300]);
    for _ in 0..100 {
        tokio::task::yield_now().await;
        assert!(
            partition.stream_lease(len).await.is_none(),
            "appenders competed: no tail for a while"
        );
    }
    clock.advance(100);
    lease_when_idle(&partition, len).await;
}

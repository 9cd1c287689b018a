//! Compaction benchmarks (plain harness: they report percentiles and rates, which criterion does
//! not), each next to a baseline measured in the same run:
//! - throughput: compacting a 64 MiB log of 1 KiB-ish records over 8 192 keys, against a plain
//!   copy (read + write + fdatasync) of the same segment files;
//! - produce latency: p50/p99 of fsync'd 1 KiB appends to one partition while another
//!   partition on the same disk is compacted in a loop, against the same appends without it, and
//!   against the same appends while the same bytes are plain-copied (what any writer costs).
//!
//! Run: `cargo bench -p strata-server --bench compaction`. `STRATA_BENCH_IO` picks the backend.
// Benchmarks measure wall-clock time.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;

use strata_server::clock::SystemClock;
use strata_server::io::{Io, IoBackendChoice};
use strata_server::log::batch::{BatchOptions, NewRecord, RecordBatch, encode_batch};
use strata_server::log::compaction::CompactionPolicy;
use strata_server::log::compaction::throttle::Throttle;
use strata_server::log::{Acks, LogConfig, Partition};

const LOG_BYTES: usize = 64 << 20;
const KEYS: usize = 8192;
const VALUE_BYTES: usize = 1000;
const RECORDS_PER_BATCH: usize = 16;
const ROUNDS: usize = 3;

fn io_choice() -> IoBackendChoice {
    std::env::var("STRATA_BENCH_IO")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(IoBackendChoice::Auto)
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 8 << 20,
        ..LogConfig::default()
    }
}

fn policy() -> CompactionPolicy {
    CompactionPolicy {
        delete_retention_ms: 0,
        min_compaction_lag_ms: 0,
        max_compaction_lag_ms: i64::MAX,
        min_cleanable_dirty_ratio: 0.0,
        max_map_keys: strata_server::log::compaction::DEFAULT_MAX_MAP_KEYS,
    }
}

async fn open(dir: &Path) -> Partition {
    std::fs::create_dir_all(dir).expect("mkdir");
    let (io, _) = Io::start(io_choice(), dir).expect("io");
    Partition::open(dir, config(), io, Arc::new(SystemClock))
        .await
        .expect("open")
}

fn batch(first: usize, value_bytes: usize) -> RecordBatch {
    let records: Vec<NewRecord> = (first..first + RECORDS_PER_BATCH)
        .map(|i| NewRecord {
            timestamp: 1_700_000_000_000,
            key: Some(Bytes::from(format!("key-{:05}", (i * 7919) % KEYS))),
            value: Some(Bytes::from(vec![b'v'; value_bytes])),
            headers: Vec::new(),
        })
        .collect();
    RecordBatch::decode_exact(encode_batch(&BatchOptions::default(), &records).expect("encode"))
        .expect("decode")
}

/// Writes the template log once: `LOG_BYTES` of keyed records in closed segments.
async fn write_template(dir: &Path) {
    let partition = open(dir).await;
    let mut written = 0;
    let mut next = 0;
    while written < LOG_BYTES {
        let batches: Vec<RecordBatch> = (0..64)
            .map(|i| batch(next + i * RECORDS_PER_BATCH, VALUE_BYTES))
            .collect();
        written += batches.iter().map(RecordBatch::len).sum::<usize>();
        next += 64 * RECORDS_PER_BATCH;
        partition
            .append(batches, Acks::Leader)
            .await
            .expect("append");
    }
    partition.roll().await.expect("roll");
    partition.close().await.expect("close");
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files
}

/// A fresh copy of the template, with the page cache dropped as far as we can (not needed
/// for fairness: both sides start from the same state).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for file in segment_files(from) {
        let name = file.file_name().expect("name");
        std::fs::copy(&file, to.join(name)).expect("copy");
    }
}

/// The baseline: read every `.log` file and write it to a new file with one fdatasync, the
/// least a rewrite of the same bytes has to do.
fn plain_copy(from: &Path, to: &Path) -> u64 {
    std::fs::create_dir_all(to).expect("mkdir");
    let mut bytes = 0;
    for file in segment_files(from) {
        if file.extension().is_some_and(|e| e == "log") {
            let data = std::fs::read(&file).expect("read");
            bytes += data.len() as u64;
            let out = to.join(file.file_name().expect("name"));
            std::fs::write(&out, &data).expect("write");
            std::fs::File::open(&out)
                .expect("open")
                .sync_data()
                .expect("sync");
        }
    }
    bytes
}

fn log_bytes(dir: &Path) -> u64 {
    segment_files(dir)
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "log"))
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum()
}

async fn throughput(template: &Path, scratch: &Path) {
    let input = log_bytes(template) as f64 / (1 << 20) as f64;
    println!("compaction throughput: {input:.1} MiB log, {KEYS} keys");
    for round in 0..ROUNDS {
        let work = scratch.join(format!("compact-{round}"));
        copy_dir(template, &work);
        let partition = open(&work).await;
        let started = Instant::now();
        let report = partition
            .compact(&policy(), 1_800_000_000_000, &Throttle::unlimited())
            .await
            .expect("compact");
        let compact_secs = started.elapsed().as_secs_f64();
        partition.close().await.expect("close");
        let started = Instant::now();
        plain_copy(template, &scratch.join(format!("copy-{round}")));
        let copy_secs = started.elapsed().as_secs_f64();
        println!(
            "  round {round}: compaction {:.0} MiB/s ({} records removed), plain copy {:.0} MiB/s, ratio {:.0} %",
            input / compact_secs,
            report.records_removed,
            input / copy_secs,
            100.0 * copy_secs / compact_secs
        );
        let _ = std::fs::remove_dir_all(&work);
        let _ = std::fs::remove_dir_all(scratch.join(format!("copy-{round}")));
    }
}

/// Appends one 1 KiB batch at a time until `done` is set (or `duration` passed, when given),
/// recording each acknowledgement's latency.
async fn append_latencies(
    partition: &Partition,
    duration: Option<Duration>,
    done: &AtomicBool,
) -> Histogram<u64> {
    let mut histogram = Histogram::<u64>::new(3).expect("histogram");
    let started = Instant::now();
    let mut next = 0;
    while !done.load(Ordering::SeqCst) && duration.is_none_or(|d| started.elapsed() < d) {
        let one = batch(next, 1000 / RECORDS_PER_BATCH);
        next += RECORDS_PER_BATCH;
        let began = Instant::now();
        partition
            .append(vec![one], Acks::All)
            .await
            .expect("append");
        let micros = u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX);
        histogram.record(micros.max(1)).expect("record");
    }
    histogram
}

/// Copies of the template for one compacting window (made before it, so the window sees
/// compaction I/O only, not the benchmark's own copying).
const COPIES_PER_WINDOW: usize = 6;

async fn compacting_window(
    producer: &Partition,
    template: &Path,
    scratch: &Path,
    throttle: Arc<Throttle>,
) -> (Histogram<u64>, Duration) {
    let copies: Vec<PathBuf> = (0..COPIES_PER_WINDOW)
        .map(|i| {
            let work = scratch.join(format!("loop-{i}"));
            copy_dir(template, &work);
            work
        })
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    let cleaner = {
        let done = Arc::clone(&done);
        let copies = copies.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            for work in &copies {
                let partition = open(work).await;
                partition
                    .compact(&policy(), 1_800_000_000_000, &throttle)
                    .await
                    .expect("compact");
                partition.close().await.expect("close");
            }
            done.store(true, Ordering::SeqCst);
            started.elapsed()
        })
    };
    let busy = append_latencies(producer, None, &done).await;
    let took = cleaner.await.expect("cleaner");
    for work in copies {
        let _ = std::fs::remove_dir_all(work);
    }
    (busy, took)
}

/// The baseline window: the same appends while a blocking thread plain-copies the template
/// `COPIES_PER_WINDOW` times (read, write, fdatasync per file): what any writer of that many
/// bytes costs the appends on this disk and these two cores.
async fn copying_window(
    producer: &Partition,
    template: &Path,
    scratch: &Path,
) -> (Histogram<u64>, Duration) {
    let done = Arc::new(AtomicBool::new(false));
    let copier = {
        let done = Arc::clone(&done);
        let (template, scratch) = (template.to_path_buf(), scratch.to_path_buf());
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            for i in 0..COPIES_PER_WINDOW {
                let out = scratch.join(format!("plain-{i}"));
                plain_copy(&template, &out);
                let _ = std::fs::remove_dir_all(out);
            }
            done.store(true, Ordering::SeqCst);
            started.elapsed()
        })
    };
    let busy = append_latencies(producer, None, &done).await;
    (busy, copier.await.expect("copier"))
}

async fn produce_latency(template: &Path, scratch: &Path) {
    println!(
        "produce latency (1 KiB batches, acks=all) while {COPIES_PER_WINDOW} x 64 MiB are compacted, or plain-copied, against quiet appends just before:"
    );
    let producer = open(&scratch.join("producer")).await;
    let never = AtomicBool::new(false);
    for round in 0..ROUNDS {
        for (label, limit) in [
            ("plain copy, no cleaner (baseline)", None),
            ("cleaner unlimited", Some(0u64)),
            ("cleaner 100 MiB/s", Some(100 << 20)),
        ] {
            let quiet = append_latencies(&producer, Some(Duration::from_secs(3)), &never).await;
            let (busy, took) = match limit {
                None => copying_window(&producer, template, scratch).await,
                Some(limit) => {
                    let throttle = Arc::new(Throttle::new(limit));
                    compacting_window(&producer, template, scratch, throttle).await
                }
            };
            println!(
                "  round {round}, {label}: quiet p50 {} us p99 {} us ({} appends) | busy p50 {} us p99 {} us ({} appends in {:.1} s) | p99 ratio {:.2}x",
                quiet.value_at_quantile(0.5),
                quiet.value_at_quantile(0.99),
                quiet.len(),
                busy.value_at_quantile(0.5),
                busy.value_at_quantile(0.99),
                busy.len(),
                took.as_secs_f64(),
                busy.value_at_quantile(0.99) as f64 / quiet.value_at_quantile(0.99) as f64
            );
        }
    }
    producer.close().await.expect("close");
}

fn main() {
    // `cargo test --benches` runs bench targets with `--test`: nothing to measure then.
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let root = tempfile::Builder::new()
        .prefix("strata-compaction-bench")
        .tempdir_in(
            std::env::var("STRATA_BENCH_DIR")
                .unwrap_or_else(|_| env!("CARGO_TARGET_TMPDIR").into()),
        )
        .expect("tempdir");
    let template = root.path().join("template");
    runtime.block_on(async {
        write_template(&template).await;
        throughput(&template, root.path()).await;
        produce_latency(&template, root.path()).await;
    });
}

//! Storage-engine benchmarks, each next to a baseline measured in the same run:
//! - `append/...`: fsync'd appends of 100 B and 1 KiB records in batches of 1, 100 and 1000 with
//!   1 and 8 concurrent appenders, against plain `write` + `fdatasync` of the same batch bytes
//!   (one fsync per batch, the cost group commit is meant to avoid);
//! - `read/...`: a sequential read of a 1 GiB partition, where the consumer copies every slice
//!   into its own buffer, against a plain `read` loop over the same segment files.
//!
//! `STRATA_BENCH_IO=sync|io_uring|auto` picks the engine's I/O backend (default auto).
// Benchmarks measure wall-clock time.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

use strata_server::clock::SystemClock;
use strata_server::io::{Io, IoBackendChoice};
use strata_server::log::batch::{BatchOptions, NewRecord, RecordBatch, encode_batch};
use strata_server::log::{Acks, LogConfig, Partition};

fn io_choice() -> IoBackendChoice {
    std::env::var("STRATA_BENCH_IO")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(IoBackendChoice::Auto)
}

fn make_batch(record_bytes: usize, records: usize) -> RecordBatch {
    let records: Vec<NewRecord> = (0..records)
        .map(|i| NewRecord {
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(vec![b'x'; record_bytes])),
            headers: Vec::new(),
        })
        .collect();
    let bytes = encode_batch(&BatchOptions::default(), &records).expect("encode");
    RecordBatch::decode_exact(bytes).expect("decode")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("rt")
}

async fn open_partition(dir: &Path) -> Partition {
    let (io, report) = Io::start(io_choice(), dir).expect("io");
    eprintln!("engine io backend: {} ({})", report.backend, report.reason);
    let config = LogConfig {
        segment_bytes: 256 << 20,
        ..LogConfig::default()
    };
    Partition::open(&dir.join("p"), config, io, Arc::new(SystemClock))
        .await
        .expect("open")
}

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let rt = runtime();
    for record_bytes in [100usize, 1024] {
        for records in [1usize, 100, 1000] {
            let batch = make_batch(record_bytes, records);
            group.throughput(Throughput::Bytes(batch.len() as u64));
            let label = format!("{record_bytes}B_x{records}");
            group.bench_function(BenchmarkId::new("baseline_write_fdatasync", &label), |b| {
                let dir = tempfile::tempdir().expect("dir");
                let mut file =
                    std::fs::File::create(dir.path().join("baseline.log")).expect("file");
                b.iter(|| {
                    file.write_all(batch.bytes()).expect("write");
                    file.sync_data().expect("fdatasync");
                });
            });
            for appenders in [1usize, 8] {
                let name = format!("engine_{appenders}_appenders");
                group.bench_function(BenchmarkId::new(name, &label), |b| {
                    let dir = tempfile::tempdir().expect("dir");
                    let partition = Arc::new(rt.block_on(open_partition(dir.path())));
                    b.iter_custom(|iters| {
                        rt.block_on(run_appenders(&partition, &batch, appenders, iters))
                    });
                    rt.block_on(partition.close()).expect("close");
                });
            }
        }
    }
    group.finish();
}

async fn run_appenders(
    partition: &Arc<Partition>,
    batch: &RecordBatch,
    appenders: usize,
    iters: u64,
) -> Duration {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..appenders as u64 {
        let partition = Arc::clone(partition);
        let batch = batch.clone();
        let share = iters / appenders as u64 + u64::from(worker < iters % appenders as u64);
        tasks.push(tokio::spawn(async move {
            for _ in 0..share {
                partition
                    .append(vec![batch.clone()], Acks::All)
                    .await
                    .expect("append");
            }
        }));
    }
    for task in tasks {
        task.await.expect("appender");
    }
    start.elapsed()
}

const READ_TOTAL: u64 = 1 << 30;

fn read(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("dir");
    let partition = rt.block_on(async {
        let partition = open_partition(dir.path()).await;
        let batch = make_batch(1024, 1000);
        let mut written = 0u64;
        while written < READ_TOTAL {
            partition
                .append(vec![batch.clone()], Acks::All)
                .await
                .expect("append");
            written += batch.len() as u64;
        }
        partition
    });
    let total = partition.offsets().high_watermark;
    let mut group = c.benchmark_group("read");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes(READ_TOTAL));
    let mut buffer = vec![0u8; 2 << 20];
    group.bench_function("baseline_sequential_read_1GiB", |b| {
        b.iter(|| {
            let mut logs: Vec<_> = std::fs::read_dir(dir.path().join("p"))
                .expect("dir")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.extension().is_some_and(|e| e == "log"))
                .collect();
            logs.sort();
            let mut read = 0u64;
            for log in logs {
                let mut file = std::fs::File::open(log).expect("open");
                loop {
                    let n = file.read(&mut buffer[..1 << 20]).expect("read");
                    if n == 0 {
                        break;
                    }
                    read += n as u64;
                }
            }
            read
        });
    });
    group.bench_function("engine_sequential_read_1GiB", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut offset = 0;
                let mut read = 0u64;
                while offset < total {
                    let slice = partition.read(offset, 1 << 20).await.expect("read");
                    // The consumer's copy, the work a plain read() does inside the kernel.
                    buffer[..slice.data.len()].copy_from_slice(&slice.data);
                    read += slice.data.len() as u64;
                    offset = slice.next_offset;
                }
                read
            })
        });
    });
    group.finish();
    let stats = rt.block_on(async { partition.close().await });
    stats.expect("close");
}

criterion_group!(benches, append, read);
criterion_main!(benches);

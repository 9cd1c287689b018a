//! Tiering benchmarks against the real S3 test server (SeaweedFS, started or reused by
//! `scripts/start-s3.sh` through `testing::s3_test_server`), plain harness so they can report
//! rates and percentiles. Each case runs next to a baseline measured in the same run, because the
//! machine is shared and noisy: the ratios are the result, not the absolute numbers.
//! - upload: a 64 MiB segment file through `upload_file` (SHA-256 and chunk digests in the pass
//!   that sends it, multipart above 16 MiB, retries), alone and as Strata uploads a log (then the
//!   `.chunks` object put), against one plain `put` of the same bytes already in memory;
//! - cold sequential read: the object front to back in 256 KiB reads (a consumer fetching)
//!   through a fresh `ChunkCache`, with digests as Strata reads and without, against 1 MiB ranged
//!   GETs issued one after another (design goal: the cache path at >= 80 % of it) and against
//!   the same GETs with as many in flight as the cache's read-ahead keeps (the stricter baseline);
//! - first-byte latency: on a fresh cache, fetching the `.chunks` object (as Strata does before
//!   its first read of a segment) then a 4 KiB read at a random offset, against a whole GET of
//!   the `.chunks` object plus one 1 MiB ranged GET. Design goal: p50 at <= 1.5x the baseline;
//! - re-read: a second sequential pass over the object with a cache that holds it all, its
//!   counters and its rate against the first (cold) pass.
//!
//! Run: `cargo bench -p strata-tiering --bench tiering` (a few minutes at most).
//! `STRATA_BENCH_DIR` picks where the 64 MiB file is written (default: cargo's target tmpdir).
// Benchmarks measure wall-clock time.
#![allow(clippy::disallowed_methods)]

use std::ops::Range;
use std::path::Path as LocalPath;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hdrhistogram::Histogram;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use futures::StreamExt;
use strata_tiering::chunk_cache::{
    CacheStats, ChunkCache, ChunkCacheConfig, DEFAULT_READ_AHEAD_CHUNKS, RemoteObject,
};
use strata_tiering::digest::{ChunkDigests, DEFAULT_CHUNK_BYTES};
use strata_tiering::testing::{s3_test_server, unique_prefix};
use strata_tiering::upload::{UploadOptions, UploadedObject, upload_bytes, upload_file};

const SEGMENT_BYTES: u64 = 64 << 20;
/// What a consumer fetch asks the cache for at a time.
const READ_BYTES: u64 = 256 << 10;
/// What the baseline GETs at a time: one chunk.
const BASELINE_GET_BYTES: u64 = DEFAULT_CHUNK_BYTES;
/// The small read of the first-byte case.
const FIRST_READ_BYTES: u64 = 4 << 10;
const LATENCY_SAMPLES: usize = 50;
const ROUNDS: usize = 3;
const MIB: f64 = (1 << 20) as f64;

/// Incompressible, reproducible bytes (a fixed seed).
fn segment_bytes() -> Bytes {
    let mut data = vec![0_u8; to_usize(SEGMENT_BYTES)];
    fastrand::Rng::with_seed(0x5eed).fill(&mut data);
    Bytes::from(data)
}

fn to_usize(value: u64) -> usize {
    usize::try_from(value).expect("offset fits in memory")
}

fn rate(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / MIB / secs
}

/// What Strata does for a segment log (`server/src/tiering/sync.rs`): the upload, which digests
/// the chunks in the pass that sends them, then the digests as their own object.
async fn upload_as_strata(
    store: &dyn ObjectStore,
    local: &LocalPath,
    key: &Path,
    chunks_key: &Path,
) -> (UploadedObject, UploadedObject) {
    let options = UploadOptions::default();
    let log = upload_file(store, local, key, &options)
        .await
        .expect("upload_file");
    let chunks = upload_bytes(store, chunks_key, log.chunk_digests.encode(), &options)
        .await
        .expect("upload the chunk digests");
    (log, chunks)
}

/// Keys the bench writes, relative to its unique prefix.
struct Keys {
    put: Path,
    upload: Path,
    log: Path,
    chunks: Path,
}

async fn upload(store: &dyn ObjectStore, local: &LocalPath, data: &Bytes, keys: &Keys) {
    println!(
        "upload of a {} MiB file, MiB/s ({} rounds; ratio = rate / plain put rate):",
        SEGMENT_BYTES >> 20,
        ROUNDS
    );
    println!(
        "  {:<6} {:>10} {:>12} {:>7} {:>22} {:>7}",
        "round", "plain put", "upload_file", "ratio", "+ .chunks put", "ratio"
    );
    let mut best = [0.0_f64; 3];
    for round in 0..ROUNDS {
        let started = Instant::now();
        store
            .put(&keys.put, PutPayload::from(data.clone()))
            .await
            .expect("plain put");
        let put = rate(SEGMENT_BYTES, started.elapsed().as_secs_f64());

        let started = Instant::now();
        let uploaded = upload_file(store, local, &keys.upload, &UploadOptions::default())
            .await
            .expect("upload_file");
        let upload = rate(SEGMENT_BYTES, started.elapsed().as_secs_f64());
        assert_eq!(uploaded.size, SEGMENT_BYTES);

        let started = Instant::now();
        upload_as_strata(store, local, &keys.log, &keys.chunks).await;
        let strata = rate(SEGMENT_BYTES, started.elapsed().as_secs_f64());
        println!(
            "  {round:<6} {put:>10.0} {upload:>12.0} {:>6.0}% {strata:>22.0} {:>6.0}%",
            100.0 * upload / put,
            100.0 * strata / put
        );
        for (best, rate) in best.iter_mut().zip([put, upload, strata]) {
            *best = best.max(rate);
        }
    }
    // SeaweedFS stalls ~1 s now and then under any write, plain or multipart, so one round can
    // be off by 3x either way: the best rounds compare the paths without that stall.
    let [put, upload, strata] = best;
    println!(
        "  {:<6} {put:>10.0} {upload:>12.0} {:>6.0}% {strata:>22.0} {:>6.0}%",
        "best",
        100.0 * upload / put,
        100.0 * strata / put
    );
}

/// Reads `object` front to back in `READ_BYTES` reads through `cache`, checking every byte.
async fn read_through_cache(cache: &ChunkCache, object: &RemoteObject, data: &Bytes) -> f64 {
    let started = Instant::now();
    let mut at = 0;
    while at < object.len {
        let end = (at + READ_BYTES).min(object.len);
        let bytes = cache.read(object, at..end).await.expect("cache read");
        assert!(bytes == data[to_usize(at)..to_usize(end)], "wrong bytes");
        at = end;
    }
    rate(object.len, started.elapsed().as_secs_f64())
}

/// The baselines: `BASELINE_GET_BYTES` ranged GETs in order, `in_flight` at a time (1: one after
/// another; the cache's own read-ahead keeps `1 + DEFAULT_READ_AHEAD_CHUNKS` in flight), checking
/// every byte.
async fn read_with_gets(
    store: &dyn ObjectStore,
    key: &Path,
    data: &Bytes,
    in_flight: usize,
) -> f64 {
    let len = data.len() as u64;
    let started = Instant::now();
    let ranges = (0..len)
        .step_by(to_usize(BASELINE_GET_BYTES))
        .map(|at| at..(at + BASELINE_GET_BYTES).min(len));
    let mut gets = futures::stream::iter(ranges.map(|range| async move {
        let bytes = store
            .get_range(key, range.clone())
            .await
            .expect("ranged GET");
        (range, bytes)
    }))
    .buffered(in_flight);
    while let Some((range, bytes)) = gets.next().await {
        assert!(
            bytes == data[to_usize(range.start)..to_usize(range.end)],
            "wrong bytes"
        );
    }
    rate(len, started.elapsed().as_secs_f64())
}

fn fresh_cache(store: &Arc<dyn ObjectStore>) -> ChunkCache {
    // Twice the object: the re-read case must find every chunk still cached.
    let config = ChunkCacheConfig {
        capacity_bytes: (2 * SEGMENT_BYTES).max(ChunkCacheConfig::default().capacity_bytes),
        ..ChunkCacheConfig::default()
    };
    ChunkCache::new(Arc::clone(store), config).expect("cache config")
}

async fn cold_read(store: &Arc<dyn ObjectStore>, verified: &RemoteObject, data: &Bytes) {
    let unverified = RemoteObject {
        digests: None,
        ..verified.clone()
    };
    let pipelined = to_usize(1 + DEFAULT_READ_AHEAD_CHUNKS);
    println!(
        "cold sequential read of {} MiB, MiB/s ({} KiB cache reads, fresh cache each; baselines \
         {} MiB ranged GETs one after another, and {pipelined} in flight as the cache's read-ahead \
         keeps; goal >= 80 % of the first):",
        SEGMENT_BYTES >> 20,
        READ_BYTES >> 10,
        BASELINE_GET_BYTES >> 20
    );
    println!(
        "  {:<6} {:>9} {:>11} {:>15} {:>7} {:>7} {:>17} {:>7}",
        "round",
        "GETs 1x1",
        "GETs 1x3",
        "cache, digests",
        "vs 1x1",
        "vs 1x3",
        "cache, no digests",
        "vs 1x3"
    );
    for round in 0..ROUNDS {
        let serial = read_with_gets(store.as_ref(), &verified.key, data, 1).await;
        let parallel = read_with_gets(store.as_ref(), &verified.key, data, pipelined).await;
        let with_digests = read_through_cache(&fresh_cache(store), verified, data).await;
        let without = read_through_cache(&fresh_cache(store), &unverified, data).await;
        println!(
            "  {round:<6} {serial:>9.0} {parallel:>11.0} {with_digests:>15.0} {:>6.0}% {:>6.0}% {without:>17.0} {:>6.0}%",
            100.0 * with_digests / serial,
            100.0 * with_digests / parallel,
            100.0 * without / parallel
        );
    }
}

fn micros(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// A 4 KiB range at a random offset, within one chunk (so one GET on both sides).
fn random_range(random: &mut fastrand::Rng) -> Range<u64> {
    let chunk = random.u64(..SEGMENT_BYTES / DEFAULT_CHUNK_BYTES);
    let within = random.u64(..DEFAULT_CHUNK_BYTES - FIRST_READ_BYTES);
    let start = chunk * DEFAULT_CHUNK_BYTES + within;
    start..start + FIRST_READ_BYTES
}

/// Strata's first read of a segment on a cold cache: the `.chunks` object (checked against its
/// SHA-256), decoded, then the read (one chunk GET, verified).
async fn first_read_through_cache(
    store: &Arc<dyn ObjectStore>,
    log: &UploadedObject,
    chunks: &UploadedObject,
    range: Range<u64>,
    data: &Bytes,
) -> u64 {
    let cache = fresh_cache(store);
    let started = Instant::now();
    let encoded = cache
        .get_whole(&chunks.key, Some(&chunks.sha256))
        .await
        .expect("get .chunks");
    let digests = ChunkDigests::decode(&encoded).expect("decode .chunks");
    let object = RemoteObject {
        key: log.key.clone(),
        len: log.size,
        digests: Some(Arc::new(digests)),
    };
    let bytes = cache
        .read(&object, range.clone())
        .await
        .expect("cache read");
    let took = micros(started);
    assert!(bytes == data[to_usize(range.start)..to_usize(range.end)]);
    took
}

/// The baseline: the same two requests, plain: a whole GET of `.chunks`, a 1 MiB ranged GET.
async fn first_read_with_gets(
    store: &dyn ObjectStore,
    log: &UploadedObject,
    chunks: &UploadedObject,
    range: Range<u64>,
    data: &Bytes,
) -> u64 {
    let chunk_start = range.start / DEFAULT_CHUNK_BYTES * DEFAULT_CHUNK_BYTES;
    let chunk_end = (chunk_start + DEFAULT_CHUNK_BYTES).min(log.size);
    let started = Instant::now();
    let encoded = store
        .get(&chunks.key)
        .await
        .expect("get .chunks")
        .bytes()
        .await
        .expect("read .chunks");
    let bytes = store
        .get_range(&log.key, chunk_start..chunk_end)
        .await
        .expect("ranged GET");
    let took = micros(started);
    assert_eq!(encoded.len() as u64, chunks.size);
    let from = to_usize(range.start - chunk_start);
    assert!(
        bytes[from..from + to_usize(FIRST_READ_BYTES)]
            == data[to_usize(range.start)..to_usize(range.end)]
    );
    took
}

async fn first_byte(
    store: &Arc<dyn ObjectStore>,
    log: &UploadedObject,
    chunks: &UploadedObject,
    data: &Bytes,
) {
    println!(
        "first-byte latency, us ({LATENCY_SAMPLES} samples a round, {} KiB at a random offset on \
         a fresh cache incl. the .chunks fetch; baseline GET .chunks ({} B) + one {} MiB ranged \
         GET; goal p50 ratio <= 1.5x):",
        FIRST_READ_BYTES >> 10,
        chunks.size,
        BASELINE_GET_BYTES >> 20
    );
    println!(
        "  {:<6} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "round", "GETs p50", "GETs p99", "cache p50", "cache p99", "p50 ratio"
    );
    let mut random = fastrand::Rng::with_seed(0x0ff5e7);
    for round in 0..ROUNDS {
        let mut cache = Histogram::<u64>::new(3).expect("histogram");
        let mut baseline = Histogram::<u64>::new(3).expect("histogram");
        for sample in 0..LATENCY_SAMPLES {
            let range = random_range(&mut random);
            // Alternate which side goes first, so neither always finds the other's warm-up.
            let (a, b) = if sample % 2 == 0 {
                let a = first_read_through_cache(store, log, chunks, range.clone(), data).await;
                (
                    a,
                    first_read_with_gets(store.as_ref(), log, chunks, range, data).await,
                )
            } else {
                let b =
                    first_read_with_gets(store.as_ref(), log, chunks, range.clone(), data).await;
                (
                    first_read_through_cache(store, log, chunks, range, data).await,
                    b,
                )
            };
            cache.record(a).expect("record");
            baseline.record(b).expect("record");
        }
        let (b50, c50) = (
            baseline.value_at_quantile(0.5),
            cache.value_at_quantile(0.5),
        );
        println!(
            "  {round:<6} {b50:>9} {:>9} {c50:>9} {:>9} {:>9.2}x",
            baseline.value_at_quantile(0.99),
            cache.value_at_quantile(0.99),
            c50 as f64 / b50 as f64
        );
    }
}

fn delta(after: CacheStats, before: CacheStats) -> CacheStats {
    CacheStats {
        hits: after.hits - before.hits,
        misses: after.misses - before.misses,
        gets: after.gets - before.gets,
        bytes_fetched: after.bytes_fetched - before.bytes_fetched,
        read_ahead_gets: after.read_ahead_gets - before.read_ahead_gets,
        ..after
    }
}

async fn re_read(store: &Arc<dyn ObjectStore>, object: &RemoteObject, data: &Bytes) {
    println!(
        "re-read of {} MiB through one cache of {} MiB, {} KiB reads (pass 1 cold, pass 2 warm; \
         counters per pass):",
        SEGMENT_BYTES >> 20,
        (2 * SEGMENT_BYTES) >> 20,
        READ_BYTES >> 10
    );
    println!(
        "  {:<6} {:>12} {:>25} {:>12} {:>25} {:>9} {:>10}",
        "round",
        "pass 1 MiB/s",
        "pass 1 hits/misses/GETs",
        "pass 2 MiB/s",
        "pass 2 hits/misses/GETs",
        "ratio 2/1",
        "cached MiB"
    );
    for round in 0..ROUNDS {
        let cache = fresh_cache(store);
        let first = read_through_cache(&cache, object, data).await;
        let after_first = cache.stats();
        let second = read_through_cache(&cache, object, data).await;
        let after_second = cache.stats();
        let pass1 = after_first;
        let pass2 = delta(after_second, after_first);
        let counts = |s: CacheStats| format!("{}/{}/{}", s.hits, s.misses, s.gets);
        println!(
            "  {round:<6} {first:>12.0} {:>25} {second:>12.0} {:>25} {:>8.1}x {:>10}",
            format!("{} ({} ahead)", counts(pass1), pass1.read_ahead_gets),
            counts(pass2),
            second / first,
            after_second.bytes_cached >> 20
        );
        assert_eq!(
            pass2.gets, 0,
            "the second pass should be served from the cache"
        );
    }
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
        .prefix("strata-tiering-bench")
        .tempdir_in(
            std::env::var("STRATA_BENCH_DIR")
                .unwrap_or_else(|_| env!("CARGO_TARGET_TMPDIR").into()),
        )
        .expect("tempdir");
    let data = segment_bytes();
    let local = root.path().join("00000000000000000000.log");
    std::fs::write(&local, &data).expect("write the segment file");

    let server = s3_test_server();
    let prefix = unique_prefix("bench-tiering");
    let store = server.open(&server.bucket, &prefix).scoped();
    println!(
        "S3: SeaweedFS at {}, s3://{}/{prefix}",
        server.endpoint, server.bucket
    );
    let keys = Keys {
        put: Path::from("bench/put.log"),
        upload: Path::from("bench/upload.log"),
        log: Path::from("bench/segment.log"),
        chunks: Path::from("bench/segment.chunks"),
    };
    runtime.block_on(async {
        upload(store.as_ref(), &local, &data, &keys).await;
        // The object the reads use, uploaded (multipart) exactly as Strata uploads a log.
        let (log, chunks) = upload_as_strata(store.as_ref(), &local, &keys.log, &keys.chunks).await;
        let object = RemoteObject {
            key: log.key.clone(),
            len: log.size,
            digests: Some(Arc::new(log.chunk_digests.clone())),
        };
        cold_read(&store, &object, &data).await;
        first_byte(&store, &log, &chunks, &data).await;
        re_read(&store, &object, &data).await;
        for key in [&keys.put, &keys.upload, &keys.log, &keys.chunks] {
            if let Err(error) = store.delete(key).await {
                eprintln!("could not delete {key}: {error}");
            }
        }
    });
}

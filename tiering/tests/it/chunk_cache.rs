//! `strata_tiering::chunk_cache`: cold reads through aligned chunks. Most cases run against
//! `InMemory` behind a counting wrapper that records every GET (and can hold GETs back), so GET
//! counts are exact; one case reads a multipart-uploaded object from the real S3 test server.
//! Background work (read-ahead) is awaited with a bounded `eventually`, never a fixed sleep.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use strata_tiering::chunk_cache::{
    CacheStats, ChunkCache, ChunkCacheConfig, ChunkError, RemoteObject,
};
use strata_tiering::digest::{ChunkDigests, DigestError, sha256_hex};
use strata_tiering::faults::{FaultKind, FaultyObjectStore, Operation, is_injected};
use strata_tiering::testing::{s3_test_server, unique_prefix};
use strata_tiering::upload::{UploadOptions, upload_bytes, upload_file};
use tokio::sync::Semaphore;

const CHUNK: u64 = 1024;

/// GETs per (key, range), a whole GET having no range.
type GetCounts = HashMap<(String, Option<Range<u64>>), u64>;

/// Forwards to `inner`, recording every GET; while gated, GETs wait for `open`.
#[derive(Debug)]
struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    gets: Mutex<GetCounts>,
    gate: Option<Arc<Semaphore>>,
}

impl CountingStore {
    fn new(inner: Arc<dyn ObjectStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            gets: Mutex::default(),
            gate: None,
        })
    }

    fn gated(inner: Arc<dyn ObjectStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            gets: Mutex::default(),
            gate: Some(Arc::new(Semaphore::new(0))),
        })
    }

    fn open(&self) {
        if let Some(gate) = &self.gate {
            gate.add_permits(Semaphore::MAX_PERMITS / 2);
        }
    }

    fn ranged_gets(&self) -> u64 {
        self.gets
            .lock()
            .unwrap()
            .iter()
            .filter(|((_, r), _)| r.is_some())
            .map(|(_, n)| n)
            .sum()
    }

    fn gets_of_chunk(&self, key: &Path, index: u64, len: u64) -> u64 {
        let range = index * CHUNK..len.min((index + 1) * CHUNK);
        let gets = self.gets.lock().unwrap();
        gets.get(&(key.to_string(), Some(range)))
            .copied()
            .unwrap_or(0)
    }

    fn whole_gets(&self) -> u64 {
        self.gets
            .lock()
            .unwrap()
            .iter()
            .filter(|((_, r), _)| r.is_none())
            .map(|(_, n)| n)
            .sum()
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let range = match &options.range {
            Some(GetRange::Bounded(range)) => Some(range.clone()),
            Some(other) => panic!("unexpected range {other:?}"),
            None => None,
        };
        *self
            .gets
            .lock()
            .unwrap()
            .entry((location.to_string(), range))
            .or_default() += 1;
        if let Some(gate) = &self.gate {
            gate.acquire().await.unwrap().forget();
        }
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// Waits until `check` holds, failing the test after 10 s.
// A bounded wait for a background fetch.
#[allow(clippy::disallowed_methods)]
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting until {what}");
}

fn pattern(len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(131) ^ (i >> 7)) as u8)
        .collect()
}

fn config() -> ChunkCacheConfig {
    ChunkCacheConfig {
        chunk_bytes: CHUNK,
        capacity_bytes: 64 * CHUNK,
        read_ahead_chunks: 0,
        max_concurrent_gets: 4,
        whole_capacity_bytes: 16 * CHUNK,
    }
}

struct Fixture {
    memory: Arc<InMemory>,
    counting: Arc<CountingStore>,
    cache: ChunkCache,
    object: RemoteObject,
    data: Vec<u8>,
}

async fn fixture(len: u64, config: ChunkCacheConfig, gated: bool, digests: bool) -> Fixture {
    let memory = Arc::new(InMemory::new());
    let data = pattern(len);
    let key = Path::from("topic/0/00000000000000000000.log");
    memory.put(&key, data.clone().into()).await.unwrap();
    let inner = Arc::clone(&memory) as Arc<dyn ObjectStore>;
    let counting = if gated {
        CountingStore::gated(inner)
    } else {
        CountingStore::new(inner)
    };
    let cache = ChunkCache::new(Arc::clone(&counting) as Arc<dyn ObjectStore>, config).unwrap();
    let digests = digests.then(|| Arc::new(ChunkDigests::compute(&data, CHUNK)));
    let object = RemoteObject { key, len, digests };
    Fixture {
        memory,
        counting,
        cache,
        object,
        data,
    }
}

#[tokio::test]
async fn sequential_read_of_a_multi_chunk_object_returns_its_bytes() {
    let f = fixture(5 * CHUNK + 512, config(), false, true).await;

    let mut read = Vec::new();
    let mut position = 0;
    while position < f.object.len {
        let end = (position + 700).min(f.object.len);
        read.extend_from_slice(&f.cache.read(&f.object, position..end).await.unwrap());
        position = end;
    }

    assert_eq!(read, f.data);
    assert_eq!(f.counting.ranged_gets(), 6);
    for index in 0..6 {
        assert_eq!(
            f.counting.gets_of_chunk(&f.object.key, index, f.object.len),
            1,
            "chunk {index}"
        );
    }
    let stats = f.cache.stats();
    assert_eq!(stats.gets, 6);
    assert_eq!(stats.bytes_fetched, f.object.len);
    assert_eq!(stats.bytes_cached, f.object.len);
}

#[tokio::test]
async fn a_read_spanning_chunks_and_the_whole_object_equal_the_source() {
    let f = fixture(3 * CHUNK + 1, config(), false, false).await;

    let middle = f.cache.read(&f.object, 1000..2100).await.unwrap();
    let whole = f.cache.read(&f.object, 0..f.object.len).await.unwrap();

    assert_eq!(middle, f.data[1000..2100]);
    assert_eq!(whole, f.data);
    assert!(f.cache.read(&f.object, 7..7).await.unwrap().is_empty());
    assert_eq!(f.counting.ranged_gets(), 4);
}

#[tokio::test]
async fn reread_is_served_from_the_cache_without_gets() {
    let f = fixture(4 * CHUNK, config(), false, true).await;
    let first = f.cache.read(&f.object, 0..4 * CHUNK).await.unwrap();
    let gets = f.counting.ranged_gets();

    let again = f.cache.read(&f.object, 100..3 * CHUNK + 5).await.unwrap();

    assert_eq!(first, f.data);
    assert_eq!(again, f.data[100..3 * CHUNK as usize + 5]);
    assert_eq!(f.counting.ranged_gets(), gets);
    let stats = f.cache.stats();
    assert_eq!((stats.misses, stats.hits), (4, 4));
}

#[tokio::test]
async fn sixteen_concurrent_readers_of_one_chunk_share_one_get() {
    let f = fixture(4 * CHUNK, config(), true, true).await;
    let object = Arc::new(f.object.clone());

    let readers: Vec<_> = (0..16u64)
        .map(|i| {
            let cache = f.cache.clone();
            let object = Arc::clone(&object);
            tokio::spawn(async move { cache.read(&object, CHUNK + i..CHUNK + 100 + i).await })
        })
        .collect();
    // Every reader has missed (and so joined the one fetch) while the GET is held back.
    eventually("16 readers missed and the one GET started", || {
        f.cache.stats().misses == 16 && f.counting.ranged_gets() == 1
    })
    .await;
    f.counting.open();

    for (i, reader) in (0u64..).zip(readers) {
        let bytes = reader.await.unwrap().unwrap();
        let start = (CHUNK + i) as usize;
        assert_eq!(bytes, f.data[start..start + 100]);
    }
    assert_eq!(f.counting.ranged_gets(), 1);
    assert_eq!(f.counting.gets_of_chunk(&f.object.key, 1, f.object.len), 1);
    assert_eq!(f.cache.stats().gets, 1);
}

#[tokio::test]
async fn lru_eviction_keeps_cached_bytes_within_capacity() {
    let config = ChunkCacheConfig {
        capacity_bytes: 3 * CHUNK,
        ..config()
    };
    let f = fixture(10 * CHUNK, config, false, false).await;

    for index in 0..10 {
        let range = index * CHUNK..(index + 1) * CHUNK;
        let bytes = f.cache.read(&f.object, range.clone()).await.unwrap();
        assert_eq!(bytes, f.data[range.start as usize..range.end as usize]);
        assert!(
            f.cache.stats().bytes_cached <= 3 * CHUNK,
            "{:?}",
            f.cache.stats()
        );
    }
    let stats = f.cache.stats();
    assert_eq!(stats.bytes_cached, 3 * CHUNK);
    assert_eq!(stats.evictions, 7);

    // Chunk 9 is among the most recent (a hit); chunk 0 was evicted (a new GET).
    f.cache
        .read(&f.object, 9 * CHUNK..9 * CHUNK + 1)
        .await
        .unwrap();
    assert_eq!(f.counting.ranged_gets(), 10);
    f.cache.read(&f.object, 0..1).await.unwrap();
    assert_eq!(f.counting.ranged_gets(), 11);
    assert_eq!(f.counting.gets_of_chunk(&f.object.key, 0, f.object.len), 2);
    assert!(f.cache.stats().bytes_cached <= 3 * CHUNK);
}

#[tokio::test]
async fn recently_read_chunks_survive_eviction() {
    let config = ChunkCacheConfig {
        capacity_bytes: 2 * CHUNK,
        ..config()
    };
    let f = fixture(3 * CHUNK, config, false, false).await;
    f.cache.read(&f.object, 0..1).await.unwrap();
    f.cache.read(&f.object, CHUNK..CHUNK + 1).await.unwrap();
    f.cache.read(&f.object, 0..1).await.unwrap(); // chunk 0 is now the most recent

    f.cache
        .read(&f.object, 2 * CHUNK..2 * CHUNK + 1)
        .await
        .unwrap(); // evicts chunk 1

    f.cache.read(&f.object, 0..1).await.unwrap();
    assert_eq!(f.counting.gets_of_chunk(&f.object.key, 0, f.object.len), 1);
    f.cache.read(&f.object, CHUNK..CHUNK + 1).await.unwrap();
    assert_eq!(f.counting.gets_of_chunk(&f.object.key, 1, f.object.len), 2);
}

#[tokio::test]
async fn corrupted_chunk_is_an_error_and_is_not_cached() {
    let f = fixture(4 * CHUNK, config(), false, true).await;
    let mut corrupt = f.data.clone();
    corrupt[2 * CHUNK as usize + 17] ^= 0x01;
    f.memory.put(&f.object.key, corrupt.into()).await.unwrap();

    let intact = f.cache.read(&f.object, CHUNK..2 * CHUNK).await.unwrap();
    assert_eq!(intact, f.data[CHUNK as usize..2 * CHUNK as usize]);
    let error = f
        .cache
        .read(&f.object, 2 * CHUNK..2 * CHUNK + 10)
        .await
        .unwrap_err();

    match &error {
        ChunkError::Corrupt {
            key,
            source:
                DigestError::Mismatch {
                    chunk_index,
                    expected,
                    actual,
                },
        } => {
            assert_eq!(key, &f.object.key);
            assert_eq!(*chunk_index, 2);
            assert_eq!(
                expected,
                &sha256_hex(&f.data[2 * CHUNK as usize..3 * CHUNK as usize])
            );
            assert_ne!(expected, actual);
        }
        other => panic!("expected a digest mismatch, got {other:?}"),
    }
    let stats = f.cache.stats();
    assert_eq!(stats.bytes_cached, CHUNK, "only the intact chunk is cached");
    assert_eq!(stats.verify_failures, 1);

    // Not cached: the next read fetches again (and fails again)...
    assert!(
        f.cache
            .read(&f.object, 2 * CHUNK..2 * CHUNK + 10)
            .await
            .is_err()
    );
    assert_eq!(f.counting.gets_of_chunk(&f.object.key, 2, f.object.len), 2);
    // ...and once the object is repaired, reads succeed.
    f.memory
        .put(&f.object.key, f.data.clone().into())
        .await
        .unwrap();
    let repaired = f.cache.read(&f.object, 2 * CHUNK..3 * CHUNK).await.unwrap();
    assert_eq!(repaired, f.data[2 * CHUNK as usize..3 * CHUNK as usize]);
}

#[tokio::test]
async fn a_chunk_cached_without_digests_is_checked_when_read_with_them() {
    let f = fixture(2 * CHUNK, config(), false, true).await;
    let mut corrupt = f.data.clone();
    corrupt[5] ^= 0x80;
    f.memory.put(&f.object.key, corrupt.into()).await.unwrap();
    let unverified = RemoteObject {
        digests: None,
        ..f.object.clone()
    };
    f.cache.read(&unverified, 0..10).await.unwrap();

    let error = f.cache.read(&f.object, 0..10).await.unwrap_err();

    assert!(matches!(error, ChunkError::Corrupt { .. }), "{error:?}");
    assert_eq!(
        f.cache.stats().bytes_cached,
        0,
        "the bad chunk left the cache"
    );
}

#[tokio::test]
async fn sequential_reads_fetch_the_following_chunks_ahead() {
    let config = ChunkCacheConfig {
        read_ahead_chunks: 2,
        ..config()
    };
    let f = fixture(8 * CHUNK, config, false, true).await;

    f.cache.read(&f.object, 0..100).await.unwrap();
    assert_eq!(
        f.cache.stats().read_ahead_gets,
        0,
        "a first read is not a sequential scan"
    );
    f.cache.read(&f.object, 100..CHUNK + 10).await.unwrap();

    let counting = Arc::clone(&f.counting);
    let key = f.object.key.clone();
    eventually("chunks 2 and 3 were fetched ahead", || {
        counting.gets_of_chunk(&key, 2, 8 * CHUNK) == 1
            && counting.gets_of_chunk(&key, 3, 8 * CHUNK) == 1
    })
    .await;
    assert_eq!(f.cache.stats().read_ahead_gets, 2);
    eventually("read-ahead chunks cached", || {
        f.cache.stats().bytes_cached == 4 * CHUNK
    })
    .await;

    let hits = f.cache.stats().hits;
    let bytes = f
        .cache
        .read(&f.object, CHUNK + 10..4 * CHUNK)
        .await
        .unwrap();
    assert_eq!(bytes, f.data[CHUNK as usize + 10..4 * CHUNK as usize]);
    assert_eq!(f.cache.stats().hits, hits + 3);
    assert_eq!(f.counting.gets_of_chunk(&f.object.key, 2, 8 * CHUNK), 1);
    assert_eq!(f.counting.gets_of_chunk(&f.object.key, 3, 8 * CHUNK), 1);
}

#[tokio::test]
async fn a_jump_is_not_a_sequential_read_and_fetches_nothing_ahead() {
    let config = ChunkCacheConfig {
        read_ahead_chunks: 2,
        ..config()
    };
    let f = fixture(8 * CHUNK, config, false, false).await;

    f.cache.read(&f.object, 0..10).await.unwrap();
    f.cache
        .read(&f.object, 5 * CHUNK..5 * CHUNK + 10)
        .await
        .unwrap();
    f.cache
        .read(&f.object, 2 * CHUNK..2 * CHUNK + 10)
        .await
        .unwrap();

    // Read-ahead is started (and counted) inside `read`, so there is nothing to wait for.
    assert_eq!(f.cache.stats().read_ahead_gets, 0);
    assert_eq!(f.counting.ranged_gets(), 3);
}

#[tokio::test]
async fn read_ahead_stops_at_the_last_chunk() {
    let config = ChunkCacheConfig {
        read_ahead_chunks: 5,
        ..config()
    };
    let f = fixture(3 * CHUNK, config, false, false).await;

    f.cache.read(&f.object, 0..10).await.unwrap();
    f.cache.read(&f.object, 10..CHUNK + 10).await.unwrap();

    assert_eq!(f.cache.stats().read_ahead_gets, 1);
}

#[tokio::test]
async fn transient_get_errors_surface_and_a_later_read_succeeds() {
    let memory = Arc::new(InMemory::new());
    let data = pattern(3 * CHUNK);
    let key = Path::from("seg.log");
    memory.put(&key, data.clone().into()).await.unwrap();
    let (faulty, faults) = FaultyObjectStore::new(memory);
    let cache = ChunkCache::new(Arc::new(faulty), config()).unwrap();
    let object = RemoteObject {
        key: key.clone(),
        len: 3 * CHUNK,
        digests: None,
    };
    faults.fail_next(&[Operation::Get], 1, FaultKind::Unavailable);

    let error = cache.read(&object, 0..10).await.unwrap_err();

    match &error {
        ChunkError::Get {
            key: failed,
            range,
            source,
        } => {
            assert_eq!(failed, &key);
            assert_eq!(range, &(0..CHUNK));
            assert!(is_injected(source), "{source}");
        }
        other => panic!("expected a GET error, got {other:?}"),
    }
    assert_eq!(cache.stats().bytes_cached, 0);
    let bytes = cache.read(&object, 0..10).await.unwrap();
    assert_eq!(bytes, data[..10]);
    assert_eq!(faults.calls(Operation::Get), 2);
}

#[tokio::test]
async fn readers_waiting_on_a_failed_get_all_see_the_error_and_the_next_read_retries() {
    let f = fixture(2 * CHUNK, config(), true, false).await;
    f.memory.delete(&f.object.key).await.unwrap();
    let object = Arc::new(f.object.clone());
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let cache = f.cache.clone();
            let object = Arc::clone(&object);
            tokio::spawn(async move { cache.read(&object, 0..10).await })
        })
        .collect();
    eventually("4 readers missed", || f.cache.stats().misses == 4).await;
    f.counting.open();

    for reader in readers {
        let error = reader.await.unwrap().unwrap_err();
        assert!(matches!(error, ChunkError::Get { .. }), "{error:?}");
    }
    assert_eq!(f.counting.ranged_gets(), 1);

    f.memory
        .put(&f.object.key, f.data.clone().into())
        .await
        .unwrap();
    assert_eq!(f.cache.read(&f.object, 0..10).await.unwrap(), f.data[..10]);
    assert_eq!(f.counting.ranged_gets(), 2);
}

#[tokio::test]
async fn a_range_beyond_the_object_is_an_error() {
    let f = fixture(2 * CHUNK, config(), false, false).await;

    let past_end = f
        .cache
        .read(&f.object, CHUNK..2 * CHUNK + 1)
        .await
        .unwrap_err();
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = f.cache.read(&f.object, 10..5).await.unwrap_err();

    assert!(
        matches!(past_end, ChunkError::OutOfRange { len: 2048, .. }),
        "{past_end:?}"
    );
    assert!(
        matches!(reversed, ChunkError::OutOfRange { .. }),
        "{reversed:?}"
    );
    assert_eq!(f.counting.ranged_gets(), 0);
}

#[tokio::test]
async fn an_object_shorter_than_its_recorded_length_is_an_error() {
    let f = fixture(2 * CHUNK, config(), false, false).await;
    let longer = RemoteObject {
        len: 2 * CHUNK + 100,
        ..f.object.clone()
    };

    let error = f
        .cache
        .read(&longer, 2 * CHUNK..2 * CHUNK + 1)
        .await
        .unwrap_err();

    assert!(
        matches!(
            error,
            ChunkError::Get { .. } | ChunkError::WrongLength { .. }
        ),
        "{error:?}"
    );
    assert_eq!(f.cache.stats().bytes_cached, 0);
}

#[tokio::test]
async fn digests_of_another_length_are_an_error() {
    let f = fixture(2 * CHUNK, config(), false, false).await;
    let wrong = RemoteObject {
        digests: Some(Arc::new(ChunkDigests::compute(
            &f.data[..CHUNK as usize],
            CHUNK,
        ))),
        ..f.object.clone()
    };

    let error = f.cache.read(&wrong, 0..1).await.unwrap_err();

    assert!(
        matches!(
            error,
            ChunkError::DigestsDoNotFit {
                expected_chunks: 2,
                digest_chunks: 1,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn whole_objects_are_cached_and_checked_against_their_sha256() {
    let f = fixture(CHUNK, config(), false, false).await;
    let key = Path::from("topic/0/00000000000000000000.index");
    let index = Bytes::from(pattern(300));
    f.memory.put(&key, index.clone().into()).await.unwrap();
    let sha = sha256_hex(&index);

    assert_eq!(f.cache.get_whole(&key, Some(&sha)).await.unwrap(), index);
    assert_eq!(
        f.cache
            .get_whole(&key, Some(&sha.to_uppercase()))
            .await
            .unwrap(),
        index
    );
    assert_eq!(f.cache.get_whole(&key, None).await.unwrap(), index);
    assert_eq!(f.counting.whole_gets(), 1);
    let stats = f.cache.stats();
    assert_eq!(
        (stats.whole_gets, stats.whole_hits, stats.whole_bytes_cached),
        (1, 2, 300)
    );

    let wrong = sha256_hex(b"something else");
    let error = f.cache.get_whole(&key, Some(&wrong)).await.unwrap_err();
    assert!(matches!(&error, ChunkError::Sha256Mismatch { expected, .. } if *expected == wrong));
}

#[tokio::test]
async fn a_whole_object_that_fails_its_sha256_is_not_cached() {
    let f = fixture(CHUNK, config(), false, false).await;
    let key = Path::from("x.index");
    f.memory
        .put(&key, Bytes::from_static(b"index").into())
        .await
        .unwrap();
    let wrong = sha256_hex(b"other");

    let error = f.cache.get_whole(&key, Some(&wrong)).await.unwrap_err();

    assert!(
        matches!(error, ChunkError::Sha256Mismatch { .. }),
        "{error:?}"
    );
    assert_eq!(f.cache.stats().whole_bytes_cached, 0);
    assert_eq!(f.cache.get_whole(&key, None).await.unwrap(), "index");
    assert_eq!(f.counting.whole_gets(), 2);
}

#[tokio::test]
async fn missing_whole_object_is_an_error_and_is_retried() {
    let f = fixture(CHUNK, config(), false, false).await;
    let key = Path::from("missing.index");

    let error = f.cache.get_whole(&key, None).await.unwrap_err();
    assert!(matches!(error, ChunkError::GetWhole { .. }), "{error:?}");

    f.memory
        .put(&key, Bytes::from_static(b"now").into())
        .await
        .unwrap();
    assert_eq!(f.cache.get_whole(&key, None).await.unwrap(), "now");
}

/// Uploads a 12.5 MiB file as a multipart upload (plus its digests) to the real S3 test server
/// and reads it back through the cache: bytes, digests and one GET per chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_uploaded_object_reads_back_through_the_cache_on_s3() {
    let server = tokio::task::spawn_blocking(s3_test_server).await.unwrap();
    let tier = server.open(&server.bucket, &unique_prefix("chunk-cache"));
    let (store, faults) = FaultyObjectStore::new(tier.scoped());
    let store: Arc<dyn ObjectStore> = Arc::new(store);
    let chunk_bytes = 1 << 20;
    let len = 12 * chunk_bytes + chunk_bytes / 2;
    let data = pattern(len);
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("00000000000000000000.log");
    std::fs::write(&local, &data).unwrap();
    let key = Path::from("topic/0/00000000000000000000.log");
    let digests_key = Path::from("topic/0/00000000000000000000.digests");
    let options = UploadOptions {
        multipart_threshold_bytes: 8 << 20,
        part_bytes: 5 << 20,
        ..UploadOptions::default()
    };

    let uploaded = upload_file(&*store, &local, &key, &options).await.unwrap();
    let digests = ChunkDigests::compute(&data, chunk_bytes);
    let uploaded_digests = upload_bytes(&*store, &digests_key, digests.encode(), &options)
        .await
        .unwrap();

    assert_eq!(uploaded.size, len);
    assert_eq!(uploaded.sha256, sha256_hex(&data));
    // create + 3 parts (5 + 5 + 2.5 MiB) + complete: it really was a multipart upload.
    assert_eq!(faults.calls(Operation::PutMultipart), 5);
    assert_eq!(store.head(&key).await.unwrap().size, len);

    let config = ChunkCacheConfig {
        chunk_bytes,
        ..ChunkCacheConfig::default()
    };
    let cache = ChunkCache::new(Arc::clone(&store), config).unwrap();
    let encoded = cache
        .get_whole(&digests_key, Some(&uploaded_digests.sha256))
        .await
        .unwrap();
    let remote_digests = ChunkDigests::decode(&encoded).unwrap();
    assert_eq!(remote_digests, digests);
    let object = RemoteObject {
        key,
        len,
        digests: Some(Arc::new(remote_digests)),
    };

    let mut read = Vec::with_capacity(data.len());
    let step = 3 * chunk_bytes - 1;
    let mut position = 0;
    while position < len {
        let end = (position + step).min(len);
        read.extend_from_slice(&cache.read(&object, position..end).await.unwrap());
        position = end;
    }

    assert!(read == data, "bytes read back differ from those uploaded");
    let stats = cache.stats();
    assert_eq!(stats.verify_failures, 0);
    // Each of the 13 chunks fetched exactly once, by a read or by read-ahead.
    assert_eq!(stats.gets, 13, "{stats:?}");
    assert_eq!(stats.whole_gets, 1);
    assert_eq!(stats.bytes_fetched, len + encoded.len() as u64);
    let again = cache
        .read(&object, 5 * chunk_bytes..7 * chunk_bytes)
        .await
        .unwrap();
    assert!(again == data[5 * chunk_bytes as usize..7 * chunk_bytes as usize]);
    assert_eq!(cache.stats().gets, 13);
    report(&stats);
}

fn report(stats: &CacheStats) {
    println!("s3 cold read stats: {stats:?}");
}

//! Cold reads of remote objects: [`ChunkCache`] serves byte ranges of immutable objects (uploaded
//! segment logs) from aligned chunks, and small whole objects (segment indexes, digest objects).
//!
//! Invariants:
//! - Chunk `i` of an object covers `[i * chunk_bytes, min((i + 1) * chunk_bytes, len))` and is
//!   fetched with exactly one ranged GET. Its chunk size is the one its [`ChunkDigests`] were
//!   computed with when it has digests, else [`ChunkCacheConfig::chunk_bytes`].
//! - A chunk is served or cached only after it matched its digest (when the object has
//!   digests) and its expected length; a whole object only after it matched the SHA-256 given.
//!   A failed GET or a mismatch is returned to every waiting reader and is never cached: the next
//!   read tries again.
//! - One GET per chunk however many readers want it at once (single flight): the first miss
//!   starts a fetch task, later ones wait for it. The fetch runs as its own task, so a reader
//!   that gives up doesn't cancel it for the others, and it always clears its in-flight entry.
//! - Every GET holds one of [`ChunkCacheConfig::max_concurrent_gets`] permits: cold reads,
//!   however many, can't flood the store or the runtime. Read-ahead only uses permits that are
//!   free at that moment, so it never queues ahead of reads someone waits for.
//! - Cached chunks are bounded by [`ChunkCacheConfig::capacity_bytes`] (least recently used
//!   evicted first), whole objects by [`ChunkCacheConfig::whole_capacity_bytes`].
//!
//! Keys are assumed immutable: Strata never rewrites an object under the same key, so a cached
//! chunk never goes stale. Must not depend on segment internals.
//!
//! Needs a tokio runtime (fetches are spawned tasks).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::digest::{
    ChunkDigests, DEFAULT_CHUNK_BYTES, DigestError, MAX_CHUNK_BYTES, chunk_count, sha256_hex,
};

/// Default bound on cached chunk bytes.
pub const DEFAULT_CAPACITY_BYTES: u64 = 256 << 20;
/// Default bound on cached whole objects (indexes are small: a few KiB to a few MiB each).
pub const DEFAULT_WHOLE_CAPACITY_BYTES: u64 = 32 << 20;
/// Default chunks fetched ahead of a sequential reader: enough to hide one GET's latency at the
/// rate a consumer drains 1 MiB chunks.
pub const DEFAULT_READ_AHEAD_CHUNKS: u64 = 2;
/// Default GETs in flight at once.
pub const DEFAULT_MAX_CONCURRENT_GETS: usize = 8;
/// Objects whose last read position is remembered for read-ahead; the least recent are forgotten.
const TRACKED_OBJECTS: u64 = 4096;

/// How the cache sizes, bounds and paces its reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkCacheConfig {
    /// Chunk size for objects without digests (`1..=MAX_CHUNK_BYTES`).
    pub chunk_bytes: u64,
    /// Bound on cached chunk bytes.
    pub capacity_bytes: u64,
    /// Chunks fetched in the background after a sequential read (0: none).
    pub read_ahead_chunks: u64,
    /// GETs in flight at once (at least 1).
    pub max_concurrent_gets: usize,
    /// Bound on cached whole-object bytes ([`ChunkCache::get_whole`]).
    pub whole_capacity_bytes: u64,
}

impl Default for ChunkCacheConfig {
    fn default() -> Self {
        Self {
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            capacity_bytes: DEFAULT_CAPACITY_BYTES,
            read_ahead_chunks: DEFAULT_READ_AHEAD_CHUNKS,
            max_concurrent_gets: DEFAULT_MAX_CONCURRENT_GETS,
            whole_capacity_bytes: DEFAULT_WHOLE_CAPACITY_BYTES,
        }
    }
}

/// Why a [`ChunkCacheConfig`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkCacheConfigError {
    /// `chunk_bytes` is zero or too large.
    #[error("chunk_bytes {chunk_bytes} must be in 1..={MAX_CHUNK_BYTES}")]
    ChunkBytes {
        /// The value given.
        chunk_bytes: u64,
    },
    /// `max_concurrent_gets` is zero (no read could ever run).
    #[error("max_concurrent_gets must be at least 1")]
    NoGets,
}

/// A remote object as the cache needs it: where, how long, and optionally its chunk digests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteObject {
    /// Its key in the store.
    pub key: Path,
    /// Its length in bytes (from the manifest).
    pub len: u64,
    /// Digests of its chunks; when present every chunk is checked before use.
    pub digests: Option<Arc<ChunkDigests>>,
}

/// Counters since the cache was created, plus the current cached bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Chunks a read found cached.
    pub hits: u64,
    /// Chunks a read did not find cached (it started a GET or waited for one in flight).
    pub misses: u64,
    /// Ranged GETs issued (read-ahead included).
    pub gets: u64,
    /// Bytes received from the store (ranged and whole GETs).
    pub bytes_fetched: u64,
    /// Chunk bytes cached now (at most `capacity_bytes`).
    pub bytes_cached: u64,
    /// Chunks evicted to make room.
    pub evictions: u64,
    /// Ranged GETs started by read-ahead (also counted in `gets`).
    pub read_ahead_gets: u64,
    /// Chunks or whole objects that did not match their digest.
    pub verify_failures: u64,
    /// Whole-object reads served from the cache.
    pub whole_hits: u64,
    /// Whole-object GETs issued.
    pub whole_gets: u64,
    /// Whole-object bytes cached now (at most `whole_capacity_bytes`).
    pub whole_bytes_cached: u64,
}

/// Why a cold read failed. Cloneable: one fetch's outcome goes to every reader that waited.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ChunkError {
    /// The range is reversed or extends past the object.
    #[error("range {}..{} is outside {key} ({len} bytes)", range.start, range.end)]
    OutOfRange {
        /// The object.
        key: Path,
        /// The range asked for.
        range: Range<u64>,
        /// The object's length.
        len: u64,
    },
    /// The object's digests do not describe an object of its length.
    #[error(
        "digests of {key} cover {digest_chunks} chunks, but {len} bytes in {chunk_bytes}-byte \
         chunks are {expected_chunks}"
    )]
    DigestsDoNotFit {
        /// The object.
        key: Path,
        /// The object's length.
        len: u64,
        /// The digests' chunk size.
        chunk_bytes: u64,
        /// Chunks the length implies.
        expected_chunks: u64,
        /// Chunks the digests cover.
        digest_chunks: u64,
    },
    /// The ranged GET of a chunk failed.
    #[error("GET {key} bytes {}..{} failed", range.start, range.end)]
    Get {
        /// The object.
        key: Path,
        /// The chunk's byte range.
        range: Range<u64>,
        /// The store's error.
        #[source]
        source: Arc<object_store::Error>,
    },
    /// The GET of a whole object failed.
    #[error("GET {key} failed")]
    GetWhole {
        /// The object.
        key: Path,
        /// The store's error.
        #[source]
        source: Arc<object_store::Error>,
    },
    /// The store returned fewer or more bytes than the chunk has: the object is shorter than
    /// its recorded length.
    #[error("chunk {chunk_index} of {key}: expected {expected} bytes, got {actual}")]
    WrongLength {
        /// The object.
        key: Path,
        /// The chunk.
        chunk_index: u64,
        /// The chunk's length.
        expected: u64,
        /// The bytes received.
        actual: u64,
    },
    /// A chunk did not match its digest: the object is corrupt. Never served.
    #[error("chunk of {key} is corrupt")]
    Corrupt {
        /// The object.
        key: Path,
        /// Which chunk, and both digests.
        #[source]
        source: DigestError,
    },
    /// A whole object did not match the SHA-256 it was expected to have. Never served.
    #[error("{key} is corrupt: SHA-256 expected {expected}, actual {actual}")]
    Sha256Mismatch {
        /// The object.
        key: Path,
        /// The SHA-256 asked for.
        expected: String,
        /// The SHA-256 of the bytes received.
        actual: String,
    },
    /// A fetch or verification task panicked or was cancelled (runtime shutting down).
    #[error("cold read task for {key} failed")]
    TaskFailed {
        /// The object.
        key: Path,
        /// The cause.
        #[source]
        source: Arc<tokio::task::JoinError>,
    },
}

/// A cache of chunks and small whole objects in front of an object store. Clones share the
/// cache (it is an `Arc` inside).
#[derive(Debug, Clone)]
pub struct ChunkCache {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn ObjectStore>,
    config: ChunkCacheConfig,
    permits: Arc<Semaphore>,
    state: Mutex<State>,
    counters: Counters,
}

#[derive(Debug)]
struct State {
    chunks: Lru<EntryKey, Fetched>,
    wholes: Lru<EntryKey, Fetched>,
    in_flight: HashMap<EntryKey, SharedFetch>,
    /// Per object, the last chunk of its latest read (weight 1 each).
    positions: Lru<Path, u64>,
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    gets: AtomicU64,
    bytes_fetched: AtomicU64,
    bytes_cached: AtomicU64,
    evictions: AtomicU64,
    read_ahead_gets: AtomicU64,
    verify_failures: AtomicU64,
    whole_hits: AtomicU64,
    whole_gets: AtomicU64,
    whole_bytes_cached: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum EntryKey {
    Chunk {
        key: Path,
        chunk_bytes: u64,
        index: u64,
    },
    Whole {
        key: Path,
    },
}

/// Bytes fetched and checked.
#[derive(Debug, Clone)]
struct Fetched {
    bytes: Bytes,
    /// Chunks: checked against digests (a chunk first read without digests is not).
    verified: bool,
    /// Whole objects: the SHA-256 of `bytes`, hex.
    sha256: Option<Arc<str>>,
}

type SharedFetch = Shared<BoxFuture<'static, Result<Fetched, ChunkError>>>;

/// What to fetch for an [`EntryKey`].
enum Request {
    Chunk {
        key: Path,
        index: u64,
        range: Range<u64>,
        digests: Option<Arc<ChunkDigests>>,
    },
    Whole {
        key: Path,
        expected_sha256: Option<String>,
    },
}

/// A chunk as found by a read: cached, or a fetch to wait for.
enum Lookup {
    Ready(Fetched),
    Waiting(SharedFetch),
}

impl ChunkCache {
    /// A cache in front of `store`.
    ///
    /// # Errors
    /// [`ChunkCacheConfigError`] for a chunk size outside `1..=MAX_CHUNK_BYTES` or no GETs.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        config: ChunkCacheConfig,
    ) -> Result<Self, ChunkCacheConfigError> {
        if !(1..=MAX_CHUNK_BYTES).contains(&config.chunk_bytes) {
            return Err(ChunkCacheConfigError::ChunkBytes {
                chunk_bytes: config.chunk_bytes,
            });
        }
        if config.max_concurrent_gets == 0 {
            return Err(ChunkCacheConfigError::NoGets);
        }
        let state = State {
            chunks: Lru::new(config.capacity_bytes),
            wholes: Lru::new(config.whole_capacity_bytes),
            in_flight: HashMap::new(),
            positions: Lru::new(TRACKED_OBJECTS),
        };
        let inner = Inner {
            store,
            permits: Arc::new(Semaphore::new(config.max_concurrent_gets)),
            config,
            state: Mutex::new(state),
            counters: Counters::default(),
        };
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &ChunkCacheConfig {
        &self.inner.config
    }

    /// The bytes `range` of `object`, assembled from its chunks: cached ones at once, missing
    /// ones each with one ranged GET (shared with concurrent readers of the same chunk), checked
    /// against the object's digests. When this read continues the object's previous one (it
    /// starts in the chunk where that one ended, or the next), the following
    /// `read_ahead_chunks` chunks are fetched in the background.
    ///
    /// # Errors
    /// [`ChunkError::OutOfRange`] for a range past `object.len`, [`ChunkError::DigestsDoNotFit`]
    /// for digests of another length; per chunk, [`ChunkError::Get`], [`ChunkError::WrongLength`],
    /// [`ChunkError::Corrupt`], [`ChunkError::TaskFailed`]. Nothing that failed is cached.
    pub async fn read(
        &self,
        object: &RemoteObject,
        range: Range<u64>,
    ) -> Result<Bytes, ChunkError> {
        if range.start > range.end || range.end > object.len {
            return Err(ChunkError::OutOfRange {
                key: object.key.clone(),
                range,
                len: object.len,
            });
        }
        let chunk_bytes = chunk_bytes_of(object, self.inner.config.chunk_bytes)?;
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        let first = range.start / chunk_bytes;
        let last = (range.end - 1) / chunk_bytes;
        let sequential = self.inner.note_position(&object.key, first, last);
        // Start (or join) every chunk before waiting for any, so a long read fetches in parallel.
        let lookups: Vec<Lookup> = (first..=last)
            .map(|index| self.inner.lookup_chunk(object, chunk_bytes, index))
            .collect();
        if sequential {
            self.inner.read_ahead(object, chunk_bytes, last);
        }
        let mut parts = Vec::with_capacity(lookups.len());
        for (index, lookup) in (first..).zip(lookups) {
            let fetched = match lookup {
                Lookup::Ready(fetched) => fetched,
                Lookup::Waiting(fetch) => fetch.await?,
            };
            let bytes = self
                .inner
                .ensure_verified(object, chunk_bytes, index, fetched)
                .await?;
            let chunk_start = index * chunk_bytes;
            let from = range.start.max(chunk_start) - chunk_start;
            let to = range.end.min(chunk_start + bytes.len() as u64) - chunk_start;
            parts.push(bytes.slice(to_usize(from)..to_usize(to)));
        }
        Ok(concat(parts))
    }

    /// The whole object `key` (meant for small immutable objects: segment indexes, digests),
    /// cached by key within `whole_capacity_bytes`. With `expected_sha256` (hex, any case), bytes
    /// that don't match are an error and are not cached.
    ///
    /// # Errors
    /// [`ChunkError::GetWhole`], [`ChunkError::Sha256Mismatch`], [`ChunkError::TaskFailed`].
    pub async fn get_whole(
        &self,
        key: &Path,
        expected_sha256: Option<&str>,
    ) -> Result<Bytes, ChunkError> {
        let expected = expected_sha256.map(str::to_ascii_lowercase);
        let entry = EntryKey::Whole { key: key.clone() };
        let lookup = {
            let mut state = self.inner.state();
            if let Some(fetched) = state.wholes.get(&entry) {
                bump(&self.inner.counters.whole_hits, 1);
                Lookup::Ready(fetched.clone())
            } else if let Some(fetch) = state.in_flight.get(&entry) {
                Lookup::Waiting(fetch.clone())
            } else {
                let request = Request::Whole {
                    key: key.clone(),
                    expected_sha256: expected.clone(),
                };
                Lookup::Waiting(self.inner.start_fetch(&mut state, entry, request, None))
            }
        };
        let fetched = match lookup {
            Lookup::Ready(fetched) => fetched,
            Lookup::Waiting(fetch) => fetch.await?,
        };
        let actual = fetched.sha256.as_deref().unwrap_or_default();
        match expected {
            Some(expected) if expected != actual => {
                bump(&self.inner.counters.verify_failures, 1);
                Err(ChunkError::Sha256Mismatch {
                    key: key.clone(),
                    expected,
                    actual: actual.into(),
                })
            }
            _ => Ok(fetched.bytes),
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> CacheStats {
        let counters = &self.inner.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        CacheStats {
            hits: load(&counters.hits),
            misses: load(&counters.misses),
            gets: load(&counters.gets),
            bytes_fetched: load(&counters.bytes_fetched),
            bytes_cached: load(&counters.bytes_cached),
            evictions: load(&counters.evictions),
            read_ahead_gets: load(&counters.read_ahead_gets),
            verify_failures: load(&counters.verify_failures),
            whole_hits: load(&counters.whole_hits),
            whole_gets: load(&counters.whole_gets),
            whole_bytes_cached: load(&counters.whole_bytes_cached),
        }
    }
}

/// The chunk size of `object`: its digests' when it has them (checked against its length).
fn chunk_bytes_of(object: &RemoteObject, default: u64) -> Result<u64, ChunkError> {
    let Some(digests) = &object.digests else {
        return Ok(default);
    };
    let expected_chunks = chunk_count(object.len, digests.chunk_bytes);
    if digests.chunk_count() != expected_chunks {
        return Err(ChunkError::DigestsDoNotFit {
            key: object.key.clone(),
            len: object.len,
            chunk_bytes: digests.chunk_bytes,
            expected_chunks,
            digest_chunks: digests.chunk_count(),
        });
    }
    Ok(digests.chunk_bytes)
}

fn chunk_range(index: u64, chunk_bytes: u64, len: u64) -> Range<u64> {
    let start = index * chunk_bytes;
    start..len.min(start + chunk_bytes)
}

fn to_usize(value: u64) -> usize {
    usize::try_from(value).expect("invariant: a chunk offset fits in memory")
}

fn concat(parts: Vec<Bytes>) -> Bytes {
    if parts.len() == 1 {
        return parts.into_iter().next().unwrap_or_default();
    }
    let mut out = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
    for part in parts {
        out.extend_from_slice(&part);
    }
    out.freeze()
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the maps consistent, so a panic elsewhere while holding
        // the lock leaves a usable state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the object's new read position; whether this read continues the previous one.
    fn note_position(&self, key: &Path, first: u64, last: u64) -> bool {
        let mut state = self.state();
        let previous = state.positions.get(key).copied();
        state.positions.insert(key.clone(), last, 1);
        previous.is_some_and(|previous| first == previous || Some(first) == previous.checked_add(1))
    }

    /// Finds chunk `index` in the cache, joins its fetch in flight, or starts one.
    fn lookup_chunk(
        self: &Arc<Self>,
        object: &RemoteObject,
        chunk_bytes: u64,
        index: u64,
    ) -> Lookup {
        let entry = EntryKey::Chunk {
            key: object.key.clone(),
            chunk_bytes,
            index,
        };
        let mut state = self.state();
        if let Some(fetched) = state.chunks.get(&entry) {
            bump(&self.counters.hits, 1);
            return Lookup::Ready(fetched.clone());
        }
        bump(&self.counters.misses, 1);
        if let Some(fetch) = state.in_flight.get(&entry) {
            return Lookup::Waiting(fetch.clone());
        }
        let request = Request::Chunk {
            key: object.key.clone(),
            index,
            range: chunk_range(index, chunk_bytes, object.len),
            digests: object.digests.clone(),
        };
        Lookup::Waiting(self.start_fetch(&mut state, entry, request, None))
    }

    /// Starts background fetches of the chunks after `last` that are neither cached nor in
    /// flight, while GET permits are free.
    fn read_ahead(self: &Arc<Self>, object: &RemoteObject, chunk_bytes: u64, last: u64) {
        let chunks = chunk_count(object.len, chunk_bytes);
        let end = last
            .saturating_add(1)
            .saturating_add(self.config.read_ahead_chunks)
            .min(chunks);
        let mut state = self.state();
        for index in last.saturating_add(1)..end {
            let entry = EntryKey::Chunk {
                key: object.key.clone(),
                chunk_bytes,
                index,
            };
            if state.chunks.contains(&entry) || state.in_flight.contains_key(&entry) {
                continue;
            }
            let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
                return;
            };
            bump(&self.counters.read_ahead_gets, 1);
            let request = Request::Chunk {
                key: object.key.clone(),
                index,
                range: chunk_range(index, chunk_bytes, object.len),
                digests: object.digests.clone(),
            };
            drop(self.start_fetch(&mut state, entry, request, Some(permit)));
        }
    }

    /// Spawns the fetch of `entry` and registers it as in flight. Called with the state locked,
    /// so the task can't finish (and unregister) before it is registered.
    fn start_fetch(
        self: &Arc<Self>,
        state: &mut State,
        entry: EntryKey,
        request: Request,
        permit: Option<OwnedSemaphorePermit>,
    ) -> SharedFetch {
        let key = match &request {
            Request::Chunk { key, .. } | Request::Whole { key, .. } => key.clone(),
        };
        let task = tokio::spawn(Arc::clone(self).fetch(entry.clone(), request, permit));
        let fetch = async move {
            task.await.unwrap_or_else(|source| {
                Err(ChunkError::TaskFailed {
                    key,
                    source: Arc::new(source),
                })
            })
        }
        .boxed()
        .shared();
        state.in_flight.insert(entry, fetch.clone());
        fetch
    }

    /// The fetch task: GET, check, cache on success, and unregister the fetch in any case.
    async fn fetch(
        self: Arc<Self>,
        entry: EntryKey,
        request: Request,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Result<Fetched, ChunkError> {
        let mut guard = InFlightGuard {
            inner: &self,
            entry: &entry,
            armed: true,
        };
        let permit = match permit {
            Some(permit) => permit,
            None => Arc::clone(&self.permits)
                .acquire_owned()
                .await
                .expect("invariant: the GET semaphore is never closed"),
        };
        let result = match request {
            Request::Chunk {
                key,
                index,
                range,
                digests,
            } => self.fetch_chunk(&key, index, range, digests, permit).await,
            Request::Whole {
                key,
                expected_sha256,
            } => self.fetch_whole(&key, expected_sha256, permit).await,
        };
        let mut state = self.state();
        if let Ok(fetched) = &result {
            self.insert(&mut state, &entry, fetched);
        }
        state.in_flight.remove(&entry);
        guard.armed = false;
        result
    }

    async fn fetch_chunk(
        &self,
        key: &Path,
        index: u64,
        range: Range<u64>,
        digests: Option<Arc<ChunkDigests>>,
        permit: OwnedSemaphorePermit,
    ) -> Result<Fetched, ChunkError> {
        bump(&self.counters.gets, 1);
        let fetched = self.store.get_range(key, range.clone()).await;
        drop(permit);
        let bytes = fetched.map_err(|source| ChunkError::Get {
            key: key.clone(),
            range: range.clone(),
            source: Arc::new(source),
        })?;
        bump(&self.counters.bytes_fetched, bytes.len() as u64);
        let expected = range.end - range.start;
        if bytes.len() as u64 != expected {
            return Err(ChunkError::WrongLength {
                key: key.clone(),
                chunk_index: index,
                expected,
                actual: bytes.len() as u64,
            });
        }
        let verified = match digests {
            Some(digests) => {
                self.verify_chunk(key, index, digests, bytes.clone())
                    .await?;
                true
            }
            None => false,
        };
        tracing::debug!(%key, chunk = index, bytes = bytes.len(), verified, "fetched chunk");
        Ok(Fetched {
            bytes,
            verified,
            sha256: None,
        })
    }

    async fn fetch_whole(
        &self,
        key: &Path,
        expected_sha256: Option<String>,
        permit: OwnedSemaphorePermit,
    ) -> Result<Fetched, ChunkError> {
        bump(&self.counters.whole_gets, 1);
        let fetched = match self.store.get(key).await {
            Ok(result) => result.bytes().await,
            Err(error) => Err(error),
        };
        drop(permit);
        let bytes = fetched.map_err(|source| ChunkError::GetWhole {
            key: key.clone(),
            source: Arc::new(source),
        })?;
        bump(&self.counters.bytes_fetched, bytes.len() as u64);
        let hashed = bytes.clone();
        let actual = tokio::task::spawn_blocking(move || sha256_hex(&hashed))
            .await
            .map_err(|source| ChunkError::TaskFailed {
                key: key.clone(),
                source: Arc::new(source),
            })?;
        if let Some(expected) = expected_sha256
            && expected != actual
        {
            bump(&self.counters.verify_failures, 1);
            tracing::warn!(%key, %expected, %actual, "object does not match its SHA-256");
            return Err(ChunkError::Sha256Mismatch {
                key: key.clone(),
                expected,
                actual,
            });
        }
        Ok(Fetched {
            bytes,
            verified: true,
            sha256: Some(actual.into()),
        })
    }

    /// Checks a chunk against its digest on a blocking thread (hashing a MiB takes a few ms).
    async fn verify_chunk(
        &self,
        key: &Path,
        index: u64,
        digests: Arc<ChunkDigests>,
        bytes: Bytes,
    ) -> Result<(), ChunkError> {
        let outcome = tokio::task::spawn_blocking(move || digests.verify(index, &bytes))
            .await
            .map_err(|source| ChunkError::TaskFailed {
                key: key.clone(),
                source: Arc::new(source),
            })?;
        outcome.map_err(|source| {
            bump(&self.counters.verify_failures, 1);
            tracing::warn!(%key, error = %source, "chunk does not match its digest");
            ChunkError::Corrupt {
                key: key.clone(),
                source,
            }
        })
    }

    /// The chunk's bytes, checked against the object's digests if it has them and the chunk was
    /// fetched without (a bad one is dropped from the cache).
    async fn ensure_verified(
        &self,
        object: &RemoteObject,
        chunk_bytes: u64,
        index: u64,
        fetched: Fetched,
    ) -> Result<Bytes, ChunkError> {
        let Some(digests) = &object.digests else {
            return Ok(fetched.bytes);
        };
        if fetched.verified {
            return Ok(fetched.bytes);
        }
        let entry = EntryKey::Chunk {
            key: object.key.clone(),
            chunk_bytes,
            index,
        };
        let checked = self
            .verify_chunk(
                &object.key,
                index,
                Arc::clone(digests),
                fetched.bytes.clone(),
            )
            .await;
        let mut state = self.state();
        match checked {
            Ok(()) => {
                if let Some(cached) = state.chunks.peek_mut(&entry) {
                    cached.verified = true;
                }
                Ok(fetched.bytes)
            }
            Err(error) => {
                state.chunks.remove(&entry);
                self.publish_sizes(&state);
                Err(error)
            }
        }
    }

    fn insert(&self, state: &mut State, entry: &EntryKey, fetched: &Fetched) {
        let weight = fetched.bytes.len() as u64;
        let evicted = match entry {
            EntryKey::Chunk { .. } => state.chunks.insert(entry.clone(), fetched.clone(), weight),
            // Whole-object evictions are not chunk evictions: kept out of `evictions`.
            EntryKey::Whole { .. } => {
                state.wholes.insert(entry.clone(), fetched.clone(), weight);
                0
            }
        };
        bump(&self.counters.evictions, evicted);
        self.publish_sizes(state);
    }

    fn publish_sizes(&self, state: &State) {
        let chunks = state.chunks.weight();
        let wholes = state.wholes.weight();
        assert!(
            chunks <= self.config.capacity_bytes,
            "invariant: chunk cache within capacity"
        );
        assert!(
            wholes <= self.config.whole_capacity_bytes,
            "invariant: whole cache within capacity"
        );
        self.counters.bytes_cached.store(chunks, Ordering::Relaxed);
        self.counters
            .whole_bytes_cached
            .store(wholes, Ordering::Relaxed);
    }
}

/// Unregisters a fetch whose task panicked or was cancelled, so the next reader starts afresh
/// instead of waiting on a fetch that will never finish.
struct InFlightGuard<'a> {
    inner: &'a Inner,
    entry: &'a EntryKey,
    armed: bool,
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.inner.state().in_flight.remove(self.entry);
        }
    }
}

/// A least-recently-used map bounded by the total weight of its values.
#[derive(Debug)]
struct Lru<K, V> {
    entries: HashMap<K, LruEntry<V>>,
    /// Use tick -> key, oldest first.
    order: BTreeMap<u64, K>,
    next_tick: u64,
    weight: u64,
    capacity: u64,
}

#[derive(Debug)]
struct LruEntry<V> {
    value: V,
    tick: u64,
    weight: u64,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    fn new(capacity: u64) -> Self {
        Self {
            entries: HashMap::new(),
            order: BTreeMap::new(),
            next_tick: 0,
            weight: 0,
            capacity,
        }
    }

    fn weight(&self) -> u64 {
        self.weight
    }

    fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    /// The value, now the most recently used.
    fn get(&mut self, key: &K) -> Option<&V> {
        let tick = self.next_tick;
        let entry = self.entries.get_mut(key)?;
        self.next_tick += 1;
        let old = std::mem::replace(&mut entry.tick, tick);
        if let Some(key) = self.order.remove(&old) {
            self.order.insert(tick, key);
        }
        Some(&entry.value)
    }

    /// The value, without changing its recency.
    fn peek_mut(&mut self, key: &K) -> Option<&mut V> {
        self.entries.get_mut(key).map(|entry| &mut entry.value)
    }

    fn remove(&mut self, key: &K) -> Option<V> {
        let entry = self.entries.remove(key)?;
        self.order.remove(&entry.tick);
        self.weight -= entry.weight;
        Some(entry.value)
    }

    /// Inserts (or replaces) `key`, evicting the least recently used entries until it fits.
    /// A value heavier than the whole capacity is not kept. Returns how many were evicted.
    fn insert(&mut self, key: K, value: V, weight: u64) -> u64 {
        self.remove(&key);
        if weight > self.capacity {
            return 0;
        }
        let mut evicted = 0;
        while self.weight + weight > self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some(entry) = self.entries.remove(&oldest) {
                self.weight -= entry.weight;
                evicted += 1;
            }
        }
        let tick = self.next_tick;
        self.next_tick += 1;
        self.order.insert(tick, key.clone());
        self.entries.insert(
            key,
            LruEntry {
                value,
                tick,
                weight,
            },
        );
        self.weight += weight;
        evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_least_recently_used_first_within_capacity() {
        let mut lru = Lru::new(10);
        assert_eq!(lru.insert("a", 1, 4), 0);
        assert_eq!(lru.insert("b", 2, 4), 0);
        assert_eq!(lru.get(&"a"), Some(&1));
        assert_eq!(lru.insert("c", 3, 4), 1);
        assert!(lru.contains(&"a") && lru.contains(&"c") && !lru.contains(&"b"));
        assert_eq!(lru.weight(), 8);
        assert_eq!(lru.insert("huge", 4, 11), 0);
        assert!(!lru.contains(&"huge"));
        assert_eq!(lru.insert("a", 5, 2), 0);
        assert_eq!(lru.weight(), 6);
        assert_eq!(lru.remove(&"c"), Some(3));
        assert_eq!(lru.weight(), 2);
    }

    #[test]
    fn chunk_ranges_are_aligned_with_a_short_last_chunk() {
        assert_eq!(chunk_range(0, 10, 25), 0..10);
        assert_eq!(chunk_range(2, 10, 25), 20..25);
    }

    #[test]
    fn a_zero_chunk_size_or_no_gets_is_refused() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let config = ChunkCacheConfig {
            chunk_bytes: 0,
            ..ChunkCacheConfig::default()
        };
        assert_eq!(
            ChunkCache::new(Arc::clone(&store), config).unwrap_err(),
            ChunkCacheConfigError::ChunkBytes { chunk_bytes: 0 }
        );
        let config = ChunkCacheConfig {
            max_concurrent_gets: 0,
            ..ChunkCacheConfig::default()
        };
        assert_eq!(
            ChunkCache::new(store, config).unwrap_err(),
            ChunkCacheConfigError::NoGets
        );
    }
}

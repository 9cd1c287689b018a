//! Tiering glue between the engine and the object store (the `strata-tiering` crate): uploads of
//! closed segments with their manifest, local and total retention of tiered topics, cold reads of
//! offsets below the local log start, and restore of topics from the bucket.
//!
//! One [`Tiering`] per server. Each tiered partition has a [`RemotePartition`] holding the
//! newest manifest this server wrote or loaded; readers take a snapshot of it, the background
//! [`sync`] task replaces it. The manifest is the only thing trusted about the bucket: a segment
//! is readable remotely once a manifest lists it, and a local segment is deleted only after that.

pub mod acl_archive;
pub mod archive;
pub mod cold;
pub mod group_offsets;
mod legal_hold;
pub mod pending_deletions;
pub mod remote_log;
pub mod restore;
mod retention;
mod signed_snapshot;
pub mod stats;
pub mod sync;
mod topic_removal;
mod upload;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use object_store::ObjectStore;
use parking_lot::{Mutex, RwLock};
use strata_tiering::chunk_cache::{CacheStats, ChunkCache, ChunkCacheConfig};
use strata_tiering::digest::ChunkDigests;
use strata_tiering::manifest::{self, Manifest, ManifestError};
use strata_tiering::object_lock::ObjectLock;
use strata_tiering::store::{StoreLocation, StoreSettings, TierStore};
use thiserror::Error;

use crate::clock::Clock;
use crate::log::offset_index::OffsetIndex;

/// Server settings of tiering (see `Config`).
#[derive(Debug, Clone)]
pub struct TieringSettings {
    /// Object store: a folder, `file:///path` or `s3://bucket/prefix`.
    pub url: String,
    /// S3 endpoint of an S3-compatible server (empty: AWS or `AWS_ENDPOINT_URL`).
    pub s3_endpoint: String,
    /// S3 region (empty: `AWS_REGION` or the default).
    pub s3_region: String,
    /// Period of the upload and retention sweep.
    pub interval_ms: u64,
    /// Bytes of remote segment data kept in memory for cold reads.
    pub chunk_cache_bytes: u64,
    /// Age after which unreferenced objects are deleted.
    pub orphan_grace_ms: i64,
    /// The transparency logs' checkpoint signing key (`PRIVATE+KEY+...`); empty:
    /// `<data_dir>/archive/signing.key`, created on first start.
    pub signing_key_file: String,
    /// Make a new signing key although the bucket's logs were signed by another.
    pub allow_new_signing_key: bool,
}

/// Why tiering could not start or an operation failed.
#[derive(Debug, Error)]
pub enum TieringError {
    /// The store could not be opened.
    #[error("tiered storage: {0}")]
    Open(#[from] strata_tiering::store::OpenStoreError),
    /// The store failed the conditional-write probe.
    #[error("tiered storage: {0}")]
    Probe(#[from] strata_tiering::probe::ProbeError),
    /// The bucket's published verification keys could not be listed.
    #[error("tiered storage: cannot list the bucket's archive verification keys: {0}")]
    KeyList(#[source] object_store::Error),
    /// A manifest operation failed (including being fenced by another writer).
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// An upload failed.
    #[error("tiered storage upload: {0}")]
    Upload(#[from] strata_tiering::upload::UploadError),
    /// The cold-read cache settings are out of range.
    #[error("tiered storage cache: {0}")]
    CacheConfig(#[from] strata_tiering::chunk_cache::ChunkCacheConfigError),
    /// A cold read failed.
    #[error("tiered storage read: {0}")]
    Read(#[from] strata_tiering::chunk_cache::ChunkError),
    /// The store failed.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// A remote object does not hold what the manifest says.
    #[error("remote segment {key} is corrupt: {reason}")]
    Corrupt {
        /// The object.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// Local disk I/O failed.
    #[error("local file {path}: {reason}")]
    Local {
        /// The file.
        path: String,
        /// What failed.
        reason: String,
    },
    /// Object Lock could not be applied.
    #[error("object lock: {0}")]
    Lock(String),
    /// A version-aware delete on a versioned bucket failed (a lock still protecting a version is
    /// expected; deletes are retried on a later sweep).
    #[error("deleting a version: {0}")]
    DeleteVersion(#[from] strata_tiering::object_lock::DeleteVersionError),
    /// A transparency log could not be loaded or published.
    #[error(transparent)]
    Tlog(#[from] strata_tiering::tlog::log::TlogError),
    /// This server stopped tiering the partition after losing a manifest race.
    #[error("tiering of {topic}/{partition} is stopped: {reason}")]
    Fenced {
        /// Topic.
        topic: String,
        /// Partition.
        partition: u32,
        /// Why.
        reason: String,
    },
}

/// The tiering state of one partition.
#[derive(Debug)]
pub struct RemotePartition {
    /// Topic.
    pub topic: String,
    /// Partition number.
    pub partition: u32,
    manifest: RwLock<Arc<Manifest>>,
    fenced: Mutex<Option<String>>,
    /// Object keys this server turned the S3 legal hold on for (see `legal_hold.rs`).
    pub(crate) legal_holds_on: Mutex<std::collections::BTreeSet<String>>,
    /// Serialises uploads, retention and delete-records of this partition.
    pub(crate) work: tokio::sync::Mutex<()>,
    indexes: Mutex<HashMap<u64, Arc<OffsetIndex>>>,
    digests: Mutex<HashMap<u64, Arc<ChunkDigests>>>,
    /// The partition's transparency log, loaded on first use (under `work`).
    pub(crate) tlog: tokio::sync::Mutex<Option<strata_tiering::tlog::log::PartitionLog>>,
}

/// Parsed remote indexes kept per partition; the raw bytes are in the chunk cache anyway.
const MAX_CACHED_INDEXES: usize = 64;

impl RemotePartition {
    fn new(manifest: Manifest) -> Self {
        Self {
            topic: manifest.topic.clone(),
            partition: manifest.partition,
            manifest: RwLock::new(Arc::new(manifest)),
            fenced: Mutex::new(None),
            legal_holds_on: Mutex::new(std::collections::BTreeSet::new()),
            work: tokio::sync::Mutex::new(()),
            indexes: Mutex::new(HashMap::new()),
            digests: Mutex::new(HashMap::new()),
            tlog: tokio::sync::Mutex::new(None),
        }
    }

    /// The newest manifest.
    pub fn manifest(&self) -> Arc<Manifest> {
        Arc::clone(&self.manifest.read())
    }

    pub(crate) fn set_manifest(&self, manifest: Manifest) {
        *self.manifest.write() = Arc::new(manifest);
    }

    /// Why tiering of this partition stopped, if it did.
    pub fn fenced(&self) -> Option<String> {
        self.fenced.lock().clone()
    }

    pub(crate) fn fence(&self, reason: String) {
        tracing::error!(topic = %self.topic, partition = self.partition, %reason, "tiering stopped");
        *self.fenced.lock() = Some(reason);
    }
    fn cached<T>(map: &Mutex<HashMap<u64, Arc<T>>>, base: u64) -> Option<Arc<T>> {
        map.lock().get(&base).cloned()
    }

    fn remember<T>(map: &Mutex<HashMap<u64, Arc<T>>>, base: u64, value: Arc<T>) {
        let mut map = map.lock();
        if map.len() >= MAX_CACHED_INDEXES {
            map.clear();
        }
        map.insert(base, value);
    }
}

/// The server's connection to tiered storage.
pub struct Tiering {
    store: TierStore,
    objects: Arc<dyn ObjectStore>,
    cache: ChunkCache,
    writer: String,
    lock: Option<ObjectLock>,
    /// Whether the bucket keeps versions: then deletes remove every version, since a plain
    /// delete only hides the data behind a delete marker (and keeps it billed).
    versioned: bool,
    /// Whether the bucket has Object Lock enabled: then legal holds reach the objects too.
    lock_enabled: bool,
    clock: Arc<dyn Clock>,
    settings: TieringSettings,
    partitions: Mutex<HashMap<(String, u32), Arc<RemotePartition>>>,
    published_topics: Mutex<HashMap<String, Vec<u8>>>,
    /// Deleted topics whose objects are still being removed: a topic of the same name is
    /// created only once they are gone, or the removal could take its new objects too.
    /// Each turns true when its removal ended.
    deletions: Mutex<HashMap<String, tokio::sync::watch::Receiver<bool>>>,
    /// The same removals on disk, so a crash does not forget them (see `topic_removal.rs`).
    pending: pending_deletions::PendingDeletions,
    /// The text of each signed snapshot this process last wrote (see `signed_snapshot.rs`); a
    /// sweep signs and writes one only when it changed.
    published_snapshots: signed_snapshot::Published,
    /// Signs the transparency logs' checkpoints.
    signer: strata_tiering::tlog::note::NoteSigner,
    /// Counters for `/metrics`.
    stats: stats::TieringStats,
}

impl std::fmt::Debug for Tiering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiering")
            .field("location", self.store.location())
            .field("writer", &self.writer)
            .finish_non_exhaustive()
    }
}

impl Tiering {
    /// Whether the store can lock objects (S3 Object Lock); a local folder cannot.
    pub fn can_lock_objects(&self) -> bool {
        self.lock.is_some()
    }

    /// Opens the store (default: `data_dir/tiered`), checks that it honours conditional writes
    /// and, for S3, connects the Object Lock client.
    ///
    /// # Errors
    /// A bad URL, an unreachable store or one that ignores conditional writes.
    pub async fn open(
        settings: TieringSettings,
        data_dir: &Path,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Tiering>, TieringError> {
        let url = if settings.url.is_empty() {
            data_dir.join("tiered").display().to_string()
        } else {
            settings.url.clone()
        };
        let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let store = TierStore::open(&StoreSettings {
            url,
            s3_endpoint: nonempty(&settings.s3_endpoint),
            s3_region: nonempty(&settings.s3_region),
            s3_credentials: None,
        })?;
        let key_file = if settings.signing_key_file.is_empty() {
            data_dir.join("archive").join("signing.key")
        } else {
            std::path::PathBuf::from(&settings.signing_key_file)
        };
        if !key_file.exists() && !settings.allow_new_signing_key {
            archive::refuse_a_second_key(&store, &key_file).await?;
        }
        let signer = archive::load_or_create_signer(&key_file)?;
        let deleting = data_dir.join("deleting");
        let pending = pending_deletions::PendingDeletions::open(deleting.clone()).map_err(|e| {
            TieringError::Local {
                path: deleting.display().to_string(),
                reason: e.to_string(),
            }
        })?;
        Self::with_store(store, settings, signer, clock, pending).await
    }

    /// [`Tiering::open`] for a store already opened (tests wrap it in a fault injector).
    ///
    /// # Errors
    /// A store that fails the conditional-write probe.
    pub async fn with_store(
        store: TierStore,
        settings: TieringSettings,
        signer: strata_tiering::tlog::note::NoteSigner,
        clock: Arc<dyn Clock>,
        pending: pending_deletions::PendingDeletions,
    ) -> Result<Arc<Tiering>, TieringError> {
        let objects = store.scoped();
        strata_tiering::probe::probe_conditional_writes(objects.as_ref()).await?;
        let lock = match store.location() {
            StoreLocation::S3(connection) => Some(ObjectLock::connect(connection).await),
            StoreLocation::Local { .. } => None,
        };
        let versioned = match &lock {
            Some(lock) => lock.is_versioned().await.unwrap_or_else(|error| {
                tracing::warn!(%error, "could not read the bucket's versioning; deleting without version ids");
                false
            }),
            None => false,
        };
        let lock_enabled = match &lock {
            Some(lock) if versioned => lock.is_lock_enabled().await.unwrap_or_else(|error| {
                tracing::warn!(%error, "could not read the bucket's Object Lock configuration; legal holds stay in Strata only");
                false
            }),
            _ => false,
        };
        let cache = ChunkCache::new(
            Arc::clone(&objects),
            ChunkCacheConfig {
                capacity_bytes: settings.chunk_cache_bytes,
                ..ChunkCacheConfig::default()
            },
        )?;
        let writer = writer_id();
        tracing::info!(location = ?store.location(), writer, versioned, key = %signer.verifier(), "tiered storage ready");
        let tiering = Arc::new(Tiering {
            store,
            objects,
            cache,
            writer,
            lock,
            versioned,
            lock_enabled,
            clock,
            settings,
            partitions: Mutex::new(HashMap::new()),
            published_topics: Mutex::new(HashMap::new()),
            deletions: Mutex::new(HashMap::new()),
            pending,
            published_snapshots: signed_snapshot::Published::default(),
            signer,
            stats: stats::TieringStats::default(),
        });
        tiering.publish_archive_metadata().await?;
        Ok(tiering)
    }

    /// Period of the background sweep.
    pub fn interval_ms(&self) -> u64 {
        self.settings.interval_ms
    }

    /// Upload, manifest and delete counters.
    pub fn stats(&self) -> &stats::TieringStats {
        &self.stats
    }

    /// Age in ms (by its newest record) of the oldest closed segment of `partition` that is not
    /// in the bucket yet; `None` when nothing waits or the partition's manifest is not loaded
    /// (it loads on the first sweep). Reads only what is in memory.
    pub fn upload_lag_ms(
        &self,
        topic: &str,
        number: u32,
        partition: &crate::log::Partition,
        now_ms: i64,
    ) -> Option<i64> {
        let remote = self
            .partitions
            .lock()
            .get(&(topic.to_string(), number))
            .cloned()?;
        let uploaded_end = remote.manifest().next_offset();
        partition
            .closed_segments()
            .into_iter()
            .find(|s| s.end_offset > uploaded_end && s.snapshot.durable_size > 0)
            .and_then(|s| s.snapshot.max_timestamp)
            .map(|newest| now_ms.saturating_sub(newest).max(0))
    }

    /// Cold-read cache statistics.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// The store, scoped to Strata's prefix.
    pub fn objects(&self) -> &Arc<dyn ObjectStore> {
        &self.objects
    }

    /// The partition's tiering state, loading its newest manifest on first use. A partition
    /// with no manifest starts an empty one at `local_start`.
    ///
    /// # Errors
    /// Store errors and unreadable manifests.
    pub async fn remote(
        &self,
        topic: &str,
        partition: u32,
        local_start: u64,
    ) -> Result<Arc<RemotePartition>, TieringError> {
        let key = (topic.to_string(), partition);
        if let Some(found) = self.partitions.lock().get(&key) {
            return Ok(Arc::clone(found));
        }
        let manifest = manifest::load_latest(self.objects.as_ref(), topic, partition)
            .await?
            .unwrap_or_else(|| Manifest::empty(topic, partition, &self.writer, local_start));
        let mut partitions = self.partitions.lock();
        let entry = partitions
            .entry(key)
            .or_insert_with(|| Arc::new(RemotePartition::new(manifest)));
        Ok(Arc::clone(entry))
    }

    /// Deletes `key` (relative to the store's prefix) for good: on a versioned bucket every
    /// version, else a plain delete. A missing object is success.
    ///
    /// # Errors
    /// Store failures, and versions still protected by Object Lock.
    pub(crate) async fn delete_object(
        &self,
        key: &object_store::path::Path,
    ) -> Result<(), TieringError> {
        match &self.lock {
            Some(lock) if self.versioned => {
                let now = sync::from_epoch_ms(self.clock.now_ms());
                lock.delete_all_versions(&self.store.key(key), now).await?;
            }
            _ => strata_tiering::store::delete_if_exists(self.objects.as_ref(), key).await?,
        }
        stats::TieringStats::add(&self.stats.remote_deletes, 1);
        Ok(())
    }
}

/// A random id for this server process, so its objects never share a key with another writer's.
// A fallback nonce for the writer id, not a time.
#[allow(clippy::disallowed_methods)]
fn writer_id() -> String {
    let random = getrandom::u64().unwrap_or_else(|_| {
        // Without an entropy source, time and pid still separate two servers in practice.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32)
    });
    format!("{random:016x}")
}

#[cfg(test)]
mod tests;

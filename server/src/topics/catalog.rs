//! The topic catalog: which topics exist, their settings and their partitions.
//!
//! Layout under the data directory:
//!
//! ```text
//! topics/<name>/topic.json       name, partition count, settings (replaced atomically)
//! topics/<name>/<partition>/     one partition log per number (see `log`)
//! trash/<ms>-<n>-<name>/          deleted topics (name cut to 200 bytes), removed in the background and at start-up
//! ```
//!
//! A topic is deleted by renaming its directory into `trash/` (then fsyncing both directories),
//! so it is gone after a crash at any moment, while readers that still hold a partition keep
//! reading their open, memory-mapped files until they drop them. Changes to the set of topics are
//! serialized by one lock; reads of the catalog never wait for them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use super::config::{ConfigErrors, TopicConfig};
use super::holds::{HoldRange, Holds, InvalidHold, LegalHold};
use crate::clock::Clock;
use crate::io::{Io, IoError};
use crate::log::meta::{META_VERSION, PartitionMeta, write_file_atomically, write_meta};
use crate::log::retention::HeldFrom;
use crate::log::{LogConfig, OpenError, Partition};
use crate::names::{InvalidName, TopicName};

const TOPIC_FILE: &str = "topic.json";
const TOPIC_FILE_VERSION: u32 = 1;
/// What `topic.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopicFile {
    version: u32,
    name: String,
    partitions: u32,
    configs: TopicConfig,
    created_ms: i64,
    /// Absent while the topic never had a hold, so older files read unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    legal_holds: Vec<LegalHold>,
    #[serde(default, skip_serializing_if = "is_zero")]
    next_legal_hold_id: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// Refuses to turn tiering off on a tiered topic. The bucket then holds records the local disk
/// no longer has: they would become unreadable and escape retention, and come back when tiering
/// was turned on again (a log start that moves backwards). Kafka refused it too, until KIP-950
/// defined how to retire the remote data.
fn refuse_untiering(topic: &Topic, updates: &BTreeMap<String, Value>) -> Result<(), CatalogError> {
    let mut next = topic.config();
    // Invalid updates are reported by the update itself, all at once.
    let turned_off = next.apply(updates).is_ok() && !next.remote_storage_enable;
    if topic.config().remote_storage_enable && turned_off {
        return Err(ConfigErrors {
            errors: vec![crate::topics::config::ConfigError {
                key: "remote_storage_enable".to_string(),
                message: "cannot be turned off once on: the bucket holds records the local \
                          disk may no longer have; delete the topic to retire them"
                    .to_string(),
            }],
        }
        .into());
    }
    Ok(())
}

/// Why a catalog operation failed.
#[derive(Debug, Error)]
pub enum CatalogError {
    /// The name breaks the naming rules.
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
    /// A partition count outside `1..=limit`, or not larger than the current one.
    #[error("invalid partition count {requested}: {reason}")]
    InvalidPartitions {
        /// The requested count.
        requested: u32,
        /// Why it is refused.
        reason: String,
    },
    /// Invalid topic settings.
    #[error(transparent)]
    Config(#[from] ConfigErrors),
    /// The topic exists already.
    #[error("topic {0} already exists")]
    AlreadyExists(String),
    /// No such topic.
    #[error("topic {0} not found")]
    NotFound(String),
    /// Internal topics belong to the server: their settings, partition count and existence are
    /// not the API's to change.
    #[error("topic {0} is internal: it cannot be reconfigured, grown or deleted")]
    Internal(String),
    /// Disk I/O failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A partition could not be opened.
    #[error(transparent)]
    Partition(#[from] OpenError),
    /// A legal hold keeps records the operation would remove.
    #[error("topic {topic} is under legal hold {id} ({reason}): release it first")]
    Held {
        /// The topic.
        topic: String,
        /// The hold's id.
        id: String,
        /// The hold's reason.
        reason: String,
    },
    /// A hold that cannot be placed as asked.
    #[error(transparent)]
    InvalidHold(#[from] InvalidHold),
    /// No hold with that id.
    #[error("topic {topic} has no legal hold {id}")]
    HoldNotFound {
        /// The topic.
        topic: String,
        /// The id asked for.
        id: String,
    },
    /// A topic file is unreadable.
    #[error("topic metadata {path} is invalid: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The directory could not be listed or created.
    #[error("{path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// One topic.
#[derive(Debug)]
pub struct Topic {
    name: String,
    dir: PathBuf,
    created_ms: i64,
    config: RwLock<TopicConfig>,
    partitions: RwLock<Vec<Arc<Partition>>>,
    holds: RwLock<Holds>,
}

impl Topic {
    /// The legal holds in force, oldest first.
    pub fn legal_holds(&self) -> Vec<LegalHold> {
        self.holds.read().active.clone()
    }

    /// The number the next hold's id gets (0 while no hold was ever placed).
    pub fn next_hold_id(&self) -> u64 {
        self.holds.read().next_id
    }

    /// Where the legal holds begin in partition `number`, for retention and delete-records.
    pub fn held_from(&self, number: u32) -> Vec<HeldFrom> {
        self.holds.read().held_from(number)
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Internal topics (`__` prefix) are created by the server, not by users.
    pub fn is_internal(&self) -> bool {
        self.name.starts_with("__")
    }

    /// Current settings.
    pub fn config(&self) -> TopicConfig {
        self.config.read().clone()
    }

    /// Whether reads of this topic are audited; asked on every fetch, so it does not clone the
    /// config.
    pub fn audits_reads(&self) -> bool {
        self.config.read().audit_reads
    }

    /// Number of partitions.
    pub fn partition_count(&self) -> u32 {
        u32::try_from(self.partitions.read().len()).unwrap_or(u32::MAX)
    }

    /// A partition by number.
    pub fn partition(&self, number: u32) -> Option<Arc<Partition>> {
        self.partitions.read().get(number as usize).cloned()
    }

    /// Every partition, in number order.
    pub fn partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions.read().clone()
    }

    /// The settings as the API shows them (every key, defaults included).
    pub fn config_map(&self) -> BTreeMap<String, Value> {
        self.config.read().to_map()
    }
}

/// All topics of this server.
#[derive(Debug)]
pub struct Catalog {
    topics_dir: PathBuf,
    trash_dir: PathBuf,
    io: Io,
    clock: Arc<dyn Clock>,
    max_partitions: u32,
    page_cache_window_bytes: u64,
    segment_preallocate_bytes: u64,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    changes: tokio::sync::Mutex<()>,
}

/// The server settings every topic's partitions share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogSettings {
    /// Most partitions a topic may have.
    pub max_partitions: u32,
    /// Bytes at the end of each active segment kept in the page cache (`LogConfig`).
    pub page_cache_window_bytes: u64,
    /// Bytes reserved at a time ahead of each active segment's writes (`LogConfig`).
    pub segment_preallocate_bytes: u64,
}

impl From<u32> for CatalogSettings {
    /// A partition limit with the engine's other defaults.
    fn from(max_partitions: u32) -> Self {
        Self {
            max_partitions,
            page_cache_window_bytes: LogConfig::default().page_cache_window_bytes,
            segment_preallocate_bytes: LogConfig::default().segment_preallocate_bytes,
        }
    }
}

impl Catalog {
    /// Opens every topic under `data_dir` (running partition recovery as needed) and empties the
    /// trash left by deletions that a crash interrupted.
    ///
    /// # Errors
    /// Unreadable directories or metadata, or a partition that fails to open.
    pub async fn open(
        data_dir: &Path,
        io: Io,
        clock: Arc<dyn Clock>,
        settings: impl Into<CatalogSettings>,
    ) -> Result<Catalog, CatalogError> {
        let settings = settings.into();
        let topics_dir = data_dir.join("topics");
        let trash_dir = data_dir.join("trash");
        for dir in [&topics_dir, &trash_dir] {
            std::fs::create_dir_all(dir).map_err(|source| dir_error(dir, source))?;
        }
        empty_trash(&trash_dir);
        let catalog = Catalog {
            topics_dir,
            trash_dir,
            io,
            clock,
            max_partitions: settings.max_partitions,
            page_cache_window_bytes: settings.page_cache_window_bytes,
            segment_preallocate_bytes: settings.segment_preallocate_bytes,
            topics: RwLock::new(BTreeMap::new()),
            changes: tokio::sync::Mutex::new(()),
        };
        let entries = std::fs::read_dir(&catalog.topics_dir)
            .map_err(|source| dir_error(&catalog.topics_dir, source))?;
        for entry in entries {
            let entry = entry.map_err(|source| dir_error(&catalog.topics_dir, source))?;
            let dir = entry.path();
            if !dir.join(TOPIC_FILE).exists() {
                // A create that crashed before its metadata was written: nothing was acked.
                tracing::warn!(dir = %dir.display(), "removing topic directory without topic.json");
                let _ = std::fs::remove_dir_all(&dir);
                continue;
            }
            let topic = catalog.load_topic(&dir).await?;
            catalog
                .topics
                .write()
                .insert(topic.name.clone(), Arc::new(topic));
        }
        Ok(catalog)
    }

    async fn load_topic(&self, dir: &Path) -> Result<Topic, CatalogError> {
        let path = dir.join(TOPIC_FILE);
        let text = std::fs::read(&path).map_err(|source| dir_error(&path, source))?;
        let file: TopicFile = serde_json::from_slice(&text).map_err(|e| CatalogError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if file.version != TOPIC_FILE_VERSION {
            let reason = format!("unsupported version {}", file.version);
            return Err(CatalogError::Corrupt { path, reason });
        }
        file.configs.validate()?;
        let mut partitions = Vec::with_capacity(file.partitions as usize);
        for number in 0..file.partitions {
            partitions.push(Arc::new(
                self.open_partition(dir, number, &file.configs).await?,
            ));
        }
        Ok(Topic {
            name: file.name,
            dir: dir.to_path_buf(),
            created_ms: file.created_ms,
            config: RwLock::new(file.configs),
            partitions: RwLock::new(partitions),
            holds: RwLock::new(Holds {
                active: file.legal_holds,
                next_id: file.next_legal_hold_id,
            }),
        })
    }

    async fn open_partition(
        &self,
        topic_dir: &Path,
        number: u32,
        config: &TopicConfig,
    ) -> Result<Partition, CatalogError> {
        let dir = topic_dir.join(number.to_string());
        let partition = Partition::open(
            &dir,
            self.log_config(config),
            self.io.clone(),
            Arc::clone(&self.clock),
        )
        .await?;
        Ok(partition)
    }

    /// A topic by name.
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().get(name).cloned()
    }

    /// A topic the public API may change: 404 for an unknown one, [`CatalogError::Internal`] for
    /// an internal one.
    fn get_public(&self, name: &str) -> Result<Arc<Topic>, CatalogError> {
        let topic = self
            .get(name)
            .ok_or_else(|| CatalogError::NotFound(name.to_string()))?;
        if topic.is_internal() {
            return Err(CatalogError::Internal(name.to_string()));
        }
        Ok(topic)
    }

    /// Every topic, by name.
    pub fn list(&self) -> Vec<Arc<Topic>> {
        self.topics.read().values().cloned().collect()
    }

    /// Creates a topic with `partitions` partitions and the given setting overrides.
    ///
    /// # Errors
    /// Invalid name, count or settings; an existing topic; I/O errors.
    pub async fn create(
        &self,
        name: &TopicName,
        partitions: u32,
        configs: &BTreeMap<String, Value>,
    ) -> Result<Arc<Topic>, CatalogError> {
        let starts = vec![0; partitions as usize];
        self.create_with_starts(name.as_str(), configs, &starts, Holds::default())
            .await
    }

    /// Recreates a topic restored from tiered storage: partition `i` starts empty at
    /// `log_starts[i]`, so new appends continue after the records the bucket holds, and the
    /// legal holds the bucket recorded are in force again.
    ///
    /// # Errors
    /// As [`Catalog::create`].
    pub async fn restore(
        &self,
        name: &TopicName,
        configs: &BTreeMap<String, Value>,
        log_starts: &[u64],
        holds: Holds,
    ) -> Result<Arc<Topic>, CatalogError> {
        self.create_with_starts(name.as_str(), configs, log_starts, holds)
            .await
    }

    async fn create_with_starts(
        &self,
        name: &str,
        configs: &BTreeMap<String, Value>,
        log_starts: &[u64],
        holds: Holds,
    ) -> Result<Arc<Topic>, CatalogError> {
        let partitions = u32::try_from(log_starts.len()).unwrap_or(u32::MAX);
        self.check_partition_count(partitions)?;
        let mut config = TopicConfig::default();
        config.apply(configs)?;
        let _guard = self.changes.lock().await;
        if self.get(name).is_some() {
            return Err(CatalogError::AlreadyExists(name.to_string()));
        }
        let dir = self.topics_dir.join(name);
        if dir.exists() {
            // Left by a create that crashed before topic.json: nothing in it was acknowledged.
            std::fs::remove_dir_all(&dir).map_err(|source| dir_error(&dir, source))?;
        }
        std::fs::create_dir_all(&dir).map_err(|source| dir_error(&dir, source))?;
        let mut opened = Vec::with_capacity(partitions as usize);
        for (number, &start) in (0..partitions).zip(log_starts) {
            if start > 0 {
                let partition_dir = dir.join(number.to_string());
                std::fs::create_dir_all(&partition_dir)
                    .map_err(|source| dir_error(&partition_dir, source))?;
                let meta = PartitionMeta {
                    version: META_VERSION,
                    log_start_offset: start,
                    recovery_point: start,
                    clean_shutdown: false,
                    log_end_offset: None,
                };
                write_meta(&self.io, &partition_dir, &meta)
                    .await
                    .map_err(|e| CatalogError::Corrupt {
                        path: partition_dir.clone(),
                        reason: e.to_string(),
                    })?;
            }
            opened.push(Arc::new(self.open_partition(&dir, number, &config).await?));
        }
        let file = TopicFile {
            version: TOPIC_FILE_VERSION,
            name: name.to_string(),
            partitions,
            configs: config.clone(),
            created_ms: self.clock.now_ms(),
            legal_holds: holds.active.clone(),
            next_legal_hold_id: holds.next_id,
        };
        // topic.json is written last: a topic exists once its metadata is durable.
        self.write_topic_file(&dir, &file).await?;
        self.io.sync_dir(&self.topics_dir).await?;
        let topic = Arc::new(Topic {
            name: name.to_string(),
            dir,
            created_ms: file.created_ms,
            config: RwLock::new(config),
            partitions: RwLock::new(opened),
            holds: RwLock::new(holds),
        });
        self.topics
            .write()
            .insert(name.to_string(), Arc::clone(&topic));
        tracing::info!(topic = name, partitions, "created topic");
        Ok(topic)
    }

    /// Applies setting changes (a `null` value resets a key to its default); all or nothing.
    ///
    /// # Errors
    /// Unknown topic, invalid settings, I/O errors.
    pub async fn update_configs(
        &self,
        name: &str,
        updates: &BTreeMap<String, Value>,
    ) -> Result<Arc<Topic>, CatalogError> {
        let _guard = self.changes.lock().await;
        let topic = self.get_public(name)?;
        refuse_untiering(&topic, updates)?;
        self.reconfigure(topic, updates).await
    }

    /// Sets the settings the server itself chooses for one of its internal topics (the
    /// server's configuration may change them between starts).
    ///
    /// # Errors
    /// Unknown topic, invalid configs, I/O errors.
    pub async fn update_internal_configs(
        &self,
        name: &str,
        updates: &BTreeMap<String, Value>,
    ) -> Result<Arc<Topic>, CatalogError> {
        let _guard = self.changes.lock().await;
        let topic = self
            .get(name)
            .ok_or_else(|| CatalogError::NotFound(name.to_string()))?;
        self.reconfigure(topic, updates).await
    }

    /// Applies `updates` to `topic`; the caller holds the `changes` lock.
    async fn reconfigure(
        &self,
        topic: Arc<Topic>,
        updates: &BTreeMap<String, Value>,
    ) -> Result<Arc<Topic>, CatalogError> {
        let mut config = topic.config();
        config.apply(updates)?;
        if config == topic.config() {
            // Nothing changes (a repeated update, or the server's own settings at a start).
            return Ok(topic);
        }
        let file = self.topic_file(&topic, topic.partition_count(), &config);
        self.write_topic_file(&topic.dir, &file).await?;
        for partition in topic.partitions() {
            if let Err(error) = partition.set_config(self.log_config(&config)) {
                // TopicConfig validation bounds every LogConfig field, so this is a bug.
                tracing::error!(%error, topic = topic.name(), "partition refused validated settings");
            }
        }
        *topic.config.write() = config;
        Ok(topic)
    }

    /// Grows a topic to `partitions` partitions. Existing keys then hash to other partitions.
    ///
    /// # Errors
    /// Unknown topic, a count that does not grow or exceeds the limit, I/O errors.
    pub async fn add_partitions(
        &self,
        name: &str,
        partitions: u32,
    ) -> Result<Arc<Topic>, CatalogError> {
        let _guard = self.changes.lock().await;
        let topic = self.get_public(name)?;
        let current = topic.partition_count();
        if partitions <= current {
            return Err(CatalogError::InvalidPartitions {
                requested: partitions,
                reason: format!("the topic has {current} partitions; the count can only grow"),
            });
        }
        self.check_partition_count(partitions)?;
        let config = topic.config();
        let mut added = Vec::new();
        for number in current..partitions {
            added.push(Arc::new(
                self.open_partition(&topic.dir, number, &config).await?,
            ));
        }
        let file = self.topic_file(&topic, partitions, &config);
        self.write_topic_file(&topic.dir, &file).await?;
        topic.partitions.write().extend(added);
        Ok(topic)
    }

    /// Places a legal hold on a topic, durably, before it answers.
    ///
    /// # Errors
    /// Unknown or internal topic, an invalid hold, I/O errors.
    pub async fn place_hold(
        &self,
        name: &str,
        range: HoldRange,
        reason: &str,
        created_by: Option<String>,
    ) -> Result<LegalHold, CatalogError> {
        let now = self.clock.now_ms();
        let hold = self
            .change_holds(name, |holds| {
                Ok(holds.place(range, reason, now, created_by)?)
            })
            .await?;
        tracing::info!(topic = name, hold = hold.id, reason, "placed a legal hold");
        Ok(hold)
    }

    /// Releases a legal hold: the next retention pass may remove what it kept.
    ///
    /// # Errors
    /// Unknown topic or hold, I/O errors.
    pub async fn release_hold(&self, name: &str, id: &str) -> Result<LegalHold, CatalogError> {
        let released = self
            .change_holds(name, |holds| {
                holds.release(id).ok_or_else(|| CatalogError::HoldNotFound {
                    topic: name.to_string(),
                    id: id.to_string(),
                })
            })
            .await?;
        tracing::info!(topic = name, hold = id, "released a legal hold");
        Ok(released)
    }

    /// Applies `change` to a copy of the topic's holds, writes `topic.json` with the result and
    /// only then puts it in force, so a failed write changes nothing.
    async fn change_holds<T>(
        &self,
        name: &str,
        change: impl FnOnce(&mut Holds) -> Result<T, CatalogError>,
    ) -> Result<T, CatalogError> {
        let _guard = self.changes.lock().await;
        let topic = self.get_public(name)?;
        let mut holds = topic.holds.read().clone();
        let changed = change(&mut holds)?;
        let (partitions, config) = (topic.partition_count(), topic.config());
        let file = self.topic_file_with(&topic, partitions, &config, holds.clone());
        self.write_topic_file(&topic.dir, &file).await?;
        *topic.holds.write() = holds;
        Ok(changed)
    }

    /// Deletes a topic: it disappears at once and for good; readers holding one of its partitions
    /// finish on the open files. A topic under a legal hold stays.
    ///
    /// # Errors
    /// Unknown topic, a legal hold, or I/O errors.
    pub async fn delete(&self, name: &str) -> Result<(), CatalogError> {
        let _guard = self.changes.lock().await;
        let topic = self.get_public(name)?;
        if let Some(hold) = topic.holds.read().active.first() {
            return Err(CatalogError::Held {
                topic: name.to_string(),
                id: hold.id.clone(),
                reason: hold.reason.clone(),
            });
        }
        let target = self.trash_dir.join(trash_name(name, self.clock.now_ms()));
        self.io.rename(&topic.dir, &target).await?;
        self.io.sync_dir(&self.topics_dir).await?;
        self.io.sync_dir(&self.trash_dir).await?;
        self.topics.write().remove(name);
        for partition in topic.partitions() {
            let _ = partition.close().await;
        }
        tokio::task::spawn_blocking(move || {
            if let Err(error) = std::fs::remove_dir_all(&target) {
                tracing::warn!(%error, dir = %target.display(), "could not empty the trash");
            }
        });
        tracing::info!(topic = name, "deleted topic");
        Ok(())
    }

    /// Flushes every partition and marks it cleanly shut down.
    pub async fn close(&self) {
        for topic in self.list() {
            for partition in topic.partitions() {
                if let Err(error) = partition.close().await {
                    tracing::warn!(%error, topic = topic.name(), "partition did not close cleanly");
                }
            }
        }
    }

    fn check_partition_count(&self, partitions: u32) -> Result<(), CatalogError> {
        if partitions == 0 || partitions > self.max_partitions {
            return Err(CatalogError::InvalidPartitions {
                requested: partitions,
                reason: format!("must be between 1 and {}", self.max_partitions),
            });
        }
        Ok(())
    }

    fn topic_file(&self, topic: &Topic, partitions: u32, config: &TopicConfig) -> TopicFile {
        let holds = topic.holds.read().clone();
        self.topic_file_with(topic, partitions, config, holds)
    }

    fn topic_file_with(
        &self,
        topic: &Topic,
        partitions: u32,
        config: &TopicConfig,
        holds: Holds,
    ) -> TopicFile {
        TopicFile {
            version: TOPIC_FILE_VERSION,
            name: topic.name.clone(),
            partitions,
            configs: config.clone(),
            created_ms: topic.created_ms,
            legal_holds: holds.active,
            next_legal_hold_id: holds.next_id,
        }
    }

    async fn write_topic_file(&self, dir: &Path, file: &TopicFile) -> Result<(), CatalogError> {
        let body = serde_json::to_vec_pretty(file).map_err(|e| CatalogError::Corrupt {
            path: dir.join(TOPIC_FILE),
            reason: e.to_string(),
        })?;
        write_file_atomically(&self.io, dir, TOPIC_FILE, Bytes::from(body)).await?;
        Ok(())
    }
}

/// The engine settings a topic's configuration implies.
pub fn log_config(config: &TopicConfig) -> LogConfig {
    let defaults = LogConfig::default();
    let max_batch_bytes =
        u64::try_from(config.max_message_bytes).unwrap_or(defaults.max_batch_bytes);
    LogConfig {
        segment_bytes: u64::try_from(config.segment_bytes).unwrap_or(defaults.segment_bytes),
        // A tiered topic's quiet segment must roll (and upload) within remote_upload_idle_ms.
        segment_ms: if config.remote_storage_enable {
            config.segment_ms.min(config.remote_upload_idle_ms)
        } else {
            config.segment_ms
        },
        index_interval_bytes: u64::try_from(config.index_interval_bytes)
            .unwrap_or(defaults.index_interval_bytes),
        max_batch_bytes: max_batch_bytes.max(crate::log::batch::BATCH_HEADER_LEN as u64),
        max_round_bytes: defaults.max_round_bytes.max(max_batch_bytes),
        ..defaults
    }
}

impl Catalog {
    /// A topic's engine settings on this server.
    fn log_config(&self, config: &TopicConfig) -> LogConfig {
        LogConfig {
            page_cache_window_bytes: self.page_cache_window_bytes,
            segment_preallocate_bytes: self.segment_preallocate_bytes,
            ..log_config(config)
        }
    }
}

fn dir_error(path: &Path, source: std::io::Error) -> CatalogError {
    CatalogError::Dir {
        path: path.to_path_buf(),
        source,
    }
}

/// Directory name for a deleted topic in the trash: unique (time and a per-process counter, so
/// deleting, recreating and deleting a name within one millisecond works) and within the 255-byte
/// file name limit for every valid topic name (up to 249 bytes; only a prefix is kept).
fn trash_name(name: &str, now_ms: i64) -> String {
    static DELETIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = DELETIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Topic names are ASCII, so any byte index is a char boundary.
    let prefix = name.get(..name.len().min(200)).unwrap_or("topic");
    format!("{now_ms}-{n}-{prefix}")
}

fn empty_trash(trash: &Path) {
    let Ok(entries) = std::fs::read_dir(trash) else {
        return;
    };
    for entry in entries.flatten() {
        if let Err(error) = std::fs::remove_dir_all(entry.path()) {
            tracing::warn!(%error, dir = %entry.path().display(), "could not empty the trash");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::io::IoBackendChoice;

    fn topic(name: &str) -> TopicName {
        TopicName::parse(name).unwrap()
    }

    #[tokio::test]
    async fn topics_survive_restart_and_deletion_is_permanent() {
        let dir = tempfile::tempdir().unwrap();
        let (io, _) = Io::start(IoBackendChoice::Sync, dir.path()).unwrap();
        let clock = ManualClock::new(1_000);
        let catalog = Catalog::open(dir.path(), io.clone(), clock.clone(), 16)
            .await
            .unwrap();
        let configs = BTreeMap::from([("retention_ms".to_string(), Value::from(1234))]);
        catalog.create(&topic("orders"), 3, &configs).await.unwrap();
        catalog
            .create(&topic("gone"), 1, &BTreeMap::new())
            .await
            .unwrap();
        assert!(matches!(
            catalog.create(&topic("orders"), 1, &BTreeMap::new()).await,
            Err(CatalogError::AlreadyExists(_))
        ));
        assert!(matches!(
            catalog.create(&topic("x"), 17, &BTreeMap::new()).await,
            Err(CatalogError::InvalidPartitions { .. })
        ));
        catalog.add_partitions("orders", 5).await.unwrap();
        catalog.delete("gone").await.unwrap();
        assert!(catalog.get("gone").is_none());
        catalog.close().await;
        drop(catalog);
        let reopened = Catalog::open(dir.path(), io, clock, 16).await.unwrap();
        let orders = reopened.get("orders").unwrap();
        assert_eq!(orders.partition_count(), 5);
        assert_eq!(orders.config().retention_ms, 1234);
        assert!(reopened.get("gone").is_none());
    }

    #[tokio::test]
    async fn longest_names_can_be_deleted_twice_in_one_millisecond() {
        let dir = tempfile::tempdir().unwrap();
        let (io, _) = Io::start(IoBackendChoice::Sync, dir.path()).unwrap();
        let clock = ManualClock::new(1_000);
        let catalog = Catalog::open(dir.path(), io, clock, 16).await.unwrap();
        let name = "a".repeat(249);
        for _ in 0..2 {
            catalog
                .create(&topic(&name), 2, &BTreeMap::new())
                .await
                .unwrap();
            catalog.delete(&name).await.unwrap();
            assert!(catalog.get(&name).is_none());
        }
    }
}

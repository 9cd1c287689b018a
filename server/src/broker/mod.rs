//! The service floor between the transports and the engine: what an operation *means*
//! (produce, fetch, consumer groups, producers, topics, delete-records, background work),
//! independent of HTTP. Every check an operation needs (does the topic exist, may clients write
//! it, is the offset in range, is the producer fenced) happens here once, so later layers
//! (authentication, metrics, audit, routing between nodes) have one place to hook in.
//!
//! Must not depend on: `axum` or anything in `crate::http` (the tidy test checks). Returns
//! domain types and per-operation errors ([`error`]); the HTTP layer turns those into DTOs and
//! error codes.

pub mod admin;
pub mod audit;
pub mod background;
pub mod delete_records;
pub mod error;
pub mod fetch;
pub mod groups;
pub mod holds;
pub mod observe;
pub mod produce;
pub mod reader;
pub mod stats;
pub mod topics;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio::sync::watch;

use self::error::LookupError;
use self::reader::PartitionReader;
use crate::audit::log::AuditLog;
use crate::clock::Clock;
use crate::config::Config;
use crate::groups::coordinator::Coordinator;
use crate::groups::offsets::OffsetStore;
use crate::log::Partition;
use crate::producers::ProducerRegistry;
use crate::security::authorizer::Authorizer;
use crate::security::keys::KeyStore;
use crate::security::quota::{QuotaExceeded, Quotas};
use crate::security::streams::{StreamSlot, StreamSlots, TooManyStreams};
use crate::security::{Caller, Operation, Principal, Resource};
use crate::tiering::remote_log::TieredSegments;
use crate::tiering::{Tiering, TieringError};
use crate::topics::catalog::{Catalog, Topic};

/// The parts an operation works with, injected at start (`server::build_state`).
pub struct Broker {
    /// Topics and partitions.
    catalog: Arc<Catalog>,
    /// Tiered storage (uploads run for topics with `remote_storage_enable`).
    tiering: Arc<Tiering>,
    /// Idempotent-producer ids and epochs.
    producers: Arc<ProducerRegistry>,
    /// Consumer-group membership.
    coordinator: Arc<Coordinator>,
    /// Committed offsets of consumer groups.
    offsets: Arc<OffsetStore>,
    /// Joins hold it shared; deleting or resetting a group's offsets holds it exclusively from
    /// its check for live members to its write, so no member joins (and commits) in between.
    /// A join waits for such a write (one fsync) at most.
    group_admin: tokio::sync::RwLock<()>,
    /// Where reads of topics with `audit_reads` are recorded.
    audit: Arc<AuditLog>,
    /// Server settings (fetch bounds).
    config: Arc<Config>,
    /// Time source: produce timestamps, commit times, lag ages.
    clock: Arc<dyn Clock>,
    /// Becomes true when shutdown starts: long polls end early.
    shutdown: watch::Receiver<bool>,
    /// Who may do what: asked at the start of every operation.
    authorizer: Arc<Authorizer>,
    /// The API keys callers authenticate with.
    keys: Arc<KeyStore>,
    /// Requests and bytes per second per principal.
    quotas: Arc<Quotas>,
    /// Open streams and long polls per principal.
    streams: StreamSlots,
    /// Counters for `/metrics`.
    stats: stats::BrokerStats,
    /// Varies the sticky partition of keyless records from one request to the next, so keyless
    /// traffic spreads over the partitions (one counter per broker, not a process global, so
    /// two servers in one process do not share it).
    sticky_seed: AtomicU64,
}

/// What [`Broker::new`] is built from.
pub struct BrokerParts {
    /// Topics and partitions.
    pub catalog: Arc<Catalog>,
    /// Tiered storage.
    pub tiering: Arc<Tiering>,
    /// Idempotent-producer ids.
    pub producers: Arc<ProducerRegistry>,
    /// Consumer-group membership.
    pub coordinator: Arc<Coordinator>,
    /// Committed offsets.
    pub offsets: Arc<OffsetStore>,
    /// The read audit.
    pub audit: Arc<AuditLog>,
    /// Server settings.
    pub config: Arc<Config>,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Shutdown signal.
    pub shutdown: watch::Receiver<bool>,
    /// First value of the sticky-partition seed.
    pub sticky_seed: u64,
    /// Access decisions.
    pub authorizer: Arc<Authorizer>,
    /// API keys.
    pub keys: Arc<KeyStore>,
    /// Quotas.
    pub quotas: Arc<Quotas>,
}

impl Broker {
    /// A broker over these parts.
    pub fn new(parts: BrokerParts) -> Self {
        let streams = usize::try_from(parts.config.max_streams_per_principal).unwrap_or(usize::MAX);
        let stats = stats::BrokerStats::new(
            parts.config.metrics_enabled,
            parts.config.metrics_topic_labels,
        );
        Self {
            catalog: parts.catalog,
            tiering: parts.tiering,
            producers: parts.producers,
            coordinator: parts.coordinator,
            offsets: parts.offsets,
            group_admin: tokio::sync::RwLock::new(()),
            audit: parts.audit,
            config: parts.config,
            clock: parts.clock,
            shutdown: parts.shutdown,
            sticky_seed: AtomicU64::new(parts.sticky_seed),
            authorizer: parts.authorizer,
            keys: parts.keys,
            quotas: parts.quotas,
            streams: StreamSlots::new(streams),
            stats,
        }
    }

    /// The broker's counters, for `/metrics`.
    pub fn stats(&self) -> &stats::BrokerStats {
        &self.stats
    }

    /// Open SSE streams and long polls, all principals together.
    pub fn open_streams(&self) -> usize {
        self.streams.open_total()
    }

    /// Access decisions (the ACL admin API manages its rules).
    pub fn authorizer(&self) -> &Arc<Authorizer> {
        &self.authorizer
    }

    /// The principal a bearer token belongs to, `None` for an unknown or revoked token.
    pub fn authenticate(&self, token: &str) -> Option<Principal> {
        self.keys.authenticate(token)
    }

    /// Whether `caller`'s API key still names them: a stream outlives the request that
    /// authenticated it, and must stop once the key is revoked. Callers without a key (a client
    /// certificate, or authentication off) stay authenticated.
    pub fn still_authenticated(&self, caller: &Caller) -> bool {
        caller
            .token()
            .is_none_or(|token| self.authenticate(token).as_ref() == Some(caller.principal()))
    }

    /// Counts a request against `caller`'s requests-per-second quota (with authentication off
    /// everyone is `anonymous` and shares the default quota).
    ///
    /// # Errors
    /// Over quota: nothing of the request may happen.
    pub fn admit_request(&self, caller: &Caller) -> Result<(), QuotaExceeded> {
        self.quotas.request(caller.principal())
    }

    /// A slot for an SSE stream or a long poll of `caller`, held until it ends.
    ///
    /// # Errors
    /// The caller holds as many as `max_streams_per_principal` allows.
    pub fn open_stream(&self, caller: &Caller) -> Result<StreamSlot, TooManyStreams> {
        self.streams.acquire(caller.principal())
    }

    /// Takes `bytes` of `caller`'s produce quota before a produce.
    ///
    /// # Errors
    /// Over quota: nothing may be appended.
    pub fn admit_produce(&self, caller: &Caller, bytes: u64) -> Result<(), QuotaExceeded> {
        self.quotas.produce(caller.principal(), bytes)
    }

    /// Takes `caller`'s fetch quota for a read of up to `max_bytes`; the `max_bytes` the read
    /// may use (at most one second of quota).
    ///
    /// # Errors
    /// Over quota.
    pub fn admit_fetch(&self, caller: &Caller, max_bytes: u64) -> Result<u64, QuotaExceeded> {
        self.quotas.fetch(caller.principal(), max_bytes)
    }

    /// Reads the key and ACL files again if another process changed them.
    pub fn reload_security(&self) {
        for (what, result) in [
            ("API keys", self.keys.reload_if_changed()),
            ("ACLs", self.authorizer.reload_if_changed()),
        ] {
            match result {
                Ok(true) => tracing::info!("reloaded {what}"),
                Ok(false) => {}
                Err(error) => {
                    tracing::error!(%error, "cannot reload {what}; the previous ones stay in force")
                }
            }
        }
    }

    /// Refuses `operation` on `resource` unless `caller` may do it. Called before the resource
    /// is looked up, so a refused caller learns nothing about whether it exists.
    ///
    /// # Errors
    /// [`LookupError::Forbidden`].
    pub fn authorize(
        &self,
        caller: &Caller,
        operation: Operation,
        resource: Resource,
    ) -> Result<(), LookupError> {
        Ok(self.authorizer.check(caller, operation, resource)?)
    }

    /// Whether `caller` may do `operation` on `resource` (for listings, which leave out what the
    /// caller may not describe instead of failing).
    pub fn may(&self, caller: &Caller, operation: Operation, resource: &Resource) -> bool {
        self.authorizer.allows(caller, operation, resource)
    }

    /// A topic `caller` may do `operation` on.
    ///
    /// # Errors
    /// [`LookupError::Forbidden`] or [`LookupError::TopicNotFound`].
    pub fn topic_for(
        &self,
        caller: &Caller,
        operation: Operation,
        name: &str,
    ) -> Result<Arc<Topic>, LookupError> {
        self.authorize(caller, operation, Resource::topic(name))?;
        self.topic(name)
    }

    /// A topic clients may change that `caller` may do `operation` on.
    ///
    /// # Errors
    /// [`LookupError::Forbidden`], [`LookupError::TopicNotFound`] or
    /// [`LookupError::InternalTopic`].
    pub fn writable_topic_for(
        &self,
        caller: &Caller,
        operation: Operation,
        name: &str,
    ) -> Result<WritableTopic, LookupError> {
        self.authorize(caller, operation, Resource::topic(name))?;
        self.writable_topic(name)
    }

    /// The topic catalog (background tasks and topic listings read it).
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// Consumer groups' committed offsets, for the tiering sweep that archives them.
    pub fn offset_store(&self) -> &Arc<OffsetStore> {
        &self.offsets
    }

    /// Tiered storage.
    pub fn tiering(&self) -> &Arc<Tiering> {
        &self.tiering
    }

    /// The time source.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Server settings.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// Whether `topic` is still the catalog's topic of that name (not deleted, not re-created):
    /// a stream that follows a topic ends when it is not.
    pub fn is_current(&self, topic: &Arc<Topic>) -> bool {
        self.catalog
            .get(topic.name())
            .is_some_and(|current| Arc::ptr_eq(&current, topic))
    }

    /// Whether shutdown has started.
    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// A receiver that turns true when shutdown starts.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.clone()
    }

    /// A topic.
    ///
    /// # Errors
    /// [`LookupError::TopicNotFound`].
    pub(crate) fn topic(&self, name: &str) -> Result<Arc<Topic>, LookupError> {
        self.catalog
            .get(name)
            .ok_or_else(|| LookupError::TopicNotFound {
                topic: name.to_string(),
            })
    }

    /// A topic that clients may change: not one of the server's internal topics.
    ///
    /// # Errors
    /// [`LookupError::TopicNotFound`] or [`LookupError::InternalTopic`].
    pub(crate) fn writable_topic(&self, name: &str) -> Result<WritableTopic, LookupError> {
        let topic = self.topic(name)?;
        if topic.is_internal() {
            return Err(LookupError::InternalTopic {
                topic: name.to_string(),
            });
        }
        Ok(WritableTopic(topic))
    }

    /// A partition's local log.
    ///
    /// # Errors
    /// When the topic or partition does not exist.
    pub fn partition(&self, topic: &str, partition: u32) -> Result<Arc<Partition>, LookupError> {
        local_partition(self.topic(topic)?.as_ref(), partition)
    }

    /// A partition as readers see it: the local log, plus the bucket for tiered topics.
    ///
    /// # Errors
    /// An unknown partition; a tiered partition whose manifest cannot be loaded.
    pub async fn reader(
        &self,
        topic: &Arc<Topic>,
        partition: u32,
    ) -> Result<PartitionReader, ReaderOpenError> {
        let log = local_partition(topic, partition)?;
        if !topic.config().remote_storage_enable {
            return Ok(PartitionReader::local(log));
        }
        let remote = self
            .tiering
            .remote(topic.name(), partition, log.offsets().log_start_offset)
            .await?;
        let segments = TieredSegments::new(Arc::clone(&self.tiering), remote);
        Ok(PartitionReader::tiered(log, Arc::new(segments)))
    }
}

impl Broker {
    /// The first readable offset of each partition of `topic`: for a tiered topic the bucket's
    /// start, which is below the local disk's once old segments were uploaded and removed
    /// locally. A partition whose manifest cannot be loaded shows its local start.
    pub async fn log_starts(&self, topic: &Arc<Topic>) -> Vec<u64> {
        let mut starts = Vec::new();
        for number in 0..topic.partition_count() {
            starts.push(self.log_start(topic, number).await);
        }
        starts
    }

    /// [`Broker::log_starts`] of one partition (0 for a partition the topic does not have).
    pub async fn log_start(&self, topic: &Arc<Topic>, number: u32) -> u64 {
        let Some(partition) = topic.partition(number) else {
            return 0;
        };
        let local = partition.offsets().log_start_offset;
        if !topic.config().remote_storage_enable {
            return local;
        }
        self.reader(topic, number)
            .await
            .map_or(local, |reader| reader.offsets().log_start_offset)
    }
}

/// A topic [`Broker::writable_topic`] checked: operations that change a topic take this, so
/// the internal-topic rule cannot be skipped and is checked once per request.
#[derive(Debug, Clone)]
pub struct WritableTopic(Arc<Topic>);

impl WritableTopic {
    /// The topic.
    pub fn topic(&self) -> &Arc<Topic> {
        &self.0
    }
}

impl std::ops::Deref for WritableTopic {
    type Target = Arc<Topic>;

    fn deref(&self) -> &Arc<Topic> {
        &self.0
    }
}

/// Why [`Broker::reader`] could not open a partition.
#[derive(Debug, thiserror::Error)]
pub enum ReaderOpenError {
    /// No such topic or partition.
    #[error(transparent)]
    Lookup(#[from] LookupError),
    /// The partition's remote part could not be loaded.
    #[error(transparent)]
    Remote(#[from] TieringError),
}

/// A topic's partition, or [`LookupError::PartitionNotFound`].
///
/// # Errors
/// When the topic has no such partition.
pub fn local_partition(topic: &Topic, partition: u32) -> Result<Arc<Partition>, LookupError> {
    topic
        .partition(partition)
        .ok_or_else(|| partition_not_found(topic, partition))
}

/// [`LookupError::PartitionNotFound`] for `topic`.
pub fn partition_not_found(topic: &Topic, partition: u32) -> LookupError {
    LookupError::PartitionNotFound {
        topic: topic.name().to_string(),
        partition,
        count: topic.partition_count(),
    }
}

//! Topic operations: create, configure, grow, delete, and where each segment of a partition
//! lives (local disk, bucket, both).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use strata_tiering::chunk_cache::CacheStats;

use super::error::LookupError;
use super::error::TopicError;
use super::{Broker, local_partition};
use crate::names::TopicName;
use crate::security::{Caller, Operation, Resource};
use crate::topics::catalog::{CatalogError, Topic};

/// How long a create waits for a deleted topic of the same name to leave tiered storage
/// before it answers `storage_unavailable`.
const DELETION_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where a segment's records are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentPlace {
    /// Only on the local disk.
    Local,
    /// Only in the bucket.
    Remote,
    /// Uploaded and still on the local disk.
    Both,
}

/// One segment of a partition, local or remote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentView {
    /// Its first offset.
    pub base_offset: u64,
    /// The offset after its last one.
    pub end_offset: u64,
    /// Bytes.
    pub size_bytes: u64,
    /// Its newest record's timestamp, if known.
    pub max_timestamp: Option<i64>,
    /// Where it is.
    pub place: SegmentPlace,
    /// Whether appends go to it.
    pub active: bool,
}

/// A partition's segments, oldest first.
#[derive(Debug, Clone)]
pub struct SegmentsView {
    /// The segments.
    pub segments: Vec<SegmentView>,
    /// Whether the topic is tiered.
    pub tiered: bool,
    /// The cold-read cache, for tiered topics.
    pub cache: Option<CacheStats>,
}

impl Broker {
    /// Every topic `caller` may describe, internal ones included.
    pub fn list_topics(&self, caller: &Caller) -> Vec<Arc<Topic>> {
        self.catalog
            .list()
            .into_iter()
            .filter(|t| self.may(caller, Operation::Describe, &Resource::topic(t.name())))
            .collect()
    }

    /// A topic's description. Needs `describe` on the topic.
    ///
    /// # Errors
    /// Not allowed, or no such topic.
    pub fn describe_topic(&self, caller: &Caller, name: &str) -> Result<Arc<Topic>, LookupError> {
        self.topic_for(caller, Operation::Describe, name)
    }

    /// Creates a topic. Needs `create` on the topic.
    ///
    /// # Errors
    /// Not allowed; invalid name, count or settings; an existing topic; storage failures.
    pub async fn create_topic(
        &self,
        caller: &Caller,
        name: &str,
        partitions: u32,
        configs: &BTreeMap<String, Value>,
    ) -> Result<Arc<Topic>, TopicError> {
        self.authorize(caller, Operation::Create, Resource::topic(name))?;
        let name = TopicName::parse(name).map_err(CatalogError::from)?;
        self.refuse_lock_without_worm(configs)?;
        // A deleted topic of this name may still be leaving the bucket: its manifest would
        // become the new topic's.
        if !self
            .tiering
            .deletion_finished(name.as_str(), DELETION_WAIT)
            .await
        {
            return Err(TopicError::StillDeleting(name.as_str().to_string()));
        }
        // Offsets left by a deleted topic of this name (its delete could not tombstone them):
        // they would make groups skip the new topic's first records.
        self.offsets
            .forget_topics(|topic| topic == name.as_str(), self.clock.now_ms())
            .await?;
        let created = self.catalog.create(&name, partitions, configs).await?;
        // Groups subscribed to a topic of this name (deleted before) get its partitions now.
        self.expire_members();
        Ok(created)
    }

    /// Changes a topic's settings. Needs `alter` on the topic.
    ///
    /// # Errors
    /// Not allowed, unknown or internal topic, invalid settings, storage failures.
    pub async fn update_topic_configs(
        &self,
        caller: &Caller,
        name: &str,
        configs: &BTreeMap<String, Value>,
    ) -> Result<Arc<Topic>, TopicError> {
        self.authorize(caller, Operation::Alter, Resource::topic(name))?;
        self.refuse_lock_without_worm(configs)?;
        Ok(self.catalog.update_configs(name, configs).await?)
    }

    /// Grows a topic to `partitions` partitions. Needs `alter` on the topic.
    ///
    /// # Errors
    /// Not allowed, unknown or internal topic, a count that does not grow or exceeds the limit.
    pub async fn add_partitions(
        &self,
        caller: &Caller,
        name: &str,
        partitions: u32,
    ) -> Result<Arc<Topic>, TopicError> {
        self.authorize(caller, Operation::Alter, Resource::topic(name))?;
        Ok(self.catalog.add_partitions(name, partitions).await?)
    }

    /// Deletes a topic, locally and in the bucket. Needs `delete` on the topic.
    ///
    /// # Errors
    /// Not allowed, unknown or internal topic, storage failures.
    pub async fn delete_topic(&self, caller: &Caller, name: &str) -> Result<(), TopicError> {
        self.authorize(caller, Operation::Delete, Resource::topic(name))?;
        // Recorded before the topic goes, so a crash cannot forget its objects in the bucket
        // (the bucket may hold the topic even if tiering is off now).
        let marked = self.tiering.begin_deletion(name)?;
        if let Err(error) = self.catalog.delete(name).await {
            if marked {
                self.tiering.abandon_deletion(name);
            }
            return Err(error.into());
        }
        self.tiering.delete_topic(name).await;
        self.coordinator.forget_topic(name);
        // Groups that read it rebalance now, as in Kafka, not at the next background check:
        // until then their members would still be told they own its partitions.
        self.expire_members();
        // Groups' offsets go with the topic, as in Kafka. Should this fail, creating a topic
        // of the same name (or the next start) forgets them before anyone can use them.
        if let Err(error) = self
            .offsets
            .forget_topics(|topic| topic == name, self.clock.now_ms())
            .await
        {
            tracing::warn!(topic = name, %error, "could not delete the groups' offsets of a deleted topic");
        }
        Ok(())
    }

    /// Where each segment of a partition lives, oldest first. Needs `describe` on the topic.
    ///
    /// # Errors
    /// Not allowed, unknown topic or partition; an unloadable manifest.
    pub async fn segments(
        &self,
        caller: &Caller,
        topic: &str,
        partition: u32,
    ) -> Result<SegmentsView, TopicError> {
        let topic = self.topic_for(caller, Operation::Describe, topic)?;
        let log = local_partition(&topic, partition)?;
        let local = log.segments();
        let log_end = log.offsets().log_end_offset;
        let manifest = match topic.config().remote_storage_enable {
            true => {
                let start = log.offsets().log_start_offset;
                let remote = self.tiering.remote(topic.name(), partition, start).await?;
                Some(remote.manifest())
            }
            false => None,
        };
        let uploaded_end = manifest.as_ref().map_or(0, |m| m.next_offset());
        let local_start = local.first().map_or(log_end, |s| s.base_offset);
        let mut segments = Vec::new();
        for remote in manifest
            .iter()
            .flat_map(|m| m.segments.iter())
            .filter(|s| s.base_offset < local_start)
        {
            segments.push(SegmentView {
                base_offset: remote.base_offset,
                end_offset: remote.last_offset + 1,
                size_bytes: remote.size,
                max_timestamp: Some(remote.max_timestamp),
                place: SegmentPlace::Remote,
                active: false,
            });
        }
        for (i, segment) in local.iter().enumerate() {
            let end_offset = local.get(i + 1).map_or(log_end, |next| next.base_offset);
            let active = i + 1 == local.len();
            let uploaded = manifest.is_some() && !active && end_offset <= uploaded_end;
            segments.push(SegmentView {
                base_offset: segment.base_offset,
                end_offset,
                size_bytes: segment.durable_size,
                max_timestamp: segment.max_timestamp,
                place: if uploaded {
                    SegmentPlace::Both
                } else {
                    SegmentPlace::Local
                },
                active,
            });
        }
        Ok(SegmentsView {
            segments,
            tiered: manifest.is_some(),
            cache: manifest.as_ref().map(|_| self.tiering.cache_stats()),
        })
    }

    fn refuse_lock_without_worm(
        &self,
        configs: &BTreeMap<String, Value>,
    ) -> Result<(), TopicError> {
        let locks = configs
            .get("remote_object_lock_days")
            .and_then(|v| {
                v.as_f64()
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            })
            .is_some_and(|days| days > 0.0);
        if locks && !self.tiering.can_lock_objects() {
            return Err(TopicError::LockWithoutWorm);
        }
        Ok(())
    }
}

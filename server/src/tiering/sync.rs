//! The background sweep of tiered topics: publish topic metadata, upload closed segments and
//! then the manifest that lists them, apply local retention (only to uploaded segments) and
//! total retention (remote segments leave the manifest first, their objects are deleted after),
//! and delete orphans left by interrupted uploads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use strata_tiering::layout::{self, SEGMENT_KINDS};
use strata_tiering::manifest::{self, Manifest, ManifestError, ObjectRef, RemoteSegment};
use strata_tiering::object_lock::{Retention, RetentionMode};
use strata_tiering::upload::{UploadOptions, UploadedObject, upload_all, upload_bytes};

use super::{RemotePartition, Tiering, TieringError};
use crate::log::retention::{RetentionCandidate, RetentionPolicy, retention_cut};
use crate::log::{ClosedSegment, Partition};
use crate::topics::catalog::{Catalog, Topic};
use crate::topics::config::{ObjectLockMode, TopicConfig};

/// Partitions a sweep syncs at once (each uploads up to three files at a time).
const PARTITIONS_IN_FLIGHT: usize = 4;

/// Local files of a segment uploaded as they are (log, offset index, time index), all at once.
const SEGMENT_FILES: usize = 3;

/// Format of `topic.json` in the bucket.
pub const REMOTE_TOPIC_FORMAT: u32 = 1;

/// A topic's metadata in the bucket: what a restore needs to recreate it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteTopic {
    /// [`REMOTE_TOPIC_FORMAT`].
    pub format: u32,
    /// Topic name.
    pub name: String,
    /// Partition count.
    pub partitions: u32,
    /// Topic configs, as the API shows them.
    pub configs: BTreeMap<String, Value>,
}

/// Sweeps between two orphan scans (listing a partition's objects is not free).
const ORPHAN_SCAN_EVERY: u64 = 12;

/// Runs [`Tiering::sweep`] every interval until the task is dropped.
pub async fn run(tiering: Arc<Tiering>, catalog: Arc<Catalog>) {
    let mut ticker = tokio::time::interval(Duration::from_millis(tiering.interval_ms().max(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sweeps: u64 = 0;
    loop {
        ticker.tick().await;
        tiering
            .sweep(&catalog, sweeps.is_multiple_of(ORPHAN_SCAN_EVERY))
            .await;
        sweeps += 1;
    }
}

impl Tiering {
    /// One pass over every tiered topic; errors are logged per partition and retried next time.
    /// Up to [`PARTITIONS_IN_FLIGHT`] partitions sync at once, so one slow upload does not hold
    /// back every other partition, while memory and connections stay bounded.
    pub async fn sweep(&self, catalog: &Catalog, scan_orphans: bool) {
        let mut jobs = Vec::new();
        for topic in catalog.list() {
            let config = Arc::new(topic.config());
            if !config.remote_storage_enable {
                continue;
            }
            if let Err(error) = self.publish_topic(&topic).await {
                tracing::warn!(topic = topic.name(), %error, "could not publish topic metadata");
            }
            for (number, partition) in topic.partitions().iter().enumerate() {
                let number = u32::try_from(number).unwrap_or(u32::MAX);
                jobs.push((
                    Arc::clone(&topic),
                    number,
                    Arc::clone(partition),
                    Arc::clone(&config),
                ));
            }
        }
        futures::stream::iter(jobs)
            .for_each_concurrent(PARTITIONS_IN_FLIGHT, |(topic, number, partition, config)| async move {
                if let Err(error) = self
                    .sync_partition(topic.name(), number, &partition, &config, scan_orphans)
                    .await
                {
                    tracing::warn!(topic = topic.name(), partition = number, %error, "tiering sweep failed");
                }
            })
            .await;
    }

    /// Writes `topics/{topic}/topic.json` when the topic's configs or partitions changed.
    async fn publish_topic(&self, topic: &Topic) -> Result<(), TieringError> {
        let remote = RemoteTopic {
            format: REMOTE_TOPIC_FORMAT,
            name: topic.name().to_string(),
            partitions: topic.partition_count(),
            configs: topic.config_map(),
        };
        let body = serde_json::to_vec_pretty(&remote).unwrap_or_default();
        if self.published_topics.lock().get(topic.name()) == Some(&body) {
            return Ok(());
        }
        let key = layout::topic_file(topic.name());
        self.objects
            .put(&key, PutPayload::from(Bytes::from(body.clone())))
            .await?;
        self.published_topics
            .lock()
            .insert(topic.name().to_string(), body);
        Ok(())
    }

    /// Uploads, retention and cleanup for one partition.
    ///
    /// # Errors
    /// The first failure; what succeeded before it stays done.
    pub async fn sync_partition(
        &self,
        topic: &str,
        number: u32,
        partition: &Arc<Partition>,
        config: &TopicConfig,
        scan_orphans: bool,
    ) -> Result<(), TieringError> {
        let local_start = partition.offsets().log_start_offset;
        let remote = self.remote(topic, number, local_start).await?;
        let _work = remote.work.lock().await;
        if let Some(reason) = remote.fenced() {
            return Err(TieringError::Fenced {
                topic: topic.to_string(),
                partition: number,
                reason,
            });
        }
        self.upload_closed(&remote, partition, config).await?;
        let now = self.clock.now_ms();
        let uploaded_end = remote.manifest().next_offset();
        if let Some(cut) = partition.retention_cut_below(
            config.effective_local_retention_ms(),
            config.effective_local_retention_bytes(),
            now,
            uploaded_end,
        ) {
            partition
                .delete_records(cut)
                .await
                .map_err(|e| TieringError::Local {
                    path: partition.dir().display().to_string(),
                    reason: e.to_string(),
                })?;
            tracing::info!(
                topic,
                partition = number,
                local_start = cut,
                "local retention"
            );
        }
        self.total_retention(&remote, partition, config, now)
            .await?;
        self.delete_pending(&remote, now).await?;
        if scan_orphans {
            self.delete_orphans(&remote, now).await?;
        }
        Ok(())
    }

    /// Uploads every closed segment the manifest does not list yet, oldest first, each followed
    /// by a manifest that lists it.
    async fn upload_closed(
        &self,
        remote: &RemotePartition,
        partition: &Partition,
        config: &TopicConfig,
    ) -> Result<(), TieringError> {
        for segment in partition.closed_segments() {
            let manifest = remote.manifest();
            let next = manifest.next_offset();
            if segment.end_offset <= next || segment.snapshot.durable_size == 0 {
                continue;
            }
            let uploaded = self.upload_segment(remote, &segment, config).await?;
            let mut successor = manifest.successor(&self.writer);
            if segment.snapshot.base_offset > next {
                // Records between the manifest's end and this segment are gone locally (deleted
                // by delete-records before they were uploaded): the remote log starts after them.
                successor.cut_below(segment.snapshot.base_offset, self.clock.now_ms());
            }
            successor.segments.push(uploaded);
            self.store_manifest(remote, successor).await?;
        }
        Ok(())
    }

    /// Writes the next manifest; losing the race to another writer stops tiering here.
    pub(crate) async fn store_manifest(
        &self,
        remote: &RemotePartition,
        manifest: Manifest,
    ) -> Result<(), TieringError> {
        match manifest::store_next(self.objects.as_ref(), &manifest).await {
            Ok(()) => {
                remote.set_manifest(manifest);
                Ok(())
            }
            Err(ManifestError::LandedEarlier(existing)) => {
                tracing::info!(
                    topic = remote.topic,
                    partition = remote.partition,
                    generation = existing.generation,
                    "adopting our own manifest whose create reported an error"
                );
                remote.set_manifest((*existing).clone());
                // The change is redone on top of it by the next sweep.
                Err(ManifestError::LandedEarlier(existing).into())
            }
            Err(error @ ManifestError::Fenced { .. }) => {
                remote.fence(error.to_string());
                Err(error.into())
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Uploads a segment's three files and its chunk digests, then locks them if the topic
    /// asks for Object Lock.
    async fn upload_segment(
        &self,
        remote: &RemotePartition,
        segment: &ClosedSegment,
        config: &TopicConfig,
    ) -> Result<RemoteSegment, TieringError> {
        let base = segment.snapshot.base_offset;
        let keys: Vec<Path> = SEGMENT_KINDS
            .iter()
            .map(|kind| {
                layout::segment_object(&remote.topic, remote.partition, base, &self.writer, kind)
            })
            .collect();
        let options = UploadOptions::default();
        let files = segment
            .paths
            .iter()
            .cloned()
            .zip(keys.iter().cloned())
            .collect();
        // Each upload digests its file's chunks in the pass that sends it: the log's are kept.
        let uploaded = upload_all(self.objects.as_ref(), files, &options, SEGMENT_FILES).await?;
        let log_digests = &uploaded[0].chunk_digests;
        let chunk_bytes = log_digests.chunk_bytes;
        let chunks = upload_bytes(
            self.objects.as_ref(),
            &keys[3],
            log_digests.encode(),
            &options,
        )
        .await?;
        let refs: Vec<ObjectRef> = uploaded
            .iter()
            .chain([&chunks])
            .map(UploadedObject::object_ref)
            .collect();
        let now = self.clock.now_ms();
        let retain_until_ms = self.lock_objects(&keys, config, now).await?;
        let [log, index, time_index, chunks]: [ObjectRef; 4] = refs
            .try_into()
            .map_err(|_| local_error(&segment.paths[0], "upload lost an object"))?;
        Ok(RemoteSegment {
            base_offset: base,
            last_offset: segment.end_offset - 1,
            first_timestamp: segment.first_timestamp.unwrap_or_default(),
            max_timestamp: segment.snapshot.max_timestamp.unwrap_or_default(),
            size: log.size,
            uploaded_at_ms: now,
            retain_until_ms,
            chunk_bytes,
            log,
            index,
            time_index,
            chunks,
        })
    }

    /// Sets Object Lock retention on the objects when the topic configures it.
    async fn lock_objects(
        &self,
        keys: &[Path],
        config: &TopicConfig,
        now_ms: i64,
    ) -> Result<Option<i64>, TieringError> {
        if config.remote_object_lock_days <= 0 {
            return Ok(None);
        }
        let Some(lock) = &self.lock else {
            return Err(TieringError::Lock(
                "remote_object_lock_days needs an S3 bucket with Object Lock enabled; the \
                 local folder store cannot lock objects"
                    .to_string(),
            ));
        };
        let until_ms =
            now_ms.saturating_add(config.remote_object_lock_days.saturating_mul(86_400_000));
        let mode = match config.remote_object_lock_mode {
            ObjectLockMode::Governance => RetentionMode::Governance,
            ObjectLockMode::Compliance => RetentionMode::Compliance,
        };
        let retain_until = from_epoch_ms(until_ms);
        for key in keys {
            lock.set_retention(&self.store.key(key), None, Retention { mode, retain_until })
                .await
                .map_err(|e| TieringError::Lock(e.to_string()))?;
        }
        Ok(Some(until_ms))
    }

    /// Removes remote segments past `retention_ms` / `retention_bytes` of the whole log from
    /// the manifest (their objects are queued for deletion). Only segments no longer held
    /// locally leave this way; local ones go through local retention.
    async fn total_retention(
        &self,
        remote: &RemotePartition,
        partition: &Partition,
        config: &TopicConfig,
        now: i64,
    ) -> Result<(), TieringError> {
        if config.retention_ms < 0 && config.retention_bytes < 0 {
            return Ok(());
        }
        let manifest = remote.manifest();
        let local_start = partition.offsets().log_start_offset;
        let local_bytes: u64 = partition.segments().iter().map(|s| s.durable_size).sum();
        let remote_only: Vec<&RemoteSegment> = manifest
            .segments
            .iter()
            .filter(|s| s.last_offset < local_start)
            .collect();
        let total = local_bytes + remote_only.iter().map(|s| s.size).sum::<u64>();
        // A remote segment ends where the next one begins (compaction may leave a gap), the
        // last one after its last offset.
        let candidates = remote_only
            .iter()
            .enumerate()
            .map(|(i, segment)| RetentionCandidate {
                end_offset: remote_only
                    .get(i + 1)
                    .map_or(segment.last_offset + 1, |next| next.base_offset),
                size: segment.size,
                max_timestamp: Some(segment.max_timestamp),
            });
        let policy = RetentionPolicy {
            retention_ms: config.retention_ms,
            retention_bytes: config.retention_bytes,
        };
        let cut = retention_cut(candidates, total, policy, now);
        let Some(cut) = cut.filter(|c| *c > manifest.log_start_offset) else {
            return Ok(());
        };
        let mut successor = manifest.successor(&self.writer);
        let removed = successor.cut_below(cut, now);
        self.store_manifest(remote, successor).await?;
        tracing::info!(topic = %remote.topic, partition = remote.partition, removed, log_start = cut, "remote retention");
        Ok(())
    }

    /// Deletes objects the manifest dropped, once their lock allows; a refused delete stays
    /// queued and is retried on the next sweep.
    async fn delete_pending(&self, remote: &RemotePartition, now: i64) -> Result<(), TieringError> {
        let manifest = remote.manifest();
        if manifest.pending_deletes.is_empty() {
            return Ok(());
        }
        let mut still_pending = Vec::new();
        for pending in &manifest.pending_deletes {
            if pending.not_before_ms > now {
                still_pending.push(pending.clone());
                continue;
            }
            let mut failed = Vec::new();
            for key in &pending.keys {
                match self.delete_object(&Path::from(key.as_str())).await {
                    Ok(()) => {}
                    Err(TieringError::DeleteVersion(error)) if error.is_locked() => {
                        // Expected when the clocks of S3 and Strata disagree about the date.
                        tracing::info!(key, %error, "a remote object is still locked; retrying later");
                        failed.push(key.clone());
                    }
                    Err(error) => {
                        tracing::warn!(key, %error, "could not delete a remote object; retrying later");
                        failed.push(key.clone());
                    }
                }
            }
            if !failed.is_empty() {
                still_pending.push(strata_tiering::manifest::PendingDelete {
                    keys: failed,
                    not_before_ms: pending.not_before_ms,
                });
            }
        }
        if still_pending != manifest.pending_deletes {
            let mut successor = manifest.successor(&self.writer);
            successor.pending_deletes = still_pending;
            self.store_manifest(remote, successor).await?;
        }
        Ok(())
    }

    async fn delete_orphans(&self, remote: &RemotePartition, now: i64) -> Result<(), TieringError> {
        let manifest = remote.manifest();
        let orphans = manifest::find_orphans(
            self.objects.as_ref(),
            &manifest,
            now,
            self.settings.orphan_grace_ms,
        )
        .await?;
        for key in orphans {
            tracing::info!(key = %key, "deleting an orphaned object");
            self.delete_object(&key).await?;
        }
        Ok(())
    }

    /// Delete-records on a tiered partition: the remote log start moves as well, and remote
    /// segments wholly below it leave the manifest.
    ///
    /// # Errors
    /// Store failures; the local part has been applied by then.
    pub async fn delete_records(
        &self,
        topic: &str,
        number: u32,
        partition: &Partition,
        before: u64,
    ) -> Result<(), TieringError> {
        let remote = self
            .remote(topic, number, partition.offsets().log_start_offset)
            .await?;
        let _work = remote.work.lock().await;
        let manifest = remote.manifest();
        if before <= manifest.log_start_offset {
            return Ok(());
        }
        let mut successor = manifest.successor(&self.writer);
        successor.cut_below(before, self.clock.now_ms());
        self.store_manifest(&remote, successor).await
    }
}

fn local_error(path: &std::path::Path, reason: &str) -> TieringError {
    TieringError::Local {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// Milliseconds since the epoch of a `SystemTime` (for logs and tests).
pub fn epoch_ms(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The `SystemTime` of milliseconds since the epoch (the clock's unit); times before 1970 become
/// the epoch.
pub fn from_epoch_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

//! The background sweep of tiered topics: publish topic metadata, then per partition upload
//! closed segments (`upload.rs`), apply local retention (only to uploaded segments) and total
//! retention (`retention.rs`), and delete orphans left by interrupted uploads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::StreamExt;
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use strata_tiering::layout::{self};
use strata_tiering::manifest::{self, Manifest, ManifestError};

use super::archive::Change;
use super::stats::TieringStats;
use super::{RemotePartition, Tiering, TieringError};
use crate::groups::offsets::OffsetStore;
use crate::log::Partition;
use crate::topics::catalog::{Catalog, Topic};
use crate::topics::config::TopicConfig;
use crate::topics::holds::LegalHold;

/// Partitions a sweep syncs at once (each uploads up to three files at a time).
const PARTITIONS_IN_FLIGHT: usize = 4;

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
    /// Legal holds in force (absent when none), so a restore keeps them in force.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub legal_holds: Vec<LegalHold>,
    /// The next hold id, so a restored topic never reuses one (absent when no hold was placed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_legal_hold_id: Option<u64>,
}

/// Sweeps between two orphan scans (listing a partition's objects is not free).
const ORPHAN_SCAN_EVERY: u64 = 12;

/// Runs [`Tiering::sweep`], then [`Tiering::publish_group_offsets`] and
/// [`Tiering::publish_acls`], every interval until
/// `stop` turns true. A sweep that has begun is finished first: cutting one between its tiles
/// and its signed checkpoint would leave a bucket that fails `strata verify` until the next
/// start repairs it.
pub async fn run(
    tiering: Arc<Tiering>,
    catalog: Arc<Catalog>,
    offsets: Arc<OffsetStore>,
    acls: Arc<crate::security::authorizer::Authorizer>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let interval = Duration::from_millis(tiering.interval_ms().max(1));
    let mut sweeps: u64 = 0;
    every_interval_until(interval, stop, || {
        let scan_orphans = sweeps.is_multiple_of(ORPHAN_SCAN_EVERY);
        sweeps += 1;
        let (tiering, catalog, offsets, acls) = (&tiering, &catalog, &offsets, &acls);
        async move {
            tiering.sweep(catalog, scan_orphans).await;
            if let Err(error) = tiering.publish_group_offsets(catalog, offsets).await {
                tracing::warn!(%error, "could not archive consumer-group offsets");
            }
            if let Err(error) = tiering.publish_acls(acls.stored_rules()).await {
                tracing::warn!(%error, "could not archive the ACL rules");
            }
        }
    })
    .await;
}

/// Runs `work` every `interval` (the first at once) until `stop` turns true; `stop` is only
/// looked at between runs, so a run that has begun always completes.
pub(crate) async fn every_interval_until<F, Fut>(
    interval: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
    mut work: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.wait_for(|stopping| *stopping) => return,
        }
        if *stop.borrow() {
            return;
        }
        work().await;
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
                    .sync_partition(&topic, number, &partition, &config, scan_orphans)
                    .await
                {
                    TieringStats::add(&self.stats.sync_failures, 1);
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
            legal_holds: topic.legal_holds(),
            next_legal_hold_id: Some(topic.next_hold_id()).filter(|id| *id > 0),
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
        held_topic: &Topic,
        number: u32,
        partition: &Arc<Partition>,
        config: &TopicConfig,
        scan_orphans: bool,
    ) -> Result<(), TieringError> {
        let topic = held_topic.name();
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
        // What a crash kept from the log last time, before anything new happens.
        self.record(&remote, &Change::recovered()).await?;
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
        self.sync_legal_holds(&remote, &held_topic.legal_holds())
            .await?;
        let held = held_topic.held_from(number);
        self.total_retention(&remote, partition, config, &held, now)
            .await?;
        self.delete_pending(&remote, now).await?;
        if scan_orphans {
            self.delete_orphans(&remote, now).await?;
        }
        Ok(())
    }

    /// Writes the next manifest; losing the race to another writer stops tiering here.
    /// Then records the change in the partition's transparency log.
    pub(crate) async fn store_manifest(
        &self,
        remote: &RemotePartition,
        manifest: Manifest,
        change: &Change,
    ) -> Result<(), TieringError> {
        match manifest::store_next(self.objects.as_ref(), &manifest).await {
            Ok(()) => {
                TieringStats::add(&self.stats.manifest_writes, 1);
                remote.set_manifest(manifest);
                self.record(remote, change).await
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
                TieringStats::add(&self.stats.manifest_fences, 1);
                remote.fence(error.to_string());
                Err(error.into())
            }
            Err(error) => Err(error.into()),
        }
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

#[cfg(test)]
mod stop_tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use super::every_interval_until;

    /// A stop that arrives during a run waits for it; one that arrives while idle ends the
    /// loop at once.
    #[tokio::test(start_paused = true)]
    async fn a_stop_lets_the_running_sweep_finish() {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let (started, finished) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let task = tokio::spawn({
            let (started, finished) = (Arc::clone(&started), Arc::clone(&finished));
            every_interval_until(Duration::from_secs(10), stopped, move || {
                let (started, finished) = (Arc::clone(&started), Arc::clone(&finished));
                async move {
                    started.fetch_add(1, Ordering::SeqCst);
                    #[allow(clippy::disallowed_methods)]
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    finished.fetch_add(1, Ordering::SeqCst);
                }
            })
        });
        #[allow(clippy::disallowed_methods)]
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            started.load(Ordering::SeqCst),
            1,
            "the first run starts at once"
        );
        stop.send(true).unwrap();
        task.await.unwrap();
        assert_eq!(
            finished.load(Ordering::SeqCst),
            1,
            "the running sweep was finished"
        );
        assert_eq!(started.load(Ordering::SeqCst), 1, "and no other began");

        let (stop, stopped) = tokio::sync::watch::channel(false);
        let runs = Arc::new(AtomicU32::new(0));
        let task = tokio::spawn({
            let runs = Arc::clone(&runs);
            every_interval_until(Duration::from_secs(10), stopped, move || {
                runs.fetch_add(1, Ordering::SeqCst);
                async {}
            })
        });
        #[allow(clippy::disallowed_methods)]
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_millis(1), task)
            .await
            .expect("an idle loop stops at once")
            .unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}

//! Retention in the bucket: total retention of a tiered partition through the engine's one
//! retention rule (remote segments leave the manifest first, their objects are deleted after,
//! once their lock allows), orphans of interrupted uploads, and the bucket's part of
//! delete-records.

use object_store::path::Path;
use strata_tiering::manifest::{self, RemoteSegment};
use strata_tiering::object_lock::{DeleteVersionError, Protection};

use super::archive::Change;
use super::{RemotePartition, Tiering, TieringError};
use crate::log::Partition;
use crate::log::retention::{
    HeldFrom, RetentionCandidate, RetentionPolicy, hold_floor, retention_cut,
};
use crate::log::segments::{SegmentMap, SegmentSpan, Tier};
use crate::topics::config::TopicConfig;

/// The segment map of a tiered partition: the bucket's segments below the local start, then
/// the local ones.
fn whole_log_map(remote_only: &[&RemoteSegment], partition: &Partition) -> SegmentMap {
    let remote: Vec<SegmentSpan> = remote_only
        .iter()
        .map(|segment| SegmentSpan {
            base_offset: segment.base_offset,
            next_offset: segment.last_offset + 1,
            max_timestamp: Some(segment.max_timestamp),
            tier: Tier::Remote,
        })
        .collect();
    let local_start = partition.offsets().log_start_offset;
    SegmentMap::new(&partition.segment_spans(), local_start, &remote)
}

impl Tiering {
    /// Removes remote segments past `retention_ms` / `retention_bytes` of the whole log from
    /// the manifest (their objects are queued for deletion). Only segments no longer held
    /// locally leave this way; local ones go through local retention.
    pub(super) async fn total_retention(
        &self,
        remote: &RemotePartition,
        partition: &Partition,
        config: &TopicConfig,
        held: &[HeldFrom],
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
        // A legal hold keeps its range of the whole log: no segment it reaches may go.
        let floor = hold_floor(held, || whole_log_map(&remote_only, partition)).unwrap_or(u64::MAX);
        let candidates = remote_only
            .iter()
            .enumerate()
            .map(|(i, segment)| RetentionCandidate {
                end_offset: remote_only
                    .get(i + 1)
                    .map_or(segment.last_offset + 1, |next| next.base_offset),
                size: segment.size,
                max_timestamp: Some(segment.max_timestamp),
            })
            .take_while(|candidate| candidate.end_offset <= floor);
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
        let change = Change {
            reason: "retention",
            policy: format!(
                "retention_ms={},retention_bytes={}",
                config.retention_ms, config.retention_bytes
            ),
            principal: None,
        };
        self.store_manifest(remote, successor, &change).await?;
        tracing::info!(topic = %remote.topic, partition = remote.partition, removed, log_start = cut, "remote retention");
        Ok(())
    }

    /// Deletes objects the manifest dropped, once their lock allows; a refused delete stays
    /// queued and is retried on the next sweep.
    pub(super) async fn delete_pending(
        &self,
        remote: &RemotePartition,
        now: i64,
    ) -> Result<(), TieringError> {
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
                let path = Path::from(key.as_str());
                match self.delete_object(&path).await {
                    Ok(()) => {}
                    Err(TieringError::DeleteVersion(DeleteVersionError::Locked {
                        protection: Protection::LegalHold,
                        ..
                    })) => {
                        // Retried on the next sweep, once the stale hold is off.
                        if let Err(error) = self.lift_stale_legal_hold(&path).await {
                            tracing::warn!(key, %error, "could not lift a stale S3 legal hold");
                        }
                        failed.push(key.clone());
                    }
                    Err(TieringError::DeleteVersion(error)) if error.is_locked() => {
                        super::stats::TieringStats::add(&self.stats.locked_delete_retries, 1);
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
            self.store_manifest(remote, successor, &Change::because("cleanup"))
                .await?;
        }
        Ok(())
    }

    pub(super) async fn delete_orphans(
        &self,
        remote: &RemotePartition,
        now: i64,
    ) -> Result<(), TieringError> {
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
        let change = Change {
            reason: "delete_records",
            policy: format!("delete_records before {before}"),
            principal: None,
        };
        self.store_manifest(&remote, successor, &change).await
    }
}

//! Uploads of a tiered partition: every closed segment the manifest does not list yet, oldest
//! first (log, indexes, chunk digests), locked when the topic asks for Object Lock, then the
//! manifest that lists it.

use object_store::path::Path;
use strata_tiering::layout::{self, SEGMENT_KINDS};
use strata_tiering::manifest::{ObjectRef, RemoteSegment};
use strata_tiering::object_lock::{Retention, RetentionMode};
use strata_tiering::upload::{UploadOptions, UploadedObject, upload_all, upload_bytes};

use super::archive::Change;
use super::stats::TieringStats;
use super::sync::from_epoch_ms;
use super::{RemotePartition, Tiering, TieringError};
use crate::log::{ClosedSegment, Partition};
use crate::topics::config::{ObjectLockMode, TopicConfig};

/// Local files of a segment uploaded as they are (log, offset index, time index), all at once.
const SEGMENT_FILES: usize = 3;

impl Tiering {
    /// Uploads every closed segment the manifest does not list yet, oldest first, each followed
    /// by a manifest that lists it.
    pub(super) async fn upload_closed(
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
            let mut change = Change::because("upload");
            if segment.snapshot.base_offset > next {
                change = Change::because("local_gap");
                // Records between the manifest's end and this segment are gone locally (deleted
                // by delete-records before they were uploaded): the remote log starts after them.
                successor.cut_below(segment.snapshot.base_offset, self.clock.now_ms());
            }
            successor.segments.push(uploaded);
            self.store_manifest(remote, successor, &change).await?;
            TieringStats::add(&self.stats.segments_uploaded, 1);
            TieringStats::add(&self.stats.bytes_uploaded, segment.snapshot.durable_size);
        }
        Ok(())
    }

    /// Uploads a segment's three files and its chunk digests, then locks them if the topic
    /// asks for Object Lock.
    pub(super) async fn upload_segment(
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
    pub(super) async fn lock_objects(
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
}

pub(super) fn local_error(path: &std::path::Path, reason: &str) -> TieringError {
    TieringError::Local {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

//! Legal holds in the bucket: on a bucket with Object Lock, every object of a segment a hold
//! covers gets S3's own legal hold, so not even a bucket admin's lifecycle rule or a stray
//! delete can remove it while the hold is in force; releasing the hold turns it off again so
//! retention can delete. Strata's own retention already stops at the held range (see
//! `log::retention::hold_floor`); this is the bucket's second lock on the same door.

use std::collections::BTreeSet;

use object_store::path::Path;

use super::{RemotePartition, Tiering, TieringError};
use crate::topics::holds::LegalHold;

impl Tiering {
    /// Turns the S3 legal hold on for the objects of every segment `holds` cover, and off for
    /// objects this server held before that no hold covers now. Nothing to do unless the bucket
    /// has Object Lock.
    pub(super) async fn sync_legal_holds(
        &self,
        remote: &RemotePartition,
        holds: &[LegalHold],
    ) -> Result<(), TieringError> {
        let Some(lock) = self.lock.as_ref().filter(|_| self.lock_enabled) else {
            return Ok(());
        };
        let manifest = remote.manifest();
        let wanted: BTreeSet<String> = manifest
            .segments
            .iter()
            .filter(|segment| {
                holds.iter().any(|hold| {
                    hold.range.covers_segment(
                        remote.partition,
                        segment.base_offset,
                        segment.last_offset,
                        Some(segment.max_timestamp),
                    )
                })
            })
            .flat_map(|segment| segment.objects().map(|object| object.key.clone()))
            .collect();
        let current = remote.legal_holds_on.lock().clone();
        for (key, on) in wanted
            .difference(&current)
            .map(|key| (key, true))
            .chain(current.difference(&wanted).map(|key| (key, false)))
        {
            lock.set_legal_hold(&self.store.key(&Path::from(key.as_str())), on)
                .await
                .map_err(|e| TieringError::Lock(e.to_string()))?;
            let mut held = remote.legal_holds_on.lock();
            if on {
                held.insert(key.clone());
            } else {
                held.remove(key);
            }
            tracing::info!(topic = %remote.topic, partition = remote.partition, key, on, "S3 legal hold");
        }
        Ok(())
    }

    /// Lifts a stale S3 legal hold from an object the manifest has dropped: it only goes to
    /// the delete queue once no Strata hold keeps it, so a legal hold left on it is one a
    /// release could not turn off (the server stopped in between).
    pub(super) async fn lift_stale_legal_hold(&self, key: &Path) -> Result<(), TieringError> {
        let Some(lock) = self.lock.as_ref().filter(|_| self.lock_enabled) else {
            return Ok(());
        };
        lock.set_legal_hold(&self.store.key(key), false)
            .await
            .map_err(|e| TieringError::Lock(e.to_string()))
    }
}

//! Removing a deleted topic's objects from the bucket, until they are gone: a removal is
//! recorded on disk before the topic leaves the catalog (`pending_deletions.rs`), retried while
//! the store fails, resumed after a restart, and only then forgotten. A topic of the same name
//! is created only once it has ended, so it never adopts the old topic's manifest.

use std::sync::Arc;
use std::time::Duration;

use super::{RemotePartition, Tiering, TieringError};
use crate::topics::catalog::Catalog;

/// The first wait before a failed removal is tried again; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(30);

impl Tiering {
    /// Records, durably, that `topic`'s objects are to be removed; call it before the topic
    /// leaves the catalog. Returns whether this call marked it (false: a removal of the name
    /// was already pending), for [`Tiering::abandon_deletion`].
    ///
    /// # Errors
    /// The record could not be written.
    pub fn begin_deletion(&self, topic: &str) -> Result<bool, TieringError> {
        self.pending
            .mark(topic)
            .map_err(|error| TieringError::Local {
                path: format!("deleting/{topic}"),
                reason: error.to_string(),
            })
    }

    /// Forgets a removal marked by [`Tiering::begin_deletion`] for a delete that did not
    /// happen (unknown topic, a legal hold).
    pub fn abandon_deletion(&self, topic: &str) {
        if let Err(error) = self.pending.unmark(topic) {
            tracing::warn!(topic, %error, "could not forget the record of a deletion that did not happen");
        }
    }

    /// Forgets a deleted topic and removes its objects: `topic.json` first, so a restore can
    /// never bring the topic back, then, per partition, a deletion entry in its transparency
    /// log and everything but the log itself, in the background and again until it succeeds.
    /// A partition whose deletion could not be logged keeps its objects until it can be.
    pub async fn delete_topic(self: &Arc<Self>, topic: &str) {
        let partitions: Vec<Arc<RemotePartition>> = {
            let mut map = self.partitions.lock();
            let removed = map
                .iter()
                .filter(|((t, _), _)| t == topic)
                .map(|(_, remote)| Arc::clone(remote))
                .collect();
            map.retain(|(t, _), _| t != topic);
            removed
        };
        self.published_topics.lock().remove(topic);
        self.start_removal(topic, partitions).await;
    }

    /// Resumes the removals a previous run left pending; call it before `restore`. A record
    /// whose topic is still in the catalog is from a delete that crashed before the topic left
    /// it: that delete never happened.
    pub async fn resume_deletions(self: &Arc<Self>, catalog: &Catalog) {
        for topic in self.pending.names() {
            if catalog.get(&topic).is_some() {
                self.abandon_deletion(&topic);
                continue;
            }
            tracing::info!(topic, "resuming the removal of a deleted topic's objects");
            self.start_removal(&topic, Vec::new()).await;
        }
    }

    /// Waits up to `limit` for the objects of a deleted topic named `topic` to be removed;
    /// true when none are pending (at once when no deletion of that name is under way).
    pub async fn deletion_finished(&self, topic: &str, limit: Duration) -> bool {
        let removal = self.deletions.lock().get(topic).cloned();
        let ended = match removal {
            // An error inside means the removal task is gone: the pending record then says.
            Some(mut removal) => tokio::time::timeout(limit, removal.wait_for(|ended| *ended))
                .await
                .is_ok(),
            None => true,
        };
        ended && !self.pending.contains(topic)
    }

    /// Whether a removal of `topic` is pending (a restore must not bring such a topic back).
    pub fn deletion_pending(&self, topic: &str) -> bool {
        self.pending.contains(topic)
    }

    async fn start_removal(self: &Arc<Self>, topic: &str, partitions: Vec<Arc<RemotePartition>>) {
        let key = strata_tiering::layout::topic_file(topic);
        if let Err(error) = self.delete_object(&key).await {
            // The pending record keeps a restore from reviving it; the removal retries.
            tracing::warn!(topic, %error, "could not delete the topic's metadata object");
        }
        let this = Arc::clone(self);
        let (ended, removal) = tokio::sync::watch::channel(false);
        {
            let mut deletions = self.deletions.lock();
            deletions.retain(|_, removal| !*removal.borrow());
            deletions.insert(topic.to_string(), removal);
        }
        let topic = topic.to_string();
        tokio::spawn(async move {
            // Dropped at the end, however the task ends: waiting creators then read the record.
            let _ended = EndsRemoval(ended);
            let mut loaded = partitions;
            let mut wait = RETRY_FIRST;
            while !this
                .remove_objects(&topic, std::mem::take(&mut loaded))
                .await
            {
                sleep(wait).await;
                wait = (wait * 2).min(RETRY_MAX);
            }
            if let Err(error) = this.pending.unmark(&topic) {
                tracing::warn!(topic, %error, "could not forget a finished removal; the next start repeats it");
            }
        });
    }

    /// One pass of a removal; true when nothing of the topic is left but its partitions'
    /// transparency logs, each of which records the deletion.
    async fn remove_objects(&self, topic: &str, loaded: Vec<Arc<RemotePartition>>) -> bool {
        let logged = self.record_topic_deletion(topic, loaded).await;
        let root = strata_tiering::layout::topic_root(topic);
        let objects = match strata_tiering::store::list_sorted(self.objects.as_ref(), Some(&root))
            .await
        {
            Ok(objects) => objects,
            Err(error) => {
                tracing::warn!(topic, %error, "could not list a deleted topic's objects; retrying");
                return false;
            }
        };
        let mut complete = true;
        for object in objects {
            let mut parts = object.location.parts().skip(2);
            let partition = parts.next().and_then(|p| p.as_ref().parse::<u32>().ok());
            let in_log = parts.next().is_some_and(|p| p.as_ref() == "tlog");
            match partition {
                // Deleting data whose deletion is not logged would be a silent deletion.
                Some(p) if !logged.contains(&p) => {
                    complete = false;
                    continue;
                }
                // The log stays, with the deletion in it.
                Some(_) if in_log => continue,
                _ => {}
            }
            match self.delete_object(&object.location).await {
                Ok(()) => {}
                // A segment under Object Lock stays until its date (a bucket lifecycle rule
                // expires it); with the manifests gone nothing refers to it.
                Err(TieringError::DeleteVersion(error)) if error.is_locked() => {
                    tracing::info!(key = %object.location, %error, "a deleted topic's object stays under its lock");
                }
                Err(error) => {
                    tracing::warn!(key = %object.location, %error, "could not delete a deleted topic's object; retrying");
                    complete = false;
                }
            }
        }
        complete
    }
}

/// A pause between removal passes. Not a measurement: the store's own retries have failed.
#[allow(
    clippy::disallowed_methods,
    reason = "a backoff between retries of a background task, not a wait in a test"
)]
async fn sleep(wait: Duration) {
    tokio::time::sleep(wait).await;
}

/// Marks a topic's object removal as ended when dropped.
struct EndsRemoval(tokio::sync::watch::Sender<bool>);

impl Drop for EndsRemoval {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}

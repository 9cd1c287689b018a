//! Consumer-group commits in the bucket. `__consumer_offsets` is a local compacted topic and is
//! not tiered, so a restore from the bucket alone used to bring back every record but no group's
//! position. Each sweep writes `groups/offsets.note` (when it changed): the committed offsets of
//! every group on a tiered topic, with metadata and commit time, as JSON in a note signed with
//! the archive key, so `strata verify` can check it. A restore replays the commits of the topics
//! it recreated, so consumers resume where they were, to within one sweep.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use strata_tiering::layout;
use strata_tiering::tlog::note::note_text;

use super::restore::RestoreError;
use super::{Tiering, TieringError};
use crate::groups::offsets::{Commit, OffsetStore};
use crate::topics::catalog::Catalog;

/// Format of the JSON in `groups/offsets.note`.
pub const GROUP_OFFSETS_FORMAT: u32 = 1;

/// The JSON text of `groups/offsets.note`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupOffsetsSnapshot {
    /// [`GROUP_OFFSETS_FORMAT`].
    pub format: u32,
    /// Group id to its commits, sorted.
    pub groups: BTreeMap<String, Vec<ArchivedCommit>>,
}

/// One committed offset as archived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedCommit {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// The next offset to read.
    pub offset: u64,
    /// The client's metadata.
    pub metadata: String,
    /// When it was committed (ms since the epoch).
    pub commit_time_ms: i64,
}

impl Tiering {
    /// Writes `groups/offsets.note` when the commits on tiered topics changed since the last
    /// write of this process.
    ///
    /// # Errors
    /// Store failures; the next sweep tries again.
    pub async fn publish_group_offsets(
        &self,
        catalog: &Catalog,
        offsets: &OffsetStore,
    ) -> Result<(), TieringError> {
        let tiered: BTreeSet<String> = catalog
            .list()
            .iter()
            .filter(|topic| topic.config().remote_storage_enable)
            .map(|topic| topic.name().to_string())
            .collect();
        let mut groups = BTreeMap::new();
        for (group, committed) in offsets.snapshot() {
            let commits: Vec<ArchivedCommit> = committed
                .into_iter()
                .filter(|((topic, _), _)| tiered.contains(topic))
                .map(|((topic, partition), commit)| ArchivedCommit {
                    topic,
                    partition,
                    offset: commit.offset,
                    metadata: commit.metadata,
                    commit_time_ms: commit.commit_time_ms,
                })
                .collect();
            if !commits.is_empty() {
                groups.insert(group, commits);
            }
        }
        let snapshot = GroupOffsetsSnapshot {
            format: GROUP_OFFSETS_FORMAT,
            groups,
        };
        // Pretty JSON has no blank line, so it is a valid signed-note text once it ends with a
        // newline; the signature makes the snapshot verifiable like the checkpoints.
        let text = serde_json::to_string_pretty(&snapshot).unwrap_or_default() + "\n";
        let mut published = self.published_group_offsets.lock().await;
        if published.as_deref() == Some(text.as_str()) {
            return Ok(());
        }
        let note = self.signer.sign_note(&text);
        self.objects
            .put(
                &layout::group_offsets_file(),
                PutPayload::from(Bytes::from(note)),
            )
            .await?;
        *published = Some(text);
        Ok(())
    }

    /// Replays the archived commits of the `restored` topics into `offsets`, each with its
    /// original commit time, unless the group already has a commit for that partition here.
    /// Returns how many were restored.
    ///
    /// # Errors
    /// Store failures, an unreadable snapshot (`Invalid`), or a failed commit (`Catalog`).
    pub async fn restore_group_offsets(
        &self,
        offsets: &OffsetStore,
        restored: &[String],
    ) -> Result<usize, RestoreError> {
        if restored.is_empty() {
            return Ok(0);
        }
        let key = layout::group_offsets_file();
        let Some(body) = strata_tiering::store::get_if_exists(self.objects.as_ref(), &key)
            .await
            .map_err(TieringError::from)?
        else {
            return Ok(0);
        };
        let invalid = |reason: String| RestoreError::Invalid {
            key: key.to_string(),
            reason,
        };
        let note = String::from_utf8_lossy(&body);
        let text = note_text(&note).ok_or_else(|| invalid("not a signed note".to_string()))?;
        let snapshot: GroupOffsetsSnapshot =
            serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if snapshot.format != GROUP_OFFSETS_FORMAT {
            return Err(invalid(format!("unsupported format {}", snapshot.format)));
        }
        let mut count = 0;
        for (group, commits) in snapshot.groups {
            let commits: Vec<(Commit, i64)> = commits
                .into_iter()
                .filter(|c| restored.contains(&c.topic))
                .filter(|c| offsets.get(&group, &c.topic, c.partition).is_none())
                .map(|c| {
                    let time = c.commit_time_ms;
                    let commit = Commit {
                        topic: c.topic,
                        partition: c.partition,
                        offset: c.offset,
                        metadata: c.metadata,
                    };
                    (commit, time)
                })
                .collect();
            offsets
                .restore_commits(&group, &commits)
                .await
                .map_err(|e| RestoreError::Catalog(e.to_string()))?;
            count += commits.len();
        }
        Ok(count)
    }
}

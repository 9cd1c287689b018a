//! Consumer-group commits in the bucket. `__consumer_offsets` is a local compacted topic and is
//! not tiered, so a restore from the bucket alone used to bring back every record but no group's
//! position. Each sweep writes `groups/offsets.note` (when it changed): the committed offsets of
//! every group on a tiered topic, with metadata and commit time, as JSON in a note signed with
//! the archive key, so `strata verify` can check it. A restore replays the commits of the topics
//! it recreated, so consumers resume where they were, to within one sweep.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use strata_tiering::layout;

use super::restore::RestoreError;
use super::signed_snapshot::Snapshot;
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

impl Snapshot for GroupOffsetsSnapshot {
    const FORMAT: u32 = GROUP_OFFSETS_FORMAT;

    fn format(&self) -> u32 {
        self.format
    }
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
        self.publish_snapshot(&layout::group_offsets_file(), &snapshot)
            .await
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
        let Some(snapshot) = self
            .read_snapshot::<GroupOffsetsSnapshot>(&layout::group_offsets_file())
            .await?
        else {
            return Ok(0);
        };
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

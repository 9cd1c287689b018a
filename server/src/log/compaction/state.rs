//! What the cleaner remembers about a partition between runs, in `cleaner.json`.
//!
//! Two things must survive a restart. The *clean offset* splits the cleanable log into a part
//! already compacted and a dirty part, whose share of the bytes decides when the next pass is
//! worth its I/O. And the *passes* decide when a tombstone may go: a tombstone is kept for
//! `delete_retention_ms` after the first pass that covered it, so consumers that were behind get
//! to see the delete. Pass `p` covers every offset below `p.clean_offset`, so a tombstone below
//! the clean offset of any pass older than `delete_retention_ms` was first covered at least that
//! long ago and may be dropped; only passes that are not that old yet need to be remembered.

use std::path::Path;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::io::{Io, IoError, OpenMode};
use crate::log::meta::{MetaError, write_file_atomically};

/// File name inside the partition directory.
pub const CLEANER_FILE: &str = "cleaner.json";

const CLEANER_VERSION: u32 = 1;

/// One completed compaction pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pass {
    /// Every offset below this was inside the pass's cleanable range.
    pub clean_offset: u64,
    /// When the pass ran (ms since the epoch).
    pub at_ms: i64,
    /// Tombstones the pass had to keep because they were too young to drop.
    pub tombstones_kept: u64,
}

/// The cleaner's durable memory of one partition, plus the statistics users see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CleanerState {
    /// Format version of the file.
    pub version: u32,
    /// Offsets below this have been compacted at least once; bytes at or above are dirty.
    pub clean_offset: u64,
    /// Passes younger than `delete_retention_ms` at the time of the last pass, oldest first.
    pub passes: Vec<Pass>,
    /// Completed passes since the partition was created.
    pub runs: u64,
    /// When the last pass finished (ms since the epoch).
    pub last_run_ms: Option<i64>,
    /// Bytes freed by compaction since the partition was created.
    pub bytes_reclaimed: u64,
}

impl Default for CleanerState {
    fn default() -> Self {
        Self {
            version: CLEANER_VERSION,
            clean_offset: 0,
            passes: Vec::new(),
            runs: 0,
            last_run_ms: None,
            bytes_reclaimed: 0,
        }
    }
}

fn expired(pass: &Pass, now_ms: i64, delete_retention_ms: i64) -> bool {
    pass.at_ms.saturating_add(delete_retention_ms) <= now_ms
}

impl CleanerState {
    /// Tombstones below this offset have been covered by a pass at least `delete_retention_ms`
    /// ago and may be dropped.
    pub fn tombstone_horizon(&self, now_ms: i64, delete_retention_ms: i64) -> u64 {
        self.passes
            .iter()
            .filter(|p| expired(p, now_ms, delete_retention_ms))
            .map(|p| p.clean_offset)
            .max()
            .unwrap_or(0)
    }

    /// Whether a pass kept tombstones that are now old enough to drop: worth a pass even when
    /// nothing new is dirty.
    pub fn tombstones_due(&self, now_ms: i64, delete_retention_ms: i64) -> bool {
        self.passes
            .iter()
            .any(|p| p.tombstones_kept > 0 && expired(p, now_ms, delete_retention_ms))
    }

    /// Records a finished pass. Expired passes are forgotten: the pass that just ran dropped
    /// every tombstone they covered.
    pub fn record_pass(&mut self, pass: Pass, delete_retention_ms: i64, bytes_reclaimed: u64) {
        self.passes
            .retain(|p| !expired(p, pass.at_ms, delete_retention_ms));
        self.passes.push(pass);
        self.clean_offset = self.clean_offset.max(pass.clean_offset);
        self.runs += 1;
        self.last_run_ms = Some(pass.at_ms);
        self.bytes_reclaimed = self.bytes_reclaimed.saturating_add(bytes_reclaimed);
    }
}

/// Reads `cleaner.json`; a partition that was never compacted has none.
///
/// # Errors
/// I/O errors other than "not found", and a file that does not parse.
pub async fn load(io: &Io, dir: &Path) -> Result<CleanerState, MetaError> {
    let path = dir.join(CLEANER_FILE);
    let file = match io.open(&path, OpenMode::Read).await {
        Ok(file) => file,
        Err(error) if error.source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(CleanerState::default());
        }
        Err(error) => return Err(error.into()),
    };
    let len = io.file_len(&file).await?;
    let bytes = io
        .read_at(&file, 0, usize::try_from(len).unwrap_or(usize::MAX))
        .await?;
    let invalid = |reason: String| MetaError::Invalid {
        path: path.clone(),
        reason,
    };
    let state: CleanerState =
        serde_json::from_slice(&bytes).map_err(|error| invalid(error.to_string()))?;
    if state.version != CLEANER_VERSION {
        return Err(invalid(format!("unsupported version {}", state.version)));
    }
    Ok(state)
}

/// Replaces `cleaner.json` atomically.
///
/// # Errors
/// Any I/O error; the old file stays in place.
pub async fn save(io: &Io, dir: &Path, state: &CleanerState) -> Result<(), IoError> {
    let body = serde_json::to_vec_pretty(state).unwrap_or_default();
    write_file_atomically(io, dir, CLEANER_FILE, Bytes::from(body)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(clean_offset: u64, at_ms: i64, tombstones_kept: u64) -> Pass {
        Pass {
            clean_offset,
            at_ms,
            tombstones_kept,
        }
    }

    #[test]
    fn a_tombstone_may_go_only_after_the_first_pass_covering_it_is_old_enough() {
        let mut state = CleanerState::default();
        state.record_pass(pass(10, 1_000, 2), 500, 0);
        assert_eq!(state.tombstone_horizon(1_499, 500), 0);
        assert!(!state.tombstones_due(1_499, 500));
        assert_eq!(state.tombstone_horizon(1_500, 500), 10);
        assert!(state.tombstones_due(1_500, 500));
        // A later pass over more of the log does not restart the clock for offsets below 10.
        state.record_pass(pass(20, 1_200, 3), 500, 0);
        assert_eq!(state.tombstone_horizon(1_500, 500), 10);
        assert_eq!(state.tombstone_horizon(1_700, 500), 20);
    }

    #[test]
    fn expired_passes_are_forgotten_and_statistics_add_up() {
        let mut state = CleanerState::default();
        state.record_pass(pass(10, 1_000, 1), 100, 40);
        state.record_pass(pass(12, 2_000, 0), 100, 2);
        assert_eq!(state.passes, vec![pass(12, 2_000, 0)]);
        assert_eq!(state.clean_offset, 12);
        assert_eq!(state.runs, 2);
        assert_eq!(state.last_run_ms, Some(2_000));
        assert_eq!(state.bytes_reclaimed, 42);
    }

    #[test]
    fn the_state_round_trips_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let (io, _) = Io::start(crate::io::IoBackendChoice::Sync, dir.path()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(
                load(&io, dir.path()).await.unwrap(),
                CleanerState::default()
            );
            let mut state = CleanerState::default();
            state.record_pass(pass(7, 5, 1), 10, 99);
            save(&io, dir.path(), &state).await.unwrap();
            assert_eq!(load(&io, dir.path()).await.unwrap(), state);
            std::fs::write(dir.path().join(CLEANER_FILE), b"{not json").unwrap();
            assert!(load(&io, dir.path()).await.is_err());
        });
    }
}

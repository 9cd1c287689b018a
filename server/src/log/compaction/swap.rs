//! The crash-safe replacement of compacted segments.
//!
//! The cleaner writes a group's new segment under temporary names (`{base}.log.cleaned`, ...)
//! and fsyncs them. Then, on the partition's writer task:
//!
//! 1. `cleaner-swap.json` names the new segment and the segments it replaces; it is written
//!    atomically and is the commit point. Before it exists a crash leaves the old segments and
//!    recovery deletes the `.cleaned` files; once it exists recovery finishes the swap.
//! 2. The files of every replaced segment except the first are removed.
//! 3. The `.cleaned` files are renamed over the first segment's files (rename replaces the old
//!    files atomically, one by one).
//! 4. The directory is fsynced and the swap file removed.
//!
//! Every step is idempotent, so recovery simply runs the remaining ones again. The old files are
//! only unlinked, never changed, so readers that mapped them finish undisturbed, and because
//! recovery completes a committed swap before it lists segments, the old and the new segments
//! are never both visible, nor neither.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::io::{Io, IoError};
pub use crate::log::meta::remove_if_exists;
use crate::log::meta::write_file_atomically;
use crate::log::segment::{INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name};

/// The commit record of a swap in progress.
pub const SWAP_FILE: &str = "cleaner-swap.json";
/// Extension appended to the files of a segment the cleaner is still writing.
pub const CLEANED_EXTENSION: &str = "cleaned";

const SEGMENT_SUFFIXES: [&str; 3] = [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX];

/// One swap: the new segment at `base_offset` replaces the segments at `replaces` (which
/// starts with `base_offset`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwapPlan {
    /// Base offset of the new segment and of the first replaced one.
    pub base_offset: u64,
    /// Base offsets of every replaced segment, ascending.
    pub replaces: Vec<u64>,
}

/// Path of a file of the segment being written, e.g. `{base}.log.cleaned`.
pub fn cleaned_path(dir: &Path, base_offset: u64, suffix: &str) -> PathBuf {
    dir.join(format!(
        "{}.{CLEANED_EXTENSION}",
        segment_file_name(base_offset, suffix)
    ))
}

/// The three temporary files of a new segment, in `[log, index, time index]` order.
pub fn cleaned_paths(dir: &Path, base_offset: u64) -> [PathBuf; 3] {
    SEGMENT_SUFFIXES.map(|suffix| cleaned_path(dir, base_offset, suffix))
}

/// Counts the steps of a swap so tests can stop it after any one of them, as a crash would.
struct Steps {
    done: usize,
    stop_after: Option<usize>,
}

impl Steps {
    /// Whether the next step may run.
    fn proceed(&mut self) -> bool {
        if self.stop_after.is_some_and(|stop| self.done >= stop) {
            return false;
        }
        self.done += 1;
        true
    }
}

/// Runs the swap. `stop_after` (tests only) abandons it after that many steps, leaving the
/// directory as a crash at that moment would; returns whether the swap completed.
///
/// # Errors
/// Any I/O error. After one, the directory is in a state recovery completes or rolls back.
pub async fn execute(
    io: &Io,
    dir: &Path,
    plan: &SwapPlan,
    stop_after: Option<usize>,
) -> Result<bool, IoError> {
    let mut steps = Steps {
        done: 0,
        stop_after,
    };
    let body = serde_json::to_vec(plan).unwrap_or_default();
    if !steps.proceed() {
        return Ok(false);
    }
    write_file_atomically(io, dir, SWAP_FILE, Bytes::from(body)).await?;
    for &base in plan.replaces.iter().filter(|&&b| b != plan.base_offset) {
        for suffix in SEGMENT_SUFFIXES {
            if !steps.proceed() {
                return Ok(false);
            }
            remove_if_exists(io, &dir.join(segment_file_name(base, suffix))).await?;
        }
    }
    for suffix in SEGMENT_SUFFIXES {
        if !steps.proceed() {
            return Ok(false);
        }
        let target = dir.join(segment_file_name(plan.base_offset, suffix));
        io.rename(&cleaned_path(dir, plan.base_offset, suffix), &target)
            .await?;
    }
    if !steps.proceed() {
        return Ok(false);
    }
    io.sync_dir(dir).await?;
    if !steps.proceed() {
        return Ok(false);
    }
    remove_if_exists(io, &dir.join(SWAP_FILE)).await?;
    io.sync_dir(dir).await?;
    Ok(true)
}

/// Before a partition's segments are listed: completes a committed swap, and deletes the
/// temporary files of one that was not committed. Returns the swap it completed, if any.
///
/// # Errors
/// I/O errors, and a swap file that does not parse (it is written atomically, so that means
/// someone else changed it; guessing could lose data).
pub async fn finish_interrupted(io: &Io, dir: &Path) -> Result<Option<SwapPlan>, SwapFileError> {
    let swap_path = dir.join(SWAP_FILE);
    let completed = match std::fs::read(&swap_path) {
        Ok(body) => {
            let plan: SwapPlan =
                serde_json::from_slice(&body).map_err(|error| SwapFileError::Invalid {
                    path: swap_path.clone(),
                    reason: error.to_string(),
                })?;
            for &base in plan.replaces.iter().filter(|&&b| b != plan.base_offset) {
                for suffix in SEGMENT_SUFFIXES {
                    remove_if_exists(io, &dir.join(segment_file_name(base, suffix))).await?;
                }
            }
            for suffix in SEGMENT_SUFFIXES {
                let cleaned = cleaned_path(dir, plan.base_offset, suffix);
                if cleaned.exists() {
                    let target = dir.join(segment_file_name(plan.base_offset, suffix));
                    io.rename(&cleaned, &target).await?;
                }
            }
            io.sync_dir(dir).await?;
            remove_if_exists(io, &swap_path).await?;
            tracing::info!(dir = %dir.display(), base_offset = plan.base_offset,
                replaced = plan.replaces.len(), "completed an interrupted compaction swap");
            Some(plan)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(IoError::new("read", swap_path, source).into()),
    };
    let mut removed = false;
    let entries = std::fs::read_dir(dir).map_err(|e| IoError::new("read_dir", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| IoError::new("read_dir", dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let leftover =
            name.ends_with(&format!(".{CLEANED_EXTENSION}")) || name == format!("{SWAP_FILE}.tmp");
        if leftover {
            remove_if_exists(io, &entry.path()).await?;
            removed = true;
        }
    }
    if removed {
        tracing::info!(dir = %dir.display(), "removed files of an unfinished compaction");
        io.sync_dir(dir).await?;
    }
    Ok(completed)
}

/// Why an interrupted swap could not be finished.
#[derive(Debug, thiserror::Error)]
pub enum SwapFileError {
    /// Disk I/O failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The swap file exists but does not parse.
    #[error("compaction swap file {path} is invalid: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// Number of steps [`execute`] takes for `plan` (tests stop after each one in turn).
pub fn step_count(plan: &SwapPlan) -> usize {
    let extras = plan
        .replaces
        .iter()
        .filter(|&&b| b != plan.base_offset)
        .count();
    1 + extras * SEGMENT_SUFFIXES.len() + SEGMENT_SUFFIXES.len() + 2
}

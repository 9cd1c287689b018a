//! Key compaction: a partition of a compacted topic behaves as a replayable table holding the
//! latest value per key.
//!
//! A pass looks at the *cleanable* part of the log: closed segments, oldest first, up to the
//! first one holding a record younger than `min_compaction_lag_ms` (the active segment is never
//! cleanable). It builds a map from each key to its latest offset in that part, then rewrites
//! neighbouring segments, merged while they fit in `segment_bytes`, keeping a record only when it
//! is its key's latest. Kept records keep their offsets (batches keep their base offset and
//! `lastOffsetDelta`; see [`RecordBatch::retain_records`](crate::log::RecordBatch)), so readers
//! see gaps, never renumbering. A tombstone (null value) is kept for `delete_retention_ms` after
//! the first pass that covered it ([`state`]), then dropped. New segments replace old ones by the
//! crash-safe protocol in [`swap`]. A pass runs when the dirty part (written since the last pass)
//! is at least `min_cleanable_dirty_ratio` of the cleanable bytes, or when kept tombstones came
//! due. Reads and writes of the cleaner go through a shared [`throttle::Throttle`].

pub mod rewrite;
pub mod state;
pub mod swap;
pub mod throttle;

use std::sync::Arc;

use bytes::Bytes;

use futures::future::BoxFuture;
use thiserror::Error;

use self::rewrite::{Retention, group_segments, write_group};
use self::state::{CleanerState, Pass};
use self::swap::{SwapPlan, cleaned_paths, remove_if_exists};
use self::throttle::Throttle;
use super::meta::{MetaError, write_file_atomically};
use super::segment::segment_file_name;
use super::segment::{
    INDEX_SUFFIX, LOG_SUFFIX, Segment, SegmentReadError, SegmentSnapshot, SegmentState,
    TIME_INDEX_SUFFIX,
};
use super::shared::Shared;
use crate::io::{IoError, OpenMode};

/// The topic settings a pass obeys (Kafka's names).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionPolicy {
    /// How long a tombstone survives after the first pass that covered it.
    pub delete_retention_ms: i64,
    /// Records younger than this are never removed.
    pub min_compaction_lag_ms: i64,
    /// A dirty cleanable segment whose records are this old makes a pass run whatever the
    /// dirty ratio (`i64::MAX`: never).
    pub max_compaction_lag_ms: i64,
    /// Dirty share of the cleanable bytes that makes a pass worthwhile.
    pub min_cleanable_dirty_ratio: f64,
    /// Keys the pass's latest-offset map may hold (its memory bound, like Kafka's dedupe
    /// buffer). A pass maps dirty segments only until the map is full, always at least one,
    /// and cleans the log up to there; the next pass continues from that point.
    pub max_map_keys: usize,
}

/// Default [`CompactionPolicy::max_map_keys`]: entries are a zero-copy key slice and an offset
/// (about 64 bytes with the table's overhead), so this bounds a pass's map near 256 MiB.
pub const DEFAULT_MAX_MAP_KEYS: usize = 4 << 20;

/// What one call of [`Partition::compact`](crate::log::Partition::compact) did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompactionReport {
    /// Whether a pass ran (false: nothing was due).
    pub ran: bool,
    /// Dirty share of the cleanable bytes before the pass.
    pub dirty_ratio: f64,
    /// Old segments replaced.
    pub segments_rewritten: usize,
    /// Records removed, tombstones included.
    pub records_removed: u64,
    /// Tombstones removed.
    pub tombstones_removed: u64,
    /// Bytes freed.
    pub bytes_reclaimed: u64,
}

/// The cleaner's view of a partition, for the topic description.
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerStatus {
    /// Share of the closed segments' bytes written since the last pass.
    pub dirty_ratio: f64,
    /// Completed passes.
    pub runs: u64,
    /// When the last pass finished.
    pub last_run_ms: Option<i64>,
    /// Bytes freed by compaction so far.
    pub bytes_reclaimed: u64,
    /// Why the cleaner stopped working on this partition, until a restart.
    pub failure: Option<String>,
}

/// Why a pass failed. Old segments stay in place: a pass either swaps a whole group or nothing.
#[derive(Debug, Error)]
pub enum CompactionError {
    /// Disk I/O failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The cleaner state file could not be read or written.
    #[error(transparent)]
    Meta(#[from] MetaError),
    /// A batch in a closed segment does not validate; the pass stops instead of guessing.
    #[error(transparent)]
    Corrupt(#[from] SegmentReadError),
    /// The partition is closing.
    #[error("partition writer is gone")]
    Closed,
    /// An earlier swap failed half-way; the next start completes it and re-enables the cleaner.
    #[error("the cleaner is stopped on this partition until restart: {reason}")]
    Disabled {
        /// What failed.
        reason: String,
    },
}

/// Whether a segment holds offsets at or after `clean_offset`: records no pass has covered yet.
/// Passes end at segment boundaries, so a segment is wholly clean or wholly dirty.
pub fn is_dirty(segment: &SegmentSnapshot, clean_offset: u64) -> bool {
    segment.next_offset > clean_offset
}

/// `(dirty, total)` bytes of `segments` (see [`is_dirty`]).
pub fn dirty_bytes(segments: &[Arc<Segment>], clean_offset: u64) -> (u64, u64) {
    segments.iter().fold((0, 0), |(dirty, total), segment| {
        let snapshot = segment.snapshot();
        let size = snapshot.durable_size;
        let dirty_size = if is_dirty(&snapshot, clean_offset) {
            size
        } else {
            0
        };
        (dirty + dirty_size, total + size)
    })
}

/// Whether a dirty segment of `cleanable` holds records older than `max_lag_ms`: measured from
/// its first record's timestamp when known, else its largest (later, so never too early).
fn overdue(cleanable: &[Arc<Segment>], clean_offset: u64, now_ms: i64, max_lag_ms: i64) -> bool {
    let cutoff = now_ms.saturating_sub(max_lag_ms.max(0));
    cleanable.iter().any(|segment| {
        let snapshot = segment.snapshot();
        let oldest = snapshot.roll_basis_ms.or(snapshot.max_timestamp);
        is_dirty(&snapshot, clean_offset) && oldest.is_some_and(|t| t <= cutoff)
    })
}

/// `dirty / total`, 0 for an empty log.
pub fn ratio(dirty: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        dirty as f64 / total as f64
    }
}

/// Installs a rewritten segment in place of the ones it replaces. The partition's writer does
/// it (`writer.rs`), so a swap cannot interleave with rolls and deletions; compaction only
/// asks, which keeps this module from importing the writer.
pub(crate) trait SwapInstaller: Sync {
    /// Installs `state` as the segment `plan` describes; `stop_after` (tests) abandons the
    /// swap after that many steps, as a crash would. Answers whether the swap completed.
    fn install(
        &self,
        plan: SwapPlan,
        state: SegmentState,
        stop_after: Option<usize>,
    ) -> BoxFuture<'_, Result<bool, CompactionError>>;
}

/// One pass over a partition. `stop_swap_after` (tests) abandons the first swap after that many
/// steps, as a crash would.
pub(crate) async fn run(
    shared: &Shared,
    installer: &dyn SwapInstaller,
    state: &mut CleanerState,
    policy: &CompactionPolicy,
    now_ms: i64,
    throttle: &Throttle,
    stop_swap_after: Option<usize>,
) -> Result<CompactionReport, CompactionError> {
    let segments: Vec<Arc<Segment>> = shared.segments.read().values().cloned().collect();
    let Some((_active, closed)) = segments.split_last() else {
        return Ok(CompactionReport::default());
    };
    let lag_cutoff = now_ms.saturating_sub(policy.min_compaction_lag_ms.max(0));
    let cleanable_len = closed
        .iter()
        .take_while(|s| s.snapshot().max_timestamp.is_none_or(|t| t <= lag_cutoff))
        .count();
    let cleanable = &closed[..cleanable_len];
    let (dirty, total) = dirty_bytes(cleanable, state.clean_offset);
    let mut report = CompactionReport {
        dirty_ratio: ratio(dirty, total),
        ..CompactionReport::default()
    };
    let worthwhile = dirty > 0 && report.dirty_ratio >= policy.min_cleanable_dirty_ratio;
    let due = state.tombstones_due(now_ms, policy.delete_retention_ms);
    let overdue = overdue(
        cleanable,
        state.clean_offset,
        now_ms,
        policy.max_compaction_lag_ms,
    );
    if cleanable.is_empty() || !(worthwhile || due || overdue) {
        return Ok(report);
    }
    let horizon = state.tombstone_horizon(now_ms, policy.delete_retention_ms);
    let (retention, mapped_len) = Retention::build(
        cleanable,
        state.clean_offset,
        horizon,
        policy.max_map_keys,
        throttle,
    )
    .await?;
    // A full map ends this pass where mapping stopped: what lies beyond is not deduplicated.
    let cleanable = &cleanable[..mapped_len];
    let clean_end = segments[mapped_len].base_offset();
    let (segment_bytes, index_interval_bytes) = {
        let config = shared.config.read();
        (config.segment_bytes, config.index_interval_bytes)
    };
    let mut tombstones_kept = 0;
    for group in group_segments(cleanable, segment_bytes) {
        let tally = retention.tally(&group).await?;
        tombstones_kept += tally.tombstones_kept;
        if tally.dropped == 0 && group.len() == 1 {
            continue;
        }
        let base_offset = group[0].base_offset();
        let before: u64 = group.iter().map(|s| s.snapshot().durable_size).sum();
        let written = write_group(
            &shared.io,
            &shared.dir,
            &group,
            &retention,
            index_interval_bytes,
            throttle,
        )
        .await;
        let new_state = match written {
            Ok(new_state) => new_state,
            Err(error) => {
                discard_cleaned(shared, base_offset).await;
                return Err(error);
            }
        };
        let after = new_state.durable_size;
        let plan = SwapPlan {
            base_offset,
            replaces: group.iter().map(|s| s.base_offset()).collect(),
        };
        let swapped = installer.install(plan, new_state, stop_swap_after).await?;
        if !swapped {
            if stop_swap_after.is_some() {
                return Ok(report);
            }
            continue;
        }
        report.segments_rewritten += group.len();
        report.records_removed += tally.dropped;
        report.tombstones_removed += tally.tombstones_dropped;
        report.bytes_reclaimed += before.saturating_sub(after);
    }
    report.ran = true;
    let pass = Pass {
        clean_offset: clean_end,
        at_ms: now_ms,
        tombstones_kept,
    };
    state.record_pass(pass, policy.delete_retention_ms, report.bytes_reclaimed);
    state::save(&shared.io, &shared.dir, state).await?;
    Ok(report)
}

/// A file whose presence says the partition has held compacted segments, whose offsets may
/// have gaps. Without it every segment's batches are contiguous, which lets readers and
/// recovery tell a flipped base offset from a compaction gap.
pub const COMPACTED_MARKER: &str = "compacted";

/// On the writer task: replaces the group's segments by the new one, on disk (see [`swap`]) and
/// then in the segment map. Returns false, and removes the new files, when a replaced segment
/// is gone meanwhile (retention or delete-records removed it).
pub(crate) async fn install(
    shared: &Shared,
    plan: &SwapPlan,
    state: SegmentState,
    stop_after: Option<usize>,
) -> Result<bool, CompactionError> {
    let intact = {
        let segments = shared.segments.read();
        let active = segments.keys().next_back().copied();
        plan.replaces
            .iter()
            .all(|base| segments.contains_key(base) && Some(*base) != active)
    };
    if !intact {
        discard_cleaned(shared, plan.base_offset).await;
        return Ok(false);
    }
    // Before the first compacted segment exists, the partition stops promising contiguous
    // offsets (readers and recovery check base offsets more strictly while it holds).
    if shared
        .contiguous
        .swap(false, std::sync::atomic::Ordering::SeqCst)
        || !shared.dir.join(COMPACTED_MARKER).exists()
    {
        write_file_atomically(&shared.io, &shared.dir, COMPACTED_MARKER, Bytes::new()).await?;
    }
    if !swap::execute(&shared.io, &shared.dir, plan, stop_after).await? {
        return Ok(false);
    }
    let mut files = Vec::with_capacity(3);
    for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
        let path = shared.dir.join(segment_file_name(plan.base_offset, suffix));
        files.push(shared.io.open(&path, OpenMode::ReadWrite).await?);
    }
    let [log, index, time]: [_; 3] = files.try_into().map_err(|_| CompactionError::Closed)?;
    let map_len = usize::try_from(state.durable_size).unwrap_or(usize::MAX);
    let segment = Segment::from_parts(
        &shared.dir,
        plan.base_offset,
        [log, index, time],
        map_len,
        state,
    )?;
    let mut segments = shared.segments.write();
    for base in &plan.replaces {
        segments.remove(base);
    }
    segments.insert(plan.base_offset, Arc::new(segment));
    Ok(true)
}

/// Removes the temporary files of a group that will not be swapped in.
async fn discard_cleaned(shared: &Shared, base_offset: u64) {
    for path in cleaned_paths(&shared.dir, base_offset) {
        if let Err(error) = remove_if_exists(&shared.io, &path).await {
            tracing::warn!(%error, "could not remove a cleaner's temporary file");
        }
    }
}

#[cfg(test)]
mod tests;

//! Opening a partition directory: find segments, trust or rebuild indexes, verify what a crash
//! could have touched, and never lose an intact acknowledged batch (ADR 0005).
//!
//! After a clean stop, indexes are loaded and checked for shape; closed segments are not read
//! again. The segments from the recovery point on (the active segment) are verified batch by
//! batch (CRC included) on every start, clean or not, because they are what a later crash
//! recovery would scan: damage found there now must be known before anything is appended after
//! it. The scan itself is `scan.rs`: damage followed by sound batches is quarantined in place,
//! only a torn write at the end of the active segment after a crash is cut, and a closed segment
//! is never cut. When the active segment holds damage, a new active segment is started, so no
//! append ever lands behind a known-corrupt batch. Every repair is logged. Files are truncated
//! before they are mapped, so no mapping ever covers bytes that were cut off.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::batch::{BatchHeader, batch_headers, batch_offsets};
use super::config::LogConfig;
use super::error::OpenError;
use super::meta::{META_VERSION, PartitionMeta, read_meta, remove_if_exists, write_meta};
use super::offset_index::OffsetIndex;
use super::producer_state::ProducerState;
use super::scan::{ScanLimits, ScanOutcome, SegmentRole, scan_segment};
use super::segment::{
    INDEX_SUFFIX, LOG_SUFFIX, Segment, TIME_INDEX_SUFFIX, parse_segment_file_name,
    segment_file_name,
};
use super::segment_state::{AppendedBatch, SegmentState, rewrite_indexes};
use super::time_index::TimeIndex;
use super::types::BatchAck;
use crate::io::{Io, IoError, IoFile, MappedFile, OpenMode};

/// What recovery found and repaired, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Whether the previous stop was clean (no scan needed).
    pub clean: bool,
    /// Segments scanned batch by batch.
    pub scanned_segments: usize,
    /// Bytes cut off torn or corrupt tails.
    pub truncated_bytes: u64,
    /// Reserved zeros cut off active segments (`preallocate`): no data, left by a crash.
    pub released_reserved_bytes: u64,
    /// Segments whose index files were rebuilt.
    pub rebuilt_indexes: usize,
    /// Segments removed because they lay wholly below the log start.
    pub removed_segments: usize,
    /// Segments verified batch by batch (CRC included) although the stop was clean.
    pub verified_segments: usize,
    /// Damaged byte ranges quarantined in place (kept, readers get `corrupt`).
    pub damaged_ranges: usize,
    /// Batches whose base offset was rewritten or that were disarmed (see `scan.rs`).
    pub repaired_batches: usize,
}

pub(crate) struct Recovered {
    pub(crate) producers: ProducerState,
    pub(crate) segments: BTreeMap<u64, Arc<Segment>>,
    pub(crate) log_start_offset: u64,
    pub(crate) meta: PartitionMeta,
    pub(crate) report: RecoveryReport,
}

pub(crate) async fn recover(
    dir: &Path,
    config: &LogConfig,
    io: &Io,
    contiguous: bool,
) -> Result<Recovered, OpenError> {
    super::compaction::swap::finish_interrupted(io, dir).await?;
    let meta = read_meta(io, dir).await?;
    let clean = meta.is_some_and(|m| m.clean_shutdown);
    let recovery_point = meta.map_or(0, |m| m.recovery_point);
    let mut report = RecoveryReport {
        clean,
        ..RecoveryReport::default()
    };
    let bases = list_segments(dir)?;
    let mut segments = BTreeMap::new();
    let mut active_damaged = false;
    for (i, &base) in bases.iter().enumerate() {
        let role = match bases.get(i + 1) {
            Some(&next_base) => SegmentRole::Closed {
                next_base,
                contiguous,
            },
            None if clean => SegmentRole::ActiveAfterCleanStop {
                log_end: meta.and_then(|m| m.log_end_offset),
            },
            None => SegmentRole::ActiveAfterCrash,
        };
        let verify = base >= recovery_point;
        let opened = open_segment(dir, base, config, io, role, verify, &mut report).await?;
        active_damaged |= role.is_active() && opened.damaged;
        segments.insert(base, Arc::new(opened.segment));
    }
    let log_start_offset = meta
        .map(|m| m.log_start_offset)
        .or_else(|| segments.keys().next().copied())
        .unwrap_or(0);
    remove_segments_below(io, dir, &mut segments, log_start_offset, &mut report).await?;
    let damaged_end = segments
        .values()
        .next_back()
        .filter(|_| active_damaged)
        .map(|s| s.snapshot())
        .filter(|s| s.durable_size > 0)
        .map(|s| s.next_offset);
    if let Some(next) = damaged_end {
        // Appends go to a fresh segment: the damaged one is closed and never rescanned.
        tracing::warn!(dir = %dir.display(), base_offset = next,
            "the active segment holds quarantined damage; starting a new segment");
        let segment = Segment::create(io, dir, next, config.active_map_len()).await?;
        io.sync_dir(dir).await?;
        segments.insert(next, Arc::new(segment));
    }
    if segments.is_empty() {
        let segment = Segment::create(io, dir, log_start_offset, config.active_map_len()).await?;
        io.sync_dir(dir).await?;
        segments.insert(log_start_offset, Arc::new(segment));
    }
    let active = segments
        .values()
        .next_back()
        .cloned()
        .expect("invariant: inserted above");
    // What we serve after recovery must be durable even if the crash left it only in the cache.
    io.sync_data(active.log_file()).await?;
    let log_end = active.snapshot().next_offset;
    let meta = PartitionMeta {
        version: META_VERSION,
        log_start_offset: log_start_offset.min(log_end),
        recovery_point: active.base_offset(),
        clean_shutdown: false,
        log_end_offset: None,
    };
    write_meta(io, dir, &meta).await?;
    let producers = rebuild_producer_state(io, dir, &segments, log_end).await?;
    if !clean || report.damaged_ranges > 0 || report.repaired_batches > 0 {
        tracing::info!(dir = %dir.display(), ?report, log_end, "recovered partition");
    }
    Ok(Recovered {
        producers,
        segments,
        log_start_offset: meta.log_start_offset,
        meta,
        report,
    })
}

/// Removes closed segments that lie wholly below the log start: left behind when a crash hit
/// between delete-records' durable metadata write and the unlink of the files.
async fn remove_segments_below(
    io: &Io,
    dir: &Path,
    segments: &mut BTreeMap<u64, Arc<Segment>>,
    log_start_offset: u64,
    report: &mut RecoveryReport,
) -> Result<(), OpenError> {
    let active = segments.keys().next_back().copied();
    let stale: Vec<u64> = segments
        .values()
        .filter(|s| Some(s.base_offset()) != active && s.snapshot().next_offset <= log_start_offset)
        .map(|s| s.base_offset())
        .collect();
    for base in &stale {
        if let Some(segment) = segments.remove(base) {
            for path in segment.paths() {
                remove_if_exists(io, &path).await?;
            }
            report.removed_segments += 1;
        }
    }
    if !stale.is_empty() {
        tracing::info!(dir = %dir.display(), count = stale.len(), "removed segments below the log start");
        io.sync_dir(dir).await?;
    }
    Ok(())
}

/// File extension of producer-state snapshots, named by the offset they are valid at.
pub const SNAPSHOT_SUFFIX: &str = "snapshot";

/// Loads the newest producer-state snapshot at or below the log end and replays the batch
/// headers after it. Snapshots past the log end (left by a cut-off tail) are deleted.
async fn rebuild_producer_state(
    io: &Io,
    dir: &Path,
    segments: &BTreeMap<u64, Arc<Segment>>,
    log_end: u64,
) -> Result<ProducerState, OpenError> {
    let mut snapshots = list_files(dir, SNAPSHOT_SUFFIX)?;
    let mut state = ProducerState::default();
    let mut from = 0;
    while let Some(offset) = snapshots.pop() {
        let path = dir.join(segment_file_name(offset, SNAPSHOT_SUFFIX));
        if offset > log_end {
            remove_if_exists(io, &path).await?;
            continue;
        }
        let file = io.open(&path, OpenMode::Read).await?;
        let bytes = read_all(io, &file).await?;
        match serde_json::from_slice::<ProducerState>(&bytes) {
            Ok(loaded) => {
                state = loaded;
                from = offset;
                break;
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "ignoring unreadable producer snapshot");
            }
        }
    }
    for segment in segments.values() {
        if segment.snapshot().next_offset <= from {
            continue;
        }
        let bytes = segment.durable_bytes();
        for (_, header) in batch_headers(&bytes).flatten() {
            let (base, last) = batch_offsets(&header);
            if base >= from {
                state.record(
                    &header,
                    BatchAck {
                        base_offset: base,
                        last_offset: last,
                        duplicate: false,
                    },
                );
            }
        }
    }
    Ok(state)
}

fn list_segments(dir: &Path) -> Result<Vec<u64>, OpenError> {
    list_files(dir, LOG_SUFFIX)
}

fn list_files(dir: &Path, suffix: &str) -> Result<Vec<u64>, OpenError> {
    let entries = std::fs::read_dir(dir).map_err(|source| OpenError::Dir {
        path: dir.into(),
        source,
    })?;
    let mut bases = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| OpenError::Dir {
            path: dir.into(),
            source,
        })?;
        if let Some(base) = entry
            .file_name()
            .to_str()
            .and_then(|n| parse_segment_file_name(n, suffix))
        {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

struct Opened {
    segment: Segment,
    damaged: bool,
}

async fn open_segment(
    dir: &Path,
    base: u64,
    config: &LogConfig,
    io: &Io,
    role: SegmentRole,
    verify: bool,
    report: &mut RecoveryReport,
) -> Result<Opened, OpenError> {
    let log = io
        .open(
            &dir.join(segment_file_name(base, LOG_SUFFIX)),
            OpenMode::ReadWrite,
        )
        .await?;
    let index_file = io
        .open(
            &dir.join(segment_file_name(base, INDEX_SUFFIX)),
            OpenMode::CreateOrOpen,
        )
        .await?;
    let time_file = io
        .open(
            &dir.join(segment_file_name(base, TIME_INDEX_SUFFIX)),
            OpenMode::CreateOrOpen,
        )
        .await?;
    let file_len = io.file_len(&log).await?;
    let trusted = load_trusted(io, &log, &index_file, &time_file, base, file_len, config).await?;
    if let (Some(state), false) = (&trusted, verify) {
        return finish_open(
            dir,
            base,
            [log, index_file, time_file],
            role,
            config,
            state.clone(),
        )
        .map(|segment| Opened {
            segment,
            damaged: false,
        })
        .map_err(OpenError::from);
    }
    if role == SegmentRole::ActiveAfterCrash {
        report.scanned_segments += 1;
    } else if verify {
        report.verified_segments += 1;
    }
    let scanned = scan_file(io, &log, base, file_len, role, config, report).await?;
    let damaged = !scanned.damaged.is_empty();
    let unchanged = scanned.keep_len == file_len && scanned.repairs.is_empty() && !damaged;
    let state = match trusted {
        // Verified and nothing to change: the index files stay as they are.
        Some(state) if unchanged => state,
        trusted => {
            if trusted.is_none() {
                tracing::warn!(path = %log.path().display(), "index missing or inconsistent; rebuilding");
            }
            let mut state = scanned.state;
            rewrite_indexes(io, &index_file, &time_file, &mut state).await?;
            report.rebuilt_indexes += 1;
            state
        }
    };
    let segment = finish_open(dir, base, [log, index_file, time_file], role, config, state)?;
    Ok(Opened { segment, damaged })
}

fn finish_open(
    dir: &Path,
    base: u64,
    files: [IoFile; 3],
    role: SegmentRole,
    config: &LogConfig,
    state: SegmentState,
) -> Result<Segment, IoError> {
    let map_len = if role.is_active() {
        config.active_map_len().max(state.durable_size as usize)
    } else {
        state.durable_size as usize
    };
    Segment::from_parts(dir, base, files, map_len, state)
}

/// Scans a segment file, applies the scan's repairs and a torn tail's cut to it, and returns
/// the outcome (its state describes the file as it is afterwards).
async fn scan_file(
    io: &Io,
    log: &IoFile,
    base: u64,
    file_len: u64,
    role: SegmentRole,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<ScanOutcome, OpenError> {
    let limits = ScanLimits {
        index_interval_bytes: config.index_interval_bytes,
        max_end_position: super::config::MAX_SEGMENT_BYTES + config.max_batch_bytes,
    };
    let outcome = if file_len == 0 {
        scan_segment(&Bytes::new(), base, role, limits)
    } else {
        let map = MappedFile::map(log, usize::try_from(file_len).unwrap_or(usize::MAX))?;
        scan_segment(&map.slice(0..map.len()), base, role, limits)
    };
    for damage in &outcome.damaged {
        tracing::error!(path = %log.path().display(), bytes = ?damage.bytes,
            offsets = ?damage.offsets, "quarantined a damaged range: its offsets read as corrupt");
    }
    for repair in &outcome.repairs {
        tracing::warn!(path = %log.path().display(), ?repair, "repairing a batch header");
        let (position, bytes) = repair.write();
        io.write_at(log, position, vec![Bytes::from(bytes)]).await?;
    }
    let torn = file_len - outcome.keep_len - outcome.reserved_tail;
    if torn > 0 {
        tracing::warn!(path = %log.path().display(), valid_len = outcome.keep_len, file_len,
            "cutting a torn tail");
    }
    if outcome.keep_len < file_len {
        io.set_len(log, outcome.keep_len).await?;
    }
    if !outcome.repairs.is_empty() || outcome.keep_len < file_len {
        io.sync_data(log).await?;
    }
    report.truncated_bytes += torn;
    report.released_reserved_bytes += outcome.reserved_tail;
    report.damaged_ranges += outcome.damaged.len();
    report.repaired_batches += outcome.repairs.len();
    Ok(outcome)
}

/// Loads indexes written by a clean run and walks only the batches after the last entry.
/// `None` when the files are torn or disagree with the log.
async fn load_trusted(
    io: &Io,
    log: &IoFile,
    index_file: &IoFile,
    time_file: &IoFile,
    base: u64,
    file_len: u64,
    config: &LogConfig,
) -> Result<Option<SegmentState>, IoError> {
    let index_bytes = read_all(io, index_file).await?;
    let time_bytes = read_all(io, time_file).await?;
    let (Ok(index), Ok(time_index)) = (
        OffsetIndex::from_bytes(&index_bytes),
        TimeIndex::from_bytes(&time_bytes),
    ) else {
        return Ok(None);
    };
    // Time-index entries sit next to offset-index entries, but only where the running maximum
    // timestamp grew (many batches in one millisecond add none), so the time index may be
    // shorter; it may not reach past the offset index.
    let time_within_index = match (time_index.last(), index.last()) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(time), Some(offset)) => time.relative_offset <= offset.relative_offset,
    };
    if time_index.len() > index.len() || !time_within_index {
        return Ok(None);
    }
    if file_len == 0 {
        let state = SegmentState {
            next_offset: base,
            ..SegmentState::default()
        };
        return Ok(index.is_empty().then_some(state));
    }
    let Ok(map) = MappedFile::map(log, usize::try_from(file_len).unwrap_or(usize::MAX)) else {
        return Ok(None);
    };
    let bytes = map.as_slice();
    let mut state = SegmentState {
        next_offset: base,
        ..SegmentState::default()
    };
    if let Some(last) = index.last() {
        let Some(Ok((_, header))) = bytes
            .get(last.position as usize..)
            .and_then(|b| batch_headers(b).next())
        else {
            return Ok(None);
        };
        if batch_offsets(&header).0 != base + u64::from(last.relative_offset) {
            return Ok(None);
        }
        state.durable_size = u64::from(last.position);
        state.next_offset = base + u64::from(last.relative_offset);
        state.max_timestamp = time_index.last().map(|e| e.timestamp);
    }
    state.index_persisted = index.len();
    state.time_index_persisted = time_index.len();
    state.index = index;
    state.time_index = time_index;
    let walk_from = state.durable_size as usize;
    for item in batch_headers(bytes.get(walk_from..).unwrap_or(&[])) {
        let Ok((relative, header)) = item else {
            return Ok(None);
        };
        let Some(appended) = trusted_placement(&header, base, &state, walk_from + relative, config)
        else {
            return Ok(None);
        };
        let basis = state.roll_basis_ms.unwrap_or(appended.max_timestamp);
        state.add_batch(base, &appended, config.index_interval_bytes, basis);
    }
    if state.durable_size != file_len {
        return Ok(None);
    }
    // The segment's age counts from its first batch, as Kafka's segment.ms does after a restart.
    state.roll_basis_ms = batch_headers(bytes)
        .next()
        .and_then(Result::ok)
        .map(|(_, h)| h.max_timestamp);
    Ok(Some(state))
}

async fn read_all(io: &Io, file: &IoFile) -> Result<Bytes, IoError> {
    let len = io.file_len(file).await?;
    io.read_at(file, 0, usize::try_from(len).unwrap_or(usize::MAX))
        .await
}

/// Where a batch after the last index entry of a trusted segment goes, if it follows on.
fn trusted_placement(
    header: &BatchHeader,
    base: u64,
    state: &SegmentState,
    position: usize,
    config: &LogConfig,
) -> Option<AppendedBatch> {
    if header.base_offset < 0 {
        return None;
    }
    let (first, last) = batch_offsets(header);
    let len = header.total_len() as u64;
    let fits = first >= state.next_offset
        && last - base <= u64::from(u32::MAX)
        && position as u64 + len <= super::config::MAX_SEGMENT_BYTES + config.max_batch_bytes;
    fits.then_some(AppendedBatch {
        position: position as u64,
        len,
        base_offset: first,
        last_offset: last,
        max_timestamp: header.max_timestamp,
    })
}

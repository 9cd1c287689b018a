//! A partition log: an ordered map of segments, one writer task, many concurrent readers.
//!
//! Appends go through a bounded queue to the partition's writer task (see `writer.rs`), which
//! assigns offsets and group-commits. Reads never wait for the writer: they take a snapshot of the
//! segment map and of [`LogOffsets`] and slice the mapped files. The high watermark published in
//! [`LogOffsets`] is the end of durable data; nothing at or above it is ever returned.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::batch::{RecordBatch, batch_headers};
use super::compaction::state::CleanerState;
use super::compaction::throttle::Throttle;
use super::compaction::{self, CleanerStatus, CompactionError, CompactionPolicy, CompactionReport};
use super::config::{LogConfig, LogConfigError};
pub use super::error::{AppendError, CloseError, OffsetOutOfRange, OpenError, ReadError};
use super::read::first_at_or_after_time;
use super::recovery::{RecoveryReport, recover};
use super::retention::{RetentionCandidate, RetentionPolicy, retention_cut};
use super::segment::{BatchRange, Segment, SegmentReadError, SegmentSnapshot};
use super::segments::{SegmentSpan, Tier};
use super::shared::Shared;
use super::stream::StreamLease;
pub use super::types::{Acks, BatchAck, LogOffsets};
use super::writer::{Command, Writer};
use crate::clock::Clock;
use crate::io::Io;

/// A range of whole batches ready to be sent, plus where the reader continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadSlice {
    /// Whole record batches, as stored; empty when the reader is at the high watermark.
    pub data: Bytes,
    /// Base offset of the first batch in `data` (may be below the requested offset: the caller
    /// skips records before it, as Kafka clients do).
    pub first_offset: u64,
    /// Offset to ask for next.
    pub next_offset: u64,
    /// Offsets at the time of the read.
    pub offsets: LogOffsets,
    /// Whether `data` is a slice of the page cache (true) or a copy read from disk (false).
    pub zero_copy: bool,
}

/// A closed segment as the uploader sees it.
#[derive(Debug, Clone)]
pub struct ClosedSegment {
    /// Its progress (base offset, size, timestamps).
    pub snapshot: SegmentSnapshot,
    /// The next segment's base offset: every offset below it and at or above the base is in
    /// this segment (or was removed by compaction).
    pub end_offset: u64,
    /// Timestamp of its first batch, `None` when empty.
    pub first_timestamp: Option<i64>,
    /// `[.log, .index, .timeindex]`.
    pub paths: [PathBuf; 3],
}

/// An open partition log.
#[derive(Debug)]
pub struct Partition {
    shared: Arc<Shared>,
    commands: mpsc::Sender<Command>,
    writer: Mutex<Option<JoinHandle<()>>>,
    recovery: RecoveryReport,
    /// Held for the length of a compaction pass: one pass per partition at a time.
    compacting: tokio::sync::Mutex<()>,
    /// The cleaner's durable state as of the last pass.
    cleaner: Mutex<CleanerState>,
    /// Set when a swap failed after its commit point: the files are then in a state only
    /// recovery finishes, so the cleaner leaves the partition alone until restart.
    cleaner_failure: Mutex<Option<String>>,
}

impl Partition {
    /// Opens (or creates) the partition in `dir`, running crash recovery when the last stop was
    /// not clean, and starts its writer task.
    ///
    /// # Errors
    /// Invalid configuration, unreadable metadata, or I/O errors.
    pub async fn open(
        dir: &Path,
        config: LogConfig,
        io: Io,
        clock: Arc<dyn Clock>,
    ) -> Result<Partition, OpenError> {
        config.validate()?;
        std::fs::create_dir_all(dir).map_err(|source| OpenError::Dir {
            path: dir.to_path_buf(),
            source,
        })?;
        let contiguous = !dir.join(compaction::COMPACTED_MARKER).exists();
        let recovered = recover(dir, &config, &io, contiguous).await?;
        let cleaner = compaction::state::load(&io, dir).await?;
        let leo = recovered
            .segments
            .values()
            .next_back()
            .map_or(0, |s| s.snapshot().next_offset);
        let offsets = LogOffsets {
            log_start_offset: recovered.log_start_offset,
            high_watermark: leo,
            log_end_offset: leo,
        };
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            config: RwLock::new(config.clone()),
            io,
            clock,
            segments: RwLock::new(recovered.segments),
            offsets: watch::Sender::new(offsets),
            contiguous: std::sync::atomic::AtomicBool::new(contiguous),
            poisoned: RwLock::new(None),
            lendable: std::sync::atomic::AtomicBool::new(false),
            lend_after_ms: std::sync::atomic::AtomicI64::new(i64::MIN),
        });
        let (commands, receiver) = mpsc::channel(config.append_queue_depth);
        let writer = Writer::new(Arc::clone(&shared), recovered.meta, recovered.producers);
        let handle = tokio::spawn(writer.run(receiver));
        Ok(Partition {
            shared,
            commands,
            writer: Mutex::new(Some(handle)),
            recovery: recovered.report,
            compacting: tokio::sync::Mutex::new(()),
            cleaner: Mutex::new(cleaner),
            cleaner_failure: Mutex::new(None),
        })
    }

    /// Counts record bytes of this partition served from a copy made elsewhere (a cold read
    /// from tiered storage), beside the local reads the disk layer counts itself, so the
    /// copied-bytes metric covers every fetch that was not zero-copy.
    pub fn count_copied_read(&self, bytes: u64) {
        self.shared.io.stats().add_copied(bytes);
    }

    /// What recovery did when this partition was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The partition's directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Appends batches atomically (one write, in one segment) and returns their offsets.
    ///
    /// Batches must have passed [`RecordBatch::validate_for_append`]; their stored `baseOffset` is
    /// replaced by the assigned one, every other byte is kept.
    ///
    /// # Errors
    /// See [`AppendError`]; on error nothing of this call is readable.
    pub async fn append(
        &self,
        batches: Vec<RecordBatch>,
        acks: Acks,
    ) -> Result<Vec<BatchAck>, AppendError> {
        self.append_if(batches, acks, None).await
    }

    /// Like [`Partition::append`], but only if the log end offset equals `expected_offset`
    /// (when given) at the moment the writer assigns offsets: a compare-and-append for writers
    /// that must not interleave.
    ///
    /// # Errors
    /// [`AppendError::OffsetMismatch`] with the actual log end, or any error of `append`.
    pub async fn append_if(
        &self,
        batches: Vec<RecordBatch>,
        acks: Acks,
        expected_offset: Option<u64>,
    ) -> Result<Vec<BatchAck>, AppendError> {
        self.check_batch_sizes(&batches)?;
        if batches.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, response) = oneshot::channel();
        let command = Command::Append {
            batches,
            acks,
            expected_offset,
            reply,
            enqueued: crate::clock::stopwatch(),
        };
        self.commands.try_send(command).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => AppendError::Busy,
            mpsc::error::TrySendError::Closed(_) => AppendError::Closed,
        })?;
        response.await.map_err(|_| AppendError::Closed)?
    }

    /// A lease on the active segment's tail for a streamed append of a `len`-byte body (see
    /// [`super::stream`]): `None` when the writer is busy or serves competing appenders (asked
    /// without waiting), or cannot lend now; the body is then appended the usual way.
    pub async fn stream_lease(&self, len: u64) -> Option<StreamLease> {
        if !self.shared.may_lend() {
            return None;
        }
        let (reply, response) = oneshot::channel();
        self.commands
            .try_send(Command::Stream { len, reply })
            .ok()?;
        response.await.ok().flatten()
    }

    /// [`Partition::append_if`] for batches whose bytes were streamed under `lease`: the writer
    /// then only stamps their offsets and syncs. When the lease was lost on the way, the
    /// batches are appended the usual way; the answer is the same either way.
    ///
    /// # Errors
    /// As [`Partition::append_if`].
    pub async fn append_streamed(
        &self,
        lease: StreamLease,
        batches: Vec<RecordBatch>,
        acks: Acks,
        expected_offset: Option<u64>,
    ) -> Result<Vec<BatchAck>, AppendError> {
        self.check_batch_sizes(&batches)?;
        match lease.commit(batches, acks, expected_offset) {
            Ok(response) => response.await.map_err(|_| AppendError::Closed)?,
            Err(batches) => self.append_if(batches, acks, expected_offset).await,
        }
    }

    /// Refuses batches over the partition's `max_message_bytes`; appends check this too, and the
    /// broker checks first when a request appends to several partitions.
    ///
    /// # Errors
    /// [`AppendError::BatchTooLarge`] for the first batch over the limit.
    pub fn check_batch_sizes(&self, batches: &[RecordBatch]) -> Result<(), AppendError> {
        let limit = self.shared.config.read().max_batch_bytes;
        match batches.iter().find(|b| b.len() as u64 > limit) {
            Some(batch) => Err(AppendError::BatchTooLarge {
                size: batch.len() as u64,
                limit,
            }),
            None => Ok(()),
        }
    }

    /// Closes the active segment and starts a new one now.
    ///
    /// # Errors
    /// When the writer is poisoned or gone, or the roll's I/O fails.
    pub async fn roll(&self) -> Result<(), AppendError> {
        let (reply, response) = oneshot::channel();
        self.commands
            .send(Command::Roll { reply })
            .await
            .map_err(|_| AppendError::Closed)?;
        response.await.map_err(|_| AppendError::Closed)?
    }

    /// Deletes every record below `before` (Kafka's DeleteRecords): the log start offset moves
    /// to `before`, durably, and fetches below it get `OffsetOutOfRange`. Returns the new log
    /// start offset.
    ///
    /// # Errors
    /// [`AppendError::OffsetOutOfRange`] above the high watermark; I/O failures.
    pub async fn delete_records(&self, before: u64) -> Result<u64, AppendError> {
        let (reply, response) = oneshot::channel();
        let command = Command::DeleteRecords { before, reply };
        self.commands
            .send(command)
            .await
            .map_err(|_| AppendError::Closed)?;
        response.await.map_err(|_| AppendError::Closed)?
    }

    /// Where time and size retention would move the log start: past every closed segment, oldest
    /// first, whose newest record is older than `retention_ms` or without which the partition
    /// still holds at least `retention_bytes` (`-1` disables either). The active segment is
    /// never included. `None` when nothing is due.
    pub fn retention_cut(
        &self,
        retention_ms: i64,
        retention_bytes: i64,
        now_ms: i64,
    ) -> Option<u64> {
        self.retention_cut_below(retention_ms, retention_bytes, now_ms, u64::MAX)
    }

    /// [`Partition::retention_cut`] limited to segments that end at or below `bound`: local
    /// retention of a tiered topic may only drop segments the bucket already holds.
    pub fn retention_cut_below(
        &self,
        retention_ms: i64,
        retention_bytes: i64,
        now_ms: i64,
        bound: u64,
    ) -> Option<u64> {
        let segments = self.segments();
        let (_active, closed) = segments.split_last()?;
        let total: u64 = segments.iter().map(|s| s.durable_size).sum();
        // A closed segment ends where the next one (closed or active) begins.
        let candidates = closed
            .iter()
            .zip(segments.iter().skip(1))
            .map(|(segment, next)| RetentionCandidate {
                end_offset: next.base_offset,
                size: segment.durable_size,
                max_timestamp: segment.max_timestamp,
            })
            .take_while(|candidate| candidate.end_offset <= bound);
        let policy = RetentionPolicy {
            retention_ms,
            retention_bytes,
        };
        retention_cut(candidates, total, policy, now_ms)
            .filter(|cut| *cut > self.offsets().log_start_offset)
    }

    /// Closed segments with their files, oldest first, for uploading.
    pub fn closed_segments(&self) -> Vec<ClosedSegment> {
        let segments: Vec<Arc<Segment>> = self.shared.segments.read().values().cloned().collect();
        let Some((_active, closed)) = segments.split_last() else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(closed.len());
        for (i, segment) in closed.iter().enumerate() {
            let snapshot = segment.snapshot();
            let bytes = segment.durable_bytes();
            let first_timestamp = batch_headers(&bytes)
                .next()
                .and_then(Result::ok)
                .map(|(_, header)| header.first_timestamp);
            out.push(ClosedSegment {
                snapshot,
                end_offset: segments[i + 1].base_offset(),
                first_timestamp,
                paths: segment.paths(),
            });
        }
        out
    }

    /// Runs one compaction pass if one is due (see [`compaction`]): `now_ms` is the time
    /// tombstone retention and `min_compaction_lag_ms` are measured against.
    ///
    /// # Errors
    /// I/O errors and corrupt closed segments; the old segments then stay as they were.
    pub async fn compact(
        &self,
        policy: &CompactionPolicy,
        now_ms: i64,
        throttle: &Throttle,
    ) -> Result<CompactionReport, CompactionError> {
        self.compact_inner(policy, now_ms, throttle, None).await
    }

    /// Like [`Partition::compact`], but abandons the first swap after `steps` of its steps, as a
    /// crash there would: for crash-injection tests only.
    #[doc(hidden)]
    pub async fn compact_and_crash_in_swap(
        &self,
        policy: &CompactionPolicy,
        now_ms: i64,
        steps: usize,
    ) -> Result<CompactionReport, CompactionError> {
        self.compact_inner(policy, now_ms, &Throttle::unlimited(), Some(steps))
            .await
    }

    async fn compact_inner(
        &self,
        policy: &CompactionPolicy,
        now_ms: i64,
        throttle: &Throttle,
        stop_swap_after: Option<usize>,
    ) -> Result<CompactionReport, CompactionError> {
        let _pass = self.compacting.lock().await;
        if let Some(reason) = self.cleaner_failure.lock().clone() {
            return Err(CompactionError::Disabled { reason });
        }
        let mut state = self.cleaner.lock().clone();
        let result = compaction::run(
            &self.shared,
            &self.commands,
            &mut state,
            policy,
            now_ms,
            throttle,
            stop_swap_after,
        )
        .await;
        match &result {
            Ok(_) => *self.cleaner.lock() = state,
            Err(CompactionError::Io(error)) => {
                tracing::error!(dir = %self.shared.dir.display(), %error, "compaction failed; cleaner stopped on this partition");
                *self.cleaner_failure.lock() = Some(error.to_string());
            }
            Err(_) => {}
        }
        result
    }

    /// The cleaner's statistics and the current dirty ratio of the closed segments.
    pub fn cleaner_status(&self) -> CleanerStatus {
        let segments: Vec<Arc<Segment>> = self.shared.segments.read().values().cloned().collect();
        let closed = segments.split_last().map_or(&[][..], |(_, closed)| closed);
        let state = self.cleaner.lock().clone();
        let (dirty, total) = compaction::dirty_bytes(closed, state.clean_offset);
        CleanerStatus {
            dirty_ratio: compaction::ratio(dirty, total),
            runs: state.runs,
            last_run_ms: state.last_run_ms,
            bytes_reclaimed: state.bytes_reclaimed,
            failure: self.cleaner_failure.lock().clone(),
        }
    }

    /// Runs the idle-roll check now instead of waiting for the next background tick.
    ///
    /// # Errors
    /// As [`Partition::roll`].
    pub async fn tick(&self) -> Result<(), AppendError> {
        let (reply, response) = oneshot::channel();
        self.commands
            .send(Command::Tick { reply })
            .await
            .map_err(|_| AppendError::Closed)?;
        response.await.map_err(|_| AppendError::Closed)?
    }

    /// Flushes everything, marks the shutdown clean and stops the writer.
    ///
    /// # Errors
    /// When flushing or writing the metadata fails (the next open then runs recovery).
    pub async fn close(&self) -> Result<(), CloseError> {
        let (reply, response) = oneshot::channel();
        if self.commands.send(Command::Close { reply }).await.is_err() {
            return Err(CloseError::WriterGone);
        }
        let result = response.await.map_err(|_| CloseError::WriterGone)?;
        let handle = self.writer.lock().take();
        if let Some(handle) = handle {
            let _ = handle.await;
        }
        result
    }

    /// Replaces the partition's settings; they apply from the next append or roll on.
    ///
    /// # Errors
    /// An invalid configuration, which is not applied.
    pub fn set_config(&self, config: LogConfig) -> Result<(), LogConfigError> {
        config.validate()?;
        *self.shared.config.write() = config;
        Ok(())
    }

    /// Why the partition refuses appends, if a failed fdatasync poisoned it.
    pub fn poisoned(&self) -> Option<String> {
        self.shared.poisoned.read().clone()
    }

    /// Current offsets.
    pub fn offsets(&self) -> LogOffsets {
        *self.shared.offsets.borrow()
    }

    /// A receiver that changes whenever the offsets do: long-polling readers wait on it.
    pub fn subscribe(&self) -> watch::Receiver<LogOffsets> {
        self.shared.offsets.subscribe()
    }

    /// The local segments as spans of the partition's segment map; the newest timestamp
    /// counts only durable records.
    pub fn segment_spans(&self) -> Vec<SegmentSpan> {
        self.segments()
            .iter()
            .map(|s| SegmentSpan {
                base_offset: s.base_offset,
                next_offset: s.next_offset,
                max_timestamp: s.max_timestamp.filter(|_| s.durable_size > 0),
                tier: Tier::Local,
            })
            .collect()
    }

    /// Progress of every segment, oldest first.
    pub fn segments(&self) -> Vec<SegmentSnapshot> {
        self.shared
            .segments
            .read()
            .values()
            .map(|s| s.snapshot())
            .collect()
    }

    /// Whole batches starting with the one that holds `offset`, up to `max_bytes` (at least one
    /// batch), all below the high watermark. At the high watermark the slice is empty.
    ///
    /// # Errors
    /// [`ReadError::OffsetOutOfRange`] outside `[log start, high watermark]`; I/O or corruption.
    pub async fn read(&self, offset: u64, max_bytes: u64) -> Result<ReadSlice, ReadError> {
        let offsets = self.offsets();
        if offset < offsets.log_start_offset || offset > offsets.high_watermark {
            return Err(ReadError::OffsetOutOfRange(OffsetOutOfRange {
                requested: offset,
                earliest: offsets.log_start_offset,
                latest: offsets.high_watermark,
            }));
        }
        let empty = ReadSlice {
            data: Bytes::new(),
            first_offset: offset,
            next_offset: offset,
            offsets,
            zero_copy: true,
        };
        if offset == offsets.high_watermark {
            return Ok(empty);
        }
        let Some((segment, range)) = self.locate(offset, max_bytes, offsets.high_watermark)? else {
            return Ok(ReadSlice {
                next_offset: offsets.high_watermark,
                ..empty
            });
        };
        self.read_ahead_if_behind(&segment, &range.bytes);
        let stats = self.shared.io.stats();
        let len = range.bytes.end - range.bytes.start;
        let (data, zero_copy) = match segment.resident_slice(&range.bytes) {
            Some(data) => {
                stats.add_zero_copy(len);
                (data, true)
            }
            None => {
                let len_usize = usize::try_from(len).unwrap_or(usize::MAX);
                let data = self
                    .shared
                    .io
                    .read_at(segment.log_file(), range.bytes.start, len_usize)
                    .await?;
                stats.add_copied(data.len() as u64);
                (data, false)
            }
        };
        Ok(ReadSlice {
            data,
            first_offset: range.first_offset,
            next_offset: range.next_offset,
            offsets,
            zero_copy,
        })
    }

    /// With the page-cache window on, a read behind it (in a closed segment, or more than the
    /// window before the active segment's end) is a catch-up read from disk: keep the kernel
    /// reading ahead of it (`read_ahead`). Readers that follow the end read cached bytes and
    /// are left alone.
    fn read_ahead_if_behind(&self, segment: &Segment, range: &std::ops::Range<u64>) {
        let window = self.shared.config.read().page_cache_window_bytes;
        if window == 0 {
            return;
        }
        let active = self.shared.active_segment();
        let behind = segment.base_offset() != active.base_offset()
            || active.snapshot().durable_size.saturating_sub(range.end) > window;
        if behind {
            segment.read_ahead(&self.shared.io, range);
        }
    }

    fn locate(
        &self,
        offset: u64,
        max_bytes: u64,
        high_watermark: u64,
    ) -> Result<Option<(Arc<Segment>, BatchRange)>, ReadError> {
        let segments = self.segments_from(offset);
        for (i, segment) in segments.iter().enumerate() {
            let next_base = segments.get(i + 1).map(|next| next.base_offset());
            let upper = next_base.unwrap_or(high_watermark);
            let contiguous = self
                .shared
                .contiguous
                .load(std::sync::atomic::Ordering::SeqCst);
            if let Some(range) = segment.locate(
                offset,
                max_bytes,
                high_watermark,
                upper,
                contiguous,
                next_base.is_some(),
            )? {
                return Ok(Some((Arc::clone(segment), range)));
            }
        }
        Ok(None)
    }

    /// The segment holding `offset` and every later one.
    fn segments_from(&self, offset: u64) -> Vec<Arc<Segment>> {
        let segments = self.shared.segments.read();
        let floor = segments
            .range(..=offset)
            .next_back()
            .map_or(0, |(base, _)| *base);
        segments
            .range(floor..)
            .map(|(_, s)| Arc::clone(s))
            .collect()
    }

    /// The first offset whose record timestamp is `>= timestamp`, or `None` when every durable
    /// record is older. Uses each segment's maximum timestamp to pick the segment and its time
    /// index to skip to the right place, then decodes only the batches from there.
    ///
    /// # Errors
    /// Corrupt data in the scanned range.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<u64>, ReadError> {
        let offsets = self.offsets();
        let segments: Vec<Arc<Segment>> = self.shared.segments.read().values().cloned().collect();
        for segment in segments {
            let snapshot = segment.snapshot();
            if snapshot.max_timestamp.is_none_or(|max| max < timestamp) {
                continue;
            }
            let start = segment.with_state(|state| {
                let from = state
                    .time_index
                    .last_before(timestamp)
                    .map_or(0, |e| e.relative_offset);
                state
                    .index
                    .lookup(from)
                    .map_or(0, |e| u64::from(e.position))
            });
            let bytes = segment.durable_bytes();
            let window = bytes.slice(start as usize..);
            // Records below the log start (delete-records cut inside this segment) are gone.
            let from = offsets.log_start_offset;
            let found = first_at_or_after_time(&window, from, offsets.high_watermark, timestamp)
                .map_err(|error| SegmentReadError::Corrupt {
                    path: segment.log_file().path().to_path_buf(),
                    position: start + error.position as u64,
                    source: error.source,
                })?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        // Without close() the writer stops when its queue closes; the next open runs recovery.
        if let Some(handle) = self.writer.lock().take() {
            handle.abort();
        }
    }
}

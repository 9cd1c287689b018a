//! The partition's single writer task: assigns offsets, group-commits, rolls segments.
//!
//! One round = every append waiting in the queue (up to `max_round_bytes`), written with one
//! vectored write and made durable with one fdatasync. Requests that arrive during the fsync form
//! the next round, so the batch size adapts to the disk's fsync latency by itself. `acks=leader`
//! requests are answered after the write, `acks=all` after the fsync; readers see the round only
//! after the fsync. A round of `acks=leader` requests only does not wait for its fsync: the writer
//! takes the next round while it runs (see [`Pipeline`]), so leader acks cost a write, not a
//! write and an fsync. A failed write is cut off again (`set_len` back to the durable size) so the
//! partition keeps accepting appends once the cause (a full disk) is gone; a failed fsync poisons
//! the partition, because after one the kernel may have dropped dirty pages it still reports
//! as written (PostgreSQL's "fsyncgate").

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::batch::{LOG_OVERHEAD, RecordBatch};
use super::cache_window::CacheWindow;
use super::compaction::{self, CompactionError, SwapInstaller, swap::SwapPlan};
use super::error::{AppendError, CloseError, OffsetOutOfRange};
use super::meta::{PartitionMeta, write_file_atomically, write_meta};
use super::preallocate::Preallocation;
use super::producer_state::{ProducerState, SequenceCheck, UndoLog};
use super::recovery::SNAPSHOT_SUFFIX;
use super::segment::{AppendedBatch, Segment, SegmentState, segment_file_name};
use super::shared::Shared;
use super::stats::{AcksLabel, WRITER};
use super::stream::StreamLease;
use super::types::{Acks, BatchAck, LogOffsets};
use crate::clock::stopwatch;
use crate::io::IoError;
use futures::future::BoxFuture;

mod lease;

type AppendReply = oneshot::Sender<Result<Vec<BatchAck>, AppendError>>;

/// Messages to the writer task.
#[derive(Debug)]
pub(crate) enum Command {
    Append {
        batches: Vec<RecordBatch>,
        acks: Acks,
        expected_offset: Option<u64>,
        reply: AppendReply,
        /// When the request entered the queue (for the queue-wait histogram).
        enqueued: Instant,
    },
    /// Lends the active segment's tail to a streamed append (see `log::stream`); `None` when
    /// other appends are waiting or the partition cannot take one now.
    Stream {
        len: u64,
        reply: oneshot::Sender<Option<StreamLease>>,
    },
    Roll {
        reply: oneshot::Sender<Result<(), AppendError>>,
    },
    Tick {
        reply: oneshot::Sender<Result<(), AppendError>>,
    },
    Close {
        reply: oneshot::Sender<Result<(), CloseError>>,
    },
    DeleteRecords {
        before: u64,
        reply: oneshot::Sender<Result<u64, AppendError>>,
    },
    /// Installs a compacted segment (see `compaction::install`): on the writer so it cannot
    /// interleave with rolls and deletions.
    Swap {
        plan: SwapPlan,
        state: SegmentState,
        stop_after: Option<usize>,
        reply: oneshot::Sender<Result<bool, CompactionError>>,
    },
}

impl SwapInstaller for mpsc::Sender<Command> {
    fn install(
        &self,
        plan: SwapPlan,
        state: SegmentState,
        stop_after: Option<usize>,
    ) -> BoxFuture<'_, Result<bool, CompactionError>> {
        Box::pin(async move {
            let (reply, response) = oneshot::channel();
            let command = Command::Swap {
                plan,
                state,
                stop_after,
                reply,
            };
            self.send(command)
                .await
                .map_err(|_| CompactionError::Closed)?;
            response.await.map_err(|_| CompactionError::Closed)?
        })
    }
}

/// One append request inside a round.
struct Pending {
    batches: Vec<RecordBatch>,
    acks: Acks,
    expected_offset: Option<u64>,
    reply: AppendReply,
    bytes: u64,
    enqueued: Instant,
}

/// What happens to one batch of a request, decided before the write.
enum Planned {
    /// Written at these offsets.
    Write { batch: RecordBatch, ack: BatchAck },
    /// A producer retry of a batch already in the log: answered, not written.
    Duplicate(BatchAck),
}

/// A request whose batches have offsets.
struct PlannedRequest {
    plan: Vec<Planned>,
    acks: Acks,
    reply: AppendReply,
}

pub(crate) struct Writer {
    shared: Arc<Shared>,
    meta: PartitionMeta,
    producers: ProducerState,
    pipeline: Pipeline,
    cache_window: CacheWindow,
    preallocation: Preallocation,
    /// Requests in the last round: more than one means appenders compete (see `gather_round`).
    last_round_len: usize,
}

/// Bytes of `acks=leader` rounds that are written but not yet covered by a finished fdatasync.
/// At most one fdatasync is in flight; batches written meanwhile wait for the next one. Segment
/// state (what readers see) and the high watermark move only when an fdatasync finishes, in
/// write order. Everything else the writer does (rolls, deletions, swaps, closes and rounds with
/// `acks=all`) first settles the pipeline, so it sees a fully durable segment as before.
#[derive(Default)]
struct Pipeline {
    /// The active segment's written end (size, next offset) while it is ahead of the durable one.
    tail: Option<(u64, u64)>,
    syncing: Option<Syncing>,
    /// Batches written after the in-flight fdatasync started.
    waiting: Vec<AppendedBatch>,
}

/// An fdatasync in flight and the batches it makes durable.
struct Syncing {
    /// `Sync` too: the writer is borrowed across awaits (`&self` methods).
    future: std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), IoError>> + Send + Sync>>,
    segment: Arc<Segment>,
    appended: Vec<AppendedBatch>,
    end_offset: u64,
}

/// Waits for the in-flight fdatasync, or forever when there is none.
async fn wait_sync(syncing: &mut Option<Syncing>) -> Result<(), IoError> {
    match syncing {
        Some(syncing) => (&mut syncing.future).await,
        None => std::future::pending().await,
    }
}

impl Writer {
    pub(crate) fn new(shared: Arc<Shared>, meta: PartitionMeta, producers: ProducerState) -> Self {
        Self {
            shared,
            meta,
            producers,
            pipeline: Pipeline::default(),
            cache_window: CacheWindow::default(),
            preallocation: Preallocation::default(),
            last_round_len: 0,
        }
    }

    pub(crate) async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        let period = Duration::from_millis(self.shared.config.read().roll_check_interval_ms);
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut deferred: Option<Command> = None;
        loop {
            let command = match deferred.take() {
                Some(command) => Some(command),
                None => self.idle(&mut commands, &mut ticker).await,
            };
            let Some(command) = command else {
                return;
            };
            match command {
                Command::Append {
                    batches,
                    acks,
                    expected_offset,
                    reply,
                    enqueued,
                } => {
                    let first = pending(batches, acks, expected_offset, reply, enqueued);
                    self.open_round(first, &mut commands, &mut deferred).await;
                }
                Command::Stream { len, reply } => {
                    self.lend_tail(len, reply, &mut commands, &mut deferred)
                        .await
                }
                Command::Roll { reply } => {
                    let _ = reply.send(self.roll().await);
                }
                Command::Tick { reply } => {
                    let _ = reply.send(self.roll_if_old().await);
                }
                Command::DeleteRecords { before, reply } => {
                    self.settle().await;
                    let _ = reply.send(self.delete_records(before).await);
                }
                Command::Swap {
                    plan,
                    state,
                    stop_after,
                    reply,
                } => {
                    self.settle().await;
                    let result = compaction::install(&self.shared, &plan, state, stop_after).await;
                    let _ = reply.send(result);
                }
                Command::Close { reply } => {
                    self.settle().await;
                    let _ = reply.send(self.close().await);
                    return;
                }
            }
        }
    }

    /// Waits for the next command, finishing leader fdatasyncs and idle rolls meanwhile;
    /// `None` once every handle is gone. While it waits with nothing in flight and nobody
    /// competing, the tail may be lent to a stream (`Shared::lendable`).
    async fn idle(
        &mut self,
        commands: &mut mpsc::Receiver<Command>,
        ticker: &mut tokio::time::Interval,
    ) -> Option<Command> {
        loop {
            let lendable = self.can_lend();
            self.shared.lendable.store(lendable, Ordering::Release);
            let next = tokio::select! {
                result = wait_sync(&mut self.pipeline.syncing) => {
                    if let Some(syncing) = self.pipeline.syncing.take() {
                        self.finish_sync(syncing, result);
                    }
                    continue;
                }
                command = commands.recv() => command,
                _ = ticker.tick() => {
                    if let Err(error) = self.roll_if_old().await {
                        tracing::warn!(dir = %self.shared.dir.display(), %error, "idle roll failed");
                    }
                    continue;
                }
            };
            self.shared.lendable.store(false, Ordering::Release);
            return next;
        }
    }

    /// Gathers and writes the round `first` opens.
    async fn open_round(
        &mut self,
        first: Pending,
        commands: &mut mpsc::Receiver<Command>,
        deferred: &mut Option<Command>,
    ) {
        let round = self.gather_round(first, commands, deferred).await;
        self.last_round_len = round.len();
        self.append_round(round).await;
    }

    /// The round `first` opens: every append already queued behind it, up to
    /// `max_round_bytes`; any other command waits in `deferred` until the round is written.
    async fn gather_round(
        &self,
        first: Pending,
        commands: &mut mpsc::Receiver<Command>,
        deferred: &mut Option<Command>,
    ) -> Vec<Pending> {
        let mut round_bytes = first.bytes;
        let mut round = vec![first];
        // While appenders compete, let those that are already runnable enqueue before the round
        // is cut: one pass of the scheduler (microseconds) against a round that costs an fsync
        // (hundreds of microseconds), so rounds fill up instead of alternating between a lone
        // request and the rest. A lone producer (the last round held one request) has nobody to
        // wait for, and the pass would only add to each of its requests.
        if self.last_round_len > 1 {
            tokio::task::yield_now().await;
        }
        while round_bytes < self.shared.config.read().max_round_bytes {
            match commands.try_recv() {
                Ok(Command::Append {
                    batches,
                    acks,
                    expected_offset,
                    reply,
                    enqueued,
                }) => {
                    let next = pending(batches, acks, expected_offset, reply, enqueued);
                    round_bytes += next.bytes;
                    round.push(next);
                }
                Ok(other) => {
                    *deferred = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        record_round(&round, round_bytes);
        round
    }

    /// Writes a round, rolling between requests when the active segment is full.
    async fn append_round(&mut self, round: Vec<Pending>) {
        if let Some(reason) = self.poisoned() {
            for request in round {
                let _ = request.reply.send(Err(AppendError::Poisoned {
                    reason: reason.clone(),
                }));
            }
            return;
        }
        if round.iter().any(|request| request.acks == Acks::All) {
            self.settle().await;
        }
        if let Err(error) = self.roll_if_old().await {
            fail_all(round, &error);
            return;
        }
        let mut run = Run::default();
        for request in round {
            let active = self.shared.active_segment();
            let (written_size, written_next) = self.written_end(&active);
            let size = written_size + run.bytes;
            let records: u64 = request.batches.iter().map(record_span).sum();
            let relative_end = written_next + run.offsets + records - active.base_offset();
            let segment_bytes = self.shared.config.read().segment_bytes;
            let full = size > 0
                && (size + request.bytes > segment_bytes || relative_end > u64::from(u32::MAX));
            if full {
                let finished = std::mem::take(&mut run);
                self.write_run(&active, finished).await;
                if let Err(error) = self.roll().await {
                    let _ = request.reply.send(Err(error));
                    continue;
                }
            }
            let next_offset = self.written_end(&self.shared.active_segment()).1 + run.offsets;
            if let Some(planned) = self.plan(request, next_offset, &mut run.undo) {
                run.bytes += planned.written_bytes();
                run.offsets += planned.written_offsets();
                run.requests.push(planned);
            }
        }
        let active = self.shared.active_segment();
        self.write_run(&active, run).await;
    }

    /// Assigns offsets to a request's batches, after the conditional-append and idempotence
    /// checks. A refused request is answered here and yields `None`.
    fn plan(
        &mut self,
        request: Pending,
        next_offset: u64,
        undo: &mut UndoLog,
    ) -> Option<PlannedRequest> {
        // A retry whose batches all landed already is answered as the duplicate it is: its
        // first try moved the log end, so its `expected_offset` no longer matches, and a 412
        // would leave the producer unable to tell whether the write happened.
        if let Some(expected) = request.expected_offset
            && expected != next_offset
            && !self.all_duplicates(&request.batches)
        {
            let error = AppendError::OffsetMismatch {
                expected,
                actual: next_offset,
            };
            let _ = request.reply.send(Err(error));
            return None;
        }
        let mark = undo.len();
        let mut plan = Vec::with_capacity(request.batches.len());
        let mut next = next_offset;
        for batch in request.batches {
            match self.producers.check(batch.header()) {
                Ok(SequenceCheck::Append) => {
                    let last_offset = next + record_span(&batch) - 1;
                    let ack = BatchAck {
                        base_offset: next,
                        last_offset,
                        duplicate: false,
                    };
                    self.producers.record_undoable(batch.header(), ack, undo);
                    next = ack.last_offset + 1;
                    plan.push(Planned::Write { batch, ack });
                }
                Ok(SequenceCheck::Duplicate(ack)) => {
                    WRITER.duplicates.inc();
                    plan.push(Planned::Duplicate(BatchAck {
                        duplicate: true,
                        ..ack
                    }));
                }
                Err(error) => {
                    self.producers.undo(undo, mark);
                    let _ = request.reply.send(Err(AppendError::Producer(error)));
                    return None;
                }
            }
        }
        Some(PlannedRequest {
            plan,
            acks: request.acks,
            reply: request.reply,
        })
    }

    /// Whether every batch is a producer's retry of a batch already in the log.
    fn all_duplicates(&self, batches: &[RecordBatch]) -> bool {
        batches.iter().all(|batch| {
            matches!(
                self.producers.check(batch.header()),
                Ok(SequenceCheck::Duplicate(_))
            )
        })
    }

    /// One vectored write + one fdatasync for a run of requests in one segment.
    async fn write_run(&mut self, segment: &Arc<Segment>, run: Run) {
        let Some(run) = self.runnable(run) else {
            return;
        };
        let (start, next_offset) = self.written_end(segment);
        let mut laid = lay_out(&run, start, next_offset);
        let leader_acks = run.requests.iter().any(|r| r.acks == Acks::Leader);
        self.reserve_ahead(segment, start, laid.end.0).await;
        let io = self.shared.io.clone();
        let buffers = std::mem::take(&mut laid.buffers);
        let write = write_buffers(&io, segment, start, buffers, leader_acks).await;
        self.finish_run(segment, run, start, laid, write).await;
    }

    /// Whether a run has requests to write; a poisoned partition refuses them here.
    fn runnable(&mut self, run: Run) -> Option<Run> {
        if run.requests.is_empty() {
            return None;
        }
        let Some(reason) = self.poisoned() else {
            return Some(run);
        };
        self.producers.undo(&run.undo, 0);
        for request in run.requests {
            request.reply_poisoned(&reason);
        }
        None
    }

    /// Answers a run whose bytes went to the segment at `start` (`write` says how that went),
    /// and publishes it once durable.
    async fn finish_run(
        &mut self,
        segment: &Arc<Segment>,
        run: Run,
        start: u64,
        laid: LaidOut,
        write: Result<(), IoError>,
    ) {
        let io = self.shared.io.clone();
        let LaidOut {
            appended,
            end: (position, next_offset),
            ..
        } = laid;
        let leader_acks = run.requests.iter().any(|r| r.acks == Acks::Leader);
        if let Err(error) = write {
            self.fail_run(segment, run, start, error).await;
            return;
        }
        self.publish_end(next_offset, false);
        if run.requests.iter().all(|r| r.acks == Acks::Leader) {
            self.pipeline_leader_run(segment, run, appended, (position, next_offset));
            return;
        }
        let mut waiting = Vec::with_capacity(run.requests.len());
        for request in run.requests {
            let acks: Vec<BatchAck> = request.plan.iter().map(Planned::ack).collect();
            match request.acks {
                Acks::Leader => {
                    let _ = request.reply.send(Ok(acks));
                }
                Acks::All => waiting.push((request.reply, acks)),
            }
        }
        if leader_acks
            && !appended.is_empty()
            && let Err(error) = timed_sync(&io, segment).await
        {
            let reason = format!("fdatasync failed: {error}");
            self.poison(reason.clone());
            for (reply, _) in waiting {
                let _ = reply.send(Err(AppendError::Poisoned {
                    reason: reason.clone(),
                }));
            }
            return;
        }
        let now = self.shared.clock.now_ms();
        let interval = self.shared.config.read().index_interval_bytes;
        segment.publish(&appended, interval, now);
        self.publish_end(next_offset, true);
        for (reply, acks) in waiting {
            let _ = reply.send(Ok(acks));
        }
        self.drop_cached_behind(segment);
        // Index entries of the active segment reach their files when it is sealed or closed:
        // after a crash, recovery rescans the active segment and rebuilds them anyway, so
        // writing them every round would only add I/O to every append.
    }

    /// Answers a run whose write failed. A failed fdatasync poisons the partition; a failed
    /// write is cut off, so appends resume once its cause (a full disk) is gone.
    async fn fail_run(&mut self, segment: &Segment, run: Run, start: u64, error: IoError) {
        if error.op == "fdatasync" {
            let reason = format!("fdatasync failed: {error}");
            self.poison(reason.clone());
            for request in run.requests {
                request.reply_poisoned(&reason);
            }
            return;
        }
        tracing::warn!(%error, dir = %self.shared.dir.display(), "append write failed; truncating");
        self.producers.undo(&run.undo, 0);
        let error = Arc::new(error);
        self.cut_back(segment, start, "a failed write").await;
        for request in run.requests {
            let _ = request.reply.send(Err(AppendError::Io(Arc::clone(&error))));
        }
    }

    /// Cuts the active segment's file back to `start` (and the reservation with it), so the
    /// bytes of `what` never sit before the next append. A cut that fails poisons the
    /// partition: the file then holds bytes no append accounts for.
    async fn cut_back(&mut self, segment: &Segment, start: u64, what: &str) {
        if let Err(cut) = self.shared.io.set_len(segment.log_file(), start).await {
            self.poison(format!("could not cut off {what}: {cut}"));
        }
        self.preallocation.cut(start);
    }

    /// Answers a written run of `acks=leader` requests and queues its batches for the next
    /// fdatasync, without waiting for it.
    fn pipeline_leader_run(
        &mut self,
        segment: &Arc<Segment>,
        run: Run,
        appended: Vec<AppendedBatch>,
        written_end: (u64, u64),
    ) {
        for request in run.requests {
            let acks: Vec<BatchAck> = request.plan.iter().map(Planned::ack).collect();
            let _ = request.reply.send(Ok(acks));
        }
        if appended.is_empty() {
            return;
        }
        self.pipeline.waiting.extend(appended);
        self.pipeline.tail = Some(written_end);
        self.start_sync(segment);
    }

    /// The active segment's written end: ahead of its durable end while leader rounds wait for
    /// their fdatasync.
    fn written_end(&self, segment: &Segment) -> (u64, u64) {
        self.pipeline.tail.unwrap_or_else(|| {
            let snapshot = segment.snapshot();
            (snapshot.durable_size, snapshot.next_offset)
        })
    }

    /// Starts an fdatasync for the waiting batches, unless one is in flight.
    fn start_sync(&mut self, segment: &Arc<Segment>) {
        if self.pipeline.syncing.is_some() || self.pipeline.waiting.is_empty() {
            return;
        }
        let appended = std::mem::take(&mut self.pipeline.waiting);
        let end_offset = appended.last().map_or(0, |batch| batch.last_offset + 1);
        let io = self.shared.io.clone();
        let target = Arc::clone(segment);
        let future = Box::pin(async move { timed_sync(&io, &target).await });
        self.pipeline.syncing = Some(Syncing {
            future,
            segment: Arc::clone(segment),
            appended,
            end_offset,
        });
    }

    /// Publishes what a finished fdatasync made durable and starts the next one. A failed one
    /// poisons the partition, as any failed fdatasync does.
    fn finish_sync(&mut self, syncing: Syncing, result: Result<(), IoError>) {
        if let Err(error) = result {
            self.poison(format!("fdatasync failed: {error}"));
            self.pipeline = Pipeline::default();
            return;
        }
        let now = self.shared.clock.now_ms();
        let interval = self.shared.config.read().index_interval_bytes;
        syncing.segment.publish(&syncing.appended, interval, now);
        self.publish_end(syncing.end_offset, true);
        self.drop_cached_behind(&syncing.segment);
        if self.pipeline.waiting.is_empty() {
            self.pipeline.tail = None;
        }
        self.start_sync(&syncing.segment);
    }

    /// Waits until every written byte is durable and published.
    async fn settle(&mut self) {
        while let Some(mut syncing) = self.pipeline.syncing.take() {
            let result = (&mut syncing.future).await;
            self.finish_sync(syncing, result);
        }
    }

    /// Reserves the file's next bytes before a write from `start` to `write_end` needs them
    /// (`preallocate`). A failure only costs speed: the write then grows the file itself.
    async fn reserve_ahead(&mut self, segment: &Segment, start: u64, write_end: u64) {
        let (step, limit) = {
            let config = self.shared.config.read();
            (config.segment_preallocate_bytes, config.segment_bytes)
        };
        let base = segment.base_offset();
        let Some(reservation) = self.preallocation.plan(base, start, write_end, step, limit) else {
            return;
        };
        let reserve =
            self.shared
                .io
                .allocate(segment.log_file(), reservation.offset, reservation.len);
        match reserve.await {
            Ok(()) => self.preallocation.reserved(reservation),
            Err(error) => {
                tracing::warn!(%error, dir = %self.shared.dir.display(),
                    "could not reserve the segment's next bytes; writing without a reservation");
                self.preallocation.failed(reservation);
            }
        }
    }

    /// Cuts the reserved zeros off the end of a segment that is about to be closed, so a
    /// closed segment's file is exactly its batches (recovery, tiering and readers of closed
    /// segments rely on that). fsync, not fdatasync: the new size must survive a crash before
    /// the next segment exists, or recovery would find zeros inside a closed segment.
    async fn trim_reservation(&mut self, segment: &Segment, log_len: u64) -> Result<(), IoError> {
        if !self
            .preallocation
            .reserved_beyond(segment.base_offset(), log_len)
        {
            return Ok(());
        }
        let io = &self.shared.io;
        io.set_len(segment.log_file(), log_len).await?;
        io.sync_all(segment.log_file()).await?;
        self.preallocation.cut(log_len);
        Ok(())
    }

    /// Lets the kernel reuse the pages of durable bytes far behind the end (`cache_window`).
    fn drop_cached_behind(&mut self, segment: &Arc<Segment>) {
        let window = self.shared.config.read().page_cache_window_bytes;
        self.cache_window.advance(&self.shared.io, segment, window);
    }

    fn publish_end(&self, log_end_offset: u64, durable: bool) {
        self.shared.offsets.send_modify(|offsets: &mut LogOffsets| {
            // A finished fdatasync may cover less than has been written since.
            offsets.log_end_offset = offsets.log_end_offset.max(log_end_offset);
            if durable {
                offsets.high_watermark = log_end_offset;
            }
        });
    }

    fn poison(&mut self, reason: String) {
        tracing::error!(dir = %self.shared.dir.display(), %reason, "partition poisoned");
        *self.shared.poisoned.write() = Some(reason);
    }

    /// Why appends are refused, once a failed fdatasync poisoned the partition.
    fn poisoned(&self) -> Option<String> {
        self.shared.poisoned.read().clone()
    }

    async fn roll_if_old(&mut self) -> Result<(), AppendError> {
        let active = self.shared.active_segment();
        let snapshot = active.snapshot();
        let Some(basis) = snapshot.roll_basis_ms else {
            return Ok(());
        };
        if snapshot.durable_size > 0
            && self.shared.clock.now_ms().saturating_sub(basis)
                >= self.shared.config.read().segment_ms
        {
            return self.roll().await;
        }
        Ok(())
    }

    /// Seals the active segment (fsync of data and indexes) and starts a new one at the log end.
    /// The new segment's files and the directory entry are durable before anything is acked in
    /// it; the recovery point moves to the new segment so restarts scan only it.
    async fn roll(&mut self) -> Result<(), AppendError> {
        self.settle().await;
        if let Some(reason) = self.poisoned() {
            return Err(AppendError::Poisoned {
                reason: reason.clone(),
            });
        }
        let io = self.shared.io.clone();
        let active = self.shared.active_segment();
        let snapshot = active.snapshot();
        if snapshot.durable_size == 0 {
            return Ok(());
        }
        let io_error = |error| AppendError::Io(Arc::new(error));
        self.trim_reservation(&active, snapshot.durable_size)
            .await
            .map_err(io_error)?;
        active.sync_all(&io).await.map_err(io_error)?;
        let next = snapshot.next_offset;
        let map_len = self.shared.config.read().active_map_len();
        let segment = Segment::create(&io, &self.shared.dir, next, map_len)
            .await
            .map_err(io_error)?;
        io.sync_dir(&self.shared.dir).await.map_err(io_error)?;
        self.shared.segments.write().insert(next, Arc::new(segment));
        self.write_producer_snapshot(next).await;
        self.meta.recovery_point = next;
        if let Err(error) = write_meta(&io, &self.shared.dir, &self.meta).await {
            // Not fatal: an older recovery point only makes the next recovery scan more.
            tracing::warn!(%error, "could not advance the recovery point");
        }
        tracing::debug!(dir = %self.shared.dir.display(), base_offset = next, "rolled segment");
        Ok(())
    }

    /// Advances the log start offset to `before` (Kafka's DeleteRecords): the new start is made
    /// durable in the metadata first, then whole segments below it are removed. Readers that
    /// hold a removed segment finish on their mapping (the file is only unlinked).
    async fn delete_records(&mut self, before: u64) -> Result<u64, AppendError> {
        let offsets = *self.shared.offsets.borrow();
        if before > offsets.high_watermark {
            return Err(AppendError::OffsetOutOfRange(OffsetOutOfRange {
                requested: before,
                earliest: offsets.log_start_offset,
                latest: offsets.high_watermark,
            }));
        }
        if before <= offsets.log_start_offset {
            return Ok(offsets.log_start_offset);
        }
        let io = self.shared.io.clone();
        let mut meta = self.meta;
        meta.log_start_offset = before;
        write_meta(&io, &self.shared.dir, &meta)
            .await
            .map_err(|error| AppendError::Poisoned {
                reason: format!("cannot persist the log start: {error}"),
            })?;
        self.meta = meta;
        self.shared
            .offsets
            .send_modify(|o: &mut LogOffsets| o.log_start_offset = before);
        let removable: Vec<Arc<Segment>> = {
            let segments = self.shared.segments.read();
            let active = segments.keys().next_back().copied();
            segments
                .values()
                .filter(|s| Some(s.base_offset()) != active && s.snapshot().next_offset <= before)
                .cloned()
                .collect()
        };
        for segment in removable {
            self.shared.segments.write().remove(&segment.base_offset());
            for path in segment.paths() {
                if let Err(error) = io.remove_file(&path).await {
                    tracing::warn!(%error, "could not remove a deleted segment's file");
                }
            }
        }
        if let Err(error) = io.sync_dir(&self.shared.dir).await {
            tracing::warn!(%error, "could not sync the partition directory");
        }
        Ok(before)
    }

    /// Saves the producer state as of `offset`, so a restart replays only the log after it.
    /// Failure is harmless: recovery then replays from an older snapshot or the start.
    async fn write_producer_snapshot(&self, offset: u64) {
        if self.producers.is_empty() {
            return;
        }
        let name = segment_file_name(offset, SNAPSHOT_SUFFIX);
        let result = match serde_json::to_vec(&self.producers) {
            Ok(body) => {
                write_file_atomically(&self.shared.io, &self.shared.dir, &name, body.into())
                    .await
                    .map_err(|e| e.to_string())
            }
            Err(error) => Err(error.to_string()),
        };
        if let Err(error) = result {
            tracing::warn!(%error, "could not write the producer snapshot");
        }
    }

    async fn close(&mut self) -> Result<(), CloseError> {
        let io = self.shared.io.clone();
        let active = self.shared.active_segment();
        if self.poisoned().is_none() {
            // A poisoned log keeps its tail: recovery after the next start treats it as after a
            // crash and drops the reserved zeros itself.
            let durable = active.snapshot().durable_size;
            self.trim_reservation(&active, durable).await?;
        }
        active.sync_all(&io).await?;
        if self.poisoned().is_some() {
            // Leave the marker unset so the next start verifies the log.
            return Ok(());
        }
        self.meta.recovery_point = active.base_offset();
        self.meta.log_start_offset = self.shared.offsets.borrow().log_start_offset;
        self.meta.log_end_offset = Some(active.snapshot().next_offset);
        self.meta.clean_shutdown = true;
        write_meta(&io, &self.shared.dir, &self.meta).await?;
        Ok(())
    }
}

/// Counts a round as it starts: its size and, per request, the time it waited in the queue.
fn record_round(round: &[Pending], bytes: u64) {
    WRITER.round_requests.observe(round.len() as f64);
    WRITER.round_bytes.observe(bytes as f64);
    let now = stopwatch();
    for request in round {
        WRITER.observe("queue", now.saturating_duration_since(request.enqueued));
        let acks = match request.acks {
            Acks::All => "all",
            Acks::Leader => "leader",
        };
        WRITER.requests.get_or_create(&AcksLabel { acks }).inc();
    }
}

fn pending(
    batches: Vec<RecordBatch>,
    acks: Acks,
    expected_offset: Option<u64>,
    reply: AppendReply,
    enqueued: Instant,
) -> Pending {
    let bytes = batches.iter().map(|b| b.len() as u64).sum();
    Pending {
        batches,
        acks,
        expected_offset,
        reply,
        bytes,
        enqueued,
    }
}

/// The round's bytes at `position`: a plain write when `acks=leader` requests are answered
/// after it, else write and fdatasync as one operation. Both run on the writer's own thread
/// (see `Io::append_at`). Each is timed for the stage histogram.
async fn write_buffers(
    io: &crate::io::Io,
    segment: &Segment,
    position: u64,
    buffers: Vec<Bytes>,
    leader_acks: bool,
) -> Result<(), crate::io::IoError> {
    if buffers.is_empty() {
        return Ok(());
    }
    let started = stopwatch();
    let write = io
        .append_at(segment.log_file(), position, buffers, !leader_acks)
        .await;
    let stage = if leader_acks { "write" } else { "write_fsync" };
    WRITER.observe(stage, started.elapsed());
    write
}

/// The fdatasync after a write that `acks=leader` requests were answered after.
async fn timed_sync(io: &crate::io::Io, segment: &Segment) -> Result<(), crate::io::IoError> {
    let started = stopwatch();
    let result = io.sync_data(segment.log_file()).await;
    WRITER.observe("fsync", started.elapsed());
    result
}

/// How many offsets a batch occupies: `lastOffsetDelta + 1` (validated to be >= 1 on append).
fn record_span(batch: &RecordBatch) -> u64 {
    u64::try_from(batch.header().last_offset_delta).map_or(1, |delta| delta + 1)
}

fn fail_all(round: Vec<Pending>, error: &AppendError) {
    for request in round {
        let _ = request.reply.send(Err(error.clone()));
    }
}

/// A run's bytes as they go to the segment: the buffers of one vectored write (each batch's
/// assigned `baseOffset`, then the producer's bytes after it), where each batch lands, and the
/// written end (size, next offset).
struct LaidOut {
    buffers: Vec<Bytes>,
    appended: Vec<AppendedBatch>,
    end: (u64, u64),
}

fn lay_out(run: &Run, start: u64, mut next_offset: u64) -> LaidOut {
    let mut buffers = Vec::with_capacity(run.requests.len() * 2);
    let mut appended = Vec::new();
    let mut position = start;
    for request in &run.requests {
        for planned in &request.plan {
            let Planned::Write { batch, ack } = planned else {
                continue;
            };
            assert!(
                ack.base_offset == next_offset,
                "invariant: planned offsets are contiguous"
            );
            // The CRC does not cover baseOffset, so the assigned offset travels in its own
            // 8-byte buffer and the producer's bytes are written untouched.
            buffers.push(Bytes::copy_from_slice(
                &(ack.base_offset as i64).to_be_bytes(),
            ));
            buffers.push(batch.bytes().slice(8..));
            appended.push(AppendedBatch {
                position,
                len: batch.len() as u64,
                base_offset: ack.base_offset,
                last_offset: ack.last_offset,
                max_timestamp: batch.header().max_timestamp,
            });
            position += batch.len() as u64;
            next_offset = ack.last_offset + 1;
        }
    }
    LaidOut {
        buffers,
        appended,
        end: (position, next_offset),
    }
}

/// Requests planned into one write.
#[derive(Default)]
struct Run {
    requests: Vec<PlannedRequest>,
    bytes: u64,
    offsets: u64,
    undo: UndoLog,
}

impl PlannedRequest {
    fn reply_poisoned(self, reason: &str) {
        let _ = self.reply.send(Err(AppendError::Poisoned {
            reason: reason.to_owned(),
        }));
    }

    fn written_bytes(&self) -> u64 {
        self.plan
            .iter()
            .map(|p| match p {
                Planned::Write { batch, .. } => batch.len() as u64,
                Planned::Duplicate(_) => 0,
            })
            .sum()
    }

    fn written_offsets(&self) -> u64 {
        self.plan
            .iter()
            .map(|p| match p {
                Planned::Write { ack, .. } => ack.last_offset - ack.base_offset + 1,
                Planned::Duplicate(_) => 0,
            })
            .sum()
    }
}

impl Planned {
    fn ack(&self) -> BatchAck {
        match self {
            Planned::Write { ack, .. } | Planned::Duplicate(ack) => *ack,
        }
    }
}

const _: () = assert!(LOG_OVERHEAD >= 8);

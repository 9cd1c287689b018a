//! The writer's side of a streamed append (see `log::stream`): lending the tail of the active
//! segment, holding it until the appender commits or anything else needs the writer, and the
//! commit itself, which stamps the batches' real headers (with their assigned base offsets)
//! over the masked ones and makes the body durable with the same answers and publication as
//! an ordinary round.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use super::{
    AppendedBatch, Command, IoError, Planned, Run, Writer, lay_out, pending, record_round,
    record_span, write_buffers,
};
use crate::log::segment::Segment;
use crate::log::stats::WRITER;
use crate::log::stream::{LeaseState, MASKED_LEN, StreamCommit, StreamLease};
use crate::log::types::Acks;

/// Most batches a streamed body may hold: each needs its own small write to stamp its offset,
/// so a body of many small batches is cheaper rewritten by an ordinary round's one write.
const MAX_STAMPED_BATCHES: usize = 16;

/// How long an append that arrives while the tail is lent waits for the stream to commit
/// before the lease is revoked. A body on a fast link takes well under a millisecond to finish
/// (1 MiB: about 0.5 ms here), and revoking it costs its copy, a cut and a rewrite; a slow
/// client must not hold the others up for longer than this.
const PATIENCE: std::time::Duration = std::time::Duration::from_millis(2);

/// How long (ms) the writer lends no tail after another appender showed up during a lease.
const CONTENTION_MEMORY_MS: i64 = 100;

/// How the writer's hold on a lent tail ended.
enum Held {
    Committed(StreamCommit),
    /// Another command arrived: the lease was taken back.
    Revoked,
    /// The appender dropped the lease (bad body, failed write, request gone).
    Abandoned,
}

impl Writer {
    /// Lends the tail to a streamed append of `len` bytes and holds the writer until the
    /// appender commits or gives up. Meanwhile another stream is refused at once, an append
    /// waits up to [`PATIENCE`] for the commit (then the lease is revoked), and any other
    /// command revokes the lease at once; the command is handled next, through `deferred`.
    pub(super) async fn lend_tail(
        &mut self,
        len: u64,
        reply: oneshot::Sender<Option<StreamLease>>,
        commands: &mut mpsc::Receiver<Command>,
        deferred: &mut Option<Command>,
    ) {
        let Some((segment, start)) = self.prepare_tail(len, commands).await else {
            WRITER.stream("refused");
            let _ = reply.send(None);
            return;
        };
        let state = Arc::new(Mutex::new(LeaseState::default()));
        let (commit, mut committed) = oneshot::channel();
        let io = self.shared.io.clone();
        let lease = StreamLease::new(
            io,
            Arc::clone(&segment),
            start,
            len,
            Arc::clone(&state),
            commit,
        );
        if reply.send(Some(lease)).is_err() {
            WRITER.stream("abandoned");
            return;
        }
        let held = loop {
            tokio::select! {
                biased;
                commit = &mut committed => break ended(commit, &state, &mut committed),
                command = commands.recv() => match command {
                    // One stream at a time: the other body is appended the usual way.
                    Some(Command::Stream { reply, .. }) => {
                        self.note_contention();
                        WRITER.stream("refused");
                        let _ = reply.send(None);
                    }
                    Some(append @ Command::Append { .. }) => {
                        self.note_contention();
                        *deferred = Some(append);
                        break match tokio::time::timeout(PATIENCE, &mut committed).await {
                            Ok(commit) => ended(commit, &state, &mut committed),
                            Err(_) => take_back(&state, &mut committed, Held::Revoked),
                        };
                    }
                    other => {
                        *deferred = other;
                        break take_back(&state, &mut committed, Held::Revoked);
                    }
                },
            }
        };
        match held {
            Held::Committed(commit) => self.commit_stream(&segment, start, len, commit).await,
            Held::Revoked | Held::Abandoned => {
                WRITER.stream(if matches!(held, Held::Revoked) {
                    "revoked"
                } else {
                    "abandoned"
                });
                let written = state.lock().written;
                self.cut_stream(&segment, start, written).await;
            }
        }
    }

    /// Readies the tail for `len` streamed bytes: durable up to its end, rolled if the body
    /// would overflow the segment, its next bytes reserved. `None` (no lease) while other
    /// appends wait or compete (queued now, in the last round, or during a recent lease),
    /// since a lease would hold them up, or when the partition is poisoned or cannot roll.
    async fn prepare_tail(
        &mut self,
        len: u64,
        commands: &mpsc::Receiver<Command>,
    ) -> Option<(Arc<Segment>, u64)> {
        if self.shared.competed_recently() || !self.can_lend() || !commands.is_empty() {
            return None;
        }
        self.settle().await;
        self.roll_if_old().await.ok()?;
        let size = self.shared.active_segment().snapshot().durable_size;
        if size > 0 && size + len > self.shared.config.read().segment_bytes {
            self.roll().await.ok()?;
        }
        let active = self.shared.active_segment();
        let start = active.snapshot().durable_size;
        self.reserve_ahead(&active, start, start + len).await;
        Some((active, start))
    }

    /// Whether the writer would lend the tail, the clock aside (see `Shared::may_lend`): the
    /// last round held one request and the partition takes appends.
    pub(super) fn can_lend(&self) -> bool {
        self.last_round_len <= 1 && self.poisoned().is_none()
    }

    /// Another appender arrived while the tail was lent: lend no tail for a while. Two
    /// producers of large bodies then share group-commit rounds, as before streaming, instead
    /// of one streaming while the other waits for it and then pays a round of its own.
    fn note_contention(&mut self) {
        let until = self
            .shared
            .clock
            .now_ms()
            .saturating_add(CONTENTION_MEMORY_MS);
        self.shared.lend_after_ms.store(until, Ordering::Release);
    }

    /// Appends a committed stream: stamps the offsets when its bytes are exactly the append
    /// (the usual case), else cuts them off and appends the batches by an ordinary write.
    async fn commit_stream(
        &mut self,
        segment: &Arc<Segment>,
        start: u64,
        len: u64,
        commit: StreamCommit,
    ) {
        let StreamCommit {
            batches,
            acks,
            expected_offset,
            reply,
            enqueued,
        } = commit;
        let request = pending(batches, acks, expected_offset, reply, enqueued);
        record_round(std::slice::from_ref(&request), request.bytes);
        self.last_round_len = 1;
        let (durable, next_offset) = self.written_end(segment);
        let records: u64 = request.batches.iter().map(record_span).sum();
        let stampable = durable == start
            && request.bytes == len
            && request.batches.len() <= MAX_STAMPED_BATCHES
            && next_offset + records - segment.base_offset() <= u64::from(u32::MAX)
            && Arc::ptr_eq(segment, &self.shared.active_segment())
            && self.poisoned().is_none();
        if !stampable {
            WRITER.stream("rewritten");
            self.cut_stream(segment, start, len).await;
            self.append_round(vec![request]).await;
            return;
        }
        let mut run = Run::default();
        let Some(planned) = self.plan(request, next_offset, &mut run.undo) else {
            WRITER.stream("abandoned");
            self.cut_stream(segment, start, len).await;
            return;
        };
        let duplicates = planned
            .plan
            .iter()
            .any(|p| matches!(p, Planned::Duplicate(_)));
        run.bytes = planned.written_bytes();
        run.offsets = planned.written_offsets();
        run.requests.push(planned);
        if duplicates {
            WRITER.stream("rewritten");
            self.cut_stream(segment, start, len).await;
            self.write_run(segment, run).await;
            return;
        }
        WRITER.stream("committed");
        let laid = lay_out(&run, start, next_offset);
        let leader_acks = acks == Acks::Leader;
        let io = self.shared.io.clone();
        let write = stamp_headers(&io, segment, &run, &laid.appended, leader_acks).await;
        self.finish_run(segment, run, start, laid, write).await;
    }

    /// Cuts streamed bytes off the segment (and the reservation with them), so nothing but
    /// committed batches ever sits before the next append.
    async fn cut_stream(&mut self, segment: &Segment, start: u64, written: u64) {
        if written > 0 {
            self.cut_back(segment, start, "a streamed append").await;
        }
    }
}

/// How the appender ended the lease: its commit, or (the sender dropped) giving it up.
fn ended(
    commit: Result<StreamCommit, oneshot::error::RecvError>,
    state: &Mutex<LeaseState>,
    committed: &mut oneshot::Receiver<StreamCommit>,
) -> Held {
    match commit {
        Ok(commit) => Held::Committed(commit),
        Err(_) => take_back(state, committed, Held::Abandoned),
    }
}

/// Takes the lease back from the appender: its commit, if it got in first (it sends under the
/// same lock), else `otherwise`; either way no write of the appender lands after this.
fn take_back(
    state: &Mutex<LeaseState>,
    committed: &mut oneshot::Receiver<StreamCommit>,
    otherwise: Held,
) -> Held {
    let mut state = state.lock();
    if state.committed {
        drop(state);
        return committed
            .try_recv()
            .map_or(Held::Abandoned, Held::Committed);
    }
    state.revoked = true;
    otherwise
}

/// Writes each batch's first bytes over its masked ones, with the assigned base offset; the last
/// write carries the fdatasync unless only `acks=leader` waits (its run is then synced by the
/// pipeline).
async fn stamp_headers(
    io: &crate::io::Io,
    segment: &Segment,
    run: &Run,
    appended: &[AppendedBatch],
    leader_acks: bool,
) -> Result<(), IoError> {
    let batches = run
        .requests
        .iter()
        .flat_map(|r| &r.plan)
        .filter_map(|p| match p {
            Planned::Write { batch, .. } => Some(batch),
            Planned::Duplicate(_) => None,
        });
    for (i, (batch, landed)) in batches.zip(appended).enumerate() {
        let mut stamp = [0u8; MASKED_LEN];
        stamp[..8].copy_from_slice(&(landed.base_offset as i64).to_be_bytes());
        stamp[8..].copy_from_slice(&batch.bytes()[8..MASKED_LEN]);
        let last = i + 1 == appended.len();
        let stamp = vec![Bytes::copy_from_slice(&stamp)];
        write_buffers(io, segment, landed.position, stamp, leader_acks || !last).await?;
    }
    Ok(())
}

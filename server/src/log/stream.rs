//! Streamed appends: a large raw body is copied into the active segment while it is still
//! arriving, so its transport and its page-cache copy overlap instead of adding up (ADR 0016).
//!
//! With one request in flight, a 1 MiB `acks=all` request used to pay its whole transport, then
//! its whole write + fdatasync: the time of the two added, which capped it at
//! disk / (transport + disk) of the disk's own rate. Here the partition writer lends the tail of
//! the active segment to one appender (a [`StreamLease`]), which writes the body there as it
//! comes in; when the body is whole and valid, the writer only stamps the assigned base offsets
//! and runs the fdatasync.
//!
//! Three rules keep this as safe as an ordinary append:
//! - **Nothing is visible before the commit.** Readers, the high watermark and the segment
//!   state move only when the writer publishes, exactly as for a round.
//! - **A crash mid-stream leaves bytes recovery refuses.** Until the writer stamps it, every
//!   batch's header starts with zeros ([`MASKED_HEADER`]), no valid batch; recovery cuts the
//!   log there, as at the zeros after a log's end.
//! - **A lease holds nobody up for long.** The writer lends the tail only while nobody
//!   competes, refuses a second stream, lets an arriving append wait at most a couple of
//!   milliseconds and any other command not at all before it takes the lease back (and cuts
//!   the streamed bytes off); the appender then finds the lease revoked and appends the usual
//!   way (`writer::lease`).

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::batch::{LOG_OVERHEAD, RecordBatch};
use super::error::AppendError;
use super::segment::Segment;
use super::types::{Acks, BatchAck};
use crate::io::Io;

/// What a batch's first bytes (`baseOffset`, `batchLength`, `partitionLeaderEpoch`, `magic`)
/// hold on disk until the commit stamps them: zeros, as in the preallocated space after the
/// log's end. Recovery stops at a header without magic 2, so it never takes a streamed batch
/// for a committed one, not even the first batch of a body whose producer wrote the offset
/// recovery expects next (recovery keeps sound batches with a wrong `baseOffset`, and repairs
/// that). None of these bytes is covered by the batch's CRC.
pub const MASKED_HEADER: [u8; MASKED_LEN] = [0; MASKED_LEN];

/// How many of a batch's first bytes are masked: up to and including `magic`.
pub const MASKED_LEN: usize = 17;

/// Streamed bytes are written once this many are waiting (and at the body's end). Each write
/// also starts its bytes' writeback, so the disk works on the body while the rest is copied
/// in. Steps of 16, 64 and 256 KiB measured alike for 1 MiB bodies; 256 KiB makes the fewest
/// syscalls.
const WRITE_STEP: u64 = 256 * 1024;

/// The reply to a committed append.
pub(crate) type StreamReply = oneshot::Sender<Result<Vec<BatchAck>, AppendError>>;

/// What the appender hands the writer when its body is whole: the batches (slices of exactly
/// the streamed bytes, in order) and the append's terms.
pub(crate) struct StreamCommit {
    pub(crate) batches: Vec<RecordBatch>,
    pub(crate) acks: Acks,
    pub(crate) expected_offset: Option<u64>,
    pub(crate) reply: StreamReply,
    pub(crate) enqueued: std::time::Instant,
}

/// What the appender and the writer share about a lease, behind one lock: the appender holds
/// it across each write, so once the writer has marked the lease revoked, no write lands.
#[derive(Debug, Default)]
pub(crate) struct LeaseState {
    /// The writer took the lease back: the appender must not write or commit.
    pub(crate) revoked: bool,
    /// The appender sent its commit: the writer must take it, not revoke.
    pub(crate) committed: bool,
    /// Body bytes written into the segment so far.
    pub(crate) written: u64,
}

/// The appender's side of a lease on the tail of the active segment.
pub struct StreamLease {
    io: Io,
    segment: Arc<Segment>,
    /// Where the body's first byte goes in the segment's file.
    start: u64,
    /// The body's announced length.
    len: u64,
    state: Arc<Mutex<LeaseState>>,
    commit: Option<oneshot::Sender<StreamCommit>>,
    mask: HeaderMask,
    /// Body bytes written.
    written: u64,
    /// Revoked, or a write failed: the rest of the body only arrives in memory.
    lost: bool,
}

impl std::fmt::Debug for StreamLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamLease")
            .field("start", &self.start)
            .field("len", &self.len)
            .field("written", &self.written)
            .field("lost", &self.lost)
            .finish_non_exhaustive()
    }
}

impl StreamLease {
    pub(crate) fn new(
        io: Io,
        segment: Arc<Segment>,
        start: u64,
        len: u64,
        state: Arc<Mutex<LeaseState>>,
        commit: oneshot::Sender<StreamCommit>,
    ) -> Self {
        Self {
            io,
            segment,
            start,
            len,
            state,
            commit: Some(commit),
            mask: HeaderMask::new(len),
            written: 0,
            lost: false,
        }
    }

    /// Writes what has arrived of the body (`frames`, `received` bytes in all) into the
    /// segment, once enough is waiting or the body is whole, and starts its writeback. Returns
    /// `false` once the lease is lost (revoked, a bad batch frame, a failed write): the body
    /// then only arrives in memory.
    pub fn advance(&mut self, frames: &[Bytes], received: u64) -> bool {
        if self.lost {
            return false;
        }
        if !self.mask.learn(frames, received) {
            self.lose();
            return false;
        }
        let waiting = received - self.written;
        if waiting == 0 || (waiting < WRITE_STEP && received < self.len) {
            return true;
        }
        let pieces = self.mask.pieces(frames, self.written, received);
        if !self.write(&pieces, received) {
            self.lose();
            return false;
        }
        self.written = received;
        true
    }

    /// Writes the masked body bytes from `written` up to `to` under the lease's lock (so a
    /// revoked lease gets no more bytes), then starts their writeback. `false` when the lease
    /// was revoked or the write failed.
    fn write(&self, pieces: &[Bytes], to: u64) -> bool {
        let file = self.segment.log_file();
        let position = self.start + self.written;
        let mut held = self.state.lock();
        if held.revoked {
            return false;
        }
        if let Err(error) = self.io.write_now(file, position, pieces) {
            drop(held);
            tracing::warn!(%error, "streamed append write failed; appending the usual way");
            return false;
        }
        held.written = to;
        drop(held);
        // The disk starts on these bytes while the rest of the body is still on its way, so the
        // commit's fdatasync waits only for the last of them.
        if let Err(error) = self.io.start_writeback(file, position, to - self.written) {
            tracing::debug!(%error, "could not start writeback of a streamed append");
        }
        true
    }

    /// Gives the lease up: the writer cuts off what was written.
    fn lose(&mut self) {
        self.lost = true;
        self.commit = None;
    }

    /// Hands the whole, validated body to the writer. `Err` gives the batches back when the
    /// lease is lost or the body was not written whole: the caller appends them the usual way.
    pub(crate) fn commit(
        mut self,
        batches: Vec<RecordBatch>,
        acks: Acks,
        expected_offset: Option<u64>,
    ) -> Result<oneshot::Receiver<Result<Vec<BatchAck>, AppendError>>, Vec<RecordBatch>> {
        let whole = self.written == self.len
            && batches.iter().map(|b| b.len() as u64).sum::<u64>() == self.len;
        let Some(sender) = self.commit.take().filter(|_| whole && !self.lost) else {
            return Err(batches);
        };
        let mut state = self.state.lock();
        if state.revoked {
            return Err(batches);
        }
        let (reply, response) = oneshot::channel();
        let commit = StreamCommit {
            batches,
            acks,
            expected_offset,
            reply,
            enqueued: crate::clock::stopwatch(),
        };
        if let Err(commit) = sender.send(commit) {
            return Err(commit.batches);
        }
        state.committed = true;
        Ok(response)
    }
}

/// Finds where the body's batches start as its bytes arrive, so each one's header can be
/// written masked: a batch's length sits at bytes 8..12 of its header, and the next batch
/// follows right after it.
#[derive(Debug)]
pub(crate) struct HeaderMask {
    /// The body's length.
    len: u64,
    /// Known batch starts, ascending; the last one's length may not have arrived yet.
    starts: Vec<u64>,
}

impl HeaderMask {
    pub(crate) fn new(len: u64) -> Self {
        Self {
            len,
            starts: vec![0],
        }
    }

    /// Learns the batch starts that `received` bytes of `frames` reveal. `false` when the body
    /// is not a run of whole batches (a length that is too small or runs past the body): the
    /// append's validation will refuse it, so streaming it is pointless.
    pub(crate) fn learn(&mut self, frames: &[Bytes], received: u64) -> bool {
        loop {
            let Some(&last) = self.starts.last() else {
                return false;
            };
            if last == self.len || received < last + LOG_OVERHEAD as u64 {
                return true;
            }
            let mut length = [0u8; 4];
            copy_out(frames, last + 8, &mut length);
            let Ok(length) = u64::try_from(i32::from_be_bytes(length)) else {
                return false;
            };
            let next = last + LOG_OVERHEAD as u64 + length;
            if length < 8 || next > self.len {
                return false;
            }
            self.starts.push(next);
        }
    }

    /// The body's bytes `[from, to)` as slices of `frames`, with every known batch's first
    /// [`MASKED_LEN`] bytes replaced by [`MASKED_HEADER`]; one vectored write takes them.
    pub(crate) fn pieces(&self, frames: &[Bytes], from: u64, to: u64) -> Vec<Bytes> {
        let masked = Bytes::from_static(&MASKED_HEADER);
        let width = MASKED_LEN as u64;
        let mut pieces = Vec::new();
        let mut frame_start = 0u64;
        for frame in frames {
            let frame_end = frame_start + frame.len() as u64;
            let mut cursor = from.max(frame_start);
            let stop = to.min(frame_end);
            while cursor < stop {
                // The mask that covers `cursor`, else the next one that starts before `stop`.
                let index = self.starts.partition_point(|&s| s + width <= cursor);
                match self.starts.get(index).copied() {
                    Some(start) if start <= cursor => {
                        let end = (start + width).min(stop);
                        let at = usize::try_from(cursor - start).unwrap_or(0);
                        let n = usize::try_from(end - cursor).unwrap_or(0);
                        pieces.push(masked.slice(at..at + n));
                        cursor = end;
                    }
                    next => {
                        let end = next.map_or(stop, |s| s.min(stop));
                        let at = usize::try_from(cursor - frame_start).unwrap_or(0);
                        let n = usize::try_from(end - cursor).unwrap_or(0);
                        pieces.push(frame.slice(at..at + n));
                        cursor = end;
                    }
                }
            }
            frame_start = frame_end;
            if frame_start >= to {
                break;
            }
        }
        pieces
    }
}

/// Copies `out.len()` body bytes from `position` (which the frames hold) into `out`.
fn copy_out(frames: &[Bytes], position: u64, out: &mut [u8]) {
    let mut frame_start = 0u64;
    let mut filled = 0;
    for frame in frames {
        let frame_end = frame_start + frame.len() as u64;
        let want = position + filled as u64;
        if want < frame_end && filled < out.len() {
            let at = usize::try_from(want - frame_start).unwrap_or(0);
            let n = (frame.len() - at).min(out.len() - filled);
            out[filled..filled + n].copy_from_slice(&frame[at..at + n]);
            filled += n;
        }
        frame_start = frame_end;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A body of batches with the given payload lengths: each a header whose length field
    /// is right and whose other bytes are distinct from the mask.
    fn body_of(lengths: &[u16]) -> (Vec<u8>, Vec<usize>) {
        let mut body = Vec::new();
        let mut starts = Vec::new();
        for (i, &length) in lengths.iter().enumerate() {
            starts.push(body.len());
            let length = u32::from(length) + 8;
            body.extend_from_slice(&(i as i64).to_be_bytes());
            body.extend_from_slice(&length.to_be_bytes());
            body.extend((0..length).map(|j| (j % 251) as u8));
        }
        (body, starts)
    }

    fn split(body: &[u8], cuts: &[usize]) -> Vec<Bytes> {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
        cuts.sort_unstable();
        let mut frames = Vec::new();
        let mut at = 0;
        for cut in cuts.into_iter().chain([body.len()]) {
            frames.push(Bytes::copy_from_slice(&body[at..cut]));
            at = cut;
        }
        frames
    }

    proptest! {
        /// However the body arrives and is written, the pieces are the body with exactly each
        /// batch's first bytes masked.
        #[test]
        fn pieces_are_the_body_with_every_header_masked(
            lengths in proptest::collection::vec(0u16..300, 1..6),
            cuts in proptest::collection::vec(0usize..2000, 0..8),
            steps in proptest::collection::vec(1usize..400, 1..10),
        ) {
            let (body, starts) = body_of(&lengths);
            let mut expected = body.clone();
            for &start in &starts {
                expected[start..start + MASKED_LEN].copy_from_slice(&MASKED_HEADER);
            }
            let frames = split(&body, &cuts);
            let mut mask = HeaderMask::new(body.len() as u64);
            let mut written = Vec::new();
            let mut received = 0usize;
            let mut steps = steps.into_iter().cycle();
            while received < body.len() {
                received = (received + steps.next().unwrap_or(1)).min(body.len());
                prop_assert!(mask.learn(&frames, received as u64));
                let from = written.len() as u64;
                for piece in mask.pieces(&frames, from, received as u64) {
                    written.extend_from_slice(&piece);
                }
            }
            prop_assert_eq!(written, expected);
        }
    }

    #[test]
    fn a_length_past_the_body_or_below_a_header_stops_the_stream() {
        let (mut body, _) = body_of(&[10]);
        body[8..12].copy_from_slice(&1000u32.to_be_bytes());
        let frames = vec![Bytes::from(body.clone())];
        let mut mask = HeaderMask::new(body.len() as u64);
        assert!(!mask.learn(&frames, body.len() as u64));

        body[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        let frames = vec![Bytes::from(body.clone())];
        let mut mask = HeaderMask::new(body.len() as u64);
        assert!(!mask.learn(&frames, body.len() as u64));
    }

    #[test]
    fn a_header_split_across_frames_is_still_found() {
        let (body, starts) = body_of(&[3, 4]);
        let frames = split(&body, &[starts[1] + 9]);
        let mut mask = HeaderMask::new(body.len() as u64);
        assert!(mask.learn(&frames, (starts[1] + 9) as u64));
        assert_eq!(mask.starts, vec![0, starts[1] as u64]);
        assert!(mask.learn(&frames, body.len() as u64));
        assert_eq!(mask.starts, vec![0, starts[1] as u64, body.len() as u64]);
    }
}

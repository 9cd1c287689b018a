//! Validating scan of one segment's bytes at open time: which batches are sound, which byte
//! ranges are damaged, what can be repaired, and where (only for a torn write) the log must be
//! cut. Pure: it reads bytes and returns a plan; `recovery.rs` applies it to the files.
//!
//! The rule it implements (ADR 0005): **recovery never removes an acknowledged batch that is
//! itself intact.** A damaged range with sound batches after it is bit rot, not a torn write (a
//! crash only ever loses the end of what was being written), so it is *quarantined*: its bytes
//! stay where they are, its offsets stay taken, the batches after it stay readable, and a reader
//! that reaches it gets `corrupt`. Only the end of the active segment after an unclean stop may
//! be cut, because only there can a write have been torn, and nothing there was acknowledged
//! with `acks=all`.
//!
//! Two header fields are outside Kafka's CRC: `partitionLeaderEpoch` (unused by Strata) and
//! `baseOffset`. A flipped base offset is caught by placement: in the active segment batches are
//! contiguous (the writer assigns offsets one after the other and compaction never touches it),
//! elsewhere they only increase. A sound batch whose base offset is wrong gets its base offset
//! rewritten when the offsets around it pin the right value down exactly; otherwise its magic
//! byte is overwritten with [`QUARANTINED_MAGIC`], so that no reader ever decodes its records at
//! offsets that are not theirs.

use super::batch::batch_offsets;
use super::batch::{BatchHeader, MAGIC_V2, RecordBatch};
use super::segment_state::{AppendedBatch, SegmentState};
use bytes::Bytes;

/// The magic byte a quarantined batch gets when its offsets cannot be trusted: not a Kafka
/// magic (0, 1, 2), so every reader refuses the batch.
pub const QUARANTINED_MAGIC: u8 = 0xfe;
/// Byte position of the magic byte within a batch.
const MAGIC_POSITION: u64 = 16;

/// What the scanned segment is, which decides how damage at its end is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentRole {
    /// A closed segment: it was fsynced before the next one was created, so nothing in it can be
    /// torn; `next_base` (the next segment's base offset) bounds its offsets.
    Closed {
        /// Base offset of the following segment.
        next_base: u64,
        /// The partition never held compacted segments: offsets have no gaps.
        contiguous: bool,
    },
    /// The active segment after a clean stop: fully fsynced; `log_end` is the log end the clean
    /// stop recorded (absent in metadata written before format version 2).
    ActiveAfterCleanStop {
        /// The recorded log end offset.
        log_end: Option<u64>,
    },
    /// The active segment after a crash: its end may hold a torn write.
    ActiveAfterCrash,
}

impl SegmentRole {
    pub(crate) fn is_active(self) -> bool {
        !matches!(self, SegmentRole::Closed { .. })
    }
}

/// Limits a batch must respect to belong to the segment.
#[derive(Debug, Clone, Copy)]
pub struct ScanLimits {
    /// Index interval to rebuild the indexes with.
    pub index_interval_bytes: u64,
    /// Largest byte position a batch may end at.
    pub max_end_position: u64,
}

/// A change to the segment file that the scan decided on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// Overwrite the base offset of the batch at `position` (outside the CRC).
    SetBaseOffset {
        /// Byte position of the batch.
        position: u64,
        /// Its right base offset.
        base_offset: u64,
    },
    /// Overwrite the magic byte of the batch at `position` with [`QUARANTINED_MAGIC`].
    Quarantine {
        /// Byte position of the batch.
        position: u64,
    },
}

impl Repair {
    /// Where to write and what.
    pub fn write(&self) -> (u64, Vec<u8>) {
        match self {
            Repair::SetBaseOffset {
                position,
                base_offset,
            } => (*position, (*base_offset as i64).to_be_bytes().to_vec()),
            Repair::Quarantine { position } => (position + MAGIC_POSITION, vec![QUARANTINED_MAGIC]),
        }
    }
}

/// A quarantined byte range and the offsets it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedRange {
    /// Byte range in the segment file.
    pub bytes: std::ops::Range<u64>,
    /// Offsets that range held (they stay taken: readers get `corrupt` for them).
    pub offsets: std::ops::Range<u64>,
}

/// The result of a scan.
#[derive(Debug, Clone)]
pub struct ScanOutcome {
    /// Segment state (indexes, sizes, offsets) of what is kept.
    pub state: SegmentState,
    /// Bytes of the file to keep; less than its length for a torn write or reserved zeros.
    pub keep_len: u64,
    /// Of the bytes after `keep_len`, those that were the active segment's reservation
    /// (`preallocate`): all zeros after the last batch, no data lost.
    pub reserved_tail: u64,
    /// Quarantined ranges, in file order.
    pub damaged: Vec<DamagedRange>,
    /// File changes to make, in file order.
    pub repairs: Vec<Repair>,
}

/// Scans a segment file's `bytes` (base offset `base`) batch by batch with full validation.
pub fn scan_segment(
    bytes: &Bytes,
    base: u64,
    role: SegmentRole,
    limits: ScanLimits,
) -> ScanOutcome {
    let mut scan = Scanner {
        bytes,
        base,
        role,
        limits,
        outcome: ScanOutcome {
            state: SegmentState {
                next_offset: base,
                ..SegmentState::default()
            },
            keep_len: bytes.len() as u64,
            reserved_tail: 0,
            damaged: Vec::new(),
            repairs: Vec::new(),
        },
    };
    scan.run();
    scan.outcome
}

struct Scanner<'a> {
    bytes: &'a Bytes,
    base: u64,
    role: SegmentRole,
    limits: ScanLimits,
    outcome: ScanOutcome,
}

/// A batch header found while walking damaged bytes.
struct Found {
    position: u64,
    header: BatchHeader,
    sound: bool,
}

impl Scanner<'_> {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn run(&mut self) {
        let mut position = 0u64;
        while position < self.len() {
            if let Some(batch) = self.placed_batch(position) {
                self.add(&batch);
                position += batch.len;
                continue;
            }
            let start_offset = self.outcome.state.next_offset;
            if self.is_reserved_tail(position, start_offset) {
                self.outcome.keep_len = position;
                self.outcome.reserved_tail = self.len() - position;
                return;
            }
            if let Some((resume, resume_offset)) = self.resync(position) {
                self.quarantine(position..resume, start_offset..resume_offset);
                position = resume;
                continue;
            }
            let end = match self.role {
                SegmentRole::Closed { next_base, .. } => Some(next_base),
                SegmentRole::ActiveAfterCleanStop { log_end } => log_end,
                SegmentRole::ActiveAfterCrash => None,
            };
            match (self.role, end.filter(|end| *end >= start_offset)) {
                (_, Some(end)) => self.quarantine(position..self.len(), start_offset..end),
                // A closed segment is never cut: nothing in it can be a torn write.
                (SegmentRole::Closed { .. }, None) => {
                    self.quarantine(position..self.len(), start_offset..start_offset);
                }
                (_, None) => self.keep_sound_prefix_then_cut(position),
            }
            return;
        }
    }

    /// Whether everything from `position` on is zeros the writer reserved ahead of its writes
    /// (`preallocate`) in an active segment, rather than damage. Only where no acknowledged
    /// offset can be missing: after a crash (acknowledged batches end before the reservation
    /// begins), or after a clean stop whose recorded log end the batches already reach. A
    /// closed segment's file was cut to its batches before the next one was created, so zeros
    /// at its end are damage and stay quarantined.
    fn is_reserved_tail(&self, position: u64, next_offset: u64) -> bool {
        let complete = match self.role {
            SegmentRole::Closed { .. } => false,
            SegmentRole::ActiveAfterCleanStop { log_end } => {
                log_end.is_none_or(|end| end <= next_offset)
            }
            SegmentRole::ActiveAfterCrash => true,
        };
        complete
            && self.bytes[position as usize..]
                .iter()
                .all(|&byte| byte == 0)
    }

    /// The sound batch at `position` if it also fits where it is.
    fn placed_batch(&self, position: u64) -> Option<AppendedBatch> {
        let rest = self.bytes.slice(position as usize..);
        let batch = RecordBatch::decode_first(&rest).ok()?;
        let (first, last) = batch_offsets(batch.header());
        let expected = self.outcome.state.next_offset;
        let placed = match self.role {
            SegmentRole::Closed {
                next_base,
                contiguous,
            } => (first == expected || !contiguous && first > expected) && last < next_base,
            SegmentRole::ActiveAfterCleanStop { .. } | SegmentRole::ActiveAfterCrash => {
                first == expected
            }
        };
        let len = batch.len() as u64;
        let fits = placed
            && !(first > expected && self.overlaps_next(position + len, last))
            && batch.header().base_offset >= 0
            && last - self.base <= u64::from(u32::MAX)
            && position + len <= self.limits.max_end_position;
        fits.then_some(AppendedBatch {
            position,
            len,
            base_offset: first,
            last_offset: last,
            max_timestamp: batch.header().max_timestamp,
        })
    }

    /// Whether the batch header at `next` claims an offset at or below `last`: then the batch
    /// before it, which left a gap, claimed offsets that are not its own (a flipped base
    /// offset), since in a sound log offsets only grow.
    fn overlaps_next(&self, next: u64, last: u64) -> bool {
        self.bytes
            .get(next as usize..)
            .and_then(|rest| BatchHeader::parse(rest).ok())
            .is_some_and(|header| header.base_offset <= last as i64)
    }

    fn add(&mut self, batch: &AppendedBatch) {
        let state = &mut self.outcome.state;
        let basis = state.roll_basis_ms.unwrap_or(batch.max_timestamp);
        state.add_batch(self.base, batch, self.limits.index_interval_bytes, basis);
    }

    /// The next position after `damaged` where a sound batch starts whose offsets can follow
    /// the damage: at or after the next expected offset, and at most one offset per skipped byte
    /// beyond it (every record takes several bytes). Cheap on garbage: the magic byte and the
    /// offset bound reject almost every position before a CRC is computed.
    fn resync(&self, damaged: u64) -> Option<(u64, u64)> {
        let (upper, contiguous, end_offset) = match self.role {
            SegmentRole::Closed {
                next_base,
                contiguous,
            } => (next_base, contiguous, contiguous.then_some(next_base)),
            SegmentRole::ActiveAfterCleanStop { log_end } => {
                (log_end.unwrap_or(u64::MAX), true, log_end)
            }
            SegmentRole::ActiveAfterCrash => (u64::MAX, true, None),
        };
        next_sound_batch(
            self.bytes,
            Resync {
                damaged,
                expected: self.outcome.state.next_offset,
                max_end_position: self.limits.max_end_position,
                upper,
                contiguous,
                end_offset,
            },
        )
    }

    /// Keeps `bytes` in place as damage that held `offsets`, repairing or disarming the sound
    /// batches inside it whose base offset is wrong.
    fn quarantine(&mut self, bytes: std::ops::Range<u64>, offsets: std::ops::Range<u64>) {
        let chain = self.walk(bytes.clone());
        let exact = chain
            .last()
            .is_some_and(|f| f.position + f.header.total_len() as u64 == bytes.end);
        let spans: Option<u64> = chain.iter().map(|f| span(&f.header)).sum();
        if exact && spans == Some(offsets.end - offsets.start) {
            // The headers account for exactly the missing offsets: every base offset is known.
            let mut next = offsets.start;
            for found in &chain {
                if found.header.base_offset != next as i64 {
                    self.outcome.repairs.push(Repair::SetBaseOffset {
                        position: found.position,
                        base_offset: next,
                    });
                }
                next += span(&found.header).unwrap_or(1);
            }
        } else {
            let mut next = offsets.start;
            for found in chain.iter().filter(|f| f.sound) {
                let (base, last) = batch_offsets(&found.header);
                if base >= next && last < offsets.end {
                    next = last + 1;
                } else {
                    self.outcome.repairs.push(Repair::Quarantine {
                        position: found.position,
                    });
                }
            }
        }
        let state = &mut self.outcome.state;
        state.add_damage(
            bytes.start,
            bytes.end - bytes.start,
            offsets.end,
            self.limits.index_interval_bytes,
        );
        self.outcome.damaged.push(DamagedRange { bytes, offsets });
    }

    /// Batch headers chained by their lengths from the start of `range`, as a reader walking
    /// headers would meet them; stops at the first header that does not parse or fit.
    fn walk(&self, range: std::ops::Range<u64>) -> Vec<Found> {
        let mut found = Vec::new();
        let mut position = range.start;
        while position < range.end {
            let rest = self.bytes.slice(position as usize..range.end as usize);
            let Ok(header) = BatchHeader::parse(&rest) else {
                break;
            };
            let len = header.total_len() as u64;
            if len > rest.len() as u64 || header.last_offset_delta < 0 {
                break;
            }
            let sound = RecordBatch::decode_first(&rest).is_ok();
            found.push(Found {
                position,
                header,
                sound,
            });
            position += len;
        }
        found
    }

    /// The end of the active segment after a crash (or after a clean stop whose metadata did not
    /// record the log end): sound batches whose only fault is their base offset are kept with
    /// the offsets that follow on (the active segment is contiguous); the log is cut at the
    /// first batch that is not sound, which a torn write explains.
    fn keep_sound_prefix_then_cut(&mut self, position: u64) {
        let mut at = position;
        for found in self.walk(position..self.len()) {
            if !found.sound || found.position != at {
                break;
            }
            let next = self.outcome.state.next_offset;
            let Some(span) = span(&found.header) else {
                break;
            };
            let len = found.header.total_len() as u64;
            let fits = next + span - 1 - self.base <= u64::from(u32::MAX)
                && at + len <= self.limits.max_end_position;
            if !fits || !self.role.is_active() {
                break;
            }
            if found.header.base_offset != next as i64 {
                self.outcome.repairs.push(Repair::SetBaseOffset {
                    position: at,
                    base_offset: next,
                });
            }
            let batch = AppendedBatch {
                position: at,
                len,
                base_offset: next,
                last_offset: next + span - 1,
                max_timestamp: found.header.max_timestamp,
            };
            self.add(&batch);
            at += len;
        }
        self.outcome.keep_len = at;
    }
}

/// Where to look for the next sound batch after damage, and what it must satisfy.
#[derive(Debug, Clone, Copy)]
pub struct Resync {
    /// The damaged position; the search starts right after it.
    pub damaged: u64,
    /// The offset the damaged batch should have started at.
    pub expected: u64,
    /// Largest byte position a batch may end at.
    pub max_end_position: u64,
    /// Offsets must stay below this (the next segment's base, or the log end).
    pub upper: u64,
    /// The partition's offsets have no gaps (no compaction ever ran).
    pub contiguous: bool,
    /// The offset right after the segment's last batch, when it is known: a closed segment
    /// of a contiguous log ends right before the next segment's base, and after a clean stop
    /// the active segment ends at the recorded log end. A sound batch that ends the bytes must
    /// end there; otherwise its base offset was flipped (the header after it, which would
    /// refute it, is missing).
    pub end_offset: Option<u64>,
}

/// The first position after the damage where a sound batch starts whose offsets can follow
/// it: at or after `expected`, at most one offset per skipped byte beyond it (every record
/// takes several bytes), below `upper`, and confirmed by the header after it (which must
/// follow on, as offsets only grow; in a contiguous log, right after it). A sound batch with
/// a flipped base offset fails that confirmation. Cheap on garbage: the magic byte and the
/// offset bound reject almost every position before a CRC is computed. Returns the position
/// and the base offset.
pub fn next_sound_batch(bytes: &Bytes, resync: Resync) -> Option<(u64, u64)> {
    let len = bytes.len() as u64;
    let mut position = resync.damaged + 1;
    while position + super::batch::BATCH_HEADER_LEN as u64 <= len {
        let at = position as usize;
        if bytes.get(at + MAGIC_POSITION as usize) == Some(&(MAGIC_V2 as u8))
            && let Ok(header) = BatchHeader::parse(&bytes[at..])
            && let Ok(base) = u64::try_from(header.base_offset)
            && base >= resync.expected
            && base - resync.expected <= position - resync.damaged
            && header.last_offset() >= 0
            && (header.last_offset() as u64) < resync.upper
            && position + header.total_len() as u64 <= resync.max_end_position
            && confirmed_by_next(
                bytes,
                at + header.total_len(),
                header.last_offset() as u64,
                resync.contiguous,
                resync.end_offset,
            )
            && RecordBatch::decode_first(&bytes.slice(at..)).is_ok()
        {
            return Some((position, base));
        }
        position += 1;
    }
    None
}

/// Whether the headers after a batch ending at `next` (whose last offset is `last`) do not
/// refute it: the next header follows on, or (when the next batch is itself damaged) the one
/// after it follows on by the next header's span. Where the bytes end, the segment's end stands
/// for the next header: with `end_offset` known, the batch must end right before it; without,
/// nothing is confirmed or refuted. An unparseable next header neither confirms nor refutes.
pub(crate) fn confirmed_by_next(
    bytes: &[u8],
    next: usize,
    last: u64,
    contiguous: bool,
    end_offset: Option<u64>,
) -> bool {
    let header_at = |at: usize| {
        bytes
            .get(at..)
            .filter(|rest| !rest.is_empty())
            .map(BatchHeader::parse)
    };
    let follows = |header: &BatchHeader, after: u64| {
        let base = header.base_offset;
        if contiguous {
            base == after as i64
        } else {
            base >= after as i64
        }
    };
    let following = match header_at(next) {
        None => return end_offset.is_none_or(|end| last.checked_add(1) == Some(end)),
        Some(Err(_)) => return true,
        Some(Ok(following)) => following,
    };
    if follows(&following, last + 1) {
        return true;
    }
    let Some(span) = span(&following) else {
        return false;
    };
    match header_at(next + following.total_len()) {
        Some(Ok(second)) => follows(&second, last + 1 + span),
        _ => false,
    }
}

/// Offsets a batch occupies according to its header (`lastOffsetDelta + 1`); `None` for a
/// negative delta, which no sound batch has.
fn span(header: &BatchHeader) -> Option<u64> {
    u64::try_from(header.last_offset_delta).ok().map(|d| d + 1)
}

//! The one batch choice of every read, local or remote: given bytes of a segment that start at
//! a batch boundary, which whole batches answer a read of `offset` with at most `max_bytes`.
//!
//! Only headers are parsed here (no CRC): the chosen bytes are validated by whoever decodes
//! them. What this adds over a plain header walk is **offset consistency**: `baseOffset` is
//! outside Kafka's CRC, so a flipped bit there would make a sound batch claim offsets that are
//! not its own. Within a segment, offsets only grow, stay at or above where the walk started
//! and below the next segment's base (or the high watermark). A batch that breaks this is never
//! chosen; when a batch is only found out by its successor (it claimed offsets beyond where the
//! successor starts), the successor decides: if it fits after the batch before the suspect, the
//! suspect is the bad one. A read of an offset that a bad batch held is an error, never an
//! answer with other offsets' records.

use std::ops::Range;

use super::batch::batch_offsets;
use super::batch::{BatchError, BatchHeader, batch_headers, crc_matches};

/// Offsets the bytes may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetBounds {
    /// The first batch's base offset when the walk starts at an index entry (then it must match
    /// exactly), else `None`.
    pub anchor: Option<u64>,
    /// No batch may start below this (the segment's base, or past what was read before).
    pub lower: u64,
    /// Every offset must be below this: the next segment's base offset, or the log end.
    pub upper: u64,
    /// The high watermark: durable bytes never hold offsets at or above it, so a batch that
    /// claims them is bad.
    pub high_watermark: u64,
    /// The partition never held compacted segments: every batch starts right after the one
    /// before it (after a bad one: after the offsets its header spans).
    pub contiguous: bool,
}

/// What a window of segment bytes answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// These bytes (relative to the window), holding offsets from `first_offset` to below
    /// `next_offset`.
    Found {
        /// Byte range within the window.
        bytes: Range<usize>,
        /// Base offset of the first chosen batch (may be below the requested offset).
        first_offset: u64,
        /// Offset after the last chosen batch.
        next_offset: u64,
    },
    /// Every complete batch of the window ends before the offset: continue at `consumed` bytes
    /// with `lower` as the new lower bound.
    Skip {
        /// Bytes of whole batches walked.
        consumed: usize,
        /// Offset after the last batch walked.
        lower: u64,
    },
    /// The window ends inside the batch that would be chosen: read a larger one.
    Grow,
    /// Nothing at or after the offset (below the high watermark) in these bytes.
    Nothing,
}

/// Why no batch could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    /// A header does not parse where a batch must start.
    #[error("bad batch header at byte {position}: {source}")]
    BadHeader {
        /// Byte position within the window.
        position: usize,
        /// The offset the batch there should have started at (after the last sound one).
        expected_offset: u64,
        /// Where a search for the next sound batch should start: the last batch walked, whose
        /// own length may be what is damaged.
        search_from: usize,
        /// What the decoder found.
        #[source]
        source: BatchError,
    },
    /// The first batch does not hold the offset its index entry names: the index is stale or
    /// damaged; walk the segment from its start instead.
    #[error("the index entry names offset {expected}, the batch there starts at {found}")]
    IndexMismatch {
        /// The offset of the index entry.
        expected: u64,
        /// The batch's base offset.
        found: u64,
    },
    /// The requested offset was held by a batch whose offsets cannot be trusted.
    #[error("offset {offset} is in a batch at byte {position} whose offsets are inconsistent")]
    Inconsistent {
        /// The requested offset.
        offset: u64,
        /// Byte position of the bad batch within the window.
        position: usize,
    },
}

/// A walked batch.
#[derive(Debug, Clone, Copy)]
struct Walked {
    position: usize,
    end: usize,
    base: u64,
    last: u64,
    /// A bad batch sits between the previous accepted batch and this one.
    after_bad: Option<usize>,
}

/// Whether the headers after `next` do not refute a batch whose last offset is `last` (see
/// `scan::confirmed_by_next`).
fn confirmed(window: &[u8], next: usize, last: u64) -> bool {
    super::scan::confirmed_by_next(window, next, last, true, None)
}

/// The index of the first accepted batch that holds `offset` or comes after it; an error when
/// the offset lies in the bad batches before it.
fn choose_first(accepted: &[Walked], offset: u64) -> Result<Option<usize>, ChoiceError> {
    let Some(index) = accepted.iter().position(|a| a.last >= offset) else {
        return Ok(None);
    };
    let first = accepted[index];
    if let Some(bad) = first.after_bad
        && offset < first.base
    {
        return Err(ChoiceError::Inconsistent {
            offset,
            position: bad,
        });
    }
    Ok(Some(index))
}

/// Whether the batches from `from` on already exceed the budget by one accepted batch: the
/// look-ahead that confirms the last chosen one.
fn budget_reached(accepted: &[Walked], from: usize, max_bytes: u64) -> bool {
    let start = accepted[from].position;
    accepted
        .iter()
        .skip(from + 1)
        .any(|a| (a.end - start) as u64 > max_bytes)
}

/// Chooses the whole batches of `window` that answer a read of `offset`: the batch holding it
/// (or the first after it, when compaction left a gap) and the following ones while they fit
/// in `max_bytes` (at least one). `reaches_end`: the window ends where the segment's durable
/// bytes end, so a cut-off header is damage, not a short window.
///
/// # Errors
/// See [`ChoiceError`].
pub fn choose_batches(
    window: &[u8],
    offset: u64,
    max_bytes: u64,
    bounds: OffsetBounds,
    reaches_end: bool,
) -> Result<Choice, ChoiceError> {
    let mut walk = Walk {
        window,
        offset,
        max_bytes,
        bounds,
        accepted: Vec::new(),
        pending_bad: None,
        pending_span: Some(0),
        chosen_from: None,
    };
    let mut consumed = 0usize;
    let mut stopped_early = false;
    for item in batch_headers(window) {
        let (position, header) = match item {
            Ok(item) => item,
            Err(source) => {
                if walk.chosen_from.is_none() && reaches_end {
                    return Err(walk.bad_header(consumed, source));
                }
                // A short window, or damage after what was chosen: stop here.
                stopped_early = !reaches_end;
                break;
            }
        };
        consumed = position + header.total_len();
        if walk.step(position, &header)? == Step::Stop {
            break;
        }
    }
    walk.finish(reaches_end, stopped_early)
}

/// Whether a walk goes on after a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Next,
    Stop,
}

/// What a batch is, judged against the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// It claims its own offsets.
    Accepted,
    /// Its offsets cannot be trusted.
    Bad,
    /// It is the next batch, published after the high watermark the read started with.
    Unpublished,
}

/// The state of one [`choose_batches`] walk.
struct Walk<'a> {
    window: &'a [u8],
    offset: u64,
    max_bytes: u64,
    bounds: OffsetBounds,
    accepted: Vec<Walked>,
    /// The first bad batch since the last accepted one.
    pending_bad: Option<usize>,
    /// Offsets the bad batches since the last accepted one span (contiguous logs only); `None`
    /// when one of them is not sound, so its header's span cannot be trusted.
    pending_span: Option<u64>,
    /// Index in `accepted` of the first chosen batch.
    chosen_from: Option<usize>,
}

impl Walk<'_> {
    /// The offset after the last accepted batch (or where the walk started).
    fn known_end(&self) -> u64 {
        self.accepted
            .last()
            .map_or(self.bounds.anchor.unwrap_or(self.bounds.lower), |a| {
                a.last + 1
            })
    }

    /// Offsets must stay below this: the next segment's base, and durable bytes hold nothing at
    /// or above the high watermark.
    fn upper(&self) -> u64 {
        self.bounds.upper.min(self.bounds.high_watermark)
    }

    fn sound(&self, position: usize, end: usize) -> bool {
        self.window.get(position..end).is_some_and(crc_matches)
    }

    fn bad_header(&self, consumed: usize, source: BatchError) -> ChoiceError {
        ChoiceError::BadHeader {
            position: consumed,
            expected_offset: self.known_end(),
            search_from: self.accepted.last().map_or(consumed, |a| a.position),
            source,
        }
    }

    /// Judges one batch and, once the read's first batch is known, whether the budget is spent.
    fn step(&mut self, position: usize, header: &BatchHeader) -> Result<Step, ChoiceError> {
        let (base, last) = batch_offsets(header);
        let end = position + header.total_len();
        if self.accepted.is_empty()
            && self.pending_bad.is_none()
            && let Some(anchor) = self.bounds.anchor
            && base != anchor
        {
            return Err(ChoiceError::IndexMismatch {
                expected: anchor,
                found: base,
            });
        }
        let walked = Walked {
            position,
            end,
            base,
            last,
            after_bad: self.pending_bad,
        };
        let verdict = if self.bounds.contiguous {
            self.judge_contiguous(walked, header)
        } else {
            self.judge_increasing(walked, header)
        };
        match verdict {
            Verdict::Unpublished => return Ok(Step::Stop),
            Verdict::Bad => return Ok(Step::Next),
            Verdict::Accepted => {}
        }
        if self.chosen_from.is_none() {
            self.chosen_from = choose_first(&self.accepted, self.offset)?;
        }
        let spent = self
            .chosen_from
            .is_some_and(|from| budget_reached(&self.accepted, from, self.max_bytes));
        Ok(if spent { Step::Stop } else { Step::Next })
    }

    /// Accepts `walked`, which comes after the pending bad batches (if any).
    fn accept(&mut self, walked: Walked, after_bad: Option<usize>) {
        self.accepted.push(Walked {
            after_bad,
            ..walked
        });
        self.pending_bad = None;
        self.pending_span = Some(0);
    }

    /// Drops the last accepted batch, which a later one showed to be bad.
    fn reject_last(&mut self) -> Option<Walked> {
        let suspect = self.accepted.pop();
        if self
            .chosen_from
            .is_some_and(|from| from >= self.accepted.len())
        {
            self.chosen_from = None;
        }
        suspect
    }

    fn mark_bad(&mut self, position: usize, sound_span: Option<u64>) -> Verdict {
        self.pending_bad.get_or_insert(position);
        self.pending_span = match (self.pending_span, sound_span) {
            (Some(total), Some(span)) => Some(total + span),
            _ => None,
        };
        Verdict::Bad
    }

    /// Offsets follow on: a batch starts exactly where the one before it (and the bad ones
    /// since, by the offsets their sound headers span) ended. After a bad batch whose CRC fails
    /// too, its span is unknown: the next batch must then be sound itself and be confirmed by
    /// the batch after it.
    fn judge_contiguous(&mut self, walked: Walked, header: &BatchHeader) -> Verdict {
        let known = self.known_end();
        let expected = self.pending_span.map(|span| known + span);
        if walked.base >= self.bounds.high_watermark && expected == Some(walked.base) {
            return Verdict::Unpublished;
        }
        let Walked {
            position,
            end,
            base,
            last,
            ..
        } = walked;
        let below_upper = last < self.upper() && header.base_offset >= 0;
        let follows = match expected {
            Some(expected) => base == expected,
            None => base >= known && self.sound(position, end) && confirmed(self.window, end, last),
        };
        if follows && below_upper {
            let after_bad = self.pending_bad;
            self.accept(walked, after_bad);
            return Verdict::Accepted;
        }
        // The batch before was accepted on its header alone; if it is not sound, its last
        // offset delta may be what is wrong, and this sound batch follows on.
        if let Some(&suspect) = self.accepted.last()
            && self.pending_bad.is_none()
            && !self.sound(suspect.position, suspect.end)
            && base > suspect.base
            && below_upper
            && self.sound(position, end)
            && confirmed(self.window, end, last)
        {
            self.reject_last();
            self.accept(walked, Some(suspect.position));
            return Verdict::Accepted;
        }
        let span = u64::try_from(header.last_offset_delta).ok().map(|d| d + 1);
        let sound_span = span.filter(|_| self.sound(position, end));
        self.mark_bad(position, sound_span)
    }

    /// Offsets only grow (a compacted log): a batch overlapping the one before means one of the
    /// two claims wrong offsets. The one that breaks contiguity is the bad one; when that cannot
    /// tell, neither is used.
    fn judge_increasing(&mut self, walked: Walked, header: &BatchHeader) -> Verdict {
        let floor = self.known_end();
        let Walked {
            position,
            base,
            last,
            ..
        } = walked;
        if base >= self.bounds.high_watermark && base == floor {
            return Verdict::Unpublished;
        }
        let upper = self.upper();
        if header.base_offset < 0 {
            return self.mark_bad(position, None);
        }
        if base >= floor && last < upper {
            let after_bad = self.pending_bad;
            self.accept(walked, after_bad);
            return Verdict::Accepted;
        }
        let Some(&suspect) = self
            .accepted
            .last()
            .filter(|_| base < floor && last < upper)
        else {
            return self.mark_bad(position, None);
        };
        let before = self
            .accepted
            .len()
            .checked_sub(2)
            .map_or(self.bounds.anchor.unwrap_or(self.bounds.lower), |i| {
                self.accepted[i].last + 1
            });
        // A sound suspect that follows on claims its own offsets (its last offset delta is under
        // the CRC): then this batch is the bad one.
        let suspect_sound = self.sound(suspect.position, suspect.end);
        if suspect.base == before && suspect_sound {
            return self.mark_bad(position, None);
        }
        let follows_true_suspect = base == before + (suspect.last - suspect.base + 1)
            || (!suspect_sound && base >= before);
        self.reject_last();
        if follows_true_suspect {
            self.accept(walked, Some(suspect.position));
            Verdict::Accepted
        } else {
            self.pending_bad = Some(suspect.position);
            Verdict::Bad
        }
    }

    /// The answer once the walk stopped.
    fn finish(self, reaches_end: bool, stopped_early: bool) -> Result<Choice, ChoiceError> {
        if let Some(bad) = self.pending_bad
            && self.chosen_from.is_none()
            && self.accepted.last().is_none_or(|a| a.last < self.offset)
        {
            return Err(ChoiceError::Inconsistent {
                offset: self.offset,
                position: bad,
            });
        }
        let Some(from) = self.chosen_from else {
            return Ok(match self.accepted.last() {
                None if stopped_early => Choice::Grow,
                Some(last) if !reaches_end => Choice::Skip {
                    consumed: last.end,
                    lower: last.last + 1,
                },
                _ if stopped_early => Choice::Grow,
                _ => Choice::Nothing,
            });
        };
        let start = self.accepted[from].position;
        let mut end = self.accepted[from].end;
        let mut next_offset = self.accepted[from].last + 1;
        for walked in self.accepted.iter().skip(from + 1) {
            if walked.after_bad.is_some() || (walked.end - start) as u64 > self.max_bytes {
                break;
            }
            end = walked.end;
            next_offset = walked.last + 1;
        }
        Ok(Choice::Found {
            bytes: start..end,
            first_offset: self.accepted[from].base,
            next_offset,
        })
    }
}

/// A batch that failed validation during a timestamp search.
#[derive(Debug, thiserror::Error)]
#[error("batch at byte {position} of the window: {source}")]
pub struct TimestampSearchError {
    /// Byte position within the window.
    pub position: usize,
    /// What failed.
    #[source]
    pub source: BatchError,
}

/// The one timestamp search of local and remote segments: the first record in `window` (whole
/// batches from a batch boundary) whose offset is in `from..upper` and whose timestamp is at or
/// after `timestamp`. A batch whose newest timestamp is older is skipped by its header alone;
/// only a batch that may hold the record is decoded (CRC and records validated).
///
/// # Errors
/// The position and cause of a batch that fails validation.
pub fn first_at_or_after_time(
    window: &bytes::Bytes,
    from: u64,
    upper: u64,
    timestamp: i64,
) -> Result<Option<u64>, TimestampSearchError> {
    // Where the next header starts: where a header that fails to parse sits.
    let mut next_position = 0;
    for item in batch_headers(window) {
        let (position, header) = item.map_err(|source| TimestampSearchError {
            position: next_position,
            source,
        })?;
        next_position = position + header.total_len();
        let (base, last) = batch_offsets(&header);
        if base >= upper {
            break;
        }
        if header.max_timestamp < timestamp || last < from {
            continue;
        }
        let bytes = window.slice(position..position + header.total_len());
        let failed = |source| TimestampSearchError { position, source };
        let batch = super::RecordBatch::decode_exact(bytes).map_err(failed)?;
        for record in batch.records() {
            let record = record.map_err(failed)?;
            let offset = u64::try_from(record.offset).unwrap_or(0);
            if offset >= from && offset < upper && record.timestamp >= timestamp {
                return Ok(Some(offset));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use proptest::prelude::*;

    use super::*;
    use crate::log::batch::{BatchOptions, NewRecord, encode_batch};

    /// A segment of batches with `spans` records each, starting at `base`, with `gaps[i]`
    /// offsets left out before batch `i` (compaction). Returns the bytes and each batch's
    /// (position, base, last).
    fn segment(base: u64, spans: &[u8], gaps: &[u8]) -> (Vec<u8>, Vec<(usize, u64, u64)>) {
        let mut bytes = Vec::new();
        let mut batches = Vec::new();
        let mut next = base;
        for (i, &span) in spans.iter().enumerate() {
            next += u64::from(gaps.get(i).copied().unwrap_or(0));
            let records: Vec<NewRecord> = (0..span)
                .map(|r| NewRecord {
                    timestamp: 1,
                    key: None,
                    value: Some(Bytes::from(vec![r; 5])),
                    headers: Vec::new(),
                })
                .collect();
            let options = BatchOptions {
                base_offset: next as i64,
                ..BatchOptions::default()
            };
            let batch = encode_batch(&options, &records).unwrap();
            let last = next + u64::from(span) - 1;
            batches.push((bytes.len(), next, last));
            bytes.extend_from_slice(&batch);
            next = last + 1;
        }
        (bytes, batches)
    }

    fn bounds(base: u64, upper: u64, contiguous: bool) -> OffsetBounds {
        OffsetBounds {
            anchor: None,
            lower: base,
            upper,
            high_watermark: upper,
            contiguous,
        }
    }

    proptest! {
        #[test]
        fn the_choice_is_the_batch_holding_the_offset_as_a_linear_scan_finds_it(
            spans in prop::collection::vec(1u8..5, 1..20),
            gaps in prop::collection::vec(0u8..3, 0..20),
            max_bytes in 1u64..400,
        ) {
            let (bytes, batches) = segment(100, &spans, &gaps);
            let end = batches.last().unwrap().2 + 1;
            let contiguous = gaps.iter().take(spans.len()).all(|g| *g == 0);
            for offset in 100..end {
                let choice =
                    choose_batches(&bytes, offset, max_bytes, bounds(100, end, contiguous), true);
                let holder = batches.iter().position(|b| b.2 >= offset).unwrap();
                let Ok(Choice::Found { bytes: range, first_offset, next_offset }) = choice else {
                    panic!("offset {offset}: {choice:?}");
                };
                prop_assert_eq!(range.start, batches[holder].0);
                prop_assert_eq!(first_offset, batches[holder].1);
                // Whole batches within the budget, at least one.
                let chosen: Vec<_> = batches.iter().filter(|b| b.0 >= range.start && b.0 < range.end).collect();
                prop_assert!(!chosen.is_empty());
                prop_assert_eq!(next_offset, chosen.last().unwrap().2 + 1);
                prop_assert!(chosen.len() == 1 || (range.end - range.start) as u64 <= max_bytes);
                let after = batches.iter().find(|b| b.0 >= range.end);
                if let Some(after) = after {
                    prop_assert_eq!(after.0, range.end, "ends at a batch boundary");
                }
            }
        }

        #[test]
        fn a_flipped_base_offset_never_gives_a_batch_offsets_that_are_not_its_own(
            spans in prop::collection::vec(1u8..5, 2..12),
            victim in any::<prop::sample::Index>(),
            bit in 0u32..64,
            max_bytes in 1u64..400,
            contiguous in any::<bool>(),
        ) {
            let (mut bytes, batches) = segment(100, &spans, &[]);
            let victim = victim.index(batches.len());
            let (position, base, _) = batches[victim];
            let flipped = base ^ (1u64 << bit);
            bytes[position..position + 8].copy_from_slice(&flipped.to_be_bytes());
            let end = batches.last().unwrap().2 + 1;
            for offset in 100..end {
                let Ok(Choice::Found { bytes: range, .. }) =
                    choose_batches(&bytes, offset, max_bytes, bounds(100, end, contiguous), true)
                else {
                    continue; // an error (or nothing) is allowed; a wrong answer is not
                };
                for (at, header) in batch_headers(&bytes[range.clone()]).map(Result::unwrap) {
                    let truth = batches.iter().find(|b| b.0 == range.start + at).unwrap();
                    prop_assert_eq!(header.base_offset as u64, truth.1, "offset {}", offset);
                }
                // Every intact batch stays readable.
                let holder = batches.iter().position(|b| b.2 >= offset).unwrap();
                if holder != victim {
                    prop_assert_eq!(range.start, batches[holder].0, "offset {}", offset);
                }
            }
            for (i, b) in batches.iter().enumerate() {
                if i == victim {
                    continue;
                }
                let choice =
                    choose_batches(&bytes, b.1, max_bytes, bounds(100, end, contiguous), true);
                let found = matches!(choice, Ok(Choice::Found { ref bytes, .. }) if bytes.start == b.0);
                prop_assert!(found, "intact batch {} unreadable: {:?}", i, choice);
            }
        }
    }

    /// Batches with records stamped `stamps[i]` each, offsets from 10 on.
    fn stamped(stamps: &[&[i64]]) -> Bytes {
        let mut bytes = Vec::new();
        let mut next = 10;
        for batch in stamps {
            let records: Vec<NewRecord> = batch
                .iter()
                .map(|&timestamp| NewRecord {
                    timestamp,
                    key: None,
                    value: None,
                    headers: Vec::new(),
                })
                .collect();
            let options = BatchOptions {
                base_offset: next,
                ..BatchOptions::default()
            };
            bytes.extend_from_slice(&encode_batch(&options, &records).unwrap());
            next += batch.len() as i64;
        }
        Bytes::from(bytes)
    }

    #[test]
    fn the_timestamp_search_finds_the_first_record_at_or_after_the_time_within_bounds() {
        // Offsets 10-11 at times 5, 9; 12-13 at 20, 7; 14 at 30.
        let window = stamped(&[&[5, 9], &[20, 7], &[30]]);
        let find = |from, upper, timestamp| first_at_or_after_time(&window, from, upper, timestamp);
        assert_eq!(find(0, u64::MAX, 8).unwrap(), Some(11));
        assert_eq!(find(0, u64::MAX, 10).unwrap(), Some(12));
        assert_eq!(
            find(13, u64::MAX, 10).unwrap(),
            Some(14),
            "from skips offset 12"
        );
        assert_eq!(find(0, 14, 25).unwrap(), None, "upper hides offset 14");
        assert_eq!(find(0, u64::MAX, 31).unwrap(), None);
    }

    #[test]
    fn the_timestamp_search_names_the_position_of_a_bad_batch() {
        let window = stamped(&[&[5], &[20]]);
        let second = batch_headers(&window).nth(1).unwrap().unwrap().0;
        let mut bytes = window.to_vec();
        bytes[second + 16] ^= 0x01; // magic byte of the second batch
        let error = first_at_or_after_time(&Bytes::from(bytes), 0, u64::MAX, 10).unwrap_err();
        assert_eq!(error.position, second);
    }
}

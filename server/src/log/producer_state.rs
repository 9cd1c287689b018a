//! Idempotent-producer state of one partition: per producer id, its epoch and the last few
//! batches' sequence ranges with the offsets they got.
//!
//! Kafka's semantics: a batch from producer `(id, epoch)` carries the sequence number of its first
//! record (`baseSequence`), counted per producer and partition from 0. The writer accepts the
//! batch that continues the sequence, answers a retried batch that matches one of the last
//! [`CACHED_BATCHES`] with the offsets it got the first time (no second append), refuses a gap,
//! and refuses an epoch older than the one it knows (a fenced "zombie" producer). A new epoch
//! starts again at sequence 0. The state is rebuilt from the batch headers in the log (which keep
//! producer id, epoch and sequence) starting at the newest snapshot, written at every roll.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::batch::BatchHeader;
use super::types::BatchAck;

/// How many recent batches per producer are remembered for duplicate detection (Kafka: 5, the
/// most in-flight requests an idempotent producer may have).
pub const CACHED_BATCHES: usize = 5;

/// Why an idempotent batch was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProducerError {
    /// The producer's epoch is older than one already seen: another session took over.
    #[error("producer {producer_id} epoch {epoch} is fenced by epoch {current_epoch}")]
    Fenced {
        /// Producer id.
        producer_id: i64,
        /// Epoch in the batch.
        epoch: i16,
        /// Newest epoch seen.
        current_epoch: i16,
    },
    /// The batch does not continue the producer's sequence.
    #[error("producer {producer_id} sent sequence {sequence}, expected {expected}")]
    SequenceGap {
        /// Producer id.
        producer_id: i64,
        /// First sequence of the batch.
        sequence: i32,
        /// The sequence that would have continued.
        expected: i32,
    },
}

/// What the writer should do with a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it (new data, or not an idempotent batch).
    Append,
    /// A retry of a batch already in the log: answer with these offsets, append nothing.
    Duplicate(BatchAck),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct CachedBatch {
    first_sequence: i32,
    last_sequence: i32,
    base_offset: u64,
    last_offset: u64,
}

/// Previous entries of producers changed during a write, to restore them if it fails.
pub type UndoLog = Vec<(i64, Option<ProducerEntry>)>;

/// What is known about one producer id on this partition.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<CachedBatch>,
}

/// Per-producer sequence state of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProducerState {
    producers: BTreeMap<i64, ProducerEntry>,
}

impl ProducerState {
    /// Decides whether an incoming batch is new, a duplicate, or refused.
    ///
    /// # Errors
    /// [`ProducerError`] for a fenced epoch or a sequence gap.
    pub fn check(&self, header: &BatchHeader) -> Result<SequenceCheck, ProducerError> {
        if header.producer_id < 0 {
            return Ok(SequenceCheck::Append);
        }
        let (id, epoch, sequence) = (
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
        );
        let last_sequence = last_sequence(header);
        let Some(entry) = self.producers.get(&id) else {
            return if sequence == 0 {
                Ok(SequenceCheck::Append)
            } else {
                Err(ProducerError::SequenceGap {
                    producer_id: id,
                    sequence,
                    expected: 0,
                })
            };
        };
        if epoch < entry.epoch {
            return Err(ProducerError::Fenced {
                producer_id: id,
                epoch,
                current_epoch: entry.epoch,
            });
        }
        if epoch > entry.epoch {
            return if sequence == 0 {
                Ok(SequenceCheck::Append)
            } else {
                Err(ProducerError::SequenceGap {
                    producer_id: id,
                    sequence,
                    expected: 0,
                })
            };
        }
        if let Some(cached) = entry
            .batches
            .iter()
            .find(|b| b.first_sequence == sequence && b.last_sequence == last_sequence)
        {
            return Ok(SequenceCheck::Duplicate(BatchAck {
                base_offset: cached.base_offset,
                last_offset: cached.last_offset,
                duplicate: true,
            }));
        }
        let expected = entry
            .batches
            .back()
            .map_or(0, |b| next_sequence(b.last_sequence));
        if sequence == expected {
            Ok(SequenceCheck::Append)
        } else {
            Err(ProducerError::SequenceGap {
                producer_id: id,
                sequence,
                expected,
            })
        }
    }

    /// Records an appended batch (also used while rebuilding from the log).
    pub fn record(&mut self, header: &BatchHeader, ack: BatchAck) {
        if header.producer_id < 0 {
            return;
        }
        let entry = self.producers.entry(header.producer_id).or_default();
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        entry.batches.push_back(CachedBatch {
            first_sequence: header.base_sequence,
            last_sequence: last_sequence(header),
            base_offset: ack.base_offset,
            last_offset: ack.last_offset,
        });
        while entry.batches.len() > CACHED_BATCHES {
            entry.batches.pop_front();
        }
    }

    /// Like [`ProducerState::record`], remembering the previous entry in `undo` so a failed
    /// write can take the update back.
    pub fn record_undoable(&mut self, header: &BatchHeader, ack: BatchAck, undo: &mut UndoLog) {
        if header.producer_id < 0 {
            return;
        }
        undo.push((
            header.producer_id,
            self.producers.get(&header.producer_id).cloned(),
        ));
        self.record(header, ack);
    }

    /// Restores every entry changed since `undo` had length `mark`, newest change first.
    pub fn undo(&mut self, undo: &UndoLog, mark: usize) {
        for (producer_id, previous) in undo.get(mark..).unwrap_or(&[]).iter().rev() {
            match previous {
                Some(entry) => self.producers.insert(*producer_id, entry.clone()),
                None => self.producers.remove(producer_id),
            };
        }
    }

    /// Number of producers tracked.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is tracked.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }
}

/// Sequence numbers wrap from `i32::MAX` to 0, as in Kafka.
fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

fn last_sequence(header: &BatchHeader) -> i32 {
    let last = i64::from(header.base_sequence) + i64::from(header.last_offset_delta);
    i32::try_from(last % (i64::from(i32::MAX) + 1)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(producer_id: i64, epoch: i16, sequence: i32, records: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 49,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: records - 1,
            first_timestamp: 0,
            max_timestamp: 0,
            producer_id,
            producer_epoch: epoch,
            base_sequence: sequence,
            record_count: records,
        }
    }

    fn ack(base: u64, count: u64) -> BatchAck {
        BatchAck {
            base_offset: base,
            last_offset: base + count - 1,
            duplicate: false,
        }
    }

    fn dup(base: u64, count: u64) -> BatchAck {
        BatchAck {
            duplicate: true,
            ..ack(base, count)
        }
    }

    #[test]
    fn sequences_continue_duplicates_are_answered_and_gaps_refused() {
        let mut state = ProducerState::default();
        let first = header(7, 0, 0, 3);
        assert_eq!(state.check(&first), Ok(SequenceCheck::Append));
        state.record(&first, ack(10, 3));
        assert_eq!(
            state.check(&first),
            Ok(SequenceCheck::Duplicate(dup(10, 3)))
        );
        let gap = header(7, 0, 5, 1);
        assert_eq!(
            state.check(&gap),
            Err(ProducerError::SequenceGap {
                producer_id: 7,
                sequence: 5,
                expected: 3
            })
        );
        let next = header(7, 0, 3, 2);
        assert_eq!(state.check(&next), Ok(SequenceCheck::Append));
        state.record(&next, ack(20, 2));
        assert_eq!(
            state.check(&first),
            Ok(SequenceCheck::Duplicate(dup(10, 3)))
        );
    }

    #[test]
    fn old_epochs_are_fenced_and_new_epochs_restart_at_zero() {
        let mut state = ProducerState::default();
        state.record(&header(1, 3, 0, 1), ack(0, 1));
        assert!(matches!(
            state.check(&header(1, 2, 1, 1)),
            Err(ProducerError::Fenced { .. })
        ));
        assert!(matches!(
            state.check(&header(1, 4, 1, 1)),
            Err(ProducerError::SequenceGap { .. })
        ));
        assert_eq!(state.check(&header(1, 4, 0, 1)), Ok(SequenceCheck::Append));
        assert!(matches!(
            state.check(&header(2, 0, 9, 1)),
            Err(ProducerError::SequenceGap { .. })
        ));
        assert_eq!(
            state.check(&header(-1, -1, -1, 1)),
            Ok(SequenceCheck::Append)
        );
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut state = ProducerState::default();
        let mut undo = UndoLog::new();
        state.record_undoable(&header(9, 0, 0, 1), ack(0, 1), &mut undo);
        state.undo(&undo, 0);
        assert!(state.is_empty(), "undo removes a producer it added");
        for i in 0..7 {
            state.record(&header(1, 0, i, 1), ack(i as u64, 1));
        }
        assert!(matches!(
            state.check(&header(1, 0, 0, 1)),
            Err(ProducerError::SequenceGap { .. })
        ));
        assert_eq!(
            state.check(&header(1, 0, 6, 1)),
            Ok(SequenceCheck::Duplicate(dup(6, 1)))
        );
        assert_eq!(next_sequence(i32::MAX), 0);
    }
}

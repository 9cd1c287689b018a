//! The ledger of acknowledged records and the check of what was read against it: every
//! acknowledged record exactly once, at the offset it was acknowledged with, byte-identical,
//! and in send order per producer within a partition. A run that fails this fails, whatever
//! its speed.

use serde::{Deserialize, Serialize};

use crate::payload::{Mismatch, Payloads, RecordId};

/// A record the server acknowledged: where, and which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// Topic index x partitions + partition.
    pub stream: usize,
    pub offset: u64,
    pub id: RecordId,
}

/// What the readers saw, and what they found wrong in the bytes themselves.
#[derive(Debug, Default)]
pub struct Observations {
    pub records: Vec<Placed>,
    pub corrupt: u64,
    pub problems: Vec<String>,
}

impl Observations {
    /// Checks one stored record and notes it (records of other runs are skipped).
    pub fn observe(
        &mut self,
        payloads: &Payloads,
        stream: usize,
        offset: u64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) {
        match payloads.check(key, value.unwrap_or_default()) {
            Ok(stamp) => self.records.push(Placed {
                stream,
                offset,
                id: stamp.id,
            }),
            Err(Mismatch::Foreign) => {}
            Err(mismatch) => {
                self.corrupt += 1;
                self.note(format!("stream {stream} offset {offset}: {mismatch:?}"));
            }
        }
    }

    pub fn note(&mut self, problem: String) {
        if self.problems.len() < 10 {
            self.problems.push(problem);
        }
    }

    pub fn absorb(&mut self, other: Observations) {
        self.records.extend(other.records);
        self.corrupt += other.corrupt;
        for problem in other.problems {
            self.note(problem);
        }
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Verdict {
    pub passed: bool,
    pub acknowledged: u64,
    pub read: u64,
    pub matched: u64,
    pub lost: u64,
    pub duplicates: u64,
    /// A different record than acknowledged at an acknowledged offset.
    pub misplaced: u64,
    pub out_of_order: u64,
    pub corrupt: u64,
    /// Records of failed requests that were stored anyway (allowed: the client saw an error).
    pub unacknowledged_stored: u64,
    /// The first problems found, for a person.
    pub problems: Vec<String>,
}

/// Checks `seen` against `acked`. Duplicates pass only when `duplicates_allowed` (a consumer
/// group re-delivers after a rebalance: at-least-once).
pub fn check(
    streams: usize,
    acked: &[Placed],
    mut seen: Observations,
    duplicates_allowed: bool,
) -> Verdict {
    let mut verdict = Verdict {
        acknowledged: acked.len() as u64,
        read: seen.records.len() as u64,
        corrupt: seen.corrupt,
        ..Verdict::default()
    };
    let mut problems = std::mem::take(&mut seen.problems);
    let mut note = |text: String| {
        if problems.len() < 10 {
            problems.push(text);
        }
    };
    let mut acked_by_stream = vec![Vec::new(); streams];
    for placed in acked {
        if let Some(list) = acked_by_stream.get_mut(placed.stream) {
            list.push((placed.offset, placed.id));
        }
    }
    let mut seen_by_stream = vec![Vec::new(); streams];
    for placed in &seen.records {
        if let Some(list) = seen_by_stream.get_mut(placed.stream) {
            list.push((placed.offset, placed.id));
        }
    }
    for (stream, (mut acked, mut seen)) in
        acked_by_stream.into_iter().zip(seen_by_stream).enumerate()
    {
        acked.sort_unstable();
        seen.sort_by_key(|(offset, _)| *offset);
        check_order(stream, &seen, &mut verdict, &mut note);
        let mut cursor = 0;
        for &(offset, id) in &acked {
            while cursor < seen.len() && seen[cursor].0 < offset {
                cursor += 1;
            }
            let mut found = 0;
            while cursor < seen.len() && seen[cursor].0 == offset {
                if seen[cursor].1 == id {
                    found += 1;
                } else {
                    verdict.misplaced += 1;
                    note(format!(
                        "stream {stream} offset {offset}: holds {:?}, acknowledged {id:?}",
                        seen[cursor].1
                    ));
                }
                cursor += 1;
            }
            match found {
                0 => {
                    verdict.lost += 1;
                    note(format!(
                        "stream {stream} offset {offset}: {id:?} acknowledged, never read"
                    ));
                }
                n => {
                    verdict.matched += 1;
                    verdict.duplicates += n - 1;
                }
            }
        }
        // Records read that no acknowledgement names: a failed request stored anyway, or the
        // same record stored twice at another offset.
        let acked_ids: std::collections::HashSet<RecordId> = acked.iter().map(|a| a.1).collect();
        let acked_offsets: std::collections::HashSet<u64> = acked.iter().map(|a| a.0).collect();
        for &(offset, id) in &seen {
            if acked_offsets.contains(&offset) {
                continue;
            }
            if acked_ids.contains(&id) {
                verdict.duplicates += 1;
                note(format!(
                    "stream {stream} offset {offset}: {id:?} stored again"
                ));
            } else {
                verdict.unacknowledged_stored += 1;
            }
        }
    }
    verdict.passed = verdict.lost == 0
        && verdict.misplaced == 0
        && verdict.out_of_order == 0
        && verdict.corrupt == 0
        && (duplicates_allowed || verdict.duplicates == 0);
    verdict.problems = problems;
    verdict
}

/// Within a partition, one producer's records must appear in the order it sent them.
fn check_order(
    stream: usize,
    seen: &[(u64, RecordId)],
    verdict: &mut Verdict,
    note: &mut impl FnMut(String),
) {
    let mut last: std::collections::HashMap<u32, (u64, u64)> = std::collections::HashMap::new();
    for &(offset, id) in seen {
        if let Some(&(last_seq, last_offset)) = last.get(&id.producer)
            && id.seq < last_seq
            && offset != last_offset
        {
            verdict.out_of_order += 1;
            note(format!(
                "stream {stream} offset {offset}: producer {} seq {} after seq {last_seq}",
                id.producer, id.seq
            ));
        }
        let entry = last.entry(id.producer).or_insert((id.seq, offset));
        if id.seq >= entry.0 {
            *entry = (id.seq, offset);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(stream: usize, offset: u64, producer: u32, seq: u64) -> Placed {
        Placed {
            stream,
            offset,
            id: RecordId { producer, seq },
        }
    }

    fn seen(records: Vec<Placed>) -> Observations {
        Observations {
            records,
            ..Observations::default()
        }
    }

    fn run() -> Vec<Placed> {
        (0..10)
            .map(|i| placed((i % 2) as usize, i / 2, 0, i))
            .collect()
    }

    #[test]
    fn an_exact_read_back_passes() {
        let verdict = check(2, &run(), seen(run()), false);
        assert!(verdict.passed, "{verdict:?}");
        assert_eq!((verdict.matched, verdict.read), (10, 10));
    }

    #[test]
    fn a_lost_record_fails() {
        let mut read = run();
        read.remove(3);
        let verdict = check(2, &run(), seen(read), false);
        assert!(!verdict.passed);
        assert_eq!(verdict.lost, 1);
    }

    #[test]
    fn a_duplicate_fails_unless_allowed() {
        let mut read = run();
        read.push(read[4]);
        assert_eq!(check(2, &run(), seen(read.clone()), false).duplicates, 1);
        assert!(!check(2, &run(), seen(read.clone()), false).passed);
        assert!(check(2, &run(), seen(read), true).passed);
        // The same record stored a second time at a new offset is a duplicate too.
        let mut read = run();
        read.push(placed(0, 99, 0, 0));
        assert!(!check(2, &run(), seen(read), false).passed);
    }

    #[test]
    fn a_swapped_pair_is_misplaced_and_out_of_order() {
        let mut read = run();
        let (a, b) = (read[0].id, read[2].id);
        read[0].id = b;
        read[2].id = a;
        let verdict = check(2, &run(), seen(read), false);
        assert!(!verdict.passed);
        assert_eq!(verdict.misplaced, 2);
        assert_eq!(verdict.out_of_order, 1);
    }

    #[test]
    fn unacknowledged_records_are_allowed_and_counted() {
        let mut read = run();
        read.push(placed(1, 5, 1, 0));
        let verdict = check(2, &run(), seen(read), false);
        assert!(verdict.passed, "{verdict:?}");
        assert_eq!(verdict.unacknowledged_stored, 1);
    }

    #[test]
    fn corrupt_bytes_fail() {
        let mut read = seen(run());
        read.corrupt = 1;
        assert!(!check(2, &run(), read, false).passed);
    }
}

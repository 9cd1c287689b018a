//! Legal holds: ranges of a topic's records that retention, delete-records and topic deletion
//! must keep until the hold is released, whatever the topic's settings say.
//!
//! A hold is either an offset range of one partition or a time range over every partition.
//! Retention and delete-records only ever remove a prefix of a partition's log, so what a hold
//! means to them is one offset, the lowest one it keeps ([`LegalHold::held_from`]); its end
//! matters for what it covers in the bucket (Object Lock legal holds) and for people reading it.
//! Holds live in `topic.json` next to the settings, so they are as durable as the topic and go
//! to the bucket with its metadata.

use serde::{Deserialize, Serialize};

use crate::log::retention::HeldFrom;

/// Longest reason kept with a hold, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// Most holds one topic may carry at once.
pub const MAX_HOLDS_PER_TOPIC: usize = 1000;

/// One legal hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LegalHold {
    /// Its id within the topic, never reused.
    pub id: String,
    /// Why it was placed (a case number, a regulator's request).
    pub reason: String,
    /// What it keeps.
    pub range: HoldRange,
    /// When it was placed (ms since the epoch).
    pub created_ms: i64,
    /// Who placed it, when authentication names callers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
}

/// The records a hold keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum HoldRange {
    /// Offsets `start_offset..=end_offset` of one partition (`end_offset` absent: every offset
    /// from `start_offset` on).
    Offsets {
        /// The partition.
        partition: u32,
        /// First held offset.
        start_offset: u64,
        /// Last held offset, inclusive.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end_offset: Option<u64>,
    },
    /// Records of every partition with a timestamp in `start_ms..=end_ms` (`end_ms` absent: no
    /// upper bound).
    Time {
        /// Earliest held timestamp (ms since the epoch).
        start_ms: i64,
        /// Latest held timestamp, inclusive.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end_ms: Option<i64>,
    },
}

/// Why a hold cannot be placed as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidHold {
    /// The range ends before it starts.
    #[error("the range ends before it starts")]
    Backwards,
    /// An empty or overlong reason.
    #[error("reason must be 1 to {MAX_REASON_BYTES} bytes")]
    Reason,
    /// The topic carries the most holds allowed.
    #[error("a topic carries at most {MAX_HOLDS_PER_TOPIC} legal holds")]
    TooMany,
}

impl HoldRange {
    /// Checks the range's own consistency.
    ///
    /// # Errors
    /// [`InvalidHold::Backwards`].
    pub fn validate(&self) -> Result<(), InvalidHold> {
        let backwards = match *self {
            HoldRange::Offsets {
                start_offset,
                end_offset,
                ..
            } => end_offset.is_some_and(|end| end < start_offset),
            HoldRange::Time { start_ms, end_ms } => end_ms.is_some_and(|end| end < start_ms),
        };
        if backwards {
            return Err(InvalidHold::Backwards);
        }
        Ok(())
    }

    /// Whether the hold concerns `partition` at all.
    pub fn applies_to(&self, number: u32) -> bool {
        match *self {
            HoldRange::Offsets { partition, .. } => partition == number,
            HoldRange::Time { .. } => true,
        }
    }

    /// Whether a segment of `partition` holding offsets `base..=last` with record timestamps
    /// up to `max_timestamp` may hold a record the hold keeps. A segment's oldest timestamp is
    /// not known (CreateTime need not grow with offsets), so a time hold covers every segment
    /// whose newest record is at or after its start.
    pub fn covers_segment(
        &self,
        number: u32,
        base: u64,
        last: u64,
        max_timestamp: Option<i64>,
    ) -> bool {
        match *self {
            HoldRange::Offsets {
                partition,
                start_offset,
                end_offset,
            } => {
                partition == number
                    && last >= start_offset
                    && end_offset.is_none_or(|end| base <= end)
            }
            HoldRange::Time { start_ms, .. } => max_timestamp.is_some_and(|max| max >= start_ms),
        }
    }
}

impl LegalHold {
    /// Where the hold begins in `partition`, as retention sees it; `None` when it does not
    /// concern the partition.
    pub fn held_from(&self, number: u32) -> Option<HeldFrom> {
        if !self.range.applies_to(number) {
            return None;
        }
        Some(match self.range {
            HoldRange::Offsets { start_offset, .. } => HeldFrom::Offset(start_offset),
            HoldRange::Time { start_ms, .. } => HeldFrom::Time(start_ms),
        })
    }
}

/// A topic's holds and the next id to hand out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holds {
    /// The holds in force, oldest first.
    pub active: Vec<LegalHold>,
    /// The number of the next hold's id.
    pub next_id: u64,
}

impl Holds {
    /// Where the holds begin in `partition`.
    pub fn held_from(&self, number: u32) -> Vec<HeldFrom> {
        self.active
            .iter()
            .filter_map(|hold| hold.held_from(number))
            .collect()
    }

    /// Adds a hold with the next id.
    ///
    /// # Errors
    /// An invalid range or reason, or too many holds.
    pub fn place(
        &mut self,
        range: HoldRange,
        reason: &str,
        created_ms: i64,
        created_by: Option<String>,
    ) -> Result<LegalHold, InvalidHold> {
        range.validate()?;
        if reason.trim().is_empty() || reason.len() > MAX_REASON_BYTES {
            return Err(InvalidHold::Reason);
        }
        if self.active.len() >= MAX_HOLDS_PER_TOPIC {
            return Err(InvalidHold::TooMany);
        }
        let number = self.next_id.max(1);
        self.next_id = number + 1;
        let hold = LegalHold {
            id: number.to_string(),
            reason: reason.to_string(),
            range,
            created_ms,
            created_by,
        };
        self.active.push(hold.clone());
        Ok(hold)
    }

    /// Removes the hold `id`, returning it.
    pub fn release(&mut self, id: &str) -> Option<LegalHold> {
        let index = self.active.iter().position(|hold| hold.id == id)?;
        Some(self.active.remove(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(partition: u32, start_offset: u64, end_offset: Option<u64>) -> HoldRange {
        HoldRange::Offsets {
            partition,
            start_offset,
            end_offset,
        }
    }

    #[test]
    fn ids_are_never_reused() {
        let mut holds = Holds::default();
        let first = holds.place(offsets(0, 5, None), "case 1", 1, None).unwrap();
        let second = holds.place(offsets(0, 9, None), "case 2", 2, None).unwrap();
        assert_eq!((first.id.as_str(), second.id.as_str()), ("1", "2"));
        assert_eq!(holds.release("2"), Some(second));
        assert_eq!(holds.release("2"), None);
        let third = holds.place(offsets(0, 1, None), "case 3", 3, None).unwrap();
        assert_eq!(third.id, "3");
    }

    #[test]
    fn bad_holds_are_refused() {
        let mut holds = Holds::default();
        let backwards = holds.place(offsets(0, 5, Some(4)), "x", 1, None);
        assert_eq!(backwards, Err(InvalidHold::Backwards));
        let time = HoldRange::Time {
            start_ms: 10,
            end_ms: Some(9),
        };
        assert_eq!(holds.place(time, "x", 1, None), Err(InvalidHold::Backwards));
        assert_eq!(
            holds.place(offsets(0, 1, None), " ", 1, None),
            Err(InvalidHold::Reason)
        );
        let long = "x".repeat(MAX_REASON_BYTES + 1);
        assert_eq!(
            holds.place(offsets(0, 1, None), &long, 1, None),
            Err(InvalidHold::Reason)
        );
        assert!(holds.active.is_empty());
    }

    #[test]
    fn offset_holds_concern_their_partition_and_time_holds_all() {
        let mut holds = Holds::default();
        holds.place(offsets(1, 7, Some(9)), "a", 1, None).unwrap();
        let time = HoldRange::Time {
            start_ms: 100,
            end_ms: None,
        };
        holds.place(time, "b", 1, None).unwrap();
        assert_eq!(holds.held_from(0), vec![HeldFrom::Time(100)]);
        assert_eq!(
            holds.held_from(1),
            vec![HeldFrom::Offset(7), HeldFrom::Time(100)]
        );
    }

    #[test]
    fn segments_are_covered_where_the_ranges_meet() {
        let range = offsets(0, 10, Some(19));
        assert!(!range.covers_segment(0, 0, 9, Some(5)));
        assert!(range.covers_segment(0, 5, 10, Some(5)));
        assert!(range.covers_segment(0, 19, 30, Some(5)));
        assert!(!range.covers_segment(0, 20, 30, Some(5)));
        assert!(!range.covers_segment(1, 10, 19, Some(5)));
        assert!(offsets(0, 10, None).covers_segment(0, 500, 600, None));
        let time = HoldRange::Time {
            start_ms: 100,
            end_ms: Some(200),
        };
        assert!(!time.covers_segment(3, 0, 9, Some(99)));
        assert!(time.covers_segment(3, 0, 9, Some(100)));
        assert!(!time.covers_segment(3, 0, 9, None));
    }
}

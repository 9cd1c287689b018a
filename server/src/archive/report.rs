//! What `strata verify` found: per partition, what the archive holds and every problem, each
//! naming the object and the offsets it concerns.

use serde::Serialize;

/// One problem: exit status 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The object (key relative to the store's prefix) the problem is in.
    pub object: String,
    /// The offsets it concerns, `[first, last]`, when it concerns records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offsets: Option<(u64, u64)>,
    /// What is wrong.
    pub problem: String,
}

impl Failure {
    /// A problem in `object`.
    pub fn new(object: impl Into<String>, problem: impl Into<String>) -> Failure {
        Failure {
            object: object.into(),
            offsets: None,
            problem: problem.into(),
        }
    }

    /// The same, about records `first..=last`.
    pub fn at(mut self, first: u64, last: u64) -> Failure {
        self.offsets = Some((first, last));
        self
    }
}

/// A deletion entry of the log, as the report lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeletionSummary {
    /// First offset removed.
    pub from_offset: u64,
    /// First offset kept.
    pub to_offset: u64,
    /// Why.
    pub reason: String,
    /// The rule.
    pub policy: String,
    /// When (ms since the epoch).
    pub time_ms: i64,
}

/// One partition.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PartitionReport {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// `ok` or `failed`.
    pub status: &'static str,
    /// Entries in its transparency log.
    pub tree_size: u64,
    /// First offset the archive still holds.
    pub log_start_offset: u64,
    /// Offset after the last one it holds.
    pub next_offset: u64,
    /// Records it holds.
    pub records: u64,
    /// Live segments.
    pub segments: u64,
    /// Bytes of record data in them.
    pub bytes: u64,
    /// Earliest record timestamp (ms), when it holds any.
    pub first_timestamp: Option<i64>,
    /// Latest record timestamp (ms).
    pub last_timestamp: Option<i64>,
    /// Every deletion entry.
    pub deletions: Vec<DeletionSummary>,
    /// Problems.
    pub failures: Vec<Failure>,
    /// Things worth knowing that are not problems (leftovers of interrupted uploads).
    pub warnings: Vec<String>,
}

/// The whole bucket.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// True when nothing failed.
    pub ok: bool,
    /// Where the trusted keys came from: `given` (command line) or `bucket` (weaker: whoever
    /// can write the bucket can replace them).
    pub key_source: &'static str,
    /// The keys checkpoints were checked against.
    pub keys: Vec<String>,
    /// Partitions.
    pub partitions: Vec<PartitionReport>,
    /// Problems outside any partition (format files, keys, topic metadata).
    pub failures: Vec<Failure>,
    /// Notes outside any partition.
    pub warnings: Vec<String>,
    /// Objects read.
    pub objects_read: u64,
    /// Bytes read.
    pub bytes_read: u64,
}

impl Report {
    /// Sets `ok` and each partition's status from the failures found.
    pub fn settle(&mut self) {
        for partition in &mut self.partitions {
            partition.status = if partition.failures.is_empty() {
                "ok"
            } else {
                "failed"
            };
        }
        self.ok = self.failures.is_empty() && self.partitions.iter().all(|p| p.failures.is_empty());
    }

    /// Every failure, with the partition it belongs to.
    pub fn all_failures(&self) -> impl Iterator<Item = (Option<(&str, u32)>, &Failure)> {
        self.failures
            .iter()
            .map(|f| (None, f))
            .chain(self.partitions.iter().flat_map(|p| {
                p.failures
                    .iter()
                    .map(move |f| (Some((p.topic.as_str(), p.partition)), f))
            }))
    }

    /// The human summary.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for p in &self.partitions {
            out.push_str(&format!(
                "{:<6} {}/{}: {} records, offsets {}..{}, {} segments, {} log entries, {} deletions\n",
                p.status, p.topic, p.partition, p.records, p.log_start_offset, p.next_offset,
                p.segments, p.tree_size, p.deletions.len()
            ));
        }
        for (place, failure) in self.all_failures() {
            let place = place.map_or(String::new(), |(t, p)| format!("{t}/{p}: "));
            let offsets = failure
                .offsets
                .map_or(String::new(), |(a, b)| format!(" (offsets {a}..={b})"));
            out.push_str(&format!(
                "FAILED {place}{}{offsets}: {}\n",
                failure.object, failure.problem
            ));
        }
        let partitions_failed = self
            .partitions
            .iter()
            .filter(|p| !p.failures.is_empty())
            .count();
        out.push_str(&format!(
            "{}: {} partitions ({} failed), {} objects, {} bytes read; keys from {}\n",
            if self.ok { "verified" } else { "NOT VERIFIED" },
            self.partitions.len(),
            partitions_failed,
            self.objects_read,
            self.bytes_read,
            self.key_source
        ));
        out
    }
}

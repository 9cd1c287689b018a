//! What the broker counts for `/metrics`: records and bytes appended per topic, and how long
//! polls end. Topic labels are bounded by the number of topics and can be turned off
//! (`metrics_topic_labels = false` folds every topic into `topic=""`) for servers with very many.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// A topic, or `""` when per-topic labels are off.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct TopicLabel {
    /// Topic name.
    pub topic: String,
}

/// How a long poll ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct WakeLabel {
    /// `data` (records arrived), `timeout` or `shutdown`.
    pub reason: &'static str,
}

/// The outcome of a read-audit entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct AuditLabel {
    /// `served` or `denied`.
    pub outcome: &'static str,
}

/// The broker's counters; the metrics floor registers clones (they share their values).
#[derive(Debug, Clone, Default)]
pub struct BrokerStats {
    /// Records appended (duplicates of idempotent retries excluded).
    pub appended_records: Family<TopicLabel, Counter>,
    /// Record-batch bytes appended.
    pub appended_bytes: Family<TopicLabel, Counter>,
    /// Long polls (fetches with `max_wait_ms`) by how they ended.
    pub long_poll_wakeups: Family<WakeLabel, Counter>,
    /// Read-audit entries written, by outcome.
    pub audit_entries: Family<AuditLabel, Counter>,
    /// Read-audit entries that could not be written, by outcome (a served read was then
    /// refused with `audit_unavailable`).
    pub audit_failures: Family<AuditLabel, Counter>,
    per_topic: bool,
    counting: bool,
}

impl BrokerStats {
    /// Counters (`counting` off: none are updated) with per-topic labels, or one series for
    /// all topics.
    pub fn new(counting: bool, per_topic: bool) -> Self {
        Self {
            per_topic,
            counting,
            ..Self::default()
        }
    }

    /// Counts how a long poll ended.
    pub fn woke(&self, reason: &'static str) {
        if self.counting {
            self.long_poll_wakeups
                .get_or_create(&WakeLabel { reason })
                .inc();
        }
    }

    /// Counts `entries` read-audit entries of one outcome, written or not.
    pub fn audited(&self, outcome: &'static str, entries: u64, written: bool) {
        if !self.counting {
            return;
        }
        let family = if written {
            &self.audit_entries
        } else {
            &self.audit_failures
        };
        family
            .get_or_create(&AuditLabel { outcome })
            .inc_by(entries);
    }

    /// Counts an append to `topic`.
    pub fn appended(&self, topic: &str, records: u64, bytes: u64) {
        if !self.counting {
            return;
        }
        let label = TopicLabel {
            topic: if self.per_topic {
                topic.to_string()
            } else {
                String::new()
            },
        };
        self.appended_records.get_or_create(&label).inc_by(records);
        self.appended_bytes.get_or_create(&label).inc_by(bytes);
    }
}

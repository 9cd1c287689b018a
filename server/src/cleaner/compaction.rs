//! Key compaction of every topic whose `cleanup_policy` contains `compact`: one pass per
//! partition when its dirty ratio or due tombstones call for it (the engine decides, see
//! [`crate::log::compaction`]); partitions are cleaned one after another so the shared I/O
//! throttle bounds the whole cleaner.

use crate::clock::Clock;
use crate::log::compaction::throttle::Throttle;
use crate::log::compaction::{CompactionError, CompactionPolicy};
use crate::topics::catalog::Catalog;
use crate::topics::config::TopicConfig;

/// What one compaction sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionSweep {
    /// Partitions where a pass ran.
    pub partitions_compacted: usize,
    /// Partitions where a pass failed.
    pub failures: usize,
}

/// The engine's view of a topic's compaction settings.
pub fn policy_of(config: &TopicConfig) -> CompactionPolicy {
    CompactionPolicy {
        delete_retention_ms: config.delete_retention_ms,
        min_compaction_lag_ms: config.min_compaction_lag_ms,
        max_compaction_lag_ms: config.max_compaction_lag_ms,
        min_cleanable_dirty_ratio: config.min_cleanable_dirty_ratio,
        max_map_keys: crate::log::compaction::DEFAULT_MAX_MAP_KEYS,
    }
}

/// One pass over every compacted topic.
pub async fn compact_topics(
    catalog: &Catalog,
    clock: &dyn Clock,
    throttle: &Throttle,
) -> CompactionSweep {
    let mut sweep = CompactionSweep::default();
    for topic in catalog.list() {
        let config = topic.config();
        if !config.cleanup_policy.compacts() {
            continue;
        }
        let policy = policy_of(&config);
        for (number, partition) in topic.partitions().iter().enumerate() {
            match partition.compact(&policy, clock.now_ms(), throttle).await {
                Ok(report) if report.ran => {
                    tracing::info!(
                        topic = topic.name(),
                        partition = number,
                        segments = report.segments_rewritten,
                        records_removed = report.records_removed,
                        bytes_reclaimed = report.bytes_reclaimed,
                        "compacted"
                    );
                    sweep.partitions_compacted += 1;
                }
                Ok(_) => {}
                Err(CompactionError::Disabled { .. }) => {}
                Err(error) => {
                    tracing::warn!(topic = topic.name(), partition = number, %error, "compaction failed");
                    sweep.failures += 1;
                }
            }
        }
    }
    sweep
}

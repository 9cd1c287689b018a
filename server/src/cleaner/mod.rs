//! Background cleaning of topics: time and size retention (`cleanup_policy` containing
//! `delete`) and key compaction (containing `compact`), both on one timer so a
//! `compact,delete` topic is never trimmed and compacted at the same moment.

pub mod compaction;
pub mod retention;

use std::sync::Arc;

use crate::clock::Clock;
use crate::log::compaction::throttle::Throttle;
use crate::topics::catalog::Catalog;

/// Runs retention, then compaction, every `interval_ms` until the task is dropped.
pub async fn run(
    catalog: Arc<Catalog>,
    clock: Arc<dyn Clock>,
    interval_ms: u64,
    throttle: Arc<Throttle>,
) {
    let mut ticker = tokio::time::interval(std::time::Duration::from_millis(interval_ms.max(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        retention::enforce_retention(&catalog, clock.as_ref()).await;
        compaction::compact_topics(&catalog, clock.as_ref(), &throttle).await;
    }
}

//! Time and size retention: whole closed segments leave once their newest record is older than
//! `retention_ms`, and oldest-first while a partition holds more than `retention_bytes`. The log
//! start offset moves forward durably (the same path as delete-records), the active segment is
//! never deleted, and readers holding a deleted segment finish on their mapping. Because idle
//! active segments roll by themselves after `segment_ms`, retention progresses on topics that
//! stopped receiving writes.

use crate::clock::Clock;
use crate::topics::catalog::Catalog;

/// What one retention pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// Partitions whose log start moved.
    pub partitions_trimmed: usize,
}

/// One pass over every topic whose cleanup policy deletes.
pub async fn enforce_retention(catalog: &Catalog, clock: &dyn Clock) -> RetentionReport {
    let now = clock.now_ms();
    let mut report = RetentionReport::default();
    for topic in catalog.list() {
        let config = topic.config();
        // Tiered topics: the tiering sweep applies local and total retention, because a local
        // segment may only go once the bucket holds it.
        if !config.cleanup_policy.deletes()
            || config.remote_storage_enable
            || (config.retention_ms < 0 && config.retention_bytes < 0)
        {
            continue;
        }
        for (number, partition) in topic.partitions().iter().enumerate() {
            let Some(cut) =
                partition.retention_cut(config.retention_ms, config.retention_bytes, now)
            else {
                continue;
            };
            match partition.delete_records(cut).await {
                Ok(start) => {
                    tracing::info!(
                        topic = topic.name(),
                        partition = number,
                        log_start_offset = start,
                        "retention"
                    );
                    report.partitions_trimmed += 1;
                }
                Err(error) => {
                    tracing::warn!(topic = topic.name(), partition = number, %error, "retention failed");
                }
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bytes::Bytes;
    use serde_json::Value;

    use std::sync::Arc;

    use super::*;
    use crate::clock::ManualClock;
    use crate::io::{Io, IoBackendChoice};
    use crate::log::batch::{BatchOptions, NewRecord, encode_batch};
    use crate::log::{Acks, RecordBatch};
    use crate::names::TopicName;

    fn batch(timestamp: i64) -> RecordBatch {
        let record = NewRecord {
            timestamp,
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::from(vec![1u8; 400])),
            headers: Vec::new(),
        };
        RecordBatch::decode_exact(encode_batch(&BatchOptions::default(), &[record]).unwrap())
            .unwrap()
    }

    async fn catalog_with(
        dir: &std::path::Path,
        clock: Arc<ManualClock>,
        configs: &[(&str, Value)],
    ) -> Catalog {
        let (io, _) = Io::start(IoBackendChoice::Sync, dir).unwrap();
        let catalog = Catalog::open(dir, io, clock, 8).await.unwrap();
        let configs: BTreeMap<String, Value> = configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        catalog
            .create(&TopicName::parse("t").unwrap(), 1, &configs)
            .await
            .unwrap();
        catalog
    }

    #[tokio::test]
    async fn segments_older_than_retention_ms_go_and_the_active_segment_stays() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_000_000);
        let configs = [
            ("retention_ms", Value::from(10_000)),
            ("segment_bytes", Value::from(2048)),
        ];
        let catalog = catalog_with(dir.path(), clock.clone(), &configs).await;
        let partition = catalog.get("t").unwrap().partition(0).unwrap();
        for i in 0..20 {
            partition
                .append(vec![batch(1_000_000 + i * 1000)], Acks::All)
                .await
                .unwrap();
        }
        let before = partition.segments();
        assert!(before.len() > 3);
        assert_eq!(
            enforce_retention(&catalog, clock.as_ref())
                .await
                .partitions_trimmed,
            0
        );
        clock.set(1_000_000 + 25_000);
        enforce_retention(&catalog, clock.as_ref()).await;
        let after = partition.segments();
        let start = partition.offsets().log_start_offset;
        assert!(start > 0, "old segments were deleted");
        let cutoff = 1_000_000 + 25_000 - 10_000;
        for kept in &after[..after.len() - 1] {
            assert!(
                kept.max_timestamp.unwrap() >= cutoff,
                "a kept closed segment is not expired"
            );
        }
        for gone in before.iter().filter(|s| s.base_offset < start) {
            assert!(
                gone.max_timestamp.unwrap() < cutoff,
                "only expired segments were deleted"
            );
        }
        // Everything is too old now, yet the active segment survives.
        clock.advance(1_000_000);
        enforce_retention(&catalog, clock.as_ref()).await;
        let last = partition.segments();
        assert_eq!(last.len(), 1, "only the active segment is left");
        assert_eq!(last[0].base_offset, before.last().unwrap().base_offset);
        assert_eq!(partition.offsets().log_start_offset, last[0].base_offset);
        assert_eq!(partition.offsets().high_watermark, 20);
        // The new log start survives a restart.
        catalog.close().await;
        drop((partition, catalog));
        let (io, _) = Io::start(IoBackendChoice::Sync, dir.path()).unwrap();
        let reopened = Catalog::open(dir.path(), io, clock, 8).await.unwrap();
        let partition = reopened.get("t").unwrap().partition(0).unwrap();
        assert_eq!(partition.offsets().log_start_offset, last[0].base_offset);
    }

    #[tokio::test]
    async fn the_oldest_segments_go_while_the_partition_exceeds_retention_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_000_000);
        let configs = [
            ("retention_bytes", Value::from(3000)),
            ("segment_bytes", Value::from(1024)),
        ];
        let catalog = catalog_with(dir.path(), clock.clone(), &configs).await;
        let partition = catalog.get("t").unwrap().partition(0).unwrap();
        for _ in 0..20 {
            partition
                .append(vec![batch(1_000_000)], Acks::All)
                .await
                .unwrap();
        }
        enforce_retention(&catalog, clock.as_ref()).await;
        let size: u64 = partition.segments().iter().map(|s| s.durable_size).sum();
        assert!(size <= 3000, "size {size} is within retention_bytes");
        assert!(partition.offsets().log_start_offset > 0);
        assert_eq!(
            partition.offsets().high_watermark,
            20,
            "nothing new is lost"
        );
    }

    #[tokio::test]
    async fn compacted_topics_and_unlimited_retention_keep_everything() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_000_000);
        let configs = [
            ("retention_ms", Value::from(-1)),
            ("segment_bytes", Value::from(1024)),
        ];
        let catalog = catalog_with(dir.path(), clock.clone(), &configs).await;
        let partition = catalog.get("t").unwrap().partition(0).unwrap();
        for _ in 0..10 {
            partition.append(vec![batch(1)], Acks::All).await.unwrap();
        }
        clock.advance(i64::MAX / 4);
        enforce_retention(&catalog, clock.as_ref()).await;
        assert_eq!(partition.offsets().log_start_offset, 0);
    }
}

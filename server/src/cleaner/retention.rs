//! Time and size retention: whole closed segments leave once their newest record is older than
//! `retention_ms`, and oldest-first while the partition keeps at least `retention_bytes` without
//! them (Kafka's rule). The log
//! start offset moves forward durably (the same path as delete-records), the active segment is
//! never deleted, and readers holding a deleted segment finish on their mapping. Because idle
//! active segments roll by themselves after `segment_ms`, retention progresses on topics that
//! stopped receiving writes.

use crate::clock::Clock;
use crate::log::Partition;
use crate::log::retention::{HeldFrom, hold_floor};
use crate::log::segments::SegmentMap;
use crate::topics::catalog::Catalog;

/// The lowest offset legal holds keep in a local partition.
fn held_floor(held: &[HeldFrom], partition: &Partition) -> Option<u64> {
    let start = partition.offsets().log_start_offset;
    hold_floor(held, || {
        SegmentMap::new(&partition.segment_spans(), start, &[])
    })
}

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
            let number = u32::try_from(number).unwrap_or(u32::MAX);
            let floor = held_floor(&topic.held_from(number), partition);
            let Some(cut) = partition.retention_cut_below(
                config.retention_ms,
                config.retention_bytes,
                now,
                floor.unwrap_or(u64::MAX),
            ) else {
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
    use crate::topics::catalog::CatalogError;

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
    async fn the_oldest_segments_go_while_the_rest_keeps_retention_bytes() {
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
        let segments = partition.segments();
        let size: u64 = segments.iter().map(|s| s.durable_size).sum();
        // As Kafka: at least retention_bytes stays, and no segment that could go stayed.
        assert!(size >= 3000, "size {size} keeps retention_bytes");
        assert!(
            size - segments[0].durable_size < 3000,
            "size {size}: the oldest segment could have gone"
        );
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

    /// Segments of one 400-byte record each (1024-byte segments hold two), stamped `timestamp`.
    async fn filled(dir: &std::path::Path, clock: Arc<ManualClock>, records: i64) -> Catalog {
        let configs = [
            ("retention_ms", Value::from(10_000)),
            ("segment_bytes", Value::from(1024)),
        ];
        let catalog = catalog_with(dir, clock, &configs).await;
        let partition = catalog.get("t").unwrap().partition(0).unwrap();
        for i in 0..records {
            partition
                .append(vec![batch(1_000_000 + i * 1000)], Acks::All)
                .await
                .unwrap();
        }
        catalog
    }

    #[tokio::test]
    async fn an_offset_hold_stops_retention_at_its_segment_until_released() {
        use crate::topics::holds::HoldRange;
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_000_000);
        let catalog = filled(dir.path(), clock.clone(), 20).await;
        let partition = catalog.get("t").unwrap().partition(0).unwrap();
        let range = HoldRange::Offsets {
            partition: 0,
            start_offset: 7,
            end_offset: Some(8),
        };
        let hold = catalog
            .place_hold("t", range, "case 1", None)
            .await
            .unwrap();
        clock.advance(1_000_000);
        enforce_retention(&catalog, clock.as_ref()).await;
        let start = partition.offsets().log_start_offset;
        assert!(
            start > 0 && start <= 7,
            "log start {start} stops at the held offset 7"
        );
        let holding = partition.segments();
        let first = holding.first().unwrap();
        assert!(
            first.base_offset <= 7 && first.next_offset > 7,
            "offset 7 is still stored"
        );
        // Released, the next pass removes everything retention allows.
        catalog.release_hold("t", &hold.id).await.unwrap();
        enforce_retention(&catalog, clock.as_ref()).await;
        assert_eq!(
            partition.segments().len(),
            1,
            "only the active segment is left"
        );
    }

    #[tokio::test]
    async fn a_time_hold_keeps_every_segment_from_its_start_time_and_survives_a_restart() {
        use crate::topics::holds::HoldRange;
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_000_000);
        let catalog = filled(dir.path(), clock.clone(), 20).await;
        let range = HoldRange::Time {
            start_ms: 1_000_000 + 12 * 1000,
            end_ms: None,
        };
        catalog
            .place_hold("t", range, "case 2", None)
            .await
            .unwrap();
        catalog.close().await;
        drop(catalog);
        let (io, _) = Io::start(IoBackendChoice::Sync, dir.path()).unwrap();
        let catalog = Catalog::open(dir.path(), io, clock.clone(), 8)
            .await
            .unwrap();
        assert_eq!(catalog.get("t").unwrap().legal_holds().len(), 1);
        let partition = catalog.get("t").unwrap().partition(0).unwrap();
        clock.advance(1_000_000);
        enforce_retention(&catalog, clock.as_ref()).await;
        let start = partition.offsets().log_start_offset;
        assert!(
            start > 0 && start <= 12,
            "log start {start} keeps the record stamped at 12 s"
        );
        // Deleting a held topic is refused.
        assert!(matches!(
            catalog.delete("t").await,
            Err(CatalogError::Held { .. })
        ));
    }
}

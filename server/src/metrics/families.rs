//! Every metric family of a scrape, with its name, help and unit. Names follow Prometheus'
//! conventions: `strata_` prefix, base units in the name (`_seconds`, `_bytes`), `_total` on
//! counters (added by the encoder). Labels are bounded: route templates, error codes, formats,
//! and topic/partition/group only where `metrics_topic_labels` allows.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::Exporter;
use crate::broker::observe::GroupView;
use crate::http::AppState;
use crate::io::IoOp;
use crate::log::stats::WRITER;
use crate::tiering::stats::TieringStats;
use crate::topics::catalog::Topic;

/// What one scrape reads.
pub(super) struct Sources<'a> {
    pub(super) state: &'a AppState,
    pub(super) exporter: &'a Exporter,
    pub(super) topics: &'a [Arc<Topic>],
    pub(super) groups: &'a [GroupView],
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PartitionLabels {
    topic: String,
    partition: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct GroupLabels {
    group: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct GroupPartitionLabels {
    group: String,
    topic: String,
    partition: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OpLabels {
    op: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
    io_backend: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Registers every family into `root` (process metrics unprefixed, the rest under `strata_`).
pub(super) fn register(root: &mut Registry, sources: &Sources<'_>) {
    super::process::register(root, sources.exporter);
    let registry = root.sub_registry_with_prefix("strata");
    http(registry, sources);
    produce(registry, sources);
    storage(registry, sources);
    groups(registry, sources);
    tiering(registry, sources);
}

fn counter(value: u64) -> Counter {
    let counter = Counter::default();
    counter.inc_by(value);
    counter
}

/// A gauge holding `value` (saturating at `i64::MAX`).
pub(super) fn gauge(value: u64) -> Gauge {
    let gauge = Gauge::default();
    gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
    gauge
}

fn http(registry: &mut Registry, sources: &Sources<'_>) {
    let stats = &sources.state.http_stats;
    registry.register(
        "http_requests",
        "HTTP requests answered, by route template, method and status",
        stats.requests.clone(),
    );
    registry.register_with_unit(
        "http_request_duration",
        "Time from request to response head (streams: until the stream starts)",
        Unit::Seconds,
        stats.duration.clone(),
    );
    registry.register(
        "http_requests_in_flight",
        "HTTP requests being handled",
        stats.in_flight.clone(),
    );
    registry.register(
        "http_errors",
        "Error answers by stable error code (rejected produces and fetches included)",
        stats.errors.clone(),
    );
    registry.register(
        "open_streams",
        "Open SSE streams and long polls (fetches waiting with max_wait_ms)",
        gauge(sources.state.broker.open_streams() as u64),
    );
    registry.register(
        "fetch_records",
        "Records served by fetches, by answer format (json, ndjson, sse, record_batches, member)",
        stats.fetched_records.clone(),
    );
    registry.register_with_unit(
        "fetch",
        "Bytes served by fetches: stored batch bytes for record_batches, key and value bytes otherwise",
        Unit::Bytes,
        stats.fetched_bytes.clone(),
    );
    let broker = sources.state.broker.stats();
    registry.register(
        "long_poll_wakeups",
        "Long polls by how they ended: data arrived, timeout, shutdown",
        broker.long_poll_wakeups.clone(),
    );
    registry.register(
        "read_audit_entries",
        "Read-audit entries written to __audit_reads, by outcome (served, denied)",
        broker.audit_entries.clone(),
    );
    registry.register(
        "read_audit_failures",
        "Read-audit entries that could not be written, by outcome; each served one refused its \
         read with audit_unavailable",
        broker.audit_failures.clone(),
    );
}

fn produce(registry: &mut Registry, sources: &Sources<'_>) {
    let broker = sources.state.broker.stats();
    registry.register(
        "produce_records",
        "Records appended by produce requests, by topic",
        broker.appended_records.clone(),
    );
    registry.register_with_unit(
        "produce",
        "Record-batch bytes appended by produce requests, by topic",
        Unit::Bytes,
        broker.appended_bytes.clone(),
    );
    registry.register_with_unit(
        "append_stage_duration",
        "Time per stage of an append: queue (waiting for its round), write, fsync, or \
         write_fsync (write and fdatasync submitted together for acks=all rounds)",
        Unit::Seconds,
        WRITER.stage_seconds.clone(),
    );
    registry.register(
        "append_round_requests",
        "Append requests per group-commit round (one fdatasync)",
        WRITER.round_requests.clone(),
    );
    registry.register_with_unit(
        "append_round",
        "Bytes per group-commit round",
        Unit::Bytes,
        WRITER.round_bytes.clone(),
    );
    registry.register(
        "append_requests",
        "Append requests by acknowledgement (all: after fdatasync, leader: after the write)",
        WRITER.requests.clone(),
    );
    registry.register(
        "append_duplicate_batches",
        "Batches answered as duplicates of batches already stored (idempotent retries)",
        WRITER.duplicates.clone(),
    );
    registry.register(
        "append_streams",
        "Large raw appends streamed into the segment as they arrived, by how their lease \
         ended (committed, rewritten, revoked, abandoned, refused)",
        WRITER.streams.clone(),
    );
}

fn storage(registry: &mut Registry, sources: &Sources<'_>) {
    io(registry, sources);
    let per_partition = sources.state.config.metrics_topic_labels;
    let log_start = Family::<PartitionLabels, Gauge>::default();
    let high_watermark = Family::<PartitionLabels, Gauge>::default();
    let log_end = Family::<PartitionLabels, Gauge>::default();
    let size = Family::<PartitionLabels, Gauge>::default();
    let segments = Family::<PartitionLabels, Gauge>::default();
    let dirty = Family::<PartitionLabels, FloatGauge>::default();
    let cleaner_runs = Family::<PartitionLabels, Counter>::default();
    let reclaimed = Family::<PartitionLabels, Counter>::default();
    let (mut poisoned, mut partitions, mut truncated) = (0u64, 0u64, 0u64);
    for topic in sources.topics {
        let compacts = topic.config().cleanup_policy.compacts();
        for (number, partition) in topic.partitions().iter().enumerate() {
            partitions += 1;
            poisoned += u64::from(partition.poisoned().is_some());
            truncated += partition.recovery_report().truncated_bytes;
            if !per_partition {
                continue;
            }
            let labels = PartitionLabels {
                topic: topic.name().to_string(),
                partition: u32::try_from(number).unwrap_or(u32::MAX),
            };
            let offsets = partition.offsets();
            let snapshots = partition.segments();
            let bytes: u64 = snapshots.iter().map(|s| s.durable_size).sum();
            for (family, value) in [
                (&log_start, offsets.log_start_offset),
                (&high_watermark, offsets.high_watermark),
                (&log_end, offsets.log_end_offset),
                (&size, bytes),
                (&segments, snapshots.len() as u64),
            ] {
                family
                    .get_or_create(&labels)
                    .set(i64::try_from(value).unwrap_or(i64::MAX));
            }
            if compacts {
                let status = partition.cleaner_status();
                dirty.get_or_create(&labels).set(status.dirty_ratio);
                cleaner_runs.get_or_create(&labels).inc_by(status.runs);
                reclaimed
                    .get_or_create(&labels)
                    .inc_by(status.bytes_reclaimed);
            }
        }
    }
    for (name, help, family) in [
        (
            "partition_log_start_offset",
            "First offset readers can read (local log)",
            log_start,
        ),
        (
            "partition_high_watermark",
            "Offset after the last durable record",
            high_watermark,
        ),
        (
            "partition_log_end_offset",
            "Offset after the last written record",
            log_end,
        ),
        ("partition_segments", "Local segments", segments),
    ] {
        registry.register(name, help, family);
    }
    registry.register_with_unit(
        "partition_size",
        "Bytes of local segments",
        Unit::Bytes,
        size,
    );
    registry.register(
        "cleaner_dirty_ratio",
        "Share of a compacted partition not yet cleaned",
        dirty,
    );
    registry.register("cleaner_runs", "Compaction passes", cleaner_runs);
    {
        use crate::log::compaction::throttle::{THROTTLE_WAIT_NANOS, THROTTLE_WAITS};
        use std::sync::atomic::Ordering::Relaxed;
        registry.register(
            "cleaner_throttle_waits",
            "Times the cleaner was held back by cleaner_io_max_bytes_per_second",
            counter(THROTTLE_WAITS.load(Relaxed)),
        );
        let waited: Counter<f64, AtomicU64> = Counter::default();
        waited.inc_by(THROTTLE_WAIT_NANOS.load(Relaxed) as f64 / 1e9);
        registry.register_with_unit(
            "cleaner_throttle_wait",
            "Time the cleaner was held back by its throttle",
            Unit::Seconds,
            waited,
        );
    }
    registry.register_with_unit(
        "cleaner_reclaimed",
        "Bytes removed by compaction",
        Unit::Bytes,
        reclaimed,
    );
    registry.register(
        "partitions",
        "Partitions open on this server",
        gauge(partitions),
    );
    registry.register(
        "poisoned_partitions",
        "Partitions refusing appends after a failed fdatasync (restart to recover)",
        gauge(poisoned),
    );
    let recovery: FloatGauge = Gauge::default();
    recovery.set(sources.exporter.recovery.as_secs_f64());
    registry.register_with_unit(
        "recovery_duration",
        "Time the last start took to open and recover every partition",
        Unit::Seconds,
        recovery,
    );
    registry.register_with_unit(
        "recovery_truncated",
        "Torn or corrupt bytes cut off by recovery at the last start",
        Unit::Bytes,
        gauge(truncated),
    );
}

fn io(registry: &mut Registry, sources: &Sources<'_>) {
    let io = &sources.exporter.io;
    let operations = Family::<OpLabels, Counter>::default();
    for op in IoOp::ALL {
        operations
            .get_or_create(&OpLabels { op: op.as_str() })
            .inc_by(io.ops(op));
    }
    registry.register(
        "io_operations",
        "Disk operations completed, by operation",
        operations,
    );
    let errors = Family::<OpLabels, Counter>::default();
    for (op, count) in io.errors_by_op() {
        errors.get_or_create(&OpLabels { op }).inc_by(count);
    }
    registry.register(
        "io_errors",
        "Disk operations that failed, by operation",
        errors,
    );
    registry.register_with_unit(
        "io_written",
        "Bytes written to data files",
        Unit::Bytes,
        counter(io.bytes_written()),
    );
    registry.register_with_unit(
        "io_read",
        "Bytes read from data files through the I/O layer",
        Unit::Bytes,
        counter(io.bytes_read()),
    );
    registry.register_with_unit(
        "read_zero_copy",
        "Record bytes served straight from the page cache (mmap), never copied in user space",
        Unit::Bytes,
        counter(io.bytes_zero_copy()),
    );
    registry.register_with_unit(
        "read_copied",
        "Record bytes served by copying (reads the zero-copy path could not take)",
        Unit::Bytes,
        counter(io.bytes_copied()),
    );
    registry.register(
        "open_file_limit_hits",
        "Disk operations refused by the open-file limit (EMFILE, ENFILE)",
        counter(io.open_file_limit_hits()),
    );
    let build = Family::<BuildLabels, Gauge>::default();
    build
        .get_or_create(&BuildLabels {
            version: crate::build_info::VERSION,
            commit: crate::build_info::GIT_COMMIT,
            io_backend: sources.exporter.io_backend.clone(),
        })
        .set(1);
    registry.register("build_info", "The running binary (value 1)", build);
}

fn groups(registry: &mut Registry, sources: &Sources<'_>) {
    let per_partition = sources.state.config.metrics_topic_labels;
    let members = Family::<GroupLabels, Gauge>::default();
    let generation = Family::<GroupLabels, Gauge>::default();
    let lag_records = Family::<GroupPartitionLabels, Gauge>::default();
    let lag_seconds = Family::<GroupPartitionLabels, FloatGauge>::default();
    let max_lag_seconds = Family::<GroupLabels, FloatGauge>::default();
    let total_lag = Family::<GroupLabels, Gauge>::default();
    for view in sources.groups {
        let group = GroupLabels {
            group: view.group.clone(),
        };
        if let Some(description) = &view.description {
            members
                .get_or_create(&group)
                .set(description.members.len() as i64);
            generation
                .get_or_create(&group)
                .set(i64::from(description.generation));
        }
        let mut total = 0u64;
        let mut oldest_ms = 0i64;
        for lag in &view.lag {
            total += lag.lag_records;
            oldest_ms = oldest_ms.max(lag.lag_ms);
            if per_partition {
                let labels = GroupPartitionLabels {
                    group: view.group.clone(),
                    topic: lag.partition.0.clone(),
                    partition: lag.partition.1,
                };
                lag_records
                    .get_or_create(&labels)
                    .set(i64::try_from(lag.lag_records).unwrap_or(i64::MAX));
                lag_seconds
                    .get_or_create(&labels)
                    .set(lag.lag_ms as f64 / 1000.0);
            }
        }
        total_lag
            .get_or_create(&group)
            .set(i64::try_from(total).unwrap_or(i64::MAX));
        max_lag_seconds
            .get_or_create(&group)
            .set(oldest_ms as f64 / 1000.0);
    }
    registry.register("group_members", "Members of a consumer group", members);
    registry.register(
        "group_generation",
        "Generation of a consumer group (it grows by one per rebalance)",
        generation,
    );
    registry.register(
        "group_lag_records",
        "Records between a group's position (committed offset, or its auto_offset_reset \
         start) and the high watermark, per partition",
        lag_records,
    );
    registry.register_with_unit(
        "group_lag",
        "Age of the oldest record a group has not consumed, per partition",
        Unit::Seconds,
        lag_seconds,
    );
    registry.register(
        "group_lag_records_sum",
        "Records a group has not consumed, all partitions together",
        total_lag,
    );
    registry.register_with_unit(
        "group_max_lag",
        "Age of the oldest record a group has not consumed, over its partitions",
        Unit::Seconds,
        max_lag_seconds,
    );
    let (session, poll) = sources.state.broker.evictions();
    let evictions = Family::<ReasonLabels, Counter>::default();
    for (reason, count) in [("session_timeout", session), ("max_poll_interval", poll)] {
        evictions
            .get_or_create(&ReasonLabels { reason })
            .inc_by(count);
    }
    registry.register("group_evictions", "Members evicted, by reason", evictions);
}

fn tiering(registry: &mut Registry, sources: &Sources<'_>) {
    let broker = &sources.state.broker;
    let tiering = broker.tiering();
    let stats = tiering.stats();
    for (name, help, value) in [
        (
            "tiering_uploaded_segments",
            "Segments uploaded to the bucket",
            &stats.segments_uploaded,
        ),
        (
            "tiering_sync_failures",
            "Partition syncs that failed (retried next sweep)",
            &stats.sync_failures,
        ),
        (
            "tiering_manifest_writes",
            "Manifests written",
            &stats.manifest_writes,
        ),
        (
            "tiering_manifest_fences",
            "Manifest writes lost to another writer",
            &stats.manifest_fences,
        ),
        (
            "tiering_remote_deletes",
            "Objects deleted from the bucket",
            &stats.remote_deletes,
        ),
        (
            "tiering_locked_delete_retries",
            "Deletes of Object Lock objects put off until their retain-until date",
            &stats.locked_delete_retries,
        ),
    ] {
        registry.register(name, help, counter(TieringStats::get(value)));
    }
    registry.register(
        "tiering_upload_retries",
        "Upload attempts retried after a transient store error",
        counter(strata_tiering::upload::upload_retries()),
    );
    registry.register_with_unit(
        "tiering_uploaded",
        "Bytes of segment logs uploaded",
        Unit::Bytes,
        counter(TieringStats::get(&stats.bytes_uploaded)),
    );
    let now = broker.clock().now_ms();
    let upload_lag = Family::<PartitionLabels, FloatGauge>::default();
    for topic in sources.topics {
        if !topic.config().remote_storage_enable {
            continue;
        }
        for (number, partition) in topic.partitions().iter().enumerate() {
            let number = u32::try_from(number).unwrap_or(u32::MAX);
            let lag = tiering
                .upload_lag_ms(topic.name(), number, partition, now)
                .unwrap_or(0);
            let labels = PartitionLabels {
                topic: topic.name().to_string(),
                partition: number,
            };
            upload_lag.get_or_create(&labels).set(lag as f64 / 1000.0);
        }
    }
    registry.register_with_unit(
        "tiering_upload_lag",
        "Age (by its newest record) of the oldest closed segment not yet in the bucket",
        Unit::Seconds,
        upload_lag,
    );
    let cache = tiering.cache_stats();
    for (name, help, value) in [
        (
            "cold_cache_hits",
            "Cold-read chunks found in the cache",
            cache.hits,
        ),
        (
            "cold_cache_misses",
            "Cold-read chunks fetched from the bucket",
            cache.misses,
        ),
        (
            "cold_cache_evictions",
            "Cold-read chunks evicted",
            cache.evictions,
        ),
        (
            "cold_cache_gets",
            "Ranged GETs issued for cold reads (read-ahead included)",
            cache.gets,
        ),
    ] {
        registry.register(name, help, counter(value));
    }
    registry.register_with_unit(
        "cold_read",
        "Bytes received from the bucket for cold reads",
        Unit::Bytes,
        counter(cache.bytes_fetched),
    );
    registry.register_with_unit(
        "cold_cache",
        "Chunk bytes cached now",
        Unit::Bytes,
        gauge(cache.bytes_cached),
    );
}

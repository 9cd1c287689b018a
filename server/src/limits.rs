//! Every bound the server enforces, with the reason for its default.

/// Default largest request body: 16 MiB fits a produce of 1000 records of 10 KiB as JSON while
/// keeping one request's memory small on a 2-core node.
pub const MAX_REQUEST_BYTES: u64 = 16 << 20;
/// Upper bound of `max_request_bytes`: a request body is held in memory whole.
pub const MAX_REQUEST_BYTES_LIMIT: u64 = 1 << 30;
/// Default most partitions per topic; each partition costs a writer task and open files.
pub const MAX_PARTITIONS_PER_TOPIC: u32 = 1024;
/// Upper bound of `max_partitions_per_topic`.
pub const MAX_PARTITIONS_PER_TOPIC_LIMIT: u32 = 100_000;
/// Longest long-poll a fetch may ask for (S2 uses 60 s; a minute keeps proxies' idle timeouts
/// out of the way).
pub const FETCH_MAX_WAIT_MS: u64 = 60_000;
/// `max_bytes` of a fetch that does not set it: 1 MiB, Kafka's `max.partition.fetch.bytes`.
pub const FETCH_DEFAULT_MAX_BYTES: u64 = 1 << 20;
/// Largest `max_bytes` a fetch may ask for by default.
pub const FETCH_MAX_BYTES: u64 = 64 << 20;
/// Upper bound of `fetch_max_bytes`.
pub const FETCH_MAX_BYTES_LIMIT: u64 = 1 << 30;
/// Idle SSE streams send a ping this often so proxies keep them open.
pub const SSE_PING_INTERVAL_MS: u64 = 15_000;
/// The `retry` an SSE stream announces: how long a browser's EventSource waits before it
/// reconnects (its own default is 3 s). One second resumes quickly after a restart without a
/// tight reconnect loop.
pub const SSE_RETRY_MS: u64 = 1_000;
/// How often a waiting SSE stream checks that its topic still exists, so a deleted topic's
/// stream ends within about this long.
pub const TOPIC_DELETION_CHECK_MS: u64 = 1_000;
/// Default graceful-shutdown wait for in-flight requests.
pub const SHUTDOWN_TIMEOUT_MS: u64 = 30_000;
/// Retention checks every 5 minutes (Kafka's `log.retention.check.interval.ms`): segments are
/// large, so finer checks find nothing new.
pub const RETENTION_CHECK_INTERVAL_MS: u64 = 300_000;
/// Most records one JSON fetch returns when `max_records` is not set.
pub const FETCH_DEFAULT_MAX_RECORDS: u32 = 1000;
/// Most records one produce request may carry.
pub const MAX_RECORDS_PER_REQUEST: usize = 10_000;
/// Characters of metadata kept with one committed offset (as Kafka's
/// `offset.metadata.max.bytes`): more could make one commit outgrow `__consumer_offsets`' batch
/// limit, which answered with advice about produce.
pub const MAX_COMMIT_METADATA_BYTES: usize = 4096;

const _: () = assert!(FETCH_DEFAULT_MAX_BYTES <= FETCH_MAX_BYTES);
const _: () = assert!(FETCH_MAX_BYTES <= FETCH_MAX_BYTES_LIMIT);
const _: () = assert!(MAX_REQUEST_BYTES <= MAX_REQUEST_BYTES_LIMIT);

/// Free space on the data disk above which a disk that was full counts as usable again: one
/// largest default batch (`max_message_bytes`, about 1 MiB) fits.
pub const DISK_FULL_CLEAR_BYTES: u64 = 1 << 20;
/// `Retry-After` seconds of a `disk_full` answer: freeing space takes an operator or a
/// retention pass, not milliseconds.
pub const DISK_FULL_RETRY_AFTER_S: u64 = 10;
/// `Retry-After` seconds of other retryable answers (busy, unavailable, ...).
pub const RETRY_AFTER_S: u64 = 1;

/// How long a request body may take to arrive whole.
pub const REQUEST_BODY_TIMEOUT_MS: u64 = 30_000;
/// Bytes of request bodies being received at once, across all connections.
pub const MAX_INFLIGHT_REQUEST_BYTES: u64 = 256 << 20;
/// How long a client may take to send a request's headers (also bounds an idle keep-alive
/// connection's wait for its next request).
pub const HEADER_READ_TIMEOUT_MS: u64 = 10_000;
/// Open client connections; more are answered 503 and closed.
pub const MAX_CONNECTIONS: u64 = 4_096;
/// Open SSE streams and long polls per principal.
pub const MAX_STREAMS_PER_PRINCIPAL: u64 = 64;

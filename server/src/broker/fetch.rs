//! Fetch: where a read starts (offset, timestamp, resume point or log start), the range check,
//! the long-poll wait, and the one walk that turns stored batches into records within a byte
//! and record budget. Every reader of records (partition fetch in every format, member fetch,
//! lag, timestamp lookups, idempotent-retry timestamps) uses [`read_records`] or
//! [`records_in`], so a corrupt batch or a compaction gap is handled the same everywhere.

use std::sync::Arc;
use std::time::Duration;

use super::audit::ReadOrigin;
use super::error::{FetchError, ListOffsetsError, LookupError, OffsetOutOfRange};
use super::reader::{PartitionReader, ReaderError};
use super::{Broker, ReaderOpenError};
use crate::audit::entry::ReadFormat;
use crate::limits::FETCH_DEFAULT_MAX_RECORDS;
use crate::log::batch::BatchError;
use crate::log::{Batches, LogOffsets, ReadSlice, Record};
use crate::security::{Caller, Operation};
use crate::tiering::remote_log::as_read_error;
use crate::topics::catalog::Topic;

impl From<ReaderOpenError> for FetchError {
    fn from(error: ReaderOpenError) -> Self {
        match error {
            ReaderOpenError::Lookup(lookup) => FetchError::Lookup(lookup),
            ReaderOpenError::Remote(remote) => {
                FetchError::Read(ReaderError::Remote(as_read_error(remote)))
            }
        }
    }
}

/// Where a fetch starts, as a request names it: an offset or a timestamp (not both; neither
/// is the log start), or a resume point that wins over both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FetchStart {
    resume: Option<u64>,
    offset: Option<u64>,
    timestamp: Option<i64>,
}

impl FetchStart {
    /// At `offset`, or at the first record whose timestamp is at or after `timestamp` (the high
    /// watermark when every record is older), or at the log start.
    ///
    /// # Errors
    /// [`FetchError::OffsetAndTimestamp`] when both are given.
    pub fn new(offset: Option<u64>, timestamp: Option<i64>) -> Result<Self, FetchError> {
        if offset.is_some() && timestamp.is_some() {
            return Err(FetchError::OffsetAndTimestamp);
        }
        Ok(Self {
            resume: None,
            offset,
            timestamp,
        })
    }

    /// The same start, overridden by a resume point (an SSE `Last-Event-ID`) when there is one.
    pub fn resuming_at(self, resume: Option<u64>) -> Self {
        Self { resume, ..self }
    }
}

/// How much one read may return and how long it may wait, already bounded by the server's
/// limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchBounds {
    /// Bytes of stored batches (at least one batch is returned however large).
    pub max_bytes: u64,
    /// Records.
    pub max_records: u32,
    /// How long a read at the high watermark waits for data.
    pub wait: Duration,
}

/// One read of records from a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    /// The first offset wanted.
    pub offset: u64,
    /// Byte budget of stored batches.
    pub max_bytes: u64,
    /// Record budget.
    pub max_records: u32,
}

/// Records read by [`read_records`]: what could be served, and the error that stopped the read
/// early, if one did after the first record.
#[derive(Debug)]
pub struct RecordsRead {
    /// The records, in offset order, all at or after the requested offset.
    pub records: Vec<Record>,
    /// Where the next read continues.
    pub next_offset: u64,
    /// The partition's offsets as of the read.
    pub offsets: LogOffsets,
    /// Set when a batch after the returned records failed (corrupt, unreadable): the records
    /// before it are served, as Kafka serves the batches before a corrupt one, and the next read
    /// at `next_offset` gets this error.
    pub stopped_by: Option<FetchError>,
}

impl Broker {
    /// The bounds of a read: the request's values, or the server's defaults, within the
    /// server's limits.
    pub fn fetch_bounds(
        &self,
        max_bytes: Option<u64>,
        max_records: Option<u32>,
        max_wait_ms: Option<u64>,
    ) -> FetchBounds {
        let config = &self.config;
        FetchBounds {
            max_bytes: max_bytes
                .unwrap_or(config.fetch_default_max_bytes)
                .clamp(1, config.fetch_max_bytes),
            max_records: max_records.unwrap_or(FETCH_DEFAULT_MAX_RECORDS).max(1),
            wait: Duration::from_millis(max_wait_ms.unwrap_or(0).min(config.fetch_max_wait_ms)),
        }
    }

    /// Opens a partition for a fetch: its topic (streams check that it still exists) and its
    /// reader. Needs `read` on the topic.
    ///
    /// # Errors
    /// Not allowed, unknown topic or partition; an unloadable manifest.
    ///
    /// A refused read of a topic that audits reads is recorded as denied (`origin`, `format`).
    pub async fn open_for_fetch(
        &self,
        caller: &Caller,
        origin: &ReadOrigin,
        format: ReadFormat,
        topic: &str,
        partition: u32,
    ) -> Result<(Arc<Topic>, Arc<PartitionReader>), FetchError> {
        let opened = self
            .open_reader(caller, Operation::Read, topic, partition)
            .await;
        if let Err(FetchError::Lookup(LookupError::Forbidden(_))) = &opened {
            self.audit_denied(caller, origin, format, None, (topic, partition))
                .await;
        }
        opened
    }

    async fn open_reader(
        &self,
        caller: &Caller,
        operation: Operation,
        topic: &str,
        partition: u32,
    ) -> Result<(Arc<Topic>, Arc<PartitionReader>), FetchError> {
        let topic = self.topic_for(caller, operation, topic)?;
        let reader = Arc::new(self.reader(&topic, partition).await?);
        Ok((topic, reader))
    }

    /// The offset a read starts at, checked against the log's range.
    ///
    /// # Errors
    /// A start outside the log (416 with the valid range), or a failed timestamp lookup.
    pub async fn start_offset(
        &self,
        reader: &PartitionReader,
        start: FetchStart,
    ) -> Result<u64, FetchError> {
        let offset = match (start.resume.or(start.offset), start.timestamp) {
            (Some(offset), _) => offset,
            (None, Some(timestamp)) => locate_time(reader, timestamp)
                .await?
                .unwrap_or_else(|| reader.offsets().high_watermark),
            (None, None) => reader.offsets().log_start_offset,
        };
        check_range(&reader.offsets(), offset)?;
        Ok(offset)
    }

    /// Waits until records at `offset` are readable, `wait` has passed, or the server shuts
    /// down.
    ///
    /// # Errors
    /// The topic was deleted meanwhile (checked every second): the wait ends at once with
    /// `topic_not_found`, as a stream ends, instead of answering an empty page of a partition
    /// that no longer exists.
    pub async fn wait_for_data(
        &self,
        topic: &Arc<Topic>,
        reader: &PartitionReader,
        offset: u64,
        wait: Duration,
    ) -> Result<(), FetchError> {
        if wait.is_zero() {
            return Ok(());
        }
        let mut offsets = reader.subscribe();
        let mut shutdown = self.shutdown.clone();
        let arrived = offsets.wait_for(|o: &LogOffsets| o.high_watermark > offset);
        let deleted = self.deletion_of(topic);
        let reason = tokio::select! {
            arrived = tokio::time::timeout(wait, arrived) => match arrived {
                Ok(Ok(_)) => "data",
                _ => "timeout",
            },
            _ = shutdown.wait_for(|stopping| *stopping) => "shutdown",
            () = deleted => "deleted",
        };
        self.stats.woke(reason);
        if reason == "deleted" {
            return Err(FetchError::Lookup(LookupError::TopicNotFound {
                topic: topic.name().to_string(),
            }));
        }
        Ok(())
    }

    /// Resolves once `topic` is no longer the catalog's topic of its name.
    // A periodic check, a timer rather than a clock reading.
    #[allow(clippy::disallowed_methods)]
    async fn deletion_of(&self, topic: &Arc<Topic>) {
        let period = Duration::from_millis(crate::limits::TOPIC_DELETION_CHECK_MS);
        while self.is_current(topic) {
            tokio::time::sleep(period).await;
        }
    }

    /// Offsets of a partition as readers see them, plus for tiered topics the local log start
    /// and the end of what the bucket holds. Needs `describe` on the topic.
    ///
    /// # Errors
    /// Not allowed, unknown topic or partition; an unloadable manifest.
    pub async fn partition_offsets(
        &self,
        caller: &Caller,
        topic: &str,
        partition: u32,
    ) -> Result<PartitionOffsetsView, FetchError> {
        let (_, reader) = self
            .open_reader(caller, Operation::Describe, topic, partition)
            .await?;
        let tiered = reader.remote().map(|remote| TieredOffsets {
            local_start: reader.partition().offsets().log_start_offset,
            uploaded_end: remote.end_offset(),
        });
        Ok(PartitionOffsetsView {
            offsets: reader.offsets(),
            tiered,
        })
    }

    /// Kafka's ListOffsets by timestamp, with the found record's own timestamp. `-1` is the
    /// high watermark, `-2` the log start, `-3` the record with the largest timestamp
    /// (KIP-734). Needs `describe` on the topic.
    ///
    /// # Errors
    /// Not allowed, unknown topic or partition, a negative timestamp that is none of these,
    /// read failures.
    pub async fn offset_for_timestamp(
        &self,
        caller: &Caller,
        topic: &str,
        partition: u32,
        timestamp: i64,
    ) -> Result<TimestampLookup, ListOffsetsError> {
        let (_, reader) = self
            .open_reader(caller, Operation::Describe, topic, partition)
            .await?;
        let found = match locate_time(&reader, timestamp).await {
            Err(FetchError::InvalidTimestamp(timestamp)) => {
                return Err(ListOffsetsError::InvalidTimestamp { timestamp });
            }
            Err(other) => return Err(other.into()),
            // A position, not a record: it has no timestamp of its own.
            Ok(found) if matches!(timestamp, LATEST | EARLIEST) => {
                return Ok(TimestampLookup {
                    offset: found,
                    record_timestamp: None,
                });
            }
            Ok(found) => found,
        };
        let record_timestamp = match found {
            Some(offset) => first_record(&reader, offset).await?.map(|r| r.timestamp),
            None => None,
        };
        Ok(TimestampLookup {
            offset: found,
            record_timestamp,
        })
    }
}

/// The first offset whose record is at or after `timestamp` in `reader`'s log, with Kafka's
/// ListOffsets special values: `-1` the high watermark, `-2` the log start, `-3` the record
/// with the largest timestamp (KIP-734). Fetch, the offsets lookup and a group reset all read
/// a timestamp this way, so `-1` means "latest" to each of them.
///
/// # Errors
/// Another negative timestamp; read failures.
pub(crate) async fn locate_time(
    reader: &PartitionReader,
    timestamp: i64,
) -> Result<Option<u64>, FetchError> {
    let offsets = reader.offsets();
    Ok(match timestamp {
        LATEST => Some(offsets.high_watermark),
        EARLIEST => Some(offsets.log_start_offset),
        MAX_TIMESTAMP => match reader.max_timestamp() {
            Some(max) => reader.offset_for_timestamp(max).await?,
            None => None,
        },
        t if t < 0 => return Err(FetchError::InvalidTimestamp(t)),
        t => reader.offset_for_timestamp(t).await?,
    })
}

/// Kafka's ListOffsets special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// A partition's offsets for `GET .../offsets`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOffsetsView {
    /// Log start (local or remote), high watermark, log end.
    pub offsets: LogOffsets,
    /// Set for tiered topics.
    pub tiered: Option<TieredOffsets>,
}

/// Where the local part of a tiered partition starts and where the bucket's part ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TieredOffsets {
    /// The local log start.
    pub local_start: u64,
    /// The offset after the last one the bucket holds.
    pub uploaded_end: u64,
}

/// The answer of a timestamp lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampLookup {
    /// The found offset; `None` when every record is older.
    pub offset: Option<u64>,
    /// The timestamp of the record at `offset`, when one was read.
    pub record_timestamp: Option<i64>,
}

/// 416 unless `offset` is within `[log start, high watermark]`.
///
/// # Errors
/// [`OffsetOutOfRange`] with the valid range.
pub fn check_range(offsets: &LogOffsets, offset: u64) -> Result<(), OffsetOutOfRange> {
    if offset < offsets.log_start_offset || offset > offsets.high_watermark {
        return Err(OffsetOutOfRange {
            requested: offset,
            earliest: offsets.log_start_offset,
            latest: offsets.high_watermark,
        });
    }
    Ok(())
}

/// The first record at or after `offset`, if any is readable.
///
/// # Errors
/// When its batch cannot be read or fails validation.
pub async fn first_record(
    reader: &PartitionReader,
    offset: u64,
) -> Result<Option<Record>, FetchError> {
    let request = ReadRequest {
        offset,
        max_bytes: 1,
        max_records: 1,
    };
    Ok(read_records(reader, &request)
        .await?
        .records
        .into_iter()
        .next())
}

/// Decodes records from `request.offset` on, within the byte and record budgets.
///
/// # Errors
/// When the very first batch cannot be read or fails validation; a failure after that ends the
/// read early instead ([`RecordsRead::stopped_by`]).
pub async fn read_records(
    reader: &PartitionReader,
    request: &ReadRequest,
) -> Result<RecordsRead, FetchError> {
    let mut records: Vec<Record> = Vec::new();
    let mut next = request.offset;
    let mut bytes_left = request.max_bytes;
    let mut offsets = reader.offsets();
    let mut stopped_by = None;
    let record_budget = request.max_records as usize;
    while next < offsets.high_watermark && bytes_left > 0 && records.len() < record_budget {
        let slice = match reader.read(next, bytes_left).await {
            Ok(slice) => slice,
            Err(error) => {
                stopped_by = Some(FetchError::Read(error));
                break;
            }
        };
        offsets = slice.offsets;
        if slice.data.is_empty() {
            // Compaction removed every record from `next` to where the slice ends, maybe the
            // log's last ones: go on after them, as the raw format's next offset does.
            // Stopping here would leave a reader at `next` for good, below the high watermark,
            // polling without ever waiting.
            if slice.next_offset > next {
                next = slice.next_offset;
                continue;
            }
            break;
        }
        // A read answers at least one batch, however large; only the first may pass the
        // budget ("at least one batch"), as in the raw format.
        if !records.is_empty() && slice.data.len() as u64 > bytes_left {
            break;
        }
        bytes_left = bytes_left.saturating_sub(slice.data.len() as u64);
        let walked = walk_records(&slice, next, record_budget - records.len(), &mut records);
        next = walked.next_offset;
        if let Some(error) = walked.error {
            stopped_by = Some(FetchError::Corrupt(error));
            break;
        }
    }
    if records.is_empty()
        && let Some(error) = stopped_by
    {
        return Err(error);
    }
    Ok(RecordsRead {
        records,
        next_offset: next,
        offsets,
        stopped_by,
    })
}

/// Where one walk over a slice ended.
struct Walked {
    /// The offset to continue at.
    next_offset: u64,
    /// The batch or record that failed validation, which ended the walk.
    error: Option<BatchError>,
}

/// Appends the records of `slice` at or after `from` to `out`, at most `budget` of them. The
/// next offset skips what compaction removed: the tail of a batch and of the slice.
fn walk_records(slice: &ReadSlice, from: u64, budget: usize, out: &mut Vec<Record>) -> Walked {
    let mut next = from;
    let mut taken = 0;
    for batch in Batches::new(slice.data.clone()) {
        let batch = match batch {
            Ok(batch) => batch,
            Err(error) => return walked(next, Some(error)),
        };
        for record in batch.records() {
            let record = match record {
                Ok(record) => record,
                Err(error) => return walked(next, Some(error)),
            };
            let offset = u64::try_from(record.offset).unwrap_or(0);
            if offset < next {
                continue;
            }
            next = offset + 1;
            out.push(record);
            taken += 1;
            if taken >= budget {
                return walked(next, None);
            }
        }
        // Compaction may leave the last offsets of a batch empty: continue after it.
        next = next.max(u64::try_from(batch.header().last_offset().saturating_add(1)).unwrap_or(0));
    }
    // Compaction may leave the last offsets of a range empty: continue after the range.
    walked(next.max(slice.next_offset), None)
}

fn walked(next_offset: u64, error: Option<BatchError>) -> Walked {
    Walked { next_offset, error }
}

/// Up to `budget` records of `slice` at or after `from`: what an idempotent retry stored the
/// first time, read back through the same walk as every fetch.
///
/// # Errors
/// When a batch or record fails validation.
pub fn records_in(slice: &ReadSlice, from: u64, budget: usize) -> Result<Vec<Record>, BatchError> {
    let mut out = Vec::new();
    match walk_records(slice, from, budget, &mut out).error {
        Some(error) => Err(error),
        None => Ok(out),
    }
}

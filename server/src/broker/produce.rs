//! Produce: records to a topic (partitioned by key) or to one partition, and raw Kafka
//! RecordBatch v2 bytes to one partition.
//!
//! Records of one request that go to the same partition become one batch and commit atomically;
//! records for different partitions are appended concurrently. Keyless records without an
//! explicit partition all go to one partition per request (sticky), as Kafka's sticky
//! partitioner does per producer batch. Idempotent producers are checked against the registry
//! (ids and epochs this server issued; older epochs are fenced) before anything is appended.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::error::{LookupError, ProduceError, StoredRange};
use super::fetch::records_in;
use super::{Broker, WritableTopic, local_partition, partition_not_found};
use crate::limits::MAX_RECORDS_PER_REQUEST;
use crate::log::batch::{BatchHeader, BatchOptions, Compression, Record, TimestampType};
use crate::log::stream::StreamLease;
use crate::log::{Acks, BatchAck, NewRecord, RecordBatch, RecordHeader};
use crate::security::{Caller, Operation};
use crate::topics::catalog::Topic;
use crate::topics::config::{CompressionType, MessageTimestampType, TopicConfig};
use crate::topics::partitioner::{StickyPartitioner, partition_for_key};

/// One record of a produce request, decoded from its wire shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingRecord {
    /// The partition the client chose, if any.
    pub partition: Option<u32>,
    /// The client's timestamp (ms since the epoch); `None` is "now".
    pub timestamp: Option<i64>,
    /// The key; picks the partition when none is given.
    pub key: Option<Bytes>,
    /// The value; `None` is a tombstone on compacted topics.
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<RecordHeader>,
}

/// An idempotent producer's identity on a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerSession {
    /// Id issued by `POST /v1/producers`.
    pub producer_id: i64,
    /// Epoch issued with it.
    pub producer_epoch: i16,
    /// Base sequence per partition, keyed by the partition number as text (as on the wire).
    pub sequences: BTreeMap<String, i32>,
}

/// Where a produce request sends its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProduceTarget {
    /// The topic: each record to its explicit partition, its key's partition, or the sticky one.
    Topic,
    /// One partition; every record's explicit partition must be this one.
    Partition(u32),
}

/// A produce of decoded records.
#[derive(Debug, Clone)]
pub struct ProduceRecords {
    /// The records, in request order.
    pub records: Vec<IncomingRecord>,
    /// The idempotent producer, if any.
    pub producer: Option<ProducerSession>,
    /// When to acknowledge.
    pub acks: Acks,
    /// Append only if the partition's log end offset equals this (one partition only).
    pub expected_offset: Option<u64>,
}

/// One partition's share of a produce request, for its answer.
struct PartitionSlot {
    partition: u32,
    /// Each record's index in the request and the timestamp it was sent with.
    records: Vec<(usize, i64)>,
    batch_bytes: u64,
}

/// Where one record was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredPosition {
    /// The partition.
    pub partition: u32,
    /// The offset.
    pub offset: u64,
    /// The timestamp stored with it.
    pub timestamp: i64,
}

/// How raw batches are appended: the durability asked for, and the conditional append's
/// expected log end.
#[derive(Debug, Clone, Copy)]
pub struct AppendTerms {
    /// When the answer may leave.
    pub acks: Acks,
    /// Append only if the partition's log end is this.
    pub expected_offset: Option<u64>,
}

/// The answer of a produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Produced {
    /// One position per record, in request order.
    pub positions: Vec<StoredPosition>,
    /// True when an idempotent retry matched batches already stored: the positions are those of
    /// the first attempt.
    pub duplicate: bool,
}

impl Broker {
    /// A topic `caller` may produce to: `write` on it, and not internal.
    ///
    /// # Errors
    /// Not allowed, no such topic, or an internal topic.
    pub fn producible_topic(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<WritableTopic, LookupError> {
        self.writable_topic_for(caller, Operation::Write, name)
    }

    /// Appends decoded records, one batch per partition.
    ///
    /// # Errors
    /// See [`ProduceError`]; nothing is stored for a request refused before its appends.
    pub async fn produce(
        &self,
        caller: &Caller,
        topic: &WritableTopic,
        target: ProduceTarget,
        request: ProduceRecords,
    ) -> Result<Produced, ProduceError> {
        let topic = topic.topic();
        check_request_shape(topic, target, &request)?;
        let record_count = request.records.len();
        let groups = self.partition_records(topic, target, request.records)?;
        if let Some(producer) = &request.producer {
            self.check_epoch(caller, producer.producer_id, producer.producer_epoch)
                .await?;
        }
        let config = topic.config();
        let mut appends = Vec::with_capacity(groups.len());
        let mut slots = Vec::with_capacity(groups.len());
        for (partition, records) in groups {
            let options = batch_options(&config, request.producer.as_ref(), partition)?;
            let (indexes, batch) = encode_partition(&options, records)?;
            let batch_bytes = batch.len() as u64;
            let log = local_partition(topic, partition)?;
            // Every partition's batch is checked before any is appended: one over the topic's
            // limit stores nothing of the request.
            log.check_batch_sizes(std::slice::from_ref(&batch))?;
            appends.push(append_one(
                log,
                batch,
                request.acks,
                request.expected_offset,
            ));
            slots.push(PartitionSlot {
                partition,
                records: indexes,
                batch_bytes,
            });
        }
        let results = futures::future::join_all(appends).await;
        let acks = self.settle(topic, &slots, results, request.producer.is_some())?;
        let mut positions = vec![None; record_count];
        // A retry only when every partition's batch was already there: a request that also
        // appended somewhere is no duplicate.
        let duplicate = acks.iter().all(|ack| ack.duplicate);
        for (slot, ack) in slots.into_iter().zip(acks) {
            let sent = slot
                .records
                .iter()
                .map(|(_, timestamp)| *timestamp)
                .collect();
            let stamps = answered_timestamps(topic, slot.partition, &ack, sent).await?;
            for (delta, ((index, _), timestamp)) in slot.records.iter().zip(stamps).enumerate() {
                if let Some(position) = positions.get_mut(*index) {
                    *position = Some(StoredPosition {
                        partition: slot.partition,
                        offset: ack.base_offset + delta as u64,
                        timestamp,
                    });
                }
            }
        }
        Ok(Produced {
            positions: positions.into_iter().flatten().collect(),
            duplicate,
        })
    }

    /// The acknowledgements of a request's appends once all of them ended. What was appended
    /// counts in the statistics even when another partition failed, and such a failure names
    /// what was stored, so the client knows what not to send again.
    fn settle(
        &self,
        topic: &Topic,
        slots: &[PartitionSlot],
        results: Vec<Result<BatchAck, ProduceError>>,
        idempotent: bool,
    ) -> Result<Vec<BatchAck>, ProduceError> {
        let (mut appended, mut bytes) = (0u64, 0u64);
        let mut acks = Vec::with_capacity(results.len());
        let mut stored = Vec::new();
        let mut failure = None;
        for (slot, result) in slots.iter().zip(results) {
            match result {
                Ok(ack) => {
                    let count = slot.records.len() as u64;
                    if !ack.duplicate {
                        appended += count;
                        bytes += slot.batch_bytes;
                    }
                    stored.push(StoredRange {
                        partition: slot.partition,
                        base_offset: ack.base_offset,
                        record_count: count,
                    });
                    acks.push(ack);
                }
                Err(error) => {
                    failure.get_or_insert((slot.partition, error));
                }
            }
        }
        if appended > 0 {
            self.stats.appended(topic.name(), appended, bytes);
        }
        match failure {
            None => Ok(acks),
            Some((_, error)) if stored.is_empty() => Err(error),
            Some((failed, source)) => Err(ProduceError::Partial {
                stored,
                failed,
                idempotent,
                source: Box::new(source),
            }),
        }
    }

    /// Records per partition, each remembering its index in the request; timestamps resolved
    /// by the topic's timestamp type.
    fn partition_records(
        &self,
        topic: &Topic,
        target: ProduceTarget,
        records: Vec<IncomingRecord>,
    ) -> Result<BTreeMap<u32, Vec<(usize, NewRecord)>>, ProduceError> {
        let config = topic.config();
        let count = topic.partition_count();
        let now = self.clock.now_ms();
        let seed = self.sticky_seed.fetch_add(1, Ordering::Relaxed);
        let sticky = StickyPartitioner::new(count, seed);
        let mut groups: BTreeMap<u32, Vec<(usize, NewRecord)>> = BTreeMap::new();
        for (index, record) in records.into_iter().enumerate() {
            if record.timestamp.is_some_and(|t| t < 0) {
                return Err(ProduceError::Invalid(format!(
                    "records[{index}].timestamp must be >= 0 (ms since the Unix epoch)"
                )));
            }
            if config.cleanup_policy.compacts() && record.key.is_none() {
                return Err(ProduceError::KeyRequired(format!(
                    "records[{index}]: compacted topics need a key on every record"
                )));
            }
            let timestamp = match config.message_timestamp_type {
                MessageTimestampType::LogAppendTime => now,
                MessageTimestampType::CreateTime => record.timestamp.unwrap_or(now),
            };
            let partition = match (target, record.partition, &record.key) {
                (ProduceTarget::Partition(fixed), _, _) => fixed,
                (ProduceTarget::Topic, Some(explicit), _) => explicit,
                (ProduceTarget::Topic, None, Some(key)) => partition_for_key(key, count),
                (ProduceTarget::Topic, None, None) => sticky.partition(),
            };
            if partition >= count {
                return Err(partition_not_found(topic, partition).into());
            }
            groups.entry(partition).or_default().push((
                index,
                NewRecord {
                    timestamp,
                    key: record.key,
                    value: record.value,
                    headers: record.headers,
                },
            ));
        }
        Ok(groups)
    }

    /// A lease to stream a raw body of `len` bytes into `partition` as it arrives (see
    /// `log::stream`): `None` when the topic recompresses what it stores (the stored bytes are
    /// then not the body's) or the partition's writer is busy with other appends.
    ///
    /// # Errors
    /// An unknown partition.
    pub async fn stream_lease(
        &self,
        topic: &WritableTopic,
        partition: u32,
        len: u64,
    ) -> Result<Option<StreamLease>, ProduceError> {
        let log = local_partition(topic.topic(), partition)?;
        let config = topic.topic().config();
        // Batches the broker rewrites (another codec, the append time) are not the streamed
        // bytes.
        if topic_codec(&config).is_some()
            || config.message_timestamp_type == MessageTimestampType::LogAppendTime
        {
            return Ok(None);
        }
        Ok(log.stream_lease(len).await)
    }

    /// Appends raw Kafka record batches to one partition, stored as sent except for the base
    /// offset the broker assigns (and the codec, when the topic sets one). With a `lease` (see
    /// [`Broker::stream_lease`]) the body was already streamed into the log as it arrived, and
    /// those bytes become the append when they are exactly the batches stored.
    ///
    /// # Errors
    /// See [`ProduceError`]; a body with any invalid batch stores nothing.
    pub async fn produce_batches(
        &self,
        caller: &Caller,
        topic: &WritableTopic,
        partition: u32,
        body: Bytes,
        lease: Option<StreamLease>,
        terms: AppendTerms,
    ) -> Result<Produced, ProduceError> {
        let AppendTerms {
            acks,
            expected_offset,
        } = terms;
        let topic = topic.topic();
        let log = local_partition(topic, partition)?;
        let (mut batches, facts) = split_batches(&body)?;
        for batch in &batches {
            let header = batch.header();
            if header.producer_id >= 0 {
                self.check_epoch(caller, header.producer_id, header.producer_epoch)
                    .await?;
            }
        }
        let config = topic.config();
        let mut timestamps = batch_timestamps(&batches, facts, config.cleanup_policy.compacts())?;
        let codec = topic_codec(&config);
        self.rewrite_for_topic(&config, &mut batches, &mut timestamps)?;
        let sizes: Vec<u64> = batches.iter().map(|b| b.len() as u64).collect();
        let acks = match lease {
            // Recompressed batches are not the streamed bytes: dropping the lease cuts those.
            Some(lease) if codec.is_none() => {
                log.append_streamed(lease, batches, acks, expected_offset)
                    .await?
            }
            _ => log.append_if(batches, acks, expected_offset).await?,
        };
        let mut positions = Vec::new();
        // A retry only when every batch was already there (see `produce`).
        let mut duplicate = !acks.is_empty();
        let (mut appended, mut bytes) = (0u64, 0u64);
        for ((ack, stamps), size) in acks.iter().zip(timestamps).zip(sizes) {
            duplicate &= ack.duplicate;
            if !ack.duplicate {
                appended += ack.last_offset - ack.base_offset + 1;
                bytes += size;
            }
            let stamps = answered_timestamps(topic, partition, ack, stamps).await?;
            for (delta, timestamp) in stamps.into_iter().enumerate() {
                positions.push(StoredPosition {
                    partition,
                    offset: ack.base_offset + delta as u64,
                    timestamp,
                });
            }
        }
        if appended > 0 {
            self.stats.appended(topic.name(), appended, bytes);
        }
        Ok(Produced {
            positions,
            duplicate,
        })
    }

    /// What the topic changes in a producer's batches before they are stored: its codec, and
    /// on a `LogAppendTime` topic the append time (then also every answered timestamp).
    fn rewrite_for_topic(
        &self,
        config: &TopicConfig,
        batches: &mut [RecordBatch],
        timestamps: &mut [Vec<i64>],
    ) -> Result<(), ProduceError> {
        if let Some(codec) = topic_codec(config) {
            for batch in batches.iter_mut() {
                *batch = batch
                    .with_compression(codec)
                    .map_err(|e| ProduceError::BadRecordBatch(format!("cannot recompress: {e}")))?;
            }
        }
        if config.message_timestamp_type == MessageTimestampType::LogAppendTime {
            let now = self.clock.now_ms();
            for batch in batches.iter_mut() {
                *batch = stamp_log_append_time(batch, now)?;
            }
            for stamps in timestamps.iter_mut() {
                stamps.iter_mut().for_each(|t| *t = now);
            }
        }
        Ok(())
    }

    /// Refuses ids this server did not issue, another principal's ids, epochs it did not issue,
    /// and epochs older than the newest one issued for the id (fenced sessions).
    async fn check_epoch(
        &self,
        caller: &Caller,
        producer_id: i64,
        epoch: i16,
    ) -> Result<(), ProduceError> {
        let requester = self.producer_requester(caller);
        let Some((current, allowed)) = self.producers.epoch_for(producer_id, requester).await
        else {
            return Err(ProduceError::InvalidProducer(format!(
                "producer id {producer_id} was not issued by this server (POST /v1/producers)"
            )));
        };
        // Another principal's id: writing with it would move that producer's sequences.
        if !allowed {
            return Err(ProduceError::NotProducerOwner { producer_id });
        }
        if epoch < current {
            return Err(ProduceError::ProducerFenced {
                producer_id,
                epoch,
                current,
            });
        }
        if epoch > current {
            return Err(ProduceError::InvalidProducer(format!(
                "producer {producer_id} epoch {epoch} was never issued (current {current})"
            )));
        }
        Ok(())
    }

    /// Issues a producer identity: a new id, or the next epoch of `existing` (fencing the
    /// older epochs).
    ///
    /// # Errors
    /// An id this server never issued, one issued to another principal (unless the caller is a
    /// super user), exhausted epochs, storage failures.
    pub async fn init_producer(
        &self,
        caller: &Caller,
        existing: Option<i64>,
    ) -> Result<(i64, i16), super::error::InitProducerError> {
        let requester = self.producer_requester(caller);
        self.producers.init(existing, requester).await
    }

    /// `caller` as the producer registry sees it: no principal without authentication, where
    /// nobody owns an id.
    fn producer_requester<'a>(&self, caller: &'a Caller) -> crate::producers::Requester<'a> {
        crate::producers::Requester {
            principal: self
                .authorizer
                .is_enforcing()
                .then(|| caller.principal().as_str()),
            may_bump_any: self.authorizer.may_act_for_anyone(caller),
        }
    }
}

/// The request-level rules: some records, not too many, `expected_offset` only for one
/// partition, explicit partitions matching the target.
fn check_request_shape(
    topic: &Topic,
    target: ProduceTarget,
    request: &ProduceRecords,
) -> Result<(), ProduceError> {
    if target == ProduceTarget::Topic && request.expected_offset.is_some() {
        return Err(ProduceError::Invalid(format!(
            "expected_offset applies to one partition: use /v1/topics/{}/partitions/{{p}}/records",
            topic.name()
        )));
    }
    if let ProduceTarget::Partition(partition) = target {
        local_partition(topic, partition)?;
        if let Some(bad) = request
            .records
            .iter()
            .position(|r| r.partition.is_some_and(|p| p != partition))
        {
            return Err(ProduceError::Invalid(format!(
                "records[{bad}].partition differs from the partition in the path"
            )));
        }
    }
    if request.records.is_empty() {
        return Err(ProduceError::Invalid("records must not be empty".into()));
    }
    if request.records.len() > MAX_RECORDS_PER_REQUEST {
        return Err(ProduceError::Invalid(format!(
            "at most {MAX_RECORDS_PER_REQUEST} records per request"
        )));
    }
    Ok(())
}

/// One partition's records as a batch, with each record's index in the request and its
/// timestamp, for the answer.
fn encode_partition(
    options: &BatchOptions,
    records: Vec<(usize, NewRecord)>,
) -> Result<(Vec<(usize, i64)>, RecordBatch), ProduceError> {
    let (indexes, new): (Vec<(usize, i64)>, Vec<NewRecord>) = records
        .into_iter()
        .map(|(index, record)| ((index, record.timestamp), record))
        .unzip();
    let batch = RecordBatch::encode(options, &new)
        .map_err(|e| ProduceError::Invalid(format!("cannot encode records: {e}")))?;
    Ok((indexes, batch))
}

async fn append_one(
    log: Arc<crate::log::Partition>,
    batch: RecordBatch,
    acks: Acks,
    expected_offset: Option<u64>,
) -> Result<BatchAck, ProduceError> {
    let acks = log.append_if(vec![batch], acks, expected_offset).await?;
    acks.into_iter()
        .next()
        .ok_or(ProduceError::Internal("append returned no offsets"))
}

fn batch_options(
    config: &TopicConfig,
    producer: Option<&ProducerSession>,
    partition: u32,
) -> Result<BatchOptions, ProduceError> {
    let timestamp_type = match config.message_timestamp_type {
        MessageTimestampType::CreateTime => TimestampType::CreateTime,
        MessageTimestampType::LogAppendTime => TimestampType::LogAppendTime,
    };
    let mut options = BatchOptions {
        timestamp_type,
        compression: topic_codec(config).unwrap_or(Compression::None),
        ..BatchOptions::default()
    };
    if let Some(producer) = producer {
        let sequence = producer
            .sequences
            .get(&partition.to_string())
            .copied()
            .ok_or_else(|| {
                ProduceError::Invalid(format!(
                    "producer.sequences has no sequence for partition {partition}"
                ))
            })?;
        if sequence < 0 {
            return Err(ProduceError::Invalid("sequences must be >= 0".into()));
        }
        options.producer_id = producer.producer_id;
        options.producer_epoch = producer.producer_epoch;
        options.base_sequence = sequence;
    }
    Ok(options)
}

/// The batches of a raw body, each validated for appending, with what that one parse of their
/// records found (checked later by [`batch_timestamps`], after the producer's epoch).
fn split_batches(body: &Bytes) -> Result<(Vec<RecordBatch>, Vec<RecordFacts>), ProduceError> {
    let mut batches = Vec::new();
    let mut facts = Vec::new();
    let mut position = 0;
    while position < body.len() {
        let bad = |e: &dyn std::fmt::Display| {
            ProduceError::BadRecordBatch(format!("batch at byte {position}: {e}"))
        };
        let mut seen = RecordFacts::default();
        let batch = RecordBatch::decode_first_with(&body.slice(position..), |record| {
            seen.see(record);
        })
        .map_err(|e| bad(&e))?;
        refuse_unsupported(batch.header(), position)?;
        batch.validate_for_append().map_err(|e| bad(&e))?;
        // Timestamp lookups and time retention trust the header's maxTimestamp, so it must be
        // what the records say (a Kafka broker recomputes it; a client never gets it wrong).
        let largest = seen.timestamps.iter().max().copied();
        if let Some(largest) = largest.filter(|&t| t != batch.header().max_timestamp) {
            return Err(bad(&format_args!(
                "maxTimestamp {} is not the largest record timestamp {largest}",
                batch.header().max_timestamp
            )));
        }
        position += batch.len();
        batches.push(batch);
        facts.push(seen);
    }
    if batches.is_empty() {
        return Err(ProduceError::BadRecordBatch(
            "the body holds no record batch".into(),
        ));
    }
    Ok((batches, facts))
}

/// `batch` as a LogAppendTime batch stamped `now`, as a Kafka broker stores a producer's
/// batch for a topic with `message.timestamp.type=LogAppendTime`: readers then take `now` as
/// every record's timestamp, and time retention counts from the append.
fn stamp_log_append_time(batch: &RecordBatch, now: i64) -> Result<RecordBatch, ProduceError> {
    let failed = |e: &dyn std::fmt::Display| {
        ProduceError::BadRecordBatch(format!("cannot stamp the append time: {e}"))
    };
    let mut bytes = batch.bytes().to_vec();
    crate::log::batch::set_log_append_time(&mut bytes, now).map_err(|e| failed(&e))?;
    RecordBatch::decode_exact(Bytes::from(bytes)).map_err(|e| failed(&e))
}

/// A batch's record timestamps and the record-level rules they may break.
#[derive(Default)]
struct RecordFacts {
    timestamps: Vec<i64>,
    /// The first keyless record's offset.
    keyless: Option<i64>,
    /// The first record with a negative timestamp: `(offset, timestamp)`.
    negative: Option<(i64, i64)>,
}

impl RecordFacts {
    fn see(&mut self, record: &Record) {
        if record.key.is_none() && self.keyless.is_none() {
            self.keyless = Some(record.offset);
        }
        if record.timestamp < 0 && self.negative.is_none() {
            self.negative = Some((record.offset, record.timestamp));
        }
        self.timestamps.push(record.timestamp);
    }
}

/// Each batch's record timestamps; refuses keyless records on compacted topics and negative
/// timestamps, answering for the first record that breaks either rule.
fn batch_timestamps(
    batches: &[RecordBatch],
    facts: Vec<RecordFacts>,
    compacted: bool,
) -> Result<Vec<Vec<i64>>, ProduceError> {
    let mut timestamps = Vec::with_capacity(facts.len());
    for (batch, facts) in batches.iter().zip(facts) {
        let keyless = facts.keyless.filter(|_| compacted);
        match (keyless, facts.negative) {
            (Some(keyless), negative) if negative.is_none_or(|(at, _)| keyless <= at) => {
                return Err(ProduceError::KeyRequired(
                    "compacted topics need keys".into(),
                ));
            }
            (_, Some((offset, timestamp))) => {
                return Err(ProduceError::Invalid(format!(
                    "record at offset delta {} has timestamp {timestamp}: timestamps must be >= 0",
                    offset - batch.header().base_offset,
                )));
            }
            _ => timestamps.push(facts.timestamps),
        }
    }
    Ok(timestamps)
}

/// The codec a topic stores batches with; `None` keeps the producer's.
fn topic_codec(config: &TopicConfig) -> Option<Compression> {
    match config.compression_type {
        CompressionType::Producer => None,
        CompressionType::Uncompressed => Some(Compression::None),
        CompressionType::Gzip => Some(Compression::Gzip),
        CompressionType::Snappy => Some(Compression::Snappy),
        CompressionType::Lz4 => Some(Compression::Lz4),
        CompressionType::Zstd => Some(Compression::Zstd),
    }
}

/// `unsupported_record_batch` for batch features Strata does not implement yet.
fn refuse_unsupported(header: &BatchHeader, position: usize) -> Result<(), ProduceError> {
    let feature = if header.is_control() {
        "control batches (transaction markers)"
    } else if header.is_transactional() {
        "transactional batches (Strata has no transactions yet)"
    } else {
        return Ok(());
    };
    Err(ProduceError::UnsupportedRecordBatch(format!(
        "batch at byte {position}: {feature} are not supported"
    )))
}

/// The timestamps to answer for an appended batch: those `sent`, or for an idempotent retry
/// those the first attempt stored (read back), not the retry's. When the first attempt's
/// records are no longer on the local disk (delete-records, retention, or only the bucket
/// holds them), the retry is still a duplicate with the original offsets: it is answered with
/// its own timestamps rather than failing with a 416 for offsets the producer never asked to
/// read.
async fn answered_timestamps(
    topic: &Topic,
    partition: u32,
    ack: &BatchAck,
    sent: Vec<i64>,
) -> Result<Vec<i64>, ProduceError> {
    if !ack.duplicate {
        return Ok(sent);
    }
    let log = local_partition(topic, partition)?;
    let slice = match log.read(ack.base_offset, 1).await {
        Err(crate::log::ReadError::OffsetOutOfRange(_)) => return Ok(sent),
        read => read?,
    };
    let count = usize::try_from(ack.last_offset - ack.base_offset + 1).unwrap_or(usize::MAX);
    let records = records_in(&slice, ack.base_offset, count).map_err(ProduceError::Corrupt)?;
    Ok(records.iter().map(|r| r.timestamp).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::encode_batch;

    fn record(key: Option<&'static str>, timestamp: i64) -> NewRecord {
        NewRecord {
            timestamp,
            key: key.map(|k| Bytes::from_static(k.as_bytes())),
            value: Some(Bytes::from_static(b"v")),
            headers: Vec::new(),
        }
    }

    fn body(batches: &[&[NewRecord]]) -> Bytes {
        let mut body = Vec::new();
        for records in batches {
            let batch = encode_batch(&BatchOptions::default(), records).expect("encodes");
            body.extend_from_slice(&batch);
        }
        Bytes::from(body)
    }

    fn checked(body: &Bytes, compacted: bool) -> Result<Vec<Vec<i64>>, ProduceError> {
        let (batches, facts) = split_batches(body).expect("well-formed batches");
        batch_timestamps(&batches, facts, compacted)
    }

    #[test]
    fn one_parse_gives_every_batch_its_record_timestamps() {
        let body = body(&[
            &[record(Some("a"), 10), record(None, 12)],
            &[record(Some("b"), 7)],
        ]);
        assert_eq!(
            checked(&body, false).expect("valid"),
            vec![vec![10, 12], vec![7]]
        );
    }

    #[test]
    fn the_first_record_that_breaks_a_rule_decides_the_answer() {
        let keyless_first = body(&[&[record(None, 1), record(Some("k"), -3)]]);
        assert!(matches!(
            checked(&keyless_first, true),
            Err(ProduceError::KeyRequired(_))
        ));
        let negative_first =
            body(&[&[record(Some("k"), 5), record(Some("k"), -3), record(None, 1)]]);
        match checked(&negative_first, true) {
            Err(ProduceError::Invalid(message)) => assert!(
                message.contains("offset delta 1 has timestamp -3"),
                "{message}"
            ),
            other => panic!("expected the negative timestamp, got {other:?}"),
        }
        assert!(
            checked(&keyless_first, false).is_err(),
            "keyless records are fine off compacted topics, negative timestamps never"
        );
        let keyless_only = body(&[&[record(Some("k"), 1)], &[record(None, 2)]]);
        assert!(matches!(
            checked(&keyless_only, true),
            Err(ProduceError::KeyRequired(_))
        ));
        assert!(checked(&keyless_only, false).is_ok());
    }
}

//! Kafka RecordBatch v2 (magic 2): the on-disk and on-the-wire unit of Strata's log.
//!
//! Strata stores batches exactly as Kafka's log format v2 lays them out, so that a batch a
//! producer sends can be appended without re-encoding and a fetch can hand file bytes straight
//! back to consumers. A batch is a 61-byte big-endian header followed by its records:
//!
//! ```text
//! offset  size  field
//!      0     8  baseOffset            (assigned by the broker; not covered by the CRC)
//!      8     4  batchLength           (bytes after this field)
//!     12     4  partitionLeaderEpoch  (assigned by the broker; not covered by the CRC)
//!     16     1  magic = 2
//!     17     4  crc                   (CRC-32C of bytes 21..end)
//!     21     2  attributes            (bits 0-2 codec, 3 timestamp type, 4 transactional,
//!                                       5 control, 6 delete horizon set)
//!     23     4  lastOffsetDelta
//!     27     8  baseTimestamp         (`first_timestamp` here)
//!     35     8  maxTimestamp
//!     43     8  producerId
//!     51     2  producerEpoch
//!     53     4  baseSequence
//!     57     4  recordCount
//!     61        records...
//! ```
//!
//! Each record is `length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
//! key (varint length, -1 = null), value (same), header count varint, headers` where each
//! header is a non-null UTF-8 key and a nullable value, both prefixed by varint lengths.
//!
//! Every decoder here reads untrusted bytes (from producers and from possibly corrupt files),
//! so none of them panics: all reads are bounds-checked and all arithmetic on decoded values is
//! checked. Compressed batches (gzip, snappy, lz4, zstd; see `compression.rs`) keep their
//! compressed bytes; decoding one decompresses its records section, bounded in size.

use bytes::{BufMut, Bytes, BytesMut};

use super::varint::{self, VarintError};

/// Size of the fixed batch header that precedes the records.
pub const BATCH_HEADER_LEN: usize = 61;
/// Bytes before the part counted by `batchLength`: baseOffset (8) + batchLength (4).
pub const LOG_OVERHEAD: usize = 12;
/// The only batch format this module understands.
pub const MAGIC_V2: i8 = 2;
/// The smallest legal `batchLength`: the header fields that follow the length field.
pub const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;

const BASE_OFFSET_OFFSET: usize = 0;
const LENGTH_OFFSET: usize = 8;
const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
const MAGIC_OFFSET: usize = 16;
const CRC_OFFSET: usize = 17;
/// The CRC covers everything from the attributes to the end of the batch.
const ATTRIBUTES_OFFSET: usize = 21;
const LAST_OFFSET_DELTA_OFFSET: usize = 23;
const FIRST_TIMESTAMP_OFFSET: usize = 27;
const MAX_TIMESTAMP_OFFSET: usize = 35;
const PRODUCER_ID_OFFSET: usize = 43;
const PRODUCER_EPOCH_OFFSET: usize = 51;
const BASE_SEQUENCE_OFFSET: usize = 53;
const RECORD_COUNT_OFFSET: usize = 57;

const COMPRESSION_CODEC_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const TRANSACTIONAL_MASK: i16 = 0x10;
const CONTROL_MASK: i16 = 0x20;
const DELETE_HORIZON_MASK: i16 = 0x40;

pub use super::batch_error::BatchError;
pub use super::compression::Compression;

/// How record timestamps were assigned (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// Timestamps come from the producer.
    CreateTime,
    /// The broker stamped the batch with its append time (stored as `max_timestamp`).
    LogAppendTime,
}

/// The fixed 61-byte header of a v2 batch, field for field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    /// Kafka's `baseTimestamp`: the first record's timestamp (or the delete horizon when
    /// attribute bit 6 is set); record timestamps are deltas from it.
    pub first_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

/// Copies `N` bytes at `at`, reporting a short buffer instead of panicking.
fn array_at<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N], BatchError> {
    let end = at.saturating_add(N);
    buf.get(at..end)
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .ok_or(BatchError::TooShort {
            needed: end,
            available: buf.len(),
        })
}

fn i64_at(buf: &[u8], at: usize) -> Result<i64, BatchError> {
    array_at(buf, at).map(i64::from_be_bytes)
}

fn i32_at(buf: &[u8], at: usize) -> Result<i32, BatchError> {
    array_at(buf, at).map(i32::from_be_bytes)
}

fn i16_at(buf: &[u8], at: usize) -> Result<i16, BatchError> {
    array_at(buf, at).map(i16::from_be_bytes)
}

fn u32_at(buf: &[u8], at: usize) -> Result<u32, BatchError> {
    array_at(buf, at).map(u32::from_be_bytes)
}

/// Overwrites `bytes.len()` bytes at `at`, reporting a short buffer instead of panicking.
fn write_at(buf: &mut [u8], at: usize, bytes: &[u8]) -> Result<(), BatchError> {
    let available = buf.len();
    let end = at.saturating_add(bytes.len());
    let slot = buf.get_mut(at..end).ok_or(BatchError::TooShort {
        needed: end,
        available,
    })?;
    slot.copy_from_slice(bytes);
    Ok(())
}

impl BatchHeader {
    /// Parses only the 61-byte header at the start of `buf`; checks that `batchLength` covers
    /// at least the rest of the header (49 bytes) and that magic is 2. The CRC is not checked,
    /// which keeps this cheap enough for walking a log file to find batch boundaries.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < BATCH_HEADER_LEN {
            return Err(BatchError::TooShort {
                needed: BATCH_HEADER_LEN,
                available: buf.len(),
            });
        }
        // Magic first: for an older format the length check would give a misleading message.
        let magic = array_at::<1>(buf, MAGIC_OFFSET).map(i8::from_be_bytes)?;
        if magic != MAGIC_V2 {
            return Err(BatchError::BadMagic(magic));
        }
        let batch_length = i32_at(buf, LENGTH_OFFSET)?;
        if batch_length < MIN_BATCH_LENGTH {
            return Err(BatchError::BadLength(batch_length));
        }
        Ok(BatchHeader {
            base_offset: i64_at(buf, BASE_OFFSET_OFFSET)?,
            batch_length,
            partition_leader_epoch: i32_at(buf, PARTITION_LEADER_EPOCH_OFFSET)?,
            magic,
            crc: u32_at(buf, CRC_OFFSET)?,
            attributes: i16_at(buf, ATTRIBUTES_OFFSET)?,
            last_offset_delta: i32_at(buf, LAST_OFFSET_DELTA_OFFSET)?,
            first_timestamp: i64_at(buf, FIRST_TIMESTAMP_OFFSET)?,
            max_timestamp: i64_at(buf, MAX_TIMESTAMP_OFFSET)?,
            producer_id: i64_at(buf, PRODUCER_ID_OFFSET)?,
            producer_epoch: i16_at(buf, PRODUCER_EPOCH_OFFSET)?,
            base_sequence: i32_at(buf, BASE_SEQUENCE_OFFSET)?,
            record_count: i32_at(buf, RECORD_COUNT_OFFSET)?,
        })
    }

    /// Bytes the whole batch occupies: `LOG_OVERHEAD + batch_length` (a negative length, only
    /// possible in a hand-built header, counts as zero).
    pub fn total_len(&self) -> usize {
        LOG_OVERHEAD.saturating_add(usize::try_from(self.batch_length).unwrap_or(0))
    }

    /// Offset of the last record the batch was built with: `base_offset + last_offset_delta`.
    /// Saturates instead of overflowing on a corrupt header; validated batches never overflow.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    /// The compression codec from attribute bits 0-2.
    ///
    /// # Errors
    /// [`BatchError::UnsupportedCompression`] for ids Kafka does not define.
    pub fn compression(&self) -> Result<Compression, BatchError> {
        // The mask keeps the value in 0..=7, so the cast is lossless.
        Compression::from_id((self.attributes & COMPRESSION_CODEC_MASK) as u8)
    }

    /// The timestamp type from attribute bit 3.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_MASK != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Attribute bit 4: the batch belongs to a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_MASK != 0
    }

    /// Attribute bit 5: the batch holds transaction markers, not user records.
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_MASK != 0
    }

    /// Attribute bit 6: `first_timestamp` holds the compaction delete horizon.
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & DELETE_HORIZON_MASK != 0
    }
}

/// One record header. Keys are non-null UTF-8 strings; values are nullable bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    pub key: String,
    pub value: Option<Bytes>,
}

/// A record to be encoded. `timestamp` is absolute milliseconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRecord {
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<RecordHeader>,
}

/// A decoded record with absolute offset and timestamp; key and value are zero-copy slices of
/// the batch's `Bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<RecordHeader>,
}

/// Header fields for [`encode_batch`] that do not come from the records themselves.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub timestamp_type: TimestampType,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
    /// Codec of the records section.
    pub compression: Compression,
}

impl Default for BatchOptions {
    /// A non-idempotent, non-transactional producer's batch at offset 0: the `-1` values are
    /// Kafka's "no producer id / epoch / sequence" sentinels.
    fn default() -> Self {
        BatchOptions {
            base_offset: 0,
            partition_leader_epoch: 0,
            timestamp_type: TimestampType::CreateTime,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            compression: Compression::None,
        }
    }
}

/// Converts a length to the `i32` Kafka stores, naming the field if it does not fit.
fn len_i32(len: usize, what: &'static str) -> Result<i32, BatchError> {
    i32::try_from(len).map_err(|_| BatchError::TooLarge { what })
}

/// Writes a varint length (or -1 for null) followed by the bytes.
fn put_nullable(
    out: &mut impl BufMut,
    data: Option<&[u8]>,
    what: &'static str,
) -> Result<(), BatchError> {
    match data {
        None => varint::encode_varint(-1, out),
        Some(data) => {
            varint::encode_varint(len_i32(data.len(), what)?, out);
            out.put_slice(data);
        }
    }
    Ok(())
}

/// The bytes [`put_nullable`] writes for `data`.
fn nullable_len(data: Option<&[u8]>, what: &'static str) -> Result<usize, BatchError> {
    match data {
        None => Ok(varint::varint_len(-1)),
        Some(data) => Ok(varint::varint_len(len_i32(data.len(), what)?) + data.len()),
    }
}

/// Encodes `records` as one v2 batch (records compressed with `options.compression`),
/// byte-for-byte as Kafka's producer would:
/// offset deltas are `0..n-1`, timestamp deltas are relative to the first record's timestamp
/// (so they may be negative), `maxTimestamp` is the largest record timestamp and
/// `lastOffsetDelta` is `n-1`. Fails on an empty slice or when a size exceeds `i32`.
pub fn encode_batch(options: &BatchOptions, records: &[NewRecord]) -> Result<Bytes, BatchError> {
    encode_parts(options, records).map(|(bytes, _)| bytes)
}

/// One record's fields relative to its batch, with its encoded length worked out up front so
/// the record goes straight into the batch buffer (no per-record scratch buffer).
struct RecordLayout {
    timestamp_delta: i64,
    offset_delta: i32,
    /// Bytes after the record's length varint.
    body_len: i32,
}

impl RecordLayout {
    fn new(record: &NewRecord, index: usize, first_timestamp: i64) -> Result<Self, BatchError> {
        let offset_delta = len_i32(index, "record count")?;
        let timestamp_delta = record
            .timestamp
            .checked_sub(first_timestamp)
            .ok_or(BatchError::TimestampOverflow)?;
        let mut len = 1 // record attributes: unused in v2
            + varint::varlong_len(timestamp_delta)
            + varint::varint_len(offset_delta)
            + nullable_len(record.key.as_deref(), "record key")?
            + nullable_len(record.value.as_deref(), "record value")?
            + varint::varint_len(len_i32(record.headers.len(), "header count")?);
        for header in &record.headers {
            len += nullable_len(Some(header.key.as_bytes()), "header key")?;
            len += nullable_len(header.value.as_deref(), "header value")?;
        }
        Ok(RecordLayout {
            timestamp_delta,
            offset_delta,
            body_len: len_i32(len, "record")?,
        })
    }

    /// Bytes of the record, its length varint included.
    fn encoded_len(&self) -> usize {
        varint::varint_len(self.body_len) + self.body_len as usize
    }

    fn put(&self, record: &NewRecord, out: &mut impl BufMut) -> Result<(), BatchError> {
        varint::encode_varint(self.body_len, out);
        out.put_i8(0); // record attributes: unused in v2
        varint::encode_varlong(self.timestamp_delta, out);
        varint::encode_varint(self.offset_delta, out);
        put_nullable(out, record.key.as_deref(), "record key")?;
        put_nullable(out, record.value.as_deref(), "record value")?;
        varint::encode_varint(len_i32(record.headers.len(), "header count")?, out);
        for header in &record.headers {
            put_nullable(out, Some(header.key.as_bytes()), "header key")?;
            put_nullable(out, header.value.as_deref(), "header value")?;
        }
        Ok(())
    }
}

/// [`encode_batch`], also returning the uncompressed records section, so
/// [`RecordBatch::encode`] builds a batch without decoding (or decompressing) what it just
/// wrote. An uncompressed batch is written into one buffer of its exact size: each value is
/// copied once, and a large batch costs one allocation instead of a growing scratch buffer
/// and two more copies.
fn encode_parts(
    options: &BatchOptions,
    records: &[NewRecord],
) -> Result<(Bytes, Bytes), BatchError> {
    let first = records.first().ok_or(BatchError::EmptyBatch)?;
    let first_timestamp = first.timestamp;
    let max_timestamp = records
        .iter()
        .map(|r| r.timestamp)
        .max()
        .unwrap_or(first_timestamp);
    let layouts = records
        .iter()
        .enumerate()
        .map(|(index, record)| RecordLayout::new(record, index, first_timestamp))
        .collect::<Result<Vec<_>, _>>()?;
    let plain_len = layouts.iter().try_fold(0usize, |sum, layout| {
        sum.checked_add(layout.encoded_len())
            .ok_or(BatchError::TooLarge { what: "batch" })
    })?;
    let header = HeaderFields {
        options,
        record_count: records.len(),
        first_timestamp,
        max_timestamp,
    };
    if options.compression == Compression::None {
        let mut out = header.start(plain_len)?;
        put_records(&layouts, records, &mut out)?;
        let batch = header.finish(out)?;
        let plain = batch.slice(BATCH_HEADER_LEN..);
        return Ok((batch, plain));
    }
    let mut plain = Vec::with_capacity(plain_len);
    put_records(&layouts, records, &mut plain)?;
    let compressed = super::compression::compress(options.compression, &plain)?;
    let mut out = header.start(compressed.len())?;
    out.extend_from_slice(&compressed);
    Ok((header.finish(out)?, Bytes::from(plain)))
}

fn put_records(
    layouts: &[RecordLayout],
    records: &[NewRecord],
    out: &mut impl BufMut,
) -> Result<(), BatchError> {
    for (layout, record) in layouts.iter().zip(records) {
        layout.put(record, out)?;
    }
    Ok(())
}

/// The batch header's fields that come from the options and the records.
struct HeaderFields<'a> {
    options: &'a BatchOptions,
    record_count: usize,
    first_timestamp: i64,
    max_timestamp: i64,
}

impl HeaderFields<'_> {
    /// A buffer of the whole batch's size holding the header (CRC still zero).
    fn start(&self, records_len: usize) -> Result<BytesMut, BatchError> {
        let options = self.options;
        let total = BATCH_HEADER_LEN
            .checked_add(records_len)
            .ok_or(BatchError::TooLarge { what: "batch" })?;
        let batch_length = len_i32(total.saturating_sub(LOG_OVERHEAD), "batch")?;
        let mut attributes = i16::from(options.compression.id());
        if options.timestamp_type == TimestampType::LogAppendTime {
            attributes |= TIMESTAMP_TYPE_MASK;
        }
        if options.transactional {
            attributes |= TRANSACTIONAL_MASK;
        }
        let mut out = BytesMut::with_capacity(total);
        out.put_i64(options.base_offset);
        out.put_i32(batch_length);
        out.put_i32(options.partition_leader_epoch);
        out.put_i8(MAGIC_V2);
        out.put_u32(0); // CRC, filled in by `finish` once the covered bytes exist
        out.put_i16(attributes);
        out.put_i32(len_i32(
            self.record_count.saturating_sub(1),
            "record count",
        )?);
        out.put_i64(self.first_timestamp);
        out.put_i64(self.max_timestamp);
        out.put_i64(options.producer_id);
        out.put_i16(options.producer_epoch);
        out.put_i32(options.base_sequence);
        out.put_i32(len_i32(self.record_count, "record count")?);
        Ok(out)
    }

    /// Fills in the CRC over the finished batch.
    fn finish(&self, mut out: BytesMut) -> Result<Bytes, BatchError> {
        let crc = crc32c::crc32c(out.get(ATTRIBUTES_OFFSET..).unwrap_or_default());
        write_at(&mut out, CRC_OFFSET, &crc.to_be_bytes())?;
        Ok(out.freeze())
    }
}

/// Whether `batch` (exactly one batch, header included) has the CRC its header states: cheap
/// enough to settle which of two neighbouring batches claims wrong offsets.
pub fn crc_matches(batch: &[u8]) -> bool {
    BatchHeader::parse(batch)
        .is_ok_and(|header| batch.len() == header.total_len() && compute_crc(batch) == header.crc)
}

/// CRC-32C over the CRC-covered part of a batch (attributes to end).
fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(ATTRIBUTES_OFFSET..).unwrap_or_default())
}

/// Header values needed to turn record deltas into absolute offsets and timestamps.
#[derive(Debug, Clone, Copy)]
struct RecordContext {
    base_offset: i64,
    first_timestamp: i64,
    max_timestamp: i64,
    log_append_time: bool,
}

impl RecordContext {
    fn new(header: &BatchHeader) -> Self {
        RecordContext {
            base_offset: header.base_offset,
            first_timestamp: header.first_timestamp,
            max_timestamp: header.max_timestamp,
            log_append_time: header.timestamp_type() == TimestampType::LogAppendTime,
        }
    }
}

/// Bounded reader over one record's bytes; every read stays inside `pos..end`.
struct RecordCursor<'a> {
    batch: &'a Bytes,
    pos: usize,
    end: usize,
    index: i32,
}

impl RecordCursor<'_> {
    fn bad(&self, reason: &'static str) -> BatchError {
        BatchError::BadRecord {
            index: self.index,
            reason,
        }
    }

    fn remaining(&self) -> &[u8] {
        self.batch.get(self.pos..self.end).unwrap_or_default()
    }

    fn varint_error(&self, err: VarintError) -> BatchError {
        match err {
            VarintError::Truncated => self.bad("the record ends in the middle of a varint"),
            VarintError::Overflow => {
                self.bad("the record contains an over-long or out-of-range varint")
            }
        }
    }

    fn i8(&mut self) -> Result<i8, BatchError> {
        let byte = *self
            .remaining()
            .first()
            .ok_or(self.bad("the record is empty"))?;
        self.pos = self.pos.saturating_add(1);
        Ok(i8::from_be_bytes([byte]))
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        let (value, len) =
            varint::decode_varint(self.remaining()).map_err(|e| self.varint_error(e))?;
        self.pos = self.pos.saturating_add(len);
        Ok(value)
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        let (value, len) =
            varint::decode_varlong(self.remaining()).map_err(|e| self.varint_error(e))?;
        self.pos = self.pos.saturating_add(len);
        Ok(value)
    }

    /// Takes `len` bytes as a zero-copy slice of the batch.
    fn take(&mut self, len: usize, reason: &'static str) -> Result<Bytes, BatchError> {
        let end = self.pos.checked_add(len).ok_or(self.bad(reason))?;
        if end > self.end || end > self.batch.len() {
            return Err(self.bad(reason));
        }
        let slice = self.batch.slice(self.pos..end);
        self.pos = end;
        Ok(slice)
    }

    /// Reads a varint length (-1 = null) and that many bytes.
    fn nullable_bytes(
        &mut self,
        negative: &'static str,
        overrun: &'static str,
    ) -> Result<Option<Bytes>, BatchError> {
        let len = self.varint()?;
        if len == -1 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|_| self.bad(negative))?;
        self.take(len, overrun).map(Some)
    }
}

/// Parses the record starting at `start` in `batch`; returns it and the position after it.
fn parse_record(
    batch: &Bytes,
    start: usize,
    index: i32,
    ctx: &RecordContext,
) -> Result<(Record, usize), BatchError> {
    let bad = |reason| BatchError::BadRecord { index, reason };
    let rest = batch
        .get(start..)
        .ok_or(bad("the record starts past the end of the batch"))?;
    let (length, length_len) = varint::decode_varint(rest).map_err(|e| match e {
        VarintError::Truncated => bad("the batch ends in the middle of a record length"),
        VarintError::Overflow => bad("the record length is an over-long or out-of-range varint"),
    })?;
    let length = usize::try_from(length).map_err(|_| bad("the record length is negative"))?;
    let body_start = start.saturating_add(length_len);
    let end = body_start
        .checked_add(length)
        .filter(|&end| end <= batch.len())
        .ok_or(bad("the record length extends past the end of the batch"))?;
    let mut cursor = RecordCursor {
        batch,
        pos: body_start,
        end,
        index,
    };

    let _attributes = cursor.i8()?; // unused in v2; Kafka ignores them too
    let timestamp_delta = cursor.varlong()?;
    let offset_delta = cursor.varint()?;
    let key = cursor.nullable_bytes(
        "the key length is negative but not -1",
        "the key extends past the end of the record",
    )?;
    let value = cursor.nullable_bytes(
        "the value length is negative but not -1",
        "the value extends past the end of the record",
    )?;
    let header_count = cursor.varint()?;
    let header_count =
        usize::try_from(header_count).map_err(|_| bad("the header count is negative"))?;
    // Each header takes at least two bytes, so a huge count cannot force a huge allocation.
    let mut headers = Vec::with_capacity(header_count.min(cursor.remaining().len() / 2));
    for _ in 0..header_count {
        let key_len = cursor.varint()?;
        let key_len = usize::try_from(key_len)
            .map_err(|_| bad("a header key is null or has a negative length"))?;
        let key_bytes = cursor.take(key_len, "a header key extends past the end of the record")?;
        let key = std::str::from_utf8(&key_bytes)
            .map_err(|_| bad("a header key is not valid UTF-8"))?
            .to_owned();
        let value = cursor.nullable_bytes(
            "a header value length is negative but not -1",
            "a header value extends past the end of the record",
        )?;
        headers.push(RecordHeader { key, value });
    }
    if cursor.pos != end {
        return Err(bad(
            "the record length does not match the size of its fields",
        ));
    }

    let offset = ctx
        .base_offset
        .checked_add(i64::from(offset_delta))
        .ok_or(bad("the record offset overflows a 64-bit integer"))?;
    let timestamp = if ctx.log_append_time {
        // With LogAppendTime the broker's time lives in maxTimestamp, as in Kafka.
        ctx.max_timestamp
    } else {
        ctx.first_timestamp
            .checked_add(timestamp_delta)
            .ok_or(bad("the record timestamp overflows a 64-bit integer"))?
    };
    Ok((
        Record {
            offset,
            timestamp,
            key,
            value,
            headers,
        },
        end,
    ))
}

/// Checks that every record of a records section parses, that offsets rise within the
/// header's range, and that the count matches the header; shows each sound record to `visit`.
fn check_records(
    records: &Bytes,
    header: &BatchHeader,
    mut visit: impl FnMut(&Record),
) -> Result<(), BatchError> {
    let mut count: i32 = 0;
    let mut previous: Option<i64> = None;
    let last_offset = header.last_offset();
    for (index, record) in RecordIter::new(records, header).enumerate() {
        let record = record?;
        let index = i32::try_from(index).unwrap_or(i32::MAX);
        let bad = |reason| BatchError::BadRecord { index, reason };
        if record.offset < header.base_offset {
            return Err(bad("the offset delta is negative"));
        }
        if previous.is_some_and(|previous| record.offset <= previous) {
            return Err(bad(
                "the offset delta is not greater than the previous record's",
            ));
        }
        if record.offset > last_offset {
            return Err(bad(
                "the offset delta exceeds the batch's last offset delta",
            ));
        }
        visit(&record);
        previous = Some(record.offset);
        count = count.saturating_add(1);
    }
    if count != header.record_count {
        return Err(BatchError::RecordCountMismatch {
            header: header.record_count,
            actual: count,
        });
    }
    Ok(())
}

/// Iterator over the records of one batch; stops after the first error.
struct RecordIter<'a> {
    batch: &'a Bytes,
    pos: usize,
    index: i32,
    ctx: RecordContext,
    failed: bool,
}

impl<'a> RecordIter<'a> {
    /// Records of a records section (the batch after its header, decompressed).
    fn new(batch: &'a Bytes, header: &BatchHeader) -> Self {
        RecordIter {
            batch,
            pos: 0,
            index: 0,
            ctx: RecordContext::new(header),
            failed: false,
        }
    }
}

impl Iterator for RecordIter<'_> {
    type Item = Result<Record, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.batch.len() {
            return None;
        }
        match parse_record(self.batch, self.pos, self.index, &self.ctx) {
            Ok((record, next)) => {
                self.pos = next;
                self.index = self.index.saturating_add(1);
                Some(Ok(record))
            }
            Err(err) => {
                self.failed = true;
                Some(Err(err))
            }
        }
    }
}

/// A whole batch that passed full validation: header, length, CRC, every record parses, the
/// record count matches, compression is none, and offset deltas are non-negative, strictly
/// increasing and at most `lastOffsetDelta` (gaps are allowed: compaction leaves them).
#[derive(Debug, Clone)]
pub struct RecordBatch {
    header: BatchHeader,
    bytes: Bytes,
    /// The records section: a slice of `bytes` after the header, or its decompressed form.
    records: Bytes,
}

// A batch always has at least a 61-byte header, so an `is_empty` would always be false.
#[allow(clippy::len_without_is_empty)]
impl RecordBatch {
    /// Validates the first batch in `buf` and returns it; [`RecordBatch::len`] says how many
    /// bytes it occupies. Extra trailing bytes are fine (they are the next batch, or a partial
    /// one).
    pub fn decode_first(buf: &Bytes) -> Result<RecordBatch, BatchError> {
        Self::decode_first_with(buf, |_| {})
    }

    /// [`RecordBatch::decode_first`], showing `visit` each record as it is checked: a caller
    /// that must look at every record (the produce path: timestamps, keys) then parses the
    /// records once, not twice. A record is shown only once everything before it checked out.
    pub fn decode_first_with(
        buf: &Bytes,
        visit: impl FnMut(&Record),
    ) -> Result<RecordBatch, BatchError> {
        let header = BatchHeader::parse(buf)?;
        let total = header.total_len();
        if buf.len() < total {
            return Err(BatchError::TooShort {
                needed: total,
                available: buf.len(),
            });
        }
        let bytes = buf.slice(..total);
        let computed = compute_crc(&bytes);
        if computed != header.crc {
            return Err(BatchError::CrcMismatch {
                stored: header.crc,
                computed,
            });
        }
        let codec = header.compression()?;
        if header.last_offset_delta < 0 {
            return Err(BatchError::BadHeader {
                reason: "the last offset delta is negative",
            });
        }
        if header
            .base_offset
            .checked_add(i64::from(header.last_offset_delta))
            .is_none()
        {
            return Err(BatchError::BadHeader {
                reason: "the base offset plus the last offset delta overflows a 64-bit integer",
            });
        }

        let body = bytes.slice(BATCH_HEADER_LEN..);
        let records = match codec {
            Compression::None => body,
            codec => Bytes::from(super::compression::decompress(codec, &body)?),
        };
        check_records(&records, &header, visit)?;
        Ok(RecordBatch {
            header,
            bytes,
            records,
        })
    }

    /// Encodes `records` as one batch (see [`encode_batch`]) and returns it as a batch, without
    /// validating the bytes it just built: the encoder only writes what decoding accepts (the
    /// property test `encode_equals_decode_of_encoded` holds it to that).
    ///
    /// # Errors
    /// As [`encode_batch`].
    pub fn encode(
        options: &BatchOptions,
        records: &[NewRecord],
    ) -> Result<RecordBatch, BatchError> {
        let (bytes, plain) = encode_parts(options, records)?;
        let header = BatchHeader::parse(&bytes)?;
        // Uncompressed, the records section is a slice of the batch: one buffer, not two.
        let records = match options.compression {
            Compression::None => bytes.slice(BATCH_HEADER_LEN..),
            _ => plain,
        };
        Ok(RecordBatch {
            header,
            bytes,
            records,
        })
    }

    /// Like [`RecordBatch::decode_first`] but requires `buf` to be exactly one batch.
    pub fn decode_exact(buf: Bytes) -> Result<RecordBatch, BatchError> {
        let batch = Self::decode_first(&buf)?;
        if batch.len() != buf.len() {
            return Err(BatchError::LengthMismatch {
                batch: batch.len(),
                buffer: buf.len(),
            });
        }
        Ok(batch)
    }

    /// Extra checks for a batch a producer sends for appending: at least one record, not a
    /// control batch, `lastOffsetDelta == record_count - 1` and offset deltas exactly
    /// `0..record_count`. The last follows from the others without re-reading the records:
    /// validation already guarantees `record_count` strictly increasing deltas in
    /// `0..=lastOffsetDelta`, and with `lastOffsetDelta == record_count - 1` the only such
    /// sequence is `0, 1, ..., record_count - 1`.
    pub fn validate_for_append(&self) -> Result<(), BatchError> {
        let header = &self.header;
        if header.record_count < 1 {
            return Err(BatchError::NotAppendable {
                reason: "the batch has no records",
            });
        }
        if header.is_control() {
            return Err(BatchError::NotAppendable {
                reason: "producers may not append control batches",
            });
        }
        if i64::from(header.last_offset_delta) != i64::from(header.record_count) - 1 {
            return Err(BatchError::NotAppendable {
                reason: "the last offset delta is not the record count minus one",
            });
        }
        Ok(())
    }

    /// The parsed header.
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// The batch's bytes, exactly as validated (header included).
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Consumes the batch, returning its bytes.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Number of bytes the batch occupies (header included).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The batch with only the records `keep` accepts, for compaction. Every header field that
    /// gives kept records their meaning stays as it was (base offset, `lastOffsetDelta`, both
    /// timestamps, producer id, epoch and base sequence, attributes), and kept records are
    /// copied as their original bytes, so their offsets, timestamps and headers cannot change
    /// and the producer-state of the batch survives. Only the length, the record count and the
    /// CRC are new. `None` when no record is kept; the batch itself when all are.
    ///
    /// # Errors
    /// Only when the batch does not decode, which a validated batch never does.
    pub fn retain_records(
        &self,
        mut keep: impl FnMut(&Record) -> bool,
    ) -> Result<Option<Bytes>, BatchError> {
        let ctx = RecordContext::new(&self.header);
        let mut kept: Vec<std::ops::Range<usize>> = Vec::new();
        let mut total = 0usize;
        let mut position = 0;
        let mut index: i32 = 0;
        while position < self.records.len() {
            let (record, end) = parse_record(&self.records, position, index, &ctx)?;
            if keep(&record) {
                kept.push(position..end);
            }
            total += 1;
            position = end;
            index = index.saturating_add(1);
        }
        if kept.is_empty() {
            return Ok(None);
        }
        if kept.len() == total {
            return Ok(Some(self.bytes.clone()));
        }
        let body_len: usize = kept.iter().map(|r| r.len()).sum();
        let mut body = Vec::with_capacity(body_len);
        for range in &kept {
            body.extend_from_slice(self.records.get(range.clone()).unwrap_or_default());
        }
        // A compressed batch stays compressed with its codec.
        let body = super::compression::compress(self.header.compression()?, &body)?;
        let mut out = BytesMut::with_capacity(BATCH_HEADER_LEN + body.len());
        out.extend_from_slice(self.bytes.get(..BATCH_HEADER_LEN).unwrap_or_default());
        out.extend_from_slice(&body);
        let batch_length = len_i32(out.len() - LOG_OVERHEAD, "batch")?;
        write_at(&mut out, LENGTH_OFFSET, &batch_length.to_be_bytes())?;
        let count = len_i32(kept.len(), "record count")?;
        write_at(&mut out, RECORD_COUNT_OFFSET, &count.to_be_bytes())?;
        let crc = compute_crc(&out);
        write_at(&mut out, CRC_OFFSET, &crc.to_be_bytes())?;
        Ok(Some(out.freeze()))
    }

    /// The same batch stored with `codec`: the records section recompressed, every header
    /// field kept but the codec bits, the length and the CRC (a broker does this for a topic
    /// whose `compression.type` is not `producer`). The batch itself when it already uses it.
    ///
    /// # Errors
    /// When the encoder fails or the batch would not fit its 32-bit length.
    pub fn with_compression(&self, codec: Compression) -> Result<RecordBatch, BatchError> {
        if self.header.compression()? == codec {
            return Ok(self.clone());
        }
        let body = super::compression::compress(codec, &self.records)?;
        let mut out = BytesMut::with_capacity(BATCH_HEADER_LEN + body.len());
        out.extend_from_slice(self.bytes.get(..BATCH_HEADER_LEN).unwrap_or_default());
        out.extend_from_slice(&body);
        let attributes = (self.header.attributes & !COMPRESSION_CODEC_MASK) | i16::from(codec.id());
        write_at(&mut out, ATTRIBUTES_OFFSET, &attributes.to_be_bytes())?;
        let batch_length = len_i32(out.len() - LOG_OVERHEAD, "batch")?;
        write_at(&mut out, LENGTH_OFFSET, &batch_length.to_be_bytes())?;
        let crc = compute_crc(&out);
        write_at(&mut out, CRC_OFFSET, &crc.to_be_bytes())?;
        let bytes = out.freeze();
        let header = BatchHeader::parse(&bytes)?;
        Ok(RecordBatch {
            header,
            bytes,
            records: self.records.clone(),
        })
    }

    /// The records with absolute offsets and timestamps (`first_timestamp + delta`, or
    /// `max_timestamp` for LogAppendTime batches, as Kafka does). A validated batch never
    /// yields an `Err`; the `Result` keeps the signature honest and panic-free.
    pub fn records(&self) -> impl Iterator<Item = Result<Record, BatchError>> + '_ {
        RecordIter::new(&self.records, &self.header)
    }
}

/// Fully validated batches, one after the other, from bytes that hold whole batches back to
/// back (a read slice). Yields the first failure and then stops: nothing after a batch that
/// does not decode can be located safely.
#[derive(Debug, Clone)]
pub struct Batches {
    rest: Bytes,
    failed: bool,
}

impl Batches {
    /// Batches of `bytes`, from its start.
    pub fn new(bytes: Bytes) -> Self {
        Batches {
            rest: bytes,
            failed: false,
        }
    }
}

impl Iterator for Batches {
    type Item = Result<RecordBatch, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        match RecordBatch::decode_first(&self.rest) {
            Ok(batch) => {
                self.rest = self.rest.slice(batch.len()..);
                Some(Ok(batch))
            }
            Err(error) => {
                self.failed = true;
                Some(Err(error))
            }
        }
    }
}

/// Walks the whole batches in a byte range of a log file, yielding each batch's position
/// (relative to `buf`) and header. Only headers are parsed (no CRC, no records), so this is
/// cheap enough for readers and index rebuilds. A batch cut off by the end of `buf`, or a bad
/// header, yields one `Err` and ends the walk, since nothing after it can be located.
pub fn batch_headers(
    buf: &[u8],
) -> impl Iterator<Item = Result<(usize, BatchHeader), BatchError>> + '_ {
    let mut pos = 0usize;
    let mut done = false;
    std::iter::from_fn(move || {
        if done || pos >= buf.len() {
            return None;
        }
        let rest = buf.get(pos..).unwrap_or_default();
        let result = BatchHeader::parse(rest).and_then(|header| {
            let total = header.total_len();
            if rest.len() < total {
                Err(BatchError::TooShort {
                    needed: total,
                    available: rest.len(),
                })
            } else {
                Ok(header)
            }
        });
        match result {
            Ok(header) => {
                let at = pos;
                pos = pos.saturating_add(header.total_len());
                Some(Ok((at, header)))
            }
            Err(err) => {
                done = true;
                Some(Err(err))
            }
        }
    })
}

/// Requires `buf` to start with a v2 header so the writers below never scribble on
/// something that is not a batch.
fn check_v2_header(buf: &[u8]) -> Result<(), BatchError> {
    if buf.len() < BATCH_HEADER_LEN {
        return Err(BatchError::TooShort {
            needed: BATCH_HEADER_LEN,
            available: buf.len(),
        });
    }
    let magic = array_at::<1>(buf, MAGIC_OFFSET).map(i8::from_be_bytes)?;
    if magic != MAGIC_V2 {
        return Err(BatchError::BadMagic(magic));
    }
    Ok(())
}

/// Overwrites baseOffset in place. The CRC does not cover it, so the batch stays valid; this is
/// how the broker assigns offsets to a producer batch without re-encoding it.
pub fn write_base_offset(buf: &mut [u8], base_offset: i64) -> Result<(), BatchError> {
    check_v2_header(buf)?;
    write_at(buf, BASE_OFFSET_OFFSET, &base_offset.to_be_bytes())
}

/// Overwrites partitionLeaderEpoch in place. Like baseOffset it is outside the CRC, so the
/// leader can stamp its epoch on append without re-encoding.
pub fn write_partition_leader_epoch(buf: &mut [u8], epoch: i32) -> Result<(), BatchError> {
    check_v2_header(buf)?;
    write_at(buf, PARTITION_LEADER_EPOCH_OFFSET, &epoch.to_be_bytes())
}

/// Turns the batch into a LogAppendTime batch stamped with `timestamp` (attribute bit 3 set,
/// maxTimestamp = `timestamp`) and recomputes the CRC, as a broker does for topics configured
/// with `message.timestamp.type=LogAppendTime`. `buf` must hold exactly the whole batch.
pub fn set_log_append_time(buf: &mut [u8], timestamp: i64) -> Result<(), BatchError> {
    let header = BatchHeader::parse(buf)?;
    if header.total_len() != buf.len() {
        return Err(BatchError::LengthMismatch {
            batch: header.total_len(),
            buffer: buf.len(),
        });
    }
    let attributes = header.attributes | TIMESTAMP_TYPE_MASK;
    write_at(buf, ATTRIBUTES_OFFSET, &attributes.to_be_bytes())?;
    write_at(buf, MAX_TIMESTAMP_OFFSET, &timestamp.to_be_bytes())?;
    let crc = compute_crc(buf);
    write_at(buf, CRC_OFFSET, &crc.to_be_bytes())
}

/// `(base offset, last offset)` of a batch header as unsigned offsets; a negative offset in a
/// header that passed validation cannot occur, so it clamps to 0 instead of panicking.
pub fn batch_offsets(header: &BatchHeader) -> (u64, u64) {
    let base = u64::try_from(header.base_offset).unwrap_or(0);
    let last = u64::try_from(header.last_offset()).unwrap_or(base);
    (base, last.max(base))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes(s: &[u8]) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(s))
    }

    fn record(timestamp: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> NewRecord {
        NewRecord {
            timestamp,
            key: key.map(Bytes::copy_from_slice),
            value: value.map(Bytes::copy_from_slice),
            headers: vec![],
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Encodes one record body with explicit deltas, for hand-built batches.
    fn raw_record(timestamp_delta: i64, offset_delta: i32, value: &[u8]) -> Vec<u8> {
        let mut body = vec![0u8];
        varint::encode_varlong(timestamp_delta, &mut body);
        varint::encode_varint(offset_delta, &mut body);
        varint::encode_varint(-1, &mut body);
        varint::encode_varint(value.len() as i32, &mut body);
        body.extend_from_slice(value);
        varint::encode_varint(0, &mut body);
        let mut out = Vec::new();
        varint::encode_varint(body.len() as i32, &mut out);
        out.extend_from_slice(&body);
        out
    }

    /// Builds a batch from raw record bytes, fixing up length and CRC.
    fn assemble(
        base_offset: i64,
        attributes: i16,
        last_offset_delta: i32,
        record_count: i32,
        records: &[u8],
    ) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i64(base_offset);
        out.put_i32((BATCH_HEADER_LEN - LOG_OVERHEAD + records.len()) as i32);
        out.put_i32(0);
        out.put_i8(2);
        out.put_u32(0);
        out.put_i16(attributes);
        out.put_i32(last_offset_delta);
        out.put_i64(1000);
        out.put_i64(1000);
        out.put_i64(-1);
        out.put_i16(-1);
        out.put_i32(-1);
        out.put_i32(record_count);
        out.extend_from_slice(records);
        fix_crc(&mut out);
        out
    }

    fn fix_crc(batch: &mut [u8]) {
        let crc = compute_crc(batch);
        batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn crc32c_known_answer() {
        // The standard CRC-32C check value.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }

    /// Produced by kafka-python 2.3.3's DefaultRecordBatchBuilder (an independent encoder).
    const KAFKA_PYTHON_BATCH: &str = "00000000000000000000004e00000000024f9f3d7300000000000100\
        00018bcfe568000000018bcfe56800ffffffffffffffffffffffffffff000000022a000000066b65790a76\
        616c75650402680276026e010c001302010000";

    #[test]
    fn matches_kafka_python_bytes() {
        let expected = hex(KAFKA_PYTHON_BATCH);
        let records = vec![
            NewRecord {
                timestamp: 1_700_000_000_000,
                key: bytes(b"key"),
                value: bytes(b"value"),
                headers: vec![
                    RecordHeader {
                        key: "h".into(),
                        value: bytes(b"v"),
                    },
                    RecordHeader {
                        key: "n".into(),
                        value: None,
                    },
                ],
            },
            record(1_699_999_999_990, None, Some(b"")),
        ];
        let encoded = encode_batch(&BatchOptions::default(), &records).unwrap();
        assert_eq!(encoded.as_ref(), expected.as_slice());

        let batch = RecordBatch::decode_exact(Bytes::from(expected)).unwrap();
        assert_eq!(batch.header().crc, 0x4f9f_3d73);
        assert_eq!(batch.header().max_timestamp, 1_700_000_000_000);
        assert_eq!(batch.header().last_offset(), 1);
        let decoded: Vec<Record> = batch.records().map(Result::unwrap).collect();
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[1].timestamp, 1_699_999_999_990);
        assert_eq!(decoded[1].key, None);
        assert_eq!(decoded[1].value, bytes(b""));
        assert_eq!(decoded[0].headers, records[0].headers);
        batch.validate_for_append().unwrap();
    }

    #[test]
    fn offset_gaps_decode_but_are_not_appendable() {
        let mut records = raw_record(0, 0, b"a");
        records.extend(raw_record(5, 2, b"b"));
        records.extend(raw_record(-3, 5, b"c"));
        let buf = assemble(100, 0, 5, 3, &records);
        let batch = RecordBatch::decode_exact(Bytes::from(buf)).unwrap();
        let offsets: Vec<i64> = batch.records().map(|r| r.unwrap().offset).collect();
        assert_eq!(offsets, [100, 102, 105]);
        let timestamps: Vec<i64> = batch.records().map(|r| r.unwrap().timestamp).collect();
        assert_eq!(timestamps, [1000, 1005, 997]);
        assert!(matches!(
            batch.validate_for_append(),
            Err(BatchError::NotAppendable { .. })
        ));
    }

    #[test]
    fn bad_offset_deltas_are_rejected() {
        let mut repeated = raw_record(0, 0, b"a");
        repeated.extend(raw_record(0, 0, b"b"));
        let err = RecordBatch::decode_exact(Bytes::from(assemble(0, 0, 1, 2, &repeated)));
        assert!(
            matches!(err, Err(BatchError::BadRecord { index: 1, .. })),
            "{err:?}"
        );

        let beyond = raw_record(0, 3, b"a");
        let err = RecordBatch::decode_exact(Bytes::from(assemble(0, 0, 2, 1, &beyond)));
        assert!(
            matches!(err, Err(BatchError::BadRecord { index: 0, .. })),
            "{err:?}"
        );

        let negative = raw_record(0, -1, b"a");
        let err = RecordBatch::decode_exact(Bytes::from(assemble(0, 0, 0, 1, &negative)));
        assert!(
            matches!(err, Err(BatchError::BadRecord { index: 0, .. })),
            "{err:?}"
        );
    }

    #[test]
    fn record_count_mismatch_is_rejected() {
        let records = raw_record(0, 0, b"a");
        let err = RecordBatch::decode_exact(Bytes::from(assemble(0, 0, 0, 2, &records)));
        assert_eq!(
            err.unwrap_err(),
            BatchError::RecordCountMismatch {
                header: 2,
                actual: 1
            }
        );
    }

    #[test]
    fn empty_compacted_batch_decodes_but_is_not_appendable() {
        let batch = RecordBatch::decode_exact(Bytes::from(assemble(7, 0, 3, 0, &[]))).unwrap();
        assert_eq!(batch.records().count(), 0);
        assert_eq!(batch.header().last_offset(), 10);
        assert!(batch.validate_for_append().is_err());
    }

    #[test]
    fn undefined_codecs_and_records_that_are_not_compressed_as_announced_are_errors() {
        for codec in 5..=7i16 {
            let buf = assemble(0, codec, 0, 1, &raw_record(0, 0, b"a"));
            let err = RecordBatch::decode_exact(Bytes::from(buf)).unwrap_err();
            assert_eq!(err, BatchError::UnsupportedCompression(codec as u8));
        }
        for codec in 1..=4i16 {
            let buf = assemble(0, codec, 0, 1, &raw_record(0, 0, b"a"));
            let err = RecordBatch::decode_exact(Bytes::from(buf)).unwrap_err();
            assert!(matches!(err, BatchError::Decompression { .. }), "{err:?}");
        }
    }

    #[test]
    fn compressed_batches_keep_their_bytes_and_decode_their_records() {
        let records: Vec<NewRecord> = (0..50)
            .map(|i| record(i, Some(b"key"), Some(&b"a repetitive value "[..])))
            .collect();
        for id in 1..=4u8 {
            let options = BatchOptions {
                compression: Compression::from_id(id).unwrap(),
                ..BatchOptions::default()
            };
            let bytes = encode_batch(&options, &records).unwrap();
            let plain = encode_batch(&BatchOptions::default(), &records).unwrap();
            assert!(bytes.len() < plain.len(), "codec {id} compresses");
            let batch = RecordBatch::decode_exact(bytes.clone()).unwrap();
            assert_eq!(batch.bytes(), &bytes, "stored as sent");
            assert_eq!(batch.header().compression().unwrap().id(), id);
            let values: Vec<_> = batch.records().map(|r| r.unwrap().value).collect();
            assert_eq!(values.len(), 50);
            assert!(
                values
                    .iter()
                    .all(|v| v.as_deref() == Some(&b"a repetitive value "[..]))
            );
            // Compaction keeps the codec.
            let kept = batch
                .retain_records(|r| r.offset % 2 == 0)
                .unwrap()
                .unwrap();
            let kept = RecordBatch::decode_exact(kept).unwrap();
            assert_eq!(kept.header().compression().unwrap().id(), id);
            assert_eq!(kept.records().count(), 25);
        }
    }

    #[test]
    fn control_batches_are_not_appendable() {
        let buf = assemble(0, CONTROL_MASK, 0, 1, &raw_record(0, 0, b"a"));
        let batch = RecordBatch::decode_exact(Bytes::from(buf)).unwrap();
        assert!(batch.header().is_control());
        assert!(batch.validate_for_append().is_err());
    }

    #[test]
    fn header_errors() {
        let good = encode_batch(&BatchOptions::default(), &[record(1, None, None)]).unwrap();
        let mut bad_magic = good.to_vec();
        bad_magic[MAGIC_OFFSET] = 1;
        assert_eq!(BatchHeader::parse(&bad_magic), Err(BatchError::BadMagic(1)));
        let mut bad_len = good.to_vec();
        bad_len[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&48i32.to_be_bytes());
        assert_eq!(BatchHeader::parse(&bad_len), Err(BatchError::BadLength(48)));
        assert_eq!(
            BatchHeader::parse(&good[..60]),
            Err(BatchError::TooShort {
                needed: 61,
                available: 60
            })
        );
        assert_eq!(
            encode_batch(&BatchOptions::default(), &[]),
            Err(BatchError::EmptyBatch)
        );
    }

    #[test]
    fn truncation_at_every_length_is_an_error() {
        let records = vec![
            record(5, Some(b"k"), Some(b"value")),
            NewRecord {
                timestamp: 9,
                key: None,
                value: None,
                headers: vec![RecordHeader {
                    key: "h".into(),
                    value: None,
                }],
            },
        ];
        let full = encode_batch(&BatchOptions::default(), &records).unwrap();
        for len in 0..full.len() {
            let prefix = full.slice(..len);
            assert!(
                RecordBatch::decode_first(&prefix).is_err(),
                "prefix of {len} decoded"
            );
            assert!(
                RecordBatch::decode_exact(prefix).is_err(),
                "prefix of {len} decoded"
            );
        }
        let mut extra = full.to_vec();
        extra.push(0);
        let extra = Bytes::from(extra);
        assert_eq!(RecordBatch::decode_first(&extra).unwrap().len(), full.len());
        assert_eq!(
            RecordBatch::decode_exact(extra).unwrap_err(),
            BatchError::LengthMismatch {
                batch: full.len(),
                buffer: full.len() + 1
            }
        );
    }

    #[test]
    fn log_append_time_uses_max_timestamp() {
        let options = BatchOptions {
            timestamp_type: TimestampType::LogAppendTime,
            ..Default::default()
        };
        let encoded =
            encode_batch(&options, &[record(10, None, None), record(30, None, None)]).unwrap();
        let batch = RecordBatch::decode_exact(encoded.clone()).unwrap();
        assert_eq!(
            batch.header().timestamp_type(),
            TimestampType::LogAppendTime
        );
        assert!(batch.records().all(|r| r.unwrap().timestamp == 30));

        let mut restamped = encode_batch(&BatchOptions::default(), &[record(10, None, None)])
            .unwrap()
            .to_vec();
        set_log_append_time(&mut restamped, 99).unwrap();
        let batch = RecordBatch::decode_exact(Bytes::from(restamped)).unwrap();
        assert_eq!(batch.records().next().unwrap().unwrap().timestamp, 99);
    }

    #[test]
    fn base_offset_and_epoch_rewrite_keep_crc_valid() {
        let mut buf = encode_batch(
            &BatchOptions::default(),
            &[record(1, None, bytes(b"v").as_deref())],
        )
        .unwrap()
        .to_vec();
        write_base_offset(&mut buf, 4242).unwrap();
        write_partition_leader_epoch(&mut buf, 7).unwrap();
        let batch = RecordBatch::decode_exact(Bytes::from(buf)).unwrap();
        assert_eq!(batch.header().base_offset, 4242);
        assert_eq!(batch.header().partition_leader_epoch, 7);
        assert_eq!(batch.records().next().unwrap().unwrap().offset, 4242);
        assert!(write_base_offset(&mut [0u8; 10], 1).is_err());
    }

    #[test]
    fn batch_headers_walks_a_segment() {
        let a = encode_batch(&BatchOptions::default(), &[record(1, None, None)]).unwrap();
        let options = BatchOptions {
            base_offset: 1,
            ..Default::default()
        };
        let b = encode_batch(&options, &[record(2, None, None), record(3, None, None)]).unwrap();
        let mut segment = a.to_vec();
        segment.extend_from_slice(&b);
        let walked: Vec<_> = batch_headers(&segment).map(Result::unwrap).collect();
        assert_eq!(walked.len(), 2);
        assert_eq!(walked[0].0, 0);
        assert_eq!(walked[1].0, a.len());
        assert_eq!(walked[1].1.last_offset(), 2);

        segment.extend_from_slice(&a[..30]);
        let walked: Vec<_> = batch_headers(&segment).collect();
        assert_eq!(walked.len(), 3);
        assert_eq!(
            walked[2],
            Err(BatchError::TooShort {
                needed: 61,
                available: 30
            })
        );
    }

    fn arb_bytes() -> impl Strategy<Value = Option<Bytes>> {
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..24).prop_map(Bytes::from))
    }

    fn arb_record() -> impl Strategy<Value = NewRecord> {
        let header =
            ("\\PC{0,6}", arb_bytes()).prop_map(|(key, value)| RecordHeader { key, value });
        (
            -1_000_000i64..1_000_000,
            arb_bytes(),
            arb_bytes(),
            proptest::collection::vec(header, 0..4),
        )
            .prop_map(|(timestamp, key, value, headers)| NewRecord {
                timestamp: 1_700_000_000_000 + timestamp,
                key,
                value,
                headers,
            })
    }

    fn arb_options() -> impl Strategy<Value = BatchOptions> {
        (
            0i64..i64::MAX / 2,
            any::<i32>(),
            any::<bool>(),
            any::<i64>(),
            any::<i16>(),
            any::<i32>(),
            any::<bool>(),
            0u8..5,
        )
            .prop_map(
                |(
                    base_offset,
                    epoch,
                    log_append,
                    producer_id,
                    producer_epoch,
                    base_sequence,
                    transactional,
                    codec,
                )| {
                    BatchOptions {
                        base_offset,
                        partition_leader_epoch: epoch,
                        timestamp_type: if log_append {
                            TimestampType::LogAppendTime
                        } else {
                            TimestampType::CreateTime
                        },
                        producer_id,
                        producer_epoch,
                        base_sequence,
                        transactional,
                        compression: Compression::from_id(codec).unwrap(),
                    }
                },
            )
    }

    fn valid_batch() -> impl Strategy<Value = Bytes> {
        (arb_options(), proptest::collection::vec(arb_record(), 1..6))
            .prop_map(|(options, records)| encode_batch(&options, &records).unwrap())
    }

    proptest! {
        #[test]
        fn round_trip(options in arb_options(), records in proptest::collection::vec(arb_record(), 1..10)) {
            let encoded = encode_batch(&options, &records).unwrap();
            let batch = RecordBatch::decode_exact(encoded.clone()).unwrap();
            batch.validate_for_append().unwrap();
            let header = batch.header();
            let max = records.iter().map(|r| r.timestamp).max().unwrap();
            prop_assert_eq!(header.base_offset, options.base_offset);
            prop_assert_eq!(header.partition_leader_epoch, options.partition_leader_epoch);
            prop_assert_eq!(header.producer_id, options.producer_id);
            prop_assert_eq!(header.producer_epoch, options.producer_epoch);
            prop_assert_eq!(header.base_sequence, options.base_sequence);
            prop_assert_eq!(header.is_transactional(), options.transactional);
            prop_assert_eq!(header.timestamp_type(), options.timestamp_type);
            prop_assert_eq!(header.first_timestamp, records[0].timestamp);
            prop_assert_eq!(header.max_timestamp, max);
            prop_assert_eq!(header.record_count as usize, records.len());
            prop_assert_eq!(header.last_offset_delta as usize, records.len() - 1);
            prop_assert_eq!(batch.len(), encoded.len());
            let decoded: Vec<Record> = batch.records().collect::<Result<_, _>>().unwrap();
            let expected: Vec<Record> = records
                .iter()
                .enumerate()
                .map(|(i, r)| Record {
                    offset: options.base_offset + i as i64,
                    timestamp: if options.timestamp_type == TimestampType::LogAppendTime { max } else { r.timestamp },
                    key: r.key.clone(),
                    value: r.value.clone(),
                    headers: r.headers.clone(),
                })
                .collect();
            prop_assert_eq!(decoded, expected);
            let walked: Vec<_> = batch_headers(&encoded).collect();
            prop_assert_eq!(walked, vec![Ok((0, header.clone()))]);
        }

        #[test]
        fn encode_equals_decode_of_encoded(options in arb_options(), records in proptest::collection::vec(arb_record(), 1..10)) {
            let built = RecordBatch::encode(&options, &records).unwrap();
            let decoded = RecordBatch::decode_exact(encode_batch(&options, &records).unwrap()).unwrap();
            prop_assert_eq!(built.header(), decoded.header());
            prop_assert_eq!(built.bytes(), decoded.bytes());
            let built_records: Vec<Record> = built.records().collect::<Result<_, _>>().unwrap();
            let decoded_records: Vec<Record> = decoded.records().collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(built_records, decoded_records);
        }

        #[test]
        fn retained_records_keep_offsets_timestamps_and_producer_fields(
            options in arb_options(),
            records in proptest::collection::vec(arb_record(), 1..10),
            mask in proptest::collection::vec(any::<bool>(), 10),
        ) {
            let batch = RecordBatch::decode_exact(encode_batch(&options, &records).unwrap()).unwrap();
            let all: Vec<Record> = batch.records().collect::<Result<_, _>>().unwrap();
            let wanted: Vec<Record> = all
                .iter()
                .zip(&mask)
                .filter(|(_, keep)| **keep)
                .map(|(r, _)| r.clone())
                .collect();
            let filtered = batch.retain_records(|r| mask[(r.offset - options.base_offset) as usize]).unwrap();
            match filtered {
                None => prop_assert!(wanted.is_empty()),
                Some(bytes) => {
                    let kept = RecordBatch::decode_exact(bytes).unwrap();
                    let decoded: Vec<Record> = kept.records().collect::<Result<_, _>>().unwrap();
                    prop_assert_eq!(decoded, wanted);
                    let (before, after) = (batch.header(), kept.header());
                    prop_assert_eq!(after.base_offset, before.base_offset);
                    prop_assert_eq!(after.last_offset_delta, before.last_offset_delta);
                    prop_assert_eq!(after.first_timestamp, before.first_timestamp);
                    prop_assert_eq!(after.max_timestamp, before.max_timestamp);
                    prop_assert_eq!(after.producer_id, before.producer_id);
                    prop_assert_eq!(after.producer_epoch, before.producer_epoch);
                    prop_assert_eq!(after.base_sequence, before.base_sequence);
                    prop_assert_eq!(after.attributes, before.attributes);
                }
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = BatchHeader::parse(&buf);
            let _ = batch_headers(&buf).count();
            let _ = write_base_offset(&mut buf.clone(), 1);
            let _ = set_log_append_time(&mut buf.clone(), 1);
            let bytes = Bytes::from(buf);
            if let Ok(batch) = RecordBatch::decode_first(&bytes) {
                prop_assert!(batch.records().all(|r| r.is_ok()));
            }
            let _ = RecordBatch::decode_exact(bytes);
        }

        #[test]
        fn arbitrary_record_bytes_never_panic(
            records in proptest::collection::vec(any::<u8>(), 0..120),
            attributes in any::<i16>(),
            last_offset_delta in any::<i32>(),
            record_count in any::<i32>(),
        ) {
            // Valid header and CRC, so the fuzzing reaches the record parser.
            let buf = assemble(i64::MAX - 3, attributes & !COMPRESSION_CODEC_MASK, last_offset_delta, record_count, &records);
            if let Ok(batch) = RecordBatch::decode_exact(Bytes::from(buf)) {
                prop_assert!(batch.records().all(|r| r.is_ok()));
                let _ = batch.validate_for_append();
            }
        }

        #[test]
        fn flipped_crc_covered_byte_is_rejected(batch in valid_batch(), pos in any::<prop::sample::Index>(), flip in 1u8..=255) {
            let mut buf = batch.to_vec();
            let pos = ATTRIBUTES_OFFSET + pos.index(buf.len() - ATTRIBUTES_OFFSET);
            buf[pos] ^= flip;
            prop_assert!(RecordBatch::decode_exact(Bytes::from(buf)).is_err());
        }

        #[test]
        fn mutated_batches_never_panic(batch in valid_batch(), pos in any::<prop::sample::Index>(), value in any::<u8>()) {
            let mut buf = batch.to_vec();
            let pos = pos.index(buf.len());
            buf[pos] = value;
            let bytes = Bytes::from(buf);
            if let Ok(batch) = RecordBatch::decode_first(&bytes) {
                prop_assert!(batch.records().all(|r| r.is_ok()));
            }
        }
    }
}

//! Everything that can be wrong with a record batch. Its own module so that the codecs
//! (`compression.rs`) can report failures without importing the batch format that uses them.

use super::varint::VarintError;

/// Everything that can be wrong with a batch, typed so callers can map errors to Kafka error
/// codes (e.g. `CORRUPT_MESSAGE`, `UNSUPPORTED_COMPRESSION_TYPE`, `INVALID_RECORD`).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// The buffer ends before the header or the batch it announces is complete.
    #[error(
        "the buffer is too short: {needed} bytes are needed but only {available} are available"
    )]
    TooShort { needed: usize, available: usize },
    /// The magic byte is not 2.
    #[error("the batch has magic byte {0}, but only magic 2 (log format v2) is supported")]
    BadMagic(i8),
    /// `batchLength` is smaller than the rest of the fixed header.
    #[error("the batch length field is {0}, which is less than the minimum of 49 bytes")]
    BadLength(i32),
    /// The stored CRC does not match the bytes it covers.
    #[error("the batch CRC is {stored:#010x} but the bytes it covers hash to {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    /// The attributes name a compression codec Kafka does not define (5-7).
    #[error("the batch uses compression codec {0}, which Kafka does not define")]
    UnsupportedCompression(u8),
    /// The records section does not decompress with the batch's codec.
    #[error("the batch's {codec} records do not decompress: {reason}")]
    Decompression {
        /// The codec's name.
        codec: &'static str,
        /// What the decoder said.
        reason: String,
    },
    /// `recordCount` disagrees with the number of records actually present.
    #[error("the batch header declares {header} records but the batch contains {actual}")]
    RecordCountMismatch { header: i32, actual: i32 },
    /// A record (0-based `index` within the batch) is malformed.
    #[error("record {index} of the batch is invalid: {reason}")]
    BadRecord { index: i32, reason: &'static str },
    /// A header field is inconsistent with the rest of the header.
    #[error("the batch header is invalid: {reason}")]
    BadHeader { reason: &'static str },
    /// A varint was longer than its maximum length or out of range.
    #[error("a varint is longer than its maximum length or does not fit its integer width")]
    VarintOverflow,
    /// Input ended in the middle of a varint.
    #[error("the input ended in the middle of a varint")]
    VarintTruncated,
    /// `decode_exact` was given a buffer that is not exactly one batch.
    #[error("the buffer holds {buffer} bytes but the batch in it is {batch} bytes long")]
    LengthMismatch { batch: usize, buffer: usize },
    /// `encode_batch` was called without records; Kafka batches always carry at least one.
    #[error("cannot encode a batch with no records")]
    EmptyBatch,
    /// A length or count does not fit the 32-bit field that must hold it.
    #[error("the {what} is too large to fit in a 32-bit size field")]
    TooLarge { what: &'static str },
    /// A record timestamp is so far from the first one that the delta overflows 64 bits.
    #[error("a record timestamp differs from the first record's by more than 64 bits can hold")]
    TimestampOverflow,
    /// The batch is well formed but may not be appended as a producer batch.
    #[error("the batch cannot be appended: {reason}")]
    NotAppendable { reason: &'static str },
}

impl From<VarintError> for BatchError {
    fn from(err: VarintError) -> Self {
        match err {
            VarintError::Truncated => BatchError::VarintTruncated,
            VarintError::Overflow => BatchError::VarintOverflow,
        }
    }
}

//! The storage engine: Kafka-format record batches in segment files, sparse indexes, a partition
//! log with group commit, and crash recovery. No HTTP and no object storage in here: the HTTP
//! layer and the tiering glue call into this module, never the other way round.
//!
//! # On-disk format (version 2)
//!
//! A partition is a directory:
//!
//! ```text
//! partition.json                    metadata (see below), replaced atomically
//! 00000000000000000000.log          record batches, Kafka log format v2, back to back
//! 00000000000000000000.index        sparse offset index
//! 00000000000000000000.timeindex    sparse time index
//! 00000000000000001234.log          next segment: its name is its base offset, 20 digits
//! ...
//! ```
//!
//! **Record batch** (Kafka "RecordBatch", magic 2; all integers big-endian):
//!
//! | bytes | field                  | notes                                                   |
//! |-------|------------------------|---------------------------------------------------------|
//! | 8     | baseOffset             | written by the broker at append; not covered by the CRC |
//! | 4     | batchLength            | bytes after this field                                  |
//! | 4     | partitionLeaderEpoch   |                                                         |
//! | 1     | magic                  | always 2                                                |
//! | 4     | crc                    | CRC-32C of everything from `attributes` to the end      |
//! | 2     | attributes             | bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd; see `compression.rs`), bit 3 timestamp type, bit 4 transactional, bit 5 control |
//! | 4     | lastOffsetDelta        |                                                         |
//! | 8     | baseTimestamp          | first record's timestamp (ms)                           |
//! | 8     | maxTimestamp           |                                                         |
//! | 8     | producerId             | -1 when not idempotent                                  |
//! | 2     | producerEpoch          |                                                         |
//! | 4     | baseSequence           |                                                         |
//! | 4     | recordCount            |                                                         |
//! | ...   | records                | `recordCount` v2 records                                |
//!
//! In a compressed batch the records section (everything after `recordCount`) is stored
//! compressed as the producer sent it; the CRC covers the compressed bytes.
//!
//! **Record** (v2): varint length, int8 attributes, varlong timestampDelta, varint offsetDelta,
//! varint keyLength (-1 = null) + key, varint valueLength (-1 = null) + value, varint header
//! count, then per header varint keyLength + UTF-8 key, varint valueLength (-1 = null) + value.
//! Varints are zig-zag encoded, 7 bits per byte, least significant group first.
//!
//! **`.index`**: 8-byte entries, `u32` base offset of a batch relative to the segment's base
//! offset, `u32` byte position of that batch; one entry per `index_interval_bytes` of log.
//!
//! **`.timeindex`**: 12-byte entries, `i64` largest record timestamp in the segment up to that
//! batch, `u32` relative base offset of the batch; written next to offset-index entries.
//!
//! **`partition.json`**: `{"version": 2, "log_start_offset": u64, "recovery_point": u64,
//! "clean_shutdown": bool, "log_end_offset": u64}`; `log_end_offset` is written by an orderly
//! close only (ADR 0005); version 1 files (without it) are still read.
//!
//! A batch whose magic byte is `0xfe` was quarantined by recovery: its base offset could not
//! be trusted, so no reader decodes it (ADR 0005).
//!
//! Offsets inside a segment are `u32` relative offsets and positions, so a segment never grows
//! beyond `2^31 - 1` bytes plus one batch, and the writer rolls before a relative offset would
//! leave `u32`. A format change needs an ADR and a version bump.

pub mod batch;
pub mod batch_error;
mod cache_window;
pub mod compaction;
pub mod compression;
pub mod config;
pub mod error;
pub mod meta;
pub mod offset_index;
pub mod partition;
mod preallocate;
pub mod producer_state;
pub mod read;
mod read_ahead;
pub mod recovery;
pub mod remote;
pub mod retention;
pub mod scan;
pub mod segment;
pub mod segment_state;
pub mod segments;
mod shared;
pub mod stats;
pub mod stream;
pub mod time_index;
pub mod types;
pub mod varint;
mod writer;

pub use batch::{
    BatchError, BatchHeader, BatchOptions, Batches, NewRecord, Record, RecordBatch, RecordHeader,
};
pub use config::LogConfig;
pub use partition::{
    Acks, AppendError, BatchAck, CloseError, ClosedSegment, LogOffsets, OpenError, Partition,
    ReadError, ReadSlice,
};
pub use recovery::RecoveryReport;

#[cfg(test)]
mod bitrot_tests;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod tests;

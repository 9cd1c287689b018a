//! Small values the engine hands out and takes in: offsets of a partition, when an append is
//! acknowledged, and the offsets an appended batch got. Shared by the partition, its writer,
//! recovery and producer state without any of them importing another.

/// Offsets that describe a partition at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogOffsets {
    /// First offset still in the log.
    pub log_start_offset: u64,
    /// First offset that is not durable yet; readers see only offsets below it.
    pub high_watermark: u64,
    /// Offset the next appended record will get.
    pub log_end_offset: u64,
}

/// When an append is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Acks {
    /// After the fdatasync that covers the batch: survives power loss.
    #[default]
    All,
    /// After the write reached the page cache: survives a process crash, not a power loss.
    Leader,
}

/// Offsets assigned to one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchAck {
    /// Offset of the batch's first record.
    pub base_offset: u64,
    /// Offset of the batch's last record.
    pub last_offset: u64,
    /// True when the batch was an idempotent producer's retry of a batch already in the log:
    /// these are the offsets it got the first time and nothing was appended.
    pub duplicate: bool,
}

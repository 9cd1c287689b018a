//! Settings of one partition log, with Kafka's defaults.

use thiserror::Error;

use super::batch::BATCH_HEADER_LEN;

/// Kafka's `segment.bytes` default: 1 GiB.
pub const DEFAULT_SEGMENT_BYTES: u64 = 1 << 30;
/// Kafka's `segment.ms` default: 7 days.
pub const DEFAULT_SEGMENT_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// Kafka's `index.interval.bytes` default.
pub const DEFAULT_INDEX_INTERVAL_BYTES: u64 = 4096;
/// Kafka's `max.message.bytes` default (1 MiB plus batch overhead): the largest batch accepted.
pub const DEFAULT_MAX_BATCH_BYTES: u64 = 1_048_588;
/// Upper bound of bytes one group-commit round writes before it fsyncs; larger rounds only
/// delay the acknowledgements of the requests at their start.
pub const DEFAULT_MAX_ROUND_BYTES: u64 = 16 << 20;
/// Appends waiting for the writer before new ones are refused as busy (retryable).
pub const DEFAULT_APPEND_QUEUE_DEPTH: usize = 4096;
/// How often an idle writer checks whether its active segment is old enough to roll.
pub const DEFAULT_ROLL_CHECK_INTERVAL_MS: u64 = 1000;
/// Bytes at the end of the active segment kept in the page cache; older durable bytes are
/// dropped from it (see `cache_window`). Enough for consumers that follow the end.
pub const DEFAULT_PAGE_CACHE_WINDOW_BYTES: u64 = 8 << 20;
/// Bytes reserved at a time ahead of the active segment's writes (see `preallocate`): an
/// fdatasync inside reserved bytes skips the journal commit an append needs. Also the most
/// disk space an active segment holds beyond its data.
pub const DEFAULT_SEGMENT_PREALLOCATE_BYTES: u64 = 4 << 20;
/// Positions in a segment are `u32`; Kafka caps `segment.bytes` at `i32::MAX` as well, which
/// leaves room for one maximal batch past the limit without leaving `u32`.
pub const MAX_SEGMENT_BYTES: u64 = i32::MAX as u64;

const _: () = assert!(DEFAULT_SEGMENT_BYTES <= MAX_SEGMENT_BYTES);
const _: () = assert!(MAX_SEGMENT_BYTES + MAX_SEGMENT_BYTES < u32::MAX as u64 + 2);

/// Settings of one partition log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll the active segment before it grows past this many bytes.
    pub segment_bytes: u64,
    /// Roll the active segment once it is this old, even without new writes.
    pub segment_ms: i64,
    /// Log bytes between two sparse index entries.
    pub index_interval_bytes: u64,
    /// Largest single batch accepted.
    pub max_batch_bytes: u64,
    /// Largest write of one group-commit round.
    pub max_round_bytes: u64,
    /// Bound of the writer's queue.
    pub append_queue_depth: usize,
    /// Period of the idle-roll check.
    pub roll_check_interval_ms: u64,
    /// Bytes at the end of the active segment kept in the page cache (0: all, as the
    /// kernel decides).
    pub page_cache_window_bytes: u64,
    /// Bytes reserved at a time ahead of the active segment's writes (0: none, the file grows
    /// with every write).
    pub segment_preallocate_bytes: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            segment_ms: DEFAULT_SEGMENT_MS,
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            max_batch_bytes: DEFAULT_MAX_BATCH_BYTES,
            max_round_bytes: DEFAULT_MAX_ROUND_BYTES,
            append_queue_depth: DEFAULT_APPEND_QUEUE_DEPTH,
            roll_check_interval_ms: DEFAULT_ROLL_CHECK_INTERVAL_MS,
            page_cache_window_bytes: DEFAULT_PAGE_CACHE_WINDOW_BYTES,
            segment_preallocate_bytes: DEFAULT_SEGMENT_PREALLOCATE_BYTES,
        }
    }
}

/// A setting outside its valid range.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{setting} = {value} is out of range: {rule}")]
pub struct LogConfigError {
    /// Setting name.
    pub setting: &'static str,
    /// The rejected value.
    pub value: i128,
    /// The rule it breaks.
    pub rule: &'static str,
}

impl LogConfig {
    /// Checks every bound; reports the first violation.
    ///
    /// # Errors
    /// [`LogConfigError`] naming the setting.
    pub fn validate(&self) -> Result<(), LogConfigError> {
        let header = BATCH_HEADER_LEN as u64;
        check(
            "segment_bytes",
            self.segment_bytes.into(),
            self.segment_bytes >= header * 2 && self.segment_bytes <= MAX_SEGMENT_BYTES,
            "between 122 and 2147483647",
        )?;
        check(
            "segment_ms",
            self.segment_ms.into(),
            self.segment_ms >= 1,
            "at least 1",
        )?;
        check(
            "index_interval_bytes",
            self.index_interval_bytes.into(),
            self.index_interval_bytes <= MAX_SEGMENT_BYTES,
            "at most 2147483647",
        )?;
        check(
            "max_batch_bytes",
            self.max_batch_bytes.into(),
            self.max_batch_bytes >= header && self.max_batch_bytes <= MAX_SEGMENT_BYTES,
            "between 61 and 2147483647",
        )?;
        check(
            "max_round_bytes",
            self.max_round_bytes.into(),
            self.max_round_bytes >= self.max_batch_bytes,
            "at least max_batch_bytes",
        )?;
        check(
            "append_queue_depth",
            self.append_queue_depth as i128,
            self.append_queue_depth >= 1,
            "at least 1",
        )?;
        check(
            "roll_check_interval_ms",
            self.roll_check_interval_ms.into(),
            self.roll_check_interval_ms >= 1,
            "at least 1",
        )
    }

    /// Bytes to map for an active segment. A segment never grows past `segment_bytes` plus one
    /// batch, and both are at most [`MAX_SEGMENT_BYTES`], so mapping twice that covers any
    /// segment whatever the settings become later. Only address space is reserved: pages are
    /// mapped as readers touch written bytes.
    pub fn active_map_len(&self) -> usize {
        usize::try_from(2 * MAX_SEGMENT_BYTES).unwrap_or(usize::MAX)
    }
}

fn check(
    setting: &'static str,
    value: i128,
    ok: bool,
    rule: &'static str,
) -> Result<(), LogConfigError> {
    if ok {
        Ok(())
    } else {
        Err(LogConfigError {
            setting,
            value,
            rule,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_name_the_setting() {
        assert_eq!(LogConfig::default().validate(), Ok(()));
        let bad = LogConfig {
            segment_bytes: 10,
            ..LogConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().setting, "segment_bytes");
        let bad = LogConfig {
            max_round_bytes: 1,
            ..LogConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().setting, "max_round_bytes");
    }
}

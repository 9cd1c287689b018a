//! The disk ceiling: write + fdatasync of one request's bytes at a time, appended to a scratch
//! file, with std (as the engine's benches do). What an fsync-per-request log cannot beat.
//!
//! Like the server (its `cache_window`), the writers here drop the cached copy of durable bytes
//! more than [`CACHE_WINDOW`] behind the end, so the kernel hands their pages to the next
//! writes: on a VM that returns free memory to its host, writing into never-touched pages is
//! slower than the disk, and a baseline that paid for them would not be the ceiling.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::stats::{Recorder, Summary};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiskSummary {
    pub bytes_per_write: u64,
    #[serde(flatten)]
    pub summary: Summary,
}

/// Bytes behind the end of a baseline's file that stay in the page cache (the server's default).
pub const CACHE_WINDOW: u64 = 8 << 20;
/// Advice is given in steps of this many bytes.
const CACHE_STEP: u64 = 1 << 20;

/// A scratch file written at its end, as a log is: what the disk baseline and the durable
/// no-storage server write to.
pub struct ScratchLog {
    file: std::fs::File,
    /// Where the next write goes.
    end: u64,
    /// How much of the file left the page cache.
    dropped: u64,
    /// Length at which the file is emptied and written again from its start.
    roll_bytes: u64,
}

/// The scratch file's largest length (a segment's default size).
pub(crate) const ROLL_BYTES: u64 = 1 << 30;

impl ScratchLog {
    /// A log in `file`, written from its start.
    pub fn new(file: std::fs::File) -> Self {
        Self::rolling_at(file, ROLL_BYTES)
    }

    fn rolling_at(file: std::fs::File, roll_bytes: u64) -> Self {
        Self {
            file,
            end: 0,
            dropped: 0,
            roll_bytes,
        }
    }

    /// Writes `bytes` at the end and waits for fdatasync.
    pub fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all_at(bytes, self.end)?;
        self.file.sync_data()?;
        self.end += bytes.len() as u64;
        Ok(())
    }

    /// After appends: drops the cached pages [`CACHE_WINDOW`] behind the end, and past
    /// `roll_bytes` empties the file so it stays bounded, as a log rolls to a new segment.
    ///
    /// Emptied, not overwritten from the start: a write into blocks already written is about
    /// twice as fast as one that must allocate them (1 MiB + fdatasync here: 0.27 ms against
    /// 0.52-0.66 ms), and a baseline that overwrote would measure an operation no appending
    /// log performs.
    pub fn release_behind(&mut self) -> std::io::Result<()> {
        drop_cached_behind(&self.file, self.end, &mut self.dropped);
        if self.end > self.roll_bytes {
            self.file.set_len(0)?;
            self.end = 0;
            self.dropped = 0;
        }
        Ok(())
    }
}

/// Drops the cached pages of `file` from `dropped` up to [`CACHE_WINDOW`] before `end` (bytes
/// already made durable), and moves `dropped` there. Advice only: a failure changes nothing.
pub(crate) fn drop_cached_behind(file: &std::fs::File, end: u64, dropped: &mut u64) {
    use std::os::fd::AsRawFd as _;
    let until = end.saturating_sub(CACHE_WINDOW) / CACHE_STEP * CACHE_STEP;
    if until < *dropped + CACHE_STEP {
        return;
    }
    let (Ok(offset), Ok(len)) = (
        libc::off_t::try_from(*dropped),
        libc::off_t::try_from(until - *dropped),
    ) else {
        return;
    };
    // SAFETY: posix_fadvise only reads its integer arguments; the fd is open because `file` is
    // borrowed for the call, and advice never changes the file's contents.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_DONTNEED);
    }
    *dropped = until;
}

/// Times writes of `bytes` each followed by fdatasync for `duration`, in a scratch file in
/// `dir` that is removed afterwards. With `rate`, write k is due at `k / rate` seconds and its
/// latency counts from then, as the open-loop producers count theirs: a disk that idles between
/// writes answers more slowly than one kept busy, and the open-loop rows must be compared
/// with the former.
pub fn measure(
    dir: &Path,
    bytes: u64,
    duration: Duration,
    rate: Option<f64>,
) -> anyhow::Result<DiskSummary> {
    let file = tempfile::Builder::new()
        .prefix(".strata-loadtest-disk")
        .tempfile_in(dir)
        .with_context(|| format!("a scratch file in {}", dir.display()))?;
    let mut log = ScratchLog::new(OpenOptions::new().write(true).open(file.path())?);
    let buffer: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    let started = Instant::now();
    let mut recorder = Recorder::new(started, duration);
    let mut due = started;
    let interval = rate
        .filter(|rate| *rate > 0.0)
        .map(|rate| Duration::from_secs_f64(1.0 / rate));
    while started.elapsed() < duration {
        let t = match interval {
            Some(interval) => {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                let scheduled = due;
                due += interval;
                scheduled
            }
            None => Instant::now(),
        };
        log.append(&buffer)
            .context("disk baseline write + fdatasync")?;
        recorder.record(Instant::now(), t.elapsed(), 1, bytes);
        log.release_behind()
            .context("disk baseline: emptying the scratch file")?;
    }
    Ok(DiskSummary {
        bytes_per_write: bytes,
        summary: recorder.summary(started.elapsed().as_secs_f64().min(duration.as_secs_f64())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_behind_the_window_are_advised_in_whole_steps() {
        let file = tempfile::tempfile().expect("scratch file");
        let mut dropped = 0;
        drop_cached_behind(&file, CACHE_WINDOW + CACHE_STEP - 1, &mut dropped);
        assert_eq!(dropped, 0, "less than a step behind the window");
        drop_cached_behind(&file, CACHE_WINDOW + 3 * CACHE_STEP + 5, &mut dropped);
        assert_eq!(dropped, 3 * CACHE_STEP);
        drop_cached_behind(&file, CACHE_WINDOW + 3 * CACHE_STEP + 9, &mut dropped);
        assert_eq!(
            dropped,
            3 * CACHE_STEP,
            "never moves back or by less than a step"
        );
    }

    #[test]
    fn a_full_scratch_file_is_emptied_and_appended_to_again_not_overwritten() {
        let file = tempfile::tempfile().expect("scratch file");
        let mut log = ScratchLog::rolling_at(file.try_clone().expect("clone"), 2_500);
        for _ in 0..3 {
            log.append(&[7u8; 1_000]).expect("append");
            log.release_behind().expect("release");
        }
        assert_eq!(
            log.end, 0,
            "past the roll length the next write starts over"
        );
        assert_eq!(
            file.metadata().expect("metadata").len(),
            0,
            "the file is emptied, so the next writes allocate blocks as a log's appends do"
        );
        log.append(&[8u8; 1_000]).expect("append");
        assert_eq!(file.metadata().expect("metadata").len(), 1_000);
    }

    #[test]
    fn back_to_back_writes_fill_the_duration() {
        let dir = tempfile::tempdir().expect("tempdir");
        let disk = measure(dir.path(), 100, Duration::from_millis(50), None).expect("measured");
        assert!(disk.summary.requests > 0);
        assert_eq!(disk.summary.bytes, disk.summary.requests * 100);
    }

    #[test]
    fn a_paced_run_writes_on_schedule() {
        let dir = tempfile::tempdir().expect("tempdir");
        // 200 writes per second for 100 ms: writes at 0, 5, ..., 95 ms, so 20 of them (a
        // late fdatasync may push the last one past the end).
        let disk =
            measure(dir.path(), 100, Duration::from_millis(100), Some(200.0)).expect("measured");
        assert!(
            (18..=20).contains(&disk.summary.requests),
            "{} writes",
            disk.summary.requests
        );
    }
}

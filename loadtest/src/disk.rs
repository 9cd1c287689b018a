//! The disk ceiling: write + fdatasync of one request's bytes at a time, appended to a scratch
//! file, with std (as the engine's benches do). What an fsync-per-request log cannot beat.

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
    let handle = OpenOptions::new().write(true).open(file.path())?;
    let buffer: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    let started = Instant::now();
    let mut recorder = Recorder::new(started, duration);
    let mut position = 0u64;
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
        handle
            .write_all_at(&buffer, position)
            .context("disk baseline write")?;
        handle.sync_data().context("disk baseline fdatasync")?;
        recorder.record(Instant::now(), t.elapsed(), 1, bytes);
        position += bytes;
        // Keep the scratch file bounded (1 GiB): start over, as a log rolls segments.
        if position > 1 << 30 {
            position = 0;
        }
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

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
/// `dir` that is removed afterwards.
pub fn measure(dir: &Path, bytes: u64, duration: Duration) -> anyhow::Result<DiskSummary> {
    let file = tempfile::Builder::new()
        .prefix(".strata-loadtest-disk")
        .tempfile_in(dir)
        .with_context(|| format!("a scratch file in {}", dir.display()))?;
    let handle = OpenOptions::new().write(true).open(file.path())?;
    let buffer: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    let started = Instant::now();
    let mut recorder = Recorder::new(started, duration);
    let mut position = 0u64;
    while started.elapsed() < duration {
        let t = Instant::now();
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

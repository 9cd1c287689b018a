//! Group commit over bare TCP: the floor under every HTTP server's group commit on this
//! machine, for issue 15's goal 5b (8 producers of 100 KiB durable requests against the
//! disk's write + fdatasync line of 1 MiB).
//!
//! Each producer sends a length-prefixed body over loopback TCP and waits for a one-byte
//! answer; the server writes the body into the page cache as it arrives and answers once an
//! fdatasync that started after the write has finished ([`GroupLog`], the same log the HTTP
//! group-commit baseline uses). No HTTP, no JSON, no validation, no offsets. Any HTTP server
//! that stores and group-commits the same requests does all of this and more, so a rate this
//! run cannot reach is one no HTTP server reaches here. The line is measured just before and
//! just after, in the same run.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::disk;
use crate::group_log::GroupLog;
use crate::null_server;
use crate::stats::{Recorder, Summary};

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct TcpBound {
    pub producers: usize,
    pub request_bytes: u64,
    /// The producers' requests over bare TCP, group-committed.
    pub group_commit: Summary,
    /// Write + fdatasync of 1 MiB at a time, back to back: before and after the run.
    pub line_mib_per_s: [f64; 2],
    /// `group_commit.mib_per_s` over the mean of the two lines: goal 5b asks an HTTP server
    /// for 0.70.
    pub ratio_to_line: f64,
    /// Bytes the server wrote, counted by the log: every answered request's body.
    pub written_bytes: u64,
    /// Requests answered, warm-up included.
    pub answered: u64,
}

/// How a run is shaped.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub producers: usize,
    pub request_bytes: usize,
    pub warmup: Duration,
    pub duration: Duration,
}

/// Measures the line, the bare-TCP group commit, and the line again, in scratch files in `dir`.
pub async fn measure(dir: &Path, shape: Shape) -> anyhow::Result<TcpBound> {
    anyhow::ensure!(shape.producers > 0, "--producers must be at least 1");
    anyhow::ensure!(shape.request_bytes > 0, "--bytes must be at least 1");
    let line = |dir: &Path| disk::measure(dir, 1 << 20, shape.duration, None);
    let before = line(dir)?.summary.mib_per_s;
    let (address, log) = spawn_server(dir)?;
    let answered = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let window_start = started + shape.warmup;
    let end = window_start + shape.duration;
    let mut producers = Vec::with_capacity(shape.producers);
    for _ in 0..shape.producers {
        let answered = Arc::clone(&answered);
        producers.push(tokio::spawn(produce(
            address,
            shape,
            Recorder::new(window_start, shape.duration),
            end,
            answered,
        )));
    }
    let mut recorder = Recorder::new(window_start, shape.duration);
    for producer in producers {
        recorder.merge(&producer.await.context("a producer task")??);
    }
    let group_commit = recorder.summary(shape.duration.as_secs_f64());
    let after = line(dir)?.summary.mib_per_s;
    let mean_line = (before + after) / 2.0;
    Ok(TcpBound {
        producers: shape.producers,
        request_bytes: shape.request_bytes as u64,
        ratio_to_line: if mean_line > 0.0 {
            group_commit.mib_per_s / mean_line
        } else {
            0.0
        },
        group_commit,
        line_mib_per_s: [before, after],
        written_bytes: log.written()?,
        answered: answered.load(Ordering::Relaxed),
    })
}

/// One producer: a request at a time until `end`.
async fn produce(
    address: std::net::SocketAddr,
    shape: Shape,
    mut recorder: Recorder,
    end: Instant,
    answered: Arc<AtomicU64>,
) -> anyhow::Result<Recorder> {
    let mut stream = TcpStream::connect(address).await.context("connecting")?;
    stream.set_nodelay(true)?;
    let length = u32::try_from(shape.request_bytes).context("a body over 4 GiB")?;
    let mut request = length.to_be_bytes().to_vec();
    request.extend((0..shape.request_bytes).map(|i| (i % 251) as u8));
    let mut answer = [0u8; 1];
    while Instant::now() < end {
        let sent = Instant::now();
        stream.write_all(&request).await.context("sending")?;
        stream.read_exact(&mut answer).await.context("the answer")?;
        anyhow::ensure!(answer[0] == ACK, "the server's fdatasync failed");
        answered.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        recorder.record(now, now - sent, 1, shape.request_bytes as u64);
    }
    Ok(recorder)
}

const ACK: u8 = 1;
const FAILED: u8 = 0;

/// The server on its own two-thread runtime (as the HTTP baselines have), until the process
/// ends.
fn spawn_server(dir: &Path) -> anyhow::Result<(std::net::SocketAddr, Arc<GroupLog>)> {
    let log = null_server::start_group_log(dir)?;
    let served = Arc::clone(&log);
    let address = null_server::serve_on_own_runtime(|listener| async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, Arc::clone(&served)));
        }
    })?;
    Ok((address, log))
}

/// One connection: each length-prefixed body written, then answered once durable.
async fn serve(mut stream: TcpStream, log: Arc<GroupLog>) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut body = Vec::new();
    loop {
        let mut length = [0u8; 4];
        if stream.read_exact(&mut length).await.is_err() {
            return Ok(());
        }
        body.resize(u32::from_be_bytes(length) as usize, 0);
        stream.read_exact(&mut body).await?;
        let durable = match log.write(&body) {
            Ok(ticket) => log.durable(ticket).await,
            Err(error) => Err(error),
        };
        stream
            .write_all(&[if durable.is_ok() { ACK } else { FAILED }])
            .await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_answered_body_was_written_and_the_rate_is_set_against_the_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shape = Shape {
            producers: 3,
            request_bytes: 4096,
            warmup: Duration::from_millis(50),
            duration: Duration::from_millis(200),
        };
        let bound = measure(dir.path(), shape).await.expect("measured");
        assert!(bound.group_commit.requests > 0);
        assert!(bound.answered >= bound.group_commit.requests);
        assert_eq!(
            bound.written_bytes,
            bound.answered * 4096,
            "a request is answered only after its body is written"
        );
        assert!(bound.line_mib_per_s.iter().all(|line| *line > 0.0));
        let expected = bound.group_commit.mib_per_s
            / ((bound.line_mib_per_s[0] + bound.line_mib_per_s[1]) / 2.0);
        assert!((bound.ratio_to_line - expected).abs() < 1e-9);
    }
}

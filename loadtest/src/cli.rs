//! Command line: one subcommand per workload, plus the baselines, `compare` and `plot`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Serialize;

use crate::payload::{KeyDist, SizeDist};

#[derive(Debug, Parser)]
#[command(
    name = "strata-loadtest",
    version,
    about = "Load generator for Strata, verified and measured against same-run baselines"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Producers only. Every acknowledged record is read back and checked at the end.
    Produce(LoadArgs),
    /// Preloads `--count` records (default 100,000), then consumers read them all, timed.
    Consume(LoadArgs),
    /// Producers and tailing consumers at once: produce-to-delivery latency (long-poll or SSE).
    E2e(LoadArgs),
    /// Producers and the members of one consumer group, reading with commits.
    Groups(LoadArgs),
    /// Serves the no-storage HTTP server: Strata's request shapes answered without storing
    /// anything (the transport ceiling).
    NullServer {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
    },
    /// Times write + fdatasync of one size (the disk ceiling), as the engine benches do.
    Disk {
        /// Bytes per write.
        #[arg(long, default_value_t = 1024)]
        bytes: usize,
        /// Directory for the scratch file: the disk the server's data lives on.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        #[arg(long, default_value_t = 2.0)]
        duration_s: f64,
        /// Writes per second on a fixed schedule, latency counted from each write's due time
        /// (default: back to back).
        #[arg(long)]
        rate: Option<f64>,
    },
    /// Group commit over bare TCP (no HTTP) against the disk's 1 MiB write + fdatasync line,
    /// measured before and after: the floor under any HTTP server's group commit here (issue
    /// 15's goal 5b). Prints JSON.
    TcpBound {
        /// Concurrent producers, one request in flight each.
        #[arg(long, default_value_t = 8)]
        producers: usize,
        /// Bytes per request.
        #[arg(long, default_value_t = 102_400)]
        bytes: usize,
        /// Directory for the scratch files: the disk the server's data lives on.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// Seconds measured (the group commit, and each line).
        #[arg(long, default_value_t = 5.0)]
        duration_s: f64,
        /// Seconds of group commit before the measured window.
        #[arg(long, default_value_t = 1.0)]
        warmup_s: f64,
    },
    /// Prints two result files side by side with the ratio B / A.
    Compare { a: PathBuf, b: PathBuf },
    /// Draws a result file's plots (PNG and SVG) into a directory.
    Plot {
        results: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
}

/// Request bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// JSON records, values as base64.
    Json,
    /// Kafka RecordBatch v2 bytes, one batch per request, to one partition.
    Raw,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Acks {
    /// Answered once the records are on disk (fdatasync).
    All,
    /// Answered once the records are written (page cache).
    Leader,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Delivery {
    /// Long-polling fetches.
    Poll,
    /// One Server-Sent Events stream per partition.
    Sse,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Start {
    /// From the log start.
    Earliest,
    /// From the high watermark when the run starts.
    Latest,
}

/// The shape of the load.
#[derive(Debug, Clone, Args, Serialize)]
pub struct LoadArgs {
    /// Base URL of the server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// API key sent as `Authorization: Bearer`.
    #[arg(long, env = "STRATA_TOKEN", hide_env_values = true)]
    #[serde(skip)]
    pub token: Option<String>,
    /// PEM CA that signed the server's certificate (HTTPS).
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// Topic name (with `--topics N`, a prefix: NAME-0 .. NAME-N-1); default a fresh
    /// `loadtest-<run id>`. Missing topics are created.
    #[arg(long)]
    pub topic: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub topics: u32,
    /// Partitions per topic.
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// Producers (each one request in flight; producer i writes to topic i mod topics).
    #[arg(long, default_value_t = 1)]
    pub producers: u32,
    /// Consumers (consume, e2e, groups); partitions are dealt among them.
    #[arg(long, default_value_t = 1)]
    pub consumers: u32,
    /// Value size: bytes (`100`) or `uniform:LOW-HIGH`; at least 32 (the verification prefix).
    #[arg(long, default_value = "100")]
    #[serde(serialize_with = "display")]
    pub record_size: SizeDist,
    /// Keys: `none` (partitions round-robin per request), `uniform:N`, `zipf:N[:EXPONENT]`.
    #[arg(long, default_value = "none")]
    #[serde(serialize_with = "display")]
    pub keys: KeyDist,
    /// Records per produce request.
    #[arg(long, default_value_t = 1)]
    pub batch_records: u32,
    /// Payload bytes per produce request: a request closes at whichever limit comes first.
    #[arg(long)]
    pub batch_bytes: Option<u64>,
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    #[arg(long, value_enum, default_value_t = Acks::All)]
    pub acks: Acks,
    /// Idempotent producers: an id from `POST /v1/producers`, sequences per partition.
    #[arg(long)]
    pub idempotent: bool,
    /// Ask for the compact produce answer (first offset and count per partition).
    #[arg(long)]
    pub compact_answer: bool,
    /// Open loop: produce requests per second over all producers, latency measured from each
    /// request's scheduled send time. Without it, closed loop (as fast as answers come).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Seconds measured, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    pub duration_s: f64,
    /// Stop after this many records (produce, e2e, groups), or preload this many (consume).
    #[arg(long)]
    pub count: Option<u64>,
    /// Seconds before the measured window (connections, page cache); verified, not measured.
    #[arg(long, default_value_t = 1.0)]
    pub warmup_s: f64,
    /// How tailing consumers get records (e2e).
    #[arg(long, value_enum, default_value_t = Delivery::Poll)]
    pub delivery: Delivery,
    /// Where `consume` starts.
    #[arg(long, value_enum, default_value_t = Start::Earliest)]
    pub from: Start,
    /// How consumers fetch (consume, e2e with poll).
    #[arg(long, value_enum, default_value_t = Format::Raw)]
    pub fetch_format: Format,
    /// `max_bytes` per fetch.
    #[arg(long, default_value_t = 1 << 20)]
    pub fetch_bytes: u64,
    /// Consumer group id (groups); default `loadtest-<run id>`.
    #[arg(long)]
    pub group: Option<String>,
    /// Skip the read-back check (speed only; the run cannot then prove it lost nothing).
    #[arg(long)]
    pub no_verify: bool,
    /// Also measure the no-storage HTTP server (plain, durable and, for several `acks=all`
    /// producers, group-committing) and write + fdatasync in this run, and print the ratios.
    #[arg(long)]
    pub baselines: bool,
    /// Directory for the disk baseline's scratch file (put it on the server's data disk).
    #[arg(long, default_value = ".")]
    pub disk_dir: PathBuf,
    /// Write the full results (JSON) here.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Draw latency and timeline plots (PNG and SVG) into this directory.
    #[arg(long)]
    pub plot_dir: Option<PathBuf>,
    /// Print the results as one JSON line instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

fn display<T: std::fmt::Display, S: serde::Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

impl LoadArgs {
    /// Refuses settings that cannot make a meaningful run.
    pub fn validate(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        if self.topics == 0 || self.partitions == 0 || self.producers == 0 || self.consumers == 0 {
            bail!("--topics, --partitions, --producers and --consumers must be at least 1");
        }
        if self.batch_records == 0 {
            bail!("--batch-records must be at least 1");
        }
        if !(self.duration_s > 0.0 && self.duration_s.is_finite()) {
            bail!("--duration-s must be a positive number of seconds");
        }
        if !(self.warmup_s >= 0.0 && self.warmup_s.is_finite()) {
            bail!("--warmup-s must be zero or more seconds");
        }
        if let Some(rate) = self.rate
            && !(rate > 0.0 && rate.is_finite())
        {
            bail!("--rate must be a positive number of requests per second");
        }
        if self.count == Some(0) {
            bail!("--count must be at least 1");
        }
        Ok(())
    }
}

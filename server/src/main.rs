//! The `strata` command line. Parsing and printing only; the work is in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use strata_server::io::{Io, IoBackendChoice};
use strata_server::log::RecordBatch;

/// Strata: a Kafka-style log service over HTTP.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode a segment `.log` file and print one JSON line per record batch.
    Dump {
        /// Path of a `{base_offset:020}.log` file.
        segment: PathBuf,
        /// Also print every record (keys and values as lossy UTF-8 previews).
        #[arg(long)]
        records: bool,
    },
    /// Check which disk I/O backend this machine and data directory support.
    IoProbe {
        /// Directory to probe with a real write, fdatasync and read.
        #[arg(long, default_value = "./data")]
        data_dir: PathBuf,
        /// Backend to ask for: auto, io_uring or sync.
        #[arg(long, default_value = "auto")]
        io_backend: IoBackendChoice,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Dump { segment, records } => dump(&segment, records),
        Command::IoProbe {
            data_dir,
            io_backend,
        } => probe(&data_dir, io_backend),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn dump(path: &PathBuf, with_records: bool) -> anyhow::Result<()> {
    let bytes = bytes::Bytes::from(std::fs::read(path)?);
    let mut position = 0usize;
    while position < bytes.len() {
        let batch = match RecordBatch::decode_first(&bytes.slice(position..)) {
            Ok(batch) => batch,
            Err(error) => {
                let line = serde_json::json!({ "position": position, "error": error.to_string() });
                println!("{line}");
                anyhow::bail!("invalid batch at position {position}: {error}");
            }
        };
        let header = batch.header();
        let mut line = serde_json::json!({
            "position": position,
            "base_offset": header.base_offset,
            "last_offset": header.last_offset(),
            "record_count": header.record_count,
            "size": batch.len(),
            "first_timestamp": header.first_timestamp,
            "max_timestamp": header.max_timestamp,
            "producer_id": header.producer_id,
            "producer_epoch": header.producer_epoch,
            "base_sequence": header.base_sequence,
            "crc": header.crc,
        });
        if with_records {
            let mut records = Vec::new();
            for record in batch.records() {
                let record = record?;
                let preview = |b: &Option<bytes::Bytes>| {
                    b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned())
                };
                records.push(serde_json::json!({
                    "offset": record.offset,
                    "timestamp": record.timestamp,
                    "key": preview(&record.key),
                    "value": preview(&record.value),
                    "headers": record.headers.len(),
                }));
            }
            line["records"] = serde_json::Value::Array(records);
        }
        println!("{line}");
        position += batch.len();
    }
    Ok(())
}

fn probe(dir: &PathBuf, choice: IoBackendChoice) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let _guard = runtime.enter();
    let (io, report) = Io::start(choice, dir)?;
    println!(
        "{}",
        serde_json::json!({ "backend": io.kind().to_string(), "reason": report.reason })
    );
    Ok(())
}

//! The `strata` command line: parsing and printing only; the work is in the library. It lives in
//! the library (not `main.rs`) so the black-box test crate can build the same binary.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{Config, ConfigArgs};
use crate::io::{Io, IoBackendChoice};
use crate::log::RecordBatch;

/// Strata: a Kafka-style log service over HTTP.
#[derive(Debug, Parser)]
#[command(name = "strata", version = crate::build_info::VERSION_LINE, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
// Parsed once at start-up: the size of the settings variant costs nothing.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Run the server. Settings: defaults < --config TOML file < STRATA_* variables < flags.
    Serve(ConfigArgs),
    /// Print the OpenAPI document.
    Openapi,
    /// Decode a segment `.log` file and print one JSON line per record batch.
    Dump {
        /// Path of a `{base_offset:020}.log` file.
        segment: PathBuf,
        /// Also print every record (keys and values as lossy UTF-8 previews).
        #[arg(long)]
        records: bool,
    },
    /// Manage API keys in the key file (a running server picks changes up within a second,
    /// or at once on SIGHUP).
    Auth {
        #[command(subcommand)]
        command: AuthCommand,
    },
    /// Round trip through a running server: wait for /readyz, create a topic, produce, fetch
    /// back, compare, delete the topic (what the Helm chart's `helm test` Pod runs).
    Check(crate::check::CheckArgs),
    /// Verify a bucket (or a copy of it) as an auditor: transparency logs against their signed
    /// checkpoints, every object's SHA-256 and chunk digests, every batch's CRC, offsets
    /// without unaccounted gaps. Exit status 0 only when everything verifies.
    Verify(crate::archive::cli::VerifyArgs),
    /// Read the archive without a server.
    Archive {
        #[command(subcommand)]
        command: ArchiveCommand,
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

#[derive(Debug, Subcommand)]
enum ArchiveCommand {
    /// Print a partition's records (an offset or time range) from the bucket alone, as NDJSON.
    Read(crate::archive::cli::ReadArgs),
}

#[derive(Debug, Subcommand)]
enum AuthCommand {
    /// Make an API key for a principal and print its token (shown only this once).
    CreateKey {
        /// Who the key authenticates.
        #[arg(long)]
        principal: String,
        /// Where the key file is (the server's settings: --config, --data-dir, ...).
        #[command(flatten)]
        settings: ConfigArgs,
    },
    /// List the keys (ids and principals, never tokens).
    ListKeys {
        #[command(flatten)]
        settings: ConfigArgs,
    },
    /// Revoke a key by id.
    RevokeKey {
        /// The key id (`k_...`).
        id: String,
        #[command(flatten)]
        settings: ConfigArgs,
    },
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        crate::logging::init(crate::config::LogFormat::Text, "info");
    }
    let result = match cli.command {
        Command::Serve(args) => serve(&args),
        Command::Openapi => {
            print!("{}", crate::http::openapi::spec_json());
            Ok(())
        }
        Command::Dump { segment, records } => dump(&segment, records),
        Command::Auth { command } => auth(command),
        Command::Check(args) => crate::check::run(&args),
        Command::Verify(args) => match crate::archive::cli::verify(&args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(error) => Err(error),
        },
        Command::Archive {
            command: ArchiveCommand::Read(args),
        } => crate::archive::cli::read(&args),
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

fn auth(command: AuthCommand) -> anyhow::Result<()> {
    use crate::clock::{Clock, SystemClock};
    use crate::security::keys::KeyStore;
    let keys = |settings: &ConfigArgs| -> anyhow::Result<KeyStore> {
        let path = Config::load(settings)?.keys_path();
        Ok(KeyStore::open(&path)?)
    };
    match command {
        AuthCommand::CreateKey {
            principal,
            settings,
        } => {
            crate::security::check_principal(&principal).map_err(anyhow::Error::msg)?;
            let (key, token) = keys(&settings)?.create(&principal, SystemClock.now_ms())?;
            eprintln!(
                "created key {} for {}; the token is shown only now:",
                key.id, key.principal
            );
            println!("{token}");
        }
        AuthCommand::ListKeys { settings } => {
            for key in keys(&settings)?.list() {
                println!("{}\t{}\t{}", key.id, key.principal, key.created_at_ms);
            }
        }
        AuthCommand::RevokeKey { id, settings } => {
            if !keys(&settings)?.revoke(&id)? {
                anyhow::bail!("no key has id {id}");
            }
            eprintln!("revoked {id}");
        }
    }
    Ok(())
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

fn serve(args: &ConfigArgs) -> anyhow::Result<()> {
    let config = Config::load(args)?;
    let retained = crate::allocator::retain_freed_memory();
    crate::logging::init(config.log_format, &config.log_level);
    tracing::debug!(retained, "heap memory is kept after frees");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        let address = listener.local_addr()?;
        let data_dir = config.data_dir.display().to_string();
        let scheme = if config.tls_cert_file.is_empty() {
            "http"
        } else {
            "https"
        };
        use std::io::Write;
        // The port answers /healthz and /readyz from here on; the API once recovery is done.
        println!("strata bound {scheme}://{address}: recovering (data in {data_dir})");
        std::io::stdout().flush()?;
        let mut hooks = crate::server::StartHooks::new();
        hooks.on_ready = Some(Box::new(move |address| {
            // The harness and operators read this line to learn the bound port.
            println!("strata listening on {scheme}://{address} (data in {data_dir})");
            let _ = std::io::stdout().flush();
        }));
        crate::server::run_with(config, listener, shutdown_signal(), hooks).await?;
        Ok(())
    })
}

/// Completes on SIGTERM or SIGINT.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

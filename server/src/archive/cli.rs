//! The command-line side of `strata verify` and `strata archive read`.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use strata_tiering::store::{StoreSettings, TierStore};
use strata_tiering::tlog::note::NoteVerifier;

use super::read::ReadRange;
use super::verify::VerifyOptions;

/// Where the bucket is (read access is enough).
#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    /// The bucket or a copy of it: a folder, `file:///path` or `s3://bucket/prefix`.
    pub url: String,
    /// S3 endpoint of an S3-compatible server (credentials: the standard AWS variables).
    #[arg(long)]
    pub s3_endpoint: Option<String>,
    /// S3 region.
    #[arg(long)]
    pub s3_region: Option<String>,
}

impl StoreArgs {
    fn open(&self) -> anyhow::Result<Arc<dyn object_store::ObjectStore>> {
        let store = TierStore::open(&StoreSettings {
            url: self.url.clone(),
            s3_endpoint: self.s3_endpoint.clone(),
            s3_region: self.s3_region.clone(),
            s3_credentials: None,
        })?;
        Ok(store.scoped())
    }
}

/// `strata verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// A trusted checkpoint key (`name+id+base64`, as in `tlog-keys/`); repeatable. Without
    /// one the keys published in the bucket are used, which proves less.
    #[arg(long = "key")]
    keys: Vec<String>,
    /// A checkpoint you kept earlier, as `TOPIC/PARTITION=FILE`: the current log must extend it.
    #[arg(long = "checkpoint")]
    checkpoints: Vec<String>,
    /// Print the report as JSON (the human summary goes to stderr).
    #[arg(long)]
    json: bool,
    /// Segments checked at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
}

/// `strata archive read`.
#[derive(Debug, clap::Args)]
pub struct ReadArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Topic.
    #[arg(long)]
    topic: String,
    /// Partition.
    #[arg(long, default_value_t = 0)]
    partition: u32,
    /// First offset.
    #[arg(long, default_value_t = 0)]
    from_offset: u64,
    /// Last offset (inclusive).
    #[arg(long, default_value_t = u64::MAX)]
    to_offset: u64,
    /// Earliest timestamp, ms since the epoch.
    #[arg(long, default_value_t = i64::MIN)]
    from_time: i64,
    /// Latest timestamp, ms since the epoch (inclusive).
    #[arg(long, default_value_t = i64::MAX)]
    to_time: i64,
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// Runs `strata verify`; `Ok(false)` when something did not verify.
///
/// # Errors
/// Bad arguments or a store that cannot be opened.
pub fn verify(args: &VerifyArgs) -> anyhow::Result<bool> {
    let store = args.store.open()?;
    let keys = args
        .keys
        .iter()
        .map(|k| NoteVerifier::parse(k).map_err(|e| anyhow::anyhow!("--key {k}: {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut checkpoints = Vec::new();
    for spec in &args.checkpoints {
        let (place, file) = spec
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--checkpoint {spec}: expected TOPIC/PARTITION=FILE"))?;
        let (topic, partition) = place
            .rsplit_once('/')
            .and_then(|(t, p)| Some((t.to_string(), p.parse::<u32>().ok()?)))
            .ok_or_else(|| anyhow::anyhow!("--checkpoint {spec}: expected TOPIC/PARTITION=FILE"))?;
        let note = std::fs::read_to_string(PathBuf::from(file))?;
        checkpoints.push((topic, partition, note));
    }
    let options = VerifyOptions {
        keys,
        checkpoints,
        concurrency: args.concurrency,
    };
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {pos} segments verified ({per_sec})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar
    });
    let progress = |n: u64| {
        if let Some(bar) = &bar {
            bar.inc(n);
        }
    };
    let report = runtime()?.block_on(super::verify::verify(store.as_ref(), &options, &progress));
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    if args.json {
        eprint!("{}", report.summary());
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.summary());
    }
    Ok(report.ok)
}

/// Runs `strata archive read`.
///
/// # Errors
/// What [`super::read::read`] reports.
pub fn read(args: &ReadArgs) -> anyhow::Result<()> {
    let store = args.store.open()?;
    let range = ReadRange {
        topic: args.topic.clone(),
        partition: args.partition,
        from_offset: args.from_offset,
        to_offset: args.to_offset,
        from_time: args.from_time,
        to_time: args.to_time,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let printed = runtime()?.block_on(super::read::read(store.as_ref(), &range, &mut out))?;
    std::io::Write::flush(&mut out)?;
    eprintln!("{printed} records");
    Ok(())
}

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
    /// Skip recomputing each `.log` object's whole SHA-256: every byte is still checked
    /// through the chunk digests the signed log commits to, at half the hashing cost.
    #[arg(long)]
    chunk_digests_only: bool,
    /// First GET every object of the bucket once with the same concurrency and no checks, and
    /// report verification speed as a share of that raw GET speed (same run, same objects).
    #[arg(long)]
    baseline: bool,
    /// Also list the read audit (`__audit_reads`): who read which records of the topics with
    /// `audit_reads`, and which reads were denied (JSON: `reads`).
    #[arg(long)]
    reads: bool,
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
        whole_log_sha256: !args.chunk_digests_only,
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
    let runtime = runtime()?;
    let baseline = if args.baseline {
        Some(runtime.block_on(raw_get_speed(store.as_ref(), args.concurrency))?)
    } else {
        None
    };
    let started = started();
    let report = runtime.block_on(super::verify::verify(store.as_ref(), &options, &progress));
    let verify_seconds = started.elapsed().as_secs_f64();
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let mut speed = serde_json::json!({
        "verify_seconds": verify_seconds,
        "verify_mib_per_second": mib(report.bytes_read) / verify_seconds.max(1e-9),
    });
    if let Some((bytes, seconds)) = baseline {
        let raw = mib(bytes) / seconds.max(1e-9);
        speed["raw_get_bytes"] = bytes.into();
        speed["raw_get_mib_per_second"] = raw.into();
        speed["verify_share_of_raw_get"] =
            (speed["verify_mib_per_second"].as_f64().unwrap_or(0.0) / raw.max(1e-9)).into();
        let hash = sha256_speed(args.concurrency);
        let passes = if args.chunk_digests_only { 1.0 } else { 2.0 };
        speed["sha256_mib_per_second"] = hash.into();
        speed["sha256_passes_per_byte"] = passes.into();
        speed["bound_share_of_raw_get"] = bound_share(raw, hash, passes).into();
    }
    let speed_line = format!("speed: {speed}\n");
    let reads = match args.reads {
        true => Some(runtime.block_on(super::reads::list(store.as_ref()))),
        false => None,
    };
    let (reads, reads_failed) = match reads {
        None => (None, false),
        Some(Ok(reads)) => (Some(reads), false),
        Some(Err(error)) => {
            eprintln!("reads: FAILED: {error:#}");
            (None, true)
        }
    };
    let reads_text = reads
        .as_deref()
        .map(super::reads::summary)
        .unwrap_or_default();
    if args.json {
        eprint!("{}{speed_line}{reads_text}", report.summary());
        let mut json = serde_json::to_value(&report)?;
        json["speed"] = speed;
        if let Some(reads) = &reads {
            json["reads"] = serde_json::to_value(reads)?;
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}{speed_line}{reads_text}", report.summary());
    }
    Ok(report.ok && !reads_failed)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 20)
}

/// The start of a timing a person reads (a CLI report, not server time).
#[allow(clippy::disallowed_methods)]
fn started() -> std::time::Instant {
    std::time::Instant::now()
}

/// SHA-256 speed in MiB/s of this machine, hashing on `concurrency` threads at once (as the
/// verification does), over 256 MiB in all.
fn sha256_speed(concurrency: usize) -> f64 {
    const PER_THREAD: usize = 64 << 20;
    let threads = concurrency.clamp(1, 4);
    let buffer = vec![0x5au8; PER_THREAD];
    let started = started();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| std::hint::black_box(strata_tiering::digest::sha256(&buffer)));
        }
    });
    mib((PER_THREAD * threads) as u64) / started.elapsed().as_secs_f64().max(1e-9)
}

/// The best share of the raw GET speed a verification can reach on a machine where the GETs
/// and the hashing share the same cores: each byte costs `1 / raw` to fetch and
/// `passes / hash` to hash, so verify speed / raw GET speed <= 1 / (1 + passes * raw / hash).
/// Against a bucket across a network, fetching costs the local cores little and the share can
/// approach 1.
pub fn bound_share(raw: f64, hash: f64, passes: f64) -> f64 {
    1.0 / (1.0 + passes * raw / hash.max(1e-9))
}

/// GETs every object once, `concurrency` at a time, discarding the bytes: the bucket's raw read
/// speed for this machine and network, measured in the same run as the verification.
async fn raw_get_speed(
    store: &dyn object_store::ObjectStore,
    concurrency: usize,
) -> anyhow::Result<(u64, f64)> {
    use futures::StreamExt;
    use object_store::ObjectStoreExt;
    let objects = strata_tiering::store::list_sorted(store, None).await?;
    let started = started();
    let sizes: Vec<anyhow::Result<u64>> =
        futures::stream::iter(objects.iter().map(|object| async move {
            Ok(store.get(&object.location).await?.bytes().await?.len() as u64)
        }))
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let mut bytes = 0;
    for size in sizes {
        bytes += size?;
    }
    Ok((bytes, started.elapsed().as_secs_f64()))
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

#[cfg(test)]
mod tests {
    use super::bound_share;

    #[test]
    fn the_bound_falls_with_every_hash_pass_and_rises_with_hash_speed() {
        assert!((bound_share(100.0, 100.0, 1.0) - 0.5).abs() < 1e-9);
        assert!((bound_share(100.0, 200.0, 2.0) - 0.5).abs() < 1e-9);
        assert!(bound_share(100.0, 1e12, 2.0) > 0.999);
        assert!(bound_share(2600.0, 3600.0, 2.0) < bound_share(2600.0, 3600.0, 1.0));
    }
}

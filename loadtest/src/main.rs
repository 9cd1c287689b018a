//! `strata-loadtest`: closed-loop produce or fetch load against a running Strata, with a bearer
//! token and a CA for HTTPS when the server needs them. Prints requests/s, records/s, MiB/s
//! and latency percentiles (HdrHistogram), so two configurations can be compared in one run.
//! The full load generator (open loop, consumers, groups, distributions) is issue 15.

// A load generator measures real time: that is its job, so it reads the monotonic clock.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Workload {
    /// POST records (JSON) to one partition.
    Produce,
    /// GET records (JSON) from one partition, from offset 0, again and again.
    Fetch,
}

/// Closed-loop load: `concurrency` clients, each sending its next request when the last one
/// answered, for `duration_s` seconds.
#[derive(Debug, Parser)]
#[command(name = "strata-loadtest", version)]
struct Args {
    /// produce or fetch.
    workload: Workload,
    /// Base URL, `http://127.0.0.1:8080` or `https://localhost:8443`.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Topic (created with one partition if missing).
    #[arg(long, default_value = "loadtest")]
    topic: String,
    /// API key sent as `Authorization: Bearer`.
    #[arg(long, env = "STRATA_TOKEN")]
    token: Option<String>,
    /// PEM CA that signed the server's certificate (HTTPS).
    #[arg(long)]
    ca: Option<std::path::PathBuf>,
    /// Clients sending at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Seconds of load after a one-second warm-up.
    #[arg(long, default_value_t = 5)]
    duration_s: u64,
    /// Records per produce request.
    #[arg(long, default_value_t = 100)]
    records: usize,
    /// Bytes per record value.
    #[arg(long, default_value_t = 100)]
    record_bytes: usize,
    /// `max_bytes` of each fetch.
    #[arg(long, default_value_t = 1 << 20)]
    fetch_bytes: u64,
}

#[derive(Debug, Default)]
struct Tally {
    requests: u64,
    records: u64,
    bytes: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Arc::new(Args::parse());
    let client = client(&args)?;
    prepare(&client, &args).await?;
    // Warm-up: connections, TLS sessions, page cache.
    run(&client, &args, Duration::from_secs(1)).await?;
    let started = Instant::now();
    let (tally, histogram) = run(&client, &args, Duration::from_secs(args.duration_s)).await?;
    let seconds = started.elapsed().as_secs_f64();
    // The histogram holds nanoseconds.
    let millis = |q: f64| histogram.value_at_quantile(q) as f64 / 1e6;
    println!(
        "{{\"workload\": \"{:?}\", \"requests_per_s\": {:.0}, \"records_per_s\": {:.0}, \
         \"mib_per_s\": {:.1}, \"p50_ms\": {:.3}, \"p99_ms\": {:.3}, \"p999_ms\": {:.3}}}",
        args.workload,
        tally.requests as f64 / seconds,
        tally.records as f64 / seconds,
        tally.bytes as f64 / seconds / (1 << 20) as f64,
        millis(0.5),
        millis(0.99),
        millis(0.999),
    );
    Ok(())
}

fn client(args: &Args) -> anyhow::Result<reqwest::Client> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = &args.token {
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {token}").parse().context("token")?,
        );
    }
    let mut builder = reqwest::Client::builder()
        .default_headers(headers)
        .timeout(Duration::from_secs(30));
    if let Some(ca) = &args.ca {
        let pem = std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?;
        builder = builder.tls_certs_only([reqwest::Certificate::from_pem(&pem)?]);
    }
    Ok(builder.build()?)
}

/// Creates the topic if needed; a fetch run first fills it with one request's worth.
async fn prepare(client: &reqwest::Client, args: &Args) -> anyhow::Result<()> {
    let created = client
        .post(format!("{}/v1/topics", args.url))
        .json(&json!({"name": args.topic, "partitions": 1}))
        .send()
        .await?;
    if !(created.status().is_success() || created.status() == 409) {
        bail!(
            "creating the topic: {} {}",
            created.status(),
            created.text().await?
        );
    }
    if args.workload == Workload::Fetch {
        for _ in 0..10 {
            produce_once(client, args).await?;
        }
    }
    Ok(())
}

async fn run(
    client: &reqwest::Client,
    args: &Arc<Args>,
    duration: Duration,
) -> anyhow::Result<(Tally, Histogram<u64>)> {
    let deadline = Instant::now() + duration;
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency.max(1) {
        let (client, args) = (client.clone(), Arc::clone(args));
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut histogram = Histogram::<u64>::new(3)?;
            while Instant::now() < deadline {
                let sent = Instant::now();
                let (records, bytes) = match args.workload {
                    Workload::Produce => produce_once(&client, &args).await?,
                    Workload::Fetch => fetch_once(&client, &args).await?,
                };
                histogram.record(u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX))?;
                tally.requests += 1;
                tally.records += records;
                tally.bytes += bytes;
            }
            Ok::<_, anyhow::Error>((tally, histogram))
        }));
    }
    let mut total = Tally::default();
    let mut histogram = Histogram::<u64>::new(3)?;
    for task in tasks {
        let (tally, part) = task.await??;
        total.requests += tally.requests;
        total.records += tally.records;
        total.bytes += tally.bytes;
        histogram.add(part)?;
    }
    Ok((total, histogram))
}

async fn produce_once(client: &reqwest::Client, args: &Args) -> anyhow::Result<(u64, u64)> {
    let value = "x".repeat(args.record_bytes);
    let records: Vec<_> = (0..args.records).map(|_| json!({"value": value})).collect();
    let response = client
        .post(format!(
            "{}/v1/topics/{}/partitions/0/records?value_format=string",
            args.url, args.topic
        ))
        .json(&json!({"records": records}))
        .send()
        .await?;
    if !response.status().is_success() {
        bail!("produce: {} {}", response.status(), response.text().await?);
    }
    response.bytes().await?;
    Ok((
        args.records as u64,
        (args.records * args.record_bytes) as u64,
    ))
}

async fn fetch_once(client: &reqwest::Client, args: &Args) -> anyhow::Result<(u64, u64)> {
    let response = client
        .get(format!(
            "{}/v1/topics/{}/partitions/0/records?offset=0&max_bytes={}&max_records=1000",
            args.url, args.topic, args.fetch_bytes
        ))
        .send()
        .await?;
    if !response.status().is_success() {
        bail!("fetch: {} {}", response.status(), response.text().await?);
    }
    let body: serde_json::Value = response.json().await?;
    let records = body["records"].as_array().map_or(0, Vec::len) as u64;
    Ok((records, records * args.record_bytes as u64))
}

//! `strata check`: a round trip through a running server (wait for `/readyz`, create a topic,
//! produce, fetch back, compare, delete the topic), for operators and the Helm chart's `helm
//! test` Pod. It lives in the server binary because the container image holds nothing else: no
//! shell, no curl, so the check must be a command of `strata` itself.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// Where the server is and how to reach it.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Base URL of the server (`http://` or `https://`).
    #[arg(
        long,
        env = "STRATA_CHECK_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub url: String,
    /// Bearer API key, when the server authenticates (`auth_mode = api_key`). The principal
    /// needs create, write, read and delete on topics named `strata-check-*`.
    #[arg(long, env = "STRATA_CHECK_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// PEM CA bundle to trust for `https://` (beside the system's roots).
    #[arg(long, env = "STRATA_CHECK_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// How many records to produce and read back.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub records: u32,
    /// How long to wait for the server to become ready.
    #[arg(long, default_value_t = 60)]
    pub ready_timeout_s: u64,
}

/// Runs the check and prints one JSON summary line; any failed step is an error naming it.
pub fn run(args: &CheckArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let summary = runtime.block_on(check(args))?;
    println!("{summary}");
    Ok(())
}

async fn check(args: &CheckArgs) -> anyhow::Result<Value> {
    let base = args.url.trim_end_matches('/').to_string();
    let client = http_client(args)?;
    wait_ready(&client, &base, args.ready_timeout_s).await?;
    let nonce = hex::encode(rand_bytes()?);
    let topic = format!("strata-check-{nonce}");
    let auth = |request: reqwest::RequestBuilder| match &args.token {
        Some(token) => request.bearer_auth(token),
        None => request,
    };
    let created = auth(client.post(format!("{base}/v1/topics")))
        .json(&json!({ "name": topic, "partitions": 1 }))
        .send()
        .await;
    expect_success("create topic", created).await?;
    let outcome = round_trip(&client, &auth, &base, &topic, &nonce, args.records).await;
    // The topic goes whatever the round trip found, so repeated checks leave nothing behind.
    let deleted = auth(client.delete(format!("{base}/v1/topics/{topic}")))
        .send()
        .await;
    let records = outcome?;
    expect_success("delete topic", deleted).await?;
    Ok(json!({ "check": "ok", "url": base, "topic": topic, "records": records }))
}

async fn round_trip(
    client: &reqwest::Client,
    auth: &impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    base: &str,
    topic: &str,
    nonce: &str,
    count: u32,
) -> anyhow::Result<u32> {
    let values: Vec<String> = (0..count).map(|i| format!("check {nonce} #{i}")).collect();
    let records: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(i, value)| json!({ "key": format!("k{i}"), "value": value }))
        .collect();
    let produced = auth(client.post(format!(
        "{base}/v1/topics/{topic}/partitions/0/records?value_format=string&answer=compact"
    )))
    .json(&json!({ "records": records }))
    .send()
    .await;
    let answer = expect_success("produce", produced).await?;
    let stored = answer["partitions"][0]["record_count"].as_u64();
    if stored != Some(u64::from(count)) {
        bail!("produce: expected {count} records stored, the answer says {answer}");
    }
    let fetched = auth(client.get(format!(
        "{base}/v1/topics/{topic}/partitions/0/records?offset=0&max_records={count}&value_format=string"
    )))
    .send()
    .await;
    let page = expect_success("fetch", fetched).await?;
    let got: Vec<&str> = page["records"]
        .as_array()
        .map(|records| records.iter().filter_map(|r| r["value"].as_str()).collect())
        .unwrap_or_default();
    if got != values {
        bail!(
            "fetch: read back {} of {count} records, not the ones produced",
            got.len()
        );
    }
    Ok(count)
}

fn http_client(args: &CheckArgs) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(30));
    if let Some(path) = &args.ca_file {
        let pem = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
        for certificate in reqwest::Certificate::from_pem_bundle(&pem)
            .with_context(|| format!("parse {}", path.display()))?
        {
            builder = builder.add_root_certificate(certificate);
        }
    }
    Ok(builder.build()?)
}

async fn wait_ready(client: &reqwest::Client, base: &str, timeout_s: u64) -> anyhow::Result<()> {
    let attempts = timeout_s.max(1) * 2;
    let mut last = String::from("no answer");
    for _ in 0..attempts {
        match client.get(format!("{base}/readyz")).send().await {
            Ok(response) if response.status().is_success() => return Ok(()),
            Ok(response) => last = format!("status {}", response.status()),
            Err(error) => last = format!("{error:#}"),
        }
        #[allow(clippy::disallowed_methods)] // a CLI's retry pause, not server time
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    bail!("readyz: {base} not ready after {timeout_s} s ({last})")
}

/// The JSON body of a 2xx answer, or an error naming the step, the status and the body.
async fn expect_success(
    step: &str,
    sent: Result<reqwest::Response, reqwest::Error>,
) -> anyhow::Result<Value> {
    let response = sent.with_context(|| format!("{step}: request failed"))?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    if !status.is_success() {
        bail!("{step}: status {status}: {body}");
    }
    Ok(serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn rand_bytes() -> anyhow::Result<[u8; 6]> {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).map_err(|error| anyhow::anyhow!("random bytes: {error}"))?;
    Ok(bytes)
}

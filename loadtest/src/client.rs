//! The few Strata calls a load run makes, over one pooled HTTP client.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::json;

const RECORD_BATCHES: &str = "application/vnd.strata.record-batches";

/// A Strata server (or the built-in no-storage one, which answers the same shapes).
#[derive(Debug, Clone)]
pub struct Strata {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// A refused or failed request: the status and the server's error code when it sent one.
#[derive(Debug, Clone)]
pub struct CallError {
    pub status: Option<u16>,
    pub code: String,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(status) => write!(f, "{status} {}", self.code),
            None => write!(f, "{}", self.code),
        }
    }
}

impl std::error::Error for CallError {}

/// Where a produce request's records landed: one entry per record, in request order.
#[derive(Debug, Clone, Deserialize)]
pub struct ProduceAnswer {
    #[serde(default)]
    pub offsets: Vec<RecordOffset>,
    /// The compact answer: one range per partition the request wrote to.
    #[serde(default)]
    pub partitions: Vec<PartitionRange>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct RecordOffset {
    pub partition: u32,
    pub offset: u64,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct PartitionRange {
    pub partition: u32,
    pub base_offset: u64,
    pub record_count: u64,
}

/// Stored batches from a raw fetch, and where to go on.
#[derive(Debug)]
pub struct RawFetch {
    pub bytes: Bytes,
    pub next_offset: u64,
    pub high_watermark: u64,
}

#[derive(Debug, Deserialize)]
pub struct JsonFetch {
    pub records: Vec<JsonRecord>,
    pub next_offset: u64,
    pub high_watermark: u64,
}

#[derive(Debug, Deserialize)]
pub struct JsonRecord {
    /// Group reads only: which topic.
    #[serde(default)]
    pub topic: Option<String>,
    #[serde(default)]
    pub partition: u32,
    pub offset: u64,
    pub key: Option<String>,
    /// Base64 text (fetched with `value_format=base64`).
    pub value: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Membership {
    pub member_id: String,
    pub generation: u32,
    pub rebalancing: bool,
}

#[derive(Debug, Deserialize)]
pub struct MemberFetch {
    pub records: Vec<JsonRecord>,
}

impl Strata {
    pub fn new(base: &str, token: Option<String>, ca: Option<&Path>) -> anyhow::Result<Self> {
        let mut builder = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1024)
            .timeout(Duration::from_secs(60));
        if let Some(ca) = ca {
            let pem = std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?;
            let cert = reqwest::Certificate::from_pem(&pem).context("the CA file is not PEM")?;
            builder = builder.add_root_certificate(cert);
        }
        Ok(Self {
            http: builder.build().context("building the HTTP client")?,
            base: base.trim_end_matches('/').to_string(),
            token,
        })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// Creates `topic` with `partitions` partitions, or checks an existing one has them.
    pub async fn ensure_topic(&self, topic: &str, partitions: u32) -> anyhow::Result<()> {
        let body = json!({"name": topic, "partitions": partitions});
        let response = self
            .request(reqwest::Method::POST, "/v1/topics")
            .json(&body)
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.base))?;
        match response.status() {
            status if status.is_success() => Ok(()),
            StatusCode::CONFLICT => {
                let found = self.partition_count(topic).await?;
                if found != partitions {
                    bail!("topic {topic} exists with {found} partitions, not {partitions}");
                }
                Ok(())
            }
            status => bail!(
                "creating topic {topic}: {status} {}",
                response.text().await.unwrap_or_default()
            ),
        }
    }

    async fn partition_count(&self, topic: &str) -> anyhow::Result<u32> {
        #[derive(Deserialize)]
        struct Description {
            partitions: Vec<serde_json::Value>,
        }
        let description: Description = self
            .request(reqwest::Method::GET, &format!("/v1/topics/{topic}"))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok(u32::try_from(description.partitions.len())?)
    }

    /// A new idempotent producer identity.
    pub async fn init_producer(&self) -> anyhow::Result<(i64, i16)> {
        #[derive(Deserialize)]
        struct Identity {
            producer_id: i64,
            producer_epoch: i16,
        }
        let identity: Identity = self
            .request(reqwest::Method::POST, "/v1/producers")
            .json(&json!({}))
            .send()
            .await?
            .error_for_status()
            .context("POST /v1/producers")?
            .json()
            .await?;
        Ok((identity.producer_id, identity.producer_epoch))
    }

    /// Sends one produce request: `path` is the topic or partition records path with its query.
    pub async fn produce(
        &self,
        path: &str,
        content_type: &'static str,
        body: Bytes,
        records: usize,
    ) -> Result<ProduceAnswer, CallError> {
        let response = self
            .request(reqwest::Method::POST, path)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            // Only the no-storage server reads it, to answer with as many offsets.
            .header("loadtest-records", records)
            .body(body)
            .send()
            .await
            .map_err(transport)?;
        let response = checked(response).await?;
        let bytes = response.bytes().await.map_err(transport)?;
        serde_json::from_slice(&bytes).map_err(|e| CallError {
            status: None,
            code: format!("unreadable produce answer: {e}"),
        })
    }

    /// The partition's log start and high watermark.
    pub async fn offsets(&self, topic: &str, partition: u32) -> anyhow::Result<(u64, u64)> {
        #[derive(Deserialize)]
        struct Offsets {
            earliest: u64,
            /// The high watermark.
            latest: u64,
        }
        let offsets: Offsets = self
            .request(
                reqwest::Method::GET,
                &format!("/v1/topics/{topic}/partitions/{partition}/offsets"),
            )
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok((offsets.earliest, offsets.latest))
    }

    /// One fetch of (topic, partition, offset, max_bytes, wait_ms) in the `accept` format.
    async fn fetch_page(
        &self,
        (topic, partition, offset, max_bytes, wait_ms): (&str, u32, u64, u64, u64),
        extra_query: &str,
        accept: &str,
    ) -> Result<reqwest::Response, CallError> {
        let path = format!(
            "/v1/topics/{topic}/partitions/{partition}/records?offset={offset}&max_bytes={max_bytes}&max_wait_ms={wait_ms}{extra_query}"
        );
        let response = self
            .request(reqwest::Method::GET, &path)
            .header(reqwest::header::ACCEPT, accept)
            .send()
            .await
            .map_err(transport)?;
        checked(response).await
    }

    /// Stored batches from `offset`, long-polling up to `wait_ms` at the tail.
    pub async fn fetch_raw(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        max_bytes: u64,
        wait_ms: u64,
    ) -> Result<RawFetch, CallError> {
        let page = (topic, partition, offset, max_bytes, wait_ms);
        let response = self.fetch_page(page, "", RECORD_BATCHES).await?;
        let header = |name: &str| -> Result<u64, CallError> {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| CallError {
                    status: None,
                    code: format!("raw fetch answer without {name}"),
                })
        };
        let next_offset = header("strata-next-offset")?;
        let high_watermark = header("strata-high-watermark")?;
        let bytes = response.bytes().await.map_err(transport)?;
        Ok(RawFetch {
            bytes,
            next_offset,
            high_watermark,
        })
    }

    /// Records as JSON (values as base64) from `offset`.
    pub async fn fetch_json(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        max_bytes: u64,
        wait_ms: u64,
    ) -> Result<JsonFetch, CallError> {
        let page = (topic, partition, offset, max_bytes, wait_ms);
        let response = self
            .fetch_page(page, "&value_format=base64", "application/json")
            .await?;
        json_body(response).await
    }

    /// An SSE stream of `topic`/`partition` from `offset` (values as base64).
    pub async fn stream(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
    ) -> Result<reqwest::Response, CallError> {
        let path = format!(
            "/v1/topics/{topic}/partitions/{partition}/records?offset={offset}&value_format=base64"
        );
        let response = self
            .request(reqwest::Method::GET, &path)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .timeout(Duration::from_secs(24 * 3600))
            .send()
            .await
            .map_err(transport)?;
        checked(response).await
    }

    /// Joins `group` reading `topic` from the earliest offset.
    pub async fn join(&self, group: &str, topics: &[String]) -> anyhow::Result<Membership> {
        let body = json!({"topics": topics, "auto_offset_reset": "earliest"});
        let response = self
            .request(
                reqwest::Method::POST,
                &format!("/v1/groups/{group}/members"),
            )
            .json(&body)
            .send()
            .await?;
        Ok(json_body(checked(response).await?).await?)
    }

    /// A heartbeat: the member's current generation and assignment.
    pub async fn heartbeat(
        &self,
        group: &str,
        member: &str,
        generation: u32,
    ) -> Result<Membership, CallError> {
        let path = format!("/v1/groups/{group}/members/{member}/heartbeat");
        let response = self
            .request(reqwest::Method::POST, &path)
            .json(&json!({"generation": generation}))
            .send()
            .await
            .map_err(transport)?;
        json_body(checked(response).await?).await
    }

    /// Reads as a member, committing what the previous read returned.
    pub async fn member_fetch(
        &self,
        group: &str,
        member: &str,
        generation: u32,
        max_bytes: u64,
        wait_ms: u64,
    ) -> Result<MemberFetch, CallError> {
        let path = format!(
            "/v1/groups/{group}/members/{member}/records?generation={generation}&max_bytes={max_bytes}&max_wait_ms={wait_ms}&value_format=base64&commit=true"
        );
        let response = self
            .request(reqwest::Method::GET, &path)
            .send()
            .await
            .map_err(transport)?;
        json_body(checked(response).await?).await
    }

    pub async fn leave(&self, group: &str, member: &str) {
        let path = format!("/v1/groups/{group}/members/{member}");
        let _ = self.request(reqwest::Method::DELETE, &path).send().await;
    }

    /// The server's version from `strata_build_info`, when `/metrics` is served to us.
    pub async fn version(&self) -> String {
        let Ok(response) = self.request(reqwest::Method::GET, "/metrics").send().await else {
            return "unknown".into();
        };
        let text = response.text().await.unwrap_or_default();
        text.lines()
            .find(|line| line.starts_with("strata_build_info{"))
            .map(|line| {
                let label = |name: &str| {
                    line.split(&format!("{name}=\""))
                        .nth(1)
                        .and_then(|rest| rest.split('"').next())
                        .unwrap_or("?")
                        .to_string()
                };
                format!("{} ({})", label("version"), label("commit"))
            })
            .unwrap_or_else(|| "unknown".into())
    }
}

fn transport(error: reqwest::Error) -> CallError {
    CallError {
        status: None,
        code: if error.is_timeout() {
            "timeout".into()
        } else {
            format!("transport: {error}")
        },
    }
}

async fn checked(response: reqwest::Response) -> Result<reqwest::Response, CallError> {
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status().as_u16();
    #[derive(Deserialize)]
    struct Body {
        error: Inner,
    }
    #[derive(Deserialize)]
    struct Inner {
        code: String,
    }
    let code = match response.json::<Body>().await {
        Ok(body) => body.error.code,
        Err(_) => "no_error_body".into(),
    };
    Err(CallError {
        status: Some(status),
        code,
    })
}

async fn json_body<T: serde::de::DeserializeOwned>(
    response: reqwest::Response,
) -> Result<T, CallError> {
    let bytes = response.bytes().await.map_err(transport)?;
    serde_json::from_slice(&bytes).map_err(|e| CallError {
        status: None,
        code: format!("unreadable answer: {e}"),
    })
}

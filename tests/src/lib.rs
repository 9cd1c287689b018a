//! Harness for black-box tests that start the real `strata` binary.
//!
//! [`Server::start`] spawns `strata-under-test serve --listen 127.0.0.1:0 --data-dir <dir>` plus
//! extra flags, reads the `strata listening on http://ADDR` line from its stdout to learn the
//! port, and keeps the data directory so that a test can kill and restart the server on the same
//! data. Dropping a [`Server`] kills the process. [`eventually`] is the bounded wait used instead
//! of sleeps.
//!
//! [`InProcessServer::start`] runs the server inside the test's runtime with a
//! [`ManualClock`], so tests of timeouts (group sessions, poll intervals, lag in time) move the
//! clock instead of sleeping; it still speaks HTTP on 127.0.0.1:0.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::Value;
use strata_server::clock::ManualClock;
use strata_server::config::Config;
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long a start may take before the harness gives up.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopping server may take to exit.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// The tail of the server's stderr kept for failure messages.
const STDERR_KEEP: usize = 256 * 1024;

/// How to start a server.
#[derive(Debug, Default, Clone)]
pub struct ServerOptions {
    /// Extra flags after `serve --listen ... --data-dir ...`, such as
    /// `["--sse-ping-interval-ms", "100"]`.
    pub args: Vec<String>,
    /// Data directory to use; `None`: a fresh temporary directory owned by the server.
    pub data_dir: Option<PathBuf>,
    /// Extra environment variables (S3 credentials, for instance).
    pub env: Vec<(String, String)>,
}

impl ServerOptions {
    /// Options with these extra flags and a fresh temporary data directory.
    pub fn with_args(args: &[&str]) -> Self {
        Self {
            args: args.iter().map(|a| (*a).to_string()).collect(),
            data_dir: None,
            env: Vec::new(),
        }
    }
}

/// A running (or stopped) `strata serve` process and its data directory.
pub struct Server {
    child: Option<Child>,
    address: SocketAddr,
    args: Vec<String>,
    env: Vec<(String, String)>,
    data_dir: PathBuf,
    _temp: Option<TempDir>,
    stderr: Arc<Mutex<String>>,
    client: reqwest::Client,
}

impl Server {
    /// The bound address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Starts the binary and waits until it prints the address it bound.
    ///
    /// # Panics
    /// When the server exits or stays silent for 30 s; the message holds its stderr.
    pub fn start(options: ServerOptions) -> Server {
        let (temp, data_dir) = match options.data_dir {
            Some(dir) => (None, dir),
            None => {
                let temp = tempfile::tempdir().unwrap();
                let dir = temp.path().to_path_buf();
                (Some(temp), dir)
            }
        };
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let mut server = Server {
            child: None,
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            args: options.args,
            env: options.env,
            data_dir,
            _temp: temp,
            stderr: Arc::new(Mutex::new(String::new())),
            client,
        };
        server.spawn();
        server
    }

    /// Starts a server with default settings on a fresh data directory.
    pub fn start_default() -> Server {
        Self::start(ServerOptions::default())
    }

    // A bounded wait for a real process or condition: the one place tests wait.
    #[allow(clippy::disallowed_methods)]
    fn spawn(&mut self) {
        assert!(self.child.is_none(), "the server is still running");
        let mut child = Command::new(binary())
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.stderr.lock().unwrap().clear();
        let stderr = Arc::clone(&self.stderr);
        let mut err_pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 8192];
            while let Ok(n) = err_pipe.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                let mut kept = stderr.lock().unwrap();
                kept.push_str(&String::from_utf8_lossy(&buffer[..n]));
                if kept.len() > STDERR_KEEP {
                    let mut cut = kept.len() - STDERR_KEEP;
                    while !kept.is_char_boundary(cut) {
                        cut += 1;
                    }
                    kept.drain(..cut);
                }
            }
        });
        let (sender, receiver) = mpsc::channel::<Option<SocketAddr>>();
        let out_pipe = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(out_pipe).lines();
            let mut sent = false;
            // Keep draining stdout after the address line so the server never blocks on it.
            while let Some(Ok(line)) = lines.next() {
                if !sent && let Some(address) = parse_listening_line(&line) {
                    let _ = sender.send(Some(address));
                    sent = true;
                }
            }
            if !sent {
                let _ = sender.send(None);
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        let address = loop {
            match receiver.recv_timeout(Duration::from_millis(50)) {
                Ok(Some(address)) => break address,
                Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait().unwrap();
                    // Let the stderr reader catch up before reporting.
                    std::thread::sleep(Duration::from_millis(100));
                    panic!(
                        "strata exited ({status}) before it printed its address; stderr:\n{}",
                        self.stderr()
                    );
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if Instant::now() > deadline {
                        let _ = child.kill();
                        let _ = child.wait();
                        panic!(
                            "strata did not print its address within {START_TIMEOUT:?}; stderr:\n{}",
                            self.stderr()
                        );
                    }
                }
            }
        };
        self.address = address;
        self.child = Some(child);
    }

    /// `http://127.0.0.1:PORT` of the current process (the port changes on restart).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `base_url()` followed by `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url())
    }

    /// An HTTP client (connection pool shared by clones).
    pub fn client(&self) -> reqwest::Client {
        self.client.clone()
    }

    /// The data directory the server runs on.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// What the current (or last) process wrote to stderr, up to the last 256 KiB.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (up to 10 s) until stderr holds `needle`. The harness reads stderr on its own
    /// thread, so a line the server logged before it answered may not be here yet.
    pub async fn logged(&self, needle: &str) {
        eventually(
            Duration::from_secs(10),
            &format!("{needle:?} is logged"),
            || {
                let stderr = self.stderr();
                async move { stderr.contains(needle) }
            },
        )
        .await;
    }

    /// The process id of the running server.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is not running").id()
    }

    /// SIGKILL, then waits for the process to be gone.
    pub fn kill_9(&mut self) {
        let mut child = self.child.take().expect("the server is not running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// SIGTERM, then waits (bounded) for the process to exit and returns its status.
    ///
    /// # Panics
    /// When the server does not exit within 30 s (it is then killed).
    // A bounded wait for a real process or condition: the one place tests wait.
    #[allow(clippy::disallowed_methods)]
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the server is not running");
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: `kill` has no memory-safety preconditions; `pid` is our own child, which has
        // not been waited for yet, so the id cannot have been reused.
        let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
        assert_eq!(sent, 0, "kill(SIGTERM) failed");
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "strata did not exit within {STOP_TIMEOUT:?} of SIGTERM; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts the server again on the same data directory and flags. A running server is
    /// stopped with SIGTERM first.
    pub fn restart(&mut self) {
        if self.child.is_some() {
            let status = self.terminate();
            assert!(status.success(), "strata exited with {status} on SIGTERM");
        }
        self.spawn();
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => child.try_wait().unwrap().is_none(),
            None => false,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A server running inside the test's tokio runtime on a [`ManualClock`], with a temporary data
/// directory. Time-based behaviour (evictions checked every 250 ms against the clock, record ages)
/// follows [`ManualClock::advance`]; wait for its effects with [`eventually`].
pub struct InProcessServer {
    address: SocketAddr,
    client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    _temp: TempDir,
}

impl InProcessServer {
    /// Binds 127.0.0.1:0 and starts `run_with_clock` with `clock` on a fresh data directory.
    /// Returns once the server answers `GET /v1/topics`.
    ///
    /// # Panics
    /// When the server fails to start or does not answer within 30 s.
    pub async fn start(clock: Arc<ManualClock>) -> InProcessServer {
        let temp = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let config = Config {
            listen: address,
            data_dir: temp.path().to_path_buf(),
            ..Config::default()
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            strata_server::server::run_with_clock(config, listener, shutdown, clock)
                .await
                .unwrap();
        });
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let server = InProcessServer {
            address,
            client,
            stop: Some(stop),
            task: Some(task),
            _temp: temp,
        };
        let api = server.api();
        eventually(START_TIMEOUT, "the in-process server answers", || {
            let api = api.clone();
            async move {
                api.client
                    .get(api.url("/v1/topics"))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success())
            }
        })
        .await;
        server
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// JSON helpers for this server.
    pub fn api(&self) -> Api {
        Api {
            base: self.base_url(),
            client: self.client.clone(),
        }
    }

    /// Graceful shutdown; waits (bounded) for the server task to finish.
    ///
    /// # Panics
    /// When the server does not stop within 30 s or its task failed.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(STOP_TIMEOUT, task)
                .await
                .expect("the in-process server did not stop")
                .unwrap();
        }
    }
}

impl Drop for InProcessServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Runs `strata serve` on `data_dir` with `options`' arguments and environment, expecting it
/// to stop by itself (a start it refuses); kills it after `limit`. Returns its exit status and
/// its stderr, or `None` when it was still running at the limit.
// A bounded wait for a real process: the one other place tests wait.
#[allow(clippy::disallowed_methods)]
pub fn serve_until_exit(
    data_dir: &Path,
    options: &ServerOptions,
    limit: Duration,
) -> Option<(ExitStatus, String)> {
    let mut child = Command::new(binary())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .args(&options.args)
        .envs(options.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drained as it comes, so a long start-up log never blocks the child.
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut stderr = String::new();
        let _ = pipe.read_to_string(&mut stderr);
        stderr
    });
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some((status, reader.join().unwrap_or_default()));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `strata-under-test` binary. `env!("CARGO_BIN_EXE_...")` exists only when compiling
/// integration tests, not this library, so the path is found at run time: cargo's variable if
/// the runner sets it, else next to the test executable's `deps/` directory, where cargo puts
/// the package's binaries (it builds them before running integration tests).
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_strata-under-test") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    let mut dir = exe.parent().unwrap();
    if dir.ends_with("deps") {
        dir = dir.parent().unwrap();
    }
    let path = dir.join(format!("strata-under-test{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} not found: build with cargo test -p strata-tests",
        path.display()
    );
    path
}

fn parse_listening_line(line: &str) -> Option<SocketAddr> {
    let rest = line
        .split("listening on http://")
        .nth(1)
        .or_else(|| line.split("listening on https://").nth(1))?;
    rest.split_whitespace().next()?.parse().ok()
}

/// An hour before now (ms since the epoch): record timestamps that time retention takes at once.
pub fn hour_ago_ms() -> i64 {
    now_ms() - 3_600_000
}

/// Now (ms since the epoch), by the real clock the server under test uses.
#[allow(clippy::disallowed_methods)]
pub fn now_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

/// Polls `check` every 20 ms until it returns true; panics with `what` after `timeout`.
// A bounded wait for a real process or condition: the one place tests wait.
#[allow(clippy::disallowed_methods)]
pub async fn eventually<F, Fut>(timeout: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not true within {timeout:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`), written from Kafka's Java
/// source: the default partitioner puts a keyed record on `(murmur2(key) & 0x7fffffff) % n`.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = u32::try_from(data.len()).unwrap();
    let mut h = SEED ^ length;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    i32::from_ne_bytes(h.to_ne_bytes())
}

/// The partition Kafka's default partitioner picks for `key` among `partitions`.
pub fn kafka_partition(key: &[u8], partitions: u32) -> u32 {
    let positive = u32::from_ne_bytes(murmur2(key).to_ne_bytes()) & 0x7fff_ffff;
    positive % partitions
}

/// `strata auth create-key` against `data_dir`: the token it prints.
pub fn cli_create_key(data_dir: &Path, principal: &str) -> String {
    let output = Command::new(binary())
        .args(["auth", "create-key", "--principal", principal, "--data-dir"])
        .arg(data_dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let token = String::from_utf8(output.stdout).unwrap().trim().to_string();
    assert!(token.starts_with("strata_"), "{token}");
    token
}

/// A server on `data_dir` with API keys on and `admin` a super user (make its key with
/// [`cli_create_key`] first).
pub fn start_secured(data_dir: &Path) -> Server {
    Server::start(ServerOptions {
        args: ["--auth-mode", "api_key", "--auth-super-users", "admin"]
            .map(String::from)
            .to_vec(),
        data_dir: Some(data_dir.to_path_buf()),
        env: Vec::new(),
    })
}

/// A client that sends `Authorization: Bearer <token>` with every request (none without one).
pub fn bearer_client(token: Option<&str>) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = token {
        let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    reqwest::Client::builder()
        .default_headers(headers)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Asserts that `response` is an error with `status` and our body with `code`; returns the body.
pub async fn expect_error(response: reqwest::Response, status: u16, code: &str) -> Value {
    let actual = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = response.text().await.unwrap();
    assert_eq!(actual, status, "status of {text}");
    assert!(
        content_type.starts_with("application/json"),
        "error content type {content_type:?} for {text}"
    );
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("error body is not JSON ({e}): {text}"));
    let error = &body["error"];
    assert_eq!(error["code"], code, "error code in {text}");
    assert!(error["message"].is_string(), "message in {text}");
    assert!(error["retryable"].is_boolean(), "retryable in {text}");
    body
}

/// Small JSON helpers over one server.
#[derive(Clone)]
pub struct Api {
    /// Base URL, `http://127.0.0.1:PORT`.
    pub base: String,
    /// The client.
    pub client: reqwest::Client,
}

impl Api {
    /// Helpers for the server's current address.
    pub fn new(server: &Server) -> Api {
        Api {
            base: server.base_url(),
            client: server.client(),
        }
    }

    /// `base` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// POST JSON, return the response.
    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// GET, return the response.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    /// Waits (bounded) until the server holds `count` open streams or long polls, so a test
    /// knows its long poll is waiting before it changes what the poll waits on.
    pub async fn open_streams_reach(&self, count: u64) {
        eventually(
            Duration::from_secs(10),
            "the long poll is waiting",
            || async {
                let text = self.get("/metrics").await.text().await.unwrap_or_default();
                text.lines()
                    .find_map(|l| l.strip_prefix("strata_open_streams "))
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .is_some_and(|v| v >= count as f64)
            },
        )
        .await;
    }

    /// GET, assert 200, return the JSON body.
    pub async fn get_json(&self, path: &str) -> Value {
        ok_json(self.get(path).await).await
    }

    /// Creates a topic and asserts 201.
    pub async fn create_topic(&self, name: &str, partitions: u32) -> Value {
        self.create_topic_with(name, partitions, serde_json::json!({}))
            .await
    }

    /// Creates a topic with topic configs and asserts 201.
    pub async fn create_topic_with(&self, name: &str, partitions: u32, configs: Value) -> Value {
        let response = self
            .post(
                "/v1/topics",
                &serde_json::json!({"name": name, "partitions": partitions, "configs": configs}),
            )
            .await;
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, 201, "create {name}: {body}");
        body
    }

    /// Produces a JSON body to the topic endpoint; asserts 200 and returns the response body.
    pub async fn produce(&self, topic: &str, body: &Value) -> Value {
        ok_json(
            self.post(&format!("/v1/topics/{topic}/records"), body)
                .await,
        )
        .await
    }

    /// Produces a JSON body to the topic endpoint with a query string; asserts 200.
    pub async fn produce_with_query(&self, topic: &str, query: &str, body: &Value) -> Value {
        ok_json(
            self.post(&format!("/v1/topics/{topic}/records?{query}"), body)
                .await,
        )
        .await
    }

    /// Fetches every record of a partition from `offset` up to the high watermark (JSON).
    pub async fn fetch_all(&self, topic: &str, partition: u32, offset: u64) -> Vec<Value> {
        let mut records = Vec::new();
        let mut next = offset;
        loop {
            let body = self
                .get_json(&format!(
                    "/v1/topics/{topic}/partitions/{partition}/records?offset={next}"
                ))
                .await;
            let batch = body["records"].as_array().unwrap();
            records.extend(batch.iter().cloned());
            next = body["next_offset"].as_u64().unwrap();
            if batch.is_empty() || next >= body["high_watermark"].as_u64().unwrap() {
                return records;
            }
        }
    }

    /// The values of every record from `offset` to the high watermark.
    pub async fn fetch_values(&self, topic: &str, partition: u32, offset: u64) -> Vec<Value> {
        let records = self.fetch_all(topic, partition, offset).await;
        records.iter().map(|r| r["value"].clone()).collect()
    }

    /// The offsets endpoint of a partition.
    pub async fn offsets(&self, topic: &str, partition: u32) -> Value {
        self.get_json(&format!(
            "/v1/topics/{topic}/partitions/{partition}/offsets"
        ))
        .await
    }
}

/// Asserts 200 and returns the JSON body.
pub async fn ok_json(response: reqwest::Response) -> Value {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert_eq!(status, 200, "expected 200, got {status}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// A tmpfs of a fixed size mounted for a test, so that a disk can really fill up (mounting
/// needs root, which CI has). Unmounted on drop.
pub struct Tmpfs(TempDir);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount -o size=...`, such as `"1m"`).
    ///
    /// # Panics
    /// When mount(8) fails, for example without root.
    pub fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("running mount(8)");
        assert!(
            status.success(),
            "mounting a tmpfs needs root (CI runs as root)"
        );
        Tmpfs(dir)
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

/// One server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// `event:` field (empty for the default `message`).
    pub event: String,
    /// `id:` field, if any.
    pub id: Option<String>,
    /// `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental parser of a `text/event-stream` body that dispatches exactly what a browser's
/// EventSource dispatches (WHATWG HTML, "Interpreting an event stream"): a block without any
/// `data:` line fires no event, comments are ignored, and `retry:` sets the reconnect delay.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    /// The last `retry:` value seen, in milliseconds.
    pub retry_ms: Option<u64>,
}

/// Reads `response`'s event stream until its first event named `name`, each chunk within
/// `timeout`; the stream is closed on return.
pub async fn first_sse_event(
    response: reqwest::Response,
    name: &str,
    timeout: Duration,
) -> SseEvent {
    use futures::StreamExt as _;
    let mut body = response.bytes_stream();
    let mut parser = SseParser::default();
    loop {
        let chunk = tokio::time::timeout(timeout, body.next())
            .await
            .unwrap_or_else(|_| panic!("no {name:?} event within {timeout:?}"))
            .expect("the stream stays open")
            .unwrap();
        if let Some(event) = parser.push(&chunk).into_iter().find(|e| e.event == name) {
            return event;
        }
    }
}

impl SseParser {
    /// Feeds bytes; returns the events completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        loop {
            // Blocks end with a blank line; split on bytes so that a multi-byte character cut
            // across chunks stays intact until its block is complete.
            let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") else {
                return events;
            };
            let rest = self.buffer.split_off(end + 2);
            let block = String::from_utf8(std::mem::replace(&mut self.buffer, rest)).unwrap();
            let block = block.replace('\r', "");
            let mut event = SseEvent::default();
            let mut data: Option<Vec<String>> = None;
            for line in block.lines() {
                if line.is_empty() || line.starts_with(':') {
                    continue;
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => event.event = value.to_string(),
                    "id" => event.id = Some(value.to_string()),
                    "data" => data.get_or_insert_with(Vec::new).push(value.to_string()),
                    "retry" => {
                        if let Ok(ms) = value.parse() {
                            self.retry_ms = Some(ms);
                        }
                    }
                    _ => {}
                }
            }
            if let Some(data) = data {
                event.data = data.join("\n");
                events.push(event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_line_gives_the_address() {
        assert_eq!(
            parse_listening_line("strata listening on http://127.0.0.1:4321 (data in /tmp/x)"),
            Some(SocketAddr::from(([127, 0, 0, 1], 4321)))
        );
        assert_eq!(parse_listening_line("something else"), None);
    }

    #[test]
    fn sse_parser_splits_events_across_chunks_and_drops_what_browsers_drop() {
        let mut parser = SseParser::default();
        assert!(
            parser
                .push(b"retry: 1000\n: hello\n\nevent: records\nid: 3\nda")
                .is_empty()
        );
        assert_eq!(parser.retry_ms, Some(1000));
        let events = parser.push(b"ta: {}\n\nevent: ping\n\nevent: ping\ndata: \n\n: comment\n\n");
        assert_eq!(
            events,
            vec![
                SseEvent {
                    event: "records".into(),
                    id: Some("3".into()),
                    data: "{}".into()
                },
                // The first ping has no data line: EventSource never fires it.
                SseEvent {
                    event: "ping".into(),
                    id: None,
                    data: String::new()
                },
            ]
        );
    }
}

//! Test support: the real S3-compatible server (SeaweedFS) that `scripts/start-s3.sh` starts on
//! 127.0.0.1, and unique key prefixes so tests share its buckets without seeing each other.
//!
//! [`s3_test_server`] runs the script once per test process (it installs SeaweedFS into `.tools/`
//! on first use and reuses a running instance) and reads the env file it writes. When the server
//! can't be started, every test that needs it panics with the script's output: a missing server
//! is a failed test, never a skip. The server keeps running after the tests (so the next run
//! starts in a fraction of a second); `scripts/stop-s3.sh` stops it.
//!
//! Compiled only for tests and the `test-util` feature.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::store::{S3Credentials, StoreSettings, TierStore};

/// How long the script may take: a cold install downloads ~48 MB.
const START_TIMEOUT: Duration = Duration::from_secs(600);

/// The running S3 test server, as recorded in its env file.
#[derive(Debug, Clone)]
pub struct S3TestServer {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    /// A plain bucket.
    pub bucket: String,
    /// A bucket created with Object Lock enabled (so versioned).
    pub lock_bucket: String,
    /// The signing region.
    pub region: String,
    /// The server's only identity.
    pub credentials: S3Credentials,
}

impl S3TestServer {
    /// Settings for `s3://<bucket>/<prefix>` on this server.
    pub fn settings(&self, bucket: &str, prefix: &str) -> StoreSettings {
        StoreSettings {
            url: format!("s3://{bucket}/{prefix}"),
            s3_endpoint: Some(self.endpoint.clone()),
            s3_region: Some(self.region.clone()),
            s3_credentials: Some(self.credentials.clone()),
        }
    }

    /// Opens `s3://<bucket>/<prefix>` on this server.
    ///
    /// # Panics
    /// If the settings don't open (a bug in the test or in `TierStore::open`).
    pub fn open(&self, bucket: &str, prefix: &str) -> TierStore {
        TierStore::open(&self.settings(bucket, prefix)).unwrap_or_else(|e| {
            panic!("opening s3://{bucket}/{prefix} on {}: {e:?}", self.endpoint)
        })
    }
}

/// The S3 test server, started (or found running) by `scripts/start-s3.sh` on first use.
///
/// # Panics
/// When the script fails or its env file is incomplete; the message carries the script's
/// output. Every later call in the same process panics with the same message.
pub fn s3_test_server() -> &'static S3TestServer {
    static SERVER: OnceLock<Result<S3TestServer, String>> = OnceLock::new();
    match SERVER.get_or_init(start_server) {
        Ok(server) => server,
        Err(message) => panic!(
            "the S3 test server is required and could not be started \
             (SeaweedFS via scripts/start-s3.sh; tests never skip without it):\n{message}"
        ),
    }
}

/// A key prefix no other test (or test run) uses: `tests/<label>/<random>`.
///
/// # Panics
/// When the OS has no randomness.
pub fn unique_prefix(label: &str) -> String {
    let token = getrandom::u64().expect("invariant: the OS provides randomness");
    format!("tests/{label}/{token:016x}")
}

fn repository_root() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::canonicalize(&root).unwrap_or(root)
}

// Waits, bounded, for the S3 test server process to come up.
#[allow(clippy::disallowed_methods)]
fn start_server() -> Result<S3TestServer, String> {
    let root = repository_root();
    let script = root.join("scripts/start-s3.sh");
    let mut child = Command::new("bash")
        .arg(&script)
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stderr = child.stderr.take().map(read_in_background);
    let stdout = child.stdout.take().map(read_in_background);
    let deadline = Instant::now() + START_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() >= deadline => {
                // Our own child, by its handle: nothing else gets signalled.
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!(
                    "{} did not finish within {START_TIMEOUT:?}",
                    script.display()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => break Err(format!("waiting for {}: {e}", script.display())),
        }
    };
    let stderr = stderr
        .map(|reader| reader.join().unwrap_or_default())
        .unwrap_or_default();
    let _ = stdout.map(std::thread::JoinHandle::join);
    let status = status.map_err(|e| format!("{e}\n--- script stderr ---\n{stderr}"))?;
    if !status.success() {
        return Err(format!(
            "{} exited with {status}\n--- script stderr ---\n{stderr}",
            script.display()
        ));
    }
    let state_dir = std::env::var_os("STRATA_S3_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".tools/s3"));
    let env_file = state_dir.join("env");
    let text = std::fs::read_to_string(&env_file).map_err(|e| {
        format!(
            "reading {}: {e}\n--- script stderr ---\n{stderr}",
            env_file.display()
        )
    })?;
    parse_env_file(&text).map_err(|e| format!("{}: {e}", env_file.display()))
}

fn read_in_background(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Parses `export KEY=VALUE` / `KEY=VALUE` lines (values unquoted, as the script writes them).
fn parse_env_file(text: &str) -> Result<S3TestServer, String> {
    let vars: HashMap<&str, &str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.strip_prefix("export ").unwrap_or(line).split_once('='))
        .collect();
    let get = |name: &str| {
        vars.get(name)
            .filter(|value| !value.is_empty())
            .map(|value| (*value).to_owned())
            .ok_or_else(|| format!("missing {name}"))
    };
    Ok(S3TestServer {
        endpoint: get("STRATA_TEST_S3_ENDPOINT")?,
        bucket: get("STRATA_TEST_S3_BUCKET")?,
        lock_bucket: get("STRATA_TEST_S3_LOCK_BUCKET")?,
        region: get("AWS_REGION")?,
        credentials: S3Credentials {
            access_key_id: get("AWS_ACCESS_KEY_ID")?,
            secret_access_key: get("AWS_SECRET_ACCESS_KEY")?,
            session_token: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_file_parses_export_lines() {
        let text = "# comment\nexport STRATA_TEST_S3_ENDPOINT=http://127.0.0.1:1\n\
                    export STRATA_TEST_S3_BUCKET=b\nSTRATA_TEST_S3_LOCK_BUCKET=l\n\
                    export AWS_REGION=us-east-1\nexport AWS_ACCESS_KEY_ID=k\n\
                    export AWS_SECRET_ACCESS_KEY=s=x\n";
        let server = parse_env_file(text).unwrap();
        assert_eq!(server.endpoint, "http://127.0.0.1:1");
        assert_eq!(server.lock_bucket, "l");
        assert_eq!(server.credentials.secret_access_key, "s=x");
    }

    #[test]
    fn env_file_without_endpoint_is_an_error() {
        let err = parse_env_file("export STRATA_TEST_S3_BUCKET=b\n").unwrap_err();
        assert!(err.contains("STRATA_TEST_S3_ENDPOINT"), "{err}");
    }
}

//! Server settings: built-in defaults < TOML file < `STRATA_*` environment < command-line flags.
//!
//! No file is needed: `strata serve` runs on the defaults. Every setting has one name used in all
//! three places (`data_dir` in TOML, `STRATA_DATA_DIR` in the environment, `--data-dir` as a
//! flag), and [`Config::validate`] reports every bad value at once so an operator fixes them in
//! one go.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::io::IoBackendChoice;
use crate::limits;
use crate::security::acl::AclRule;

/// Everything `strata serve` can be told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address to listen on; port 0 picks a free port (the bound address is printed).
    pub listen: SocketAddr,
    /// Directory holding all topics and partition data.
    pub data_dir: PathBuf,
    /// Disk I/O backend: `auto` (io_uring if the kernel and container allow it), `io_uring`
    /// (refuse to start without it) or `sync` (plain syscalls).
    pub io_backend: IoBackendChoice,
    /// Bytes at the end of each partition's active segment kept in the page cache; durable
    /// bytes further behind are dropped from it so the kernel reuses their pages (0: keep
    /// everything, the kernel decides). Unset: 8 MiB on a VM that reports free pages to its
    /// host, else 0 (`io::free_page_reporting`, ADR 0014).
    pub page_cache_window_bytes: Option<u64>,
    /// Bytes reserved at a time (`fallocate`) ahead of each partition's active segment, so an
    /// fdatasync inside them skips the file-system journal commit an append needs; also the
    /// most disk space an active segment holds beyond its data (0: no reservation).
    pub segment_preallocate_bytes: u64,
    /// Largest HTTP request body accepted (413 beyond).
    pub max_request_bytes: u64,
    /// Most partitions one topic may have.
    pub max_partitions_per_topic: u32,
    /// Upper bound of a fetch's `max_wait_ms` (long-poll).
    pub fetch_max_wait_ms: u64,
    /// `max_bytes` of a fetch that does not say.
    pub fetch_default_max_bytes: u64,
    /// Upper bound of a fetch's `max_bytes`.
    pub fetch_max_bytes: u64,
    /// Interval of SSE `ping` events on an idle stream.
    pub sse_ping_interval_ms: u64,
    /// How long a graceful shutdown waits for in-flight requests.
    pub shutdown_timeout_ms: u64,
    /// How often time and size retention and compaction run.
    pub retention_check_interval_ms: u64,
    /// Bytes per second the compaction cleaner may read plus write; 0 = unlimited.
    pub cleaner_io_max_bytes_per_second: u64,
    /// Object store for tiered topics: a folder, `file:///path` or `s3://bucket/prefix`; empty
    /// means `<data_dir>/tiered`.
    pub tiered_storage_url: String,
    /// S3 endpoint of an S3-compatible server; empty: AWS (or `AWS_ENDPOINT_URL`).
    pub tiered_storage_s3_endpoint: String,
    /// S3 region; empty: `AWS_REGION`, else us-east-1.
    pub tiered_storage_s3_region: String,
    /// Period of the tiering sweep (uploads, local and remote retention) in ms.
    pub tiering_interval_ms: u64,
    /// Bytes of remote data cached in memory for cold reads.
    pub tiering_chunk_cache_bytes: u64,
    /// Age in ms after which objects no manifest references are deleted.
    pub tiering_orphan_grace_ms: u64,
    /// Checkpoint signing key of the bucket's transparency logs (`PRIVATE+KEY+...`); empty:
    /// `<data_dir>/archive/signing.key`, created on first start.
    pub archive_signing_key_file: String,
    /// Allow a new signing key for a bucket whose logs another key signed (a data directory
    /// lost with its key). Off, such a start is refused: a silently new key would leave an
    /// auditor holding the old one unable to verify anything signed from then on.
    pub archive_allow_new_signing_key: bool,
    /// Longest time an entry of the read audit (`__audit_reads`) waits locally before its
    /// segment rolls and is uploaded to the bucket, in ms.
    pub audit_upload_idle_ms: u64,
    /// `none` (anyone who reaches the port may do everything) or `api_key` (every request but
    /// health checks and the API description needs `Authorization: Bearer <token>`).
    pub auth_mode: AuthMode,
    /// The API key file (hashes only); empty means `<data_dir>/auth/keys.json`.
    pub auth_keys_file: String,
    /// The file of ACLs managed through `/v1/acls`; empty means `<data_dir>/auth/acls.json`.
    pub auth_acls_file: String,
    /// Principals that may do everything, ACLs or not (bootstrap admins).
    pub auth_super_users: Vec<String>,
    /// ACL rules fixed by configuration (TOML only), in force beside the managed ones.
    pub auth_acls: Vec<AclRule>,
    /// How long a request body may take to arrive whole (408 beyond).
    pub request_body_timeout_ms: u64,
    /// Bytes of request bodies received at once, all connections together (503 beyond).
    pub max_inflight_request_bytes: u64,
    /// How long a client may take to send request headers, and to start its next request on
    /// a kept-alive connection.
    pub header_read_timeout_ms: u64,
    /// Open client connections; more are answered 503 and closed.
    pub max_connections: u64,
    /// Open SSE streams and long polls per principal (429 beyond).
    pub max_streams_per_principal: u64,
    /// Origins browsers may call from (`*` for any); empty: CORS off.
    pub cors_allowed_origins: Vec<String>,
    /// PEM certificate chain for HTTPS; empty: plain HTTP.
    pub tls_cert_file: String,
    /// PEM private key for HTTPS.
    pub tls_key_file: String,
    /// PEM CA bundle: client certificates it signed authenticate their principal (required
    /// with `auth_mode = mtls`, optional otherwise).
    pub tls_client_ca_file: String,
    /// Which name of a client certificate is the principal: `cn` or `san`.
    pub tls_client_principal: crate::security::tls::PrincipalFrom,
    /// Default quotas of every principal (0 = unlimited).
    pub quota: Quota,
    /// Quotas of named principals, replacing the default (TOML only).
    pub auth_quotas: std::collections::BTreeMap<String, Quota>,
    /// Log lines as `text` (for people; colours only on a terminal) or `json` (one object per
    /// line, for log pipelines).
    pub log_format: LogFormat,
    /// Log filter in `RUST_LOG` syntax (`info`, `strata_server=debug,info`); the `RUST_LOG`
    /// variable, when set, wins.
    pub log_level: String,
    /// Share of requests that get an access log line: 1 = every request, 0 = none.
    pub access_log_sample_rate: f64,
    /// Serve `/metrics` (and keep counting); off, nothing is counted per request.
    pub metrics_enabled: bool,
    /// Label produce counters by topic; off, all topics share one series (for servers with
    /// very many topics).
    pub metrics_topic_labels: bool,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Rates one principal may use; 0 means unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Quota {
    /// Requests per second.
    pub requests_per_second: u64,
    /// Request body bytes per second written by produce.
    pub produce_bytes_per_second: u64,
    /// Record bytes per second served by fetches.
    pub fetch_bytes_per_second: u64,
}

/// Whether and how callers prove who they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum AuthMode {
    /// No authentication: every caller is `anonymous` and may do everything.
    #[default]
    None,
    /// API keys as bearer tokens (or a verified client certificate, when TLS has a client
    /// CA), authorized by ACLs.
    ApiKey,
    /// Client certificates required at the TLS handshake (needs `tls_client_ca_file`); a
    /// bearer API key may name another principal on such a connection.
    Mtls,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 8080)),
            data_dir: PathBuf::from("./data"),
            io_backend: IoBackendChoice::Auto,
            page_cache_window_bytes: None,
            segment_preallocate_bytes: crate::log::config::DEFAULT_SEGMENT_PREALLOCATE_BYTES,
            max_request_bytes: limits::MAX_REQUEST_BYTES,
            max_partitions_per_topic: limits::MAX_PARTITIONS_PER_TOPIC,
            fetch_max_wait_ms: limits::FETCH_MAX_WAIT_MS,
            fetch_default_max_bytes: limits::FETCH_DEFAULT_MAX_BYTES,
            fetch_max_bytes: limits::FETCH_MAX_BYTES,
            sse_ping_interval_ms: limits::SSE_PING_INTERVAL_MS,
            shutdown_timeout_ms: limits::SHUTDOWN_TIMEOUT_MS,
            retention_check_interval_ms: limits::RETENTION_CHECK_INTERVAL_MS,
            cleaner_io_max_bytes_per_second: 0,
            tiered_storage_url: String::new(),
            tiered_storage_s3_endpoint: String::new(),
            tiered_storage_s3_region: String::new(),
            tiering_interval_ms: 5_000,
            auth_mode: AuthMode::None,
            auth_keys_file: String::new(),
            auth_acls_file: String::new(),
            auth_super_users: Vec::new(),
            auth_acls: Vec::new(),
            request_body_timeout_ms: limits::REQUEST_BODY_TIMEOUT_MS,
            max_inflight_request_bytes: limits::MAX_INFLIGHT_REQUEST_BYTES,
            header_read_timeout_ms: limits::HEADER_READ_TIMEOUT_MS,
            max_connections: limits::MAX_CONNECTIONS,
            max_streams_per_principal: limits::MAX_STREAMS_PER_PRINCIPAL,
            cors_allowed_origins: Vec::new(),
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
            tls_client_ca_file: String::new(),
            tls_client_principal: crate::security::tls::PrincipalFrom::Cn,
            quota: Quota::default(),
            auth_quotas: std::collections::BTreeMap::new(),
            tiering_chunk_cache_bytes: 256 << 20,
            tiering_orphan_grace_ms: 3_600_000,
            archive_signing_key_file: String::new(),
            archive_allow_new_signing_key: false,
            audit_upload_idle_ms: 60_000,
            log_format: LogFormat::Text,
            log_level: "info".to_string(),
            access_log_sample_rate: 1.0,
            metrics_enabled: true,
            metrics_topic_labels: true,
        }
    }
}

/// Command-line flags (each also read from its `STRATA_*` variable); unset ones keep the value
/// from the file or the default.
#[derive(Debug, Clone, Default, Args)]
pub struct ConfigArgs {
    /// TOML file with settings (optional).
    #[arg(long, env = "STRATA_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, env = "STRATA_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Data directory.
    #[arg(long, env = "STRATA_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Disk I/O backend: auto, io_uring or sync.
    #[arg(long, env = "STRATA_IO_BACKEND")]
    pub io_backend: Option<IoBackendChoice>,
    /// Bytes of each active segment's end kept in the page cache (0: all).
    #[arg(long, env = "STRATA_PAGE_CACHE_WINDOW_BYTES")]
    pub page_cache_window_bytes: Option<u64>,
    /// Bytes reserved at a time ahead of each active segment's writes (0: none).
    #[arg(long, env = "STRATA_SEGMENT_PREALLOCATE_BYTES")]
    pub segment_preallocate_bytes: Option<u64>,
    /// Largest request body in bytes.
    #[arg(long, env = "STRATA_MAX_REQUEST_BYTES")]
    pub max_request_bytes: Option<u64>,
    /// Most partitions per topic.
    #[arg(long, env = "STRATA_MAX_PARTITIONS_PER_TOPIC")]
    pub max_partitions_per_topic: Option<u32>,
    /// Upper bound of a fetch's long-poll wait in ms.
    #[arg(long, env = "STRATA_FETCH_MAX_WAIT_MS")]
    pub fetch_max_wait_ms: Option<u64>,
    /// Default max_bytes of a fetch.
    #[arg(long, env = "STRATA_FETCH_DEFAULT_MAX_BYTES")]
    pub fetch_default_max_bytes: Option<u64>,
    /// Upper bound of a fetch's max_bytes.
    #[arg(long, env = "STRATA_FETCH_MAX_BYTES")]
    pub fetch_max_bytes: Option<u64>,
    /// SSE ping interval in ms.
    #[arg(long, env = "STRATA_SSE_PING_INTERVAL_MS")]
    pub sse_ping_interval_ms: Option<u64>,
    /// Graceful shutdown timeout in ms.
    #[arg(long, env = "STRATA_SHUTDOWN_TIMEOUT_MS")]
    pub shutdown_timeout_ms: Option<u64>,
    /// Interval of the retention and compaction check in ms.
    #[arg(long, env = "STRATA_RETENTION_CHECK_INTERVAL_MS")]
    pub retention_check_interval_ms: Option<u64>,
    /// Compaction I/O limit in bytes per second (0 = unlimited).
    #[arg(long, env = "STRATA_CLEANER_IO_MAX_BYTES_PER_SECOND")]
    pub cleaner_io_max_bytes_per_second: Option<u64>,
    /// Tiered storage: folder, file:///path or s3://bucket/prefix.
    #[arg(long, env = "STRATA_TIERED_STORAGE_URL")]
    pub tiered_storage_url: Option<String>,
    /// S3 endpoint for S3-compatible servers.
    #[arg(long, env = "STRATA_TIERED_STORAGE_S3_ENDPOINT")]
    pub tiered_storage_s3_endpoint: Option<String>,
    /// S3 region.
    #[arg(long, env = "STRATA_TIERED_STORAGE_S3_REGION")]
    pub tiered_storage_s3_region: Option<String>,
    /// Tiering sweep period in ms.
    #[arg(long, env = "STRATA_TIERING_INTERVAL_MS")]
    pub tiering_interval_ms: Option<u64>,
    /// Cold-read cache size in bytes.
    #[arg(long, env = "STRATA_TIERING_CHUNK_CACHE_BYTES")]
    pub tiering_chunk_cache_bytes: Option<u64>,
    /// Orphaned-object grace period in ms.
    #[arg(long, env = "STRATA_TIERING_ORPHAN_GRACE_MS")]
    pub tiering_orphan_grace_ms: Option<u64>,
    /// Checkpoint signing key file of the bucket's transparency logs.
    #[arg(long, env = "STRATA_ARCHIVE_SIGNING_KEY_FILE")]
    pub archive_signing_key_file: Option<String>,
    /// Start with a new signing key although the bucket's logs were signed by another (true
    /// or false).
    #[arg(long, env = "STRATA_ARCHIVE_ALLOW_NEW_SIGNING_KEY")]
    pub archive_allow_new_signing_key: Option<bool>,
    /// Longest wait in ms before read-audit entries are uploaded.
    #[arg(long, env = "STRATA_AUDIT_UPLOAD_IDLE_MS")]
    pub audit_upload_idle_ms: Option<u64>,
    /// Authentication: none, api_key or mtls.
    #[arg(long, env = "STRATA_AUTH_MODE")]
    pub auth_mode: Option<AuthMode>,
    /// API key file (default `<data_dir>/auth/keys.json`).
    #[arg(long, env = "STRATA_AUTH_KEYS_FILE")]
    pub auth_keys_file: Option<String>,
    /// Managed ACL file (default `<data_dir>/auth/acls.json`).
    #[arg(long, env = "STRATA_AUTH_ACLS_FILE")]
    pub auth_acls_file: Option<String>,
    /// Principals that may do everything (comma-separated).
    #[arg(long, env = "STRATA_AUTH_SUPER_USERS", value_delimiter = ',')]
    pub auth_super_users: Option<Vec<String>>,
    /// Request body read timeout in ms.
    #[arg(long, env = "STRATA_REQUEST_BODY_TIMEOUT_MS")]
    pub request_body_timeout_ms: Option<u64>,
    /// Request body bytes in flight across connections.
    #[arg(long, env = "STRATA_MAX_INFLIGHT_REQUEST_BYTES")]
    pub max_inflight_request_bytes: Option<u64>,
    /// Header read (and keep-alive idle) timeout in ms.
    #[arg(long, env = "STRATA_HEADER_READ_TIMEOUT_MS")]
    pub header_read_timeout_ms: Option<u64>,
    /// Open client connections.
    #[arg(long, env = "STRATA_MAX_CONNECTIONS")]
    pub max_connections: Option<u64>,
    /// Open SSE streams and long polls per principal.
    #[arg(long, env = "STRATA_MAX_STREAMS_PER_PRINCIPAL")]
    pub max_streams_per_principal: Option<u64>,
    /// CORS origins (comma-separated, `*` for any).
    #[arg(long, env = "STRATA_CORS_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub cors_allowed_origins: Option<Vec<String>>,
    /// HTTPS certificate chain (PEM).
    #[arg(long, env = "STRATA_TLS_CERT_FILE")]
    pub tls_cert_file: Option<String>,
    /// HTTPS private key (PEM).
    #[arg(long, env = "STRATA_TLS_KEY_FILE")]
    pub tls_key_file: Option<String>,
    /// CA bundle for client certificates (PEM); turns on mTLS.
    #[arg(long, env = "STRATA_TLS_CLIENT_CA_FILE")]
    pub tls_client_ca_file: Option<String>,
    /// Client certificate name that is the principal: cn or san.
    #[arg(long, env = "STRATA_TLS_CLIENT_PRINCIPAL")]
    pub tls_client_principal: Option<crate::security::tls::PrincipalFrom>,
    /// Default requests per second per principal (0 = unlimited).
    #[arg(long, env = "STRATA_QUOTA_REQUESTS_PER_SECOND")]
    pub quota_requests_per_second: Option<u64>,
    /// Default produce bytes per second per principal (0 = unlimited).
    #[arg(long, env = "STRATA_QUOTA_PRODUCE_BYTES_PER_SECOND")]
    pub quota_produce_bytes_per_second: Option<u64>,
    /// Default fetch bytes per second per principal (0 = unlimited).
    #[arg(long, env = "STRATA_QUOTA_FETCH_BYTES_PER_SECOND")]
    pub quota_fetch_bytes_per_second: Option<u64>,
    /// Log format: text or json.
    #[arg(long, env = "STRATA_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,
    /// Log filter (RUST_LOG syntax; RUST_LOG itself wins).
    #[arg(long, env = "STRATA_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Share of requests with an access log line (0 to 1).
    #[arg(long, env = "STRATA_ACCESS_LOG_SAMPLE_RATE")]
    pub access_log_sample_rate: Option<f64>,
    /// Serve /metrics and count (true or false).
    #[arg(long, env = "STRATA_METRICS_ENABLED")]
    pub metrics_enabled: Option<bool>,
    /// Label produce metrics by topic (true or false).
    #[arg(long, env = "STRATA_METRICS_TOPIC_LABELS")]
    pub metrics_topic_labels: Option<bool>,
}

/// Why the configuration cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema.
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (names the key and line).
        message: String,
    },
    /// One or more settings are out of range.
    #[error("invalid settings: {}", .0.join("; "))]
    Invalid(Vec<String>),
}

impl Config {
    /// Defaults, then the file (if any), then environment and flags (already merged by clap).
    ///
    /// # Errors
    /// An unreadable or invalid file, or values out of range.
    pub fn load(args: &ConfigArgs) -> Result<Config, ConfigError> {
        let mut config = match &args.config {
            Some(path) => Self::from_file(path)?,
            None => Config::default(),
        };
        macro_rules! take {
            ($($field:ident),*) => { $( if let Some(value) = args.$field.clone() { config.$field = value; } )* };
        }
        take!(
            listen,
            data_dir,
            io_backend,
            max_request_bytes,
            max_partitions_per_topic,
            fetch_max_wait_ms,
            fetch_default_max_bytes,
            fetch_max_bytes,
            sse_ping_interval_ms,
            shutdown_timeout_ms,
            retention_check_interval_ms,
            cleaner_io_max_bytes_per_second,
            tiered_storage_url,
            tiered_storage_s3_endpoint,
            tiered_storage_s3_region,
            tiering_interval_ms,
            tiering_chunk_cache_bytes,
            tiering_orphan_grace_ms,
            archive_signing_key_file,
            archive_allow_new_signing_key,
            audit_upload_idle_ms,
            auth_mode,
            auth_keys_file,
            auth_acls_file,
            auth_super_users,
            request_body_timeout_ms,
            max_inflight_request_bytes,
            header_read_timeout_ms,
            max_connections,
            max_streams_per_principal,
            cors_allowed_origins,
            tls_cert_file,
            tls_key_file,
            tls_client_ca_file,
            tls_client_principal,
            log_format,
            log_level,
            access_log_sample_rate,
            metrics_enabled,
            metrics_topic_labels
        );
        macro_rules! take_quota {
            ($($field:ident => $arg:ident),*) => { $( if let Some(value) = args.$arg { config.quota.$field = value; } )* };
        }
        take_quota!(
            requests_per_second => quota_requests_per_second,
            produce_bytes_per_second => quota_produce_bytes_per_second,
            fetch_bytes_per_second => quota_fetch_bytes_per_second
        );
        if let Some(bytes) = args.page_cache_window_bytes {
            config.page_cache_window_bytes = Some(bytes);
        }
        if let Some(bytes) = args.segment_preallocate_bytes {
            config.segment_preallocate_bytes = bytes;
        }
        config.validate()?;
        Ok(config)
    }

    /// The tiering part of the settings.
    pub fn tiering_settings(&self) -> crate::tiering::TieringSettings {
        crate::tiering::TieringSettings {
            url: self.tiered_storage_url.clone(),
            s3_endpoint: self.tiered_storage_s3_endpoint.clone(),
            s3_region: self.tiered_storage_s3_region.clone(),
            interval_ms: self.tiering_interval_ms,
            chunk_cache_bytes: self.tiering_chunk_cache_bytes,
            orphan_grace_ms: i64::try_from(self.tiering_orphan_grace_ms).unwrap_or(i64::MAX),
            signing_key_file: self.archive_signing_key_file.clone(),
            allow_new_signing_key: self.archive_allow_new_signing_key,
        }
    }

    /// Reads a TOML file over the defaults.
    ///
    /// # Errors
    /// Unreadable file or invalid TOML (unknown keys included).
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|error| ConfigError::Parse {
            path: path.to_path_buf(),
            message: error.to_string(),
        })
    }

    /// The API key file.
    pub fn keys_path(&self) -> PathBuf {
        self.auth_path(&self.auth_keys_file, "keys.json")
    }

    /// The managed ACL file.
    pub fn acls_path(&self) -> PathBuf {
        self.auth_path(&self.auth_acls_file, "acls.json")
    }

    fn auth_path(&self, configured: &str, default: &str) -> PathBuf {
        if configured.is_empty() {
            self.data_dir.join("auth").join(default)
        } else {
            PathBuf::from(configured)
        }
    }

    /// Checks every bound and reports all violations together.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] listing each bad setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut errors = Vec::new();
        let mut check = |ok: bool, message: String| {
            if !ok {
                errors.push(message);
            }
        };
        check(
            (1024..=limits::MAX_REQUEST_BYTES_LIMIT).contains(&self.max_request_bytes),
            format!(
                "max_request_bytes must be between 1024 and {}",
                limits::MAX_REQUEST_BYTES_LIMIT
            ),
        );
        check(
            (1..=limits::MAX_PARTITIONS_PER_TOPIC_LIMIT).contains(&self.max_partitions_per_topic),
            format!(
                "max_partitions_per_topic must be between 1 and {}",
                limits::MAX_PARTITIONS_PER_TOPIC_LIMIT
            ),
        );
        check(
            self.fetch_max_wait_ms <= 300_000,
            "fetch_max_wait_ms must be at most 300000".into(),
        );
        check(
            self.fetch_default_max_bytes >= 1
                && self.fetch_default_max_bytes <= self.fetch_max_bytes,
            "fetch_default_max_bytes must be between 1 and fetch_max_bytes".into(),
        );
        check(
            self.fetch_max_bytes <= limits::FETCH_MAX_BYTES_LIMIT,
            format!(
                "fetch_max_bytes must be at most {}",
                limits::FETCH_MAX_BYTES_LIMIT
            ),
        );
        check(
            (1..=i64::MAX as u64).contains(&self.audit_upload_idle_ms),
            "audit_upload_idle_ms must be at least 1".into(),
        );
        check(
            self.sse_ping_interval_ms >= 10,
            "sse_ping_interval_ms must be at least 10".into(),
        );
        check(
            self.request_body_timeout_ms >= 100 && self.header_read_timeout_ms >= 100,
            "request_body_timeout_ms and header_read_timeout_ms must be at least 100".into(),
        );
        check(
            self.max_inflight_request_bytes >= self.max_request_bytes,
            "max_inflight_request_bytes must be at least max_request_bytes".into(),
        );
        check(
            self.max_connections >= 1 && self.max_streams_per_principal >= 1,
            "max_connections and max_streams_per_principal must be at least 1".into(),
        );
        check(
            self.tls_cert_file.is_empty() == self.tls_key_file.is_empty(),
            "tls_cert_file and tls_key_file go together".into(),
        );
        check(
            self.tls_client_ca_file.is_empty() || !self.tls_cert_file.is_empty(),
            "tls_client_ca_file needs tls_cert_file and tls_key_file".into(),
        );
        check(
            self.auth_mode != AuthMode::Mtls || !self.tls_client_ca_file.is_empty(),
            "auth_mode = mtls needs tls_client_ca_file (and tls_cert_file, tls_key_file)".into(),
        );
        check(
            (0.0..=1.0).contains(&self.access_log_sample_rate),
            "access_log_sample_rate must be between 0 and 1".into(),
        );
        check(
            tracing_subscriber::EnvFilter::try_new(&self.log_level).is_ok(),
            format!(
                "log_level {:?} is not a valid filter (examples: info, strata_server=debug,warn)",
                self.log_level
            ),
        );
        for rule in &self.auth_acls {
            if let Err(reason) = rule.check() {
                errors.push(format!("auth_acls: {reason}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_listen_on_8080() {
        let config = Config::default();
        config.validate().unwrap();
        assert_eq!(config.listen.port(), 8080);
        assert_eq!(config.data_dir, PathBuf::from("./data"));
    }

    #[test]
    fn file_then_flags_override_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("strata.toml");
        std::fs::write(
            &path,
            "data_dir = \"/var/lib/strata\"\nfetch_max_wait_ms = 1000\n",
        )
        .unwrap();
        let args = ConfigArgs {
            config: Some(path),
            fetch_max_wait_ms: Some(2000),
            ..ConfigArgs::default()
        };
        let config = Config::load(&args).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/var/lib/strata"));
        assert_eq!(config.fetch_max_wait_ms, 2000);
        assert_eq!(config.listen, Config::default().listen);
    }

    #[test]
    fn unknown_file_keys_and_bad_values_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("strata.toml");
        std::fs::write(&path, "data_dri = \"x\"\n").unwrap();
        let error = Config::from_file(&path).unwrap_err().to_string();
        assert!(error.contains("data_dri"), "{error}");
        let bad = Config {
            max_request_bytes: 1,
            fetch_max_wait_ms: 10_000_000,
            ..Config::default()
        };
        match bad.validate() {
            Err(ConfigError::Invalid(errors)) => assert_eq!(errors.len(), 2, "{errors:?}"),
            other => panic!("expected two errors, got {other:?}"),
        }
    }

    #[test]
    fn log_and_metrics_settings_parse_and_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("strata.toml");
        std::fs::write(
            &path,
            "log_format = \"json\"\nlog_level = \"strata_server=debug,warn\"\n\
             access_log_sample_rate = 0.25\nmetrics_topic_labels = false\n",
        )
        .unwrap();
        let config = Config::from_file(&path).unwrap();
        assert_eq!(config.log_format, LogFormat::Json);
        assert_eq!(config.access_log_sample_rate, 0.25);
        assert!(!config.metrics_topic_labels && config.metrics_enabled);
        config.validate().unwrap();
        let bad = Config {
            access_log_sample_rate: 1.5,
            log_level: "strata_server=loud".into(),
            ..Config::default()
        };
        match bad.validate() {
            Err(ConfigError::Invalid(errors)) => assert_eq!(errors.len(), 2, "{errors:?}"),
            other => panic!("expected two errors, got {other:?}"),
        }
    }

    /// The Helm chart's `config` values (helm/strata/values.schema.json) must offer every
    /// setting the chart does not set itself, and nothing the server would reject: a setting
    /// added here without the chart fails this test.
    #[test]
    fn helm_chart_schema_offers_every_setting() {
        let schema_path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../helm/strata/values.schema.json"
        );
        let schema: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
        let offered = schema["properties"]["config"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned();
        let owned_by_chart = [
            "listen",
            "data_dir",
            "tls_cert_file",
            "tls_key_file",
            "tls_client_ca_file",
            "tls_client_principal",
            "auth_keys_file",
        ];
        let mut chart: Vec<String> = offered
            .chain(owned_by_chart.iter().map(|key| key.to_string()))
            .collect();
        chart.sort();
        let server = serde_json::to_value(Config::default()).unwrap();
        let mut settings: Vec<String> = server.as_object().unwrap().keys().cloned().collect();
        settings.sort();
        assert_eq!(chart, settings);
    }
}

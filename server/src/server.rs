//! Starting and stopping the whole server: bind first (health endpoints answer while the data
//! directory recovers), open the data directory (recovery and restore happen here), serve HTTP
//! until told to stop, then drain: stop accepting, let in-flight requests finish (long polls and
//! SSE streams end at once), flush every partition and mark the shutdown clean.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;

use serde_json::Value;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::audit::log::AuditLog;
use crate::broker::background::BackgroundTasks;
use crate::broker::{Broker, BrokerParts};
use crate::clock::{Clock, SystemClock};
use crate::config::{AuthMode, Config};
use crate::groups::coordinator::{Coordinator, GroupLimits};
use crate::groups::offsets::{OFFSETS_TOPIC, OffsetStore};
use crate::http::{AppState, router};
use crate::io::{Io, IoStartError};
use crate::names::TopicName;
use crate::producers::{ProducerRegistry, ProducerRegistryError};
use crate::security::authorizer::Authorizer;
use crate::security::file::{SecurityFileError, reload_on_change};
use crate::security::keys::KeyStore;
use crate::security::quota::Quotas;
use crate::security::tls::TlsSource;
use crate::serve::ConnectionSettings;
use crate::status::ServerStatus;
use crate::tiering::Tiering;
use crate::topics::catalog::{Catalog, CatalogError};

/// Why the server could not start or stopped with an error.
#[derive(Debug, Error)]
pub enum StartError {
    /// The data directory is unusable.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The requested disk I/O backend is unavailable.
    #[error(transparent)]
    Io(#[from] IoStartError),
    /// Topics could not be opened.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The producer registry could not be opened.
    #[error(transparent)]
    Producers(#[from] ProducerRegistryError),
    /// Consumer-group state could not be loaded.
    #[error("consumer groups: {0}")]
    Groups(String),
    /// Tiered storage could not be opened or restored from.
    #[error("{0}")]
    Tiering(String),
    /// The API key or ACL file cannot be read.
    #[error("security: {0}")]
    Security(String),
    /// Serving failed.
    #[error("http server: {0}")]
    Serve(#[source] std::io::Error),
}

/// Opens everything the API serves from `config.data_dir` (recovery happens here): disk I/O,
/// topics, producer ids, consumer-group offsets and membership. `status` follows the steps.
///
/// # Errors
/// See [`StartError`].
pub async fn build_state(
    config: Config,
    clock: Arc<dyn Clock>,
    shutdown: watch::Receiver<bool>,
    status: Arc<ServerStatus>,
) -> Result<AppState, StartError> {
    let data_dir = config.data_dir.clone();
    std::fs::create_dir_all(&data_dir).map_err(|source| StartError::DataDir {
        path: data_dir.clone(),
        source,
    })?;
    raise_open_file_limit();
    let (io, probe) = Io::start(config.io_backend, &data_dir)?;
    tracing::info!(backend = %probe.backend, reason = %probe.reason, "disk I/O backend");
    status.watch_disk(Arc::clone(io.stats()), data_dir.clone());
    status.starting("recovering", "recovering partitions: opening topics");
    let recovery_started = crate::clock::stopwatch();
    let catalog = Arc::new(
        Catalog::open(
            &data_dir,
            io.clone(),
            Arc::clone(&clock),
            crate::topics::catalog::CatalogSettings {
                max_partitions: config.max_partitions_per_topic,
                page_cache_window_bytes: page_cache_window(config.page_cache_window_bytes),
                segment_preallocate_bytes: config.segment_preallocate_bytes,
            },
        )
        .await?,
    );
    let recovery = recovery_started.elapsed();
    status.starting(
        "restoring",
        "opening tiered storage and restoring topics from it",
    );
    let tiering = Tiering::open(config.tiering_settings(), &data_dir, Arc::clone(&clock))
        .await
        .map_err(|error| StartError::Tiering(error.to_string()))?;
    // Before the restore, which must not bring back a topic whose deletion a crash cut short.
    tiering.resume_deletions(&catalog).await;
    let restored = tiering
        .restore(&catalog)
        .await
        .map_err(|error| StartError::Tiering(error.to_string()))?;
    if !restored.topics.is_empty() {
        tracing::info!(topics = ?restored.topics, "restored topics from tiered storage");
    }
    status.starting(
        "recovering",
        "loading producer ids and consumer-group offsets",
    );
    let producers = Arc::new(ProducerRegistry::open(&data_dir, io.clone())?);
    let offsets_topic = match catalog.get(OFFSETS_TOPIC) {
        Some(topic) => topic,
        None => {
            let configs = BTreeMap::from([("cleanup_policy".to_string(), Value::from("compact"))]);
            let name = TopicName::internal(OFFSETS_TOPIC).map_err(CatalogError::from)?;
            catalog.create(&name, 1, &configs).await?
        }
    };
    let offsets_log = offsets_topic
        .partition(0)
        .ok_or_else(|| StartError::Groups(format!("{OFFSETS_TOPIC} has no partition 0")))?;
    let offsets = Arc::new(
        OffsetStore::open(offsets_log)
            .await
            .map_err(|error| StartError::Groups(error.to_string()))?,
    );
    let groups_restored = tiering
        .restore_group_offsets(&offsets, &restored.topics)
        .await
        .map_err(|error| StartError::Tiering(error.to_string()))?;
    if groups_restored > 0 {
        tracing::info!(
            commits = groups_restored,
            "restored consumer-group offsets from tiered storage"
        );
    }
    // A crash between a topic's deletion and its offsets' tombstones leaves offsets of a
    // topic that no longer exists.
    let forgotten = offsets
        .forget_topics(|topic| catalog.get(topic).is_none(), clock.now_ms())
        .await
        .map_err(|error| StartError::Groups(error.to_string()))?;
    if forgotten > 0 {
        tracing::info!(
            offsets = forgotten,
            "deleted committed offsets of topics that no longer exist"
        );
    }
    let audit = Arc::new(
        AuditLog::open(Arc::clone(&catalog), config.audit_upload_idle_ms)
            .await
            .map_err(|error| StartError::Tiering(error.to_string()))?,
    );
    let coordinator = Arc::new(Coordinator::new(Arc::clone(&clock), GroupLimits::default()));
    if !config.acls_path().exists()
        && let Some(rules) = tiering
            .archived_acls()
            .await
            .map_err(|error| StartError::Tiering(error.to_string()))?
    {
        let count = rules.len();
        Authorizer::seed(&config.acls_path(), rules)
            .map_err(|error| StartError::Security(error.to_string()))?;
        tracing::info!(rules = count, "restored the ACL rules from tiered storage");
    }
    let (keys, authorizer) = open_security(&config)?;
    let config = Arc::new(config);
    let broker = Arc::new(Broker::new(BrokerParts {
        catalog,
        tiering,
        producers,
        coordinator,
        offsets,
        audit,
        config: Arc::clone(&config),
        clock,
        shutdown: shutdown.clone(),
        sticky_seed: STICKY_SEED,
        authorizer,
        keys,
        quotas: Arc::new(Quotas::new(config.quota, config.auth_quotas.clone())),
    }));
    status.watch_partitions(Arc::clone(broker.catalog()));
    let metrics = config.metrics_enabled.then(|| {
        Arc::new(crate::metrics::Exporter::new(
            Arc::clone(io.stats()),
            probe.backend.to_string(),
            recovery,
        ))
    });
    let http_stats = Arc::new(crate::http::observe::HttpStats::new(
        config.metrics_enabled,
        config.access_log_sample_rate,
    ));
    Ok(AppState {
        broker,
        config,
        io_backend: probe.backend.to_string(),
        shutdown,
        status,
        http_stats,
        metrics,
    })
}

/// How connections are accepted: limits, and TLS when configured.
fn connection_settings(config: &Config) -> Result<ConnectionSettings, StartError> {
    let tls = match config.tls_cert_file.is_empty() {
        true => None,
        false => {
            let ca = (!config.tls_client_ca_file.is_empty())
                .then(|| std::path::Path::new(&config.tls_client_ca_file));
            let source = TlsSource::open(
                std::path::Path::new(&config.tls_cert_file),
                std::path::Path::new(&config.tls_key_file),
                ca,
                config.auth_mode == AuthMode::Mtls,
            )
            .map_err(|error| StartError::Security(error.to_string()))?;
            Some(Arc::new(source))
        }
    };
    Ok(ConnectionSettings {
        header_read_timeout: Duration::from_millis(config.header_read_timeout_ms),
        max_connections: usize::try_from(config.max_connections).unwrap_or(usize::MAX),
        tls,
        principal_from: config.tls_client_principal,
    })
}

/// Rebuilds the TLS configuration when its files change or on SIGHUP: a renewed certificate
/// is served to new connections without a restart.
async fn reload_tls(tls: Arc<TlsSource>) {
    reload_on_change("TLS files", move || match tls.reload_if_changed() {
        Ok(true) => tracing::info!("reloaded the TLS certificate and key"),
        Ok(false) => {}
        Err(error) => {
            tracing::error!(%error, "cannot reload TLS files; the previous ones stay in use")
        }
    })
    .await;
}

/// Anyone who can reach a non-loopback address may do everything without authentication: fine
/// on a laptop, a mistake next to real data, so it is said at every start.
fn warn_if_open(config: &Config, address: std::net::SocketAddr) {
    if config.auth_mode == AuthMode::None && !address.ip().is_loopback() {
        tracing::warn!(
            %address,
            "authentication is off (auth_mode = none) on a non-loopback address: anyone who can \
             reach it can read, write and delete every topic; set auth_mode = api_key"
        );
    }
}

/// The API keys and the authorizer, from their files (created on first write).
fn open_security(config: &Config) -> Result<(Arc<KeyStore>, Arc<Authorizer>), StartError> {
    let security = |error: SecurityFileError| StartError::Security(error.to_string());
    let keys = KeyStore::open(&config.keys_path()).map_err(security)?;
    let authorizer = Authorizer::open(
        &config.acls_path(),
        config.auth_mode != AuthMode::None,
        config.auth_super_users.clone(),
        config.auth_acls.clone(),
    )
    .map_err(security)?;
    Ok((Arc::new(keys), Arc::new(authorizer)))
}

/// Raises the soft open-file limit to the hard one: every partition holds three files and
/// every connection a socket, and the default soft limit (often 1,024) runs out long before
/// the hard one. The limit is logged, since running out shows as `too_many_open_files`.
fn raise_open_file_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::info!(limit, "open-file limit (soft, raised to the hard limit)"),
        Err(error) => tracing::warn!(%error, "could not raise the open-file limit"),
    }
}

/// Hooks of a server start, for the command line and tests.
pub struct StartHooks {
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Called once recovery and restore have finished and the API serves: the command line
    /// prints its "listening" line here.
    pub on_ready: Option<Box<dyn FnOnce(std::net::SocketAddr) + Send>>,
    /// Awaited before recovery starts, while only the health endpoints answer: tests use it to
    /// observe the server while it is starting.
    pub before_recovery: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl StartHooks {
    /// No hooks, the system clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// No hooks, this clock.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            on_ready: None,
            before_recovery: None,
        }
    }
}

impl Default for StartHooks {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs the server on `listener` until `shutdown` completes.
///
/// # Errors
/// See [`StartError`].
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    run_with(config, listener, shutdown, StartHooks::new()).await
}

/// [`run`] with an injected clock (tests drive time with `ManualClock`).
///
/// # Errors
/// See [`StartError`].
pub async fn run_with_clock(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    clock: Arc<dyn Clock>,
) -> Result<(), StartError> {
    run_with(config, listener, shutdown, StartHooks::with_clock(clock)).await
}

/// [`run`] with hooks. The listener serves from the start: `/healthz` and `/readyz` answer
/// during recovery (readiness 503 with the step), every other route 503 `unavailable`.
///
/// # Errors
/// See [`StartError`].
// The shutdown deadline is a timer, not a clock reading.
#[allow(clippy::disallowed_methods)]
pub async fn run_with(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    hooks: StartHooks,
) -> Result<(), StartError> {
    let (stop_sender, stop_receiver) = watch::channel(false);
    let timeout = Duration::from_millis(config.shutdown_timeout_ms);
    let address = listener.local_addr().map_err(StartError::Serve)?;
    warn_if_open(&config, address);
    let status = Arc::new(ServerStatus::new());
    let api: Arc<OnceLock<Router>> = Arc::new(OnceLock::new());
    let front = crate::http::front_door(Arc::clone(&status), Arc::clone(&api));
    // When shutdown began: draining requests and finishing the tiering sweep share one
    // `shutdown_timeout_ms`, so the whole stop fits the grace Kubernetes gives.
    let stop_began: Arc<OnceLock<std::time::Instant>> = Arc::new(OnceLock::new());
    {
        let (status, stopping) = (Arc::clone(&status), stop_sender.clone());
        let stop_began = Arc::clone(&stop_began);
        tokio::spawn(async move {
            shutdown.await;
            let _ = stop_began.set(crate::clock::stopwatch());
            tracing::info!("shutting down: draining requests");
            status.set_shutting_down();
            let _ = stopping.send(true);
        });
    }
    let connections = connection_settings(&config)?;
    if let Some(tls) = &connections.tls {
        tokio::spawn(reload_tls(Arc::clone(tls)));
    }
    let mut server = tokio::spawn(crate::serve::serve(
        listener,
        front,
        connections,
        stop_receiver.clone(),
    ));
    if let Some(gate) = hooks.before_recovery {
        gate.await;
    }
    let mut stop_early = stop_receiver.clone();
    let built = tokio::select! {
        built = build_state(config, hooks.clock, stop_receiver.clone(), Arc::clone(&status)) => {
            Some(built)
        }
        _ = stop_early.wait_for(|stop| *stop) => None,
    };
    let Some(built) = built else {
        // Stopped while recovering: nothing was acknowledged yet; the next start recovers.
        let _ = (&mut server).await;
        return Ok(());
    };
    let state = match built {
        Ok(state) => state,
        Err(error) => {
            let _ = stop_sender.send(true);
            let _ = server.await;
            return Err(error);
        }
    };
    let catalog = Arc::clone(state.broker.catalog());
    let background = BackgroundTasks::start(&state.broker);
    let _ = api.set(router(state));
    status.set_ready();
    if let Some(on_ready) = hooks.on_ready {
        on_ready(address);
    }
    let mut stopping = stop_sender.subscribe();
    let drained = async {
        let _ = stopping.wait_for(|stop| *stop).await;
        tokio::time::sleep(timeout).await;
    };
    let result = tokio::select! {
        result = &mut server => match result {
            Ok(result) => result.map_err(StartError::Serve),
            Err(_) => Ok(()),
        },
        () = drained => {
            tracing::warn!("in-flight requests did not finish within shutdown_timeout_ms");
            Ok(())
        }
    };
    let left = stop_began
        .get()
        .map_or(timeout, |began| timeout.saturating_sub(began.elapsed()));
    background.stop(left).await;
    catalog.close().await;
    tracing::info!("stopped cleanly");
    result
}

/// First value of the sticky-partition seed: keyless records of successive requests go to
/// successive pseudo-random partitions.
const STICKY_SEED: u64 = 0x5eed;

/// The configured page-cache window, or the machine's default (ADR 0014): the window only pays
/// where freed memory goes back to the host.
fn page_cache_window(configured: Option<u64>) -> u64 {
    let (bytes, why) = match configured {
        Some(bytes) => (bytes, "configured"),
        None if crate::io::free_page_reporting::active() => (
            crate::log::config::DEFAULT_PAGE_CACHE_WINDOW_BYTES,
            "free page reporting: new pages are slow here, reuse them",
        ),
        None => (0, "no free page reporting: the kernel keeps what it can"),
    };
    tracing::info!(bytes, why, "page-cache window of active segments");
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
        let (_, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
        rlimit::setrlimit(rlimit::Resource::NOFILE, 256.min(hard), hard).unwrap();
        raise_open_file_limit();
        let (soft, after_hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
        assert_eq!(after_hard, hard);
        // Linux caps RLIMIT_NOFILE at fs.nr_open even when the hard limit is infinite.
        assert!(soft > 256 || hard <= 256, "soft {soft}, hard {hard}");
    }
}

//! Starting and stopping the whole server: open the data directory (recovery happens here), serve
//! HTTP until told to stop, then drain: stop accepting, let in-flight requests finish (long polls
//! and SSE streams end at once), flush every partition and mark the shutdown clean.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::groups::coordinator::{Coordinator, GroupLimits};
use crate::groups::offsets::{OFFSETS_TOPIC, OffsetStore};
use crate::http::{AppState, router};
use crate::io::{Io, IoStartError};
use crate::log::compaction::throttle::Throttle;
use crate::producers::{ProducerRegistry, ProducerRegistryError};
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
    /// Serving failed.
    #[error("http server: {0}")]
    Serve(#[source] std::io::Error),
}

/// Opens everything the API serves from `config.data_dir` (recovery happens here): disk I/O,
/// topics, producer ids, consumer-group offsets and membership.
///
/// # Errors
/// See [`StartError`].
pub async fn build_state(
    config: Config,
    clock: Arc<dyn Clock>,
    shutdown: watch::Receiver<bool>,
) -> Result<AppState, StartError> {
    let data_dir = config.data_dir.clone();
    std::fs::create_dir_all(&data_dir).map_err(|source| StartError::DataDir {
        path: data_dir.clone(),
        source,
    })?;
    let (io, probe) = Io::start(config.io_backend, &data_dir)?;
    tracing::info!(backend = %probe.backend, reason = %probe.reason, "disk I/O backend");
    let catalog = Arc::new(
        Catalog::open(
            &data_dir,
            io.clone(),
            Arc::clone(&clock),
            config.max_partitions_per_topic,
        )
        .await?,
    );
    let tiering = Tiering::open(config.tiering_settings(), &data_dir, Arc::clone(&clock))
        .await
        .map_err(|error| StartError::Tiering(error.to_string()))?;
    let restored = tiering
        .restore(&catalog)
        .await
        .map_err(|error| StartError::Tiering(error.to_string()))?;
    if !restored.topics.is_empty() {
        tracing::info!(topics = ?restored.topics, "restored topics from tiered storage");
    }
    let producers = Arc::new(ProducerRegistry::open(&data_dir, io.clone())?);
    let offsets_topic = match catalog.get(OFFSETS_TOPIC) {
        Some(topic) => topic,
        None => {
            let configs = BTreeMap::from([("cleanup_policy".to_string(), Value::from("compact"))]);
            catalog.create(OFFSETS_TOPIC, 1, &configs, true).await?
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
    let coordinator = Arc::new(Coordinator::new(Arc::clone(&clock), GroupLimits::default()));
    Ok(AppState {
        catalog,
        tiering,
        producers,
        coordinator,
        offsets,
        config: Arc::new(config),
        clock,
        io_backend: probe.backend.to_string(),
        shutdown,
        ready: Arc::new(AtomicBool::new(true)),
    })
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
    run_with_clock(config, listener, shutdown, Arc::new(SystemClock)).await
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
    let (stop_sender, stop_receiver) = watch::channel(false);
    let timeout = Duration::from_millis(config.shutdown_timeout_ms);
    let state = build_state(config, clock, stop_receiver).await?;
    let catalog = Arc::clone(&state.catalog);
    let ready = Arc::clone(&state.ready);
    let expiry = tokio::spawn(expire_members(state.clone()));
    let cleaner = tokio::spawn(crate::cleaner::run(
        Arc::clone(&state.catalog),
        Arc::clone(&state.clock),
        state.config.retention_check_interval_ms,
        Arc::new(Throttle::new(state.config.cleaner_io_max_bytes_per_second)),
    ));
    let tiering = tokio::spawn(crate::tiering::sync::run(
        Arc::clone(&state.tiering),
        Arc::clone(&state.catalog),
    ));
    let app = router(state);
    let stopping = stop_sender.clone();
    let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
        shutdown.await;
        tracing::info!("shutting down: draining requests");
        ready.store(false, Ordering::SeqCst);
        let _ = stopping.send(true);
    });
    let mut stopped = stop_sender.subscribe();
    let drained = async {
        let _ = stopped.wait_for(|stop| *stop).await;
        tokio::time::sleep(timeout).await;
    };
    let result = tokio::select! {
        result = serve => result.map_err(StartError::Serve),
        () = drained => {
            tracing::warn!("in-flight requests did not finish within shutdown_timeout_ms");
            Ok(())
        }
    };
    expiry.abort();
    cleaner.abort();
    tiering.abort();
    catalog.close().await;
    tracing::info!("stopped cleanly");
    result
}

/// How often member liveness is checked; timeouts are at least a second, so this bounds the
/// extra delay of an eviction to a quarter of the smallest timeout.
const EXPIRY_CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// Evicts group members whose session or poll interval ran out (time from the injected clock).
async fn expire_members(state: AppState) {
    let mut ticker = tokio::time::interval(EXPIRY_CHECK_INTERVAL);
    loop {
        ticker.tick().await;
        state
            .coordinator
            .expire(|topics| crate::http::groups::existing_counts(&state, topics));
    }
}

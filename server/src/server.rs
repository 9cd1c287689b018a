//! Starting and stopping the whole server: open the data directory (recovery happens here), serve
//! HTTP until told to stop, then drain: stop accepting, let in-flight requests finish (long polls
//! and SSE streams end at once), flush every partition and mark the shutdown clean.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::http::{AppState, router};
use crate::io::{Io, IoStartError};
use crate::producers::{ProducerRegistry, ProducerRegistryError};
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
    /// Serving failed.
    #[error("http server: {0}")]
    Serve(#[source] std::io::Error),
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
    let producers = Arc::new(ProducerRegistry::open(&data_dir, io.clone())?);
    let (stop_sender, stop_receiver) = watch::channel(false);
    let ready = Arc::new(AtomicBool::new(true));
    let timeout = Duration::from_millis(config.shutdown_timeout_ms);
    let state = AppState {
        catalog: Arc::clone(&catalog),
        producers,
        config: Arc::new(config),
        clock,
        io_backend: probe.backend.to_string(),
        shutdown: stop_receiver,
        ready: Arc::clone(&ready),
    };
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
    catalog.close().await;
    tracing::info!("stopped cleanly");
    result
}

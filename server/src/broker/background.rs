//! The broker's background work: the cleaner (retention and compaction), the tiering sweep
//! (uploads, remote retention) and consumer-group member expiry. Started once the broker is
//! built, stopped (aborted) at shutdown before the catalog closes.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::Broker;
use crate::log::compaction::throttle::Throttle;

/// How often member liveness is checked; timeouts are at least a second, so this bounds the
/// extra delay of an eviction to a quarter of the smallest timeout.
const EXPIRY_CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// How often the key and ACL files are checked for changes made by other processes.
const SECURITY_RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// The running background tasks.
pub struct BackgroundTasks {
    tasks: Vec<JoinHandle<()>>,
}

impl BackgroundTasks {
    /// Starts every background task of `broker`.
    pub fn start(broker: &Arc<Broker>) -> Self {
        let config = broker.config();
        let cleaner = tokio::spawn(crate::cleaner::run(
            Arc::clone(broker.catalog()),
            Arc::clone(broker.clock()),
            config.retention_check_interval_ms,
            Arc::new(Throttle::new(config.cleaner_io_max_bytes_per_second)),
        ));
        let tiering = tokio::spawn(crate::tiering::sync::run(
            Arc::clone(broker.tiering()),
            Arc::clone(broker.catalog()),
        ));
        let expiry = tokio::spawn(expire_members(Arc::clone(broker)));
        let security = tokio::spawn(reload_security(Arc::clone(broker)));
        Self {
            tasks: vec![cleaner, tiering, expiry, security],
        }
    }

    /// Stops them; none of them holds anything a restart would miss.
    pub fn abort(&self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Reloads the API key and ACL files when they change (checked every second) or at once on
/// SIGHUP, so keys made with `strata auth create-key` or revoked by editing the file take
/// effect without a restart.
async fn reload_security(broker: Arc<Broker>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => Some(hangup),
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGHUP; key and ACL files reload by polling only");
            None
        }
    };
    let mut ticker = tokio::time::interval(SECURITY_RELOAD_INTERVAL);
    loop {
        match &mut hangup {
            Some(hangup) => {
                tokio::select! {
                    _ = ticker.tick() => {}
                    _ = hangup.recv() => tracing::info!("SIGHUP: reloading API keys and ACLs"),
                }
            }
            None => {
                ticker.tick().await;
            }
        }
        broker.reload_security();
    }
}

/// Evicts group members whose session or poll interval ran out (time from the injected clock).
async fn expire_members(broker: Arc<Broker>) {
    let mut ticker = tokio::time::interval(EXPIRY_CHECK_INTERVAL);
    loop {
        ticker.tick().await;
        broker.expire_members();
    }
}

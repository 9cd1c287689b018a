//! The broker's background work: the cleaner (retention and compaction), the tiering sweep
//! (uploads, remote retention) and consumer-group member expiry. Started once the broker is
//! built, stopped at shutdown before the catalog closes.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::Broker;
use crate::log::compaction::throttle::Throttle;
use crate::security::file::reload_on_change;

/// How often member liveness is checked; timeouts are at least a second, so this bounds the
/// extra delay of an eviction to a quarter of the smallest timeout.
const EXPIRY_CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// The running background tasks.
pub struct BackgroundTasks {
    tiering: Option<JoinHandle<()>>,
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
            Arc::clone(broker.offset_store()),
            Arc::clone(broker.authorizer()),
            broker.shutdown_signal(),
        ));
        let expiry = tokio::spawn(expire_members(Arc::clone(broker)));
        // Keys made with `strata auth create-key` or revoked by editing the file take effect
        // without a restart.
        let reloaded = Arc::clone(broker);
        let security = tokio::spawn(reload_on_change("API keys and ACLs", move || {
            reloaded.reload_security();
        }));
        Self {
            tiering: Some(tiering),
            tasks: vec![cleaner, expiry, security],
        }
    }

    /// Stops them once the server is shutting down: the tiering sweep finishes the pass it is
    /// in (it watches the shutdown signal), for at most `grace`; the rest are aborted, as none
    /// of them holds anything a restart would miss.
    pub async fn stop(mut self, grace: Duration) {
        for task in &self.tasks {
            task.abort();
        }
        if let Some(mut tiering) = self.tiering.take()
            && tokio::time::timeout(grace, &mut tiering).await.is_err()
        {
            tracing::warn!("the tiering sweep did not finish within the shutdown grace; cut");
            tiering.abort();
        }
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

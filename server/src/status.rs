//! What `/readyz` says: the server's phase (starting with the step it is on, ready, shutting
//! down) and the conditions that make a ready server unable to take writes (a full data disk).
//!
//! The HTTP port is bound before recovery starts, so a Kubernetes startup probe sees `/healthz`
//! answer 200 and `/readyz` answer 503 with the reason while a large data directory recovers or
//! a bucket is restored; everything else answers 503 `unavailable` until the server is ready.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;
use strata_openapi::Readiness;

use crate::io::IoStats;
use crate::limits::DISK_FULL_CLEAR_BYTES;
use crate::topics::catalog::Catalog;

/// Where the server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Opening the data directory; the step in words.
    Starting {
        /// One word for `/readyz`'s `status`: `recovering` or `restoring`.
        status: &'static str,
        /// What is happening, for people.
        reason: String,
    },
    /// Serving.
    Ready,
    /// Draining after a stop signal.
    ShuttingDown,
}

/// The server's readiness, shared by the startup front door and the API.
#[derive(Debug)]
pub struct ServerStatus {
    phase: RwLock<Phase>,
    io: OnceLock<(Arc<IoStats>, PathBuf)>,
    catalog: OnceLock<Arc<Catalog>>,
}

impl Default for ServerStatus {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerStatus {
    /// A server that has just bound its port.
    pub fn new() -> Self {
        Self {
            phase: RwLock::new(Phase::Starting {
                status: "recovering",
                reason: "starting: opening the data directory".to_string(),
            }),
            io: OnceLock::new(),
            catalog: OnceLock::new(),
        }
    }

    /// Moves to a startup step.
    pub fn starting(&self, status: &'static str, reason: impl Into<String>) {
        let mut phase = self.phase.write();
        if *phase != Phase::ShuttingDown {
            *phase = Phase::Starting {
                status,
                reason: reason.into(),
            };
        }
    }

    /// Recovery finished.
    pub fn set_ready(&self) {
        let mut phase = self.phase.write();
        if *phase != Phase::ShuttingDown {
            *phase = Phase::Ready;
        }
    }

    /// A stop signal arrived.
    pub fn set_shutting_down(&self) {
        *self.phase.write() = Phase::ShuttingDown;
    }

    /// The disk layer whose writes tell whether the data disk `data_dir` is full.
    pub fn watch_disk(&self, stats: Arc<IoStats>, data_dir: PathBuf) {
        let _ = self.io.set((stats, data_dir));
    }

    /// The partitions whose poisoning (a failed fdatasync) makes the server not ready.
    pub fn watch_partitions(&self, catalog: Arc<Catalog>) {
        let _ = self.catalog.set(catalog);
    }

    /// The first poisoned partition and why, if any.
    fn poisoned_partition(&self) -> Option<String> {
        let catalog = self.catalog.get()?;
        catalog.list().iter().find_map(|topic| {
            topic
                .partitions()
                .iter()
                .enumerate()
                .find_map(|(number, partition)| {
                    partition
                        .poisoned()
                        .map(|reason| format!("{}/{number}: {reason}", topic.name()))
                })
        })
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase.read().clone()
    }

    /// Whether the server is ready and its disk has room.
    pub fn is_ready(&self) -> bool {
        self.readiness().ready
    }

    /// The body of `/readyz`. A full disk stays reported until a write succeeds or the disk
    /// has room for a batch again (checked here, so readiness returns without traffic).
    pub fn readiness(&self) -> Readiness {
        let not_ready = |status: &str, reason: String| Readiness {
            ready: false,
            status: status.to_string(),
            reason: Some(reason),
        };
        match self.phase() {
            Phase::Starting { status, reason } => not_ready(status, reason),
            Phase::ShuttingDown => not_ready("shutting_down", "the server is stopping".into()),
            Phase::Ready => {
                if let Some((stats, dir)) = self.io.get()
                    && stats.disk_full()
                {
                    let free = crate::io::space::available_bytes(dir).unwrap_or(0);
                    if free < DISK_FULL_CLEAR_BYTES {
                        return not_ready(
                            "disk_full",
                            format!(
                                "the data disk ({}) is full: appends fail until space is freed",
                                dir.display()
                            ),
                        );
                    }
                    stats.clear_disk_full();
                }
                if let Some(poisoned) = self.poisoned_partition() {
                    return not_ready(
                        "poisoned",
                        format!(
                            "partition {poisoned}; it refuses appends until the server restarts \
                             and recovers it"
                        ),
                    );
                }
                Readiness {
                    ready: true,
                    status: "ready".to_string(),
                    reason: None,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::clock::ManualClock;
    use crate::io::{FaultPlan, Io, IoBackendChoice};
    use crate::log::batch::{BatchOptions, NewRecord, encode_batch};
    use crate::log::{Acks, AppendError, RecordBatch};
    use crate::names::TopicName;

    fn batch() -> RecordBatch {
        let record = NewRecord {
            timestamp: 1,
            key: None,
            value: Some(bytes::Bytes::from_static(b"v")),
            headers: Vec::new(),
        };
        let bytes = encode_batch(&BatchOptions::default(), &[record]).unwrap();
        RecordBatch::decode_exact(bytes).unwrap()
    }

    #[tokio::test]
    async fn a_poisoned_partition_makes_the_server_not_ready_and_says_which() {
        let dir = tempfile::tempdir().unwrap();
        let (io, _) = Io::start(IoBackendChoice::Sync, dir.path()).unwrap();
        let faults = Arc::new(FaultPlan::new());
        let clock: Arc<dyn crate::clock::Clock> = ManualClock::new(0);
        let catalog = Catalog::open(dir.path(), io.with_faults(Arc::clone(&faults)), clock, 8)
            .await
            .unwrap();
        let catalog = Arc::new(catalog);
        let name = TopicName::parse("orders").unwrap();
        let topic = catalog.create(&name, 2, &BTreeMap::new()).await.unwrap();
        let status = ServerStatus::new();
        status.set_ready();
        status.watch_partitions(Arc::clone(&catalog));
        assert!(status.is_ready());

        faults.fail_syncs(libc::EIO, 1);
        let partition = topic.partition(1).unwrap();
        let appended = partition.append(vec![batch()], Acks::All).await;
        assert!(
            matches!(appended, Err(AppendError::Poisoned { .. })),
            "{appended:?}"
        );
        let readiness = status.readiness();
        assert!(!readiness.ready);
        assert_eq!(readiness.status, "poisoned");
        let reason = readiness.reason.unwrap();
        assert!(reason.contains("orders/1"), "{reason}");
        assert!(reason.contains("fdatasync"), "{reason}");
    }
}

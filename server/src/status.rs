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
                Readiness {
                    ready: true,
                    status: "ready".to_string(),
                    reason: None,
                }
            }
        }
    }
}

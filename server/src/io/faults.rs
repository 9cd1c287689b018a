//! Fault injection for tests (`cfg(any(test, feature = "test-util"))`).
//!
//! A [`FaultPlan`] is attached with [`Io::with_faults`](super::Io::with_faults). Each operation of
//! that handle first consults the plan; a matching rule is consumed and its error returned
//! instead of (or, for [`FaultPlan::short_write_then_fail`], after) doing the real I/O. Rules of
//! one kind are consumed in the order they were added.
//!
//! Which operations consult which rules:
//! * write rules: `write_at`, `write_at_and_sync` (op `"write"`);
//! * sync rules: `sync_data` (`"fdatasync"`), `sync_all` (`"fsync"`), `sync_dir` (`"sync_dir"`),
//!   and the sync half of `write_at_and_sync` (the write is really done, then `"fdatasync"`
//!   fails, as with a writeback error);
//! * read rules: `read_at`; open rules: `open`.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    Write,
    Sync,
    Read,
    Open,
    Allocate,
}

/// A consumed rule: fail with `errno`, after really writing `written_before` bytes (writes only).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fault {
    pub(crate) errno: i32,
    pub(crate) written_before: u64,
}

#[derive(Debug)]
struct Rule {
    kind: FaultKind,
    fault: Fault,
    /// `u32::MAX` means "forever".
    remaining: u32,
}

/// A list of injected failures, shared between a test and an [`Io`](super::Io) handle.
#[derive(Debug, Default)]
pub struct FaultPlan {
    rules: Mutex<Vec<Rule>>,
    injected: AtomicU64,
    /// While true, `sync_data` waits before it starts (a slow disk's fdatasync).
    syncs_held: tokio::sync::watch::Sender<bool>,
}

impl FaultPlan {
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&self, kind: FaultKind, errno: i32, written_before: u64, count: u32) -> &Self {
        if count > 0 {
            self.rules.lock().push(Rule {
                kind,
                fault: Fault {
                    errno,
                    written_before,
                },
                remaining: count,
            });
        }
        self
    }

    /// The next `count` writes fail with `errno` without writing anything (`u32::MAX`: all).
    pub fn fail_writes(&self, errno: i32, count: u32) -> &Self {
        self.push(FaultKind::Write, errno, 0, count)
    }

    /// The next write really writes its first `bytes_written_before_error` bytes through the
    /// backend, then returns `errno` (a disk filling up mid-write).
    pub fn short_write_then_fail(&self, bytes_written_before_error: u64, errno: i32) -> &Self {
        self.push(FaultKind::Write, errno, bytes_written_before_error, 1)
    }

    /// The next `count` syncs fail with `errno` (`u32::MAX`: all).
    pub fn fail_syncs(&self, errno: i32, count: u32) -> &Self {
        self.push(FaultKind::Sync, errno, 0, count)
    }

    /// The next `count` reads fail with `errno` (`u32::MAX`: all).
    pub fn fail_reads(&self, errno: i32, count: u32) -> &Self {
        self.push(FaultKind::Read, errno, 0, count)
    }

    /// The next `count` reservations (`Io::allocate`) fail with `errno` (`u32::MAX`: all).
    pub fn fail_allocations(&self, errno: i32, count: u32) -> &Self {
        self.push(FaultKind::Allocate, errno, 0, count)
    }

    /// The next `count` opens fail with `errno` (`u32::MAX`: all).
    pub fn fail_opens(&self, errno: i32, count: u32) -> &Self {
        self.push(FaultKind::Open, errno, 0, count)
    }

    /// Makes every `sync_data` wait until [`FaultPlan::release_syncs`]: an fdatasync that
    /// takes as long as the test wants.
    pub fn hold_syncs(&self) {
        self.syncs_held.send_replace(true);
    }

    pub fn release_syncs(&self) {
        self.syncs_held.send_replace(false);
    }

    pub(crate) async fn wait_while_syncs_held(&self) {
        let mut held = self.syncs_held.subscribe();
        let _ = held.wait_for(|held| !*held).await;
    }

    /// Removes every pending rule.
    pub fn clear(&self) {
        self.rules.lock().clear();
    }

    /// How many faults have been injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// Number of rules not yet used up.
    pub fn pending(&self) -> usize {
        self.rules.lock().len()
    }

    pub(crate) fn take(&self, kind: FaultKind) -> Option<Fault> {
        let mut rules = self.rules.lock();
        let i = rules.iter().position(|r| r.kind == kind)?;
        let fault = rules[i].fault;
        if rules[i].remaining != u32::MAX {
            rules[i].remaining -= 1;
            if rules[i].remaining == 0 {
                rules.remove(i);
            }
        }
        self.injected.fetch_add(1, Ordering::Relaxed);
        Some(fault)
    }
}

//! The append path's write and fdatasync, run on the calling thread.
//!
//! Measured on the 2-core target (issue 15): every hop between threads costs 50-130 us there,
//! more than the page-cache write itself. Through the ring, one 170-byte append write took
//! 0.136 ms (writer task -> `strata-io` thread -> back) against 0.019 ms as a `pwritev` on the
//! writer's own thread, and write + fdatasync took 0.49 ms against 0.30 ms (the ring always
//! punts an fsync of a regular file to an io-wq worker: one more hop). So the partition writer
//! does its own syscalls: inside `block_in_place` on a multi-thread runtime, so tokio moves the
//! worker's other tasks to another thread for the duration, and plainly on a current-thread
//! runtime (tests and one-shot tools), whose only thread would wait for the result anyway.
//!
//! `block_in_place` is a hop of its own: it hands the worker's core to another thread, waking
//! one, and on an idle VM that wake-up is slow. One producer at a fixed 1,000 small `acks=all`
//! requests/s (the server idle between requests) measured a mean of 0.34-0.38 ms and a p99 of
//! 0.48-0.54 ms with it, against 0.30-0.32 ms and 0.43-0.44 ms with the fdatasync run plainly
//! on the worker (ADR 0011, second addendum). So one
//! fdatasync at a time of a small write runs plainly on its worker, when the runtime has
//! another worker to carry on meanwhile; any other fdatasync, and every large write, still goes
//! through `block_in_place`. A stalled disk can then hold at most one worker thread, and only
//! for as long as one fdatasync lasts.

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use tokio::runtime::{Handle, RuntimeFlavor};

use super::sync::write_then_sync;
use super::{IoError, IoFile, IoStats};

/// Runs `work` (blocking syscalls) on this thread without starving the runtime's other tasks.
pub(crate) fn run_blocking_here<T>(work: impl FnOnce() -> T) -> T {
    match Handle::try_current().map(|handle| handle.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// Writes every byte of `bufs` at `position`, then, with `sync`, makes it durable with
/// fdatasync, all on this thread.
pub(crate) fn write_at(
    file: &IoFile,
    position: u64,
    bufs: &[Bytes],
    sync: bool,
    stats: &IoStats,
) -> Result<(), IoError> {
    let bytes: usize = bufs.iter().map(Bytes::len).sum();
    if bytes <= SMALL_WRITE_BYTES {
        if !sync {
            // A small page-cache write takes microseconds; handing the worker's other tasks to
            // another thread (what `block_in_place` does) costs more than it.
            return write_then_sync(file, position, bufs, false, stats);
        }
        if let Some(_held) = WORKER_SYNC.take() {
            return write_then_sync(file, position, bufs, true, stats);
        }
    }
    run_blocking_here(|| write_then_sync(file, position, bufs, sync, stats))
}

/// The right to run one fdatasync plainly on a worker thread, without `block_in_place` (see the
/// module's doc); one for the whole process.
static WORKER_SYNC: WorkerSync = WorkerSync(AtomicBool::new(false));

/// A right to block one worker thread for an fdatasync: `true` while someone holds it.
struct WorkerSync(AtomicBool);

impl WorkerSync {
    /// The right, if nobody holds it and this is a multi-thread runtime with another worker to
    /// carry on meanwhile.
    fn take(&self) -> Option<HeldSync<'_>> {
        let handle = Handle::try_current().ok()?;
        if handle.runtime_flavor() != RuntimeFlavor::MultiThread
            || handle.metrics().num_workers() < 2
        {
            return None;
        }
        self.0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| HeldSync(&self.0))
    }
}

/// A held [`WorkerSync`]; gives it back when dropped.
struct HeldSync<'a>(&'a AtomicBool);

impl Drop for HeldSync<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Largest write run on the worker thread itself: always without an fdatasync, and with one
/// while [`WORKER_SYNC`] is free.
const SMALL_WRITE_BYTES: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::WorkerSync;

    fn runtime(workers: Option<usize>) -> tokio::runtime::Runtime {
        let mut builder = match workers {
            Some(workers) => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                builder.worker_threads(workers);
                builder
            }
            None => tokio::runtime::Builder::new_current_thread(),
        };
        builder.build().expect("runtime")
    }

    #[test]
    fn one_worker_at_a_time_may_block_on_an_fdatasync() {
        let right = WorkerSync(AtomicBool::new(false));
        runtime(Some(2)).block_on(async {
            let held = right.take().expect("nobody holds it yet");
            assert!(
                right.take().is_none(),
                "a second fdatasync takes block_in_place"
            );
            drop(held);
            assert!(right.take().is_some(), "given back when dropped");
        });
    }

    #[test]
    fn a_runtime_without_a_second_worker_never_blocks_its_worker() {
        let right = WorkerSync(AtomicBool::new(false));
        runtime(Some(1)).block_on(async {
            assert!(
                right.take().is_none(),
                "its only worker would stall every task"
            );
        });
        runtime(None).block_on(async {
            assert!(
                right.take().is_none(),
                "runs inline anyway, without the right"
            );
        });
        assert!(right.take().is_none(), "outside a runtime");
    }
}

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
    if !sync && bytes <= SMALL_WRITE_BYTES {
        // A small page-cache write takes microseconds; handing the worker's other tasks to
        // another thread (what `block_in_place` does) costs more than it.
        return write_then_sync(file, position, bufs, false, stats);
    }
    run_blocking_here(|| write_then_sync(file, position, bufs, sync, stats))
}

/// Writes up to this size without an fdatasync run on the worker thread itself.
const SMALL_WRITE_BYTES: usize = 64 * 1024;

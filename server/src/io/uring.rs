//! The io_uring backend: one `strata-io` thread owning an [`IoUring`].
//!
//! # Protocol
//! * Submitters (tokio tasks) send a [`Msg`] over a std mpsc channel, then write 1 to an eventfd.
//!   The driver keeps a `READ` of that eventfd armed in the ring, so `submit_and_wait(1)` returns
//!   when new work arrives (no busy polling).
//! * Each accepted operation becomes an [`InFlight`] entry in the driver's table keyed by
//!   `user_data`. The entry owns everything the kernel may touch: the `IoFile` clone (so the fd
//!   stays open), the `Vec<Bytes>` being written plus the iovec array, the read `Vec<u8>`, the
//!   path `CString`s and the `statx` buffer. An entry is only removed when its CQE is reaped, so
//!   nothing is freed while the kernel may still use it.
//! * Results go back over a `tokio::sync::oneshot`. A dropped future just drops the receiver:
//!   the operation still runs to completion (no `ASYNC_CANCEL`: cancelling a half-done write
//!   would only produce a torn write, and regular-file I/O is mostly not cancellable anyway).
//! * Short writes: the remainder is resubmitted (new iovec array, advanced offset) until every
//!   byte is written; only then, for `write_at_and_sync`, is the `FSYNC(DATASYNC)` submitted. We
//!   do not use `IOSQE_IO_LINK`: a short write breaks a link chain and the fsync would complete
//!   with `-ECANCELED`, which needs the same resubmission logic anyway. Short reads are
//!   resubmitted until `len` bytes or EOF (`res == 0`). `EINTR`/`EAGAIN` completions are retried.
//! * `set_len` uses `IORING_OP_FTRUNCATE` when the probe reports it (Linux >= 6.9); otherwise
//!   the driver thread calls `ftruncate(2)` itself (rare: segment truncation during recovery).
//! * At most [`MAX_IN_FLIGHT`] operations are in the kernel at once (each has at most one SQE
//!   outstanding), so the SQ never fills and the CQ (2 × entries) cannot overflow; the rest
//!   wait in a backlog inside the driver.
//!
//! # Shutdown and failure
//! * When the last `Io` handle drops, the channel's sender is dropped and the eventfd written.
//!   The driver stops accepting, completes everything in flight, completes its own eventfd read
//!   and only then drops the ring and the buffers.
//! * If the driver panics or `io_uring_enter` fails hard, it fails every pending caller, drops
//!   the channel (so later operations fail immediately with "driver is gone" instead of
//!   hanging), and *leaks* the ring and the in-flight table rather than risk a use-after-free.

use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};

use bytes::Bytes;
use io_uring::{IoUring, opcode, squeue, types};
use tokio::sync::oneshot;

use super::{IoError, IoFile, IoOp, IoStartError, IoStats, WriteCursor, total_len};

const RING_ENTRIES: u32 = 256;
/// Operations with an SQE in the kernel at once (+1 for the eventfd read) < RING_ENTRIES.
const MAX_IN_FLIGHT: usize = 240;
/// `user_data` of the armed eventfd read.
const WAKE_TOKEN: u64 = u64::MAX;
/// Largest single read request (the kernel caps one read at `MAX_RW_COUNT` anyway).
const MAX_READ_CHUNK: usize = 1 << 30;

/// What an operation produced.
pub(crate) enum Outcome {
    Unit,
    Len(u64),
    Data(Bytes),
    Fd(OwnedFd),
}

/// A failed operation: which syscall failed, and why.
pub(crate) struct Failure {
    op: &'static str,
    err: std::io::Error,
}

type Reply = oneshot::Sender<Result<Outcome, Failure>>;

/// A request from a submitter.
pub(crate) enum Req {
    Open {
        path: CString,
        flags: i32,
    },
    Write {
        file: IoFile,
        pos: u64,
        bufs: Vec<Bytes>,
        sync: bool,
    },
    Fsync {
        file: IoFile,
        datasync: bool,
    },
    /// `buf` is empty with capacity `len`, allocated by the caller (so an absurd `len` panics
    /// in the caller's task, never on the driver thread).
    Read {
        file: IoFile,
        pos: u64,
        len: usize,
        buf: Vec<u8>,
    },
    Truncate {
        file: IoFile,
        len: u64,
    },
    Allocate {
        file: IoFile,
        offset: u64,
        len: u64,
    },
    Len {
        file: IoFile,
    },
    Rename {
        from: CString,
        to: CString,
    },
    Unlink {
        path: CString,
    },
}

enum Msg {
    Op(Req, Reply),
    #[cfg(test)]
    Panic,
}

/// Handle held (inside an `Arc`) by every `Io` clone.
pub(crate) struct UringIo {
    tx: Option<Sender<Msg>>,
    wake: Arc<File>,
    /// Upgradable while the driver thread runs (used by tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) alive: std::sync::Weak<()>,
}

impl Drop for UringIo {
    fn drop(&mut self) {
        // Disconnect first, then wake the driver so it sees the disconnect and drains.
        drop(self.tx.take());
        let _ = (&*self.wake).write(&1u64.to_ne_bytes());
    }
}

fn dead() -> Failure {
    Failure {
        op: "submit",
        err: std::io::Error::other("the strata-io io_uring driver thread is gone"),
    }
}

fn cstring(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "path contains NUL"))
}

impl UringIo {
    pub(crate) fn start(stats: Arc<IoStats>, has_ftruncate: bool) -> Result<UringIo, IoStartError> {
        let ring = IoUring::new(RING_ENTRIES).map_err(|e| {
            match super::probe::classify("io_uring_setup", &e) {
                Ok(super::probe::Verdict::Unavailable { reason, errno }) => {
                    IoStartError::UringUnavailable { reason, errno }
                }
                Ok(super::probe::Verdict::Available { .. }) => IoStartError::Spawn(e),
                Err(resource) => resource,
            }
        })?;
        // SAFETY: eventfd(2) takes no pointers; a negative return is handled below.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if raw < 0 {
            let e = std::io::Error::last_os_error();
            return Err(IoStartError::Resource {
                reason: format!("eventfd: {e}"),
                errno: e.raw_os_error().unwrap_or(0),
            });
        }
        // SAFETY: `raw` is a freshly created fd that nothing else owns.
        let wake = Arc::new(File::from(unsafe { OwnedFd::from_raw_fd(raw) }));
        let (tx, rx) = channel();
        let alive = Arc::new(());
        let weak = Arc::downgrade(&alive);
        let wake2 = wake.clone();
        std::thread::Builder::new()
            .name("strata-io".to_owned())
            .spawn(move || {
                // Built on the thread: the op table holds iovecs (raw pointers, not `Send`).
                let driver = Driver {
                    _alive: alive,
                    ring,
                    rx,
                    wake: wake2,
                    wake_buf: Box::new([0u8; 8]),
                    wake_armed: false,
                    ops: HashMap::new(),
                    next_id: 0,
                    backlog: VecDeque::new(),
                    stats,
                    has_ftruncate,
                    closing: false,
                    cqes: Vec::new(),
                };
                driver.main()
            })
            .map_err(IoStartError::Spawn)?;
        Ok(UringIo {
            tx: Some(tx),
            wake,
            alive: weak,
        })
    }

    async fn call(&self, req: Req) -> Result<Outcome, Failure> {
        let (reply, rx) = oneshot::channel();
        let tx = self.tx.as_ref().ok_or_else(dead)?;
        tx.send(Msg::Op(req, reply)).map_err(|_| dead())?;
        self.wake();
        rx.await.map_err(|_| dead())?
    }

    /// [`Self::call`] for an operation whose outcome carries no data; a failure names `path`.
    async fn call_done(&self, req: Req, path: &Path) -> Result<(), IoError> {
        self.call(req)
            .await
            .map(drop)
            .map_err(|f| IoError::new(f.op, path, f.err))
    }

    fn wake(&self) {
        // eventfd writes only fail (EAGAIN) if the counter would overflow u64::MAX - 1.
        if let Err(e) = (&*self.wake).write(&1u64.to_ne_bytes()) {
            tracing::error!(error = %e, "waking the strata-io thread failed");
        }
    }

    #[cfg(test)]
    pub(crate) fn kill_for_test(&self) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Panic);
            self.wake();
        }
    }

    pub(crate) async fn open(&self, path: &Path, flags: i32) -> Result<IoFile, IoError> {
        let err = |f: Failure| IoError::new(f.op, path, f.err);
        let c = cstring(path).map_err(|e| IoError::new("open", path, e))?;
        match self.call(Req::Open { path: c, flags }).await.map_err(err)? {
            Outcome::Fd(fd) => Ok(IoFile::new(File::from(fd), path)),
            _ => Err(IoError::new("open", path, unexpected())),
        }
    }

    pub(crate) async fn write_at(
        &self,
        file: &IoFile,
        pos: u64,
        bufs: Vec<Bytes>,
        sync: bool,
    ) -> Result<(), IoError> {
        let req = Req::Write {
            file: file.clone(),
            pos,
            bufs,
            sync,
        };
        self.call_done(req, file.path()).await
    }

    pub(crate) async fn fsync(&self, file: &IoFile, datasync: bool) -> Result<(), IoError> {
        let req = Req::Fsync {
            file: file.clone(),
            datasync,
        };
        self.call_done(req, file.path()).await
    }

    pub(crate) async fn read_at(
        &self,
        file: &IoFile,
        pos: u64,
        len: usize,
    ) -> Result<Bytes, IoError> {
        let req = Req::Read {
            file: file.clone(),
            pos,
            len,
            buf: Vec::with_capacity(len),
        };
        match self
            .call(req)
            .await
            .map_err(|f| IoError::new(f.op, file.path(), f.err))?
        {
            Outcome::Data(b) => Ok(b),
            _ => Err(IoError::new("read", file.path(), unexpected())),
        }
    }

    pub(crate) async fn set_len(&self, file: &IoFile, len: u64) -> Result<(), IoError> {
        let req = Req::Truncate {
            file: file.clone(),
            len,
        };
        self.call_done(req, file.path()).await
    }

    pub(crate) async fn allocate(
        &self,
        file: &IoFile,
        offset: u64,
        len: u64,
    ) -> Result<(), IoError> {
        let req = Req::Allocate {
            file: file.clone(),
            offset,
            len,
        };
        self.call_done(req, file.path()).await
    }

    pub(crate) async fn file_len(&self, file: &IoFile) -> Result<u64, IoError> {
        let req = Req::Len { file: file.clone() };
        match self
            .call(req)
            .await
            .map_err(|f| IoError::new(f.op, file.path(), f.err))?
        {
            Outcome::Len(n) => Ok(n),
            _ => Err(IoError::new("file_len", file.path(), unexpected())),
        }
    }

    pub(crate) async fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        let err = |e| IoError::new("rename", from, e);
        let req = Req::Rename {
            from: cstring(from).map_err(err)?,
            to: cstring(to).map_err(err)?,
        };
        self.call_done(req, from).await
    }

    pub(crate) async fn remove_file(&self, path: &Path) -> Result<(), IoError> {
        let c = cstring(path).map_err(|e| IoError::new("remove_file", path, e))?;
        let req = Req::Unlink { path: c };
        self.call_done(req, path).await
    }
}

fn unexpected() -> std::io::Error {
    std::io::Error::other("io_uring driver returned an unexpected outcome")
}

/// Per-operation state owned by the driver until the final CQE.
enum State {
    Open {
        path: CString,
        flags: i32,
    },
    Write {
        file: IoFile,
        pos: u64,
        bufs: Vec<Bytes>,
        total: u64,
        done: u64,
        cursor: WriteCursor,
        /// Points into `bufs`; rebuilt before each (re)submission.
        iov: Vec<libc::iovec>,
        sync: bool,
        syncing: bool,
    },
    Fsync {
        file: IoFile,
        datasync: bool,
    },
    Read {
        file: IoFile,
        pos: u64,
        len: usize,
        /// `buf.len()` bytes are filled; the kernel writes into the spare capacity.
        buf: Vec<u8>,
    },
    Truncate {
        file: IoFile,
        len: u64,
    },
    Allocate {
        file: IoFile,
        offset: u64,
        len: u64,
    },
    Statx {
        file: IoFile,
        empty: CString,
        buf: Box<libc::statx>,
    },
    Rename {
        from: CString,
        to: CString,
    },
    Unlink {
        path: CString,
    },
}

enum Step {
    Submit(squeue::Entry),
    Done(Result<Outcome, Failure>),
}

fn fail(op: &'static str, errno: i32) -> Step {
    Step::Done(Err(Failure {
        op,
        err: std::io::Error::from_raw_os_error(errno),
    }))
}

fn retryable(res: i32) -> bool {
    res == -libc::EINTR || res == -libc::EAGAIN
}

impl State {
    fn from_req(req: Req) -> State {
        match req {
            Req::Open { path, flags } => State::Open { path, flags },
            Req::Write {
                file,
                pos,
                bufs,
                sync,
            } => State::Write {
                total: total_len(&bufs),
                file,
                pos,
                bufs,
                done: 0,
                cursor: WriteCursor::default(),
                iov: Vec::new(),
                sync,
                syncing: false,
            },
            Req::Fsync { file, datasync } => State::Fsync { file, datasync },
            Req::Read {
                file,
                pos,
                len,
                buf,
            } => State::Read {
                file,
                pos,
                len,
                buf,
            },
            Req::Truncate { file, len } => State::Truncate { file, len },
            Req::Allocate { file, offset, len } => State::Allocate { file, offset, len },
            Req::Len { file } => State::Statx {
                file,
                empty: CString::default(),
                // SAFETY: `libc::statx` is a plain C struct of integers, for which all-zero
                // bytes are a valid value.
                buf: Box::new(unsafe { std::mem::zeroed::<libc::statx>() }),
            },
            Req::Rename { from, to } => State::Rename { from, to },
            Req::Unlink { path } => State::Unlink { path },
        }
    }

    /// The SQE for the next step, or the final result if nothing (more) needs the kernel.
    /// Entries point into heap data owned by `self` (stable while `self` is moved around).
    fn next(&mut self, stats: &IoStats) -> Step {
        match self {
            State::Open { path, flags } => Step::Submit(
                opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), path.as_ptr())
                    .flags(*flags)
                    .mode(0o644)
                    .build(),
            ),
            State::Write {
                file,
                pos,
                bufs,
                total,
                done,
                cursor,
                iov,
                sync,
                syncing,
            } => {
                if *done < *total {
                    cursor.iovecs(bufs, iov);
                    Step::Submit(
                        opcode::Writev::new(types::Fd(file.fd()), iov.as_ptr(), iov.len() as u32)
                            .offset(pos.wrapping_add(*done))
                            .build(),
                    )
                } else if *sync && !*syncing {
                    *syncing = true;
                    let flags = types::FsyncFlags::DATASYNC;
                    Step::Submit(
                        opcode::Fsync::new(types::Fd(file.fd()))
                            .flags(flags)
                            .build(),
                    )
                } else {
                    stats.op_done(IoOp::Write);
                    if *sync {
                        stats.op_done(IoOp::SyncData);
                    }
                    Step::Done(Ok(Outcome::Unit))
                }
            }
            State::Fsync { file, datasync } => {
                let flags = if *datasync {
                    types::FsyncFlags::DATASYNC
                } else {
                    types::FsyncFlags::empty()
                };
                Step::Submit(
                    opcode::Fsync::new(types::Fd(file.fd()))
                        .flags(flags)
                        .build(),
                )
            }
            State::Read {
                file,
                pos,
                len,
                buf,
            } => {
                let filled = buf.len();
                if filled == *len {
                    stats.op_done(IoOp::Read);
                    return Step::Done(Ok(Outcome::Data(Bytes::from(std::mem::take(buf)))));
                }
                let chunk = (*len - filled).min(MAX_READ_CHUNK);
                let ptr = buf.spare_capacity_mut().as_mut_ptr().cast::<u8>();
                Step::Submit(
                    opcode::Read::new(types::Fd(file.fd()), ptr, chunk as u32)
                        .offset(pos.wrapping_add(filled as u64))
                        .build(),
                )
            }
            State::Truncate { file, len } => {
                Step::Submit(opcode::Ftruncate::new(types::Fd(file.fd()), *len).build())
            }
            State::Allocate { file, offset, len } => Step::Submit(
                opcode::Fallocate::new(types::Fd(file.fd()), *len)
                    .offset(*offset)
                    .mode(0)
                    .build(),
            ),
            State::Statx { file, empty, buf } => {
                let statx: *mut libc::statx = &mut **buf;
                Step::Submit(
                    opcode::Statx::new(types::Fd(file.fd()), empty.as_ptr(), statx.cast())
                        .flags(libc::AT_EMPTY_PATH)
                        .mask(libc::STATX_SIZE)
                        .build(),
                )
            }
            State::Rename { from, to } => Step::Submit(
                opcode::RenameAt::new(
                    types::Fd(libc::AT_FDCWD),
                    from.as_ptr(),
                    types::Fd(libc::AT_FDCWD),
                    to.as_ptr(),
                )
                .build(),
            ),
            State::Unlink { path } => Step::Submit(
                opcode::UnlinkAt::new(types::Fd(libc::AT_FDCWD), path.as_ptr()).build(),
            ),
        }
    }

    /// Handles the CQE of the step last submitted.
    fn complete(&mut self, res: i32, stats: &IoStats) -> Step {
        match self {
            State::Open { .. } => {
                if res < 0 {
                    return if retryable(res) {
                        self.next(stats)
                    } else {
                        fail("open", -res)
                    };
                }
                stats.op_done(IoOp::Open);
                // SAFETY: a successful OPENAT completion returns a new fd owned by nobody else.
                let fd = unsafe { OwnedFd::from_raw_fd(res) };
                Step::Done(Ok(Outcome::Fd(fd)))
            }
            State::Write {
                done,
                total,
                cursor,
                bufs,
                syncing,
                ..
            } => {
                if *syncing {
                    return if res < 0 {
                        fail("fdatasync", -res)
                    } else {
                        self.next(stats)
                    };
                }
                if res < 0 {
                    return if retryable(res) {
                        self.next(stats)
                    } else {
                        fail("write", -res)
                    };
                }
                if res == 0 && *done < *total {
                    return Step::Done(Err(Failure {
                        op: "write",
                        err: std::io::ErrorKind::WriteZero.into(),
                    }));
                }
                let n = res as usize;
                stats.written(n as u64);
                *done += n as u64;
                cursor.advance(bufs, n);
                self.next(stats)
            }
            State::Fsync { datasync, .. } => {
                if res < 0 {
                    return fail(if *datasync { "fdatasync" } else { "fsync" }, -res);
                }
                stats.op_done(if *datasync {
                    IoOp::SyncData
                } else {
                    IoOp::SyncAll
                });
                Step::Done(Ok(Outcome::Unit))
            }
            State::Read { buf, len, .. } => {
                if res < 0 {
                    return if retryable(res) {
                        self.next(stats)
                    } else {
                        fail("read", -res)
                    };
                }
                if res == 0 {
                    *len = buf.len(); // EOF: return what we have.
                    return self.next(stats);
                }
                let n = res as usize;
                let new_len = buf.len() + n;
                assert!(new_len <= buf.capacity(), "kernel read more than requested");
                // SAFETY: the kernel reported writing `n` bytes into the spare capacity starting
                // at `buf.len()` (the pointer we submitted), so `[0, new_len)` is initialized,
                // and `new_len <= capacity` was just checked.
                unsafe { buf.set_len(new_len) };
                stats.read(n as u64);
                self.next(stats)
            }
            State::Truncate { .. } => {
                if res < 0 {
                    return if retryable(res) {
                        self.next(stats)
                    } else {
                        fail("set_len", -res)
                    };
                }
                stats.op_done(IoOp::SetLen);
                Step::Done(Ok(Outcome::Unit))
            }
            State::Allocate { .. } => {
                if res < 0 {
                    return if retryable(res) {
                        self.next(stats)
                    } else {
                        fail("fallocate", -res)
                    };
                }
                stats.op_done(IoOp::Allocate);
                Step::Done(Ok(Outcome::Unit))
            }
            State::Statx { buf, .. } => {
                if res < 0 {
                    return fail("file_len", -res);
                }
                stats.op_done(IoOp::FileLen);
                Step::Done(Ok(Outcome::Len(buf.stx_size)))
            }
            State::Rename { .. } => {
                if res < 0 {
                    return fail("rename", -res);
                }
                stats.op_done(IoOp::Rename);
                Step::Done(Ok(Outcome::Unit))
            }
            State::Unlink { .. } => {
                if res < 0 {
                    return fail("remove_file", -res);
                }
                stats.op_done(IoOp::Remove);
                Step::Done(Ok(Outcome::Unit))
            }
        }
    }
}

struct InFlight {
    reply: Option<Reply>,
    state: State,
}

struct Driver {
    _alive: Arc<()>,
    ring: IoUring,
    rx: Receiver<Msg>,
    wake: Arc<File>,
    /// Target of the armed eventfd read; lives as long as the ring.
    wake_buf: Box<[u8; 8]>,
    wake_armed: bool,
    ops: HashMap<u64, InFlight>,
    next_id: u64,
    backlog: VecDeque<(Req, Reply)>,
    stats: Arc<IoStats>,
    has_ftruncate: bool,
    closing: bool,
    cqes: Vec<(u64, i32)>,
}

impl Driver {
    fn main(mut self) {
        let result = catch_unwind(AssertUnwindSafe(|| self.run()));
        match result {
            Ok(Ok(())) => tracing::debug!("strata-io driver stopped"),
            Ok(Err(e)) => {
                tracing::error!(error = %e, "strata-io driver failed; io_uring backend is down");
                self.abandon();
            }
            Err(_) => {
                tracing::error!("strata-io driver panicked; io_uring backend is down");
                self.abandon();
            }
        }
    }

    /// Fails every waiting caller, closes the channel, and leaks the ring plus everything the
    /// kernel might still touch (leak over use-after-free).
    fn abandon(self) {
        let Driver {
            ring,
            rx,
            wake_buf,
            mut ops,
            backlog,
            stats,
            ..
        } = self;
        drop(rx); // later sends fail at once; queued messages drop their reply senders.
        for (_, op) in ops.iter_mut() {
            if let Some(reply) = op.reply.take() {
                stats.error("io_uring");
                let _ = reply.send(Err(dead()));
            }
        }
        for (_, reply) in backlog {
            stats.error("io_uring");
            let _ = reply.send(Err(dead()));
        }
        std::mem::forget(ops);
        std::mem::forget(wake_buf);
        std::mem::forget(ring);
    }

    fn run(&mut self) -> std::io::Result<()> {
        loop {
            self.drain_channel();
            while self.ops.len() < MAX_IN_FLIGHT {
                let Some((req, reply)) = self.backlog.pop_front() else {
                    break;
                };
                self.start(req, reply)?;
            }
            if self.closing && self.ops.is_empty() && self.backlog.is_empty() {
                break;
            }
            if !self.wake_armed {
                self.arm_wake()?;
            }
            self.enter()?;
            self.reap()?;
        }
        // Complete our own eventfd read before the ring and `wake_buf` are dropped.
        if self.wake_armed {
            (&*self.wake).write_all(&1u64.to_ne_bytes())?;
            while self.wake_armed {
                self.enter()?;
                self.reap()?;
            }
        }
        Ok(())
    }

    fn enter(&mut self) -> std::io::Result<()> {
        match self.ring.submit_and_wait(1) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn drain_channel(&mut self) {
        loop {
            match self.rx.try_recv() {
                Ok(Msg::Op(req, reply)) => self.backlog.push_back((req, reply)),
                #[cfg(test)]
                Ok(Msg::Panic) => panic!("strata-io: panic injected by a test"),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.closing = true;
                    return;
                }
            }
        }
    }

    fn arm_wake(&mut self) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let entry = opcode::Read::new(
            types::Fd(self.wake.as_raw_fd()),
            self.wake_buf.as_mut_ptr(),
            8,
        )
        .build()
        .user_data(WAKE_TOKEN);
        self.push(entry)?;
        self.wake_armed = true;
        Ok(())
    }

    fn push(&mut self, entry: squeue::Entry) -> std::io::Result<()> {
        loop {
            // SAFETY: every entry points only at (a) heap data owned by an `InFlight` stored in
            // `self.ops` under the entry's user_data, which is removed only after its CQE is
            // reaped, (b) `self.wake_buf`, which lives until the ring is dropped after the wake
            // read's CQE (or is leaked), or (c) fds kept open by an `IoFile` in that same entry
            // or by `self.wake`.
            let pushed = unsafe { self.ring.submission().push(&entry) };
            if pushed.is_ok() {
                return Ok(());
            }
            // Cannot happen with MAX_IN_FLIGHT < RING_ENTRIES, but be correct anyway.
            self.ring.submit()?;
        }
    }

    fn start(&mut self, req: Req, reply: Reply) -> std::io::Result<()> {
        if let Req::Truncate { file, len } = &req
            && !self.has_ftruncate
        {
            // Documented fallback: plain ftruncate(2) on the driver thread.
            let out = match file.std_file().set_len(*len) {
                Ok(()) => {
                    self.stats.op_done(IoOp::SetLen);
                    Ok(Outcome::Unit)
                }
                Err(err) => Err(Failure { op: "set_len", err }),
            };
            self.finish(reply, out);
            return Ok(());
        }
        let mut state = State::from_req(req);
        let step = state.next(&self.stats);
        self.step(
            InFlight {
                reply: Some(reply),
                state,
            },
            step,
        )
    }

    fn step(&mut self, mut op: InFlight, step: Step) -> std::io::Result<()> {
        match step {
            Step::Done(out) => {
                if let Some(reply) = op.reply.take() {
                    self.finish(reply, out);
                }
                Ok(())
            }
            Step::Submit(entry) => {
                let id = self.next_id;
                self.next_id = (self.next_id + 1) % WAKE_TOKEN;
                self.ops.insert(id, op);
                self.push(entry.user_data(id))
            }
        }
    }

    fn finish(&self, reply: Reply, out: Result<Outcome, Failure>) {
        if let Err(failure) = &out {
            self.stats.error(failure.op);
        }
        // A dropped receiver (abandoned future) is fine: an opened fd is closed on drop.
        let _ = reply.send(out);
    }

    fn reap(&mut self) -> std::io::Result<()> {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
        for (id, res) in cqes.drain(..) {
            if id == WAKE_TOKEN {
                self.wake_armed = false;
                continue;
            }
            let Some(mut op) = self.ops.remove(&id) else {
                tracing::error!(id, "strata-io: completion for an unknown operation");
                continue;
            };
            let step = op.state.complete(res, &self.stats);
            self.step(op, step)?;
        }
        self.cqes = cqes;
        Ok(())
    }
}

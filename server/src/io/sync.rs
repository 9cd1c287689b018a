//! The sync backend: the [`Io`](super::Io) API on tokio's blocking pool with plain syscalls
//! (`pwritev`, `pread`, `fdatasync`, ...). Used when io_uring is unavailable or `io_backend=sync`.
//!
//! Each operation runs in `spawn_blocking`; the closure owns the `IoFile` clone and the buffers,
//! so a dropped future only abandons the result. At most [`MAX_BLOCKING`] operations run at once
//! (the permit is moved into the closure and released when the syscall finishes).

use std::ffi::c_int;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Semaphore;

use super::{IoError, IoFile, IoOp, IoStats, WriteCursor, total_len};

/// Concurrent blocking syscalls (2-core target: a few in flight is plenty for fsync overlap).
const MAX_BLOCKING: usize = 4;

pub(crate) struct SyncIo {
    permits: Arc<Semaphore>,
    stats: Arc<IoStats>,
}

impl SyncIo {
    pub(crate) fn new(stats: Arc<IoStats>) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(MAX_BLOCKING)),
            stats,
        }
    }

    async fn run<T, F>(&self, op: &'static str, path: &Path, f: F) -> Result<T, IoError>
    where
        T: Send + 'static,
        F: FnOnce(&IoStats) -> std::io::Result<T> + Send + 'static,
    {
        let err = |e: std::io::Error| IoError::new(op, path, e);
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| err(std::io::Error::other("sync io backend closed")))?;
        let stats = self.stats.clone();
        let res = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let r = f(&stats);
            if r.is_err() {
                stats.error(op);
            }
            r
        })
        .await;
        match res {
            Ok(r) => r.map_err(err),
            Err(join) => Err(err(std::io::Error::other(format!(
                "blocking io task failed: {join}"
            )))),
        }
    }

    pub(crate) async fn open(&self, path: &Path, flags: i32) -> Result<IoFile, IoError> {
        let owned: PathBuf = path.to_owned();
        self.run("open", path, move |stats| {
            let acc = flags & libc::O_ACCMODE;
            let file = OpenOptions::new()
                .read(acc == libc::O_RDONLY || acc == libc::O_RDWR)
                .write(acc == libc::O_WRONLY || acc == libc::O_RDWR)
                .custom_flags(flags & !(libc::O_ACCMODE | libc::O_CREAT | libc::O_EXCL))
                .create(flags & libc::O_CREAT != 0 && flags & libc::O_EXCL == 0)
                .create_new(flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0)
                .mode(0o644)
                .open(&owned)?;
            stats.op_done(IoOp::Open);
            Ok(IoFile::new(file, owned))
        })
        .await
    }

    /// With `sync`, the fdatasync follows in the same blocking task: one hop, not two. A failed
    /// fdatasync is reported as `fdatasync`, as when it was a task of its own.
    pub(crate) async fn write_at(
        &self,
        file: &IoFile,
        position: u64,
        bufs: Vec<Bytes>,
        sync: bool,
    ) -> Result<(), IoError> {
        let f = file.clone();
        // The outer error is only a failed blocking task; the inner one names write or fsync.
        self.run("write", file.path(), move |stats| {
            Ok(write_then_sync(&f, position, &bufs, sync, stats))
        })
        .await?
    }

    pub(crate) async fn fsync(&self, file: &IoFile, datasync: bool) -> Result<(), IoError> {
        let f = file.clone();
        let op = if datasync { "fdatasync" } else { "fsync" };
        self.run(op, file.path(), move |stats| {
            if datasync {
                f.std_file().sync_data()?;
                stats.op_done(IoOp::SyncData);
            } else {
                f.std_file().sync_all()?;
                stats.op_done(IoOp::SyncAll);
            }
            Ok(())
        })
        .await
    }

    pub(crate) async fn read_at(
        &self,
        file: &IoFile,
        position: u64,
        len: usize,
    ) -> Result<Bytes, IoError> {
        let f = file.clone();
        self.run("read", file.path(), move |stats| {
            let mut buf = vec![0u8; len];
            let mut filled = 0;
            while filled < len {
                match f
                    .std_file()
                    .read_at(&mut buf[filled..], position + filled as u64)
                {
                    Ok(0) => break,
                    Ok(n) => {
                        filled += n;
                        stats.read(n as u64);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            buf.truncate(filled);
            stats.op_done(IoOp::Read);
            Ok(Bytes::from(buf))
        })
        .await
    }

    pub(crate) async fn set_len(&self, file: &IoFile, len: u64) -> Result<(), IoError> {
        let f = file.clone();
        self.run("set_len", file.path(), move |stats| {
            f.std_file().set_len(len)?;
            stats.op_done(IoOp::SetLen);
            Ok(())
        })
        .await
    }

    pub(crate) async fn allocate(
        &self,
        file: &IoFile,
        offset: u64,
        len: u64,
    ) -> Result<(), IoError> {
        let f = file.clone();
        self.run("fallocate", file.path(), move |stats| {
            allocate(f.std_file(), offset, len)?;
            stats.op_done(IoOp::Allocate);
            Ok(())
        })
        .await
    }

    pub(crate) async fn file_len(&self, file: &IoFile) -> Result<u64, IoError> {
        let f = file.clone();
        self.run("file_len", file.path(), move |stats| {
            let len = f.std_file().metadata()?.len();
            stats.op_done(IoOp::FileLen);
            Ok(len)
        })
        .await
    }

    pub(crate) async fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        let (a, b) = (from.to_owned(), to.to_owned());
        self.run("rename", from, move |stats| {
            std::fs::rename(a, b)?;
            stats.op_done(IoOp::Rename);
            Ok(())
        })
        .await
    }

    pub(crate) async fn remove_file(&self, path: &Path) -> Result<(), IoError> {
        let p = path.to_owned();
        self.run("remove_file", path, move |stats| {
            std::fs::remove_file(p)?;
            stats.op_done(IoOp::Remove);
            Ok(())
        })
        .await
    }
}

/// Every byte of `bufs` at `position`, then, with `sync`, an fdatasync, on this thread; the
/// error names the operation that failed (`write` or `fdatasync`). Shared by the sync
/// backend's blocking task and the writer's own-thread append (`inline`).
pub(crate) fn write_then_sync(
    file: &IoFile,
    position: u64,
    bufs: &[Bytes],
    sync: bool,
    stats: &IoStats,
) -> Result<(), IoError> {
    let failed = |op: &'static str, error: std::io::Error| {
        stats.error(op);
        IoError::new(op, file.path(), error)
    };
    pwritev_all(file.std_file(), position, bufs, stats).map_err(|e| failed("write", e))?;
    stats.op_done(IoOp::Write);
    if sync {
        file.std_file()
            .sync_data()
            .map_err(|e| failed("fdatasync", e))?;
        stats.op_done(IoOp::SyncData);
    }
    Ok(())
}

/// `pwritev` until every byte of `bufs` is written at `pos`; resubmits the remainder after a
/// short write, at most [`IOV_MAX`](super::IOV_MAX) iovecs per call.
pub(crate) fn pwritev_all(
    file: &File,
    pos: u64,
    bufs: &[Bytes],
    stats: &IoStats,
) -> std::io::Result<()> {
    let total = total_len(bufs);
    let mut done = 0u64;
    let mut cursor = WriteCursor::default();
    let mut iov = Vec::new();
    while done < total {
        cursor.iovecs(bufs, &mut iov);
        let off = file_offset(pos + done)?;
        // SAFETY: `iov` holds at most IOV_MAX (so the `c_int` cast is lossless) valid
        // (pointer, len) pairs into `bufs`, which are immutable and borrowed for this whole call;
        // the fd is open because `file` is borrowed.
        let n = unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), iov.len() as c_int, off) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let n = n as usize;
        stats.written(n as u64);
        done += n as u64;
        cursor.advance(bufs, n);
    }
    Ok(())
}

/// A byte position or length as the kernel's `off_t`: EFBIG past its range, as the kernel
/// itself answers for a file that would grow too large.
fn file_offset(value: u64) -> std::io::Result<libc::off_t> {
    libc::off_t::try_from(value).map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))
}

/// `fallocate(fd, 0, offset, len)`, retried on EINTR.
fn allocate(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    let (offset, len) = (file_offset(offset)?, file_offset(len)?);
    loop {
        // SAFETY: fallocate only reads its integer arguments; the fd is open because `file` is
        // borrowed for the call. Mode 0 never changes bytes that are already in the file.
        let code = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) };
        if code == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Asks the kernel to drop the cached pages of `len` bytes at `offset` (`posix_fadvise`
/// `POSIX_FADV_DONTNEED`). Only clean pages go: the caller passes ranges already made durable.
pub(crate) fn drop_cached(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    advise(file, offset, len, libc::POSIX_FADV_DONTNEED)
}

/// Starts writing back the dirty pages of `[offset, offset + len)` and returns without waiting
/// for them (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`): a head start for a later
/// fdatasync, never a durability promise (it flushes no metadata and no device cache).
pub(crate) fn start_writeback(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    let (offset, len) = (file_offset(offset)?, file_offset(len)?);
    // SAFETY: sync_file_range only reads its integer arguments; the fd is open because `file`
    // is borrowed for the call, and starting writeback never changes the file's contents.
    let code = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
    if code == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `posix_fadvise(fd, offset, len, advice)`.
pub(crate) fn advise(file: &File, offset: u64, len: u64, advice: i32) -> std::io::Result<()> {
    let (offset, len) = (file_offset(offset)?, file_offset(len)?);
    // SAFETY: posix_fadvise only reads its integer arguments; the fd is open because `file`
    // is borrowed for the call, and advice never changes the file's contents.
    let code = unsafe { libc::posix_fadvise(file.as_raw_fd(), offset, len, advice) };
    if code == 0 {
        Ok(())
    } else {
        // posix_fadvise returns the error number instead of setting errno.
        Err(std::io::Error::from_raw_os_error(code))
    }
}

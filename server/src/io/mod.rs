//! Disk I/O layer: io_uring driver thread or blocking-pool fallback, plus read-only segment maps.
//!
//! All `unsafe` code of Strata lives in this module tree. Every `unsafe` block carries a
//! `// SAFETY:` comment and is exercised by the tests in `tests.rs` / `map.rs`.
//!
//! * [`Io`] is the cheap-to-clone handle the log layer uses for writes, fsyncs, cold reads and
//!   metadata operations. It dispatches to one of two backends chosen by [`Io::start`]:
//!   * `uring` ([`uring`]): one `strata-io` thread owning an `io_uring` instance. Submitters send
//!     operations over a channel and wake the thread through an eventfd; the driver owns every
//!     buffer and file handle until the kernel's completion arrives, so a dropped future never
//!     frees memory or an fd the kernel still uses.
//!   * `sync` ([`sync`]): the same API on tokio's blocking pool with `pwritev`/`pread`/`fdatasync`.
//! * [`MappedFile`] ([`map`]) is a shared read-only `mmap` of a segment, sliced into [`Bytes`]
//!   without copying (the zero-copy fetch path).

#[cfg(any(test, feature = "test-util"))]
mod faults;
pub mod free_page_reporting;
mod inline;
pub mod map;
mod probe;
#[cfg(feature = "test-util")]
pub mod seccomp;
pub mod space;
mod sync;
#[cfg(test)]
mod tests;
mod uring;

use std::fmt;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

#[cfg(any(test, feature = "test-util"))]
pub use faults::FaultPlan;
pub use map::MappedFile;
pub use map::evict_page_cache;

/// Maximum number of iovecs passed to one `writev` (Linux `UIO_MAXIOV`).
pub(crate) const IOV_MAX: usize = 1024;

/// The `io_backend` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoBackendChoice {
    /// io_uring when the start-up probe succeeds, otherwise the sync backend (with a warning).
    Auto,
    /// io_uring or a start-up error.
    #[serde(rename = "io_uring", alias = "uring")]
    Uring,
    /// Always the sync (blocking pool) backend.
    Sync,
}

/// Error parsing an [`IoBackendChoice`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown io backend {0:?}: expected \"auto\", \"io_uring\" (or \"uring\") or \"sync\"")]
pub struct ParseIoBackendError(pub String);

impl FromStr for IoBackendChoice {
    type Err = ParseIoBackendError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "uring" | "io_uring" | "io-uring" => Ok(Self::Uring),
            "sync" => Ok(Self::Sync),
            _ => Err(ParseIoBackendError(s.to_owned())),
        }
    }
}

impl fmt::Display for IoBackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Uring => "io_uring",
            Self::Sync => "sync",
        })
    }
}

/// The backend actually running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoBackendKind {
    Uring,
    Sync,
}

impl fmt::Display for IoBackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Uring => "io_uring",
            Self::Sync => "sync",
        })
    }
}

/// What [`Io::start`] chose and why (log it at start-up and expose it on the status endpoint).
#[derive(Debug, Clone)]
pub struct ProbeReport {
    pub backend: IoBackendKind,
    /// e.g. `"io_uring probe ok (kernel 6.18.44; ftruncate: native)"` or
    /// `"io_uring_setup failed: EPERM (Operation not permitted): blocked by seccomp? ..."`.
    pub reason: String,
}

/// Start-up failure of the I/O layer.
#[derive(Debug, thiserror::Error)]
pub enum IoStartError {
    /// `io_backend=io_uring` was requested but the probe failed with a restriction errno.
    #[error("io_backend=io_uring was requested but io_uring is unavailable: {reason}")]
    UringUnavailable { reason: String, errno: Option<i32> },
    /// A resource limit (ENOMEM, EMFILE, ENFILE) stopped io_uring set-up; not a fallback case.
    #[error("io_uring set-up hit a resource limit: {reason}")]
    Resource { reason: String, errno: i32 },
    /// The probe file could not be created, written or removed with plain syscalls.
    #[error("io probe in {}: {source}", path.display())]
    ProbeDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The `strata-io` thread could not be spawned.
    #[error("spawning the strata-io thread: {0}")]
    Spawn(#[source] std::io::Error),
}

/// An I/O failure with the operation and the path it concerned.
#[derive(Debug, thiserror::Error)]
#[error("{op} {}: {source}", path.display())]
pub struct IoError {
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl IoError {
    pub fn new(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self {
            op,
            path: path.into(),
            source,
        }
    }

    /// The errno, if the error came from the OS (e.g. `libc::ENOSPC`).
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

/// An open file shared between the caller and in-flight operations (the driver keeps a clone
/// until the completion arrives, so a dropped future never frees an fd or buffer the kernel still
/// uses).
#[derive(Debug, Clone)]
pub struct IoFile {
    file: Arc<File>,
    path: Arc<Path>,
}

impl IoFile {
    /// Wraps an already open file (e.g. one opened by recovery code with std).
    pub fn new(file: File, path: impl Into<PathBuf>) -> Self {
        Self {
            file: Arc::new(file),
            path: Arc::from(path.into()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn std_file(&self) -> &File {
        &self.file
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// How [`Io::open`] opens a file. Files are always opened with `O_CLOEXEC`, mode 0644.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// `O_RDONLY`.
    Read,
    /// `O_RDWR`; the file must exist.
    ReadWrite,
    /// `O_CREAT|O_RDWR`.
    CreateOrOpen,
    /// `O_CREAT|O_EXCL|O_RDWR`.
    CreateNew,
}

impl OpenMode {
    pub(crate) fn flags(self) -> i32 {
        libc::O_CLOEXEC
            | match self {
                Self::Read => libc::O_RDONLY,
                Self::ReadWrite => libc::O_RDWR,
                Self::CreateOrOpen => libc::O_RDWR | libc::O_CREAT,
                Self::CreateNew => libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
            }
    }
}

/// Operation kinds counted in [`IoStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoOp {
    Open,
    Write,
    SyncData,
    SyncAll,
    Read,
    SetLen,
    FileLen,
    Rename,
    Remove,
    Allocate,
    ReadAhead,
}

impl IoOp {
    pub const ALL: [IoOp; 11] = [
        IoOp::Open,
        IoOp::Write,
        IoOp::SyncData,
        IoOp::SyncAll,
        IoOp::Read,
        IoOp::SetLen,
        IoOp::FileLen,
        IoOp::Rename,
        IoOp::Remove,
        IoOp::Allocate,
        IoOp::ReadAhead,
    ];

    /// Metric label, e.g. `"writev"`.
    pub fn as_str(self) -> &'static str {
        match self {
            IoOp::Open => "open",
            IoOp::Write => "writev",
            IoOp::SyncData => "fdatasync",
            IoOp::SyncAll => "fsync",
            IoOp::Read => "read",
            IoOp::SetLen => "ftruncate",
            IoOp::FileLen => "statx",
            IoOp::Rename => "rename",
            IoOp::Remove => "unlink",
            IoOp::Allocate => "fallocate",
            IoOp::ReadAhead => "fadvise_willneed",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Counters, updated from completions in both backends.
///
/// `ops` counts successful operations (a `write_at` counts one `Write` however many short-write
/// resubmissions it needed; `write_at_and_sync` counts one `Write` and one `SyncData`; `sync_dir`
/// counts one `Open` and one `SyncAll`). Failed operations count in `errors`.
#[derive(Debug, Default)]
pub struct IoStats {
    ops: [AtomicU64; IoOp::ALL.len()],
    errors: AtomicU64,
    /// Failed operations by the name the error carries (`fdatasync`, `writev`, ...); errors
    /// are rare, so a locked map costs nothing on the paths that succeed.
    errors_by_op: parking_lot::Mutex<std::collections::BTreeMap<&'static str, u64>>,
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
    bytes_zero_copy: AtomicU64,
    bytes_copied: AtomicU64,
    /// Set by a write that failed with ENOSPC, cleared by the next write that succeeds (or by
    /// readiness once the disk has room again): what `/readyz` reports as `disk_full`.
    disk_full: std::sync::atomic::AtomicBool,
    /// Operations that failed with EMFILE or ENFILE (the open-file limit).
    open_file_limit_hits: AtomicU64,
}

impl IoStats {
    pub fn ops(&self, op: IoOp) -> u64 {
        self.ops[op.index()].load(Ordering::Relaxed)
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Bytes the kernel reported written (including the prefix of a failed write).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written.load(Ordering::Relaxed)
    }

    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::Relaxed)
    }

    /// Fetch bytes served as slices of a mapping (no user-space copy).
    pub fn add_zero_copy(&self, n: u64) {
        self.bytes_zero_copy.fetch_add(n, Ordering::Relaxed);
    }

    /// Fetch bytes served through a copy (cold reads, JSON rendering).
    pub fn add_copied(&self, n: u64) {
        self.bytes_copied.fetch_add(n, Ordering::Relaxed);
    }

    pub fn bytes_zero_copy(&self) -> u64 {
        self.bytes_zero_copy.load(Ordering::Relaxed)
    }

    pub fn bytes_copied(&self) -> u64 {
        self.bytes_copied.load(Ordering::Relaxed)
    }

    /// Whether the last write failed because the disk was full.
    pub fn disk_full(&self) -> bool {
        self.disk_full.load(Ordering::Relaxed)
    }

    /// Marks the disk as usable again (readiness saw free space).
    pub fn clear_disk_full(&self) {
        self.disk_full.store(false, Ordering::Relaxed);
    }

    /// How often an operation hit the open-file limit.
    pub fn open_file_limit_hits(&self) -> u64 {
        self.open_file_limit_hits.load(Ordering::Relaxed)
    }

    /// Notes what an operation's result says about disk space and file limits.
    fn note<T>(&self, result: &Result<T, IoError>, writes: bool) {
        match result {
            Ok(_) if writes => self.disk_full.store(false, Ordering::Relaxed),
            Ok(_) => {}
            Err(error) => match error.raw_os_error() {
                Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
                    self.disk_full.store(true, Ordering::Relaxed);
                }
                Some(libc::EMFILE) | Some(libc::ENFILE) => {
                    self.open_file_limit_hits.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            },
        }
    }

    pub(crate) fn op_done(&self, op: IoOp) {
        self.ops[op.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn error(&self, op: &'static str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.errors_by_op.lock().entry(op).or_insert(0) += 1;
    }

    /// Failed operations by operation name, since start.
    pub fn errors_by_op(&self) -> Vec<(&'static str, u64)> {
        self.errors_by_op
            .lock()
            .iter()
            .map(|(op, n)| (*op, *n))
            .collect()
    }

    pub(crate) fn written(&self, n: u64) {
        self.bytes_written.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn read(&self, n: u64) {
        self.bytes_read.fetch_add(n, Ordering::Relaxed);
    }
}

/// Position inside a `Vec<Bytes>` that is being written in order: shared by both backends to
/// build the iovec array for the remainder after a short write.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WriteCursor {
    idx: usize,
    off: usize,
}

impl WriteCursor {
    /// Fills `out` with iovecs for the unwritten remainder (at most [`IOV_MAX`], empty buffers
    /// skipped). The iovecs point into `bufs`, which must outlive every use of `out`.
    pub(crate) fn iovecs(&self, bufs: &[Bytes], out: &mut Vec<libc::iovec>) {
        out.clear();
        let rest = bufs.get(self.idx..).unwrap_or_default();
        let slices = rest
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if i == 0 {
                    &b[self.off.min(b.len())..]
                } else {
                    &b[..]
                }
            })
            .filter(|s| !s.is_empty())
            .take(IOV_MAX);
        out.extend(slices.map(|s| libc::iovec {
            iov_base: s.as_ptr().cast_mut().cast(),
            iov_len: s.len(),
        }));
    }

    /// Records that `n` more bytes were written.
    pub(crate) fn advance(&mut self, bufs: &[Bytes], mut n: usize) {
        while n > 0 && self.idx < bufs.len() {
            let left = bufs[self.idx].len() - self.off;
            if n < left {
                self.off += n;
                return;
            }
            n -= left;
            self.idx += 1;
            self.off = 0;
        }
    }
}

pub(crate) fn total_len(bufs: &[Bytes]) -> u64 {
    bufs.iter().map(|b| b.len() as u64).sum()
}

/// The first `n` bytes of `bufs` (no copy).
#[cfg(any(test, feature = "test-util"))]
pub(crate) fn truncate_bufs(bufs: Vec<Bytes>, mut n: u64) -> Vec<Bytes> {
    let mut out = Vec::new();
    for mut b in bufs {
        if n == 0 {
            break;
        }
        if (b.len() as u64) > n {
            b.truncate(n as usize);
        }
        n -= b.len() as u64;
        out.push(b);
    }
    out
}

enum Backend {
    Uring(uring::UringIo),
    Sync(sync::SyncIo),
}

/// Cheap to clone handle to the I/O backend. The `uring` driver thread stops when the last
/// handle is dropped (after its in-flight operations complete).
#[derive(Clone)]
pub struct Io {
    backend: Arc<Backend>,
    stats: Arc<IoStats>,
    #[cfg(any(test, feature = "test-util"))]
    faults: Option<Arc<FaultPlan>>,
}

impl fmt::Debug for Io {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Io")
            .field("kind", &self.kind())
            .finish_non_exhaustive()
    }
}

macro_rules! dispatch {
    ($self:ident . $method:ident ( $($arg:expr),* )) => {{
        let result = match &*$self.backend {
            Backend::Uring(b) => b.$method($($arg),*).await,
            Backend::Sync(b) => b.$method($($arg),*).await,
        };
        $self.stats.note(&result, stringify!($method).starts_with("write"));
        result
    }};
}

impl Io {
    /// Probes (a real write + fdatasync + read of a temp file inside `probe_dir` through a fresh
    /// ring), then starts the chosen backend. `Auto` falls back to `Sync` with a `tracing::warn!`
    /// naming errno and fix when io_uring is unavailable (EPERM/ENOSYS/EINVAL/EOPNOTSUPP/EACCES at
    /// set-up or a failed probe op); resource errors (ENOMEM, EMFILE) are errors in every mode.
    /// `Uring`: error instead of falling back. `Sync`: no io_uring probe at all.
    pub fn start(
        choice: IoBackendChoice,
        probe_dir: &Path,
    ) -> Result<(Io, ProbeReport), IoStartError> {
        let stats = Arc::new(IoStats::default());
        if choice == IoBackendChoice::Sync {
            let report = ProbeReport {
                backend: IoBackendKind::Sync,
                reason: "io_backend=sync requested; io_uring not probed".to_owned(),
            };
            return Ok((
                Self::from_backend(Backend::Sync(sync::SyncIo::new(stats.clone())), stats),
                report,
            ));
        }
        match probe::probe(probe_dir)? {
            probe::Verdict::Available { reason, ftruncate } => {
                let backend = match uring::UringIo::start(stats.clone(), ftruncate) {
                    Ok(b) => b,
                    // The probe ring worked but the driver's (bigger) ring did not: same rules.
                    Err(IoStartError::UringUnavailable { reason, .. })
                        if choice == IoBackendChoice::Auto =>
                    {
                        tracing::warn!(%reason, "io_uring unavailable; falling back to sync io");
                        let report = ProbeReport {
                            backend: IoBackendKind::Sync,
                            reason,
                        };
                        let sync = Backend::Sync(sync::SyncIo::new(stats.clone()));
                        return Ok((Self::from_backend(sync, stats), report));
                    }
                    Err(e) => return Err(e),
                };
                let report = ProbeReport {
                    backend: IoBackendKind::Uring,
                    reason,
                };
                tracing::info!(reason = %report.reason, "io backend: io_uring");
                Ok((Self::from_backend(Backend::Uring(backend), stats), report))
            }
            probe::Verdict::Unavailable { reason, errno } => {
                if choice == IoBackendChoice::Uring {
                    return Err(IoStartError::UringUnavailable { reason, errno });
                }
                tracing::warn!(%reason, "io_uring unavailable; falling back to the sync io backend");
                let report = ProbeReport {
                    backend: IoBackendKind::Sync,
                    reason,
                };
                Ok((
                    Self::from_backend(Backend::Sync(sync::SyncIo::new(stats.clone())), stats),
                    report,
                ))
            }
        }
    }

    fn from_backend(backend: Backend, stats: Arc<IoStats>) -> Io {
        Io {
            backend: Arc::new(backend),
            stats,
            #[cfg(any(test, feature = "test-util"))]
            faults: None,
        }
    }

    pub fn kind(&self) -> IoBackendKind {
        match &*self.backend {
            Backend::Uring(_) => IoBackendKind::Uring,
            Backend::Sync(_) => IoBackendKind::Sync,
        }
    }

    pub fn stats(&self) -> &Arc<IoStats> {
        &self.stats
    }

    /// Test/fault injection: a handle sharing this backend whose ops consult `faults` first.
    #[cfg(any(test, feature = "test-util"))]
    pub fn with_faults(&self, faults: Arc<FaultPlan>) -> Io {
        Io {
            faults: Some(faults),
            ..self.clone()
        }
    }

    #[cfg(any(test, feature = "test-util"))]
    fn fault(&self, kind: faults::FaultKind) -> Option<faults::Fault> {
        self.faults.as_ref().and_then(|f| f.take(kind))
    }

    #[cfg(any(test, feature = "test-util"))]
    fn injected(&self, op: &'static str, path: &Path, errno: i32) -> IoError {
        self.stats.error(op);
        IoError::new(op, path, std::io::Error::from_raw_os_error(errno))
    }

    pub async fn open(&self, path: &Path, mode: OpenMode) -> Result<IoFile, IoError> {
        #[cfg(any(test, feature = "test-util"))]
        if let Some(f) = self.fault(faults::FaultKind::Open) {
            return Err(self.injected("open", path, f.errno));
        }
        dispatch!(self.open(path, mode.flags()))
    }

    /// Writes every byte of `bufs` (in order, contiguous) at `position`; loops on short writes;
    /// chunks at `IOV_MAX`. Error => some prefix may have been written.
    pub async fn write_at(
        &self,
        file: &IoFile,
        position: u64,
        bufs: Vec<Bytes>,
    ) -> Result<(), IoError> {
        #[cfg(any(test, feature = "test-util"))]
        if let Some(f) = self.fault(faults::FaultKind::Write) {
            return self.faulty_write(file, position, bufs, f).await;
        }
        dispatch!(self.write_at(file, position, bufs, false))
    }

    /// `write_at` followed by `fdatasync`, as one operation: the uring driver submits the
    /// fdatasync as soon as the write has completed fully (after any short-write resubmissions).
    pub async fn write_at_and_sync(
        &self,
        file: &IoFile,
        position: u64,
        bufs: Vec<Bytes>,
    ) -> Result<(), IoError> {
        #[cfg(any(test, feature = "test-util"))]
        {
            if let Some(f) = self.fault(faults::FaultKind::Write) {
                return self.faulty_write(file, position, bufs, f).await;
            }
            if let Some(f) = self.fault(faults::FaultKind::Sync) {
                dispatch!(self.write_at(file, position, bufs, false))?;
                return Err(self.injected("fdatasync", file.path(), f.errno));
            }
        }
        dispatch!(self.write_at(file, position, bufs, true))
    }

    /// The partition writer's append: like [`Io::write_at`] (and, with `sync`,
    /// [`Io::write_at_and_sync`]), but the syscalls run on the calling thread whatever the
    /// backend, because a hop to another thread costs more than a page-cache write here (see
    /// [`inline`]). Only for the writer's own rounds: a caller that must not block its thread
    /// for an fdatasync uses the backend's operations.
    pub async fn append_at(
        &self,
        file: &IoFile,
        position: u64,
        bufs: Vec<Bytes>,
        sync: bool,
    ) -> Result<(), IoError> {
        #[cfg(any(test, feature = "test-util"))]
        {
            if let Some(f) = self.fault(faults::FaultKind::Write) {
                return self.faulty_write(file, position, bufs, f).await;
            }
            if sync && let Some(f) = self.fault(faults::FaultKind::Sync) {
                inline::write_at(file, position, &bufs, false, &self.stats)?;
                return Err(self.injected("fdatasync", file.path(), f.errno));
            }
        }
        let result = inline::write_at(file, position, &bufs, sync, &self.stats);
        self.stats.note(&result, true);
        result
    }

    /// A page-cache write (no fdatasync) on the calling thread, without `block_in_place`: for
    /// a streamed append's body, which its request's own task writes a slice at a time while
    /// the rest arrives (see `log::stream`). Synchronous, so the caller may hold a lock across
    /// it; a slice is at most a few frames of the body, microseconds of copying.
    pub fn write_now(&self, file: &IoFile, position: u64, bufs: &[Bytes]) -> Result<(), IoError> {
        #[cfg(any(test, feature = "test-util"))]
        if let Some(f) = self.fault(faults::FaultKind::Write) {
            return Err(self.injected("write", file.path(), f.errno));
        }
        let result = sync::write_then_sync(file, position, bufs, false, &self.stats);
        self.stats.note(&result, true);
        result
    }

    /// Starts writing `[offset, offset + len)` back to the disk without waiting (see
    /// `sync::start_writeback`), so a later fdatasync finds less to do: a hint, on the calling
    /// thread.
    pub fn start_writeback(&self, file: &IoFile, offset: u64, len: u64) -> Result<(), IoError> {
        sync::start_writeback(file.std_file(), offset, len)
            .map_err(|error| IoError::new("sync_file_range", file.path(), error))
    }

    #[cfg(any(test, feature = "test-util"))]
    async fn faulty_write(
        &self,
        file: &IoFile,
        position: u64,
        bufs: Vec<Bytes>,
        f: faults::Fault,
    ) -> Result<(), IoError> {
        if f.written_before > 0 {
            let prefix = truncate_bufs(bufs, f.written_before);
            dispatch!(self.write_at(file, position, prefix, false))?;
        }
        Err(self.injected("write", file.path(), f.errno))
    }

    pub async fn sync_data(&self, file: &IoFile) -> Result<(), IoError> {
        #[cfg(any(test, feature = "test-util"))]
        {
            if let Some(plan) = &self.faults {
                plan.wait_while_syncs_held().await;
            }
            if let Some(f) = self.fault(faults::FaultKind::Sync) {
                return Err(self.injected("fdatasync", file.path(), f.errno));
            }
        }
        dispatch!(self.fsync(file, true))
    }

    /// Drops the page-cache copy of a durable byte range (see `log::cache_window`): a hint,
    /// run on the calling thread because dropping clean pages does not wait for the disk.
    pub fn drop_cached(&self, file: &IoFile, offset: u64, len: u64) -> Result<(), IoError> {
        sync::drop_cached(file.std_file(), offset, len)
            .map_err(|error| IoError::new("fadvise", file.path(), error))
    }

    /// Starts reading `[offset, offset + len)` into the page cache in the background
    /// (`POSIX_FADV_WILLNEED` on the blocking pool): the advice allocates pages and submits the
    /// reads before it returns, which is work a reader should not wait for. Failures only cost
    /// speed, so they are logged, not returned.
    pub fn read_ahead(&self, file: &IoFile, offset: u64, len: u64) {
        self.stats.op_done(IoOp::ReadAhead);
        let file = file.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(error) =
                sync::advise(file.std_file(), offset, len, libc::POSIX_FADV_WILLNEED)
            {
                tracing::debug!(%error, path = %file.path().display(), "read-ahead advice failed");
            }
        });
    }

    pub async fn sync_all(&self, file: &IoFile) -> Result<(), IoError> {
        #[cfg(any(test, feature = "test-util"))]
        if let Some(f) = self.fault(faults::FaultKind::Sync) {
            return Err(self.injected("fsync", file.path(), f.errno));
        }
        dispatch!(self.fsync(file, false))
    }

    /// Reads up to `len` bytes (fewer only at EOF) into a fresh buffer.
    pub async fn read_at(
        &self,
        file: &IoFile,
        position: u64,
        len: usize,
    ) -> Result<Bytes, IoError> {
        #[cfg(any(test, feature = "test-util"))]
        if let Some(f) = self.fault(faults::FaultKind::Read) {
            return Err(self.injected("read", file.path(), f.errno));
        }
        dispatch!(self.read_at(file, position, len))
    }

    pub async fn set_len(&self, file: &IoFile, len: u64) -> Result<(), IoError> {
        dispatch!(self.set_len(file, len))
    }

    pub async fn file_len(&self, file: &IoFile) -> Result<u64, IoError> {
        dispatch!(self.file_len(file))
    }

    /// `fallocate(2)` with mode 0: reserves `[offset, offset + len)` as unwritten extents and
    /// grows the file to cover it, so later writes inside it change neither the size nor the
    /// block map (see `log/preallocate.rs`). The new bytes read as zeros.
    pub async fn allocate(&self, file: &IoFile, offset: u64, len: u64) -> Result<(), IoError> {
        #[cfg(any(test, feature = "test-util"))]
        if let Some(f) = self.fault(faults::FaultKind::Allocate) {
            return Err(self.injected("fallocate", file.path(), f.errno));
        }
        dispatch!(self.allocate(file, offset, len))
    }

    /// `rename(2)`; the error's path is `from`. Follow with [`Io::sync_dir`] for durability.
    pub async fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        dispatch!(self.rename(from, to))
    }

    pub async fn remove_file(&self, path: &Path) -> Result<(), IoError> {
        dispatch!(self.remove_file(path))
    }

    /// fsync of a directory, so a create/rename/unlink inside it survives a crash.
    pub async fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        #[cfg(any(test, feature = "test-util"))]
        if let Some(f) = self.fault(faults::FaultKind::Sync) {
            return Err(self.injected("sync_dir", dir, f.errno));
        }
        let d = dispatch!(self.open(dir, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC))?;
        dispatch!(self.fsync(&d, false)).map_err(|e| IoError {
            op: "sync_dir",
            ..e
        })
    }

    /// Test hook: dangles once the uring driver thread has exited.
    #[cfg(test)]
    pub(crate) fn driver_alive_for_test(&self) -> Option<std::sync::Weak<()>> {
        match &*self.backend {
            Backend::Uring(u) => Some(u.alive.clone()),
            Backend::Sync(_) => None,
        }
    }

    /// Test hook: makes the uring driver thread panic (no-op on the sync backend).
    #[cfg(test)]
    pub(crate) fn kill_driver_for_test(&self) {
        if let Backend::Uring(u) = &*self.backend {
            u.kill_for_test();
        }
    }
}

/// `"EPERM"` etc. for the errnos the probe and error messages care about.
pub(crate) fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOSPC => "ENOSPC",
        libc::EROFS => "EROFS",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ECANCELED => "ECANCELED",
        libc::EDQUOT => "EDQUOT",
        _ => return format!("errno {errno}"),
    };
    name.to_owned()
}

/// `"EPERM (Operation not permitted)"`.
pub(crate) fn describe_errno(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    let text = text
        .split(" (os error")
        .next()
        .unwrap_or_default()
        .to_owned();
    format!("{} ({text})", errno_name(errno))
}

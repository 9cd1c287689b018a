//! Start-up probe: can this process really use io_uring?
//!
//! Ladder: `io_uring_setup(8)` → `IORING_REGISTER_PROBE` (the opcodes the driver uses) → a real
//! `WRITEV` + `FSYNC(DATASYNC)` + `READ` of a temp file inside the probe directory, checking the
//! bytes read back. A successful `io_uring_setup` alone proves nothing: gVisor or seccomp can
//! allow the ring but fail the ops.
//!
//! Classification of errnos:
//! * EPERM, EACCES (seccomp, `kernel.io_uring_disabled`, LSM), ENOSYS (no io_uring / filtered),
//!   EINVAL, EOPNOTSUPP (too old a kernel or unsupported op) and any other unexpected errno:
//!   io_uring is *unavailable* → `Auto` falls back to sync, `Uring` fails start-up.
//! * ENOMEM (memlock on kernels < 5.12), EMFILE, ENFILE: a *resource* problem → error in every
//!   mode, because the sync backend would be the wrong fix.
//! * Failing to create/remove the probe file with plain syscalls → `IoStartError::ProbeDir`.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use io_uring::{IoUring, Probe, cqueue, opcode, types};

use super::{IoStartError, describe_errno};

pub(crate) enum Verdict {
    Available { reason: String, ftruncate: bool },
    Unavailable { reason: String, errno: Option<i32> },
}

const PROBE_DATA: &[u8] = b"strata io_uring probe\n";

/// Opcodes the driver needs (`FTRUNCATE` is optional: Linux >= 6.9).
const REQUIRED: [(u8, &str); 8] = [
    (opcode::Writev::CODE, "WRITEV"),
    (opcode::Read::CODE, "READ"),
    (opcode::Fsync::CODE, "FSYNC"),
    (opcode::OpenAt::CODE, "OPENAT"),
    (opcode::Statx::CODE, "STATX"),
    (opcode::RenameAt::CODE, "RENAMEAT"),
    (opcode::UnlinkAt::CODE, "UNLINKAT"),
    (opcode::Fallocate::CODE, "FALLOCATE"),
];

fn fix_hint(errno: i32) -> &'static str {
    match errno {
        libc::EPERM | libc::EACCES => {
            "blocked by seccomp or kernel.io_uring_disabled? run with a seccomp profile that \
             allows io_uring_setup/io_uring_enter/io_uring_register (Docker/containerd >= 25/2.0 \
             block them by default; e.g. the chart's Localhost profile or \
             --security-opt seccomp=unconfined), check `sysctl kernel.io_uring_disabled` is 0, \
             or set io_backend=sync"
        }
        libc::ENOSYS => {
            "the kernel has no io_uring or a sandbox (gVisor, seccomp) filters it; \
             set io_backend=sync"
        }
        libc::EINVAL | libc::EOPNOTSUPP => {
            "kernel too old or the operation is unsupported (Linux >= 5.11 needed); \
             set io_backend=sync"
        }
        libc::ENOMEM => {
            "raise the locked-memory limit (ulimit -l / container memlock) or free memory"
        }
        libc::EMFILE | libc::ENFILE => "raise the open-file limit (ulimit -n / LimitNOFILE)",
        _ => "set io_backend=sync to run without io_uring",
    }
}

fn is_resource(errno: i32) -> bool {
    matches!(errno, libc::ENOMEM | libc::EMFILE | libc::ENFILE)
}

/// Turns an errno from `stage` into a verdict or a resource error.
pub(crate) fn classify(stage: &str, err: &std::io::Error) -> Result<Verdict, IoStartError> {
    let Some(errno) = err.raw_os_error() else {
        return Ok(Verdict::Unavailable {
            reason: format!("{stage} failed: {err}"),
            errno: None,
        });
    };
    let reason = format!(
        "{stage} failed: {}: {}",
        describe_errno(errno),
        fix_hint(errno)
    );
    if is_resource(errno) {
        Err(IoStartError::Resource { reason, errno })
    } else {
        Ok(Verdict::Unavailable {
            reason,
            errno: Some(errno),
        })
    }
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}

// A unique name for the probe file, not a time.
#[allow(clippy::disallowed_methods)]
pub(crate) fn probe(dir: &Path) -> Result<Verdict, IoStartError> {
    let mut ring = match IoUring::new(8) {
        Ok(r) => r,
        Err(e) => return classify("io_uring_setup", &e),
    };
    let mut p = Probe::new();
    if let Err(e) = ring.submitter().register_probe(&mut p) {
        return classify("io_uring_register(PROBE)", &e);
    }
    let missing: Vec<&str> = REQUIRED
        .iter()
        .filter(|(code, _)| !p.is_supported(*code))
        .map(|(_, n)| *n)
        .collect();
    if !missing.is_empty() {
        return Ok(Verdict::Unavailable {
            reason: format!(
                "io_uring lacks opcodes {}: kernel too old (Linux >= 5.11 needed); \
                 set io_backend=sync",
                missing.join(", ")
            ),
            errno: Some(libc::EOPNOTSUPP),
        });
    }
    let ftruncate = p.is_supported(opcode::Ftruncate::CODE);

    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let path: PathBuf = dir.join(format!(".strata-io-probe-{}-{nanos}", std::process::id()));
    let dir_err = |source| IoStartError::ProbeDir {
        path: path.clone(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(dir_err)?;
    let mut read_buf = vec![0u8; PROBE_DATA.len()];
    let result = run_probe_ops(&mut ring, file.as_raw_fd(), &mut read_buf);
    drop(file);
    let removed = std::fs::remove_file(&path);
    let verdict = match result {
        Ok(()) if read_buf == PROBE_DATA => Verdict::Available {
            reason: format!(
                "io_uring probe ok (kernel {}; ftruncate: {})",
                kernel_release(),
                if ftruncate {
                    "native"
                } else {
                    "fallback on the driver thread"
                }
            ),
            ftruncate,
        },
        Ok(()) => Verdict::Unavailable {
            reason: "io_uring probe read back different bytes than it wrote; set io_backend=sync"
                .to_owned(),
            errno: None,
        },
        Err(ProbeFailure::Op(stage, e)) => classify(stage, &e)?,
        Err(ProbeFailure::Wedged(e)) => {
            // An op may still be in flight: leak the ring and the buffer rather than risk the
            // kernel writing into freed memory.
            std::mem::forget(ring);
            std::mem::forget(read_buf);
            classify("io_uring_enter", &e)?
        }
    };
    removed.map_err(dir_err)?;
    Ok(verdict)
}

enum ProbeFailure {
    /// The op completed with an error.
    Op(&'static str, std::io::Error),
    /// `io_uring_enter` itself failed; the op may still be in flight.
    Wedged(std::io::Error),
}

/// Submits one entry and waits for its completion; returns `cqe.res` (>= 0).
fn run_one(
    ring: &mut IoUring,
    stage: &'static str,
    entry: io_uring::squeue::Entry,
) -> Result<u32, ProbeFailure> {
    // SAFETY: every entry built by `run_probe_ops` points at `PROBE_DATA` (static), at an iovec
    // and a buffer owned by the caller that outlive this call, or at an open fd; we wait below
    // for the completion before returning, and if waiting fails the caller leaks the ring and
    // the buffer (`ProbeFailure::Wedged`). The ring was just created with 8 free slots.
    let pushed = unsafe { ring.submission().push(&entry) };
    if pushed.is_err() {
        return Err(ProbeFailure::Op(
            stage,
            std::io::Error::other("submission queue full"),
        ));
    }
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(ProbeFailure::Wedged(e)),
        }
        let cqe: Option<cqueue::Entry> = ring.completion().next();
        if let Some(cqe) = cqe {
            let res = cqe.result();
            return if res < 0 {
                Err(ProbeFailure::Op(
                    stage,
                    std::io::Error::from_raw_os_error(-res),
                ))
            } else {
                Ok(res as u32)
            };
        }
    }
}

fn run_probe_ops(ring: &mut IoUring, fd: i32, read_buf: &mut [u8]) -> Result<(), ProbeFailure> {
    let iov = [libc::iovec {
        iov_base: PROBE_DATA.as_ptr().cast_mut().cast(),
        iov_len: PROBE_DATA.len(),
    }];
    let write = opcode::Writev::new(types::Fd(fd), iov.as_ptr(), 1)
        .offset(0)
        .build();
    let n = run_one(ring, "io_uring probe WRITEV", write)?;
    if n as usize != PROBE_DATA.len() {
        return Err(ProbeFailure::Op(
            "io_uring probe WRITEV",
            std::io::Error::other(format!("short write of {n} bytes")),
        ));
    }
    let sync = opcode::Fsync::new(types::Fd(fd))
        .flags(types::FsyncFlags::DATASYNC)
        .build();
    run_one(ring, "io_uring probe FSYNC", sync)?;
    let read = opcode::Read::new(types::Fd(fd), read_buf.as_mut_ptr(), read_buf.len() as u32)
        .offset(0)
        .build();
    let n = run_one(ring, "io_uring probe READ", read)?;
    if n as usize != read_buf.len() {
        return Err(ProbeFailure::Op(
            "io_uring probe READ",
            std::io::Error::other(format!("short read of {n} bytes")),
        ));
    }
    Ok(())
}

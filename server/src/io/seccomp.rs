//! Test support: run a child process under a seccomp filter that makes `io_uring_setup` fail
//! with EPERM, exactly what Docker >= 25 and containerd >= 2.0 default profiles do, so tests can
//! prove that `io_backend = auto` falls back to plain syscalls and `io_uring` refuses to start.
//!
//! Only for tests (feature `test-util`); the filter is installed between fork and exec of the
//! child, never in the test process itself.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// `__NR_io_uring_setup`, the same number on every Linux architecture that has io_uring.
const IO_URING_SETUP: u32 = 425;

// Classic BPF opcodes and seccomp constants (linux/filter.h, linux/seccomp.h, linux/audit.h).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JEQ_K: u16 = 0x15;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_DATA_NR: u32 = 0;
const SECCOMP_DATA_ARCH: u32 = 4;
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

fn statement(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Makes `command` run with `io_uring_setup` denied (EPERM); every other syscall is allowed.
pub fn deny_io_uring(command: &mut Command) -> &mut Command {
    let program = [
        // A syscall from another ABI than the one this filter was written for: allow it.
        statement(BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARCH),
        statement(BPF_JMP_JEQ_K, 1, 0, AUDIT_ARCH),
        statement(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        statement(BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_NR),
        statement(BPF_JMP_JEQ_K, 0, 1, IO_URING_SETUP),
        statement(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | libc::EPERM as u32),
        statement(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ];
    // SAFETY: the closure runs in the forked child before exec and only makes two prctl
    // syscalls (async-signal-safe) on a filter array that lives on the closure's own stack copy;
    // the kernel copies the program during PR_SET_SECCOMP, so nothing dangles afterwards.
    unsafe {
        command.pre_exec(move || {
            let filter = libc::sock_fprog {
                len: program.len() as u16,
                filter: program.as_ptr().cast_mut(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &filter as *const libc::sock_fprog,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

//! Free space of the file system that holds a path (`statvfs`), so readiness can tell when a
//! full data disk has room again without waiting for a write to succeed.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Bytes an unprivileged process may still write on the file system holding `path`.
///
/// # Errors
/// When `path` does not exist or holds a NUL byte.
pub fn available_bytes(path: &Path) -> std::io::Result<u64> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a valid NUL-terminated string that outlives the call, and `stats`
    // points to writable memory of the right size; statvfs only writes into it.
    let result = unsafe { libc::statvfs(c_path.as_ptr(), stats.as_mut_ptr()) };
    if result != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it initialized the whole struct.
    let stats = unsafe { stats.assume_init() };
    Ok(stats.f_bavail.saturating_mul(stats.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_grows_when_a_file_is_removed_and_a_missing_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let before = available_bytes(dir.path()).unwrap();
        assert!(before > 0);
        assert!(available_bytes(&dir.path().join("missing")).is_err());
        assert!(available_bytes(Path::new("bad\0path")).is_err());
    }
}

//! The generator keeps the heap memory it frees, so building a request does not fault in
//! fresh pages.
//!
//! Every produce request is a new body (its records carry their own ids), 1 MiB in the
//! largest bench rows. glibc serves blocks that large with a private `mmap` and unmaps them on
//! free, or trims its heap, so each request touched never-used pages; on a VM that reports free
//! memory to its host that is a host fault per page. Measured on one producer of 1 MiB raw
//! `acks=all` requests: about 490 minor faults per request in the generator and a third of a
//! core of system time, and its request rate went from 466 to 803 per second with the heap
//! kept (issue 15's closing note). That time sits inside every measured latency, against the
//! no-storage server as against Strata, so it is the generator's cost, not the server's.

/// Blocks up to this size come from the heap rather than their own `mmap` (glibc's maximum).
const LARGEST_HEAP_BLOCK: i32 = 32 << 20;

/// Turns off glibc's trimming and per-block mapping of large blocks. Must run before any
/// thread starts. True when glibc took both settings; false on other C libraries.
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only sets allocator parameters, here known parameter numbers with
        // in-range values, and runs before any other thread could be allocating.
        let mapped = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, LARGEST_HEAP_BLOCK) };
        // SAFETY: as above.
        let trimmed = unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX) };
        mapped == 1 && trimmed == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn glibc_accepts_both_settings() {
        assert_eq!(
            super::keep_freed_memory(),
            cfg!(all(target_os = "linux", target_env = "gnu"))
        );
    }
}

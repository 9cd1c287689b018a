//! Read-only shared memory maps of segment files, for zero-copy fetches.
//!
//! A [`MappedFile`] is `mmap(PROT_READ, MAP_SHARED)` wrapped in [`Bytes::from_owner`], so
//! [`MappedFile::slice`] hands out refcounted views of the page cache that hyper can `writev`
//! straight to the socket. The mapping lives until the last slice is dropped, even if the file is
//! unlinked or the `MappedFile` dropped.
//!
//! Touching a non-resident page blocks the calling thread on a page fault: callers check
//! [`MappedFile::is_resident`] first and serve cold ranges through `Io::read_at` instead.
//!
//! Touching a mapped page beyond the file's current end raises SIGBUS. The active segment is
//! mapped once at its maximum size; callers only ever slice bytes below the high-water mark,
//! which have been written (and the file is never truncated below a live slice).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use memmap2::{Advice, Mmap, MmapOptions};

use super::{IoError, IoFile};

/// Owner handed to `Bytes::from_owner`; shares the mapping with [`MappedFile`].
struct MapOwner(Arc<Mmap>);

impl AsRef<[u8]> for MapOwner {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// A read-only shared mapping of (a prefix of) a file.
#[derive(Clone)]
pub struct MappedFile {
    map: Option<Arc<Mmap>>,
    bytes: Bytes,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers and has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

impl MappedFile {
    /// Maps `len` bytes (may exceed the current file length: the active segment is mapped at its
    /// maximum size once; callers never touch bytes beyond what was written). `len == 0` gives an
    /// empty mapping without a syscall.
    pub fn map(file: &IoFile, len: usize) -> Result<MappedFile, IoError> {
        if len == 0 {
            return Ok(MappedFile {
                map: None,
                bytes: Bytes::new(),
            });
        }
        // SAFETY: the mapping is read-only and shared. Strata only appends to segments and never
        // modifies or truncates bytes below the high-water mark while they may be sliced, and
        // callers never read beyond what was written (which would SIGBUS past EOF). Concurrent
        // appends beyond the read range do not alias any `&[u8]` handed out.
        let mmap = unsafe { MmapOptions::new().len(len).map(file.std_file()) }
            .map_err(|e| IoError::new("mmap", file.path(), e))?;
        let map = Arc::new(mmap);
        let bytes = Bytes::from_owner(MapOwner(map.clone()));
        Ok(MappedFile {
            map: Some(map),
            bytes,
        })
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes
    }

    /// A refcounted slice of the mapping (no copy); keeps the mapping alive even after the file
    /// is unlinked. Panics if `range` is out of bounds (like slicing).
    pub fn slice(&self, range: Range<usize>) -> Bytes {
        self.bytes.slice(range)
    }

    /// `mincore(2)` over the pages covering `range`: true iff all are resident. An empty range is
    /// resident; a range outside the mapping is not.
    pub fn is_resident(&self, range: Range<usize>) -> bool {
        self.resident_pages(range)
            .is_some_and(|(resident, pages)| resident == pages)
    }

    /// `mincore(2)` over the pages covering `range`: how many of them are resident, and how many
    /// there are. `None` for a range outside the mapping (or a failed call).
    pub fn resident_pages(&self, range: Range<usize>) -> Option<(usize, usize)> {
        if range.start >= range.end {
            return Some((0, 0));
        }
        if range.end > self.len() {
            return None;
        }
        let page = page_size();
        let start = range.start / page * page;
        let len = range.end - start;
        let pages = len.div_ceil(page);
        let mut vec = vec![0u8; pages];
        // SAFETY: `start` is page aligned and lies inside the mapping (whose base is page
        // aligned), `[start, start + len)` is within the mapping's length, and `vec` has one byte
        // per page of that range, as mincore(2) requires. The mapping is alive (`self.bytes`).
        let rc = unsafe {
            libc::mincore(
                self.bytes.as_ptr().add(start).cast_mut().cast(),
                len,
                vec.as_mut_ptr(),
            )
        };
        (rc == 0).then(|| (vec.iter().filter(|v| *v & 1 == 1).count(), pages))
    }

    /// `madvise(MADV_SEQUENTIAL)`: aggressive read-ahead for cold sequential fetches.
    pub fn advise_sequential(&self) {
        if let Some(map) = &self.map
            && let Err(e) = map.advise(Advice::Sequential)
        {
            tracing::debug!(error = %e, "madvise(MADV_SEQUENTIAL) failed");
        }
    }

    /// `madvise(MADV_WILLNEED)` over `range`: start read-ahead of a cold range.
    pub fn advise_willneed(&self, range: Range<usize>) {
        let Some(map) = &self.map else { return };
        if range.start >= range.end || range.end > self.len() {
            return;
        }
        let page = page_size();
        let start = range.start / page * page;
        if let Err(e) = map.advise_range(Advice::WillNeed, start, range.end - start) {
            tracing::debug!(error = %e, "madvise(MADV_WILLNEED) failed");
        }
    }
}

/// Bytes of the file at `path` in the page cache, in whole pages: what tests of the page-cache
/// window check. Maps the file without touching it, so looking changes nothing.
///
/// # Errors
/// The file cannot be opened, mapped or asked.
#[cfg(any(test, feature = "test-util"))]
pub fn resident_bytes(path: &std::path::Path) -> Result<u64, IoError> {
    let file = std::fs::File::open(path).map_err(|e| IoError::new("open", path, e))?;
    let len = file
        .metadata()
        .map_err(|e| IoError::new("stat", path, e))?
        .len();
    let len = usize::try_from(len)
        .map_err(|_| IoError::new("mmap", path, std::io::Error::from_raw_os_error(libc::EFBIG)))?;
    let map = MappedFile::map(&IoFile::new(file, path), len)?;
    let (resident, _) = map
        .resident_pages(0..len)
        .ok_or_else(|| IoError::new("mincore", path, std::io::Error::last_os_error()))?;
    Ok((resident * page_size()) as u64)
}

/// `posix_fadvise(POSIX_FADV_DONTNEED)` over the whole file: drops its clean pages from the page
/// cache (sync the file first, dirty pages are not dropped). Per-file and safe in CI, for
/// cold-read tests.
pub fn evict_page_cache(file: &IoFile) -> Result<(), IoError> {
    // A length of 0 means "to the end of the file".
    super::sync::drop_cached(file.std_file(), 0, 0)
        .map_err(|error| IoError::new("posix_fadvise", file.path(), error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write_file(dir: &std::path::Path, name: &str, data: &[u8]) -> IoFile {
        let path = dir.join(name);
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(data).unwrap();
        IoFile::new(std::fs::File::open(&path).unwrap(), path)
    }

    #[test]
    fn slice_points_into_the_mapping_and_copy_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..3 * 4096u32).map(|i| (i % 251) as u8).collect();
        let file = write_file(dir.path(), "seg", &data);
        let map = MappedFile::map(&file, data.len()).unwrap();
        assert_eq!(map.len(), data.len());
        assert_eq!(map.as_slice(), &data[..]);
        let base = map.as_slice().as_ptr() as usize;
        let inside = |p: *const u8| (base..base + map.len()).contains(&(p as usize));

        let s = map.slice(100..5000);
        assert_eq!(&s[..], &data[100..5000]);
        assert!(inside(s.as_ptr()), "slice must point into the mapping");
        assert_eq!(s.as_ptr() as usize, base + 100);

        // Negative control: a copy lives elsewhere, so the check above can fail.
        let copy = Bytes::copy_from_slice(&map.as_slice()[100..5000]);
        assert_eq!(copy, s);
        assert!(
            !inside(copy.as_ptr()),
            "a copy must not point into the mapping"
        );
    }

    #[test]
    fn map_longer_than_file_and_empty() {
        let dir = tempfile::tempdir().unwrap();
        let file = write_file(dir.path(), "active", b"hello");
        let map = MappedFile::map(&file, 1 << 20).unwrap();
        assert_eq!(map.len(), 1 << 20);
        assert_eq!(&map.slice(0..5)[..], b"hello");
        // Appends after mapping are visible through the shared mapping.
        file.std_file().sync_all().unwrap();
        {
            use std::os::unix::fs::FileExt;
            let w = std::fs::OpenOptions::new()
                .write(true)
                .open(file.path())
                .unwrap();
            w.write_at(b" world", 5).unwrap();
        }
        assert_eq!(&map.slice(0..11)[..], b"hello world");
        map.advise_sequential();
        map.advise_willneed(0..11);

        let empty = MappedFile::map(&file, 0).unwrap();
        assert!(empty.is_empty());
        assert!(empty.is_resident(0..0));
        assert_eq!(empty.slice(0..0).len(), 0);
        empty.advise_sequential();
    }

    #[test]
    fn resident_after_write_and_maybe_not_after_dontneed() {
        let dir = tempfile::tempdir().unwrap();
        let data = vec![7u8; 64 * 1024];
        let file = write_file(dir.path(), "seg", &data);
        let map = MappedFile::map(&file, data.len()).unwrap();
        assert!(
            map.is_resident(0..data.len()),
            "pages just written are in the page cache"
        );
        assert!(map.is_resident(10..20));
        assert!(map.is_resident(5..5));
        assert!(
            !map.is_resident(0..data.len() + 1),
            "out of range is not resident"
        );

        file.std_file().sync_all().unwrap();
        evict_page_cache(&file).unwrap();
        // Usually false now, but the kernel may keep or re-read pages: don't assert it.
        let after = map.is_resident(0..data.len());
        eprintln!("resident after POSIX_FADV_DONTNEED: {after}");
        // Touching the pages brings them back.
        assert_eq!(
            map.as_slice().iter().map(|&b| b as u64).sum::<u64>(),
            7 * 64 * 1024
        );
        assert!(map.is_resident(0..data.len()));
    }

    #[test]
    fn slice_survives_unlink_and_map_drop() {
        let dir = tempfile::tempdir().unwrap();
        let file = write_file(dir.path(), "seg", b"persistent bytes");
        let map = MappedFile::map(&file, 16).unwrap();
        let s = map.slice(0..16);
        drop(map);
        std::fs::remove_file(file.path()).unwrap();
        drop(file);
        assert_eq!(&s[..], b"persistent bytes");
        let s2 = s.slice(11..16);
        drop(s);
        assert_eq!(&s2[..], b"bytes");
    }

    #[test]
    fn map_errors_carry_op_and_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wo");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path);
        let file = IoFile::new(f.unwrap(), &path);
        let err = MappedFile::map(&file, 4096).unwrap_err();
        assert_eq!(err.op, "mmap");
        assert_eq!(err.path, path);
        assert_eq!(err.raw_os_error(), Some(libc::EACCES));
    }
}

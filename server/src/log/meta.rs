//! The partition metadata file `partition.json`: log start offset, recovery point and the
//! clean-shutdown marker.
//!
//! It is replaced atomically (write a temp file, fdatasync it, rename over the old one, fsync the
//! directory), so after a crash it is either the old or the new version, never a torn mix.
//! `clean_shutdown` is set only by an orderly close and cleared as soon as the partition opens,
//! so a crash at any later moment leads to a recovery scan on the next start.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::io::{Io, IoError, OpenMode};

/// File name inside the partition directory.
pub const META_FILE: &str = "partition.json";

/// What the partition remembers across restarts besides its segment files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionMeta {
    /// Format version of this file; bumped on incompatible change.
    pub version: u32,
    /// First offset readers may ask for (advanced by retention and delete-records).
    pub log_start_offset: u64,
    /// Every segment with a base offset below this is fully durable and has synced indexes.
    pub recovery_point: u64,
    /// True only between an orderly close and the next open.
    pub clean_shutdown: bool,
    /// The log end offset an orderly close left (version 2; absent otherwise). After a clean
    /// stop every offset below it was acknowledged, so recovery keeps damage at the end of the
    /// active segment in place instead of cutting it as if it were a torn write (ADR 0005).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_end_offset: Option<u64>,
}

/// The version this build writes.
pub const META_VERSION: u32 = 2;
/// The oldest version this build reads: version 1 lacks `log_end_offset`.
pub const META_VERSION_MIN: u32 = 1;

/// Why the metadata file could not be read or written.
#[derive(Debug, Error)]
pub enum MetaError {
    /// Disk I/O failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The file exists but is not valid metadata.
    #[error("partition metadata {path} is invalid: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// Reads `partition.json`; `Ok(None)` when it does not exist yet.
///
/// # Errors
/// I/O errors other than "not found", and files that do not parse.
pub async fn read_meta(io: &Io, dir: &Path) -> Result<Option<PartitionMeta>, MetaError> {
    let path = dir.join(META_FILE);
    let file = match io.open(&path, OpenMode::Read).await {
        Ok(file) => file,
        Err(error) if error.source.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    let len = io.file_len(&file).await?;
    let len = usize::try_from(len).map_err(|_| invalid(&path, "file too large"))?;
    if len > 64 * 1024 {
        return Err(invalid(&path, "file larger than 64 KiB"));
    }
    let bytes = io.read_at(&file, 0, len).await?;
    let meta: PartitionMeta =
        serde_json::from_slice(&bytes).map_err(|error| invalid(&path, &error.to_string()))?;
    if !(META_VERSION_MIN..=META_VERSION).contains(&meta.version) {
        return Err(invalid(
            &path,
            &format!("unsupported version {}", meta.version),
        ));
    }
    Ok(Some(meta))
}

/// Atomically replaces `partition.json`.
///
/// # Errors
/// Any I/O error; the old file stays in place when this fails.
pub async fn write_meta(io: &Io, dir: &Path, meta: &PartitionMeta) -> Result<(), MetaError> {
    let body = serde_json::to_vec_pretty(meta)
        .map_err(|error| invalid(&dir.join(META_FILE), &format!("cannot serialize: {error}")))?;
    write_file_atomically(io, dir, META_FILE, Bytes::from(body)).await?;
    Ok(())
}

/// Replaces `dir/name` with `body` so that a crash leaves the old or the new file, never a mix:
/// write `name.tmp`, fdatasync it, rename it over `name`, fsync the directory.
///
/// # Errors
/// Any I/O error; the old file stays in place when this fails.
pub async fn write_file_atomically(
    io: &Io,
    dir: &Path,
    name: &str,
    body: Bytes,
) -> Result<(), IoError> {
    let temp = dir.join(format!("{name}.tmp"));
    let file = io.open(&temp, OpenMode::CreateOrOpen).await?;
    io.set_len(&file, 0).await?;
    io.write_at_and_sync(&file, 0, vec![body]).await?;
    drop(file);
    io.rename(&temp, &dir.join(name)).await?;
    io.sync_dir(dir).await
}

fn invalid(path: &Path, reason: &str) -> MetaError {
    MetaError::Invalid {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}
/// Removes a file; one that is already gone is fine (repairs and swaps repeat steps after a
/// crash).
///
/// # Errors
/// I/O errors other than "not found".
pub async fn remove_if_exists(io: &Io, path: &Path) -> Result<(), IoError> {
    match io.remove_file(path).await {
        Err(error) if error.source.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

//! The security files (API keys, ACLs): small JSON documents replaced whole, so a crash or a
//! concurrent reader sees the old file or the new one, never half of one. They are written by
//! the server's admin API and by `strata auth create-key` while the server may be running, and
//! read back when they change.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Why a security file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SecurityFileError {
    /// Reading, writing or renaming failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not the JSON this version writes.
    #[error("{path} is not a valid security file: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// The OS random source failed while making a token.
    #[error("cannot generate a token: {0}")]
    Random(String),
}

/// What identifies a file's content without reading it: a change of either means reload.
pub type Stamp = Option<(SystemTime, u64)>;

/// The file's stamp; `None` when it does not exist.
pub fn stamp(path: &Path) -> Stamp {
    fs::metadata(path)
        .ok()
        .and_then(|m| m.modified().ok().map(|t| (t, m.len())))
}

/// The parsed file, or `T::default()` when there is no file yet.
///
/// # Errors
/// Unreadable or invalid files.
pub fn read_json<T: DeserializeOwned + Default>(path: &Path) -> Result<T, SecurityFileError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(T::default()),
        Err(source) => {
            return Err(SecurityFileError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    serde_json::from_str(&text).map_err(|error| SecurityFileError::Invalid {
        path: path.to_path_buf(),
        message: error.to_string(),
    })
}

/// Replaces the file with `value` as JSON: a synced temporary file renamed over it, then the
/// directory synced. Readable by the owner only: the key file names every principal.
///
/// # Errors
/// I/O failures; the old file is then unchanged.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), SecurityFileError> {
    let io = |source| SecurityFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io)?;
    let body = serde_json::to_vec_pretty(value).map_err(|e| io(std::io::Error::other(e)))?;
    let temp = path.with_extension("tmp");
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temp).map_err(io)?;
    file.write_all(&body).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    fs::rename(&temp, path).map_err(io)?;
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io)
}

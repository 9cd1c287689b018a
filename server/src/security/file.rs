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

/// The on-disk shape of a file of records (API keys, ACL rules): a version and a list.
pub trait RecordFileFormat: Serialize + DeserializeOwned + Default {
    /// One record.
    type Item: Clone;
    /// The version this server writes and reads.
    const VERSION: u32;
    /// The version the file says it has.
    fn version(&self) -> u32;
    /// The records.
    fn into_items(self) -> Vec<Self::Item>;
    /// A file holding `items` at [`Self::VERSION`].
    fn from_items(items: Vec<Self::Item>) -> Self;
    /// Whether a record read from the file can be used.
    ///
    /// # Errors
    /// What is wrong with it.
    fn check(_item: &Self::Item) -> Result<(), String> {
        Ok(())
    }
}

/// A file of records shared with other processes (the CLI, an editor): read at open, read
/// again when its stamp changes, changed by read-modify-write of the current file so a change
/// made elsewhere is kept.
#[derive(Debug)]
pub struct RecordFile<F: RecordFileFormat> {
    path: PathBuf,
    loaded: parking_lot::RwLock<(Vec<F::Item>, Stamp)>,
    /// Serializes read-modify-write within this process.
    writing: parking_lot::Mutex<()>,
}

impl<F: RecordFileFormat> RecordFile<F> {
    /// The records in `path` (none if the file does not exist yet).
    ///
    /// # Errors
    /// An unreadable or invalid file.
    pub fn open(path: &Path) -> Result<Self, SecurityFileError> {
        let loaded = Self::load(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            loaded: parking_lot::RwLock::new(loaded),
            writing: parking_lot::Mutex::new(()),
        })
    }

    /// The records as loaded.
    pub fn items(&self) -> parking_lot::MappedRwLockReadGuard<'_, [F::Item]> {
        parking_lot::RwLockReadGuard::map(self.loaded.read(), |(items, _)| items.as_slice())
    }

    /// Reads the file again if it changed since the last read; `true` when it did.
    ///
    /// # Errors
    /// An unreadable or invalid file: the records loaded before stay in force.
    pub fn reload_if_changed(&self) -> Result<bool, SecurityFileError> {
        if stamp(&self.path) == self.loaded.read().1 {
            return Ok(false);
        }
        let loaded = Self::load(&self.path)?;
        *self.loaded.write() = loaded;
        Ok(true)
    }

    /// Applies `change` to the file's current content and writes it back when `change` says
    /// it changed something; returns what `change` returned.
    ///
    /// # Errors
    /// Reading or writing failed; the file is then unchanged.
    pub fn update(
        &self,
        change: impl FnOnce(&mut Vec<F::Item>) -> bool,
    ) -> Result<bool, SecurityFileError> {
        let _writing = self.writing.lock();
        let (mut items, _) = Self::load(&self.path)?;
        let changed = change(&mut items);
        if changed {
            write_json(&self.path, &F::from_items(items.clone()))?;
        }
        *self.loaded.write() = (items, stamp(&self.path));
        Ok(changed)
    }

    fn load(path: &Path) -> Result<(Vec<F::Item>, Stamp), SecurityFileError> {
        let invalid = |message: String| SecurityFileError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let before = stamp(path);
        let file: F = read_json(path)?;
        if file.version() != F::VERSION {
            return Err(invalid(format!(
                "version {} (this server reads {})",
                file.version(),
                F::VERSION
            )));
        }
        let items = file.into_items();
        for item in &items {
            F::check(item).map_err(invalid)?;
        }
        Ok((items, before))
    }
}

/// How often files shared with other processes are checked for changes.
pub const RELOAD_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Calls `reload` every [`RELOAD_INTERVAL`] and at once on SIGHUP, forever: the one loop behind
/// every file the server reloads while running (API keys, ACLs, TLS certificates). `what` names
/// the files in the log.
pub async fn reload_on_change(what: &'static str, mut reload: impl FnMut()) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => Some(hangup),
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGHUP; {what} reload by polling only");
            None
        }
    };
    let mut ticker = tokio::time::interval(RELOAD_INTERVAL);
    loop {
        match &mut hangup {
            Some(hangup) => {
                tokio::select! {
                    _ = ticker.tick() => {}
                    _ = hangup.recv() => tracing::info!("SIGHUP: reloading {what}"),
                }
            }
            None => {
                ticker.tick().await;
            }
        }
        reload();
    }
}

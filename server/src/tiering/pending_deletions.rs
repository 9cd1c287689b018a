//! Deleted topics whose objects may still be in the bucket, one empty file per topic name in
//! `<data dir>/deleting/`, written (and synced) before the topic leaves the catalog and removed
//! only once its objects are gone.
//!
//! Without them a crash in between forgot the removal: the objects stayed for good, a restore
//! could bring the deleted topic back from its `topic.json`, and a new topic of the same name
//! adopted the old manifest, which served the old records at the new topic's offsets and let
//! local retention drop new records as if they were uploaded.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

/// File names are this prefix and the topic name (at most 249 bytes), which keeps `.` and `..`
/// names impossible and the whole within the 255-byte limit.
const PREFIX: &str = "t-";

/// The set of pending removals, on disk or (for tests of the tiering layer alone) in memory.
#[derive(Debug)]
pub struct PendingDeletions {
    dir: Option<PathBuf>,
    names: Mutex<BTreeSet<String>>,
}

impl PendingDeletions {
    /// Opens `dir`, creating it, and reads the removals a previous run left pending.
    ///
    /// # Errors
    /// The directory cannot be created or read.
    pub fn open(dir: PathBuf) -> io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        let mut names = BTreeSet::new();
        for entry in std::fs::read_dir(&dir)? {
            let file = entry?.file_name();
            if let Some(name) = file.to_str().and_then(|f| f.strip_prefix(PREFIX)) {
                names.insert(name.to_string());
            }
        }
        Ok(Self {
            dir: Some(dir),
            names: Mutex::new(names),
        })
    }

    /// A set kept in memory only: nothing survives the process.
    pub fn in_memory() -> Self {
        Self {
            dir: None,
            names: Mutex::new(BTreeSet::new()),
        }
    }

    /// Records that `topic`'s objects are to be removed, durably before it returns. Returns
    /// false when a removal of that name was already pending (a delete that then fails must
    /// not forget the earlier one).
    ///
    /// # Errors
    /// The file or its directory cannot be written or synced.
    pub fn mark(&self, topic: &str) -> io::Result<bool> {
        if self.names.lock().contains(topic) {
            return Ok(false);
        }
        if let Some(dir) = &self.dir {
            let file = std::fs::File::create(dir.join(format!("{PREFIX}{topic}")))?;
            file.sync_all()?;
            sync_dir(dir)?;
        }
        Ok(self.names.lock().insert(topic.to_string()))
    }

    /// Forgets `topic`'s removal: done, or the delete that marked it did not happen.
    ///
    /// # Errors
    /// The file cannot be removed or its directory synced; the removal then stays pending (and
    /// is done again after a restart, which finds nothing left to remove).
    pub fn unmark(&self, topic: &str) -> io::Result<()> {
        if let Some(dir) = &self.dir {
            match std::fs::remove_file(dir.join(format!("{PREFIX}{topic}"))) {
                Ok(()) => sync_dir(dir)?,
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
        }
        self.names.lock().remove(topic);
        Ok(())
    }

    /// Whether a removal of `topic` is pending.
    pub fn contains(&self, topic: &str) -> bool {
        self.names.lock().contains(topic)
    }

    /// Every pending removal, by topic name.
    pub fn names(&self) -> Vec<String> {
        self.names.lock().iter().cloned().collect()
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_survive_a_reopen_until_unmarked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deleting");
        let pending = PendingDeletions::open(path.clone()).unwrap();
        assert!(pending.mark("orders").unwrap());
        assert!(!pending.mark("orders").unwrap(), "already pending");
        let longest = "x".repeat(249);
        assert!(pending.mark(&longest).unwrap());
        let reopened = PendingDeletions::open(path.clone()).unwrap();
        assert_eq!(reopened.names(), [String::from("orders"), longest.clone()]);
        reopened.unmark("orders").unwrap();
        reopened.unmark("never-marked").unwrap();
        assert!(!reopened.contains("orders"));
        let again = PendingDeletions::open(path).unwrap();
        assert_eq!(again.names(), [longest]);
    }
}

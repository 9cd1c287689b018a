//! API keys: which token hashes belong to which principal, in one JSON file. The server reads it
//! at start and again whenever it changes (a revocation made by another process takes effect on
//! the next request after the reload, one second at most, or at once on SIGHUP); keys made or
//! revoked through the admin API take effect at once.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Principal;
use super::file::{RecordFile, RecordFileFormat, SecurityFileError};
use super::token;

/// One key as stored: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredKey {
    /// Names the key in listings and revocations.
    pub id: String,
    /// Who the key authenticates.
    pub principal: String,
    /// Hex SHA-256 of the token.
    pub sha256: String,
    /// When the key was made (ms since the epoch).
    pub created_at_ms: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    version: u32,
    keys: Vec<StoredKey>,
}

impl Default for KeyFile {
    fn default() -> Self {
        Self::from_items(Vec::new())
    }
}

impl RecordFileFormat for KeyFile {
    type Item = StoredKey;
    const VERSION: u32 = 1;

    fn version(&self) -> u32 {
        self.version
    }

    fn into_items(self) -> Vec<StoredKey> {
        self.keys
    }

    fn from_items(keys: Vec<StoredKey>) -> Self {
        Self {
            version: Self::VERSION,
            keys,
        }
    }
}

/// The API keys the server accepts.
#[derive(Debug)]
pub struct KeyStore {
    file: RecordFile<KeyFile>,
}

impl KeyStore {
    /// The keys in `path` (none if the file does not exist yet).
    ///
    /// # Errors
    /// An unreadable or invalid file.
    pub fn open(path: &Path) -> Result<Self, SecurityFileError> {
        Ok(Self {
            file: RecordFile::open(path)?,
        })
    }

    /// The principal a presented token belongs to. Every stored hash is compared in constant
    /// time, so the answer's timing says nothing about which keys exist.
    pub fn authenticate(&self, presented: &str) -> Option<Principal> {
        let hash = token::hash(presented);
        let mut found = None;
        for key in self.file.items().iter() {
            if token::hashes_equal(&key.sha256, &hash) {
                found = Some(Principal::new(key.principal.clone()));
            }
        }
        found
    }

    /// Every key, without secrets.
    pub fn list(&self) -> Vec<StoredKey> {
        self.file.items().to_vec()
    }

    /// Makes a key for `principal`, stores its hash and returns the token (shown once).
    ///
    /// # Errors
    /// The random source or the file write failed; nothing is stored then.
    pub fn create(
        &self,
        principal: &str,
        now_ms: i64,
    ) -> Result<(StoredKey, String), SecurityFileError> {
        let (token, sha256) =
            token::generate().map_err(|e| SecurityFileError::Random(e.to_string()))?;
        let id = token::key_id().map_err(|e| SecurityFileError::Random(e.to_string()))?;
        let key = StoredKey {
            id,
            principal: principal.to_string(),
            sha256,
            created_at_ms: now_ms,
        };
        self.file.update(|keys| {
            keys.push(key.clone());
            true
        })?;
        Ok((key, token))
    }

    /// Removes the key `id`; `false` when no such key exists.
    ///
    /// # Errors
    /// The file write failed; the key then still works.
    pub fn revoke(&self, id: &str) -> Result<bool, SecurityFileError> {
        self.file.update(|keys| {
            let before = keys.len();
            keys.retain(|k| k.id != id);
            keys.len() != before
        })
    }

    /// Reads the file again if it changed since the last read; `true` when it did.
    ///
    /// # Errors
    /// An unreadable or invalid file: the keys loaded before stay in force.
    pub fn reload_if_changed(&self) -> Result<bool, SecurityFileError> {
        self.file.reload_if_changed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_key_authenticates_until_revoked_and_only_its_hash_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let store = KeyStore::open(&path).unwrap();
        let (key, token) = store.create("alice", 7).unwrap();
        assert_eq!(store.authenticate(&token), Some(Principal::new("alice")));
        assert_eq!(store.authenticate("strata_nope"), None);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&token) && text.contains(&key.sha256));
        assert!(store.revoke(&key.id).unwrap());
        assert!(!store.revoke(&key.id).unwrap());
        assert_eq!(store.authenticate(&token), None);
    }

    #[test]
    fn another_process_writing_the_file_is_seen_after_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let server = KeyStore::open(&path).unwrap();
        let cli = KeyStore::open(&path).unwrap();
        let (key, token) = cli.create("bob", 1).unwrap();
        assert_eq!(server.authenticate(&token), None);
        assert!(server.reload_if_changed().unwrap());
        assert_eq!(server.authenticate(&token), Some(Principal::new("bob")));
        assert!(!server.reload_if_changed().unwrap());
        // A key made by the server keeps the one made elsewhere.
        let (_, other) = server.create("carol", 2).unwrap();
        assert!(server.authenticate(&token).is_some() && server.authenticate(&other).is_some());
        cli.revoke(&key.id).unwrap();
        server.reload_if_changed().unwrap();
        assert_eq!(server.authenticate(&token), None);
    }

    #[test]
    fn a_broken_file_keeps_the_keys_loaded_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let store = KeyStore::open(&path).unwrap();
        let (_, token) = store.create("alice", 1).unwrap();
        std::fs::write(&path, "{not json").unwrap();
        assert!(store.reload_if_changed().is_err());
        assert!(store.authenticate(&token).is_some());
        assert!(KeyStore::open(&path).is_err());
    }
}

//! Issues idempotent-producer identities: an id that is never reused and an epoch that grows
//! each time a client re-initializes the same id, fencing its older sessions.
//!
//! The registry is one small JSON file, `producers.json`, replaced atomically on every change;
//! an id is handed out only after that file is durable, so a restart never issues it again.
//!
//! Each id belongs to the principal it was issued to. Bumping its epoch fences every session
//! that holds it, so only that principal (or a super user) may: ids are issued in sequence and
//! easy to guess, and any caller could otherwise break another tenant's idempotent pipeline.
//! Ids issued without authentication, or before owners were recorded, have no owner and stay
//! open to anyone, as before: handing them to the first principal that asks would let one
//! tenant claim every old id, and a server that turns authentication on would lock them all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::io::{Io, IoError};
use crate::log::meta::write_file_atomically;

const FILE: &str = "producers.json";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    next_producer_id: i64,
    epochs: BTreeMap<i64, i16>,
    /// The principal each id was issued to.
    #[serde(default)]
    owners: BTreeMap<i64, String>,
}

/// Who asks for an identity: the principal, and whether it may bump any id.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    /// The caller's principal; `None` without authentication, where nobody owns an id.
    pub principal: Option<&'a str>,
    /// A super user (or a server without authentication) may bump any id.
    pub may_bump_any: bool,
}

/// Why a producer identity could not be issued.
#[derive(Debug, Error)]
pub enum ProducerRegistryError {
    /// The id was never issued by this server.
    #[error("producer id {0} is unknown")]
    Unknown(i64),
    /// The id was issued to another principal.
    #[error("producer id {id} belongs to another principal; request a new id without producer_id")]
    NotOwner {
        /// The id.
        id: i64,
    },
    /// The epoch cannot grow any further.
    #[error("producer id {0} has exhausted its epochs; request a new id")]
    EpochExhausted(i64),
    /// The registry file could not be written.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The registry file is unreadable.
    #[error("producer registry {path} is invalid: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The server's producer ids and their current epochs.
#[derive(Debug)]
pub struct ProducerRegistry {
    dir: PathBuf,
    io: Io,
    state: tokio::sync::Mutex<RegistryFile>,
}

impl ProducerRegistry {
    /// Loads `producers.json` from `dir` (or starts empty).
    ///
    /// # Errors
    /// An unreadable file.
    pub fn open(dir: &Path, io: Io) -> Result<ProducerRegistry, ProducerRegistryError> {
        let path = dir.join(FILE);
        let state = match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|e| ProducerRegistryError::Corrupt {
                    path: path.clone(),
                    reason: e.to_string(),
                })?
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => RegistryFile::default(),
            Err(error) => {
                return Err(ProducerRegistryError::Corrupt {
                    path,
                    reason: error.to_string(),
                });
            }
        };
        Ok(ProducerRegistry {
            dir: dir.to_path_buf(),
            io,
            state: tokio::sync::Mutex::new(state),
        })
    }

    /// A new id at epoch 0, or, for an existing id, the same id with the next epoch.
    ///
    /// # Errors
    /// An unknown id, one issued to another principal, an exhausted epoch, or the registry
    /// could not be persisted.
    pub async fn init(
        &self,
        existing: Option<i64>,
        requester: Requester<'_>,
    ) -> Result<(i64, i16), ProducerRegistryError> {
        let mut state = self.state.lock().await;
        let mut next = state.clone();
        let identity = match existing {
            None => {
                let id = next.next_producer_id;
                next.next_producer_id += 1;
                next.epochs.insert(id, 0);
                if let Some(principal) = requester.principal {
                    next.owners.insert(id, principal.to_string());
                }
                (id, 0)
            }
            Some(id) => {
                let epoch = *next
                    .epochs
                    .get(&id)
                    .ok_or(ProducerRegistryError::Unknown(id))?;
                let owner = next.owners.get(&id).map(String::as_str);
                if owner.is_some_and(|o| Some(o) != requester.principal) && !requester.may_bump_any
                {
                    return Err(ProducerRegistryError::NotOwner { id });
                }
                let bumped = epoch
                    .checked_add(1)
                    .ok_or(ProducerRegistryError::EpochExhausted(id))?;
                next.epochs.insert(id, bumped);
                (id, bumped)
            }
        };
        let body = serde_json::to_vec(&next).map_err(|e| ProducerRegistryError::Corrupt {
            path: self.dir.join(FILE),
            reason: e.to_string(),
        })?;
        write_file_atomically(&self.io, &self.dir, FILE, Bytes::from(body)).await?;
        *state = next;
        Ok(identity)
    }

    /// The current epoch of an issued id, and whether `requester` may write with it: an id
    /// with an owner is that principal's (or a super user's) alone, as for bumping it.
    pub async fn epoch_for(
        &self,
        producer_id: i64,
        requester: Requester<'_>,
    ) -> Option<(i16, bool)> {
        let state = self.state.lock().await;
        let epoch = *state.epochs.get(&producer_id)?;
        let owner = state.owners.get(&producer_id).map(String::as_str);
        let allowed =
            requester.may_bump_any || owner.is_none_or(|owner| Some(owner) == requester.principal);
        Some((epoch, allowed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::IoBackendChoice;

    #[tokio::test]
    async fn ids_are_never_reused_and_epochs_grow_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let (io, _) = Io::start(IoBackendChoice::Sync, dir.path()).unwrap();
        let registry = ProducerRegistry::open(dir.path(), io.clone()).unwrap();
        assert_eq!(registry.init(None, ALICE).await.unwrap(), (0, 0));
        assert_eq!(registry.init(None, ALICE).await.unwrap(), (1, 0));
        assert_eq!(registry.init(Some(0), ALICE).await.unwrap(), (0, 1));
        assert!(matches!(
            registry.init(Some(9), ALICE).await,
            Err(ProducerRegistryError::Unknown(9))
        ));
        drop(registry);
        let registry = ProducerRegistry::open(dir.path(), io).unwrap();
        assert_eq!(registry.init(None, ALICE).await.unwrap(), (2, 0));
        assert_eq!(
            registry.epoch_for(0, ALICE).await.map(|(epoch, _)| epoch),
            Some(1)
        );
    }

    const ALICE: Requester<'static> = Requester {
        principal: Some("alice"),
        may_bump_any: false,
    };
    const MALLORY: Requester<'static> = Requester {
        principal: Some("mallory"),
        may_bump_any: false,
    };

    #[tokio::test]
    async fn only_the_owner_or_a_super_user_bumps_an_id_even_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let (io, _) = Io::start(IoBackendChoice::Sync, dir.path()).unwrap();
        let registry = ProducerRegistry::open(dir.path(), io.clone()).unwrap();
        assert_eq!(registry.init(None, ALICE).await.unwrap(), (0, 0));
        drop(registry);
        let registry = ProducerRegistry::open(dir.path(), io).unwrap();
        assert!(matches!(
            registry.init(Some(0), MALLORY).await,
            Err(ProducerRegistryError::NotOwner { id: 0 })
        ));
        assert_eq!(
            registry.epoch_for(0, ALICE).await.map(|(epoch, _)| epoch),
            Some(0),
            "a refused bump fences nobody"
        );
        let admin = Requester {
            principal: Some("admin"),
            may_bump_any: true,
        };
        assert_eq!(registry.init(Some(0), admin).await.unwrap(), (0, 1));
        assert_eq!(registry.init(Some(0), ALICE).await.unwrap(), (0, 2));
    }

    #[tokio::test]
    async fn an_id_without_an_owner_stays_open_to_anyone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(FILE),
            br#"{"next_producer_id":1,"epochs":{"0":3}}"#,
        )
        .unwrap();
        let (io, _) = Io::start(IoBackendChoice::Sync, dir.path()).unwrap();
        let registry = ProducerRegistry::open(dir.path(), io).unwrap();
        // Issued before owners were recorded: nobody claims it by bumping it first.
        assert_eq!(registry.init(Some(0), ALICE).await.unwrap(), (0, 4));
        assert_eq!(registry.init(Some(0), MALLORY).await.unwrap(), (0, 5));
        // Issued without authentication: no owner either.
        let anonymous = Requester {
            principal: None,
            may_bump_any: true,
        };
        assert_eq!(registry.init(None, anonymous).await.unwrap(), (1, 0));
        assert_eq!(registry.init(Some(1), MALLORY).await.unwrap(), (1, 1));
    }
}

//! Snapshots of state kept outside the topics (`groups/offsets.note`, `security/acls.note`):
//! JSON in a C2SP signed note signed with the archive key, rewritten when the state changes,
//! read back by a restore. State, not history, so they are signed rather than logged.

use std::collections::BTreeMap;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use serde::Serialize;
use serde::de::DeserializeOwned;
use strata_tiering::tlog::note::note_text;

use super::restore::RestoreError;
use super::{Tiering, TieringError};

/// A snapshot's JSON document.
pub trait Snapshot: Serialize + DeserializeOwned {
    /// The format this server writes and reads.
    const FORMAT: u32;
    /// The format a document says it has.
    fn format(&self) -> u32;
}

/// The text of each snapshot as this process last wrote it (or found it needless to write).
pub(crate) type Published = tokio::sync::Mutex<BTreeMap<String, String>>;

/// The note text of `snapshot`: pretty JSON has no blank line, so it is a valid signed-note
/// text once it ends with a newline.
fn text_of<T: Snapshot>(snapshot: &T) -> String {
    serde_json::to_string_pretty(snapshot).unwrap_or_default() + "\n"
}

impl Tiering {
    /// Signs and writes `snapshot` at `key`, unless this process last wrote (or settled) the
    /// same text there.
    ///
    /// # Errors
    /// Store failures; the next sweep tries again.
    pub(crate) async fn publish_snapshot<T: Snapshot>(
        &self,
        key: &Path,
        snapshot: &T,
    ) -> Result<(), TieringError> {
        let text = text_of(snapshot);
        let mut published = self.published_snapshots.lock().await;
        if published.get(key.as_ref()) == Some(&text) {
            return Ok(());
        }
        let note = self.signer.sign_note(&text);
        self.objects
            .put(key, PutPayload::from(Bytes::from(note)))
            .await?;
        published.insert(key.to_string(), text);
        Ok(())
    }

    /// Records that the bucket needs no object at `key` while the state equals `snapshot`
    /// (nothing was ever there), so later sweeps neither write nor look again.
    pub(crate) async fn settle_snapshot<T: Snapshot>(&self, key: &Path, snapshot: &T) {
        self.published_snapshots
            .lock()
            .await
            .insert(key.to_string(), text_of(snapshot));
    }

    /// Whether this process wrote or settled a snapshot at `key`.
    pub(crate) async fn snapshot_known(&self, key: &Path) -> bool {
        self.published_snapshots
            .lock()
            .await
            .contains_key(key.as_ref())
    }

    /// The snapshot at `key`, when the bucket has one.
    ///
    /// # Errors
    /// Store failures, or an object that is not a signed note of this format (`Invalid`).
    pub(crate) async fn read_snapshot<T: Snapshot>(
        &self,
        key: &Path,
    ) -> Result<Option<T>, RestoreError> {
        let Some(body) = strata_tiering::store::get_if_exists(self.objects.as_ref(), key)
            .await
            .map_err(TieringError::from)?
        else {
            return Ok(None);
        };
        let invalid = |reason: String| RestoreError::Invalid {
            key: key.to_string(),
            reason,
        };
        let note = String::from_utf8_lossy(&body);
        let text = note_text(&note).ok_or_else(|| invalid("not a signed note".to_string()))?;
        let snapshot: T = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if snapshot.format() != T::FORMAT {
            return Err(invalid(format!("unsupported format {}", snapshot.format())));
        }
        Ok(Some(snapshot))
    }
}

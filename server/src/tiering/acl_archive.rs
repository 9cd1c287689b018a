//! ACL rules in the bucket. Rules managed through `/v1/acls` live in a local file; a restore
//! from the bucket alone would bring back every topic but leave its readers and writers
//! without their rights. Each sweep writes `security/acls.note` when the rules changed (once
//! any rule ever existed): the rules as JSON in a note signed with the archive key, which
//! `strata verify` checks. A server starting without a local ACL file takes them from there.
//! Rules from the config file are not archived: they come back with the config.

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use strata_tiering::layout;
use strata_tiering::tlog::note::note_text;

use super::restore::RestoreError;
use super::{Tiering, TieringError};
use crate::security::acl::AclRule;

/// Format of the JSON in `security/acls.note`.
pub const ACLS_FORMAT: u32 = 1;

/// The JSON text of `security/acls.note`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclsSnapshot {
    /// [`ACLS_FORMAT`].
    pub format: u32,
    /// The rules, in the order the local file holds them.
    pub acls: Vec<AclRule>,
}

impl Tiering {
    /// Writes `security/acls.note` when `rules` differ from what this process last wrote. A
    /// server that never had a rule writes nothing.
    ///
    /// # Errors
    /// Store failures; the next sweep tries again.
    pub async fn publish_acls(&self, rules: Vec<AclRule>) -> Result<(), TieringError> {
        let mut published = self.published_acls.lock().await;
        if published.is_none() && rules.is_empty() {
            let key = layout::acls_file();
            if strata_tiering::store::get_if_exists(self.objects.as_ref(), &key)
                .await?
                .is_none()
            {
                return Ok(());
            }
        }
        let snapshot = AclsSnapshot {
            format: ACLS_FORMAT,
            acls: rules,
        };
        // Pretty JSON has no blank line, so it is a valid signed-note text once it ends with a
        // newline.
        let text = serde_json::to_string_pretty(&snapshot).unwrap_or_default() + "\n";
        if published.as_deref() == Some(text.as_str()) {
            return Ok(());
        }
        let note = self.signer.sign_note(&text);
        self.objects
            .put(&layout::acls_file(), PutPayload::from(Bytes::from(note)))
            .await?;
        *published = Some(text);
        Ok(())
    }

    /// The archived rules, when the bucket has them.
    ///
    /// # Errors
    /// Store failures, or an unreadable snapshot (`Invalid`).
    pub async fn archived_acls(&self) -> Result<Option<Vec<AclRule>>, RestoreError> {
        let key = layout::acls_file();
        let Some(body) = strata_tiering::store::get_if_exists(self.objects.as_ref(), &key)
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
        let snapshot: AclsSnapshot =
            serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if snapshot.format != ACLS_FORMAT {
            return Err(invalid(format!("unsupported format {}", snapshot.format)));
        }
        for rule in &snapshot.acls {
            rule.check().map_err(|reason| invalid(reason.clone()))?;
        }
        Ok(Some(snapshot.acls))
    }
}

//! ACL rules in the bucket. Rules managed through `/v1/acls` live in a local file; a restore
//! from the bucket alone would bring back every topic but leave its readers and writers
//! without their rights. Each sweep writes `security/acls.note` when the rules changed (once
//! any rule ever existed): the rules as JSON in a note signed with the archive key, which
//! `strata verify` checks. A server starting without a local ACL file takes them from there.
//! Rules from the config file are not archived: they come back with the config.

use serde::{Deserialize, Serialize};
use strata_tiering::layout;

use super::restore::RestoreError;
use super::signed_snapshot::Snapshot;
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

impl Snapshot for AclsSnapshot {
    const FORMAT: u32 = ACLS_FORMAT;

    fn format(&self) -> u32 {
        self.format
    }
}

impl Tiering {
    /// Writes `security/acls.note` when `rules` differ from what this process last wrote. A
    /// server that never had a rule writes nothing (and looks for the object once).
    ///
    /// # Errors
    /// Store failures; the next sweep tries again.
    pub async fn publish_acls(&self, rules: Vec<AclRule>) -> Result<(), TieringError> {
        let key = layout::acls_file();
        let snapshot = AclsSnapshot {
            format: ACLS_FORMAT,
            acls: rules,
        };
        if snapshot.acls.is_empty()
            && !self.snapshot_known(&key).await
            && strata_tiering::store::get_if_exists(self.objects.as_ref(), &key)
                .await?
                .is_none()
        {
            self.settle_snapshot(&key, &snapshot).await;
            return Ok(());
        }
        self.publish_snapshot(&key, &snapshot).await
    }

    /// The archived rules, when the bucket has them.
    ///
    /// # Errors
    /// Store failures, or an unreadable snapshot or rule (`Invalid`).
    pub async fn archived_acls(&self) -> Result<Option<Vec<AclRule>>, RestoreError> {
        let key = layout::acls_file();
        let Some(snapshot) = self.read_snapshot::<AclsSnapshot>(&key).await? else {
            return Ok(None);
        };
        for rule in &snapshot.acls {
            rule.check().map_err(|reason| RestoreError::Invalid {
                key: key.to_string(),
                reason,
            })?;
        }
        Ok(Some(snapshot.acls))
    }
}

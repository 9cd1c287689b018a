//! Managing access: API keys and ACLs. Every operation here needs `admin` on the cluster (super
//! users have it), so a principal cannot grant itself more than an admin gave it.

use super::Broker;
use super::error::LookupError;
use crate::security::acl::AclRule;
use crate::security::file::SecurityFileError;
use crate::security::keys::StoredKey;
use crate::security::{Caller, Operation, Resource};

/// Why a key or ACL operation failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The caller is not an admin.
    #[error(transparent)]
    Forbidden(#[from] LookupError),
    /// A principal name or rule that cannot be stored.
    #[error("{0}")]
    Invalid(String),
    /// No key has this id.
    #[error("no API key has id {0}")]
    KeyNotFound(String),
    /// The key or ACL file could not be written; nothing changed.
    #[error(transparent)]
    Storage(#[from] SecurityFileError),
}

/// Both sets of ACL rules.
#[derive(Debug, Clone)]
pub struct AclListing {
    /// Rules managed through the API.
    pub managed: Vec<AclRule>,
    /// Rules fixed by the config file.
    pub configured: Vec<AclRule>,
}

impl Broker {
    fn require_admin(&self, caller: &Caller) -> Result<(), AdminError> {
        Ok(self.authorize(caller, Operation::Admin, Resource::cluster())?)
    }

    /// Makes an API key for `principal`; returns it with its token, which is never shown again.
    ///
    /// # Errors
    /// Not an admin, a bad principal name, the key file write failed.
    pub fn create_key(
        &self,
        caller: &Caller,
        principal: &str,
    ) -> Result<(StoredKey, String), AdminError> {
        self.require_admin(caller)?;
        crate::security::check_principal(principal).map_err(AdminError::Invalid)?;
        Ok(self.keys.create(principal, self.clock.now_ms())?)
    }

    /// Every key, without secrets.
    ///
    /// # Errors
    /// Not an admin.
    pub fn list_keys(&self, caller: &Caller) -> Result<Vec<StoredKey>, AdminError> {
        self.require_admin(caller)?;
        Ok(self.keys.list())
    }

    /// Revokes key `id`: the next request with its token is refused.
    ///
    /// # Errors
    /// Not an admin, no such key, the key file write failed.
    pub fn revoke_key(&self, caller: &Caller, id: &str) -> Result<(), AdminError> {
        self.require_admin(caller)?;
        if self.keys.revoke(id)? {
            Ok(())
        } else {
            Err(AdminError::KeyNotFound(id.to_string()))
        }
    }

    /// Every ACL rule.
    ///
    /// # Errors
    /// Not an admin.
    pub fn list_acls(&self, caller: &Caller) -> Result<AclListing, AdminError> {
        self.require_admin(caller)?;
        Ok(AclListing {
            managed: self.authorizer.stored_rules(),
            configured: self.authorizer.config_rules().to_vec(),
        })
    }

    /// Adds a rule; `false` when the same rule exists already.
    ///
    /// # Errors
    /// Not an admin, a malformed rule, the ACL file write failed.
    pub fn add_acl(&self, caller: &Caller, rule: AclRule) -> Result<bool, AdminError> {
        self.require_admin(caller)?;
        rule.check_new().map_err(AdminError::Invalid)?;
        Ok(self.authorizer.add(rule)?)
    }

    /// Removes the managed rules equal to `rule`; how many there were.
    ///
    /// # Errors
    /// Not an admin, the ACL file write failed.
    pub fn remove_acl(&self, caller: &Caller, rule: &AclRule) -> Result<usize, AdminError> {
        self.require_admin(caller)?;
        Ok(self.authorizer.remove(rule)?)
    }
}

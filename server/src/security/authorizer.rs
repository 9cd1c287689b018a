//! The one access decision: super users may do everything; everyone else what the ACLs allow
//! (rules from the config file, fixed for the process's life, plus rules managed through
//! `/v1/acls`, stored in a file that is reloaded when it changes). With authentication off,
//! every caller is `anonymous` and everything is allowed.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::acl::{AclRule, Decision, decide};
use super::file::{RecordFile, RecordFileFormat, SecurityFileError};
use super::{Caller, Denied, Operation, Resource};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AclFile {
    version: u32,
    acls: Vec<AclRule>,
}

impl Default for AclFile {
    fn default() -> Self {
        Self::from_items(Vec::new())
    }
}

impl RecordFileFormat for AclFile {
    type Item = AclRule;
    const VERSION: u32 = 1;

    fn version(&self) -> u32 {
        self.version
    }

    fn into_items(self) -> Vec<AclRule> {
        self.acls
    }

    fn from_items(acls: Vec<AclRule>) -> Self {
        Self {
            version: Self::VERSION,
            acls,
        }
    }

    fn check(rule: &AclRule) -> Result<(), String> {
        rule.check()
    }
}

/// Who may do what.
#[derive(Debug)]
pub struct Authorizer {
    enforcing: bool,
    super_users: Vec<String>,
    config_rules: Vec<AclRule>,
    stored: RecordFile<AclFile>,
}

impl Authorizer {
    /// The authorizer over the rules in `path` (none if it does not exist yet) and `config_rules`;
    /// `enforcing` false allows everything (authentication off), while the rules can still be
    /// managed for when it is turned on.
    ///
    /// # Errors
    /// An unreadable or invalid ACL file.
    pub fn open(
        path: &Path,
        enforcing: bool,
        super_users: Vec<String>,
        config_rules: Vec<AclRule>,
    ) -> Result<Self, SecurityFileError> {
        Ok(Self {
            enforcing,
            super_users,
            config_rules,
            stored: RecordFile::open(path)?,
        })
    }

    /// Writes `rules` as the API-managed rule file at `path`, for a server restored from the
    /// bucket; only when no such file exists, so local rules always win.
    ///
    /// # Errors
    /// The file could not be written.
    pub fn seed(path: &Path, rules: Vec<AclRule>) -> Result<bool, SecurityFileError> {
        if path.exists() {
            return Ok(false);
        }
        super::file::write_json(path, &AclFile::from_items(rules))?;
        Ok(true)
    }

    /// Whether checks are made at all (authentication on).
    pub fn is_enforcing(&self) -> bool {
        self.enforcing
    }

    /// Whether `caller` may act on what belongs to other principals: a super user, or anyone
    /// when authentication is off.
    pub fn may_act_for_anyone(&self, caller: &Caller) -> bool {
        !self.enforcing
            || self
                .super_users
                .iter()
                .any(|u| u == caller.principal().as_str())
    }

    /// Whether `caller` may do `operation` on `resource`.
    pub fn allows(&self, caller: &Caller, operation: Operation, resource: &Resource) -> bool {
        if self.may_act_for_anyone(caller) {
            return true;
        }
        let stored = self.stored.items();
        let rules = self.config_rules.iter().chain(stored.iter());
        decide(rules, caller.principal(), operation, resource) == Decision::Allowed
    }

    /// `Ok` when allowed, else what was denied.
    ///
    /// # Errors
    /// [`Denied`] naming the operation and resource.
    pub fn check(
        &self,
        caller: &Caller,
        operation: Operation,
        resource: Resource,
    ) -> Result<(), Denied> {
        if self.allows(caller, operation, &resource) {
            Ok(())
        } else {
            Err(Denied {
                principal: caller.principal().clone(),
                operation,
                resource,
            })
        }
    }

    /// The rules from the config file.
    pub fn config_rules(&self) -> &[AclRule] {
        &self.config_rules
    }

    /// The rules managed through the API.
    pub fn stored_rules(&self) -> Vec<AclRule> {
        self.stored.items().to_vec()
    }

    /// Adds `rule`; `false` when an identical rule exists already.
    ///
    /// # Errors
    /// The file write failed; nothing changed then.
    pub fn add(&self, rule: AclRule) -> Result<bool, SecurityFileError> {
        self.stored.update(|rules| {
            if rules.contains(&rule) {
                false
            } else {
                rules.push(rule);
                true
            }
        })
    }

    /// Removes every stored rule equal to `rule`; how many were removed.
    ///
    /// # Errors
    /// The file write failed; nothing changed then.
    pub fn remove(&self, rule: &AclRule) -> Result<usize, SecurityFileError> {
        let mut removed = 0;
        self.stored.update(|rules| {
            let before = rules.len();
            rules.retain(|r| r != rule);
            removed = before - rules.len();
            removed > 0
        })?;
        Ok(removed)
    }

    /// Reads the ACL file again if it changed; `true` when it did.
    ///
    /// # Errors
    /// An unreadable or invalid file: the rules loaded before stay in force.
    pub fn reload_if_changed(&self) -> Result<bool, SecurityFileError> {
        self.stored.reload_if_changed()
    }
}

//! The one access decision: super users may do everything; everyone else what the ACLs allow
//! (rules from the config file, fixed for the process's life, plus rules managed through
//! `/v1/acls`, stored in a file that is reloaded when it changes). With authentication off,
//! every caller is `anonymous` and everything is allowed.

use std::path::{Path, PathBuf};

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use super::acl::{AclRule, Decision, decide};
use super::file::{SecurityFileError, Stamp, read_json, stamp, write_json};
use super::{Caller, Denied, Operation, Resource};

const ACL_FILE_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AclFile {
    version: u32,
    acls: Vec<AclRule>,
}

impl Default for AclFile {
    fn default() -> Self {
        Self {
            version: ACL_FILE_VERSION,
            acls: Vec::new(),
        }
    }
}

/// Who may do what.
#[derive(Debug)]
pub struct Authorizer {
    enforcing: bool,
    super_users: Vec<String>,
    config_rules: Vec<AclRule>,
    path: PathBuf,
    stored: RwLock<(Vec<AclRule>, Stamp)>,
    writing: Mutex<()>,
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
        let stored = load(path)?;
        Ok(Self {
            enforcing,
            super_users,
            config_rules,
            path: path.to_path_buf(),
            stored: RwLock::new(stored),
            writing: Mutex::new(()),
        })
    }

    /// Whether checks are made at all (authentication on).
    pub fn is_enforcing(&self) -> bool {
        self.enforcing
    }

    /// Whether `caller` may do `operation` on `resource`.
    pub fn allows(&self, caller: &Caller, operation: Operation, resource: &Resource) -> bool {
        if !self.enforcing
            || self
                .super_users
                .iter()
                .any(|u| u == caller.principal().as_str())
        {
            return true;
        }
        let stored = self.stored.read();
        let rules = self.config_rules.iter().chain(stored.0.iter());
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
        self.stored.read().0.clone()
    }

    /// Adds `rule`; `false` when an identical rule exists already.
    ///
    /// # Errors
    /// The file write failed; nothing changed then.
    pub fn add(&self, rule: AclRule) -> Result<bool, SecurityFileError> {
        self.update(|rules| {
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
        self.update(|rules| {
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
        if stamp(&self.path) == self.stored.read().1 {
            return Ok(false);
        }
        let loaded = load(&self.path)?;
        *self.stored.write() = loaded;
        Ok(true)
    }

    fn update(
        &self,
        change: impl FnOnce(&mut Vec<AclRule>) -> bool,
    ) -> Result<bool, SecurityFileError> {
        let _writing = self.writing.lock();
        let (mut rules, _) = load(&self.path)?;
        if !change(&mut rules) {
            *self.stored.write() = (rules, stamp(&self.path));
            return Ok(false);
        }
        let file = AclFile {
            version: ACL_FILE_VERSION,
            acls: rules.clone(),
        };
        write_json(&self.path, &file)?;
        *self.stored.write() = (rules, stamp(&self.path));
        Ok(true)
    }
}

fn load(path: &Path) -> Result<(Vec<AclRule>, Stamp), SecurityFileError> {
    let before = stamp(path);
    let file: AclFile = read_json(path)?;
    if file.version != ACL_FILE_VERSION {
        return Err(SecurityFileError::Invalid {
            path: path.to_path_buf(),
            message: format!(
                "version {} (this server reads {ACL_FILE_VERSION})",
                file.version
            ),
        });
    }
    for rule in &file.acls {
        rule.check().map_err(|message| SecurityFileError::Invalid {
            path: path.to_path_buf(),
            message,
        })?;
    }
    Ok((file.acls, before))
}

//! Who is calling and what they may do: API keys (`keys.rs`, stored as SHA-256 hashes of
//! tokens the server generated), Kafka-style ACLs (`acl.rs`) and the one decision that
//! combines them with the super users (`authorizer.rs`). The broker asks the authorizer at the
//! start of every operation, so a transport cannot forget a check; HTTP only turns a bearer
//! token into a [`Caller`].

pub mod acl;
pub mod authorizer;
pub mod file;
pub mod keys;
pub mod quota;
pub mod streams;
pub mod tls;
pub mod token;

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use acl::{Operation, ResourceType};

/// The name of whoever calls: an API key's principal, or `anonymous` when authentication is off.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Principal(String);

impl Principal {
    /// The caller when authentication is off.
    pub fn anonymous() -> Self {
        Self("anonymous".to_string())
    }

    /// A principal named `name` (an API key's owner).
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An authenticated caller of a broker operation. Only authentication makes one, so every
/// operation that takes a `Caller` knows who asks.
#[derive(Clone, PartialEq, Eq)]
pub struct Caller {
    principal: Principal,
    /// The API key the caller authenticated with, so a stream that outlives the request can
    /// check that the key was not revoked since.
    token: Option<Arc<str>>,
}

impl fmt::Debug for Caller {
    // The token is a secret: never in a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Caller")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl Caller {
    /// A caller whose identity was established (a valid key, or authentication off).
    pub fn authenticated(principal: Principal) -> Self {
        Self {
            principal,
            token: None,
        }
    }

    /// A caller who authenticated with the API key `token`.
    pub fn with_token(principal: Principal, token: &str) -> Self {
        Self {
            principal,
            token: Some(Arc::from(token)),
        }
    }

    /// Who calls.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The API key the caller authenticated with, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }
}

/// A resource an operation acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// Topic, group or cluster.
    pub kind: ResourceType,
    /// The topic name or group id; empty for the cluster.
    pub name: String,
}

impl Resource {
    /// A topic.
    pub fn topic(name: &str) -> Self {
        Self {
            kind: ResourceType::Topic,
            name: name.to_string(),
        }
    }

    /// A consumer group.
    pub fn group(id: &str) -> Self {
        Self {
            kind: ResourceType::Group,
            name: id.to_string(),
        }
    }

    /// The cluster (keys, ACLs).
    pub fn cluster() -> Self {
        Self {
            kind: ResourceType::Cluster,
            name: String::new(),
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ResourceType::Cluster => f.write_str("cluster"),
            kind => write!(f, "{} {:?}", kind.as_str(), self.name),
        }
    }
}

/// A refused operation: names what was denied to whom, never why (which rule), so a caller
/// learns nothing about other principals' rights.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{principal} may not {} {resource}", operation.as_str())]
pub struct Denied {
    /// Who asked.
    pub principal: Principal,
    /// What they asked to do.
    pub operation: Operation,
    /// On what.
    pub resource: Resource,
}

/// Principal names are shown in logs, errors and ACLs: printable, no spaces, bounded, and not
/// the ACL wildcard.
///
/// # Errors
/// The rule that `principal` breaks.
pub fn check_principal(principal: &str) -> Result<(), String> {
    let ok = !principal.is_empty()
        && principal.len() <= 255
        && principal != "*"
        && principal.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "principal {principal:?} is not valid: use 1-255 printable ASCII characters without \
             spaces, other than \"*\" (the ACL wildcard)"
        ))
    }
}

#[cfg(test)]
mod principal_tests {
    use super::check_principal;

    /// The refusal names what was sent (it ended in `not "*"` whatever was sent, which read
    /// as if the input had been `*`).
    #[test]
    fn a_refused_principal_is_named_in_the_message() {
        for bad in ["", "a b", "é", "*", &"x".repeat(256)] {
            let message = check_principal(bad).unwrap_err();
            assert!(
                message.starts_with(&format!("principal {bad:?} ")),
                "{message}"
            );
        }
        assert!(check_principal("svc-orders@prod").is_ok());
    }
}

//! Names a client chooses, as types that can only hold valid names: a function that takes a
//! [`TopicName`] or a [`GroupId`] cannot be handed one that skipped the rules, so each rule is
//! written and checked once.

use std::fmt;

/// The longest topic name: Kafka's limit, which keeps a partition directory name
/// (`<topic>-<partition>`) within the 255-byte file name limit.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// The longest consumer group id.
pub const MAX_GROUP_ID_LEN: usize = 255;

/// A name that breaks a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} {name:?}: {reason}")]
pub struct InvalidName {
    /// What was being named ("topic name", "group id").
    pub kind: &'static str,
    /// The rejected name.
    pub name: String,
    /// The rule it breaks.
    pub reason: &'static str,
}

/// A valid topic name: Kafka's rules, 1-249 characters of `[A-Za-z0-9._-]`, not `.` or `..`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicName(String);

impl TopicName {
    /// A name a client may create; names starting with `__` are reserved for internal topics.
    ///
    /// # Errors
    /// The broken rule.
    pub fn parse(name: &str) -> Result<Self, InvalidName> {
        Self::internal(name)?;
        if name.starts_with("__") {
            return Err(invalid_topic(
                name,
                "names starting with \"__\" are reserved for internal topics",
            ));
        }
        Ok(Self(name.to_string()))
    }

    /// A name the server itself may use, internal (`__`) names included.
    ///
    /// # Errors
    /// The broken rule.
    pub fn internal(name: &str) -> Result<Self, InvalidName> {
        if name.is_empty() {
            return Err(invalid_topic(name, "must not be empty"));
        }
        if name.len() > MAX_TOPIC_NAME_LEN {
            return Err(invalid_topic(name, "must be at most 249 characters"));
        }
        if name == "." || name == ".." {
            return Err(invalid_topic(name, "must not be \".\" or \"..\""));
        }
        if !name.bytes().all(is_name_byte) {
            return Err(invalid_topic(
                name,
                "may contain only ASCII letters, digits, '.', '_' and '-'",
            ));
        }
        Ok(Self(name.to_string()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A valid consumer group id: 1-255 characters of `[A-Za-z0-9._-]`, so it is safe in paths,
/// logs and the offsets topic's keys.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupId(String);

impl GroupId {
    /// # Errors
    /// The broken rule.
    pub fn parse(group: &str) -> Result<Self, InvalidName> {
        let invalid = |reason| InvalidName {
            kind: "group id",
            name: group.to_string(),
            reason,
        };
        if group.is_empty() {
            return Err(invalid("must not be empty"));
        }
        if group.len() > MAX_GROUP_ID_LEN {
            return Err(invalid("must be at most 255 characters"));
        }
        if !group.bytes().all(is_name_byte) {
            return Err(invalid(
                "may contain only ASCII letters, digits, '.', '_' and '-'",
            ));
        }
        Ok(Self(group.to_string()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A byte topic names and group ids may hold.
pub(crate) fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'.' || byte == b'_' || byte == b'-'
}

fn invalid_topic(name: &str, reason: &'static str) -> InvalidName {
    InvalidName {
        kind: "topic name",
        name: name.to_string(),
        reason,
    }
}

impl fmt::Display for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for TopicName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for GroupId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn topic_names_follow_kafkas_rules() {
        for good in ["orders", "a.b-c_d", "X9", &"t".repeat(249)] {
            assert_eq!(
                TopicName::parse(good).map(|n| n.to_string()),
                Ok(good.to_string())
            );
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a b",
            "é",
            &"t".repeat(250),
            "__x",
        ] {
            assert!(TopicName::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(TopicName::internal("__consumer_offsets").is_ok());
        assert!(TopicName::internal("../x").is_err());
    }

    #[test]
    fn a_rejection_names_the_rule() {
        let error = TopicName::parse("__mine").err();
        assert_eq!(
            error.map(|e| e.to_string()),
            Some(
                "invalid topic name \"__mine\": names starting with \"__\" are reserved for \
                 internal topics"
                    .to_string()
            )
        );
    }

    #[test]
    fn group_ids_are_safe_names() {
        assert!(GroupId::parse("billing-v2.eu_1").is_ok());
        for bad in ["", "a b", "a/b", "ü", &"g".repeat(256)] {
            assert!(GroupId::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(GroupId::parse(&"g".repeat(255)).is_ok());
    }

    proptest! {
        /// Any accepted name is a safe single path component, whatever bytes were offered.
        #[test]
        fn accepted_names_are_safe_path_components(name in "\\PC{0,12}|[a-z._-]{0,6}") {
            if let Ok(topic) = TopicName::internal(&name) {
                prop_assert!(!topic.as_str().contains('/') && topic.as_str() != "..");
                prop_assert!(topic.as_str().is_ascii() && !topic.as_str().is_empty());
            }
            if let Ok(group) = GroupId::parse(&name) {
                prop_assert!(group.as_str().bytes().all(is_name_byte));
            }
        }
    }
}

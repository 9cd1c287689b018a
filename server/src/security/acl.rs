//! Kafka-style access control lists: a rule allows or denies one operation on the resources a
//! pattern matches (a literal name or a name prefix) to one principal or to everyone (`*`).
//! Deny wins over allow, and nothing is allowed that no rule allows. As in Kafka, a right to
//! read, write, delete or alter something implies the right to describe it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Principal, Resource};

/// What kind of thing a rule is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResourceType {
    /// A topic and its records.
    Topic,
    /// A consumer group and its offsets.
    Group,
    /// The server as a whole: API keys and ACLs.
    Cluster,
}

impl ResourceType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Topic => "topic",
            Self::Group => "group",
            Self::Cluster => "cluster",
        }
    }
}

/// How a rule's name matches resource names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PatternType {
    /// The whole name; `*` matches every name.
    Literal,
    /// Every name starting with the pattern.
    Prefix,
}

/// What a caller does to a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Fetch records; join, commit or reset a group.
    Read,
    /// Produce records.
    Write,
    /// Create a topic.
    Create,
    /// Delete a topic, its records, or a group's offsets.
    Delete,
    /// Change a topic's settings or partitions.
    Alter,
    /// See that it exists and its metadata (offsets, segments, members, lag).
    Describe,
    /// Manage API keys and ACLs (on the cluster).
    Admin,
    /// Every operation.
    All,
}

impl Operation {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Create => "create",
            Self::Delete => "delete",
            Self::Alter => "alter",
            Self::Describe => "describe",
            Self::Admin => "admin",
            Self::All => "all",
        }
    }

    /// Whether a rule for `self` covers a request for `wanted`. Deny rules cover exactly what
    /// they name (or everything for `all`); allow rules also grant describe through the rights
    /// that imply it.
    fn covers(self, wanted: Operation, permission: Permission) -> bool {
        if self == Operation::All || self == wanted {
            return true;
        }
        permission == Permission::Allow
            && wanted == Operation::Describe
            && matches!(
                self,
                Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
            )
    }
}

/// Whether a rule grants or refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Grants the operation unless a deny rule matches too.
    Allow,
    /// Refuses the operation, whatever allows it.
    Deny,
}

/// One access rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AclRule {
    /// The principal it applies to, or `*` for everyone.
    pub principal: String,
    /// Topic, group or cluster.
    pub resource_type: ResourceType,
    /// The name or prefix it matches (ignored for the cluster; `*` with `literal` is every name).
    pub resource_name: String,
    /// Literal or prefix.
    pub pattern_type: PatternType,
    /// The operation it is about.
    pub operation: Operation,
    /// Allow or deny.
    pub permission: Permission,
}

impl AclRule {
    fn applies_to(&self, principal: &Principal, resource: &Resource) -> bool {
        (self.principal == "*" || self.principal == principal.as_str())
            && self.resource_type == resource.kind
            && self.matches_name(&resource.name)
    }

    fn matches_name(&self, name: &str) -> bool {
        if self.resource_type == ResourceType::Cluster {
            return true;
        }
        match self.pattern_type {
            PatternType::Literal => self.resource_name == "*" || self.resource_name == name,
            PatternType::Prefix => name.starts_with(&self.resource_name),
        }
    }

    /// Checks that the rule can mean something before it is stored.
    ///
    /// # Errors
    /// A description of what is wrong with the rule.
    pub fn check(&self) -> Result<(), String> {
        if self.principal.is_empty() {
            return Err("principal must not be empty (use \"*\" for everyone)".into());
        }
        if self.resource_type != ResourceType::Cluster && self.resource_name.is_empty() {
            return Err("resource_name must not be empty".into());
        }
        if self.operation == Operation::Admin && self.resource_type != ResourceType::Cluster {
            return Err("admin applies to the cluster only".into());
        }
        Ok(())
    }
}

impl AclRule {
    /// [`AclRule::check`], and for a rule being added also that its name or prefix is one a
    /// topic or group can have: a rule that never matches looks like protection and is none.
    /// (Rules already stored load with `check` alone, so a server that has one still starts.
    /// Principals are not held to API keys' rule: a certificate's CN may hold spaces.)
    ///
    /// # Errors
    /// A description of what is wrong with the rule.
    pub fn check_new(&self) -> Result<(), String> {
        self.check()?;
        let (kind, max) = match self.resource_type {
            ResourceType::Cluster => return Ok(()),
            ResourceType::Topic => ("topic", crate::names::MAX_TOPIC_NAME_LEN),
            ResourceType::Group => ("group", crate::names::MAX_GROUP_ID_LEN),
        };
        let name = &self.resource_name;
        if self.pattern_type == PatternType::Literal && name == "*" {
            return Ok(());
        }
        let fits = name.len() <= max && name.bytes().all(crate::names::is_name_byte);
        if fits {
            Ok(())
        } else {
            let shown: String = name.chars().take(64).collect();
            Err(format!(
                "resource_name {shown:?} can never match a {kind}: {kind} names are at most \
                 {max} characters of [A-Za-z0-9._-]"
            ))
        }
    }
}

/// What the rules say about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// At least one allow rule and no deny rule match.
    Allowed,
    /// A deny rule matches, or no allow rule does.
    Denied,
}

/// Deny wins; without an allow, the answer is no.
pub fn decide<'a>(
    rules: impl IntoIterator<Item = &'a AclRule>,
    principal: &Principal,
    operation: Operation,
    resource: &Resource,
) -> Decision {
    let mut allowed = false;
    for rule in rules
        .into_iter()
        .filter(|r| r.applies_to(principal, resource))
    {
        if rule.operation.covers(operation, rule.permission) {
            match rule.permission {
                Permission::Deny => return Decision::Denied,
                Permission::Allow => allowed = true,
            }
        }
    }
    if allowed {
        Decision::Allowed
    } else {
        Decision::Denied
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn rule(
        principal: &str,
        name: &str,
        pattern: PatternType,
        operation: Operation,
        permission: Permission,
    ) -> AclRule {
        AclRule {
            principal: principal.into(),
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type: pattern,
            operation,
            permission,
        }
    }

    fn alice() -> Principal {
        Principal::new("alice")
    }

    #[test]
    fn nothing_is_allowed_without_a_rule() {
        let topic = Resource::topic("orders");
        assert_eq!(
            decide(&[] as &[AclRule], &alice(), Operation::Read, &topic),
            Decision::Denied
        );
    }

    #[test]
    fn literal_prefix_and_wildcard_patterns_match_as_named() {
        use Operation::Read;
        use PatternType::{Literal, Prefix};
        use Permission::Allow;
        let literal = [rule("alice", "orders", Literal, Read, Allow)];
        let prefix = [rule("alice", "pay.", Prefix, Read, Allow)];
        let every = [rule("*", "*", Literal, Read, Allow)];
        let read = |rules: &[AclRule], name: &str| {
            decide(rules, &alice(), Read, &Resource::topic(name)) == Decision::Allowed
        };
        assert!(read(&literal, "orders"));
        assert!(!read(&literal, "orders2"));
        assert!(read(&prefix, "pay.eu"));
        assert!(!read(&prefix, "pa"));
        assert!(read(&every, "anything"));
        let group = Resource::group("orders");
        assert_eq!(decide(&literal, &alice(), Read, &group), Decision::Denied);
        let bob = Principal::new("bob");
        let topic = Resource::topic("orders");
        assert_eq!(decide(&literal, &bob, Read, &topic), Decision::Denied);
    }

    #[test]
    fn deny_wins_over_allow_in_any_order() {
        use PatternType::{Literal, Prefix};
        let allow = rule("*", "pay.", Prefix, Operation::All, Permission::Allow);
        let deny = rule(
            "alice",
            "pay.secret",
            Literal,
            Operation::Read,
            Permission::Deny,
        );
        let topic = Resource::topic("pay.secret");
        for rules in [vec![allow.clone(), deny.clone()], vec![deny, allow]] {
            assert_eq!(
                decide(&rules, &alice(), Operation::Read, &topic),
                Decision::Denied
            );
            assert_eq!(
                decide(&rules, &alice(), Operation::Write, &topic),
                Decision::Allowed
            );
        }
    }

    #[test]
    fn read_write_delete_and_alter_imply_describe_but_a_deny_of_them_does_not() {
        use PatternType::Literal;
        for operation in [
            Operation::Read,
            Operation::Write,
            Operation::Delete,
            Operation::Alter,
        ] {
            let rules = [rule("alice", "t", Literal, operation, Permission::Allow)];
            let topic = Resource::topic("t");
            let describe = decide(&rules, &alice(), Operation::Describe, &topic);
            assert_eq!(describe, Decision::Allowed, "{operation:?}");
        }
        let create = [rule(
            "alice",
            "t",
            Literal,
            Operation::Create,
            Permission::Allow,
        )];
        let topic = Resource::topic("t");
        let describe = decide(&create, &alice(), Operation::Describe, &topic);
        assert_eq!(describe, Decision::Denied);
        let rules = [
            rule(
                "alice",
                "t",
                Literal,
                Operation::Describe,
                Permission::Allow,
            ),
            rule("alice", "t", Literal, Operation::Read, Permission::Deny),
        ];
        let describe = decide(&rules, &alice(), Operation::Describe, &topic);
        assert_eq!(describe, Decision::Allowed);
    }

    #[test]
    fn malformed_rules_are_refused() {
        let mut admin_on_topic = rule(
            "alice",
            "t",
            PatternType::Literal,
            Operation::Admin,
            Permission::Allow,
        );
        assert!(admin_on_topic.check().is_err());
        admin_on_topic.resource_type = ResourceType::Cluster;
        assert!(admin_on_topic.check().is_ok());
        let empty = rule(
            "",
            "t",
            PatternType::Literal,
            Operation::Read,
            Permission::Allow,
        );
        assert!(empty.check().is_err());
    }

    fn any_operation() -> impl Strategy<Value = Operation> {
        prop::sample::select(vec![
            Operation::Read,
            Operation::Write,
            Operation::Create,
            Operation::Delete,
            Operation::Alter,
            Operation::Describe,
            Operation::All,
        ])
    }

    proptest! {
        /// Adding a deny rule never turns a refusal into a grant, and adding an allow rule never
        /// turns a grant into a refusal: the decision is monotone in the rules.
        #[test]
        fn rules_are_monotone(
            names in prop::collection::vec("[ab]{1,3}", 1..6),
            operations in prop::collection::vec(any_operation(), 1..6),
            denies in prop::collection::vec(any::<bool>(), 1..6),
            wanted in any_operation(),
            target in "[ab]{1,3}",
        ) {
            let rules: Vec<AclRule> = names
                .iter()
                .zip(&operations)
                .zip(&denies)
                .map(|((name, operation), deny)| {
                    let permission = if *deny { Permission::Deny } else { Permission::Allow };
                    rule("alice", name, PatternType::Prefix, *operation, permission)
                })
                .collect();
            let topic = Resource::topic(&target);
            let before = decide(&rules, &alice(), wanted, &topic);
            let mut more = rules.clone();
            more.push(rule("alice", &target, PatternType::Literal, wanted, Permission::Deny));
            prop_assert_eq!(decide(&more, &alice(), wanted, &topic), Decision::Denied);
            let mut allowed = rules.clone();
            allowed.push(rule("alice", &target, PatternType::Literal, wanted, Permission::Allow));
            if before == Decision::Allowed {
                prop_assert_eq!(decide(&allowed, &alice(), wanted, &topic), Decision::Allowed);
            }
        }
    }
}

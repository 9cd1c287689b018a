//! Group membership over stateless HTTP: joins, heartbeats, leaves, evictions, generations and
//! partition ownership with fencing.
//!
//! Every join, leave or eviction starts a rebalance: the generation grows and a new target
//! assignment is computed. A partition moves to its new owner only after the old owner has
//! acknowledged the new generation (a heartbeat carrying it) or has been evicted, so no partition
//! ever has two owners. A member learns a new generation from any heartbeat answer; fetches and
//! commits must carry the current generation, so a zombie (evicted or stale member) can neither
//! read nor overwrite newer progress. Two liveness checks, as in Kafka: `session_timeout_ms` (no
//! heartbeat: the process is gone) and `max_poll_interval_ms` (heartbeats but no fetches: stuck).
//! Time comes from the injected clock, so tests move it instead of sleeping.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::assignment::{AssignmentStrategy, Subscriber, TopicPartition, assign};
use crate::clock::Clock;

/// Where a member starts reading a partition without a usable committed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AutoOffsetReset {
    /// The log start.
    Earliest,
    /// The high watermark (only new records).
    #[default]
    Latest,
    /// Refuse: the fetch fails with an error naming the partition.
    None,
}

/// Bounds on member timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLimits {
    /// Smallest session timeout a member may ask for.
    pub min_session_timeout_ms: u64,
    /// Largest session timeout.
    pub max_session_timeout_ms: u64,
    /// Session timeout when a join does not say (Kafka's 45 s).
    pub default_session_timeout_ms: u64,
    /// `max_poll_interval_ms` when a join does not say (Kafka's 5 min).
    pub default_max_poll_interval_ms: u64,
    /// Largest `max_poll_interval_ms`.
    pub max_poll_interval_ms: u64,
}

impl Default for GroupLimits {
    fn default() -> Self {
        Self {
            min_session_timeout_ms: 1_000,
            max_session_timeout_ms: 1_800_000,
            default_session_timeout_ms: 45_000,
            default_max_poll_interval_ms: 300_000,
            max_poll_interval_ms: 86_400_000,
        }
    }
}

/// A join request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinRequest {
    /// Topics to read.
    pub topics: Vec<String>,
    /// Session timeout (default from the limits).
    pub session_timeout_ms: Option<u64>,
    /// Longest time between fetches.
    pub max_poll_interval_ms: Option<u64>,
    /// Assignment strategy; must match the group's while it has members.
    pub strategy: Option<AssignmentStrategy>,
    /// Where to start without a usable committed offset.
    pub auto_offset_reset: AutoOffsetReset,
    /// Static membership: a restarting member with the same id keeps its partitions.
    pub instance_id: Option<String>,
}

/// A member's view after join or heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    /// The member's id.
    pub member_id: String,
    /// Current generation.
    pub generation: u32,
    /// Partitions the member owns now (it may read and commit them).
    pub assignment: Vec<TopicPartition>,
    /// Whether a rebalance is still moving partitions.
    pub rebalancing: bool,
}

/// Why a group request is refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GroupError {
    /// The member id is unknown: never joined, left, evicted, or replaced by a static rejoin.
    #[error("member {member_id} is not in group {group}: it left, was evicted or never joined")]
    UnknownMember {
        /// Group id.
        group: String,
        /// Member id.
        member_id: String,
    },
    /// The request carries an old generation.
    #[error(
        "generation {got} is stale: group {group} is at generation {current}; heartbeat to catch up"
    )]
    StaleGeneration {
        /// Group id.
        group: String,
        /// Generation in the request.
        got: u32,
        /// Current generation.
        current: u32,
    },
    /// The member does not own a partition it tried to use.
    #[error("member {member_id} does not own {topic}/{partition} in this generation")]
    NotAssigned {
        /// Member id.
        member_id: String,
        /// Topic.
        topic: String,
        /// Partition.
        partition: u32,
    },
    /// A commit without member id while the group has live members.
    #[error("group {0} has live members: commits must carry member_id and generation")]
    GroupHasMembers(String),
    /// A join with a strategy other than the group's.
    #[error(
        "group {group} uses assignment_strategy \"{}\", not \"{}\": join with the \
         group's strategy (or without one); a group takes another only once every member left",
        current.as_str(),
        requested.as_str()
    )]
    InconsistentStrategy {
        /// Group id.
        group: String,
        /// The group's strategy.
        current: AssignmentStrategy,
        /// The strategy the join asked for.
        requested: AssignmentStrategy,
    },
    /// A setting outside its bounds.
    #[error("{0}")]
    Invalid(String),
}

/// An eviction, kept for the group description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    /// Who.
    pub member_id: String,
    /// Why, in words.
    pub reason: String,
    /// When (ms since the epoch).
    pub at_ms: i64,
}

/// A member as the group description shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// Member id.
    pub member_id: String,
    /// Static instance id.
    pub instance_id: Option<String>,
    /// Subscribed topics.
    pub topics: Vec<String>,
    /// Owned partitions.
    pub assignment: Vec<TopicPartition>,
    /// Target partitions of the current generation.
    pub target: Vec<TopicPartition>,
    /// Generation the member last acknowledged.
    pub acknowledged_generation: u32,
    /// Session timeout.
    pub session_timeout_ms: u64,
    /// Max poll interval.
    pub max_poll_interval_ms: u64,
    /// Last heartbeat time.
    pub last_heartbeat_ms: i64,
    /// Last fetch time.
    pub last_poll_ms: i64,
}

/// A group as the API describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// `empty`, `rebalancing` or `stable`.
    pub state: &'static str,
    /// Current generation.
    pub generation: u32,
    /// Assignment strategy.
    pub strategy: AssignmentStrategy,
    /// Members by id.
    pub members: Vec<MemberDescription>,
    /// Recent evictions, newest last.
    pub evictions: Vec<Eviction>,
}

/// What a fetching member may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollGrant {
    /// Owned partitions with the member's position in each (`None`: start from the committed
    /// offset or `auto_offset_reset`).
    pub positions: BTreeMap<TopicPartition, Option<u64>>,
    /// The member's reset policy.
    pub auto_offset_reset: AutoOffsetReset,
    /// The generation the poll was granted in.
    pub generation: u32,
}

#[derive(Debug, Clone)]
struct Member {
    instance_id: Option<String>,
    topics: BTreeSet<String>,
    session_timeout_ms: u64,
    max_poll_interval_ms: u64,
    auto_offset_reset: AutoOffsetReset,
    last_heartbeat_ms: i64,
    last_poll_ms: i64,
    acknowledged_generation: u32,
    positions: BTreeMap<TopicPartition, u64>,
}

#[derive(Debug, Default)]
struct Group {
    generation: u32,
    strategy: AssignmentStrategy,
    members: BTreeMap<String, Member>,
    target: BTreeMap<String, Vec<TopicPartition>>,
    owners: BTreeMap<TopicPartition, String>,
    evictions: VecDeque<Eviction>,
    /// Partition counts the current assignment was computed from: when a subscribed topic
    /// grows (or goes away), the group rebalances, as Kafka's metadata refresh makes it.
    counts: BTreeMap<String, u32>,
}

const EVICTIONS_KEPT: usize = 20;

/// All groups' membership.
#[derive(Debug)]
pub struct Coordinator {
    clock: Arc<dyn Clock>,
    limits: GroupLimits,
    groups: Mutex<BTreeMap<String, Group>>,
    ids: RandomState,
    joins: std::sync::atomic::AtomicU64,
    /// Members evicted since start, by cause (for `/metrics`).
    evictions: EvictionCounts,
}

/// Members evicted since start, by cause.
#[derive(Debug, Default)]
pub struct EvictionCounts {
    /// No heartbeat within `session_timeout_ms`.
    pub session_timeout: std::sync::atomic::AtomicU64,
    /// No fetch within `max_poll_interval_ms`.
    pub max_poll_interval: std::sync::atomic::AtomicU64,
}

impl Coordinator {
    /// An empty coordinator.
    pub fn new(clock: Arc<dyn Clock>, limits: GroupLimits) -> Self {
        Self {
            clock,
            limits,
            groups: Mutex::new(BTreeMap::new()),
            ids: RandomState::new(),
            joins: std::sync::atomic::AtomicU64::new(0),
            evictions: EvictionCounts::default(),
        }
    }

    /// Members evicted since start, by cause.
    pub fn eviction_counts(&self) -> &EvictionCounts {
        &self.evictions
    }

    /// Adds a member (or replaces a static member with the same instance id) and returns its
    /// view. `counts` gives the partition count of every topic the group reads.
    ///
    /// # Errors
    /// Bad timeouts or a strategy that differs from the group's.
    pub fn join(
        &self,
        group_id: &str,
        request: &JoinRequest,
        counts: &BTreeMap<String, u32>,
    ) -> Result<MemberView, GroupError> {
        let session = request
            .session_timeout_ms
            .unwrap_or(self.limits.default_session_timeout_ms);
        if session < self.limits.min_session_timeout_ms
            || session > self.limits.max_session_timeout_ms
        {
            return Err(GroupError::Invalid(format!(
                "session_timeout_ms must be between {} and {}",
                self.limits.min_session_timeout_ms, self.limits.max_session_timeout_ms
            )));
        }
        let poll = request
            .max_poll_interval_ms
            .unwrap_or(self.limits.default_max_poll_interval_ms);
        if poll < 1 || poll > self.limits.max_poll_interval_ms {
            return Err(GroupError::Invalid(format!(
                "max_poll_interval_ms must be between 1 and {}",
                self.limits.max_poll_interval_ms
            )));
        }
        if request.topics.is_empty() {
            return Err(GroupError::Invalid("topics must not be empty".into()));
        }
        if let Some(instance) = &request.instance_id {
            check_instance_id(instance)?;
        }
        let now = self.clock.now_ms();
        let mut groups = self.groups.lock();
        let group = groups.entry(group_id.to_string()).or_default();
        if !group.members.is_empty()
            && let Some(strategy) = request.strategy
            && strategy != group.strategy
        {
            return Err(GroupError::InconsistentStrategy {
                group: group_id.into(),
                current: group.strategy,
                requested: strategy,
            });
        }
        if group.members.is_empty() {
            group.strategy = request.strategy.unwrap_or_default();
        }
        let member = Member {
            instance_id: request.instance_id.clone(),
            topics: request.topics.iter().cloned().collect(),
            session_timeout_ms: session,
            max_poll_interval_ms: poll,
            auto_offset_reset: request.auto_offset_reset,
            last_heartbeat_ms: now,
            last_poll_ms: now,
            acknowledged_generation: group.generation,
            positions: BTreeMap::new(),
        };
        let member_id = self.new_member_id(request.instance_id.as_deref());
        // Static rejoin: take over the old member's place without a rebalance.
        let previous = request.instance_id.as_ref().and_then(|instance| {
            group
                .members
                .iter()
                .find(|(_, m)| {
                    m.instance_id.as_ref() == Some(instance) && m.topics == member.topics
                })
                .map(|(id, _)| id.clone())
        });
        if let Some(old_id) = previous
            && group.members.remove(&old_id).is_some()
        {
            let target = group.target.remove(&old_id).unwrap_or_default();
            group.target.insert(member_id.clone(), target);
            for owner in group.owners.values_mut() {
                if *owner == old_id {
                    owner.clone_from(&member_id);
                }
            }
            // The new incarnation keeps the partitions but not the old one's fetch positions: it
            // never saw those records, so it starts at the committed offsets (at-least-once).
            let mut member = member;
            member.acknowledged_generation = group.generation;
            group.members.insert(member_id.clone(), member);
            return Ok(view(group, &member_id));
        }
        // The same instance with other topics: still one instance, so its old member id is
        // fenced (Kafka replaces it whatever its metadata), and the group rebalances for the
        // new subscription. Two live members must never share an instance id.
        if let Some(instance) = &request.instance_id {
            let fenced: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| m.instance_id.as_ref() == Some(instance))
                .map(|(id, _)| id.clone())
                .collect();
            for old_id in fenced {
                remove_member(group, &old_id);
            }
        }
        group.members.insert(member_id.clone(), member);
        rebalance(group, counts);
        if let Some(member) = group.members.get_mut(&member_id) {
            member.acknowledged_generation = group.generation;
        }
        claim(group, &member_id);
        Ok(view(group, &member_id))
    }

    /// Keeps a member alive and tells it the current generation and assignment. A heartbeat
    /// carrying the current generation acknowledges it: partitions the member no longer owns
    /// become free for their new owners.
    ///
    /// # Errors
    /// Unknown member, or a generation from the future.
    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        generation: u32,
    ) -> Result<MemberView, GroupError> {
        let now = self.clock.now_ms();
        let mut groups = self.groups.lock();
        let group = member_group(&mut groups, group_id, member_id)?;
        if generation > group.generation {
            return Err(GroupError::Invalid(format!(
                "generation {generation} is newer than the group's generation {}",
                group.generation
            )));
        }
        let current = group.generation;
        if let Some(member) = group.members.get_mut(member_id) {
            member.last_heartbeat_ms = now;
            if generation == current {
                member.acknowledged_generation = current;
            }
        }
        if generation == current {
            release(group, member_id);
            claim(group, member_id);
        }
        Ok(view(group, member_id))
    }

    /// Removes a member now and rebalances.
    ///
    /// # Errors
    /// Unknown member.
    pub fn leave(
        &self,
        group_id: &str,
        member_id: &str,
        counts: &BTreeMap<String, u32>,
    ) -> Result<(), GroupError> {
        let mut groups = self.groups.lock();
        let group = member_group(&mut groups, group_id, member_id)?;
        remove_member(group, member_id);
        rebalance(group, counts);
        Ok(())
    }

    /// Starts a fetch: checks generation, records the poll, and returns owned partitions with
    /// positions.
    ///
    /// # Errors
    /// Unknown member or stale generation.
    pub fn poll(
        &self,
        group_id: &str,
        member_id: &str,
        generation: u32,
    ) -> Result<PollGrant, GroupError> {
        let now = self.clock.now_ms();
        let mut groups = self.groups.lock();
        let group = member_group(&mut groups, group_id, member_id)?;
        check_generation(group, group_id, generation)?;
        claim(group, member_id);
        let owned: Vec<TopicPartition> = owned_by(group, member_id);
        // Positions of partitions still held but on their way to another member stay, so a
        // fetch with `commit=true` commits them too before the member lets them go.
        let held = held_by(group, member_id);
        let member = group
            .members
            .get_mut(member_id)
            .ok_or_else(|| unknown(group_id, member_id))?;
        member.last_poll_ms = now;
        member.last_heartbeat_ms = now;
        member.positions.retain(|tp, _| held.contains(tp));
        let positions = owned.into_iter().map(|tp| {
            let position = member.positions.get(&tp).copied();
            (tp, position)
        });
        Ok(PollGrant {
            positions: positions.collect(),
            auto_offset_reset: member.auto_offset_reset,
            generation,
        })
    }

    /// Records where a member continues after a fetch (only for partitions it still owns).
    pub fn advance(
        &self,
        group_id: &str,
        member_id: &str,
        positions: &BTreeMap<TopicPartition, u64>,
    ) {
        let mut groups = self.groups.lock();
        let Some(group) = groups.get_mut(group_id) else {
            return;
        };
        let owned = owned_by(group, member_id);
        if let Some(member) = group.members.get_mut(member_id) {
            for (tp, position) in positions {
                if owned.contains(tp) {
                    member.positions.insert(tp.clone(), *position);
                }
            }
        }
    }

    /// The member's current positions (what "commit what the last poll returned" commits).
    pub fn positions(&self, group_id: &str, member_id: &str) -> BTreeMap<TopicPartition, u64> {
        let groups = self.groups.lock();
        groups
            .get(group_id)
            .and_then(|g| g.members.get(member_id))
            .map(|m| m.positions.clone())
            .unwrap_or_default()
    }

    /// Whether a commit may proceed: with members in the group it must come from a current member
    /// that owns every partition; without members, only member-less commits are accepted.
    ///
    /// # Errors
    /// The fencing errors.
    pub fn check_commit(
        &self,
        group_id: &str,
        member: Option<(&str, u32)>,
        partitions: &[TopicPartition],
    ) -> Result<(), GroupError> {
        let mut groups = self.groups.lock();
        let Some((member_id, generation)) = member else {
            let live = groups.get(group_id).is_some_and(|g| !g.members.is_empty());
            return if live {
                Err(GroupError::GroupHasMembers(group_id.into()))
            } else {
                Ok(())
            };
        };
        let group = member_group(&mut groups, group_id, member_id)?;
        check_generation(group, group_id, generation)?;
        claim(group, member_id);
        // Partitions on their way to another member are still this one's until it
        // acknowledges: committing what it processed of them (Kafka's commit on revoke) spares
        // the next owner from reading those records again.
        let held = held_by(group, member_id);
        if let Some((topic, partition)) = partitions.iter().find(|tp| !held.contains(tp)) {
            return Err(GroupError::NotAssigned {
                member_id: member_id.into(),
                topic: topic.clone(),
                partition: *partition,
            });
        }
        Ok(())
    }

    /// Evicts members whose session or poll interval ran out, and rebalances groups whose
    /// subscribed topics changed their partition count; returns the evictions as
    /// `(group, member, reason)`.
    pub fn expire(
        &self,
        counts: impl Fn(&BTreeSet<String>) -> BTreeMap<String, u32>,
    ) -> Vec<(String, String, String)> {
        let now = self.clock.now_ms();
        let mut evicted = Vec::new();
        let mut groups = self.groups.lock();
        for (group_id, group) in groups.iter_mut() {
            let mut reasons = Vec::new();
            for (member_id, member) in &group.members {
                let silent = now.saturating_sub(member.last_heartbeat_ms);
                let idle = now.saturating_sub(member.last_poll_ms);
                if silent >= member.session_timeout_ms as i64 {
                    reasons.push((member_id.clone(), format!(
                        "session timeout: no heartbeat for {silent} ms (session_timeout_ms = {})",
                        member.session_timeout_ms
                    )));
                } else if idle >= member.max_poll_interval_ms as i64 {
                    reasons.push((member_id.clone(), format!(
                        "max_poll_interval_ms exceeded: no fetch for {idle} ms (max_poll_interval_ms = {}); \
                         the consumer is alive but stuck in its processing",
                        member.max_poll_interval_ms
                    )));
                }
            }
            let changed = {
                let current = counts(&subscribed(group));
                (current != group.counts && !group.members.is_empty()).then_some(current)
            };
            if reasons.is_empty() {
                if let Some(current) = changed {
                    tracing::info!(group = group_id.as_str(), from = ?group.counts, to = ?current,
                        "partition counts of subscribed topics changed; rebalancing");
                    rebalance(group, &current);
                }
                continue;
            }
            for (member_id, reason) in reasons {
                let counter = if reason.starts_with("session timeout") {
                    &self.evictions.session_timeout
                } else {
                    &self.evictions.max_poll_interval
                };
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                remove_member(group, &member_id);
                group.evictions.push_back(Eviction {
                    member_id: member_id.clone(),
                    reason: reason.clone(),
                    at_ms: now,
                });
                while group.evictions.len() > EVICTIONS_KEPT {
                    group.evictions.pop_front();
                }
                tracing::info!(group = group_id.as_str(), member = member_id.as_str(), %reason, "evicted member");
                evicted.push((group_id.clone(), member_id, reason));
            }
            rebalance(group, &counts(&subscribed(group)));
        }
        evicted
    }

    /// The `auto_offset_reset` that applies to each topic the group's members read (the
    /// policy of the first member, by id, that subscribes to it).
    pub fn subscriptions(&self, group_id: &str) -> BTreeMap<String, AutoOffsetReset> {
        let groups = self.groups.lock();
        let mut out = BTreeMap::new();
        if let Some(group) = groups.get(group_id) {
            for member in group.members.values() {
                for topic in &member.topics {
                    out.entry(topic.clone()).or_insert(member.auto_offset_reset);
                }
            }
        }
        out
    }

    /// Forgets every member's read position in a deleted topic: a new topic of the same name
    /// starts at offset 0, and an old position would skip its first records.
    pub fn forget_topic(&self, topic: &str) {
        let mut groups = self.groups.lock();
        for member in groups.values_mut().flat_map(|g| g.members.values_mut()) {
            member.positions.retain(|(t, _), _| t != topic);
        }
    }

    /// The group's current generation, `None` for a group without state here.
    pub fn generation(&self, group_id: &str) -> Option<u32> {
        self.groups.lock().get(group_id).map(|g| g.generation)
    }

    /// Topics read by a group's members.
    pub fn topics(&self, group_id: &str) -> BTreeSet<String> {
        let groups = self.groups.lock();
        groups
            .get(group_id)
            .map(|g| {
                g.members
                    .values()
                    .flat_map(|m| m.topics.iter().cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Number of live members.
    pub fn member_count(&self, group_id: &str) -> usize {
        self.groups
            .lock()
            .get(group_id)
            .map_or(0, |g| g.members.len())
    }

    /// Forgets a group without members (its generation and eviction history), as Kafka's
    /// DeleteGroups does; returns the number of live members when there are any, and keeps
    /// the group then. Checked and removed under one lock, so a join cannot slip in between
    /// the check and the removal.
    pub fn forget_if_empty(&self, group_id: &str) -> Result<(), usize> {
        let mut groups = self.groups.lock();
        match groups.get(group_id).map(|g| g.members.len()) {
            Some(members) if members > 0 => Err(members),
            Some(_) => {
                groups.remove(group_id);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Groups the coordinator knows (with or without members).
    pub fn groups(&self) -> Vec<String> {
        self.groups.lock().keys().cloned().collect()
    }

    /// A group's description, if the coordinator knows it.
    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        let groups = self.groups.lock();
        let group = groups.get(group_id)?;
        let members = group
            .members
            .iter()
            .map(|(id, m)| MemberDescription {
                member_id: id.clone(),
                instance_id: m.instance_id.clone(),
                topics: m.topics.iter().cloned().collect(),
                assignment: owned_by(group, id),
                target: group.target.get(id).cloned().unwrap_or_default(),
                acknowledged_generation: m.acknowledged_generation,
                session_timeout_ms: m.session_timeout_ms,
                max_poll_interval_ms: m.max_poll_interval_ms,
                last_heartbeat_ms: m.last_heartbeat_ms,
                last_poll_ms: m.last_poll_ms,
            })
            .collect();
        Some(GroupDescription {
            state: state(group),
            generation: group.generation,
            strategy: group.strategy,
            members,
            evictions: group.evictions.iter().cloned().collect(),
        })
    }

    /// A unique, hard-to-guess id: a per-process random hash of a join counter, so a client
    /// cannot impersonate another member by guessing its id.
    fn new_member_id(&self, instance: Option<&str>) -> String {
        let join = self
            .joins
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let entropy = self.ids.hash_one((join, self.clock.now_ms(), instance));
        format!("{}-{entropy:016x}{join:04x}", instance.unwrap_or("member"))
    }
}

fn unknown(group: &str, member: &str) -> GroupError {
    GroupError::UnknownMember {
        group: group.into(),
        member_id: member.into(),
    }
}

fn member_group<'a>(
    groups: &'a mut BTreeMap<String, Group>,
    group_id: &str,
    member_id: &str,
) -> Result<&'a mut Group, GroupError> {
    match groups.get_mut(group_id) {
        Some(group) if group.members.contains_key(member_id) => Ok(group),
        _ => Err(unknown(group_id, member_id)),
    }
}

fn check_generation(group: &Group, group_id: &str, generation: u32) -> Result<(), GroupError> {
    // One the group never had is a client's bug, not a stale view: said as a heartbeat says it.
    if generation > group.generation {
        return Err(GroupError::Invalid(format!(
            "generation {generation} is newer than the group's generation {}",
            group.generation
        )));
    }
    if generation != group.generation {
        return Err(GroupError::StaleGeneration {
            group: group_id.into(),
            got: generation,
            current: group.generation,
        });
    }
    Ok(())
}

fn remove_member(group: &mut Group, member_id: &str) {
    group.members.remove(member_id);
    group.target.remove(member_id);
    group.owners.retain(|_, owner| owner != member_id);
}

/// Topics some member of the group reads.
fn subscribed(group: &Group) -> BTreeSet<String> {
    group
        .members
        .values()
        .flat_map(|m| m.topics.iter().cloned())
        .collect()
}

/// New generation and target assignment; owners stay until they acknowledge or leave.
fn rebalance(group: &mut Group, counts: &BTreeMap<String, u32>) {
    group.generation += 1;
    group.counts = counts
        .iter()
        .filter(|(topic, _)| group.members.values().any(|m| m.topics.contains(*topic)))
        .map(|(topic, count)| (topic.clone(), *count))
        .collect();
    let subscribers: Vec<Subscriber> = group
        .members
        .iter()
        .map(|(id, m)| Subscriber {
            member_id: id.clone(),
            topics: m.topics.clone(),
            previous: owned_by(group, id).into_iter().collect(),
        })
        .collect();
    group.target = assign(group.strategy, &subscribers, counts);
}

/// Frees the partitions a member owns but is no longer assigned (it acknowledged losing them).
fn release(group: &mut Group, member_id: &str) {
    let target: BTreeSet<&TopicPartition> =
        group.target.get(member_id).into_iter().flatten().collect();
    let stale: Vec<TopicPartition> = group
        .owners
        .iter()
        .filter(|(tp, owner)| owner.as_str() == member_id && !target.contains(tp))
        .map(|(tp, _)| tp.clone())
        .collect();
    for tp in stale {
        group.owners.remove(&tp);
    }
}

/// Takes the member's target partitions that nobody owns, once it knows the current generation.
fn claim(group: &mut Group, member_id: &str) {
    let acknowledged = group
        .members
        .get(member_id)
        .is_some_and(|m| m.acknowledged_generation == group.generation);
    if !acknowledged {
        return;
    }
    for tp in group.target.get(member_id).into_iter().flatten() {
        group
            .owners
            .entry(tp.clone())
            .or_insert_with(|| member_id.to_string());
    }
}

/// Partitions the member holds: those it owns, and those it still owns on their way to
/// another member (until it acknowledges the generation that moves them).
fn held_by(group: &Group, member_id: &str) -> Vec<TopicPartition> {
    group
        .owners
        .iter()
        .filter(|(_, owner)| owner.as_str() == member_id)
        .map(|(tp, _)| tp.clone())
        .collect()
}

fn owned_by(group: &Group, member_id: &str) -> Vec<TopicPartition> {
    let target: BTreeSet<&TopicPartition> =
        group.target.get(member_id).into_iter().flatten().collect();
    group
        .owners
        .iter()
        .filter(|(tp, owner)| owner.as_str() == member_id && target.contains(tp))
        .map(|(tp, _)| tp.clone())
        .collect()
}

fn state(group: &Group) -> &'static str {
    if group.members.is_empty() {
        return "empty";
    }
    let settled = group
        .members
        .values()
        .all(|m| m.acknowledged_generation == group.generation)
        && group
            .target
            .iter()
            .all(|(id, tps)| tps.iter().all(|tp| group.owners.get(tp) == Some(id)));
    if settled { "stable" } else { "rebalancing" }
}

fn view(group: &Group, member_id: &str) -> MemberView {
    MemberView {
        member_id: member_id.to_string(),
        generation: group.generation,
        assignment: owned_by(group, member_id),
        rebalancing: state(group) == "rebalancing",
    }
}

/// A static instance id starts the member id, which goes into URL paths and descriptions:
/// Kafka's rule for `group.instance.id` (an empty one made member ids start with `-`, a long
/// one was echoed in every answer, and `/` made the member unreachable without encoding).
fn check_instance_id(instance: &str) -> Result<(), GroupError> {
    let ok = (1..=249).contains(&instance.len())
        && instance
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        let shown: String = instance.chars().take(64).collect();
        Err(GroupError::Invalid(format!(
            "instance_id {shown:?} is not valid: use 1-249 characters of [A-Za-z0-9._-]"
        )))
    }
}

#[cfg(test)]
mod tests;

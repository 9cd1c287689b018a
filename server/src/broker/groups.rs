//! Consumer groups over stateless requests: join, heartbeat, leave, reading as a member,
//! committing, resetting and deleting offsets, lag, and descriptions. Membership lives in the
//! [`Coordinator`](crate::groups::coordinator::Coordinator), committed offsets in the
//! [`OffsetStore`](crate::groups::offsets::OffsetStore); this module is what the operations
//! mean on top of them: which topics exist, where a member starts reading, what counts as lag.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::audit::{Disclosed, ReadOrigin};
use super::error::{FetchError, GroupOpError};
use super::fetch::{ReadRequest, first_record, read_records};
use super::reader::PartitionReader;
use super::{Broker, local_partition};
use crate::audit::entry::ReadFormat;
use crate::groups::assignment::TopicPartition;
use crate::groups::coordinator::{
    AutoOffsetReset, GroupDescription, JoinRequest, MemberView, PollGrant,
};
use crate::groups::offsets::{Commit, GroupOffsets};
use crate::log::{LogOffsets, Record};
use crate::names::GroupId;
use crate::security::{Caller, Operation, Resource};
use crate::topics::catalog::Topic;

/// Where a reset moves a group's committed offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// The log start.
    Earliest,
    /// The high watermark.
    Latest,
    /// The first record at or after this timestamp.
    Timestamp(i64),
    /// This offset (must be in the log).
    Offset(i64),
    /// The committed offset (or the log start) plus this, clamped to the log.
    Shift(i64),
}

/// A reset of a group's committed offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetRequest {
    /// The topic.
    pub topic: String,
    /// Its partitions; `None` is all of them.
    pub partitions: Option<Vec<u32>>,
    /// The target, `None` when the request named a target that needs a value and gave none.
    pub to: Option<ResetTo>,
    /// Reset even while the group has live members.
    pub force: bool,
}

/// One committed offset to store for a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRequest {
    /// The committing member and its generation; `None` for a group without live members.
    pub member: Option<(String, u32)>,
    /// The offsets.
    pub commits: Vec<Commit>,
}

/// Budgets of one member read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberReadBounds {
    /// Bytes of stored batches over all partitions.
    pub max_bytes: u64,
    /// Records over all partitions.
    pub max_records: u32,
    /// How long to wait when no partition has records.
    pub wait: Duration,
}

/// What a member read returned.
#[derive(Debug)]
pub struct MemberRecords {
    /// The records of each partition that returned any, partition by partition.
    pub records: Vec<(TopicPartition, Vec<Record>)>,
    /// The position after the read in every partition read.
    pub positions: BTreeMap<TopicPartition, u64>,
}

/// One partition of a member read: where it starts, and its topic (for the read audit).
type MemberPlan = (TopicPartition, PartitionReader, u64, Arc<Topic>);

/// Lag of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLagView {
    /// The partition.
    pub partition: TopicPartition,
    /// The committed offset, if any.
    pub committed_offset: Option<u64>,
    /// Where the lag counts from.
    pub start_offset: u64,
    /// Why it counts from there.
    pub basis: LagBasis,
    /// The high watermark.
    pub high_watermark: u64,
    /// Records between the start and the high watermark.
    pub lag_records: u64,
    /// Age of the record at the start (0 without lag).
    pub lag_ms: i64,
}

/// What a partition's lag counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LagBasis {
    /// The committed offset.
    Committed,
    /// No commit (or one below the log start); the log start (`auto_offset_reset = earliest`,
    /// or no subscription).
    Earliest,
    /// No commit (or one below the log start); the high watermark (`latest`).
    Latest,
    /// No usable commit and `auto_offset_reset = none`: counted from the log start.
    None,
}

/// A group's name and, while it has members, its state.
#[derive(Debug, Clone)]
pub struct GroupListing {
    /// The group id.
    pub group: String,
    /// Its membership, `None` for a group with only committed offsets.
    pub description: Option<GroupDescription>,
}

impl Broker {
    /// Joins a group (or rejoins with a static instance id). Needs `read` on the group and on
    /// every topic subscribed to.
    ///
    /// # Errors
    /// Not allowed, a bad group id, an unknown or internal topic, a refused join.
    pub async fn join_group(
        &self,
        caller: &Caller,
        group: &str,
        join: &JoinRequest,
    ) -> Result<MemberView, GroupOpError> {
        self.authorize(caller, Operation::Read, Resource::group(group))?;
        let _no_offset_delete_meanwhile = self.group_admin.read().await;
        let group_id = GroupId::parse(group)?;
        let group = group_id.as_str();
        let mut topics: BTreeSet<String> = join.topics.iter().cloned().collect();
        let mut counts = BTreeMap::new();
        for topic in &topics {
            let topic_ref = self.writable_topic_for(caller, Operation::Read, topic)?;
            counts.insert(topic.clone(), topic_ref.partition_count());
        }
        topics.extend(self.coordinator.topics(group));
        counts.extend(self.existing_counts(&topics));
        Ok(self.coordinator.join(group, join, &counts)?)
    }

    /// A member's heartbeat. Needs `read` on the group.
    ///
    /// # Errors
    /// Not allowed, unknown member, a generation the group never had.
    pub fn heartbeat(
        &self,
        caller: &Caller,
        group: &str,
        member: &str,
        generation: u32,
    ) -> Result<MemberView, GroupOpError> {
        self.authorize(caller, Operation::Read, Resource::group(group))?;
        Ok(self.coordinator.heartbeat(group, member, generation)?)
    }

    /// A member leaves now. Needs `read` on the group.
    ///
    /// # Errors
    /// Not allowed, unknown member.
    pub fn leave_group(
        &self,
        caller: &Caller,
        group: &str,
        member: &str,
    ) -> Result<(), GroupOpError> {
        self.authorize(caller, Operation::Read, Resource::group(group))?;
        let topics = self.coordinator.topics(group);
        Ok(self
            .coordinator
            .leave(group, member, &self.existing_counts(&topics))?)
    }

    /// Partition counts of the topics that still exist (a deleted topic just stops being
    /// assigned).
    pub fn existing_counts(&self, topics: &BTreeSet<String>) -> BTreeMap<String, u32> {
        topics
            .iter()
            .filter_map(|t| {
                self.catalog
                    .get(t)
                    .map(|topic| (t.clone(), topic.partition_count()))
            })
            .collect()
    }

    /// Evicts members whose session or poll interval ran out.
    pub fn expire_members(&self) {
        self.coordinator
            .expire(|topics| self.existing_counts(topics));
    }

    /// Checks membership and generation for a read and keeps the member alive. Needs `read`
    /// on the group (and [`Broker::read_for_member`] on each topic).
    ///
    /// # Errors
    /// Not allowed, unknown member or stale generation.
    pub fn poll_member(
        &self,
        caller: &Caller,
        group: &str,
        member: &str,
        generation: u32,
    ) -> Result<PollGrant, GroupOpError> {
        self.authorize(caller, Operation::Read, Resource::group(group))?;
        Ok(self.coordinator.poll(group, member, generation)?)
    }

    /// Moves a member's read positions to a resumed stream's last seen positions, each of
    /// which must still be in its partition's log, as a resumed partition stream's must: a
    /// position retention or `delete-records` passed (or one past the end) is refused, where it
    /// used to fall back to `auto_offset_reset` and replay or skip without a word.
    ///
    /// # Errors
    /// A position outside `[log start, high watermark]` of its partition.
    pub async fn resume_member(
        &self,
        caller: &Caller,
        (group, member): (&str, &str),
        grant: &PollGrant,
        positions: &BTreeMap<TopicPartition, u64>,
    ) -> Result<(), GroupOpError> {
        // Only the partitions the member owns: the others are not moved anyway, and checking
        // them would tell the caller about topics it may not read.
        let owned: BTreeMap<TopicPartition, u64> = positions
            .iter()
            .filter(|(tp, _)| grant.positions.contains_key(*tp))
            .map(|(tp, offset)| (tp.clone(), *offset))
            .collect();
        for ((topic, partition), offset) in &owned {
            self.authorize(caller, Operation::Read, Resource::topic(topic))?;
            let Some(found) = self.catalog.get(topic) else {
                continue;
            };
            // A partition that cannot be opened is skipped here as by the reads that follow.
            if let Ok(reader) = self.reader(&found, *partition).await {
                super::fetch::check_range(&reader.offsets(), *offset)
                    .map_err(GroupOpError::OutOfRange)?;
            }
        }
        self.coordinator.advance(group, member, &owned);
        Ok(())
    }

    /// Commits what the member's previous read returned (at-least-once).
    ///
    /// # Errors
    /// Storage failures.
    pub async fn commit_member_positions(
        &self,
        group: &str,
        member: &str,
    ) -> Result<(), GroupOpError> {
        let positions = self.coordinator.positions(group, member);
        if positions.is_empty() {
            return Ok(());
        }
        let commits: Vec<Commit> = positions
            .iter()
            .map(|((topic, partition), offset)| Commit {
                topic: topic.clone(),
                partition: *partition,
                offset: *offset,
                metadata: String::new(),
            })
            .collect();
        self.offsets
            .commit(group, &commits, self.clock.now_ms())
            .await?;
        Ok(())
    }

    /// Reads records from every partition of a poll grant, from each one's start, sharing the
    /// byte and record budgets; waits for data when no partition has any.
    ///
    /// Needs `read` on every assigned topic (rights can be revoked after the join).
    ///
    /// # Errors
    /// Not allowed, no valid start with `auto_offset_reset = none`; read failures.
    ///
    /// Reads of topics that audit reads are recorded (`read`: the origin and format) before
    /// the member's positions move; refused ones are recorded as denied.
    pub async fn read_for_member(
        &self,
        caller: &Caller,
        (group, member): (&str, &str),
        grant: PollGrant,
        bounds: MemberReadBounds,
        read: (&ReadOrigin, ReadFormat),
    ) -> Result<MemberRecords, GroupOpError> {
        let (origin, format) = read;
        let mut plans: Vec<MemberPlan> = Vec::new();
        for (tp, position) in &grant.positions {
            if let Err(refused) = self.authorize(caller, Operation::Read, Resource::topic(&tp.0)) {
                self.audit_denied(caller, origin, format, Some(group), (&tp.0, tp.1))
                    .await;
                return Err(refused.into());
            }
            let Some(topic) = self.catalog.get(&tp.0) else {
                continue;
            };
            let reader = match self.reader(&topic, tp.1).await {
                Ok(reader) => reader,
                Err(error) => {
                    tracing::warn!(topic = %tp.0, partition = tp.1, %error,
                        "member read skips a partition that cannot be opened");
                    continue;
                }
            };
            let start =
                self.member_start(group, tp, &reader, *position, grant.auto_offset_reset)?;
            plans.push((tp.clone(), reader, start, topic));
        }
        if !bounds.wait.is_zero()
            && plans
                .iter()
                .all(|(_, reader, start, _)| reader.offsets().high_watermark <= *start)
        {
            self.wait_any(&plans, bounds.wait, (group, grant.generation))
                .await;
        }
        let per_partition = (bounds.max_bytes / plans.len().max(1) as u64).max(1);
        let mut records_left = bounds.max_records;
        let mut records = Vec::new();
        let mut disclosed = Vec::new();
        let mut positions = BTreeMap::new();
        for (tp, reader, start, topic) in &plans {
            let mut next = *start;
            if records_left > 0 && *start < reader.offsets().high_watermark {
                let request = ReadRequest {
                    offset: *start,
                    max_bytes: per_partition,
                    max_records: records_left,
                };
                let read = read_records(reader, &request).await?;
                records_left = records_left
                    .saturating_sub(u32::try_from(read.records.len()).unwrap_or(u32::MAX));
                next = read.next_offset;
                if let Some(sent) = Disclosed::of_records(tp.1, &read.records) {
                    disclosed.push((topic.as_ref(), sent));
                    records.push((tp.clone(), read.records));
                }
            }
            positions.insert(tp.clone(), next);
        }
        self.audit_served(caller, origin, format, Some(group), &disclosed)
            .await?;
        self.coordinator.advance(group, member, &positions);
        Ok(MemberRecords { records, positions })
    }

    /// Where a member starts in one partition: its position, else the committed offset, else
    /// `auto_offset_reset` (also when retention deleted what it points at).
    fn member_start(
        &self,
        group: &str,
        (topic, partition): &TopicPartition,
        reader: &PartitionReader,
        position: Option<u64>,
        reset: AutoOffsetReset,
    ) -> Result<u64, GroupOpError> {
        let offsets = reader.offsets();
        let in_range =
            |offset: u64| offset >= offsets.log_start_offset && offset <= offsets.high_watermark;
        if let Some(position) = position.filter(|p| in_range(*p)) {
            return Ok(position);
        }
        let committed = self.offsets.get(group, topic, *partition).map(|c| c.offset);
        if let Some(offset) = committed.filter(|o| in_range(*o)) {
            return Ok(offset);
        }
        match reset {
            AutoOffsetReset::Earliest => Ok(offsets.log_start_offset),
            AutoOffsetReset::Latest => Ok(offsets.high_watermark),
            AutoOffsetReset::None => Err(GroupOpError::NoValidOffset(match committed {
                Some(offset) => format!(
                    "{topic}/{partition}: committed offset {offset} is outside [{}, {}] and \
                     auto_offset_reset is none",
                    offsets.log_start_offset, offsets.high_watermark
                ),
                None => format!(
                    "{topic}/{partition}: no committed offset and auto_offset_reset is none"
                ),
            })),
        }
    }

    /// Waits until any of the partitions has records past its start, `wait` passes, or
    /// shutdown.
    ///
    /// A rebalance of the group ends the wait too: the member must learn it (with its next
    /// heartbeat or fetch) now, not after a wait of up to `fetch_max_wait_ms`, while the
    /// partitions it gives up wait for its acknowledgement.
    async fn wait_any(
        &self,
        plans: &[MemberPlan],
        wait: Duration,
        (group, generation): (&str, u32),
    ) {
        let waits: Vec<_> = plans
            .iter()
            .map(|(_, reader, start, _)| {
                let mut offsets = reader.subscribe();
                let start = *start;
                Box::pin(async move {
                    let _ = offsets
                        .wait_for(|o: &LogOffsets| o.high_watermark > start)
                        .await;
                })
            })
            .collect();
        let data = async move {
            if waits.is_empty() {
                // A member that owns nothing (more members than partitions, or partitions
                // still on their way from their old owner) waits for a rebalance or the wait's
                // end, instead of answering at once: a stream would poll without pause.
                std::future::pending::<()>().await;
            } else {
                futures::future::select_all(waits).await;
            }
        };
        let mut shutdown = self.shutdown.clone();
        let rebalanced = self.rebalance_of(group, generation);
        let reason = tokio::select! {
            waited = tokio::time::timeout(wait, data) => {
                if waited.is_ok() { "data" } else { "timeout" }
            }
            _ = shutdown.wait_for(|stopping| *stopping) => "shutdown",
            () = rebalanced => "rebalance",
        };
        self.stats.woke(reason);
    }

    /// Resolves once `group` is past `generation` (checked every 100 ms).
    // A periodic check, a timer rather than a clock reading.
    #[allow(clippy::disallowed_methods)]
    async fn rebalance_of(&self, group: &str, generation: u32) {
        while self.coordinator.generation(group) == Some(generation) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Commits offsets for many partitions at once. While the group has members, the commit
    /// must come from a current member that owns every partition in it.
    ///
    /// Needs `read` on the group and on every topic committed to.
    ///
    /// # Errors
    /// Not allowed, a bad group id or request, an unknown or internal topic or partition, a
    /// fenced member, storage failures.
    pub async fn commit_offsets(
        &self,
        caller: &Caller,
        group: &str,
        request: &CommitRequest,
    ) -> Result<GroupOffsets, GroupOpError> {
        self.authorize(caller, Operation::Read, Resource::group(group))?;
        let group_id = GroupId::parse(group)?;
        let group = group_id.as_str();
        if request.commits.is_empty() {
            return Err(GroupOpError::Invalid("offsets must not be empty".into()));
        }
        check_commit_shape(&request.commits)?;
        let mut ends = Vec::new();
        for commit in &request.commits {
            let topic = self.writable_topic_for(caller, Operation::Read, &commit.topic)?;
            ends.push(local_partition(&topic, commit.partition)?.offsets());
        }
        let partitions: Vec<TopicPartition> = request
            .commits
            .iter()
            .map(|c| (c.topic.clone(), c.partition))
            .collect();
        let member = request
            .member
            .as_ref()
            .map(|(member, generation)| (member.as_str(), *generation));
        self.coordinator.check_commit(group, member, &partitions)?;
        // Past the high watermark is a position no consumer can have reached: a group would
        // start there and miss records, while its lag showed 0.
        for (commit, offsets) in request.commits.iter().zip(ends) {
            if commit.offset > offsets.high_watermark {
                return Err(GroupOpError::CommitPastEnd {
                    topic: commit.topic.clone(),
                    partition: commit.partition,
                    requested: commit.offset,
                    log_start: offsets.log_start_offset,
                    high_watermark: offsets.high_watermark,
                });
            }
        }
        self.offsets
            .commit(group, &request.commits, self.clock.now_ms())
            .await?;
        Ok(self.visible_offsets(caller, group))
    }

    /// A group's committed offsets of the topics `caller` may describe: the others are not
    /// theirs to learn of (ADR 0007: listings leave out what the caller may not describe).
    fn visible_offsets(&self, caller: &Caller, group: &str) -> GroupOffsets {
        let mut offsets = self.offsets.committed(group);
        offsets.retain(|(topic, _), _| {
            self.authorize(caller, Operation::Describe, Resource::topic(topic))
                .is_ok()
        });
        offsets
    }

    /// A group's committed offsets. Needs `describe` on the group.
    ///
    /// # Errors
    /// Not allowed, an unknown group.
    pub fn group_offsets(
        &self,
        caller: &Caller,
        group: &str,
    ) -> Result<GroupOffsets, GroupOpError> {
        self.authorize(caller, Operation::Describe, Resource::group(group))?;
        self.known_group(group)?;
        Ok(self.visible_offsets(caller, group))
    }

    /// Deletes a group's committed offsets of one topic, or of one partition of it, as Kafka's
    /// OffsetDelete: the rest of the group stays. Refused while a live member reads the topic
    /// (Kafka's `GROUP_SUBSCRIBED_TO_TOPIC`): it would commit again at once. Needs `delete` on
    /// the group and `read` on the topic.
    ///
    /// # Errors
    /// Not allowed, an unknown group, topic or partition, a member reading the topic, storage
    /// failures.
    pub async fn delete_topic_offsets(
        &self,
        caller: &Caller,
        group: &str,
        topic: &str,
        partition: Option<u32>,
    ) -> Result<(), GroupOpError> {
        self.authorize(caller, Operation::Delete, Resource::group(group))?;
        self.authorize(caller, Operation::Read, Resource::topic(topic))?;
        self.known_group(group)?;
        let found = self.writable_topic(topic)?;
        if let Some(partition) = partition {
            local_partition(found.topic(), partition)?;
        }
        let _no_join_meanwhile = self.group_admin.write().await;
        if self.coordinator.topics(group).contains(topic) {
            return Err(GroupOpError::LiveMembers {
                group: group.to_string(),
                hint: " reading this topic; they would commit again at once",
            });
        }
        self.offsets
            .delete_partitions(group, topic, partition, self.clock.now_ms())
            .await?;
        Ok(())
    }

    /// Deletes a group without live members: every committed offset, and what the coordinator
    /// kept of it (generation, eviction history). Needs `delete` on the group.
    ///
    /// # Errors
    /// Not allowed, an unknown group, live members, storage failures.
    pub async fn delete_group_offsets(
        &self,
        caller: &Caller,
        group: &str,
    ) -> Result<(), GroupOpError> {
        self.authorize(caller, Operation::Delete, Resource::group(group))?;
        self.known_group(group)?;
        let _no_join_meanwhile = self.group_admin.write().await;
        if self.coordinator.member_count(group) > 0 {
            return Err(GroupOpError::LiveMembers {
                group: group.to_string(),
                hint: "",
            });
        }
        self.offsets
            .delete_group(group, self.clock.now_ms())
            .await?;
        // The group goes as a whole, as with Kafka's DeleteGroups: a group that once had
        // members stayed listed and described after its delete answered 204. Only once its
        // offsets are gone, so a failed delete leaves the group whole; a member that joined
        // meanwhile keeps the group (and whatever it commits from now on).
        let _members = self.coordinator.forget_if_empty(group);
        Ok(())
    }

    /// Moves a group's committed offsets (see [`ResetTo`]); only while the group has no live
    /// members, unless forced.
    ///
    /// Needs `read` on the group and on the topic.
    ///
    /// # Errors
    /// Not allowed, a bad group id, live members, an unknown or internal topic or partition, an
    /// explicit offset outside the log, a missing value, storage failures.
    pub async fn reset_group_offsets(
        &self,
        caller: &Caller,
        group: &str,
        request: &ResetRequest,
    ) -> Result<GroupOffsets, GroupOpError> {
        self.authorize(caller, Operation::Read, Resource::group(group))?;
        self.authorize(caller, Operation::Read, Resource::topic(&request.topic))?;
        let group_id = GroupId::parse(group)?;
        let group = group_id.as_str();
        let live_members = || {
            if !request.force && self.coordinator.member_count(group) > 0 {
                return Err(GroupOpError::LiveMembers {
                    group: group.to_string(),
                    hint: "; pass force to reset anyway",
                });
            }
            Ok(())
        };
        live_members()?;
        let topic = self.writable_topic(&request.topic)?;
        let partitions = match &request.partitions {
            Some(list) => list.clone(),
            None => (0..topic.partition_count()).collect(),
        };
        let mut commits = Vec::new();
        for partition in partitions {
            let offset = self.reset_target(group, &topic, partition, request).await?;
            commits.push(Commit {
                topic: request.topic.clone(),
                partition,
                offset,
                metadata: String::new(),
            });
        }
        // Checked again, now that finding the targets (maybe in the bucket) is done.
        let _no_join_meanwhile = self.group_admin.write().await;
        live_members()?;
        self.offsets
            .commit(group, &commits, self.clock.now_ms())
            .await?;
        Ok(self.visible_offsets(caller, group))
    }

    /// Where a reset moves `group`'s offset of one partition.
    async fn reset_target(
        &self,
        group: &str,
        topic: &Arc<Topic>,
        partition: u32,
        request: &ResetRequest,
    ) -> Result<u64, GroupOpError> {
        // The whole log: a tiered partition's records in the bucket are readable too, and
        // "earliest" must not skip them.
        let reader = self
            .reader(topic, partition)
            .await
            .map_err(FetchError::from)?;
        let offsets = reader.offsets();
        let to = request
            .to
            .ok_or_else(|| GroupOpError::Invalid("this reset target needs a value".into()))?;
        Ok(match to {
            ResetTo::Earliest => offsets.log_start_offset,
            ResetTo::Latest => offsets.high_watermark,
            ResetTo::Timestamp(timestamp) => super::fetch::locate_time(&reader, timestamp)
                .await?
                .unwrap_or(offsets.high_watermark),
            ResetTo::Offset(wanted) => {
                let wanted = u64::try_from(wanted)
                    .map_err(|_| GroupOpError::Invalid("offset must be >= 0".into()))?;
                super::fetch::check_range(&offsets, wanted)?;
                wanted
            }
            ResetTo::Shift(by) => {
                let committed = self
                    .offsets
                    .get(group, &request.topic, partition)
                    .map_or(offsets.log_start_offset, |c| c.offset);
                (i128::from(committed) + i128::from(by)).clamp(
                    i128::from(offsets.log_start_offset),
                    i128::from(offsets.high_watermark),
                ) as u64
            }
        })
    }

    /// Lag of every partition the group committed to or subscribes to, in records and in
    /// time. Ages are read like fetches, so a committed offset that only the bucket still
    /// holds has a real age too.
    ///
    /// Needs `describe` on the group; partitions of topics the caller may not describe are left
    /// out.
    ///
    /// # Errors
    /// Not allowed, an unknown group; read failures.
    pub async fn group_lag(
        &self,
        caller: &Caller,
        group: &str,
    ) -> Result<Vec<PartitionLagView>, GroupOpError> {
        self.authorize(caller, Operation::Describe, Resource::group(group))?;
        self.known_group(group)?;
        self.lag_of(group, |topic| {
            self.may(caller, Operation::Describe, &Resource::topic(topic))
        })
        .await
    }

    /// The lag of `group` on the partitions of the topics `visible` admits.
    pub(super) async fn lag_of(
        &self,
        group: &str,
        visible: impl Fn(&str) -> bool,
    ) -> Result<Vec<PartitionLagView>, GroupOpError> {
        let now = self.clock.now_ms();
        let committed = self.offsets.committed(group);
        let subscriptions = self.coordinator.subscriptions(group);
        let mut wanted: BTreeSet<TopicPartition> = committed.keys().cloned().collect();
        for topic in subscriptions.keys() {
            if let Some(found) = self.catalog.get(topic) {
                wanted.extend((0..found.partition_count()).map(|p| (topic.clone(), p)));
            }
        }
        let mut partitions = Vec::new();
        for (topic, partition) in wanted {
            if !visible(&topic) {
                continue;
            }
            let Some(found) = self.catalog.get(&topic) else {
                continue;
            };
            if partition >= found.partition_count() {
                continue;
            }
            let reader = self
                .reader(&found, partition)
                .await
                .map_err(super::error::FetchError::from)?;
            let offsets = reader.offsets();
            let commit = committed.get(&(topic.clone(), partition)).map(|c| c.offset);
            // A commit below the log start is gone: members reset by the policy, as without
            // a commit (counting from the log start said records were due that a member
            // resetting to `latest` never reads).
            let (basis, start) = match (commit, subscriptions.get(&topic).copied()) {
                (Some(offset), _) if offset >= offsets.log_start_offset => {
                    (LagBasis::Committed, offset)
                }
                (_, Some(AutoOffsetReset::Latest)) => (LagBasis::Latest, offsets.high_watermark),
                (_, Some(AutoOffsetReset::None)) => (LagBasis::None, offsets.log_start_offset),
                (_, Some(AutoOffsetReset::Earliest) | None) => {
                    (LagBasis::Earliest, offsets.log_start_offset)
                }
            };
            let start = start.min(offsets.high_watermark);
            let lag_records = offsets.high_watermark - start;
            let lag_ms = match lag_records {
                0 => 0,
                _ => first_record(&reader, start)
                    .await?
                    .map_or(0, |r| now.saturating_sub(r.timestamp).max(0)),
            };
            partitions.push(PartitionLagView {
                partition: (topic, partition),
                committed_offset: commit,
                start_offset: start,
                basis,
                high_watermark: offsets.high_watermark,
                lag_records,
                lag_ms,
            });
        }
        Ok(partitions)
    }

    /// Every group with members or committed offsets that `caller` may describe.
    pub fn list_groups(&self, caller: &Caller) -> Vec<GroupListing> {
        self.group_names()
            .into_iter()
            .filter(|group| self.may(caller, Operation::Describe, &Resource::group(group)))
            .map(|group| GroupListing {
                description: self.coordinator.describe(&group),
                group,
            })
            .collect()
    }

    /// A group's membership; `None` for a group with only committed offsets. Needs `describe`
    /// on the group.
    ///
    /// # Errors
    /// Not allowed, an unknown group.
    pub fn describe_group(
        &self,
        caller: &Caller,
        group: &str,
    ) -> Result<Option<GroupDescription>, GroupOpError> {
        self.authorize(caller, Operation::Describe, Resource::group(group))?;
        self.known_group(group)?;
        Ok(self.coordinator.describe(group))
    }

    /// Every group with members or committed offsets.
    pub(super) fn group_names(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self.offsets.groups().into_iter().collect();
        names.extend(self.coordinator.groups());
        names
    }

    fn known_group(&self, group: &str) -> Result<(), GroupOpError> {
        if self.offsets.committed(group).is_empty() && self.coordinator.describe(group).is_none() {
            return Err(GroupOpError::GroupNotFound {
                group: group.to_string(),
            });
        }
        Ok(())
    }
}

/// What a commit request must be before anything is looked up: metadata within Kafka's limit,
/// and each partition once (which of two offsets for one partition was meant is not ours to
/// guess).
fn check_commit_shape(commits: &[Commit]) -> Result<(), GroupOpError> {
    let limit = crate::limits::MAX_COMMIT_METADATA_BYTES;
    let mut seen = BTreeSet::new();
    for (index, commit) in commits.iter().enumerate() {
        let length = commit.metadata.chars().count();
        if length > limit {
            return Err(GroupOpError::Invalid(format!(
                "offsets[{index}].metadata has {length} characters; at most {limit} are kept \
                 (as Kafka's offset.metadata.max.bytes)"
            )));
        }
        if !seen.insert((commit.topic.as_str(), commit.partition)) {
            return Err(GroupOpError::Invalid(format!(
                "offsets[{index}] repeats topic '{}' partition {}: list each partition once",
                commit.topic, commit.partition
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::FutureExt as _;

    use super::*;
    use crate::clock::ManualClock;
    use crate::config::Config;
    use crate::groups::coordinator::AutoOffsetReset;
    use crate::security::Principal;
    use crate::status::ServerStatus;

    /// A join must not slip in between an offset delete's check for live members and its
    /// write: it would commit, and the delete would take that commit. Each waits for the other.
    #[tokio::test]
    async fn joins_and_offset_deletes_do_not_interleave() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let state = crate::server::build_state(
            config,
            ManualClock::new(1_000),
            shutdown,
            Arc::new(ServerStatus::new()),
        )
        .await
        .unwrap();
        let broker = &state.broker;
        let caller = Caller::authenticated(Principal::anonymous());
        broker
            .create_topic(&caller, "t", 1, &BTreeMap::new())
            .await
            .unwrap();
        let join = JoinRequest {
            topics: vec!["t".into()],
            session_timeout_ms: None,
            max_poll_interval_ms: None,
            strategy: None,
            auto_offset_reset: AutoOffsetReset::Earliest,
            instance_id: None,
        };

        // A delete in progress (it holds the lock from its check to its write): a join waits.
        let deleting = broker.group_admin.write().await;
        let mut joining = Box::pin(broker.join_group(&caller, "g", &join));
        assert!((&mut joining).now_or_never().is_none(), "joined mid-delete");
        drop(deleting);
        joining.await.unwrap();

        // A join in progress: the delete waits, then finds the live member.
        let joined = broker.group_admin.read().await;
        let mut delete = Box::pin(broker.delete_topic_offsets(&caller, "g", "t", None));
        assert!((&mut delete).now_or_never().is_none(), "deleted mid-join");
        drop(joined);
        assert!(matches!(
            delete.await,
            Err(GroupOpError::LiveMembers { .. })
        ));
    }
}

//! Partition assignment strategies: which member of a group reads which partitions.
//!
//! All three are deterministic functions of the members (sorted by id), their subscriptions and
//! the partition counts, so every server computes the same answer. Members beyond the number of
//! partitions get nothing and sit idle.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A topic and partition number.
pub type TopicPartition = (String, u32);

/// How partitions are spread over members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AssignmentStrategy {
    /// Per topic, contiguous ranges of partitions; the first members get one more when the count
    /// does not divide evenly (Kafka's RangeAssignor).
    #[default]
    Range,
    /// All partitions of all topics dealt out one by one (Kafka's RoundRobinAssignor).
    RoundRobin,
    /// Balanced like round-robin, but a partition stays with its previous owner when that keeps
    /// the balance, so a rebalance moves as few partitions as possible.
    Sticky,
}

impl AssignmentStrategy {
    /// The name on the wire (`assignment_strategy`).
    pub fn as_str(self) -> &'static str {
        match self {
            AssignmentStrategy::Range => "range",
            AssignmentStrategy::RoundRobin => "round_robin",
            AssignmentStrategy::Sticky => "sticky",
        }
    }
}

/// One member's input to an assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscriber {
    /// Member id.
    pub member_id: String,
    /// Topics it reads.
    pub topics: BTreeSet<String>,
    /// What it owned before, for `Sticky`.
    pub previous: BTreeSet<TopicPartition>,
}

/// Computes the assignment: member id -> partitions (sorted). Every member appears, possibly with
/// nothing.
pub fn assign(
    strategy: AssignmentStrategy,
    subscribers: &[Subscriber],
    partition_counts: &BTreeMap<String, u32>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let mut members: Vec<&Subscriber> = subscribers.iter().collect();
    members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    let mut result: BTreeMap<String, Vec<TopicPartition>> = members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect();
    match strategy {
        AssignmentStrategy::Range => range(&members, partition_counts, &mut result),
        AssignmentStrategy::RoundRobin => round_robin(&members, partition_counts, &mut result),
        AssignmentStrategy::Sticky => sticky(&members, partition_counts, &mut result),
    }
    for partitions in result.values_mut() {
        partitions.sort();
    }
    result
}

fn range(
    members: &[&Subscriber],
    counts: &BTreeMap<String, u32>,
    result: &mut BTreeMap<String, Vec<TopicPartition>>,
) {
    for (topic, &count) in counts {
        let readers: Vec<&&Subscriber> = members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .collect();
        if readers.is_empty() {
            continue;
        }
        let per = count as usize / readers.len();
        let extra = count as usize % readers.len();
        let mut next = 0u32;
        for (i, reader) in readers.iter().enumerate() {
            let take = per + usize::from(i < extra);
            for _ in 0..take {
                if let Some(list) = result.get_mut(&reader.member_id) {
                    list.push((topic.clone(), next));
                }
                next += 1;
            }
        }
    }
}

fn all_partitions(counts: &BTreeMap<String, u32>) -> Vec<TopicPartition> {
    counts
        .iter()
        .flat_map(|(topic, &count)| (0..count).map(move |p| (topic.clone(), p)))
        .collect()
}

fn round_robin(
    members: &[&Subscriber],
    counts: &BTreeMap<String, u32>,
    result: &mut BTreeMap<String, Vec<TopicPartition>>,
) {
    let mut turn = 0usize;
    for tp in all_partitions(counts) {
        // The next member in turn that reads this topic.
        for step in 0..members.len() {
            let member = members[(turn + step) % members.len()];
            if member.topics.contains(&tp.0) {
                if let Some(list) = result.get_mut(&member.member_id) {
                    list.push(tp.clone());
                }
                turn = (turn + step + 1) % members.len();
                break;
            }
        }
    }
}

fn sticky(
    members: &[&Subscriber],
    counts: &BTreeMap<String, u32>,
    result: &mut BTreeMap<String, Vec<TopicPartition>>,
) {
    let partitions = all_partitions(counts);
    if members.is_empty() {
        return;
    }
    // Each member's fair share (the first `extra` members by id may take one more).
    let base = partitions.len() / members.len();
    let extra = partitions.len() % members.len();
    let capacity: BTreeMap<&str, usize> = members
        .iter()
        .enumerate()
        .map(|(i, m)| (m.member_id.as_str(), base + usize::from(i < extra)))
        .collect();
    let mut unassigned = Vec::new();
    for tp in partitions {
        let keeper = members.iter().find(|m| {
            m.previous.contains(&tp)
                && m.topics.contains(&tp.0)
                && result.get(&m.member_id).map_or(0, Vec::len)
                    < capacity.get(m.member_id.as_str()).copied().unwrap_or(0)
        });
        match keeper.and_then(|m| result.get_mut(&m.member_id)) {
            Some(list) => list.push(tp),
            None => unassigned.push(tp),
        }
    }
    for tp in unassigned {
        // The least-loaded member that reads the topic.
        let target = members
            .iter()
            .filter(|m| m.topics.contains(&tp.0))
            .min_by_key(|m| {
                (
                    result.get(&m.member_id).map_or(0, Vec::len),
                    m.member_id.clone(),
                )
            });
        if let Some(list) = target.and_then(|m| result.get_mut(&m.member_id)) {
            list.push(tp);
        }
    }
    // The shares above assume every member reads every topic. One that reads fewer may be left
    // below its share (even with nothing) while others hold partitions it could read: move
    // those one at a time until no member holds two more than one able to take from it.
    // Each move shrinks the sum of squared loads, so this ends.
    while let Some((from, to, tp)) = narrowing_move(members, result) {
        if let Some(list) = result.get_mut(&from) {
            list.retain(|owned| owned != &tp);
        }
        if let Some(list) = result.get_mut(&to) {
            list.push(tp);
        }
    }
}

/// A partition that a member with at least two more than another could hand to it (one the
/// receiver owned before, if any), or `None` when the assignment is balanced.
fn narrowing_move(
    members: &[&Subscriber],
    result: &BTreeMap<String, Vec<TopicPartition>>,
) -> Option<(String, String, TopicPartition)> {
    let load = |m: &Subscriber| result.get(&m.member_id).map_or(0, Vec::len);
    let mut receivers: Vec<&&Subscriber> = members.iter().collect();
    receivers.sort_by_key(|m| (load(m), m.member_id.as_str()));
    let mut givers = receivers.clone();
    givers.reverse();
    for to in &receivers {
        for from in givers.iter().take_while(|from| load(from) > load(to) + 1) {
            let owned = result.get(&from.member_id)?;
            let mut movable = owned.iter().filter(|tp| to.topics.contains(&tp.0));
            let pick = movable
                .clone()
                .find(|tp| to.previous.contains(tp))
                .or_else(|| movable.next_back());
            if let Some(tp) = pick {
                return Some((from.member_id.clone(), to.member_id.clone(), tp.clone()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn subscribers(n: usize, topics: &[&str]) -> Vec<Subscriber> {
        (0..n)
            .map(|i| Subscriber {
                member_id: format!("m{i:02}"),
                topics: topics.iter().map(|t| t.to_string()).collect(),
                previous: BTreeSet::new(),
            })
            .collect()
    }

    fn counts(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
        pairs.iter().map(|(t, c)| (t.to_string(), *c)).collect()
    }

    #[test]
    fn twelve_partitions_four_members_get_three_each() {
        for strategy in [
            AssignmentStrategy::Range,
            AssignmentStrategy::RoundRobin,
            AssignmentStrategy::Sticky,
        ] {
            let result = assign(strategy, &subscribers(4, &["t"]), &counts(&[("t", 12)]));
            assert!(
                result.values().all(|p| p.len() == 3),
                "{strategy:?}: {result:?}"
            );
        }
    }

    #[test]
    fn six_members_on_four_partitions_leave_two_idle() {
        for strategy in [
            AssignmentStrategy::Range,
            AssignmentStrategy::RoundRobin,
            AssignmentStrategy::Sticky,
        ] {
            let result = assign(strategy, &subscribers(6, &["t"]), &counts(&[("t", 4)]));
            assert_eq!(
                result.values().filter(|p| p.is_empty()).count(),
                2,
                "{strategy:?}"
            );
        }
    }

    #[test]
    fn range_gives_contiguous_ranges_first_members_more() {
        let result = assign(
            AssignmentStrategy::Range,
            &subscribers(3, &["t"]),
            &counts(&[("t", 7)]),
        );
        let t = |p| ("t".to_string(), p);
        assert_eq!(result["m00"], vec![t(0), t(1), t(2)]);
        assert_eq!(result["m01"], vec![t(3), t(4)]);
        assert_eq!(result["m02"], vec![t(5), t(6)]);
    }

    #[test]
    fn sticky_keeps_owners_when_a_member_joins() {
        let mut members = subscribers(2, &["t"]);
        let first = assign(AssignmentStrategy::Sticky, &members, &counts(&[("t", 6)]));
        for member in &mut members {
            member.previous = first[&member.member_id].iter().cloned().collect();
        }
        members.extend(subscribers(3, &["t"]).into_iter().skip(2));
        let second = assign(AssignmentStrategy::Sticky, &members, &counts(&[("t", 6)]));
        let moved = members
            .iter()
            .flat_map(|m| {
                m.previous
                    .iter()
                    .filter(|tp| !second[&m.member_id].contains(tp))
            })
            .count();
        assert_eq!(moved, 2, "only the new member's share moves: {second:?}");
        assert!(second.values().all(|p| p.len() == 2));
    }

    /// Two members read `ta` and `tb`, a third only `ta`: it used to get nothing in half the
    /// runs (which depended on the random member ids), with the others holding four each.
    #[test]
    fn sticky_balances_members_that_read_fewer_topics() {
        let partitions = counts(&[("ta", 3), ("tb", 5)]);
        for ids in [["a", "b", "c"], ["c", "b", "a"], ["b", "c", "a"]] {
            let member = |id: &str, topics: &[&str]| Subscriber {
                member_id: id.to_string(),
                topics: topics.iter().map(|t| t.to_string()).collect(),
                previous: BTreeSet::new(),
            };
            let mut two = vec![member(ids[0], &["ta", "tb"]), member(ids[1], &["ta", "tb"])];
            let first = assign(AssignmentStrategy::Sticky, &two, &partitions);
            for m in &mut two {
                m.previous = first[&m.member_id].iter().cloned().collect();
            }
            two.push(member(ids[2], &["ta"]));
            let second = assign(AssignmentStrategy::Sticky, &two, &partitions);
            let sizes: Vec<usize> = second.values().map(Vec::len).collect();
            assert_eq!(
                sizes.iter().max().unwrap() - sizes.iter().min().unwrap(),
                1,
                "{second:?}"
            );
            assert!(second[ids[2]].iter().all(|tp| tp.0 == "ta"), "{second:?}");
        }
    }

    proptest! {
        /// Sticky with mixed subscriptions: each partition goes to one member that reads it,
        /// and no member holds two more than another that could take one of its partitions.
        #[test]
        fn sticky_leaves_no_gap_a_move_could_narrow(
            subscriptions in proptest::collection::vec((any::<bool>(), any::<bool>()), 1..7),
            a in 0u32..12,
            b in 0u32..12,
        ) {
            let members: Vec<Subscriber> = subscriptions
                .iter()
                .enumerate()
                .map(|(i, (reads_a, reads_b))| Subscriber {
                    member_id: format!("m{i}"),
                    topics: [("a", *reads_a), ("b", *reads_b)]
                        .iter()
                        .filter(|(_, reads)| *reads)
                        .map(|(t, _)| t.to_string())
                        .collect(),
                    previous: BTreeSet::new(),
                })
                .collect();
            let result = assign(AssignmentStrategy::Sticky, &members, &counts(&[("a", a), ("b", b)]));
            for m in &members {
                prop_assert!(result[&m.member_id].iter().all(|tp| m.topics.contains(&tp.0)));
            }
            for from in &members {
                for to in &members {
                    let (held, has) = (result[&from.member_id].len(), result[&to.member_id].len());
                    let movable = result[&from.member_id].iter().any(|tp| to.topics.contains(&tp.0));
                    prop_assert!(!(held > has + 1 && movable), "{result:?}");
                }
            }
        }

        #[test]
        fn every_partition_has_exactly_one_owner(
            members in 1usize..9,
            partitions in 0u32..40,
            strategy in prop_oneof![Just(AssignmentStrategy::Range), Just(AssignmentStrategy::RoundRobin), Just(AssignmentStrategy::Sticky)],
        ) {
            let result = assign(strategy, &subscribers(members, &["a", "b"]), &counts(&[("a", partitions), ("b", 3)]));
            let mut owned: Vec<&TopicPartition> = result.values().flatten().collect();
            let total = owned.len();
            owned.sort();
            owned.dedup();
            prop_assert_eq!(owned.len(), total, "no partition twice");
            prop_assert_eq!(total, partitions as usize + 3, "every partition assigned");
            let sizes: Vec<usize> = result.values().map(Vec::len).collect();
            if strategy != AssignmentStrategy::Range {
                prop_assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
            }
        }
    }
}

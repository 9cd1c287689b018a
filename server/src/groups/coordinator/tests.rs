use super::*;
use crate::clock::ManualClock;

fn setup() -> (Arc<ManualClock>, Coordinator) {
    let clock = ManualClock::new(1_000_000);
    let coordinator = Coordinator::new(clock.clone(), GroupLimits::default());
    (clock, coordinator)
}

fn counts(partitions: u32) -> BTreeMap<String, u32> {
    BTreeMap::from([("t".to_string(), partitions)])
}

fn join(coordinator: &Coordinator, partitions: u32) -> MemberView {
    let request = JoinRequest {
        topics: vec!["t".into()],
        ..JoinRequest::default()
    };
    coordinator
        .join("g", &request, &counts(partitions))
        .unwrap()
}

/// Everyone heartbeats twice (learn the generation, then acknowledge it), as clients do.
fn settle(coordinator: &Coordinator, members: &[String]) {
    for _ in 0..2 {
        for member in members {
            let generation = coordinator.describe("g").unwrap().generation;
            coordinator.heartbeat("g", member, generation).unwrap();
        }
    }
}

fn assert_single_owners(coordinator: &Coordinator) {
    let description = coordinator.describe("g").unwrap();
    let mut owned: Vec<TopicPartition> = description
        .members
        .iter()
        .flat_map(|m| m.assignment.clone())
        .collect();
    let total = owned.len();
    owned.sort();
    owned.dedup();
    assert_eq!(
        owned.len(),
        total,
        "a partition has two owners: {description:?}"
    );
}

#[test]
fn twelve_partitions_and_four_members_settle_at_three_each() {
    let (_, coordinator) = setup();
    let members: Vec<String> = (0..4).map(|_| join(&coordinator, 12).member_id).collect();
    assert_single_owners(&coordinator);
    settle(&coordinator, &members);
    let description = coordinator.describe("g").unwrap();
    assert_eq!(description.state, "stable");
    assert!(
        description.members.iter().all(|m| m.assignment.len() == 3),
        "{description:?}"
    );
}

#[test]
fn six_members_on_four_partitions_leave_two_idle() {
    let (_, coordinator) = setup();
    let members: Vec<String> = (0..6).map(|_| join(&coordinator, 4).member_id).collect();
    settle(&coordinator, &members);
    let description = coordinator.describe("g").unwrap();
    assert_eq!(
        description
            .members
            .iter()
            .filter(|m| m.assignment.is_empty())
            .count(),
        2
    );
    assert_eq!(
        description
            .members
            .iter()
            .map(|m| m.assignment.len())
            .sum::<usize>(),
        4
    );
}

#[test]
fn a_partition_moves_only_after_its_old_owner_acknowledges() {
    let (_, coordinator) = setup();
    let first = join(&coordinator, 4);
    assert_eq!(first.assignment.len(), 4);
    let second = join(&coordinator, 4);
    assert_eq!(second.generation, first.generation + 1);
    assert!(
        second.assignment.is_empty(),
        "the old owner has not let go yet"
    );
    assert_single_owners(&coordinator);
    // The old owner learns the new generation (not yet an acknowledgement)...
    let learned = coordinator
        .heartbeat("g", &first.member_id, first.generation)
        .unwrap();
    assert_eq!(learned.generation, second.generation);
    assert_eq!(learned.assignment.len(), 2, "it keeps only its new share");
    let still = coordinator
        .heartbeat("g", &second.member_id, second.generation)
        .unwrap();
    assert!(
        still.assignment.is_empty(),
        "moved only after the acknowledgement"
    );
    // ...then acknowledges it, and the new owner can take its partitions.
    coordinator
        .heartbeat("g", &first.member_id, learned.generation)
        .unwrap();
    let now = coordinator
        .heartbeat("g", &second.member_id, second.generation)
        .unwrap();
    assert_eq!(now.assignment.len(), 2);
    assert_single_owners(&coordinator);
    assert_eq!(coordinator.describe("g").unwrap().state, "stable");
}

#[test]
fn a_silent_member_is_evicted_after_its_session_timeout_and_its_partitions_move() {
    let (clock, coordinator) = setup();
    let members: Vec<String> = (0..2).map(|_| join(&coordinator, 4).member_id).collect();
    settle(&coordinator, &members);
    let (alive, dead) = (&members[0], &members[1]);
    for _ in 0..10 {
        clock.advance(5_000);
        coordinator
            .heartbeat("g", alive, coordinator.describe("g").unwrap().generation)
            .unwrap();
        let evicted = coordinator.expire(|_| counts(4));
        assert_single_owners(&coordinator);
        if !evicted.is_empty() {
            assert_eq!(evicted[0].1, *dead);
            assert!(evicted[0].2.contains("session timeout"));
            break;
        }
    }
    let generation = coordinator.describe("g").unwrap().generation;
    let view = coordinator.heartbeat("g", alive, generation).unwrap();
    assert_eq!(view.assignment.len(), 4, "the survivor owns everything");
    // The evicted member is a zombie now: everything it does is refused.
    assert!(matches!(
        coordinator.check_commit("g", Some((dead, generation)), &[("t".into(), 0)]),
        Err(GroupError::UnknownMember { .. })
    ));
    assert!(matches!(
        coordinator.poll("g", dead, generation),
        Err(GroupError::UnknownMember { .. })
    ));
    let description = coordinator.describe("g").unwrap();
    assert_eq!(description.evictions.len(), 1);
}

#[test]
fn a_member_that_heartbeats_but_never_fetches_is_evicted_for_max_poll_interval() {
    let (clock, coordinator) = setup();
    let request = JoinRequest {
        topics: vec!["t".into()],
        max_poll_interval_ms: Some(10_000),
        ..JoinRequest::default()
    };
    let member = coordinator.join("g", &request, &counts(2)).unwrap();
    clock.advance(6_000);
    coordinator
        .heartbeat("g", &member.member_id, member.generation)
        .unwrap();
    assert!(coordinator.expire(|_| counts(2)).is_empty());
    clock.advance(6_000);
    coordinator
        .heartbeat("g", &member.member_id, member.generation)
        .unwrap();
    let evicted = coordinator.expire(|_| counts(2));
    assert_eq!(evicted.len(), 1);
    assert!(
        evicted[0].2.contains("max_poll_interval_ms"),
        "{}",
        evicted[0].2
    );
    let description = coordinator.describe("g").unwrap();
    assert!(description.evictions[0].reason.contains("stuck"));
}

/// A generation the group never had is the client's bug, not a stale view (422, not 409), for a
/// read and a commit as for a heartbeat.
#[test]
fn generations_from_the_future_are_invalid_for_fetch_and_commit() {
    let (_, coordinator) = setup();
    let member = join(&coordinator, 2);
    let ahead = member.generation + 1;
    assert!(matches!(
        coordinator.poll("g", &member.member_id, ahead),
        Err(GroupError::Invalid(_))
    ));
    assert!(matches!(
        coordinator.check_commit("g", Some((&member.member_id, ahead)), &[("t".into(), 0)]),
        Err(GroupError::Invalid(_))
    ));
}

#[test]
fn stale_generations_are_fenced_for_fetch_and_commit() {
    let (_, coordinator) = setup();
    let first = join(&coordinator, 2);
    coordinator
        .poll("g", &first.member_id, first.generation)
        .unwrap();
    let _second = join(&coordinator, 2);
    assert!(matches!(
        coordinator.poll("g", &first.member_id, first.generation),
        Err(GroupError::StaleGeneration { .. })
    ));
    assert!(matches!(
        coordinator.check_commit(
            "g",
            Some((&first.member_id, first.generation)),
            &[("t".into(), 0)]
        ),
        Err(GroupError::StaleGeneration { .. })
    ));
    assert!(matches!(
        coordinator.check_commit("g", None, &[]),
        Err(GroupError::GroupHasMembers(_))
    ));
}

#[test]
fn a_static_member_that_rejoins_keeps_its_partitions_without_a_rebalance() {
    let (_, coordinator) = setup();
    let request = JoinRequest {
        topics: vec!["t".into()],
        instance_id: Some("pod-0".into()),
        ..JoinRequest::default()
    };
    let before = coordinator.join("g", &request, &counts(3)).unwrap();
    let other = join(&coordinator, 3);
    settle(
        &coordinator,
        &[before.member_id.clone(), other.member_id.clone()],
    );
    let owned = coordinator
        .heartbeat("g", &before.member_id, other.generation)
        .unwrap()
        .assignment;
    let after = coordinator.join("g", &request, &counts(3)).unwrap();
    assert_ne!(after.member_id, before.member_id);
    assert_eq!(after.generation, other.generation, "no rebalance");
    assert_eq!(after.assignment, owned);
    assert!(matches!(
        coordinator.heartbeat("g", &before.member_id, after.generation),
        Err(GroupError::UnknownMember { .. })
    ));
}

#[test]
fn positions_advance_only_for_owned_partitions() {
    let (_, coordinator) = setup();
    let member = join(&coordinator, 2);
    let grant = coordinator
        .poll("g", &member.member_id, member.generation)
        .unwrap();
    assert_eq!(grant.positions.len(), 2);
    assert!(grant.positions.values().all(Option::is_none));
    let moved = BTreeMap::from([(("t".to_string(), 0), 5), (("x".to_string(), 0), 9)]);
    coordinator.advance("g", &member.member_id, &moved);
    let positions = coordinator.positions("g", &member.member_id);
    assert_eq!(positions, BTreeMap::from([(("t".to_string(), 0), 5)]));
}

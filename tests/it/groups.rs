//! Consumer groups: committed offsets and re-reads after crashes, auto_offset_reset after
//! delete-records, assignment, session and poll-interval evictions with no double ownership,
//! fencing of zombies, static membership, the member SSE stream, lag and offset resets.
//!
//! Timeouts run on an [`InProcessServer`] with a `ManualClock` (the clock moves, nothing sleeps);
//! everything else runs against the real binary.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use strata_server::clock::ManualClock;
use strata_tests::{
    Api, InProcessServer, Server, SseEvent, SseParser, eventually, expect_error, ok_json,
};

/// Where the manual clock starts (2025-06-15).
const START_MS: i64 = 1_750_000_000_000;
/// Bound of every `eventually` here (the expiry tick is 250 ms).
const WAIT: Duration = Duration::from_secs(10);

type Tp = (String, u32);

/// A member as a client keeps it: group, id and the generation it last learned.
#[derive(Debug, Clone)]
struct Member {
    group: String,
    id: String,
    generation: u32,
}

fn tps(list: &Value) -> BTreeSet<Tp> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|tp| {
            (
                tp["topic"].as_str().unwrap().to_string(),
                u32::try_from(tp["partition"].as_u64().unwrap()).unwrap(),
            )
        })
        .collect()
}

fn partitions(topic: &str, range: std::ops::Range<u32>) -> BTreeSet<Tp> {
    range.map(|p| (topic.to_string(), p)).collect()
}

/// Produces `count` records to one partition, value = index; asserts they got consecutive offsets.
async fn produce_n(api: &Api, topic: &str, partition: u32, count: u64) {
    let records: Vec<Value> = (0..count)
        .map(|v| json!({"value": v, "partition": partition}))
        .collect();
    let response = api.produce(topic, &json!({ "records": records })).await;
    assert_eq!(response["offsets"].as_array().unwrap().len() as u64, count);
}

async fn join(api: &Api, group: &str, body: Value) -> (Member, Value) {
    let response = ok_json(
        api.post(&format!("/v1/groups/{group}/members"), &body)
            .await,
    )
    .await;
    let member = Member {
        group: group.to_string(),
        id: response["member_id"].as_str().unwrap().to_string(),
        generation: u32::try_from(response["generation"].as_u64().unwrap()).unwrap(),
    };
    (member, response)
}

async fn heartbeat_raw(api: &Api, member: &Member, generation: u32) -> reqwest::Response {
    api.post(
        &format!(
            "/v1/groups/{}/members/{}/heartbeat",
            member.group, member.id
        ),
        &json!({ "generation": generation }),
    )
    .await
}

/// Heartbeats with the member's generation and adopts the generation of the answer.
async fn heartbeat(api: &Api, member: &mut Member) -> Value {
    let body = ok_json(heartbeat_raw(api, member, member.generation).await).await;
    member.generation = u32::try_from(body["generation"].as_u64().unwrap()).unwrap();
    body
}

/// Heartbeats every member (adopting new generations) until a whole round answers
/// `rebalancing: false` on one generation; returns each member's assignment from the group
/// description, which must show a stable group without double ownership.
async fn settle(api: &Api, members: &mut [Member]) -> BTreeMap<String, BTreeSet<Tp>> {
    for _ in 0..20 {
        let mut settled = true;
        for member in members.iter_mut() {
            let sent = member.generation;
            let body = heartbeat(api, member).await;
            if body["rebalancing"] != false || member.generation != sent {
                settled = false;
            }
        }
        if settled {
            let description = describe(api, &members[0].group).await;
            assert_eq!(description["state"], "stable", "{description}");
            return owners(&description);
        }
    }
    panic!(
        "group {} did not settle within 20 heartbeat rounds: {}",
        members[0].group,
        describe(api, &members[0].group).await
    );
}

async fn describe(api: &Api, group: &str) -> Value {
    api.get_json(&format!("/v1/groups/{group}")).await
}

/// Member id -> partitions it owns, asserting that no partition has two owners.
fn owners(description: &Value) -> BTreeMap<String, BTreeSet<Tp>> {
    let mut owners = BTreeMap::new();
    let mut seen: BTreeMap<Tp, String> = BTreeMap::new();
    for member in description["members"].as_array().unwrap() {
        let id = member["member_id"].as_str().unwrap().to_string();
        let owned = tps(&member["assignment"]);
        for tp in &owned {
            if let Some(other) = seen.insert(tp.clone(), id.clone()) {
                panic!("{tp:?} is owned by both {other} and {id}: {description}");
            }
        }
        owners.insert(id, owned);
    }
    owners
}

fn is_member(description: &Value, member: &Member) -> bool {
    description["members"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["member_id"] == member.id.as_str())
}

/// Waits for the expiry tick to evict `member`; returns the eviction's reason.
async fn wait_evicted(api: &Api, member: &Member) -> String {
    eventually(WAIT, &format!("{} is evicted", member.id), || async {
        !is_member(&describe(api, &member.group).await, member)
    })
    .await;
    let description = describe(api, &member.group).await;
    let eviction = description["evictions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["member_id"] == member.id.as_str())
        .unwrap_or_else(|| panic!("no eviction of {} in {description}", member.id));
    eviction["reason"].as_str().unwrap().to_string()
}

async fn poll_raw(api: &Api, member: &Member, query: &str) -> reqwest::Response {
    api.get(&format!(
        "/v1/groups/{}/members/{}/records?generation={}&{query}",
        member.group, member.id, member.generation
    ))
    .await
}

async fn poll(api: &Api, member: &Member, query: &str) -> Value {
    ok_json(poll_raw(api, member, query).await).await
}

/// (partition, offset) of the records in a member fetch answer.
fn fetched(body: &Value) -> Vec<(u32, u64)> {
    body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                u32::try_from(r["partition"].as_u64().unwrap()).unwrap(),
                r["offset"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Polls until a poll returns nothing; returns every (partition, offset) read, sorted.
async fn drain(api: &Api, member: &Member) -> Vec<(u32, u64)> {
    let mut all = Vec::new();
    for _ in 0..100 {
        let batch = fetched(&poll(api, member, "max_records=1000").await);
        if batch.is_empty() {
            all.sort_unstable();
            return all;
        }
        all.extend(batch);
    }
    panic!("the member kept receiving records");
}

/// [`drain`] for a member whose group may rebalance meanwhile (the expiry task rebalances
/// when a subscribed topic's partition count changes, on its own schedule): a poll refused as
/// `stale_generation` adopts the new generation and goes on. A rebalance keeps the positions
/// of partitions the member still owns, so nothing is read twice.
async fn drain_through_rebalances(api: &Api, member: &mut Member) -> Vec<(u32, u64)> {
    let mut all = Vec::new();
    for _ in 0..100 {
        let response = poll_raw(api, member, "max_records=1000").await;
        if response.status() == reqwest::StatusCode::CONFLICT {
            expect_error(response, 409, "stale_generation").await;
            heartbeat(api, member).await;
            continue;
        }
        let batch = fetched(&ok_json(response).await);
        if batch.is_empty() {
            all.sort_unstable();
            return all;
        }
        all.extend(batch);
    }
    panic!("the member kept receiving records or kept finding its generation stale");
}

fn expected(ranges: &[(u32, std::ops::Range<u64>)]) -> Vec<(u32, u64)> {
    let mut all: Vec<(u32, u64)> = ranges
        .iter()
        .flat_map(|(p, r)| r.clone().map(move |o| (*p, o)))
        .collect();
    all.sort_unstable();
    all
}

async fn commit_raw(
    api: &Api,
    group: &str,
    member: Option<&Member>,
    offsets: &[(&str, u32, u64)],
) -> reqwest::Response {
    let offsets: Vec<Value> = offsets
        .iter()
        .map(|(t, p, o)| json!({"topic": t, "partition": p, "offset": o}))
        .collect();
    let mut body = json!({ "offsets": offsets });
    if let Some(member) = member {
        body["member_id"] = json!(member.id);
        body["generation"] = json!(member.generation);
    }
    api.post(&format!("/v1/groups/{group}/offsets"), &body)
        .await
}

async fn commit(api: &Api, group: &str, member: Option<&Member>, offsets: &[(&str, u32, u64)]) {
    ok_json(commit_raw(api, group, member, offsets).await).await;
}

/// The group's committed offsets by partition.
/// A group's committed offsets with their metadata, as GET /v1/groups/{group}/offsets shows them.
async fn committed_with_metadata(api: &Api, group: &str) -> BTreeMap<Tp, (u64, String)> {
    let body = api.get_json(&format!("/v1/groups/{group}/offsets")).await;
    body["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let tp = (
                o["topic"].as_str().unwrap().to_string(),
                u32::try_from(o["partition"].as_u64().unwrap()).unwrap(),
            );
            let committed = (
                o["offset"].as_u64().unwrap(),
                o["metadata"].as_str().unwrap().to_string(),
            );
            (tp, committed)
        })
        .collect()
}

async fn committed(api: &Api, group: &str) -> BTreeMap<Tp, u64> {
    committed_with_metadata(api, group)
        .await
        .into_iter()
        .map(|(tp, (offset, _))| (tp, offset))
        .collect()
}

fn offsets_map(entries: &[(&str, u32, u64)]) -> BTreeMap<Tp, u64> {
    entries
        .iter()
        .map(|(t, p, o)| (((*t).to_string(), *p), *o))
        .collect()
}

async fn delete(api: &Api, path: &str) -> reqwest::Response {
    api.client.delete(api.url(path)).send().await.unwrap()
}

async fn in_process() -> (Arc<ManualClock>, InProcessServer, Api) {
    let clock = ManualClock::new(START_MS);
    let server = InProcessServer::start(Arc::clone(&clock)).await;
    let api = server.api();
    (clock, server, api)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_crashes_before_an_explicit_commit_rereads_exactly_the_uncommitted_records()
{
    let (clock, server, api) = in_process().await;
    api.create_topic("orders", 2).await;
    produce_n(&api, "orders", 0, 10).await;
    produce_n(&api, "orders", 1, 10).await;

    let join_body = json!({"topics": ["orders"], "auto_offset_reset": "earliest",
                           "session_timeout_ms": 10_000});
    let (first, joined) = join(&api, "crashy", join_body).await;
    assert_eq!(tps(&joined["assignment"]), partitions("orders", 0..2));
    assert_eq!(
        drain(&api, &first).await,
        expected(&[(0, 0..10), (1, 0..10)])
    );
    // Processed orders/0 up to 5 and orders/1 up to 3, committed that, then crashed.
    commit(
        &api,
        "crashy",
        Some(&first),
        &[("orders", 0, 6), ("orders", 1, 4)],
    )
    .await;
    clock.advance(10_000);
    wait_evicted(&api, &first).await;

    // The replacement starts at the committed offsets: not earliest, not latest.
    let (second, _) = join(
        &api,
        "crashy",
        json!({"topics": ["orders"], "auto_offset_reset": "latest"}),
    )
    .await;
    assert_eq!(
        drain(&api, &second).await,
        expected(&[(0, 6..10), (1, 4..10)])
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_crashes_before_its_next_poll_commits_rereads_exactly_the_uncommitted_records()
 {
    let (clock, server, api) = in_process().await;
    api.create_topic("orders", 1).await;
    produce_n(&api, "orders", 0, 10).await;

    let (first, _) = join(
        &api,
        "autocommit",
        json!({"topics": ["orders"], "auto_offset_reset": "earliest", "session_timeout_ms": 10_000}),
    )
    .await;
    let batch = poll(&api, &first, "max_records=4").await;
    assert_eq!(fetched(&batch), expected(&[(0, 0..4)]));
    assert_eq!(batch["positions"][0]["next_offset"], 4);
    // The next poll commits what the previous one returned (0..=3) and returns 4..=7, which the
    // consumer processes and then crashes before another poll commits them.
    let batch = poll(&api, &first, "max_records=4&commit=true").await;
    assert_eq!(fetched(&batch), expected(&[(0, 4..8)]));
    assert_eq!(
        committed(&api, "autocommit").await,
        offsets_map(&[("orders", 0, 4)])
    );
    clock.advance(10_000);
    wait_evicted(&api, &first).await;

    let (second, _) = join(
        &api,
        "autocommit",
        json!({"topics": ["orders"], "auto_offset_reset": "earliest"}),
    )
    .await;
    assert_eq!(drain(&api, &second).await, expected(&[(0, 4..10)]));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_restarting_after_three_hours_of_produce_resumes_at_its_committed_offset() {
    let (clock, server, api) = in_process().await;
    api.create_topic("events", 1).await;
    produce_n(&api, "events", 0, 5).await;
    let (first, _) = join(
        &api,
        "nightly",
        json!({"topics": ["events"], "auto_offset_reset": "earliest", "session_timeout_ms": 30_000}),
    )
    .await;
    assert_eq!(drain(&api, &first).await, expected(&[(0, 0..5)]));
    commit(&api, "nightly", Some(&first), &[("events", 0, 5)]).await;

    // Three hours of produce, one record every five minutes, while the consumer is down.
    for _ in 0..36 {
        clock.advance(5 * 60 * 1000);
        api.produce(
            "events",
            &json!({"records": [{"value": "later", "partition": 0}]}),
        )
        .await;
    }
    let reason = wait_evicted(&api, &first).await;
    assert!(reason.contains("session timeout"), "{reason}");
    expect_error(
        heartbeat_raw(&api, &first, first.generation).await,
        409,
        "unknown_member",
    )
    .await;
    let lag = api.get_json("/v1/groups/nightly/lag").await;
    assert_eq!(lag["total_lag_records"], 36, "{lag}");

    let (second, _) = join(
        &api,
        "nightly",
        json!({"topics": ["events"], "auto_offset_reset": "latest"}),
    )
    .await;
    assert_eq!(drain(&api, &second).await, expected(&[(0, 5..41)]));
    server.stop().await;
}

#[tokio::test]
async fn a_committed_offset_removed_by_delete_records_resets_to_earliest_latest_or_fails_with_none()
{
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("trimmed", 1).await;
    produce_n(&api, "trimmed", 0, 10).await;
    for group in ["to-earliest", "to-latest", "to-none"] {
        commit(&api, group, None, &[("trimmed", 0, 3)]).await;
    }
    commit(&api, "valid-none", None, &[("trimmed", 0, 7)]).await;
    let trimmed = ok_json(
        api.post(
            "/v1/topics/trimmed/partitions/0/delete-records",
            &json!({"offset": 6}),
        )
        .await,
    )
    .await;
    assert_eq!(trimmed["log_start_offset"], 6);

    let (earliest, _) = join(
        &api,
        "to-earliest",
        json!({"topics": ["trimmed"], "auto_offset_reset": "earliest"}),
    )
    .await;
    assert_eq!(drain(&api, &earliest).await, expected(&[(0, 6..10)]));

    let (latest, _) = join(
        &api,
        "to-latest",
        json!({"topics": ["trimmed"], "auto_offset_reset": "latest"}),
    )
    .await;
    let body = poll(&api, &latest, "").await;
    assert_eq!(fetched(&body), []);
    assert_eq!(body["positions"][0]["next_offset"], 10, "{body}");
    produce_n(&api, "trimmed", 0, 1).await;
    assert_eq!(drain(&api, &latest).await, expected(&[(0, 10..11)]));

    let (none, _) = join(
        &api,
        "to-none",
        json!({"topics": ["trimmed"], "auto_offset_reset": "none"}),
    )
    .await;
    let body = expect_error(poll_raw(&api, &none, "").await, 409, "no_valid_offset").await;
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("trimmed/0"), "{message}");
    assert_eq!(
        committed(&api, "to-none").await,
        offsets_map(&[("trimmed", 0, 3)])
    );

    // `none` with a committed offset that still exists reads from it.
    let (valid, _) = join(
        &api,
        "valid-none",
        json!({"topics": ["trimmed"], "auto_offset_reset": "none"}),
    )
    .await;
    assert_eq!(drain(&api, &valid).await, expected(&[(0, 7..11)]));
}

async fn join_many(api: &Api, group: &str, topic: &str, count: usize) -> Vec<Member> {
    let mut members = Vec::new();
    for _ in 0..count {
        members.push(join(api, group, json!({"topics": [topic]})).await.0);
    }
    members
}

#[tokio::test]
async fn twelve_partitions_and_four_members_get_three_partitions_each() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("wide", 12).await;
    let mut members = join_many(&api, "four", "wide", 4).await;
    let owners = settle(&api, &mut members).await;
    assert_eq!(owners.len(), 4);
    let mut union = BTreeSet::new();
    for (member, owned) in &owners {
        assert_eq!(owned.len(), 3, "{member} owns {owned:?}");
        union.extend(owned.iter().cloned());
    }
    assert_eq!(union, partitions("wide", 0..12));
    // Each member's own view agrees with the description.
    for member in &mut members {
        let body = heartbeat(&api, member).await;
        assert_eq!(tps(&body["assignment"]), owners[&member.id]);
    }
}

#[tokio::test]
async fn four_partitions_and_six_members_leave_two_members_idle() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("narrow", 4).await;
    for partition in 0..4 {
        produce_n(&api, "narrow", partition, 3).await;
    }
    let mut members = join_many(&api, "six", "narrow", 6).await;
    let owners = settle(&api, &mut members).await;
    let mut sizes: Vec<usize> = owners.values().map(BTreeSet::len).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [0, 0, 1, 1, 1, 1], "{owners:?}");
    let union: BTreeSet<Tp> = owners.values().flatten().cloned().collect();
    assert_eq!(union, partitions("narrow", 0..4));
    // An idle member stays in the group and reads nothing.
    for member in &members {
        if owners[&member.id].is_empty() {
            let body = poll(&api, member, "").await;
            assert_eq!(fetched(&body), [], "{body}");
            assert_eq!(body["positions"], json!([]), "{body}");
        }
    }
}

/// Describes `group` in a loop until stopped, asserting at every look that no partition has two
/// owners; returns how many descriptions it checked.
// A background poller paced so it does not spin.
#[allow(clippy::disallowed_methods)]
fn watch_ownership(
    api: &Api,
    group: &str,
    stop: &Arc<AtomicBool>,
) -> tokio::task::JoinHandle<usize> {
    let api = api.clone();
    let group = group.to_string();
    let stop = Arc::clone(stop);
    let checks = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while !stop.load(Ordering::SeqCst) {
            owners(&describe(&api, &group).await);
            checks.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        checks.load(Ordering::SeqCst)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_move_only_after_their_owner_acknowledges_or_is_evicted_and_never_have_two_owners()
 {
    let (clock, server, api) = in_process().await;
    api.create_topic("jobs", 6).await;
    let body = json!({"topics": ["jobs"], "session_timeout_ms": 10_000,
                      "max_poll_interval_ms": 86_400_000});
    let stop = Arc::new(AtomicBool::new(false));
    let (a, _) = join(&api, "workers", body.clone()).await;
    // The group exists from the first join on; watching earlier would race with it (404).
    let watcher = watch_ownership(&api, "workers", &stop);
    let (b, _) = join(&api, "workers", body.clone()).await;
    let mut members = vec![a, b];
    let two = settle(&api, &mut members).await;

    // A third member joins: its partitions move only as their old owners acknowledge.
    let (mut third, joined) = join(&api, "workers", body).await;
    assert_eq!(tps(&joined["assignment"]), BTreeSet::new(), "{joined}");
    let description = describe(&api, "workers").await;
    let target = description["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["member_id"] == third.id.as_str())
        .map(|m| tps(&m["target_assignment"]))
        .unwrap();
    assert_eq!(target.len(), 2, "{description}");
    let mut handed: BTreeSet<Tp> = BTreeSet::new();
    for index in 0..2 {
        // An old generation does not acknowledge; the current one does.
        heartbeat(&api, &mut members[index]).await;
        let owned = tps(&heartbeat(&api, &mut third).await["assignment"]);
        assert_eq!(owned, handed, "before {} acknowledged", members[index].id);
        heartbeat(&api, &mut members[index]).await;
        handed.extend(two[&members[index].id].intersection(&target).cloned());
        let owned = tps(&heartbeat(&api, &mut third).await["assignment"]);
        assert_eq!(owned, handed, "after {} acknowledged", members[index].id);
    }
    assert_eq!(handed, target);
    members.push(third);
    let before = settle(&api, &mut members).await;
    let dead = members.pop().unwrap();
    let dead_partitions = before[&dead.id].clone();
    assert_eq!(dead_partitions, target, "{before:?}");

    // The dead member sends nothing more; the others heartbeat every 500 ms of clock time.
    let mut elapsed = 0;
    while elapsed < 10_000 {
        clock.advance(500);
        elapsed += 500;
        for member in &mut members {
            heartbeat(&api, member).await;
        }
        let description = describe(&api, "workers").await;
        let now = owners(&description);
        if elapsed < 10_000 {
            assert_eq!(
                now.get(&dead.id),
                Some(&dead_partitions),
                "at {elapsed} ms the dead member must still own its partitions: {description}"
            );
        }
    }
    wait_evicted(&api, &dead).await;
    // The survivors learn the new generation, acknowledge it and take the partitions over.
    let after = settle(&api, &mut members).await;
    assert_eq!(after.len(), 2);
    let union: BTreeSet<Tp> = after.values().flatten().cloned().collect();
    assert_eq!(union, partitions("jobs", 0..6));
    for tp in &dead_partitions {
        assert!(after.values().any(|owned| owned.contains(tp)), "{tp:?}");
    }
    stop.store(true, Ordering::SeqCst);
    let checks = watcher.await.unwrap();
    assert!(checks > 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombies_commit_is_rejected_and_leaves_the_committed_offset_unchanged() {
    let (clock, server, api) = in_process().await;
    api.create_topic("ledger", 2).await;
    produce_n(&api, "ledger", 0, 10).await;
    produce_n(&api, "ledger", 1, 10).await;
    let body = json!({"topics": ["ledger"], "session_timeout_ms": 10_000,
                      "auto_offset_reset": "earliest"});
    let (zombie, _) = join(&api, "fenced", body.clone()).await;
    drain(&api, &zombie).await;
    commit(
        &api,
        "fenced",
        Some(&zombie),
        &[("ledger", 0, 5), ("ledger", 1, 5)],
    )
    .await;
    let kept = offsets_map(&[("ledger", 0, 5), ("ledger", 1, 5)]);

    // Stale generation: another member joined, the zombie did not heartbeat since.
    let (mut live, _) = join(&api, "fenced", body).await;
    assert!(live.generation > zombie.generation);
    for (partition, offset) in [(0, 9), (1, 9)] {
        expect_error(
            commit_raw(
                &api,
                "fenced",
                Some(&zombie),
                &[("ledger", partition, offset)],
            )
            .await,
            409,
            "stale_generation",
        )
        .await;
    }
    expect_error(poll_raw(&api, &zombie, "").await, 409, "stale_generation").await;
    expect_error(
        poll_raw(&api, &live, "max_records=0").await,
        400,
        "bad_query",
    )
    .await;
    assert_eq!(committed(&api, "fenced").await, kept);
    // Without member id while the group has members: refused too.
    expect_error(
        commit_raw(&api, "fenced", None, &[("ledger", 0, 9)]).await,
        409,
        "conflict",
    )
    .await;

    // Evicted: the zombie stops, the live member keeps heartbeating.
    clock.advance(6_000);
    heartbeat(&api, &mut live).await;
    clock.advance(5_000);
    heartbeat(&api, &mut live).await;
    wait_evicted(&api, &zombie).await;
    let current = u32::try_from(
        describe(&api, "fenced").await["generation"]
            .as_u64()
            .unwrap(),
    )
    .unwrap();
    let up_to_date_zombie = Member {
        generation: current,
        ..zombie.clone()
    };
    expect_error(
        commit_raw(
            &api,
            "fenced",
            Some(&up_to_date_zombie),
            &[("ledger", 0, 9)],
        )
        .await,
        409,
        "unknown_member",
    )
    .await;
    expect_error(
        commit_raw(&api, "fenced", Some(&zombie), &[("ledger", 1, 9)]).await,
        409,
        "unknown_member",
    )
    .await;
    assert_eq!(committed(&api, "fenced").await, kept);

    // The live owner still commits.
    let owned = settle(&api, std::slice::from_mut(&mut live)).await;
    assert_eq!(owned[&live.id], partitions("ledger", 0..2));
    commit(&api, "fenced", Some(&live), &[("ledger", 0, 9)]).await;
    assert_eq!(
        committed(&api, "fenced").await,
        offsets_map(&[("ledger", 0, 9), ("ledger", 1, 5)])
    );
    server.stop().await;
}

/// Group -> (topic, partition) -> (offset, metadata) of the last acknowledged commits.
type Acknowledged = BTreeMap<String, BTreeMap<Tp, (u64, String)>>;

/// Five groups commit concurrently, each ten times in sequence over all four partitions of
/// `durable`; records what was acknowledged last.
async fn commit_rounds(api: &Api, round: u64, acknowledged: &mut Acknowledged) {
    let tasks = (0..5).map(|g| {
        let api = api.clone();
        async move {
            let group = format!("durable-{g}");
            let mut last = BTreeMap::new();
            for i in 0..10u64 {
                let offsets: Vec<Value> = (0..4u32)
                    .map(|p| {
                        json!({"topic": "durable", "partition": p,
                               "offset": round * 100 + i * 5 + u64::from(p) + g,
                               "metadata": format!("round {round} commit {i}")})
                    })
                    .collect();
                let response = api
                    .post(
                        &format!("/v1/groups/{group}/offsets"),
                        &json!({ "offsets": offsets }),
                    )
                    .await;
                ok_json(response).await;
                for o in offsets {
                    let p = u32::try_from(o["partition"].as_u64().unwrap()).unwrap();
                    last.insert(
                        ("durable".to_string(), p),
                        (
                            o["offset"].as_u64().unwrap(),
                            o["metadata"].as_str().unwrap().to_string(),
                        ),
                    );
                }
            }
            (group, last)
        }
    });
    for (group, last) in futures::future::join_all(tasks).await {
        acknowledged.insert(group, last);
    }
}

async fn assert_acknowledged(api: &Api, acknowledged: &Acknowledged) {
    for (group, expected) in acknowledged {
        let actual = committed_with_metadata(api, group).await;
        assert_eq!(&actual, expected, "group {group}");
    }
    let list = api.get_json("/v1/groups").await;
    let names: BTreeSet<&str> = list["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    for group in acknowledged.keys() {
        assert!(
            names.contains(group.as_str()),
            "{group} missing from {list}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restart_by_kill_9_or_sigterm_keeps_every_acknowledged_commit() {
    let mut server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("durable", 4).await;
    // Enough records for every commit below: one past the high watermark is refused.
    for partition in 0..4 {
        produce_n(&api, "durable", partition, 360).await;
    }
    let mut acknowledged = Acknowledged::new();
    commit_rounds(&api, 1, &mut acknowledged).await;
    // A member's commit is acknowledged the same way.
    let (member, _) = join(&api, "durable-member", json!({"topics": ["durable"]})).await;
    commit(&api, "durable-member", Some(&member), &[("durable", 2, 42)]).await;
    acknowledged.insert(
        "durable-member".into(),
        BTreeMap::from([(("durable".to_string(), 2), (42, String::new()))]),
    );

    server.kill_9();
    server.restart();
    let api = Api::new(&server);
    assert_acknowledged(&api, &acknowledged).await;

    commit_rounds(&api, 2, &mut acknowledged).await;
    server.restart(); // SIGTERM, then start again
    let api = Api::new(&server);
    assert_acknowledged(&api, &acknowledged).await;

    // And once more after a crash that follows a restart.
    commit_rounds(&api, 3, &mut acknowledged).await;
    server.kill_9();
    server.restart();
    assert_acknowledged(&Api::new(&server), &acknowledged).await;
}

#[tokio::test]
async fn three_groups_on_one_topic_keep_independent_offsets() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("shared", 2).await;
    produce_n(&api, "shared", 0, 10).await;
    produce_n(&api, "shared", 1, 10).await;
    let groups = [("alpha", 3u64), ("beta", 7), ("gamma", 15)];
    let mut commits = BTreeMap::new();
    for (group, read) in groups {
        let (member, _) = join(
            &api,
            group,
            json!({"topics": ["shared"], "auto_offset_reset": "earliest"}),
        )
        .await;
        let mut positions = BTreeMap::new();
        let mut total = 0;
        while total < read {
            let body = poll(&api, &member, &format!("max_records={}", read - total)).await;
            total += fetched(&body).len() as u64;
            for p in body["positions"].as_array().unwrap() {
                positions.insert(
                    u32::try_from(p["partition"].as_u64().unwrap()).unwrap(),
                    p["next_offset"].as_u64().unwrap(),
                );
            }
        }
        let offsets: Vec<(&str, u32, u64)> =
            positions.iter().map(|(p, o)| ("shared", *p, *o)).collect();
        commit(&api, group, Some(&member), &offsets).await;
        assert_eq!(positions.values().sum::<u64>(), read);
        assert_eq!(
            delete(&api, &format!("/v1/groups/{group}/members/{}", member.id))
                .await
                .status()
                .as_u16(),
            204
        );
        commits.insert(group, offsets_map(&offsets));
    }
    for (group, read) in groups {
        assert_eq!(committed(&api, group).await, commits[group], "{group}");
        let lag = api.get_json(&format!("/v1/groups/{group}/lag")).await;
        assert_eq!(lag["total_lag_records"], 20 - read, "{group}: {lag}");
    }

    // Deleting one group's offsets leaves the others alone.
    assert_eq!(
        delete(&api, "/v1/groups/beta/offsets")
            .await
            .status()
            .as_u16(),
        204
    );
    for group in ["alpha", "gamma"] {
        assert_eq!(committed(&api, group).await, commits[group], "{group}");
    }
    // The group goes as a whole, though it once had members: it stayed listed and described,
    // and a second delete answered 204 again.
    expect_error(api.get("/v1/groups/beta").await, 404, "group_not_found").await;
    let listed = api.get_json("/v1/groups").await.to_string();
    assert!(!listed.contains("\"beta\""), "{listed}");
    assert!(listed.contains("\"alpha\""), "{listed}");
    expect_error(
        delete(&api, "/v1/groups/beta/offsets").await,
        404,
        "group_not_found",
    )
    .await;

    // A new member of each remaining group resumes at that group's own offsets.
    for group in ["alpha", "gamma"] {
        let (member, _) = join(
            &api,
            group,
            json!({"topics": ["shared"], "auto_offset_reset": "latest"}),
        )
        .await;
        let ranges: Vec<(u32, std::ops::Range<u64>)> = commits[group]
            .iter()
            .map(|((_, p), o)| (*p, *o..10))
            .collect();
        assert_eq!(drain(&api, &member).await, expected(&ranges), "{group}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_heartbeats_but_never_fetches_is_evicted_after_max_poll_interval_with_a_reason()
 {
    let (clock, server, api) = in_process().await;
    api.create_topic("slow", 2).await;
    let body = json!({"topics": ["slow"], "session_timeout_ms": 10_000,
                      "max_poll_interval_ms": 30_000});
    let (stuck, _) = join(&api, "stuck", body.clone()).await;
    let (busy, _) = join(&api, "stuck", body).await;
    let mut members = vec![stuck, busy];
    settle(&api, &mut members).await;
    let [mut stuck, mut busy] = <[Member; 2]>::try_from(members).unwrap();

    let mut elapsed = 0;
    while elapsed < 30_000 {
        clock.advance(5_000);
        elapsed += 5_000;
        // `stuck` heartbeats (its process is alive) but never fetches; `busy` fetches.
        heartbeat(&api, &mut stuck).await;
        heartbeat(&api, &mut busy).await;
        poll(&api, &busy, "").await;
        if elapsed < 30_000 {
            let description = describe(&api, "stuck").await;
            assert!(
                is_member(&description, &stuck),
                "{elapsed} ms: {description}"
            );
        }
    }
    let reason = wait_evicted(&api, &stuck).await;
    assert!(reason.contains("max_poll_interval_ms"), "{reason}");
    assert!(is_member(&describe(&api, "stuck").await, &busy));
    expect_error(
        heartbeat_raw(&api, &stuck, stuck.generation).await,
        409,
        "unknown_member",
    )
    .await;
    server.stop().await;
}

#[tokio::test]
async fn a_static_member_that_rejoins_keeps_its_partitions_without_a_generation_bump_and_fences_its_old_id()
 {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("pods", 4).await;
    let (a, _) = join(
        &api,
        "statics",
        json!({"topics": ["pods"], "instance_id": "pod-a"}),
    )
    .await;
    let (b, _) = join(
        &api,
        "statics",
        json!({"topics": ["pods"], "instance_id": "pod-b"}),
    )
    .await;
    let mut members = vec![a, b];
    let before = settle(&api, &mut members).await;
    let [a, mut b] = <[Member; 2]>::try_from(members).unwrap();
    let generation = a.generation;

    let (restarted, body) = join(
        &api,
        "statics",
        json!({"topics": ["pods"], "instance_id": "pod-a"}),
    )
    .await;
    assert_ne!(restarted.id, a.id);
    assert_eq!(restarted.generation, generation, "no rebalance: {body}");
    assert_eq!(tps(&body["assignment"]), before[&a.id]);
    assert_eq!(body["rebalancing"], false);
    let description = describe(&api, "statics").await;
    assert_eq!(description["generation"], generation);
    let after = owners(&description);
    assert_eq!(after.len(), 2);
    assert_eq!(after[&restarted.id], before[&a.id]);
    assert_eq!(after[&b.id], before[&b.id]);

    expect_error(
        heartbeat_raw(&api, &a, generation).await,
        409,
        "unknown_member",
    )
    .await;
    expect_error(poll_raw(&api, &a, "").await, 409, "unknown_member").await;
    let owned: Vec<(&str, u32, u64)> = before[&a.id].iter().map(|(_, p)| ("pods", *p, 0)).collect();
    expect_error(
        commit_raw(&api, "statics", Some(&a), &owned).await,
        409,
        "unknown_member",
    )
    .await;
    commit(&api, "statics", Some(&restarted), &owned).await;
    let body = heartbeat(&api, &mut b).await;
    assert_eq!(b.generation, generation);
    assert_eq!(tps(&body["assignment"]), before[&b.id]);
}

#[tokio::test]
async fn a_static_member_restarting_without_committing_rereads_from_the_committed_offset() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("pod-input", 1).await;
    produce_n(&api, "pod-input", 0, 10).await;
    let body = json!({"topics": ["pod-input"], "instance_id": "pod-0",
                      "auto_offset_reset": "earliest"});
    let (first, _) = join(&api, "restarts", body.clone()).await;
    assert_eq!(drain(&api, &first).await, expected(&[(0, 0..10)]));
    commit(&api, "restarts", Some(&first), &[("pod-input", 0, 3)]).await;

    // The pod crashes having processed 0..=2 and comes back with the same instance id: a new
    // process that knows nothing of the old one's fetches. Its usual loop polls with commit=true.
    let (second, _) = join(&api, "restarts", body).await;
    let batch = poll(&api, &second, "max_records=1000&commit=true").await;
    assert_eq!(
        committed(&api, "restarts").await,
        offsets_map(&[("pod-input", 0, 3)]),
        "the restarted member committed records it never received"
    );
    assert_eq!(fetched(&batch), expected(&[(0, 3..10)]));
}

/// An open SSE connection to a member's records.
struct MemberStream {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    parser: SseParser,
    pending: std::collections::VecDeque<SseEvent>,
}

impl MemberStream {
    async fn open(api: &Api, member: &Member) -> MemberStream {
        let response = api
            .client
            .get(api.url(&format!(
                "/v1/groups/{}/members/{}/records?generation={}",
                member.group, member.id, member.generation
            )))
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        MemberStream {
            body: response.bytes_stream().boxed(),
            parser: SseParser::default(),
            pending: std::collections::VecDeque::new(),
        }
    }

    /// The next event other than a ping, within 10 s; `None` when the stream ended.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                if event.event == "ping" {
                    continue;
                }
                return Some(event);
            }
            let chunk = tokio::time::timeout(WAIT, self.body.next())
                .await
                .expect("no SSE event within 10 s")?
                .unwrap();
            self.pending.extend(self.parser.push(&chunk));
        }
    }

    /// Records from `records` events until `count` arrived.
    async fn records(&mut self, count: usize) -> Vec<(u32, u64)> {
        let mut all = Vec::new();
        while all.len() < count {
            let event = self.next().await.expect("the stream ended");
            assert_eq!(event.event, "records", "{event:?}");
            all.extend(fetched(&serde_json::from_str(&event.data).unwrap()));
        }
        all.sort_unstable();
        all
    }
}

#[tokio::test]
async fn the_member_sse_stream_delivers_records_and_ends_with_a_rebalance_event_when_another_member_joins()
 {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("live", 2).await;
    produce_n(&api, "live", 0, 3).await;
    produce_n(&api, "live", 1, 3).await;
    let (member, _) = join(
        &api,
        "streamers",
        json!({"topics": ["live"], "auto_offset_reset": "earliest"}),
    )
    .await;
    let mut stream = MemberStream::open(&api, &member).await;
    assert_eq!(stream.records(6).await, expected(&[(0, 0..3), (1, 0..3)]));
    // Records produced while the stream is open arrive on it.
    produce_n(&api, "live", 1, 2).await;
    assert_eq!(stream.records(2).await, expected(&[(1, 3..5)]));

    join(&api, "streamers", json!({"topics": ["live"]})).await;
    let event = stream.next().await.expect("a rebalance event");
    assert_eq!(event.event, "rebalance", "{event:?}");
    let data: Value = serde_json::from_str(&event.data).unwrap();
    assert_eq!(data["error"]["code"], "stale_generation", "{data}");
    assert_eq!(
        stream.next().await,
        None,
        "the stream ends after the rebalance event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_counts_records_and_the_age_of_the_record_at_the_committed_offset_and_is_zero_when_caught_up()
 {
    let (clock, server, api) = in_process().await;
    api.create_topic("aging", 2).await;
    let first_ts = START_MS - 600_000;
    let records: Vec<Value> = (0..10)
        .map(|i| json!({"value": i, "partition": 0, "timestamp": first_ts + i * 1_000}))
        .collect();
    api.produce("aging", &json!({ "records": records })).await;
    produce_n(&api, "aging", 1, 4).await;
    commit(&api, "lagging", None, &[("aging", 0, 4), ("aging", 1, 4)]).await;

    let lag_of = |body: &Value, partition: u64| {
        body["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["partition"] == partition)
            .unwrap_or_else(|| panic!("no partition {partition} in {body}"))
            .clone()
    };
    let lag = api.get_json("/v1/groups/lagging/lag").await;
    let age = START_MS - (first_ts + 4_000);
    assert_eq!(lag_of(&lag, 0)["lag_records"], 6, "{lag}");
    assert_eq!(lag_of(&lag, 0)["committed_offset"], 4, "{lag}");
    assert_eq!(lag_of(&lag, 0)["high_watermark"], 10, "{lag}");
    assert_eq!(lag_of(&lag, 0)["lag_ms"], age, "{lag}");
    assert_eq!(lag_of(&lag, 1)["lag_records"], 0, "{lag}");
    assert_eq!(lag_of(&lag, 1)["lag_ms"], 0, "caught up: {lag}");
    assert_eq!(lag["total_lag_records"], 6);
    assert_eq!(lag["max_lag_records"], 6);
    assert_eq!(lag["max_lag_ms"], age);

    clock.advance(60_000);
    let lag = api.get_json("/v1/groups/lagging/lag").await;
    assert_eq!(lag_of(&lag, 0)["lag_ms"], age + 60_000, "{lag}");
    assert_eq!(lag["max_lag_ms"], age + 60_000);

    commit(&api, "lagging", None, &[("aging", 0, 10)]).await;
    let lag = api.get_json("/v1/groups/lagging/lag").await;
    assert_eq!(lag_of(&lag, 0)["lag_records"], 0, "{lag}");
    assert_eq!(lag_of(&lag, 0)["lag_ms"], 0, "{lag}");
    assert_eq!(lag["total_lag_records"], 0);
    assert_eq!(lag["max_lag_ms"], 0);
    server.stop().await;
}

/// Instance ids follow Kafka's `group.instance.id` rule; they start member ids, which go into
/// URL paths (an empty one, 200 KB or a `/` were accepted).
#[tokio::test]
async fn an_instance_id_outside_kafkas_rule_is_refused() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("inst", 1).await;
    for bad in [String::new(), "a/b".into(), "x".repeat(250), "pod 1".into()] {
        let refused = expect_error(
            api.post(
                "/v1/groups/i/members",
                &json!({"topics": ["inst"], "instance_id": bad}),
            )
            .await,
            422,
            "invalid",
        )
        .await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("instance_id"), "{message}");
    }
    let (member, _) = join(
        &api,
        "i",
        json!({"topics": ["inst"], "instance_id": "pod-1.a_b"}),
    )
    .await;
    assert!(member.id.starts_with("pod-1.a_b"), "{}", member.id);
}

/// A join with another strategy than the group's is refused with the names a client sends
/// (it said "uses the Range strategy", a name no request can carry).
#[tokio::test]
async fn a_join_with_another_strategy_names_both_as_the_api_does() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("strat", 2).await;
    join(
        &api,
        "s",
        json!({"topics": ["strat"], "assignment_strategy": "range"}),
    )
    .await;
    let refused = expect_error(
        api.post(
            "/v1/groups/s/members",
            &json!({"topics": ["strat"], "assignment_strategy": "round_robin"}),
        )
        .await,
        409,
        "conflict",
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("\"range\"") && message.contains("\"round_robin\""),
        "{message}"
    );
}

/// Commit metadata has Kafka's limit, checked before anything is stored (2 MB of it used to
/// fail deep in `__consumer_offsets` with advice about produce), and a request naming one
/// partition twice is refused instead of the last offset silently winning.
#[tokio::test]
async fn commits_with_oversized_metadata_or_a_repeated_partition_are_refused() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("meta", 1).await;
    produce_n(&api, "meta", 0, 5).await;
    let body = |metadata: String| json!({"offsets": [{"topic": "meta", "partition": 0, "offset": 3, "metadata": metadata}]});
    let refused = expect_error(
        api.post("/v1/groups/m/offsets", &body("é".repeat(4097)))
            .await,
        422,
        "invalid",
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("metadata") && message.contains("4096"),
        "{message}"
    );
    ok_json(
        api.post("/v1/groups/m/offsets", &body("é".repeat(4096)))
            .await,
    )
    .await;
    let twice = json!({"offsets": [
        {"topic": "meta", "partition": 0, "offset": 4},
        {"topic": "meta", "partition": 0, "offset": 1},
    ]});
    let refused = expect_error(
        api.post("/v1/groups/m/offsets", &twice).await,
        422,
        "invalid",
    )
    .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("repeats"),
        "{refused}"
    );
    assert_eq!(
        committed(&api, "m").await.get(&("meta".to_string(), 0)),
        Some(&3)
    );
}

/// A commit below the log start (records deleted since) no longer counts: the lag follows the
/// members' reset policy, where they really start. It counted from the log start, so a group
/// whose members reset to `latest` showed records due that they never read.
#[tokio::test]
async fn lag_of_a_commit_below_the_log_start_follows_the_reset_policy() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("trimmed", 1).await;
    produce_n(&api, "trimmed", 0, 10).await;
    commit(&api, "late", None, &[("trimmed", 0, 2)]).await;
    let deleted = api
        .post(
            "/v1/topics/trimmed/partitions/0/delete-records",
            &json!({"offset": 5}),
        )
        .await;
    assert_eq!(deleted.status(), 200);
    let (member, _) = join(
        &api,
        "late",
        json!({"topics": ["trimmed"], "auto_offset_reset": "latest"}),
    )
    .await;
    let lag = api.get_json("/v1/groups/late/lag").await;
    let partition = &lag["partitions"][0];
    assert_eq!(partition["committed_offset"], 2, "{lag}");
    assert_eq!(partition["basis"], "latest", "{lag}");
    assert_eq!(partition["start_offset"], 10, "{lag}");
    assert_eq!(partition["lag_records"], 0, "{lag}");
    let fetched = api
        .get_json(&format!(
            "/v1/groups/late/members/{}/records?generation={}",
            member.id, member.generation
        ))
        .await;
    assert_eq!(
        fetched["positions"][0]["next_offset"], 10,
        "the member starts there: {fetched}"
    );
}

#[tokio::test]
async fn offsets_reset_is_refused_while_members_are_live_unless_forced_and_moves_to_every_target() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("replay", 1).await;
    let base = 1_700_000_000_000_i64;
    let records: Vec<Value> = (0..10)
        .map(|i| json!({"value": i, "partition": 0, "timestamp": base + i * 1_000}))
        .collect();
    api.produce("replay", &json!({ "records": records })).await;
    commit(&api, "replayers", None, &[("replay", 0, 5)]).await;
    let reset = |body: Value| {
        let api = api.clone();
        async move { api.post("/v1/groups/replayers/offsets/reset", &body).await }
    };
    let at = |offset: u64| offsets_map(&[("replay", 0, offset)]);

    let (member, _) = join(&api, "replayers", json!({"topics": ["replay"]})).await;
    for body in [
        json!({"topic": "replay", "to": "earliest"}),
        json!({"topic": "replay", "to": "latest"}),
        json!({"topic": "replay", "to": "timestamp", "value": base}),
        json!({"topic": "replay", "to": "offset", "value": 1}),
        json!({"topic": "replay", "to": "shift", "value": -1}),
    ] {
        expect_error(reset(body.clone()).await, 409, "conflict").await;
        assert_eq!(committed(&api, "replayers").await, at(5), "after {body}");
    }
    ok_json(reset(json!({"topic": "replay", "to": "offset", "value": 2, "force": true})).await)
        .await;
    assert_eq!(committed(&api, "replayers").await, at(2));
    assert_eq!(
        delete(&api, &format!("/v1/groups/replayers/members/{}", member.id))
            .await
            .status()
            .as_u16(),
        204
    );

    // Without live members every target works without force.
    for (body, offset) in [
        (json!({"topic": "replay", "to": "latest"}), 10),
        (json!({"topic": "replay", "to": "earliest"}), 0),
        (
            json!({"topic": "replay", "to": "timestamp", "value": base + 3_500}),
            4,
        ),
        (json!({"topic": "replay", "to": "offset", "value": 7}), 7),
        (json!({"topic": "replay", "to": "shift", "value": -2}), 5),
        (json!({"topic": "replay", "to": "shift", "value": 100}), 10),
        (json!({"topic": "replay", "to": "shift", "value": -100}), 0),
    ] {
        ok_json(reset(body.clone()).await).await;
        assert_eq!(
            committed(&api, "replayers").await,
            at(offset),
            "after {body}"
        );
    }
    expect_error(
        reset(json!({"topic": "replay", "to": "offset", "value": 11})).await,
        416,
        "offset_out_of_range",
    )
    .await;
    assert_eq!(committed(&api, "replayers").await, at(0));
}

#[tokio::test]
async fn growing_a_subscribed_topic_starts_a_rebalance_that_assigns_the_new_partitions() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("growing", 2).await;
    let (mut member, _) = join(
        &api,
        "growers",
        json!({"topics": ["growing"], "auto_offset_reset": "earliest"}),
    )
    .await;
    let owned = settle(&api, std::slice::from_mut(&mut member)).await;
    assert_eq!(owned[&member.id], partitions("growing", 0..2));
    let first = member.generation;
    let grown = api
        .post("/v1/topics/growing/partitions", &json!({"partitions": 4}))
        .await;
    assert_eq!(grown.status(), 200);
    produce_n(&api, "growing", 3, 2).await;
    eventually(WAIT, "a heartbeat learns a new generation", || {
        let (api, member) = (api.clone(), member.clone());
        async move {
            let body = ok_json(heartbeat_raw(&api, &member, member.generation).await).await;
            body["generation"].as_u64().unwrap() > u64::from(first)
        }
    })
    .await;
    let owned = settle(&api, std::slice::from_mut(&mut member)).await;
    assert_eq!(owned[&member.id], partitions("growing", 0..4));
    // The records of a new partition are read.
    let read = drain(&api, &member).await;
    assert!(read.contains(&(3, 0)) && read.contains(&(3, 1)), "{read:?}");
}

#[tokio::test]
async fn lag_covers_every_subscribed_partition_and_says_where_it_counts_from() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("fresh", 3).await;
    produce_n(&api, "fresh", 0, 5).await;
    produce_n(&api, "fresh", 1, 3).await;
    let (_member, _) = join(
        &api,
        "newcomers",
        json!({"topics": ["fresh"], "auto_offset_reset": "earliest"}),
    )
    .await;
    let lag = api.get_json("/v1/groups/newcomers/lag").await;
    let rows = lag["partitions"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        3,
        "every subscribed partition, none committed: {lag}"
    );
    for row in rows {
        assert_eq!(row["basis"], "earliest", "{row}");
        assert_eq!(row["committed_offset"], Value::Null, "{row}");
        assert_eq!(row["start_offset"], 0);
    }
    assert_eq!(lag["total_lag_records"], 8, "{lag}");
    let (_late, _) = join(
        &api,
        "tailers",
        json!({"topics": ["fresh"], "auto_offset_reset": "latest"}),
    )
    .await;
    let lag = api.get_json("/v1/groups/tailers/lag").await;
    assert_eq!(
        lag["total_lag_records"], 0,
        "latest starts at the end: {lag}"
    );
    assert!(
        lag["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["basis"] == "latest"),
        "{lag}"
    );
}

/// A deleted topic takes the groups' committed offsets with it (as in Kafka): a new topic of
/// the same name starts at offset 0 again, and an old offset of 5 would make a group skip its
/// first five records without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topics_offsets_do_not_carry_over_to_a_new_topic_of_the_same_name() {
    let (_clock, server, api) = in_process().await;
    api.create_topic("ledger", 1).await;
    api.create_topic("other", 1).await;
    produce_n(&api, "ledger", 0, 6).await;
    produce_n(&api, "other", 0, 6).await;
    commit(&api, "books", None, &[("ledger", 0, 5), ("other", 0, 4)]).await;
    commit(&api, "audit", None, &[("ledger", 0, 2)]).await;
    // A member that lives through the deletion has read up to offset 6.
    let (mut live, _) = join(
        &api,
        "tail",
        json!({"topics": ["ledger"], "auto_offset_reset": "earliest"}),
    )
    .await;
    assert_eq!(drain(&api, &live).await, expected(&[(0, 0..6)]));

    assert_eq!(
        delete(&api, "/v1/topics/ledger").await.status().as_u16(),
        204
    );
    // The group rebalances at once, as in Kafka: nobody is told it owns the deleted topic's
    // partitions any more.
    let description = describe(&api, "tail").await;
    assert!(
        owners(&description)
            .values()
            .flatten()
            .all(|(topic, _)| topic != "ledger"),
        "{description}"
    );
    assert_eq!(
        committed(&api, "books").await,
        offsets_map(&[("other", 0, 4)])
    );
    // A group left with nothing is gone, as after deleting its offsets.
    expect_error(
        api.get("/v1/groups/audit/offsets").await,
        404,
        "group_not_found",
    )
    .await;

    api.create_topic("ledger", 1).await;
    produce_n(&api, "ledger", 0, 7).await;
    assert_eq!(
        drain_through_rebalances(&api, &mut live).await,
        expected(&[(0, 0..7)])
    );
    let (member, _) = join(
        &api,
        "books",
        json!({"topics": ["ledger"], "auto_offset_reset": "earliest"}),
    )
    .await;
    assert_eq!(drain(&api, &member).await, expected(&[(0, 0..7)]));
    server.stop().await;
}

/// A commit past the high watermark names a position no consumer reached: it is refused (416,
/// as a reset to such an offset is), where it used to be stored and show a lag of 0 while the
/// group re-read from its reset policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_past_the_high_watermark_is_refused_and_changes_nothing() {
    let (_clock, server, api) = in_process().await;
    api.create_topic("short", 1).await;
    produce_n(&api, "short", 0, 5).await;
    commit(&api, "g", None, &[("short", 0, 5)]).await;
    let refused = expect_error(
        commit_raw(&api, "g", None, &[("short", 0, 6)]).await,
        416,
        "offset_out_of_range",
    )
    .await;
    assert_eq!(refused["error"]["latest_offset"], 5, "{refused}");
    // Commits below the log start are accepted, so the message names only the upper bound (it
    // said "valid offsets are 0 to 5", as a fetch's does).
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("past the high watermark 5") && !message.contains("valid offsets"),
        "{message}"
    );
    assert_eq!(committed(&api, "g").await, offsets_map(&[("short", 0, 5)]));
    server.stop().await;
}

/// A static member that rejoins with other topics is still the same instance: its old member
/// id is fenced and the group rebalances for the new subscription, so two live members never
/// share an instance id (they both held partitions before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_rejoining_with_other_topics_fences_its_old_id() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("pods", 2).await;
    api.create_topic("logs", 2).await;
    let (old, _) = join(
        &api,
        "statics",
        json!({"topics": ["pods"], "instance_id": "pod-a"}),
    )
    .await;
    let (new, body) = join(
        &api,
        "statics",
        json!({"topics": ["pods", "logs"], "instance_id": "pod-a"}),
    )
    .await;
    assert_ne!(new.id, old.id);
    assert!(new.generation > old.generation, "a rebalance: {body}");
    let description = describe(&api, "statics").await;
    let members = description["members"].as_array().unwrap();
    assert_eq!(members.len(), 1, "{description}");
    assert_eq!(members[0]["member_id"], new.id.as_str(), "{description}");
    expect_error(poll_raw(&api, &old, "").await, 409, "unknown_member").await;
    let mut members = vec![new];
    let owned = settle(&api, &mut members).await;
    let expected: BTreeSet<Tp> = partitions("pods", 0..2)
        .union(&partitions("logs", 0..2))
        .cloned()
        .collect();
    assert_eq!(owned[&members[0].id], expected);
}

/// A partition on its way to a new member is still its old owner's until that owner
/// acknowledges: the old owner may commit what it processed of it (explicitly, or with
/// `commit=true` on its next fetch), so the new owner does not read those records again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_owner_commits_a_partition_on_its_way_to_another_member() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("rv", 2).await;
    produce_n(&api, "rv", 0, 10).await;
    produce_n(&api, "rv", 1, 10).await;
    let reset = json!({"topics": ["rv"], "auto_offset_reset": "earliest"});
    let (mut a, _) = join(&api, "handover", reset.clone()).await;
    assert_eq!(drain(&api, &a).await, expected(&[(0, 0..10), (1, 0..10)]));
    let (mut b, _) = join(&api, "handover", reset).await;
    // A learns the new generation without acknowledging it (its heartbeat names the old one).
    let body = ok_json(heartbeat_raw(&api, &a, a.generation).await).await;
    assert_eq!(body["rebalancing"], true, "{body}");
    a.generation = u32::try_from(body["generation"].as_u64().unwrap()).unwrap();
    // One of the two is moving to B; A may commit both.
    commit(&api, "handover", Some(&a), &[("rv", 0, 9), ("rv", 1, 9)]).await;
    ok_json(poll_raw(&api, &a, "commit=true").await).await;
    assert_eq!(
        committed(&api, "handover").await,
        offsets_map(&[("rv", 0, 10), ("rv", 1, 10)])
    );
    let mut members = vec![a, b.clone()];
    settle(&api, &mut members).await;
    b.generation = members[1].generation;
    assert_eq!(drain(&api, &b).await, Vec::<(u32, u64)>::new());
}

/// A member's long poll ends when the group rebalances: waiting out `max_wait_ms` (up to a
/// minute) would stall the hand-over, since the partitions the member gives up wait for its
/// acknowledgement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_long_poll_ends_when_the_group_rebalances() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("quiet", 2).await;
    let body = json!({"topics": ["quiet"]});
    let (a, _) = join(&api, "waiters", body.clone()).await;
    let poll = {
        let api = api.clone();
        let a = a.clone();
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let answer = ok_json(poll_raw(&api, &a, "max_wait_ms=30000").await).await;
            (answer, started.elapsed())
        })
    };
    api.open_streams_reach(1).await;
    join(&api, "waiters", body).await;
    let (answer, waited) = poll.await.unwrap();
    assert_eq!(fetched(&answer), Vec::<(u32, u64)>::new());
    assert!(
        waited < std::time::Duration::from_secs(20),
        "the poll waited {waited:?} of its 30 s"
    );
    let beat = ok_json(heartbeat_raw(&api, &a, a.generation).await).await;
    assert_eq!(beat["rebalancing"], true, "{beat}");
}

/// Kafka's OffsetDelete: `DELETE /v1/groups/{g}/offsets?topic=t[&partition=p]` drops only those
/// committed offsets and keeps the group; refused while a live member reads the topic. A user
/// tried exactly this and lost the whole group's offsets.
#[tokio::test]
async fn one_topics_or_partitions_offsets_can_be_deleted_and_the_group_stays() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("t", 2).await;
    api.create_topic("u", 1).await;
    for partition in 0..2 {
        produce_n(&api, "t", partition, 3).await;
    }
    produce_n(&api, "u", 0, 3).await;
    commit(&api, "g", None, &[("t", 0, 1), ("t", 1, 2), ("u", 0, 3)]).await;
    let gone = delete(&api, "/v1/groups/g/offsets?topic=t&partition=1").await;
    assert_eq!(gone.status(), 204);
    assert_eq!(
        committed(&api, "g").await,
        offsets_map(&[("t", 0, 1), ("u", 0, 3)])
    );
    let gone = delete(&api, "/v1/groups/g/offsets?topic=u").await;
    assert_eq!(gone.status(), 204);
    assert_eq!(committed(&api, "g").await, offsets_map(&[("t", 0, 1)]));
    // Mistakes are refused and change nothing.
    for (query, status, code) in [
        ("partition=0", 422, "invalid"),
        ("topic=", 422, "invalid"),
        ("topic=nope", 404, "topic_not_found"),
        ("topic=t&partition=9", 404, "partition_not_found"),
        ("topics=t", 400, "bad_query"),
    ] {
        let path = format!("/v1/groups/g/offsets?{query}");
        expect_error(delete(&api, &path).await, status, code).await;
    }
    assert_eq!(committed(&api, "g").await, offsets_map(&[("t", 0, 1)]));
    // A live member of another topic does not hold it up (the whole-group delete it would).
    commit(&api, "g", None, &[("u", 0, 2)]).await;
    let (reader_of_t, _) = join(&api, "g", json!({"topics": ["t"]})).await;
    let gone = delete(&api, "/v1/groups/g/offsets?topic=u").await;
    assert_eq!(gone.status(), 204);
    assert_eq!(committed(&api, "g").await, offsets_map(&[("t", 0, 1)]));
    let left = delete(&api, &format!("/v1/groups/g/members/{}", reader_of_t.id)).await;
    assert_eq!(left.status(), 204);
    // A live member reading the topic would commit again at once.
    let (member, _) = join(&api, "g", json!({"topics": ["t"]})).await;
    let refused = expect_error(
        delete(&api, "/v1/groups/g/offsets?topic=t").await,
        409,
        "conflict",
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("reading this topic"), "{refused}");
    let left = delete(&api, &format!("/v1/groups/g/members/{}", member.id)).await;
    assert_eq!(left.status(), 204);
    let gone = delete(&api, "/v1/groups/g/offsets?topic=t").await;
    assert_eq!(gone.status(), 204);
    assert!(committed(&api, "g").await.is_empty());
}

/// A generation the group never had is a client's bug, not a stale view: a read says so as a
/// heartbeat does (422). A stream resumed at a position outside the log is refused (416), as a
/// resumed partition stream is, instead of replaying from `auto_offset_reset` without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_read_from_the_future_or_resumed_outside_the_log_is_refused() {
    let (_clock, server, api) = in_process().await;
    api.create_topic("events", 1).await;
    produce_n(&api, "events", 0, 5).await;
    let (member, _) = join(
        &api,
        "future",
        json!({"topics": ["events"], "auto_offset_reset": "earliest"}),
    )
    .await;
    let ahead = Member {
        generation: member.generation + 5,
        ..member.clone()
    };
    let refused = expect_error(poll_raw(&api, &ahead, "").await, 422, "invalid").await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("newer than the group's generation"),
        "{refused}"
    );
    expect_error(
        heartbeat_raw(&api, &member, member.generation + 5).await,
        422,
        "invalid",
    )
    .await;

    let stream = |last_event_id: &str| {
        api.client
            .get(api.url(&format!(
                "/v1/groups/future/members/{}/records?generation={}",
                member.id, member.generation
            )))
            .header("accept", "text/event-stream")
            .header("last-event-id", last_event_id.to_string())
            .send()
    };
    // A resume inside the log is taken (the stream then reads on to the end, 5)...
    let resumed = stream("events:0:3").await.unwrap();
    assert_eq!(resumed.status(), 200);
    let first = strata_tests::first_sse_event(resumed, "records", WAIT).await;
    assert!(first.data.contains("\"offset\":3"), "{first:?}");
    // ...one outside it is refused and moves nothing: the member stays at the end, where a
    // moved (then dropped as out of range) position would have sent it back to `earliest`.
    let past_the_end = expect_error(
        stream("events:0:99").await.unwrap(),
        416,
        "offset_out_of_range",
    )
    .await;
    assert_eq!(past_the_end["error"]["latest_offset"], 5, "{past_the_end}");
    assert_eq!(drain(&api, &member).await, expected(&[]));
    // Positions of partitions the member does not own (here of another topic) are ignored
    // unchecked: they would tell the caller about topics it may not read.
    api.create_topic("secret", 1).await;
    let ignored = stream("secret:0:99").await.unwrap();
    assert_eq!(ignored.status(), 200);
    drop(ignored);
    server.stop().await;
}

/// A member that owns no partition (more members than partitions) waits out its long poll, or
/// a rebalance, like any other member: it used to answer at once, so its SSE stream polled
/// without pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_without_partitions_waits_out_its_long_poll() {
    let (_clock, server, api) = in_process().await;
    api.create_topic("single", 1).await;
    let body = json!({"topics": ["single"], "auto_offset_reset": "earliest"});
    let (first, _) = join(&api, "pair", body.clone()).await;
    let (second, _) = join(&api, "pair", body).await;
    let mut members = [first, second];
    let owners = settle(&api, &mut members).await;
    let idle = members
        .iter()
        .find(|m| owners.get(&m.id).is_none_or(BTreeSet::is_empty))
        .expect("one of two members owns nothing")
        .clone();
    let timeouts = || async {
        let text = api.get("/metrics").await.text().await.unwrap();
        text.lines()
            .find(|l| l.starts_with("strata_long_poll_wakeups_total{reason=\"timeout\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .map_or(0.0, |n| n.parse::<f64>().unwrap())
    };
    let before = timeouts().await;
    let polled = poll(&api, &idle, "max_wait_ms=200").await;
    assert_eq!(polled["records"], json!([]), "{polled}");
    assert_eq!(
        timeouts().await,
        before + 1.0,
        "the poll waited until its end"
    );
    server.stop().await;
}

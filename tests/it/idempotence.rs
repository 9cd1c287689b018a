//! Idempotent produce: retries after lost responses never duplicate, sequence gaps and stale
//! epochs are refused, and the dedup state survives restarts and crashes.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use strata_tests::{Api, Server, expect_error, ok_json};

async fn init_producer(api: &Api, producer_id: Option<i64>) -> (i64, i64) {
    let body = match producer_id {
        Some(id) => json!({ "producer_id": id }),
        None => json!({}),
    };
    let identity = ok_json(api.post("/v1/producers", &body).await).await;
    (
        identity["producer_id"].as_i64().unwrap(),
        identity["producer_epoch"].as_i64().unwrap(),
    )
}

fn idempotent_request(id: i64, epoch: i64, sequence: i64, values: &[Value]) -> Value {
    let records: Vec<Value> = values
        .iter()
        .map(|v| json!({"value": v, "partition": 0}))
        .collect();
    json!({
        "records": records,
        "producer": {"producer_id": id, "producer_epoch": epoch, "sequences": {"0": sequence}},
    })
}

fn offsets_of(response: &Value) -> Vec<u64> {
    response["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["offset"].as_u64().unwrap())
        .collect()
}

/// A tiny deterministic PRNG (xorshift64*), so failures replay.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[tokio::test]
async fn retried_produce_after_lost_response_returns_original_offsets_without_appending() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("idem", 2).await;
    let (id, epoch) = init_producer(&api, None).await;
    assert!(id >= 0);
    assert_eq!(epoch, 0);
    // Some other data first, so offsets are not trivially 0.
    api.produce(
        "idem",
        &json!({"records": [{"value": "plain", "partition": 0}]}),
    )
    .await;

    let request = idempotent_request(id, epoch, 0, &[json!("a"), json!("b")]);
    let first = api.produce("idem", &request).await;
    assert_eq!(first["duplicate"], false);
    assert_eq!(offsets_of(&first), vec![1, 2]);
    let end = api.offsets("idem", 0).await["log_end"].clone();

    let retry = api.produce("idem", &request).await;
    assert_eq!(retry["duplicate"], true);
    assert_eq!(offsets_of(&retry), vec![1, 2]);
    assert_eq!(
        api.offsets("idem", 0).await["log_end"],
        end,
        "nothing appended"
    );

    let next = api
        .produce("idem", &idempotent_request(id, epoch, 2, &[json!("c")]))
        .await;
    assert_eq!(next["duplicate"], false);
    assert_eq!(offsets_of(&next), vec![3]);
    let values: Vec<Value> = api.fetch_values("idem", 0, 0).await;
    assert_eq!(
        values,
        vec![json!("plain"), json!("a"), json!("b"), json!("c")]
    );
}

#[tokio::test]
async fn retry_loop_with_randomly_lost_responses_never_duplicates() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("loop", 1).await;
    let (id, epoch) = init_producer(&api, None).await;
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    const TOTAL: u64 = 200;
    let mut sent = 0u64;
    let mut retries = 0;
    let mut acknowledged: Vec<(u64, u64)> = Vec::new();
    while sent < TOTAL {
        let size = (1 + rng.below(5)).min(TOTAL - sent);
        let values: Vec<Value> = (sent..sent + size).map(Value::from).collect();
        let request = idempotent_request(id, epoch, i64::try_from(sent).unwrap(), &values);
        // The response of the first attempts may be "lost": the client never sees it and sends
        // the same request again.
        while rng.below(100) < 40 {
            let lost = api.produce("loop", &request).await;
            assert_eq!(lost["offsets"].as_array().unwrap().len() as u64, size);
            retries += 1;
        }
        let response = api.produce("loop", &request).await;
        for (value, offset) in (sent..sent + size).zip(offsets_of(&response)) {
            acknowledged.push((value, offset));
        }
        sent += size;
    }
    assert!(retries > 20, "the loop retried ({retries})");
    let records = api.fetch_all("loop", 0, 0).await;
    let values: Vec<u64> = records
        .iter()
        .map(|r| r["value"].as_u64().unwrap())
        .collect();
    let unique: BTreeSet<u64> = values.iter().copied().collect();
    assert_eq!(unique.len(), values.len(), "no duplicates");
    assert_eq!(
        values,
        (0..TOTAL).collect::<Vec<_>>(),
        "complete and in order"
    );
    for (value, offset) in acknowledged {
        assert_eq!(value, offset, "acknowledged offset of value {value}");
    }
}

#[tokio::test]
async fn sequence_gap_and_fenced_epoch_are_refused() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("fence", 1).await;
    let (id, epoch) = init_producer(&api, None).await;
    api.produce(
        "fence",
        &idempotent_request(id, epoch, 0, &[json!(0), json!(1)]),
    )
    .await;

    let gap = api
        .post(
            "/v1/topics/fence/records",
            &idempotent_request(id, epoch, 5, &[json!(5)]),
        )
        .await;
    expect_error(gap, 409, "sequence_gap").await;

    let (same_id, new_epoch) = init_producer(&api, Some(id)).await;
    assert_eq!(same_id, id);
    assert_eq!(new_epoch, epoch + 1);
    let stale = api
        .post(
            "/v1/topics/fence/records",
            &idempotent_request(id, epoch, 2, &[json!(2)]),
        )
        .await;
    expect_error(stale, 409, "producer_fenced").await;
    // The new session starts its sequences at 0.
    let fresh = api
        .produce(
            "fence",
            &idempotent_request(id, new_epoch, 0, &[json!("new")]),
        )
        .await;
    assert_eq!(offsets_of(&fresh), vec![2]);
    assert_eq!(api.offsets("fence", 0).await["log_end"], 3);
}

#[tokio::test]
async fn dedup_state_survives_sigterm_and_kill_9() {
    let mut server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("durable", 1).await;
    let (id, epoch) = init_producer(&api, None).await;
    let first = idempotent_request(id, epoch, 0, &[json!(0), json!(1), json!(2)]);
    assert_eq!(
        offsets_of(&api.produce("durable", &first).await),
        vec![0, 1, 2]
    );

    let status = server.terminate();
    assert!(status.success(), "{status}");
    server.restart();
    let api = Api::new(&server);
    let retry = api.produce("durable", &first).await;
    assert_eq!(retry["duplicate"], true);
    assert_eq!(offsets_of(&retry), vec![0, 1, 2]);

    let second = idempotent_request(id, epoch, 3, &[json!(3)]);
    assert_eq!(offsets_of(&api.produce("durable", &second).await), vec![3]);
    server.kill_9();
    server.restart();
    let api = Api::new(&server);
    let retry = api.produce("durable", &second).await;
    assert_eq!(retry["duplicate"], true);
    assert_eq!(offsets_of(&retry), vec![3]);
    let gap = api
        .post(
            "/v1/topics/durable/records",
            &idempotent_request(id, epoch, 9, &[json!(9)]),
        )
        .await;
    expect_error(gap, 409, "sequence_gap").await;
    assert_eq!(api.offsets("durable", 0).await["log_end"], 4);
    let values: Vec<Value> = api.fetch_values("durable", 0, 0).await;
    assert_eq!(values, (0..4).map(Value::from).collect::<Vec<_>>());
}

/// An idempotent retry with `expected_offset` whose first try landed is answered as the
/// duplicate it is, with the original offsets: a 412 would leave the producer unable to tell
/// whether its write happened. A new write with a stale `expected_offset` still gets 412.
#[tokio::test]
async fn a_conditional_idempotent_retry_is_answered_as_a_duplicate() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("cas", 1).await;
    let (id, epoch) = init_producer(&api, None).await;
    let path = "/v1/topics/cas/partitions/0/records";
    let mut request = idempotent_request(id, epoch, 0, &[json!("once"), json!("twice")]);
    request["expected_offset"] = json!(0);
    let first = ok_json(api.post(path, &request).await).await;
    assert_eq!(offsets_of(&first), [0, 1]);
    let retry = ok_json(api.post(path, &request).await).await;
    assert_eq!(offsets_of(&retry), [0, 1], "{retry}");
    assert_eq!(retry["duplicate"], true, "{retry}");
    let mut next = idempotent_request(id, epoch, 2, &[json!("new")]);
    next["expected_offset"] = json!(0);
    expect_error(api.post(path, &next).await, 412, "offset_mismatch").await;
    assert_eq!(api.offsets("cas", 0).await["latest"], 2);
}

/// `duplicate` means nothing was appended again: a request whose batch for one partition was
/// a retry while its batch for another was new is no duplicate (it said `true`, and a client
/// trusting it would think "e" was already stored before).
#[tokio::test]
async fn a_request_that_appended_anything_is_no_duplicate() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("pair", 2).await;
    let (id, epoch) = init_producer(&api, None).await;
    let request = |first: i64, second: i64| {
        json!({
            "records": [{"value": "d", "partition": 0}, {"value": "e", "partition": 1}],
            "producer": {"producer_id": id, "producer_epoch": epoch,
                         "sequences": {"0": first, "1": second}},
        })
    };
    // Partition 1's sequence skips ahead: refused there, while partition 0's batch (a separate
    // append) is stored, and the error says so.
    let partial = expect_error(
        api.post("/v1/topics/pair/records", &request(0, 7)).await,
        409,
        "sequence_gap",
    )
    .await;
    assert_eq!(
        partial["error"]["stored"],
        json!([{"partition": 0, "base_offset": 0, "record_count": 1}]),
        "{partial}"
    );
    let message = partial["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("partition 1: ") && message.contains("partition 0 (offsets 0 to 0)"),
        "{message}"
    );
    assert_eq!(partial["error"]["retryable"], false, "{partial}");
    assert_eq!(api.offsets("pair", 0).await["latest"], 1);
    let mixed = ok_json(api.post("/v1/topics/pair/records", &request(0, 0)).await).await;
    assert_eq!(mixed["duplicate"], false, "{mixed}");
    assert_eq!(offsets_of(&mixed), [0, 0], "{mixed}");
    let retried = ok_json(api.post("/v1/topics/pair/records", &request(0, 0)).await).await;
    assert_eq!(retried["duplicate"], true, "{retried}");
    assert_eq!(offsets_of(&retried), [0, 0], "{retried}");
    for partition in 0..2 {
        assert_eq!(api.offsets("pair", partition).await["latest"], 1);
    }
}

/// A retry whose first attempt's records were deleted since (delete-records here; retention
/// alike) is still a duplicate with the original offsets: it used to fail with 416 for an
/// offset the producer never asked to read, while the records were not appended again.
#[tokio::test]
async fn a_retry_of_deleted_records_is_still_answered_as_a_duplicate() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("gone", 1).await;
    let (id, epoch) = init_producer(&api, None).await;
    let path = "/v1/topics/gone/partitions/0/records";
    let request = idempotent_request(id, epoch, 0, &[json!("a"), json!("b")]);
    let first = ok_json(api.post(path, &request).await).await;
    assert_eq!(offsets_of(&first), [0, 1]);
    let deleted = api
        .post(
            "/v1/topics/gone/partitions/0/delete-records",
            &json!({"offset": 1}),
        )
        .await;
    assert_eq!(deleted.status().as_u16(), 200);
    let retry = ok_json(api.post(path, &request).await).await;
    assert_eq!(retry["duplicate"], true, "{retry}");
    assert_eq!(offsets_of(&retry), [0, 1], "{retry}");
    assert_eq!(api.offsets("gone", 0).await["latest"], 2);
}

//! Legal holds as a user sees them: a held range outlives retention, delete-records and topic
//! deletion refuse to remove it, the hold survives a restart and shows in the topic, and
//! releasing it lets retention proceed.

use std::time::Duration;

use serde_json::{Value, json};
use strata_tests::{Api, Server, ServerOptions, eventually, expect_error, hour_ago_ms, ok_json};

const WAIT: Duration = Duration::from_secs(30);

fn cleaning_server() -> Server {
    Server::start(ServerOptions::with_args(&[
        "--retention-check-interval-ms",
        "100",
    ]))
}

async fn produce_old(api: &Api, partition: u32, count: usize) {
    let records: Vec<Value> = (0..count)
        .map(|i| json!({"value": format!("old-{i}"), "timestamp": hour_ago_ms(), "partition": partition}))
        .collect();
    api.produce("held", &json!({ "records": records })).await;
}

async fn earliest(api: &Api, partition: u32) -> u64 {
    api.offsets("held", partition).await["earliest"]
        .as_u64()
        .unwrap()
}

async fn segment_closed(api: &Api, partition: u32, base: u64) -> bool {
    let list = api
        .get_json(&format!("/v1/topics/held/partitions/{partition}/segments"))
        .await;
    list["segments"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["base_offset"] == base && s["active"] == false)
}

#[tokio::test]
async fn a_held_range_outlives_retention_deletion_and_restarts_until_released() {
    let mut server = cleaning_server();
    let api = Api::new(&server);
    let configs = json!({"retention_ms": 60_000, "segment_ms": 200});
    api.create_topic_with("held", 2, configs).await;
    let placed = api
        .post(
            "/v1/topics/held/legal-holds",
            &json!({"reason": "case 114", "partition": 0, "start_offset": 3, "end_offset": 5}),
        )
        .await;
    assert_eq!(placed.status().as_u16(), 201);
    let hold: Value = placed.json().await.unwrap();
    assert_eq!(hold["id"], "1");
    assert_eq!(hold["created_by"], "anonymous");

    // Offsets 0-2 are not held: retention takes their segment once it rolls.
    produce_old(&api, 0, 3).await;
    eventually(WAIT, "the unheld segment goes", || async {
        earliest(&api, 0).await == 3
    })
    .await;
    // Offsets 3-5 are held. Once their segment has rolled, a record of partition 1 produced
    // afterwards is removed by retention: that pass saw the held segment and kept it.
    produce_old(&api, 0, 3).await;
    eventually(WAIT, "the held segment rolls", || async {
        segment_closed(&api, 0, 3).await
    })
    .await;
    produce_old(&api, 1, 1).await;
    eventually(WAIT, "retention runs on partition 1", || async {
        earliest(&api, 1).await == 1
    })
    .await;
    assert_eq!(earliest(&api, 0).await, 3, "the held records stay");
    assert_eq!(api.fetch_all("held", 0, 3).await.len(), 3);

    // Delete-records may go up to the hold, not past it; the topic cannot be deleted.
    let trim = |before: u64| {
        let api = api.clone();
        async move {
            api.post(
                "/v1/topics/held/partitions/0/delete-records",
                &json!({ "offset": before }),
            )
            .await
        }
    };
    let refused = expect_error(trim(4).await, 409, "legal_hold").await;
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("case 114"), "{message}");
    ok_json(trim(3).await).await;
    let delete = api
        .client
        .delete(api.url("/v1/topics/held"))
        .send()
        .await
        .unwrap();
    expect_error(delete, 409, "legal_hold").await;

    // Durable and visible in the topic description.
    server.restart();
    let api = Api::new(&server);
    let described = api.get_json("/v1/topics/held").await;
    assert_eq!(described["legal_holds"][0]["reason"], "case 114");
    assert_eq!(described["legal_holds"][0]["start_offset"], 3);
    let listed = api.get_json("/v1/topics/held/legal-holds").await;
    assert_eq!(listed["holds"].as_array().unwrap().len(), 1);
    assert_eq!(earliest(&api, 0).await, 3);

    // Released, the next pass removes what only the hold kept; then the topic can go.
    let released = api
        .client
        .delete(api.url("/v1/topics/held/legal-holds/1"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok_json(released).await["id"], "1");
    eventually(WAIT, "retention proceeds after the release", || async {
        earliest(&api, 0).await == 6
    })
    .await;
    let again = api
        .client
        .delete(api.url("/v1/topics/held/legal-holds/1"))
        .send()
        .await
        .unwrap();
    expect_error(again, 404, "hold_not_found").await;
    let delete = api
        .client
        .delete(api.url("/v1/topics/held"))
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status().as_u16(), 204);
}

#[tokio::test]
async fn bad_holds_get_clear_errors_and_change_nothing() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("held", 1).await;
    let place = |body: Value| {
        let api = api.clone();
        async move { api.post("/v1/topics/held/legal-holds", &body).await }
    };
    for (body, status, code) in [
        (json!({"reason": "r"}), 422, "invalid"),
        (
            json!({"reason": "r", "partition": 0, "start_offset": 1, "start_ms": 5}),
            422,
            "invalid",
        ),
        (json!({"reason": "r", "start_offset": 1}), 422, "invalid"),
        (json!({"reason": "r", "end_ms": 5}), 422, "invalid"),
        (
            json!({"reason": "r", "partition": 0, "start_offset": 9, "end_offset": 8}),
            422,
            "invalid",
        ),
        (json!({"reason": " ", "start_ms": 1}), 422, "invalid"),
        (
            json!({"reason": "r", "partition": 7, "start_offset": 1}),
            404,
            "partition_not_found",
        ),
        (
            json!({"reason": "r", "start_ms": 1, "colour": 1}),
            400,
            "bad_json",
        ),
    ] {
        expect_error(place(body).await, status, code).await;
    }
    let missing = api
        .post(
            "/v1/topics/nope/legal-holds",
            &json!({"reason": "r", "start_ms": 1}),
        )
        .await;
    expect_error(missing, 404, "topic_not_found").await;
    let internal = api
        .post(
            "/v1/topics/__consumer_offsets/legal-holds",
            &json!({"reason": "r", "start_ms": 1}),
        )
        .await;
    expect_error(internal, 409, "internal_topic").await;
    // Records deleted already cannot be held: a 201 would tell an investigation they are kept.
    let records: Vec<Value> = (0..5).map(|i| json!({"value": i})).collect();
    api.produce("held", &json!({"records": records})).await;
    let deleted = api
        .post(
            "/v1/topics/held/partitions/0/delete-records",
            &json!({"offset": 3}),
        )
        .await;
    assert_eq!(deleted.status(), 200);
    for start in [0, 2] {
        let gone = expect_error(
            place(json!({"reason": "r", "partition": 0, "start_offset": start, "end_offset": 4}))
                .await,
            416,
            "offset_out_of_range",
        )
        .await;
        assert_eq!(gone["error"]["earliest_offset"], 3, "{gone}");
        let message = gone["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("already deleted") && message.contains("from 3"),
            "{message}"
        );
    }
    let listed = api.get_json("/v1/topics/held/legal-holds").await;
    assert_eq!(listed, json!({"holds": []}));
    let described = api.get_json("/v1/topics/held").await;
    assert!(described.get("legal_holds").is_none(), "{described}");
    // A time hold covers every partition and has no partition of its own.
    let placed =
        ok_created(place(json!({"reason": "audit", "start_ms": 1, "end_ms": 2})).await).await;
    assert_eq!(placed["start_ms"], 1);
    assert!(placed.get("partition").is_none());
}

async fn ok_created(response: reqwest::Response) -> Value {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 201, "{body}");
    body
}

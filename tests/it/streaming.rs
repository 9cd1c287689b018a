//! Long-poll fetch, SSE (resume with Last-Event-ID, pings) and NDJSON.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use strata_tests::{Api, Server, ServerOptions, SseEvent, SseParser};

const EVENT_STREAM: &str = "text/event-stream";

async fn produce_values(api: &Api, topic: &str, values: std::ops::Range<u64>) {
    let records: Vec<Value> = values
        .map(|v| json!({"value": v, "partition": 0}))
        .collect();
    api.produce(topic, &json!({ "records": records })).await;
}

/// An open SSE connection.
struct SseStream {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    parser: SseParser,
    pending: std::collections::VecDeque<SseEvent>,
}

impl SseStream {
    async fn open(api: &Api, path: &str, last_event_id: Option<&str>) -> SseStream {
        let mut request = api.client.get(api.url(path)).header("accept", EVENT_STREAM);
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let content_type = response.headers()["content-type"].to_str().unwrap();
        assert!(content_type.starts_with(EVENT_STREAM), "{content_type}");
        SseStream {
            body: response.bytes_stream().boxed(),
            parser: SseParser::default(),
            pending: Default::default(),
        }
    }

    /// The next event, within 10 s.
    async fn next(&mut self) -> SseEvent {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return event;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.body.next())
                .await
                .expect("no SSE event within 10 s")
                .expect("the SSE stream ended")
                .unwrap();
            self.pending.extend(self.parser.push(&chunk));
        }
    }

    /// The next `records` event, skipping pings; returns its id and record values.
    async fn next_records(&mut self) -> (String, Vec<u64>) {
        loop {
            let event = self.next().await;
            if event.event == "ping" {
                continue;
            }
            assert_eq!(event.event, "records", "{event:?}");
            let body: Value = serde_json::from_str(&event.data).unwrap();
            let values: Vec<u64> = body["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    assert_eq!(r["value"], r["offset"], "value = offset in these tests");
                    r["offset"].as_u64().unwrap()
                })
                .collect();
            let id = event.id.expect("records events carry an id");
            assert_eq!(id, body["next_offset"].to_string(), "id is the next offset");
            return (id, values);
        }
    }
}

#[tokio::test]
// The scenario needs a record to arrive while a poll waits.
#[allow(clippy::disallowed_methods)]
async fn long_poll_at_high_watermark_returns_records_produced_during_the_wait() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("lp", 1).await;
    produce_values(&api, "lp", 0..3).await;

    let poll = {
        let api = api.clone();
        tokio::spawn(async move {
            api.get_json("/v1/topics/lp/partitions/0/records?offset=3&max_wait_ms=5000")
                .await
        })
    };
    // The scenario: the record arrives 300 ms into the poll (a deliberate delay, not a wait
    // for a condition).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !poll.is_finished(),
        "the fetch at the high watermark waits for data"
    );
    produce_values(&api, "lp", 3..4).await;
    let body = poll.await.unwrap();
    assert_eq!(body["records"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["records"][0]["offset"], 3);
    assert_eq!(body["next_offset"], 4);
}

#[tokio::test]
// The scenario needs a record to arrive while a poll waits.
#[allow(clippy::disallowed_methods)]
async fn long_poll_without_data_returns_empty_after_the_wait() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("idle", 1).await;
    produce_values(&api, "idle", 0..2).await;
    let started = Instant::now();
    let body = api
        .get_json("/v1/topics/idle/partitions/0/records?offset=2&max_wait_ms=300")
        .await;
    assert!(started.elapsed() >= Duration::from_millis(250), "it waited");
    assert_eq!(body["records"], json!([]));
    assert_eq!(body["next_offset"], 2);
    assert_eq!(body["high_watermark"], 2);
}

#[tokio::test]
async fn sse_resume_with_last_event_id_loses_and_duplicates_nothing() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("sse", 1).await;
    const TOTAL: u64 = 60;
    let path = "/v1/topics/sse/partitions/0/records?offset=0&max_records=4";
    let mut seen: Vec<u64> = Vec::new();
    let mut produced = 0;
    for size in [7u64, 5] {
        produce_values(&api, "sse", produced..produced + size).await;
        produced += size;
    }

    // First connection: read a few events, then hang up.
    let mut stream = SseStream::open(&api, path, None).await;
    let mut last_id = String::new();
    for _ in 0..2 {
        let (id, values) = stream.next_records().await;
        seen.extend(values);
        last_id = id;
    }
    drop(stream);

    // Keep producing while disconnected, then reconnect (same URL, as EventSource does) and keep
    // producing while connected; hang up again once more in the middle.
    let mut connections = 1;
    while seen.len() < TOTAL as usize {
        if produced < TOTAL {
            let end = (produced + 9).min(TOTAL);
            produce_values(&api, "sse", produced..end).await;
            produced = end;
        }
        let mut stream = SseStream::open(&api, path, Some(&last_id)).await;
        connections += 1;
        for _ in 0..3 {
            if seen.len() >= TOTAL as usize {
                break;
            }
            if produced < TOTAL {
                let end = (produced + 4).min(TOTAL);
                produce_values(&api, "sse", produced..end).await;
                produced = end;
            }
            let (id, values) = stream.next_records().await;
            seen.extend(values);
            last_id = id;
        }
    }
    assert!(connections >= 3, "resumed more than once");
    let unique: BTreeSet<u64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "no duplicates: {seen:?}");
    assert_eq!(seen, (0..TOTAL).collect::<Vec<_>>(), "no gaps, in order");
}

#[tokio::test]
async fn sse_sends_ping_events_while_idle() {
    let server = Server::start(ServerOptions::with_args(&["--sse-ping-interval-ms", "100"]));
    let api = Api::new(&server);
    api.create_topic("quiet", 1).await;
    let mut stream = SseStream::open(&api, "/v1/topics/quiet/partitions/0/records", None).await;
    let mut pings = 0;
    while pings < 3 {
        let event = stream.next().await;
        assert_eq!(
            event.event, "ping",
            "only pings on an idle stream: {event:?}"
        );
        pings += 1;
    }
    // After data arrives, the stream delivers it.
    produce_values(&api, "quiet", 0..2).await;
    let (id, values) = stream.next_records().await;
    assert_eq!(values, vec![0, 1]);
    assert_eq!(id, "2");
}

#[tokio::test]
async fn ndjson_fetch_streams_one_record_per_line() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("nd", 1).await;
    produce_values(&api, "nd", 0..25).await;
    let response = api
        .client
        .get(api.url("/v1/topics/nd/partitions/0/records?offset=5&max_records=10"))
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/x-ndjson")
    );
    let text = response.text().await.unwrap();
    let offsets: Vec<u64> = text
        .lines()
        .map(|line| {
            let record: Value = serde_json::from_str(line).unwrap();
            assert_eq!(record["value"], record["offset"]);
            assert_eq!(record["partition"], 0);
            record["offset"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(offsets, (5..15).collect::<Vec<_>>());
    assert!(text.ends_with('\n'));
}

#[tokio::test]
async fn sse_follows_records_produced_after_connecting() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("tail", 1).await;
    let mut stream = SseStream::open(&api, "/v1/topics/tail/partitions/0/records", None).await;
    let mut seen = Vec::new();
    for chunk in 0..5u64 {
        produce_values(&api, "tail", chunk * 2..chunk * 2 + 2).await;
    }
    // Each read is bounded (10 s) by `SseStream::next`.
    while seen.len() < 10 {
        let (_, values) = stream.next_records().await;
        seen.extend(values);
    }
    assert_eq!(seen, (0..10).collect::<Vec<_>>());
}

impl SseStream {
    /// Waits (10 s at most) for the server to close the stream; panics on another event.
    async fn expect_closed(&mut self) {
        if let Some(event) = self.pending.pop_front() {
            panic!("expected the stream to end, got {event:?}");
        }
        loop {
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.body.next())
                .await
                .expect("the SSE stream did not end within 10 s");
            let Some(chunk) = chunk else { return };
            let events = self.parser.push(&chunk.unwrap());
            assert!(events.is_empty(), "expected the end, got {events:?}");
        }
    }
}

#[tokio::test]
async fn sse_announces_a_retry_delay_and_pings_carry_data_browsers_dispatch() {
    let server = Server::start(ServerOptions::with_args(&["--sse-ping-interval-ms", "50"]));
    let api = Api::new(&server);
    api.create_topic("browser", 1).await;
    let mut stream = SseStream::open(&api, "/v1/topics/browser/partitions/0/records", None).await;
    let ping = stream.next().await;
    assert_eq!(ping.event, "ping", "{ping:?}");
    let data: Value = serde_json::from_str(&ping.data).unwrap();
    assert_eq!(data, json!({}), "a ping's data is an empty object");
    assert_eq!(stream.parser.retry_ms, Some(1000), "the stream sets retry");
}

#[tokio::test]
async fn sse_on_a_deleted_topic_ends_with_an_end_event_and_never_shows_its_successor() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("fleeting", 1).await;
    produce_values(&api, "fleeting", 0..2).await;
    let mut stream = SseStream::open(&api, "/v1/topics/fleeting/partitions/0/records", None).await;
    assert_eq!(stream.next_records().await.1, vec![0, 1]);
    let deleted = api
        .client
        .delete(api.url("/v1/topics/fleeting"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    // A new topic of the same name with more records than the old one had.
    api.create_topic("fleeting", 1).await;
    produce_values(&api, "fleeting", 0..5).await;
    let end = stream.next().await;
    assert_eq!(end.event, "end", "{end:?}");
    let data: Value = serde_json::from_str(&end.data).unwrap();
    assert_eq!(data["reason"], "topic_deleted", "{data}");
    stream.expect_closed().await;
}

#[tokio::test]
async fn accept_q_values_choose_the_representation() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("neg", 1).await;
    produce_values(&api, "neg", 0..1).await;
    let path = "/v1/topics/neg/partitions/0/records?offset=0";
    for (accept, expected) in [
        (
            "text/event-stream;q=0.1, application/json",
            "application/json",
        ),
        (
            "application/json;q=0.2, application/x-ndjson",
            "application/x-ndjson",
        ),
        ("*/*;q=0.5, text/event-stream;q=0", "application/json"),
    ] {
        let response = api
            .client
            .get(api.url(path))
            .header("accept", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{accept}");
        let content_type = response.headers()["content-type"].to_str().unwrap();
        assert!(
            content_type.starts_with(expected),
            "{accept}: {content_type}"
        );
    }
    let refused = api
        .client
        .get(api.url(path))
        .header("accept", "text/html, application/json;q=0")
        .send()
        .await
        .unwrap();
    strata_tests::expect_error(refused, 406, "not_acceptable").await;
}

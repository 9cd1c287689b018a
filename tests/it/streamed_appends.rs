//! Large raw bodies streamed into the log as they arrive (`log::stream`): they read back byte
//! for byte and survive kill -9 once acknowledged; a crash, a bad body or a client that goes
//! away mid-stream leaves nothing behind; an append that arrives mid-stream is never held up.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use strata_server::log::NewRecord;
use strata_server::log::batch::{BatchOptions, encode_batch};
use strata_tests::{Api, Server, eventually, expect_error, hour_ago_ms, ok_json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const RECORD_BATCHES: &str = "application/vnd.strata.record-batches";
const PATH: &str = "/v1/topics/big/partitions/0/records";

/// One batch of `records` records with values of `value_len` bytes, each value starting with
/// `tag` so batches differ.
fn batch(options: &BatchOptions, records: usize, value_len: usize, tag: u8) -> Bytes {
    let recent = hour_ago_ms();
    let records: Vec<NewRecord> = (0..records)
        .map(|i| NewRecord {
            timestamp: recent + i as i64,
            key: None,
            value: Some(Bytes::from(
                (0..value_len)
                    .map(|j| tag.wrapping_add((i + j) as u8))
                    .collect::<Vec<u8>>(),
            )),
            headers: Vec::new(),
        })
        .collect();
    encode_batch(options, &records).unwrap()
}

/// A body of two batches, 300 KiB in all: above the size that is streamed.
fn large_body(tag: u8) -> Bytes {
    let options = BatchOptions::default();
    let mut body = batch(&options, 100, 1024, tag).to_vec();
    body.extend_from_slice(&batch(&options, 200, 1024, tag.wrapping_add(1)));
    Bytes::from(body)
}

async fn post_raw(api: &Api, body: Bytes) -> reqwest::Response {
    api.client
        .post(api.url(PATH))
        .header("content-type", RECORD_BATCHES)
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn fetch_raw(api: &Api) -> Bytes {
    let response = api
        .client
        .get(api.url(&format!("{PATH}?offset=0&max_bytes=16777216")))
        .header("accept", RECORD_BATCHES)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    bytes
}

/// How many streamed appends ended with `outcome`, from `/metrics`.
async fn streams(api: &Api, outcome: &str) -> u64 {
    let text = api.get("/metrics").await.text().await.unwrap();
    let name = format!("strata_append_streams_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&name))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// The stored bytes are the bodies with broker-assigned base offsets.
fn assert_stored(stored: &[u8], bodies: &[Bytes]) {
    let mut at = 0;
    let mut next_offset = 0u64;
    for body in bodies {
        let mut in_body = 0;
        while in_body < body.len() {
            let length = u32::from_be_bytes(body[in_body + 8..in_body + 12].try_into().unwrap());
            let end = in_body + 12 + length as usize;
            let base = u64::from_be_bytes(stored[at..at + 8].try_into().unwrap());
            assert_eq!(base, next_offset, "baseOffset of the batch at {at}");
            assert_eq!(
                stored[at + 8..at + end - in_body],
                body[in_body + 8..end],
                "the batch at {at} is stored as sent"
            );
            let delta = u32::from_be_bytes(body[in_body + 23..in_body + 27].try_into().unwrap());
            next_offset += u64::from(delta) + 1;
            at += end - in_body;
            in_body = end;
        }
    }
    assert_eq!(at, stored.len(), "nothing else is stored");
}

#[tokio::test]
async fn a_large_raw_body_is_streamed_stored_as_sent_and_survives_kill_9() {
    let mut server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("big", 1).await;
    let bodies = [large_body(1), large_body(7), large_body(13)];
    for (i, body) in bodies.iter().enumerate() {
        let answer = ok_json(post_raw(&api, body.clone()).await).await;
        let offsets = answer["offsets"].as_array().unwrap();
        assert_eq!(offsets.len(), 300);
        assert_eq!(offsets[0]["offset"], 300 * i as u64);
    }
    assert_eq!(
        streams(&api, "committed").await,
        3,
        "every body was streamed"
    );
    assert_stored(&fetch_raw(&api).await, &bodies);

    server.kill_9();
    server.restart();
    let api = Api::new(&server);
    assert_eq!(api.offsets("big", 0).await["latest"], 900);
    assert_stored(&fetch_raw(&api).await, &bodies);
}

#[tokio::test]
async fn a_bad_streamed_body_is_refused_and_leaves_nothing_behind() {
    let mut server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("big", 1).await;
    let first = large_body(1);
    ok_json(post_raw(&api, first.clone()).await).await;

    let mut broken = large_body(2).to_vec();
    let last = broken.len() - 1;
    broken[last] ^= 0xff; // inside the second batch's CRC-covered records
    expect_error(
        post_raw(&api, Bytes::from(broken)).await,
        400,
        "bad_record_batch",
    )
    .await;
    // The writer counts the dropped lease once the handler lets go of it, which may be just
    // after the answer left.
    eventually(Duration::from_secs(10), "the lease is given up", || async {
        streams(&api, "abandoned").await == 1
    })
    .await;

    let second = large_body(3);
    let answer = ok_json(post_raw(&api, second.clone()).await).await;
    assert_eq!(answer["offsets"][0]["offset"], 300, "no offset was used");
    assert_stored(&fetch_raw(&api).await, &[first.clone(), second.clone()]);
    server.restart();
    let api = Api::new(&server);
    assert_stored(&fetch_raw(&api).await, &[first, second]);
}

/// Sends the request head and the first `sent` bytes of `body`, then holds the connection.
async fn start_upload(server: &Server, body: &[u8], sent: usize) -> TcpStream {
    let mut stream = TcpStream::connect(server.address()).await.unwrap();
    let head = format!(
        "POST {PATH} HTTP/1.1\r\nhost: strata\r\ncontent-type: {RECORD_BATCHES}\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body[..sent]).await.unwrap();
    stream.flush().await.unwrap();
    stream
}

#[tokio::test]
async fn a_client_that_goes_away_mid_body_leaves_nothing_behind() {
    let mut server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("big", 1).await;
    let body = large_body(4);
    let upload = start_upload(&server, &body, 280 * 1024).await;
    eventually(Duration::from_secs(10), "the body streams", || async {
        segment_holds_masked(&server, &body, first_len(&body))
    })
    .await;
    drop(upload);
    eventually(Duration::from_secs(10), "the lease is given up", || async {
        streams(&api, "abandoned").await == 1
    })
    .await;
    let next = large_body(5);
    let answer = ok_json(post_raw(&api, next.clone()).await).await;
    assert_eq!(answer["offsets"][0]["offset"], 0);
    server.restart();
    let api = Api::new(&server);
    assert_stored(&fetch_raw(&api).await, &[next]);
}

/// The length of the first batch in `body`.
fn first_len(body: &[u8]) -> usize {
    12 + u32::from_be_bytes(body[8..12].try_into().unwrap()) as usize
}

/// Whether the partition's first segment holds `body` up to `upto`, with the first batch's
/// header still masked: streamed bytes that no commit has stamped yet.
fn segment_holds_masked(server: &Server, body: &[u8], upto: usize) -> bool {
    let path = server
        .data_dir()
        .join("topics/big/0/00000000000000000000.log");
    std::fs::read(path).is_ok_and(|bytes| {
        bytes.len() >= upto && bytes[..17] == [0; 17] && bytes[17..upto] == body[17..upto]
    })
}

#[tokio::test]
async fn a_crash_mid_stream_recovers_without_the_unacknowledged_batch() {
    let mut server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("big", 1).await;
    // The first batch is whole on disk and carries the very offset recovery expects next (0):
    // only the mask keeps recovery from taking it for an acknowledged append.
    let body = large_body(6);
    let first_len = first_len(&body);
    let _upload = start_upload(&server, &body, first_len + 200 * 1024).await;
    eventually(
        Duration::from_secs(10),
        "the first batch is streamed",
        || async { segment_holds_masked(&server, &body, first_len) },
    )
    .await;
    server.kill_9();
    server.restart();
    let api = Api::new(&server);
    assert_eq!(
        api.offsets("big", 0).await["latest"],
        0,
        "nothing was acknowledged"
    );
    let next = large_body(8);
    let answer = ok_json(post_raw(&api, next.clone()).await).await;
    assert_eq!(answer["offsets"][0]["offset"], 0);
    assert_stored(&fetch_raw(&api).await, &[next]);
}

#[tokio::test]
async fn an_append_that_arrives_mid_stream_takes_the_lease_back_and_both_land() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("big", 1).await;
    let body = large_body(9);
    let mut upload = start_upload(&server, &body, 270 * 1024).await;
    eventually(Duration::from_secs(10), "the body streams", || async {
        segment_holds_masked(&server, &body, first_len(&body))
    })
    .await;

    // A small append while the large body is still half sent: answered at once, first.
    let small = json!({"records": [{"value": "small"}]});
    let small = tokio::time::timeout(Duration::from_secs(30), api.produce("big", &small))
        .await
        .expect("the small append does not wait for the large body");
    assert_eq!(small["offsets"][0]["offset"], 0);
    assert_eq!(streams(&api, "revoked").await, 1);

    upload.write_all(&body[270 * 1024..]).await.unwrap();
    let response = read_response(&mut upload).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("\"offset\":1,"), "{response}");
    let stored = fetch_raw(&api).await;
    let small_len = 12 + u32::from_be_bytes(stored[8..12].try_into().unwrap()) as usize;
    let small = Bytes::copy_from_slice(&stored[..small_len]);
    assert_stored(&stored, &[small, body]);
    let values: Vec<Value> = api.fetch_values("big", 0, 0).await;
    assert_eq!(values.len(), 301);
}

/// The whole HTTP response on `stream` (the server answers with a length).
async fn read_response(stream: &mut TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut response = Vec::new();
    let mut buffer = [0u8; 65536];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buffer))
            .await
            .expect("the server answers")
            .unwrap();
        response.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&response);
        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .map_or(0, |l| l.trim().parse::<usize>().unwrap());
            if rest.len() >= length {
                return text.into_owned();
            }
        }
        if n == 0 {
            return text.into_owned();
        }
    }
}

#[tokio::test]
async fn an_idempotent_retry_of_a_streamed_body_is_answered_as_a_duplicate_and_stored_once() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("big", 1).await;
    let identity = ok_json(api.post("/v1/producers", &json!({})).await).await;
    let options = BatchOptions {
        producer_id: identity["producer_id"].as_i64().unwrap(),
        producer_epoch: i16::try_from(identity["producer_epoch"].as_i64().unwrap()).unwrap(),
        base_sequence: 0,
        ..BatchOptions::default()
    };
    let body = batch(&options, 300, 1024, 11);
    let first = ok_json(post_raw(&api, body.clone()).await).await;
    assert_eq!(first["duplicate"], false);
    let retry = ok_json(post_raw(&api, body.clone()).await).await;
    assert_eq!(retry["duplicate"], true);
    assert_eq!(retry["offsets"], first["offsets"]);
    assert_eq!(streams(&api, "committed").await, 1);
    assert_eq!(
        streams(&api, "rewritten").await,
        1,
        "the retry's bytes were cut off"
    );
    assert_stored(&fetch_raw(&api).await, &[body]);

    // acks=leader streams too, and lands after the duplicate's cut.
    let next = large_body(12);
    let leader = api
        .client
        .post(api.url(&format!("{PATH}?acks=leader")))
        .header("content-type", RECORD_BATCHES)
        .body(next.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(ok_json(leader).await["offsets"][0]["offset"], 300);
    assert_eq!(streams(&api, "committed").await, 2);
    // acks=leader answers before the fdatasync; readers see the body once it is durable.
    eventually(
        Duration::from_secs(10),
        "the leader body is readable",
        || async { api.offsets("big", 0).await["latest"] == 600 },
    )
    .await;
    let stored = fetch_raw(&api).await;
    let first_body = Bytes::copy_from_slice(&stored[..first_len(&stored)]);
    assert_stored(&stored, &[first_body, next]);
}

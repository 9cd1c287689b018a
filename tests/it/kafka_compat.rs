//! What real Kafka producers send and ask: compressed batches (each codec) stored as sent and
//! read back decoded, topic `compression_type`, batch features Strata does not implement yet,
//! negative timestamps, and ListOffsets' special timestamps.

use bytes::Bytes;
use serde_json::{Value, json};
use strata_server::log::batch::{BatchOptions, Compression, NewRecord, encode_batch};
use strata_server::log::{BatchHeader, RecordBatch};
use strata_tests::{Api, Server, expect_error};

const RAW: &str = "application/vnd.strata.record-batches";
const CODECS: [Compression; 4] = [
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn records(prefix: &str, count: usize) -> Vec<NewRecord> {
    (0..count)
        .map(|i| NewRecord {
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(format!("{prefix}-{i}-{}", "x".repeat(50)))),
            headers: Vec::new(),
        })
        .collect()
}

async fn post_raw(api: &Api, path: &str, body: Bytes) -> reqwest::Response {
    api.client
        .post(api.url(path))
        .header("content-type", RAW)
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn fetch_raw(api: &Api, topic: &str, offset: u64) -> Bytes {
    let response = api
        .client
        .get(api.url(&format!(
            "/v1/topics/{topic}/partitions/0/records?offset={offset}"
        )))
        .header("accept", RAW)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap()
}

#[tokio::test]
async fn compressed_batches_of_every_codec_are_stored_as_sent_and_read_back_decoded() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("zipped", 1).await;
    let mut offset = 0;
    for codec in CODECS {
        let sent = encode_batch(
            &BatchOptions {
                compression: codec,
                ..BatchOptions::default()
            },
            &records(codec.name(), 20),
        )
        .unwrap();
        let response = post_raw(&api, "/v1/topics/zipped/partitions/0/records", sent.clone()).await;
        assert_eq!(
            response.status(),
            200,
            "{}: {}",
            codec.name(),
            response.text().await.unwrap()
        );
        // The stored batch is the sent one, baseOffset aside, CRC as sent.
        let stored = fetch_raw(&api, "zipped", offset).await;
        let stored = RecordBatch::decode_first(&stored).unwrap();
        assert_eq!(&stored.bytes()[8..], &sent[8..], "{}", codec.name());
        assert_eq!(stored.header().compression().unwrap(), codec);
        // JSON decodes it.
        let body = api
            .get_json(&format!(
                "/v1/topics/zipped/partitions/0/records?offset={offset}&value_format=string"
            ))
            .await;
        let values: Vec<&str> = body["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["value"].as_str().unwrap())
            .collect();
        assert_eq!(values.len(), 20, "{body}");
        assert!(
            values[0].starts_with(&format!("{}-0-", codec.name())),
            "{body}"
        );
        offset += 20;
    }
}

#[tokio::test]
async fn a_topic_compression_type_compresses_json_produce_and_recompresses_raw_batches() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic_with("packed", 1, json!({"compression_type": "zstd"}))
        .await;
    let produced = api
        .produce(
            "packed",
            &json!({"records": [{"value": "a".repeat(300), "partition": 0}]}),
        )
        .await;
    assert_eq!(produced["offsets"][0]["offset"], 0);
    let raw = post_raw(
        &api,
        "/v1/topics/packed/partitions/0/records",
        encode_batch(&BatchOptions::default(), &records("plain", 5)).unwrap(),
    )
    .await;
    assert_eq!(raw.status(), 200);
    let stored = fetch_raw(&api, "packed", 0).await;
    let mut codecs = Vec::new();
    let mut rest = stored.clone();
    while !rest.is_empty() {
        let batch = RecordBatch::decode_first(&rest).unwrap();
        codecs.push(batch.header().compression().unwrap());
        rest = rest.slice(batch.len()..);
    }
    assert_eq!(codecs, vec![Compression::Zstd, Compression::Zstd]);
    let all = api.fetch_values("packed", 0, 0).await;
    assert_eq!(all.len(), 6);
    assert_eq!(all[0], json!("a".repeat(300)));
    let bad = api
        .client
        .patch(api.url("/v1/topics/packed/configs"))
        .json(&json!({"configs": {"compression_type": "brotli"}}))
        .send()
        .await
        .unwrap();
    expect_error(bad, 422, "invalid_config").await;
}

/// Sets attribute bits on an encoded batch and fixes its CRC, as a client would send it.
fn with_attributes(batch: Bytes, bits: i16) -> Bytes {
    let mut bytes = batch.to_vec();
    let attributes = i16::from_be_bytes([bytes[21], bytes[22]]) | bits;
    bytes[21..23].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    BatchHeader::parse(&bytes).unwrap();
    Bytes::from(bytes)
}

#[tokio::test]
async fn transactional_control_and_negative_timestamp_batches_are_refused_and_store_nothing() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("strict", 1).await;
    let plain = encode_batch(&BatchOptions::default(), &records("t", 2)).unwrap();
    for (bits, what) in [(0x10, "transactional"), (0x20, "control")] {
        let response = post_raw(
            &api,
            "/v1/topics/strict/partitions/0/records",
            with_attributes(plain.clone(), bits),
        )
        .await;
        let body = expect_error(response, 422, "unsupported_record_batch").await;
        assert!(
            body["error"]["message"].as_str().unwrap().contains(what),
            "{body}"
        );
    }
    let mut old = records("old", 2);
    old[1].timestamp = -5;
    let response = post_raw(
        &api,
        "/v1/topics/strict/partitions/0/records",
        encode_batch(&BatchOptions::default(), &old).unwrap(),
    )
    .await;
    expect_error(response, 422, "invalid").await;
    let response = api
        .post(
            "/v1/topics/strict/records",
            &json!({"records": [{"value": 1, "timestamp": -1}]}),
        )
        .await;
    expect_error(response, 422, "invalid").await;
    assert_eq!(
        api.offsets("strict", 0).await["latest"],
        0,
        "nothing stored"
    );
}

#[tokio::test]
async fn offset_lookups_answer_kafkas_special_timestamps_and_the_found_records_time() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("times", 1).await;
    let records: Vec<Value> = [5_000, 9_000, 7_000, 9_000]
        .iter()
        .map(|t| json!({"value": t, "timestamp": t, "partition": 0}))
        .collect();
    api.produce("times", &json!({ "records": records })).await;
    let lookup = |t: i64| {
        let api = api.clone();
        async move {
            api.get_json(&format!(
                "/v1/topics/times/partitions/0/offsets?timestamp={t}"
            ))
            .await
        }
    };
    let found = lookup(6_000).await;
    assert_eq!(found["offset"], 1, "{found}");
    assert_eq!(found["record_timestamp"], 9_000, "{found}");
    let max = lookup(-3).await;
    assert_eq!(
        max["offset"], 1,
        "the first record with the largest timestamp: {max}"
    );
    assert_eq!(max["record_timestamp"], 9_000);
    assert_eq!(lookup(-1).await["offset"], 4);
    assert_eq!(lookup(-2).await["offset"], 0);
    let none = lookup(10_000).await;
    assert_eq!(none["offset"], Value::Null);
    assert_eq!(none["record_timestamp"], Value::Null);
    let bad = api
        .get("/v1/topics/times/partitions/0/offsets?timestamp=-4")
        .await;
    assert!(bad.status().is_client_error(), "{}", bad.status());
}

#[tokio::test]
async fn an_idempotent_retry_answers_with_the_stored_timestamps() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("retries", 1).await;
    let producer = api.post("/v1/producers", &json!({})).await;
    let producer: Value = producer.json().await.unwrap();
    let send = |timestamp: i64| {
        json!({
            "records": [{"value": "once", "timestamp": timestamp}],
            "producer": {"producer_id": producer["producer_id"],
                         "producer_epoch": producer["producer_epoch"],
                         "sequences": {"0": 0}}
        })
    };
    let first = api
        .post("/v1/topics/retries/partitions/0/records", &send(1_000))
        .await;
    let first: Value = first.json().await.unwrap();
    let retry = api
        .post("/v1/topics/retries/partitions/0/records", &send(2_000))
        .await;
    let retry: Value = retry.json().await.unwrap();
    assert_eq!(retry["duplicate"], true, "{retry}");
    assert_eq!(retry["offsets"], first["offsets"], "{retry}");
    assert_eq!(retry["offsets"][0]["timestamp"], 1_000);
}

/// A raw batch whose header's maxTimestamp is not its records' largest timestamp is refused:
/// timestamp lookups and time retention trust that field (a lookup of 800 over records at
/// 100, 1000 and 2000 skipped 1000 when a batch claimed 500).
#[tokio::test]
async fn a_batch_whose_max_timestamp_lies_is_refused() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("clock", 1).await;
    let sent = encode_batch(&BatchOptions::default(), &records("t", 3)).unwrap();
    let mut lying = sent.to_vec();
    lying[35..43].copy_from_slice(&500i64.to_be_bytes());
    let crc = crc32c::crc32c(&lying[21..]);
    lying[17..21].copy_from_slice(&crc.to_be_bytes());
    let refused = expect_error(
        post_raw(
            &api,
            "/v1/topics/clock/partitions/0/records",
            Bytes::from(lying),
        )
        .await,
        400,
        "bad_record_batch",
    )
    .await;
    assert!(refused.to_string().contains("maxTimestamp"), "{refused}");
    assert_eq!(api.offsets("clock", 0).await["latest"], 0);
    let stored = post_raw(&api, "/v1/topics/clock/partitions/0/records", sent).await;
    assert_eq!(stored.status(), 200);
}

/// On a `LogAppendTime` topic a raw batch is stamped with the server's clock, as a Kafka broker
/// does: the producer's timestamps (here from 2023) would make time retention delete the
/// records at once and timestamp lookups name the wrong offsets.
#[tokio::test]
async fn a_log_append_time_topic_stamps_raw_batches_with_the_servers_clock() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic_with(
        "stamped",
        1,
        json!({"message_timestamp_type": "LogAppendTime"}),
    )
    .await;
    let before = strata_tests::now_ms();
    let sent = encode_batch(&BatchOptions::default(), &records("t", 3)).unwrap();
    let response = post_raw(&api, "/v1/topics/stamped/partitions/0/records", sent).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    let after = strata_tests::now_ms();
    let in_window = |t: &Value| t.as_i64().is_some_and(|t| (before..=after).contains(&t));
    for position in answer["offsets"].as_array().unwrap() {
        assert!(in_window(&position["timestamp"]), "{answer}");
    }
    let fetched = api
        .get_json("/v1/topics/stamped/partitions/0/records?offset=0")
        .await;
    let records = fetched["records"].as_array().unwrap();
    assert_eq!(records.len(), 3);
    assert!(
        records.iter().all(|r| in_window(&r["timestamp"])),
        "{fetched}"
    );
    let stored = fetch_raw(&api, "stamped", 0).await;
    let header = BatchHeader::parse(&stored).unwrap();
    assert!(
        header.attributes & 0x08 != 0,
        "the batch says LogAppendTime"
    );
    assert!((before..=after).contains(&header.max_timestamp));
    assert!(strata_server::log::batch::crc_matches(
        &stored[..header.total_len()]
    ));
}

/// Kafka headers may repeat a name (tracing, Spring's type headers) and carry any bytes. The
/// JSON answer replaced bytes that are not UTF-8 with U+FFFD and kept only the last value of a
/// repeated name, silently; now `header_list` carries every header whenever the map cannot.
#[tokio::test]
async fn repeated_and_binary_headers_come_back_whole_in_json() {
    use strata_server::log::RecordHeader;
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("traced", 1).await;
    let header = |key: &str, value: Option<&[u8]>| RecordHeader {
        key: key.to_string(),
        value: value.map(Bytes::copy_from_slice),
    };
    let mut with_headers = records("h", 2);
    with_headers[0].headers = vec![
        header("h", Some(b"1")),
        header("h", Some(b"2")),
        header("bin", Some(&[0xff, 0xfe])),
        header("n", None),
    ];
    with_headers[1].headers = vec![header("h", Some(b"only"))];
    let body = encode_batch(&BatchOptions::default(), &with_headers).unwrap();
    let response = post_raw(&api, "/v1/topics/traced/partitions/0/records", body).await;
    assert_eq!(response.status(), 200, "{:?}", response.text().await);
    for format in ["json", "string"] {
        let fetched = api
            .get_json(&format!(
                "/v1/topics/traced/partitions/0/records?offset=0&value_format={format}"
            ))
            .await;
        let first = &fetched["records"][0];
        assert_eq!(
            first["headers"],
            json!({"h": "2", "n": null}),
            "{format}: {first}"
        );
        assert_eq!(
            first["header_list"],
            json!([
                {"key": "h", "value": "1"},
                {"key": "h", "value": "2"},
                {"key": "bin", "value": null, "value_base64": "//4="},
                {"key": "n", "value": null}
            ]),
            "{format}"
        );
        // A map that shows every header needs no list.
        let second = &fetched["records"][1];
        assert_eq!(second["headers"], json!({"h": "only"}));
        assert!(second.get("header_list").is_none(), "{second}");
    }
    let base64 = api
        .get_json("/v1/topics/traced/partitions/0/records?offset=0&value_format=base64")
        .await;
    assert_eq!(
        base64["records"][0]["header_list"][2],
        json!({"key": "bin", "value": "//4="})
    );
}

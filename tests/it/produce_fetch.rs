//! Produce and fetch: JSON round trips in every value format, partitioning, ordering, fetch by
//! timestamp, offsets, limits, raw RecordBatch bytes and conditional append.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use strata_tests::{Api, Server, expect_error, kafka_partition, murmur2, ok_json};

const RECORD_BATCHES: &str = "application/vnd.strata.record-batches";

/// Base offset and last offset of the first Kafka RecordBatch v2 in `bytes`, and its length.
fn first_batch(bytes: &[u8]) -> (u64, u64, usize) {
    assert!(
        bytes.len() >= 61,
        "too short for a batch: {} bytes",
        bytes.len()
    );
    let base = u64::from_be_bytes(bytes[0..8].try_into().unwrap());
    let length = u32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize + 12;
    assert_eq!(bytes[16], 2, "magic byte");
    let last_delta = u64::from(u32::from_be_bytes(bytes[23..27].try_into().unwrap()));
    (base, base + last_delta, length)
}

async fn fetch_raw(api: &Api, topic: &str, partition: u32, offset: u64) -> reqwest::Response {
    let response = api
        .client
        .get(api.url(&format!(
            "/v1/topics/{topic}/partitions/{partition}/records?offset={offset}"
        )))
        .header("accept", RECORD_BATCHES)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response
}

fn header_u64(response: &reqwest::Response, name: &str) -> u64 {
    response
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("missing header {name}"))
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// A JSON value is the producer's data: an id above int64 (schemathesis sent one and was
/// refused) is stored and read back as sent; the API's own numbers stay Kafka int64s.
#[tokio::test]
async fn json_values_keep_integers_above_int64() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("ids", 1).await;
    let id = 12_439_531_016_720_173_056_u64;
    let response = api
        .produce(
            "ids",
            &json!({"records": [{"value": {"id": id, "max": u64::MAX}}]}),
        )
        .await;
    assert_eq!(response["offsets"][0]["offset"], 0);
    let records = api.fetch_all("ids", 0, 0).await;
    assert_eq!(records[0]["value"], json!({"id": id, "max": u64::MAX}));
    let refused = api
        .post(
            "/v1/topics/ids/records",
            &json!({"records": [{"value": 1, "timestamp": 9_223_372_036_854_775_808_u64}]}),
        )
        .await;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_json", "{body}");
}

/// A `json` value comes back as the producer wrote it, less whitespace: every digit of a long
/// number, `1.10` as written and keys in their order, whichever body reader took the request
/// (a number of 19 digits or more sends a body the general way). A number no JSON reader can
/// hold is refused rather than stored.
#[tokio::test]
async fn json_values_come_back_as_the_producer_wrote_them() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("docs", 1).await;
    let sent = [
        r#"{"z": 1, "amount": 123456789012345678901234567890, "price": 1.10}"#,
        r#"{"z": [1.0, 2e3], "a": {"y": "x  y", "b": null}}"#,
    ];
    let stored = [
        r#"{"z":1,"amount":123456789012345678901234567890,"price":1.10}"#,
        r#"{"z":[1.0,2e3],"a":{"y":"x  y","b":null}}"#,
    ];
    // The body's text as written: a `json!` body would be rewritten by serde_json first.
    let produce = |value: &str| {
        api.client
            .post(api.url("/v1/topics/docs/records"))
            .header("content-type", "application/json")
            .body(format!(r#"{{"records": [{{"value": {value}}}]}}"#))
            .send()
    };
    for value in sent {
        let response = produce(value).await.unwrap();
        assert_eq!(response.status(), 200, "{value}");
    }
    for accept in ["application/json", "application/x-ndjson"] {
        let answer = api
            .client
            .get(api.url("/v1/topics/docs/partitions/0/records?offset=0"))
            .header("accept", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{accept}");
        let text = answer.text().await.unwrap();
        for value in stored {
            assert!(text.contains(&format!(r#""value":{value}"#)), "{text}");
        }
    }
    let refused = produce(r#"{"far": 1e400}"#).await.unwrap();
    assert_eq!(refused.status(), 422);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid", "{body}");
    assert_eq!(api.fetch_all("docs", 0, 0).await.len(), 2);
}

#[tokio::test]
async fn json_produce_fetch_round_trips_keys_values_headers_and_timestamps() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("rt", 1).await;

    // value_format=json (default): any JSON value, headers as strings.
    let json_records = json!({"records": [
        {"key": "ключ-🔑", "value": {"a": [1, 2.5, "x"], "b": null}, "headers": {"h1": "v1", "h2": null},
         "timestamp": 1_600_000_000_000_i64},
        {"key_base64": BASE64.encode([0xff, 0x00, 0x80]), "value": 42, "timestamp": 1_600_000_000_001_i64},
        {"value": "a json string"},
        {"key": "tombstone", "value": null},
        {"key": "absent-value"},
        {"value": [true, false]},
    ]});
    let response = api.produce("rt", &json_records).await;
    let offsets: Vec<u64> = response["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(response["offsets"][0]["timestamp"], 1_600_000_000_000_i64);
    assert_eq!(response["duplicate"], false);

    // value_format=string: UTF-8 text stored raw.
    let response = ok_json(
        api.post(
            "/v1/topics/rt/records?value_format=string",
            &json!({"records": [{"value": "héllo \"raw\"", "headers": {"h": "t"}}]}),
        )
        .await,
    )
    .await;
    assert_eq!(response["offsets"][0]["offset"], 6);

    // value_format=base64: arbitrary bytes, headers base64 too.
    let bytes = [0u8, 1, 2, 0xfe, 0xff];
    let response = ok_json(
        api.post(
            "/v1/topics/rt/records?value_format=base64",
            &json!({"records": [{"value": BASE64.encode(bytes), "headers": {"bin": BASE64.encode([0x00, 0xff])}}]}),
        )
        .await,
    )
    .await;
    assert_eq!(response["offsets"][0]["offset"], 7);

    let records = api.fetch_all("rt", 0, 0).await;
    assert_eq!(records.len(), 8);
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record["offset"], i as u64);
        assert_eq!(record["partition"], 0);
    }
    assert_eq!(records[0]["key"], "ключ-🔑");
    assert_eq!(records[0]["value"], json!({"a": [1, 2.5, "x"], "b": null}));
    assert_eq!(records[0]["headers"], json!({"h1": "v1", "h2": null}));
    assert_eq!(records[0]["timestamp"], 1_600_000_000_000_i64);
    assert_eq!(records[1]["key"], Value::Null);
    assert_eq!(records[1]["key_base64"], BASE64.encode([0xff, 0x00, 0x80]));
    assert_eq!(records[1]["value"], 42);
    assert_eq!(records[1]["timestamp"], 1_600_000_000_001_i64);
    assert_eq!(records[2]["value"], "a json string");
    assert_eq!(records[3]["key"], "tombstone");
    assert_eq!(records[3]["value"], Value::Null);
    assert!(records[3].get("value_base64").is_none());
    assert_eq!(records[4]["value"], Value::Null);
    assert_eq!(records[5]["value"], json!([true, false]));
    // A string-format value is not JSON text, so a JSON fetch shows its bytes as base64.
    assert_eq!(records[6]["value_base64"], BASE64.encode("héllo \"raw\""));
    assert_eq!(records[6]["headers"], json!({"h": "t"}));
    assert_eq!(records[7]["value_base64"], BASE64.encode(bytes));

    let as_string = api
        .get_json("/v1/topics/rt/partitions/0/records?offset=6&value_format=string")
        .await;
    assert_eq!(as_string["records"][0]["value"], "héllo \"raw\"");
    let as_base64 = api
        .get_json("/v1/topics/rt/partitions/0/records?offset=6&value_format=base64")
        .await;
    assert_eq!(
        as_base64["records"][0]["value"],
        BASE64.encode("héllo \"raw\"")
    );
    assert_eq!(as_base64["records"][0]["headers"]["h"], BASE64.encode("t"));
    assert_eq!(as_base64["records"][1]["value"], BASE64.encode(bytes));
    assert_eq!(
        as_base64["records"][1]["headers"]["bin"],
        BASE64.encode([0x00, 0xff])
    );
    // JSON values are stored as compact JSON text.
    let json_as_string = api
        .get_json("/v1/topics/rt/partitions/0/records?offset=0&max_records=1&value_format=string")
        .await;
    assert_eq!(
        json_as_string["records"][0]["value"],
        r#"{"a":[1,2.5,"x"],"b":null}"#
    );
}

#[tokio::test]
async fn produce_response_lists_offsets_in_request_order() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("order", 3).await;
    let partitions = [2u32, 0, 1, 0, 2, 2, 1];
    let records: Vec<Value> = partitions
        .iter()
        .enumerate()
        .map(|(i, p)| json!({"value": i, "partition": p}))
        .collect();
    let response = api.produce("order", &json!({ "records": records })).await;
    let got: Vec<(u64, u64)> = response["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["partition"].as_u64().unwrap(),
                o["offset"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![(2, 0), (0, 0), (1, 0), (0, 1), (2, 1), (2, 2), (1, 1)]
    );
    for (partition, expected) in [(0u32, vec![1, 3]), (1, vec![2, 6]), (2, vec![0, 4, 5])] {
        let values: Vec<Value> = api.fetch_values("order", partition, 0).await;
        assert_eq!(
            values,
            expected.into_iter().map(Value::from).collect::<Vec<_>>()
        );
    }
}

#[test]
fn murmur2_matches_kafka_golden_vectors() {
    // From Kafka's UtilsTest.testMurmur2.
    assert_eq!(murmur2(b"21"), -973_932_308);
    assert_eq!(murmur2(b"foobar"), -790_332_482);
    assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
    assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
    assert_eq!(
        murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
        -58_897_971
    );
    assert_eq!(murmur2(b"abc"), 479_470_107);
}

#[tokio::test]
async fn keyed_records_keep_per_key_order_on_kafkas_partition() {
    let server = Server::start_default();
    let api = Api::new(&server);
    const PARTITIONS: u32 = 6;
    api.create_topic("keys", PARTITIONS).await;
    let keys: Vec<String> = (0..40)
        .map(|i| format!("user-{i}"))
        .chain(["foobar".to_string()])
        .collect();
    // key -> (partition, offsets in produce order)
    let mut placed: BTreeMap<String, (u64, Vec<u64>)> = BTreeMap::new();
    for round in 0..8u64 {
        // Rotate the key order each round so requests interleave keys differently.
        let mut order = keys.clone();
        order.rotate_left((round as usize * 7) % keys.len());
        let records: Vec<Value> = order
            .iter()
            .map(|k| json!({"key": k, "value": {"key": k, "round": round}}))
            .collect();
        let response = api.produce("keys", &json!({ "records": records })).await;
        for (key, offset) in order.iter().zip(response["offsets"].as_array().unwrap()) {
            let partition = offset["partition"].as_u64().unwrap();
            let entry = placed
                .entry(key.clone())
                .or_insert_with(|| (partition, Vec::new()));
            assert_eq!(entry.0, partition, "key {key} changed partition");
            entry.1.push(offset["offset"].as_u64().unwrap());
        }
    }
    for (key, (partition, offsets)) in &placed {
        let expected = u64::from(kafka_partition(key.as_bytes(), PARTITIONS));
        assert_eq!(*partition, expected, "partition of key {key}");
        assert!(
            offsets.windows(2).all(|w| w[0] < w[1]),
            "offsets of {key}: {offsets:?}"
        );
    }
    let foobar = u64::from(kafka_partition(b"foobar", PARTITIONS));
    assert_eq!(
        foobar,
        u64::from((murmur2(b"foobar") & 0x7fff_ffff).unsigned_abs() % PARTITIONS)
    );
    assert_eq!(placed["foobar"].0, foobar);
    let used: std::collections::BTreeSet<u64> = placed.values().map(|(p, _)| *p).collect();
    assert!(used.len() > 1, "keys spread over partitions: {used:?}");

    // Reading each partition back gives every key's values in produce order.
    for partition in 0..PARTITIONS {
        let mut rounds: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for record in api.fetch_all("keys", partition, 0).await {
            let key = record["key"].as_str().unwrap().to_string();
            assert_eq!(record["value"]["key"], key.as_str());
            let expected = u64::from(kafka_partition(key.as_bytes(), PARTITIONS));
            assert_eq!(
                u64::from(partition),
                expected,
                "{key} stored on partition {partition}"
            );
            rounds
                .entry(key)
                .or_default()
                .push(record["value"]["round"].as_u64().unwrap());
        }
        for (key, seen) in rounds {
            assert_eq!(seen, (0..8).collect::<Vec<_>>(), "order of key {key}");
        }
    }
}

#[tokio::test]
async fn fetch_and_offsets_by_timestamp_find_the_first_record_at_or_after_it() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("ts", 1).await;
    let records: Vec<Value> = [1000, 2000, 3000, 4000]
        .iter()
        .map(|t| json!({"value": t, "timestamp": t}))
        .collect();
    api.produce("ts", &json!({ "records": records })).await;

    let fetched = api
        .get_json("/v1/topics/ts/partitions/0/records?timestamp=1500")
        .await;
    assert_eq!(fetched["records"][0]["offset"], 1);
    assert_eq!(fetched["records"][0]["timestamp"], 2000);
    let fetched = api
        .get_json("/v1/topics/ts/partitions/0/records?timestamp=9999")
        .await;
    assert_eq!(fetched["records"], json!([]));

    let offsets = api.offsets("ts", 0).await;
    assert_eq!(offsets, json!({"earliest": 0, "latest": 4, "log_end": 4}));
    let at = api
        .get_json("/v1/topics/ts/partitions/0/offsets?timestamp=2500")
        .await;
    assert_eq!(
        at,
        json!({"timestamp": 2500, "offset": 2, "record_timestamp": 3000})
    );
    let at = api
        .get_json("/v1/topics/ts/partitions/0/offsets?timestamp=1000")
        .await;
    assert_eq!(at["offset"], 0);
    let at = api
        .get_json("/v1/topics/ts/partitions/0/offsets?timestamp=5000")
        .await;
    assert_eq!(
        at,
        json!({"timestamp": 5000, "offset": null, "record_timestamp": null})
    );
}

#[tokio::test]
async fn fetch_limits_records_by_max_records_and_max_bytes() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("lim", 1).await;
    // 20 requests, so 20 batches of one record each.
    for i in 0..20 {
        api.produce("lim", &json!({"records": [{"value": i}]}))
            .await;
    }
    let five = api
        .get_json("/v1/topics/lim/partitions/0/records?offset=3&max_records=5")
        .await;
    let offsets: Vec<u64> = five["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, vec![3, 4, 5, 6, 7]);
    assert_eq!(five["next_offset"], 8);
    assert_eq!(five["high_watermark"], 20);

    // max_bytes below one batch still returns that one batch.
    let one = api
        .get_json("/v1/topics/lim/partitions/0/records?offset=0&max_bytes=1")
        .await;
    assert_eq!(one["records"].as_array().unwrap().len(), 1);
    assert_eq!(one["next_offset"], 1);
    // Exactly two batches' bytes: two records.
    let raw = fetch_raw(&api, "lim", 0, 0).await.bytes().await.unwrap();
    let (_, _, len0) = first_batch(&raw);
    let (_, _, len1) = first_batch(&raw[len0..]);
    let two = api
        .get_json(&format!(
            "/v1/topics/lim/partitions/0/records?offset=0&max_bytes={}",
            len0 + len1
        ))
        .await;
    assert_eq!(two["records"].as_array().unwrap().len(), 2);
    // One byte short of two batches: one record, in JSON and NDJSON alike (the second read
    // used to add a whole batch past the budget).
    let short = format!(
        "/v1/topics/lim/partitions/0/records?offset=0&max_bytes={}",
        len0 + len1 - 1
    );
    let json_answer = api.get_json(&short).await;
    assert_eq!(
        json_answer["records"].as_array().unwrap().len(),
        1,
        "{json_answer}"
    );
    let ndjson = api
        .client
        .get(api.url(&short))
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lines = ndjson.lines().filter(|l| l.contains("\"offset\"")).count();
    assert_eq!(lines, 1, "{ndjson}");
}

#[tokio::test]
async fn raw_fetch_returns_batches_holding_the_offset_and_raw_produce_stores_them() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("raw", 2).await;
    let mut next = 0;
    for size in [2, 3, 4] {
        let records: Vec<Value> = (0..size)
            .map(|i| json!({"key": format!("k{next}"), "value": {"n": next + i}, "headers": {"h": "x"}}))
            .collect();
        next += size;
        let body = json!({ "records": records });
        ok_json(api.post("/v1/topics/raw/partitions/0/records", &body).await).await;
    }

    let response = fetch_raw(&api, "raw", 0, 3).await;
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        RECORD_BATCHES
    );
    assert_eq!(header_u64(&response, "strata-high-watermark"), 9);
    assert_eq!(header_u64(&response, "strata-log-start-offset"), 0);
    assert_eq!(header_u64(&response, "strata-next-offset"), 9);
    let bytes = response.bytes().await.unwrap();
    let (base, last, length) = first_batch(&bytes);
    assert!(
        base <= 3 && 3 <= last,
        "first batch {base}..={last} holds offset 3"
    );
    assert_eq!((base, last), (2, 4));
    assert_eq!(
        bytes.len(),
        length + first_batch(&bytes[length..]).2,
        "two batches follow"
    );
    let batch = bytes.slice(..length);

    // Store that batch as-is on partition 1.
    let stored = api
        .client
        .post(api.url("/v1/topics/raw/partitions/1/records"))
        .header("content-type", RECORD_BATCHES)
        .body(batch.clone())
        .send()
        .await
        .unwrap();
    let stored = ok_json(stored).await;
    let offsets: Vec<u64> = stored["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, vec![0, 1, 2]);
    let copy = fetch_raw(&api, "raw", 1, 0).await.bytes().await.unwrap();
    assert_eq!(copy.len(), batch.len());
    assert_eq!(
        u64::from_be_bytes(copy[0..8].try_into().unwrap()),
        0,
        "baseOffset rewritten"
    );
    assert_eq!(
        copy[8..],
        batch[8..],
        "everything after baseOffset is stored as sent"
    );
    let records = api.fetch_all("raw", 1, 0).await;
    let values: Vec<Value> = records.iter().map(|r| r["value"]["n"].clone()).collect();
    assert_eq!(values, vec![json!(2), json!(3), json!(4)]);
    assert_eq!(records[0]["key"], "k2");
    assert_eq!(records[0]["headers"], json!({"h": "x"}));
}

#[tokio::test]
async fn conditional_append_with_wrong_expected_offset_returns_offset_mismatch() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("cond", 1).await;
    let path = "/v1/topics/cond/partitions/0/records";
    let first = ok_json(
        api.post(
            path,
            &json!({"records": [{"value": 1}, {"value": 2}], "expected_offset": 0}),
        )
        .await,
    )
    .await;
    assert_eq!(first["offsets"][1]["offset"], 1);

    let body = expect_error(
        api.post(
            path,
            &json!({"records": [{"value": 3}], "expected_offset": 0}),
        )
        .await,
        412,
        "offset_mismatch",
    )
    .await;
    assert_eq!(body["error"]["log_end_offset"], 2);
    assert_eq!(
        api.offsets("cond", 0).await["log_end"],
        2,
        "nothing appended"
    );

    ok_json(
        api.post(
            path,
            &json!({"records": [{"value": 3}], "expected_offset": 2}),
        )
        .await,
    )
    .await;

    // Raw bodies take expected_offset as a query parameter.
    let raw = fetch_raw(&api, "cond", 0, 2).await.bytes().await.unwrap();
    let send_raw = |expected: u64| {
        let api = api.clone();
        let raw = raw.clone();
        async move {
            api.client
                .post(api.url(&format!("{path}?expected_offset={expected}")))
                .header("content-type", RECORD_BATCHES)
                .body(raw)
                .send()
                .await
                .unwrap()
        }
    };
    let body = expect_error(send_raw(1).await, 412, "offset_mismatch").await;
    assert_eq!(body["error"]["log_end_offset"], 3);
    let appended = ok_json(send_raw(3).await).await;
    assert_eq!(appended["offsets"][0]["offset"], 3);
    let values: Vec<Value> = api.fetch_values("cond", 0, 0).await;
    assert_eq!(values, vec![json!(1), json!(2), json!(3), json!(3)]);
}

#[tokio::test]
async fn compact_answer_gives_one_range_per_partition_that_matches_the_log() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("compact", 3).await;
    // Keys spread over the partitions; each partition's records are consecutive in the log.
    let records: Vec<Value> = (0..30)
        .map(|i| json!({"key": format!("k{}", i % 7), "value": i}))
        .collect();
    let answer = api
        .produce_with_query("compact", "answer=compact", &json!({"records": records}))
        .await;
    assert!(answer.get("offsets").is_none(), "{answer}");
    assert_eq!(answer["duplicate"], false);
    let ranges = answer["partitions"].as_array().unwrap();
    let total: u64 = ranges
        .iter()
        .map(|r| r["record_count"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 30, "{answer}");
    // The ranges come in order of each partition's first record in the request.
    let first_key_partition = kafka_partition(b"k0", 3);
    assert_eq!(ranges[0]["partition"], first_key_partition);
    for range in ranges {
        let partition = range["partition"].as_u64().unwrap() as u32;
        let base = range["base_offset"].as_u64().unwrap();
        let count = range["record_count"].as_u64().unwrap();
        let stored = api.fetch_all("compact", partition, base).await;
        let expected: Vec<Value> = (0..30)
            .filter(|i| kafka_partition(format!("k{}", i % 7).as_bytes(), 3) == partition)
            .map(|i| json!(i))
            .collect();
        assert_eq!(count as usize, expected.len());
        let values: Vec<Value> = stored.iter().map(|r| r["value"].clone()).collect();
        assert_eq!(values, expected, "partition {partition}");
    }

    // Raw batches to one partition: one range.
    let mut batch = Vec::new();
    let body = json!({"records": [{"value": 1}, {"value": 2}]});
    let per_record = api
        .produce_with_query("compact", "answer=records", &body)
        .await;
    assert_eq!(per_record["offsets"].as_array().unwrap().len(), 2);
    let response = fetch_raw(&api, "compact", first_key_partition, 0).await;
    let bytes = response.bytes().await.unwrap();
    let (_, _, len) = first_batch(&bytes);
    batch.extend_from_slice(&bytes[..len]);
    let stored_records = u64::from(u32::from_be_bytes(batch[57..61].try_into().unwrap()));
    let answer = ok_json(
        api.client
            .post(api.url(&format!(
                "/v1/topics/compact/partitions/{first_key_partition}/records?answer=compact"
            )))
            .header("content-type", RECORD_BATCHES)
            .body(batch)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let ranges = answer["partitions"].as_array().unwrap();
    assert_eq!(ranges.len(), 1, "{answer}");
    assert_eq!(ranges[0]["partition"], first_key_partition);
    assert_eq!(ranges[0]["record_count"].as_u64(), Some(stored_records));

    // An unknown shape is a clear 400.
    let response = api
        .post("/v1/topics/compact/records?answer=short", &body)
        .await;
    expect_error(response, 400, "bad_query").await;
}

/// A timestamp means the same everywhere: fetch, the offsets lookup and a group reset take
/// Kafka's `-1` (latest), `-2` (earliest) and `-3` (largest timestamp) alike and refuse other
/// negative values, and every lookup searches from the log start, so records that
/// delete-records removed are never named (that was a 416 for an offset nobody asked for).
#[tokio::test]
async fn timestamps_name_the_same_offsets_in_fetch_lookup_and_reset() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("times", 1).await;
    let records: Vec<Value> = [1000, 2000, 3000, 4000]
        .iter()
        .map(|t| json!({"value": t, "timestamp": t}))
        .collect();
    api.produce("times", &json!({ "records": records })).await;
    let deleted = api
        .post(
            "/v1/topics/times/partitions/0/delete-records",
            &json!({"offset": 2}),
        )
        .await;
    assert_eq!(deleted.status().as_u16(), 200);

    for (timestamp, offset) in [(0, 2), (1500, 2), (3500, 3), (-2, 2), (-3, 3)] {
        let found = time_lookup(&api, timestamp).await;
        assert_eq!(found["offset"], offset, "lookup {timestamp}: {found}");
        assert_eq!(
            fetched_from_time(&api, timestamp).await.0,
            Some(offset),
            "fetch from {timestamp}"
        );
    }
    assert_eq!(time_lookup(&api, -1).await["offset"], 4);
    assert_eq!(fetched_from_time(&api, -1).await, (None, Some(4)));
    for path in [
        "/v1/topics/times/partitions/0/offsets?timestamp=-4",
        "/v1/topics/times/partitions/0/records?timestamp=-4",
    ] {
        expect_error(api.get(path).await, 422, "invalid").await;
    }
    for (value, offset) in [(0, 2), (-1, 4), (-2, 2), (-3, 3)] {
        let body = ok_json(reset_to_time(&api, value).await).await;
        assert_eq!(
            body["offsets"][0]["offset"], offset,
            "reset to {value}: {body}"
        );
    }
    expect_error(reset_to_time(&api, -4).await, 422, "invalid").await;
}

async fn time_lookup(api: &Api, timestamp: i64) -> Value {
    api.get_json(&format!(
        "/v1/topics/times/partitions/0/offsets?timestamp={timestamp}"
    ))
    .await
}

/// The first fetched offset and the next offset of a fetch from `timestamp`.
async fn fetched_from_time(api: &Api, timestamp: i64) -> (Option<u64>, Option<u64>) {
    let body = api
        .get_json(&format!(
            "/v1/topics/times/partitions/0/records?timestamp={timestamp}"
        ))
        .await;
    (
        body["records"][0]["offset"].as_u64(),
        body["next_offset"].as_u64(),
    )
}

async fn reset_to_time(api: &Api, value: i64) -> reqwest::Response {
    api.post(
        "/v1/groups/g/offsets/reset",
        &json!({"topic": "times", "to": "timestamp", "value": value}),
    )
    .await
}

/// A long poll on a topic that is deleted meanwhile ends with 404 `topic_not_found` (as a
/// stream ends with `topic_deleted`), not with an empty page after the whole wait, and not
/// watching the old partition when a new topic of the same name gets records.
#[tokio::test]
async fn a_long_poll_ends_when_its_topic_is_deleted() {
    let server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("brief", 1).await;
    let poll = {
        let api = api.clone();
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let response = api
                .get("/v1/topics/brief/partitions/0/records?offset=0&max_wait_ms=30000")
                .await;
            (response, started.elapsed())
        })
    };
    api.open_streams_reach(1).await;
    let deleted = api
        .client
        .delete(api.url("/v1/topics/brief"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
    let (response, waited) = poll.await.unwrap();
    expect_error(response, 404, "topic_not_found").await;
    assert!(
        waited < std::time::Duration::from_secs(20),
        "the poll waited {waited:?} of its 30 s"
    );
}

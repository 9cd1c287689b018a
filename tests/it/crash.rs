//! Crashes and stops: kill -9 under concurrent acks=all load loses no acknowledged record and
//! leaves no gaps; SIGTERM exits 0 and marks every partition cleanly shut down.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use strata_tests::{Api, Server, eventually};

const PARTITIONS: u32 = 3;
const PRODUCERS: usize = 4;
const CYCLES: usize = 5;
/// Acknowledged records per cycle before the kill.
const ACKS_BEFORE_KILL: usize = 120;

/// One acknowledged record.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ack {
    partition: u32,
    offset: u64,
    value: String,
}

#[derive(Default)]
struct Log {
    acks: Vec<Ack>,
    /// Answers other than 200 from a live server: each one is a bug.
    failures: Vec<String>,
}

/// Sends small batches with distinct values until the server goes away or `stop` is set;
/// returns whether the kill cut it off (a request failed at the transport level).
async fn producer(
    api: Api,
    cycle: usize,
    task: usize,
    log: Arc<Mutex<Log>>,
    stop: Arc<AtomicBool>,
) -> bool {
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let size = 1 + (n % 4);
        let partition = u32::try_from((n + task as u64) % u64::from(PARTITIONS)).unwrap();
        let values: Vec<String> = (n..n + size)
            .map(|i| format!("c{cycle}-p{task}-{i}"))
            .collect();
        n += size;
        let records: Vec<Value> = values
            .iter()
            .map(|v| json!({"value": v, "partition": partition}))
            .collect();
        let sent = api
            .client
            .post(api.url("/v1/topics/crash/records"))
            .json(&json!({ "records": records }))
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(_) => return true, // killed: the request's fate is unknown
        };
        let status = response.status().as_u16();
        let Ok(text) = response.text().await else {
            return true; // killed while the answer was on its way: not acknowledged
        };
        let mut log = log.lock().unwrap();
        if status != 200 {
            log.failures.push(format!("{status}: {text}"));
            return false;
        }
        let body: Value = serde_json::from_str(&text).unwrap();
        for (value, offset) in values.into_iter().zip(body["offsets"].as_array().unwrap()) {
            assert_eq!(offset["partition"], partition);
            log.acks.push(Ack {
                partition,
                offset: offset["offset"].as_u64().unwrap(),
                value,
            });
        }
    }
    false
}

/// Reads every partition and checks: offsets gap-free from 0 to the high watermark, values
/// unique, and every acknowledged record at its offset with its value.
async fn verify(api: &Api, acked: &[Ack]) -> BTreeMap<u32, Vec<String>> {
    let mut logs = BTreeMap::new();
    for partition in 0..PARTITIONS {
        let offsets = api.offsets("crash", partition).await;
        let high_watermark = offsets["latest"].as_u64().unwrap();
        assert_eq!(offsets["earliest"], 0);
        let records = api.fetch_all("crash", partition, 0).await;
        assert_eq!(
            records.len() as u64,
            high_watermark,
            "records 0..{high_watermark} on {partition}"
        );
        let mut values = Vec::with_capacity(records.len());
        for (i, record) in records.iter().enumerate() {
            assert_eq!(record["offset"], i as u64, "gap on partition {partition}");
            values.push(record["value"].as_str().unwrap().to_string());
        }
        let unique: BTreeSet<&String> = values.iter().collect();
        assert_eq!(
            unique.len(),
            values.len(),
            "duplicate values on partition {partition}"
        );
        logs.insert(partition, values);
    }
    for ack in acked {
        let stored = logs[&ack.partition].get(usize::try_from(ack.offset).unwrap());
        assert_eq!(
            stored,
            Some(&ack.value),
            "acknowledged record {ack:?} is readable at its offset"
        );
    }
    logs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_loses_no_acknowledged_record_and_leaves_no_gaps() {
    let mut server = Server::start_default();
    Api::new(&server).create_topic("crash", PARTITIONS).await;
    let mut acked: Vec<Ack> = Vec::new();
    for cycle in 0..CYCLES {
        let api = Api::new(&server);
        let log = Arc::new(Mutex::new(Log::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let tasks: Vec<_> = (0..PRODUCERS)
            .map(|task| {
                tokio::spawn(producer(
                    api.clone(),
                    cycle,
                    task,
                    Arc::clone(&log),
                    Arc::clone(&stop),
                ))
            })
            .collect();
        eventually(
            Duration::from_secs(20),
            "producers get acknowledgements",
            || {
                let count = log.lock().unwrap().acks.len();
                async move { count >= ACKS_BEFORE_KILL }
            },
        )
        .await;
        // Mid-stream: the producers are still sending.
        server.kill_9();
        stop.store(true, Ordering::SeqCst);
        let mut cut_off = 0;
        for task in tasks {
            cut_off += usize::from(task.await.unwrap());
        }
        assert!(cut_off > 0, "the kill hit producers mid-stream");
        let log = std::mem::take(&mut *log.lock().unwrap());
        assert!(
            log.failures.is_empty(),
            "errors from a live server: {:?}",
            log.failures
        );
        acked.extend(log.acks);

        server.restart();
        let api = Api::new(&server);
        let logs = verify(&api, &acked).await;
        let total: usize = logs.values().map(Vec::len).sum();
        assert!(total >= acked.len());
    }
    assert!(acked.len() >= CYCLES * ACKS_BEFORE_KILL);
}

fn clean_shutdown_markers(server: &Server, topic: &str, partitions: u32) -> Vec<bool> {
    (0..partitions)
        .map(|p| {
            let path = server
                .data_dir()
                .join("topics")
                .join(topic)
                .join(p.to_string())
                .join("partition.json");
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let meta: Value = serde_json::from_str(&text).unwrap();
            meta["clean_shutdown"].as_bool().unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_zero_and_marks_a_clean_shutdown() {
    let mut server = Server::start_default();
    let api = Api::new(&server);
    api.create_topic("stop", 2).await;
    api.produce(
        "stop",
        &json!({"records": [{"value": 1, "partition": 0}, {"value": 2, "partition": 1}]}),
    )
    .await;
    assert_eq!(
        clean_shutdown_markers(&server, "stop", 2),
        vec![false, false]
    );
    // A long poll (likely in flight by the time SIGTERM lands) must not keep the server from
    // stopping.
    let poll = {
        let api = api.clone();
        tokio::spawn(async move {
            api.client
                .get(api.url("/v1/topics/stop/partitions/0/records?offset=1&max_wait_ms=60000"))
                .send()
                .await
        })
    };

    let status = server.terminate();
    assert_eq!(status.code(), Some(0), "exit status {status}");
    assert_eq!(clean_shutdown_markers(&server, "stop", 2), vec![true, true]);
    let _ = poll.await.unwrap();

    server.restart();
    let stderr = server.stderr();
    assert!(
        !stderr.contains("clean: false"),
        "the next start finds a clean shutdown:\n{stderr}"
    );
    let api = Api::new(&server);
    assert_eq!(api.fetch_all("stop", 0, 0).await[0]["value"], 1);
    assert_eq!(api.fetch_all("stop", 1, 0).await[0]["value"], 2);
    // While running, the marker is cleared again.
    assert_eq!(
        clean_shutdown_markers(&server, "stop", 2),
        vec![false, false]
    );
}

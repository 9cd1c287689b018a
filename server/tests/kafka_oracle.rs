//! Cross-checks the batch codec against kafka-python, an independent implementation of Kafka's
//! log format v2, through `kafka_oracle.py`.
//!
//! The Python interpreter comes from `STRATA_PYTHON` (default `python3`) and must have
//! kafka-python 2.x installed. A missing interpreter or package FAILS the test: a silently
//! skipped oracle would let the codec drift from Kafka unnoticed.
//!
//! Batches are generated with a seeded PRNG; set `STRATA_ORACLE_SEED` to reproduce a failure.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use serde_json::{Value, json};
use strata_server::log::batch::{
    BatchOptions, Compression, NewRecord, RecordBatch, RecordHeader, TimestampType, encode_batch,
};

/// Path of the oracle script, relative to this crate's manifest directory.
const ORACLE_SCRIPT: &str = "../scripts/kafka_oracle.py";

fn script_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(ORACLE_SCRIPT)
}

fn python() -> String {
    std::env::var("STRATA_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// Runs the oracle; panics with a clear message if Python or kafka-python is unavailable.
fn run_oracle(args: &[&str]) -> String {
    let python = python();
    let script = script_path();
    assert!(
        script.is_file(),
        "oracle script not found at {}",
        script.display()
    );
    let output = Command::new(&python)
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|err| {
            panic!(
                "could not run the Python interpreter {python:?} ({err}). The kafka-python oracle \
             is required: set STRATA_PYTHON to a Python 3 with kafka-python 2.x installed \
             (python3 -m venv venv && venv/bin/pip install 'kafka-python>=2.2,<3')"
            )
        });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "kafka_oracle.py {args:?} failed with {} using {python:?}:\n{stderr}\n(if kafka-python \
         is missing, set STRATA_PYTHON to a Python 3 with kafka-python 2.x installed)",
        output.status
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Seeded random test inputs (the seed is printed, so a failure can be replayed).
struct Rng(fastrand::Rng);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(fastrand::Rng::with_seed(seed))
    }
    fn next(&mut self) -> u64 {
        self.0.u64(..)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0.u64(..n)
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
    fn bytes(&mut self, max: u64) -> Bytes {
        let len = if self.chance(4) {
            0
        } else {
            self.below(max + 1)
        };
        Bytes::from((0..len).map(|_| self.next() as u8).collect::<Vec<u8>>())
    }
    fn nullable(&mut self, max: u64) -> Option<Bytes> {
        if self.chance(4) {
            None
        } else {
            Some(self.bytes(max))
        }
    }
    fn string(&mut self) -> String {
        const CHARS: &[char] = &['a', 'z', 'K', '0', '-', ' ', 'é', '日', '🦀', '\u{0}'];
        let len = self.below(6);
        (0..len)
            .map(|_| CHARS[self.below(CHARS.len() as u64) as usize])
            .collect()
    }
}

fn seed() -> u64 {
    let seed = std::env::var("STRATA_ORACLE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0057_5241_5441_u64);
    eprintln!("oracle seed: {seed} (set STRATA_ORACLE_SEED to reproduce)");
    seed
}

fn random_records(rng: &mut Rng) -> Vec<NewRecord> {
    let max = if rng.chance(5) { 60 } else { 6 };
    let count = 1 + rng.below(max);
    let base_ts = 1_700_000_000_000i64 + rng.below(1 << 30) as i64 - (1 << 29);
    (0..count)
        .map(|_| NewRecord {
            // Deltas in both directions: record timestamps need not be ordered.
            timestamp: base_ts + rng.below(2_000_001) as i64 - 1_000_000,
            key: rng.nullable(20),
            value: if rng.chance(20) {
                Some(rng.bytes(400))
            } else {
                rng.nullable(40)
            },
            headers: (0..rng.below(4))
                .map(|_| RecordHeader {
                    key: rng.string(),
                    value: rng.nullable(10),
                })
                .collect(),
        })
        .collect()
}

fn random_options(rng: &mut Rng, base_offset: i64) -> BatchOptions {
    let idempotent = rng.chance(2);
    BatchOptions {
        base_offset,
        partition_leader_epoch: rng.below(1000) as i32,
        timestamp_type: if rng.chance(4) {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        producer_id: if idempotent {
            rng.below(1 << 40) as i64
        } else {
            -1
        },
        producer_epoch: if idempotent {
            rng.below(100) as i16
        } else {
            -1
        },
        base_sequence: if idempotent {
            rng.below(1 << 30) as i32
        } else {
            -1
        },
        transactional: idempotent && rng.chance(2),
        compression: CODECS[if rng.chance(2) {
            0
        } else {
            rng.below(CODECS.len() as u64) as usize
        }],
    }
}

/// `records` with values that compress well (each value repeated 20 times).
fn compressible(records: &[NewRecord]) -> Vec<NewRecord> {
    records
        .iter()
        .map(|r| NewRecord {
            value: Some(Bytes::from(
                r.value.clone().unwrap_or_default().repeat(20).to_vec(),
            ))
            .filter(|v| !v.is_empty())
            .or_else(|| Some(Bytes::from(vec![b'z'; 200]))),
            ..r.clone()
        })
        .collect()
}

/// Every codec Kafka defines; random batches use each.
const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn b64(data: &Option<Bytes>) -> Value {
    match data {
        None => Value::Null,
        Some(data) => Value::String(B64.encode(data)),
    }
}

fn headers_json(headers: &[RecordHeader]) -> Value {
    Value::Array(
        headers
            .iter()
            .map(|h| json!([h.key, b64(&h.value)]))
            .collect(),
    )
}

fn temp_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{}-{name}", std::process::id()))
}

#[test]
fn kafka_python_decodes_our_batches() {
    let mut rng = Rng::new(seed());
    let mut segment = Vec::new();
    let mut expected = Vec::new();
    let mut next_offset = rng.below(1 << 40) as i64;
    for _ in 0..60 {
        let records = random_records(&mut rng);
        let options = random_options(&mut rng, next_offset);
        let encoded = encode_batch(&options, &records).unwrap();
        next_offset += records.len() as i64 + rng.below(3) as i64;
        segment.extend_from_slice(&encoded);
        expected.push((options, records, encoded));
    }
    let path = temp_file("ours.log");
    std::fs::write(&path, &segment).unwrap();
    let out = run_oracle(&["decode", path.to_str().unwrap()]);
    std::fs::remove_file(&path).ok();
    let decoded: Value = serde_json::from_str(&out).unwrap();
    let batches = decoded["batches"].as_array().unwrap();
    assert_eq!(batches.len(), expected.len());

    for (i, (batch, (options, records, encoded))) in batches.iter().zip(&expected).enumerate() {
        let ours = RecordBatch::decode_exact(encoded.clone()).unwrap();
        let h = ours.header();
        let max_ts = records.iter().map(|r| r.timestamp).max().unwrap();
        let log_append = options.timestamp_type == TimestampType::LogAppendTime;
        let ctx = format!("batch {i}: {batch}");
        assert_eq!(batch["crc_valid"], json!(true), "{ctx}");
        assert_eq!(batch["base_offset"], json!(options.base_offset), "{ctx}");
        assert_eq!(
            batch["last_offset_delta"],
            json!(records.len() - 1),
            "{ctx}"
        );
        assert_eq!(batch["size_in_bytes"], json!(encoded.len()), "{ctx}");
        assert_eq!(
            batch["partition_leader_epoch"],
            json!(options.partition_leader_epoch),
            "{ctx}"
        );
        assert_eq!(batch["magic"], json!(2), "{ctx}");
        assert_eq!(batch["crc"], json!(h.crc), "{ctx}");
        assert_eq!(batch["attributes"], json!(h.attributes), "{ctx}");
        assert_eq!(
            batch["compression_type"],
            json!(options.compression.id()),
            "{ctx}"
        );
        assert_eq!(
            batch["timestamp_type"],
            json!(u8::from(log_append)),
            "{ctx}"
        );
        assert_eq!(
            batch["is_transactional"],
            json!(options.transactional),
            "{ctx}"
        );
        assert_eq!(batch["is_control"], json!(false), "{ctx}");
        assert_eq!(
            batch["first_timestamp"],
            json!(records[0].timestamp),
            "{ctx}"
        );
        assert_eq!(batch["max_timestamp"], json!(max_ts), "{ctx}");
        assert_eq!(batch["producer_id"], json!(options.producer_id), "{ctx}");
        assert_eq!(
            batch["producer_epoch"],
            json!(options.producer_epoch),
            "{ctx}"
        );
        assert_eq!(
            batch["base_sequence"],
            json!(options.base_sequence),
            "{ctx}"
        );
        assert_eq!(batch["records_count"], json!(records.len()), "{ctx}");

        let py_records = batch["records"].as_array().unwrap();
        assert_eq!(py_records.len(), records.len(), "{ctx}");
        for (j, (py, rec)) in py_records.iter().zip(records).enumerate() {
            let ts = if log_append { max_ts } else { rec.timestamp };
            let expected = json!({
                "offset": options.base_offset + j as i64,
                "timestamp": ts,
                "key_b64": b64(&rec.key),
                "value_b64": b64(&rec.value),
                "headers": headers_json(&rec.headers),
            });
            assert_eq!(py, &expected, "batch {i} record {j}");
        }
    }
}

#[test]
fn we_decode_kafka_python_batches() {
    let mut rng = Rng::new(seed() ^ 0xdead_beef);
    let mut spec_batches = Vec::new();
    let mut expected = Vec::new();
    let mut next_offset = rng.below(1 << 40) as i64;
    for _ in 0..60 {
        let records = random_records(&mut rng);
        // kafka-python's builder cannot set LogAppendTime (the broker does), so CreateTime only.
        let options = BatchOptions {
            timestamp_type: TimestampType::CreateTime,
            ..random_options(&mut rng, next_offset)
        };
        // kafka-python sends a batch uncompressed when compression does not make it smaller:
        // give compressed batches records that compress.
        let records = if options.compression == Compression::None {
            records
        } else {
            compressible(&records)
        };
        next_offset += records.len() as i64 + rng.below(3) as i64;
        let json_records: Vec<Value> = records
            .iter()
            .map(|r| {
                json!({
                    "timestamp": r.timestamp,
                    "key_b64": b64(&r.key),
                    "value_b64": b64(&r.value),
                    "headers": headers_json(&r.headers),
                })
            })
            .collect();
        spec_batches.push(json!({
            "base_offset": options.base_offset,
            "partition_leader_epoch": options.partition_leader_epoch,
            "producer_id": options.producer_id,
            "producer_epoch": options.producer_epoch,
            "base_sequence": options.base_sequence,
            "transactional": options.transactional,
            "compression": options.compression.name(),
            "records": json_records,
        }));
        expected.push((options, records));
    }
    let spec_path = temp_file("spec.json");
    let out_path = temp_file("python.log");
    std::fs::write(&spec_path, json!({ "batches": spec_batches }).to_string()).unwrap();
    run_oracle(&[
        "encode",
        spec_path.to_str().unwrap(),
        out_path.to_str().unwrap(),
    ]);
    let segment = Bytes::from(std::fs::read(&out_path).unwrap());
    std::fs::remove_file(&spec_path).ok();
    std::fs::remove_file(&out_path).ok();

    let mut pos = 0;
    let mut compressed = std::collections::BTreeSet::new();
    for (i, (options, records)) in expected.iter().enumerate() {
        let rest = segment.slice(pos..);
        let batch = RecordBatch::decode_first(&rest)
            .unwrap_or_else(|err| panic!("batch {i} from kafka-python failed to decode: {err}"));
        batch.validate_for_append().unwrap();
        let h = batch.header();
        assert_eq!(h.base_offset, options.base_offset, "batch {i}");
        assert_eq!(
            h.partition_leader_epoch, options.partition_leader_epoch,
            "batch {i}"
        );
        assert_eq!(h.producer_id, options.producer_id, "batch {i}");
        assert_eq!(h.producer_epoch, options.producer_epoch, "batch {i}");
        assert_eq!(h.base_sequence, options.base_sequence, "batch {i}");
        assert_eq!(h.is_transactional(), options.transactional, "batch {i}");
        assert_eq!(h.compression().unwrap(), options.compression, "batch {i}");
        compressed.insert(options.compression.id());
        assert_eq!(h.first_timestamp, records[0].timestamp, "batch {i}");
        assert_eq!(
            h.max_timestamp,
            records.iter().map(|r| r.timestamp).max().unwrap()
        );

        for (j, (got, want)) in batch.records().zip(records).enumerate() {
            let got = got.unwrap();
            assert_eq!(
                got.offset,
                options.base_offset + j as i64,
                "batch {i} record {j}"
            );
            assert_eq!(got.timestamp, want.timestamp, "batch {i} record {j}");
            assert_eq!(got.key, want.key, "batch {i} record {j}");
            assert_eq!(got.value, want.value, "batch {i} record {j}");
            assert_eq!(got.headers, want.headers, "batch {i} record {j}");
        }
        assert_eq!(batch.records().count(), records.len(), "batch {i}");

        // Byte compatibility: our encoder must produce exactly kafka-python's bytes (codecs
        // may choose other compressed bytes for the same records, so uncompressed only).
        if options.compression == Compression::None {
            let ours = encode_batch(options, records).unwrap();
            assert_eq!(
                ours,
                batch.bytes(),
                "batch {i}: our encoding differs from kafka-python's"
            );
        }
        pos += batch.len();
    }
    assert_eq!(
        pos,
        segment.len(),
        "kafka-python wrote more batches than expected"
    );
    assert_eq!(
        compressed.len(),
        CODECS.len(),
        "every codec was decoded: {compressed:?}"
    );
    // The unchecked header walk agrees with the validating decoder on batch boundaries.
    assert_eq!(
        strata_server::log::batch::batch_headers(&segment).count(),
        expected.len()
    );
}

/// Reports which kafka-python the oracle used, and fails loudly if it is not runnable.
#[test]
fn oracle_is_available() {
    let version = run_oracle(&["version"]);
    eprintln!("kafka-python {}", version.trim());
    assert!(!version.trim().is_empty());
}

/// The segment files the engine writes (broker-assigned offsets, rolled segments) decode with
/// kafka-python to exactly the records we appended; and batches kafka-python encodes are accepted
/// by the engine as they are and read back unchanged.
#[test]
fn engine_segments_round_trip_through_kafka_python() {
    use strata_server::clock::ManualClock;
    use strata_server::io::{Io, IoBackendChoice};
    use strata_server::log::{Acks, LogConfig, Partition};

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (io, _) = Io::start(IoBackendChoice::Auto, dir.path()).unwrap();
        let config = LogConfig {
            segment_bytes: 8192,
            ..LogConfig::default()
        };
        let partition = Partition::open(&dir.path().join("p"), config, io, ManualClock::new(0))
            .await
            .unwrap();
        let mut rng = Rng::new(seed() ^ 0x5eed);
        let mut appended = Vec::new();
        for _ in 0..40 {
            let records = random_records(&mut rng);
            // The producer's baseOffset is ignored; the engine assigns offsets. Random producer
            // sequences would be refused by the idempotence check, so these batches carry none.
            let options = BatchOptions {
                base_offset: 999_999,
                producer_id: -1,
                producer_epoch: -1,
                base_sequence: -1,
                transactional: false,
                ..random_options(&mut rng, 0)
            };
            let batch =
                RecordBatch::decode_exact(encode_batch(&options, &records).unwrap()).unwrap();
            let acks = partition.append(vec![batch], Acks::All).await.unwrap();
            appended.push((acks[0].base_offset, options, records));
        }
        assert!(
            partition.segments().len() > 1,
            "the test must cover several segments"
        );
        partition.close().await.unwrap();

        let mut logs: Vec<_> = std::fs::read_dir(dir.path().join("p"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        logs.sort();
        let mut decoded = Vec::new();
        for log in &logs {
            let out = run_oracle(&["decode", log.to_str().unwrap()]);
            let value: Value = serde_json::from_str(&out).unwrap();
            decoded.extend(value["batches"].as_array().unwrap().iter().cloned());
        }
        assert_eq!(decoded.len(), appended.len());
        for (batch, (base, options, records)) in decoded.iter().zip(&appended) {
            assert_eq!(batch["crc_valid"], json!(true));
            assert_eq!(batch["base_offset"], json!(base));
            let log_append = options.timestamp_type == TimestampType::LogAppendTime;
            let max_ts = records.iter().map(|r| r.timestamp).max().unwrap();
            for (j, (py, rec)) in batch["records"]
                .as_array()
                .unwrap()
                .iter()
                .zip(records)
                .enumerate()
            {
                let expected = json!({
                    "offset": base + j as u64,
                    "timestamp": if log_append { max_ts } else { rec.timestamp },
                    "key_b64": b64(&rec.key),
                    "value_b64": b64(&rec.value),
                    "headers": headers_json(&rec.headers),
                });
                assert_eq!(py, &expected);
            }
        }
    });
}

#[test]
fn the_engine_stores_kafka_python_batches_byte_for_byte() {
    use strata_server::clock::ManualClock;
    use strata_server::io::{Io, IoBackendChoice};
    use strata_server::log::{Acks, LogConfig, Partition};

    let mut rng = Rng::new(seed() ^ 0xfeed);
    // Every codec, as a real producer would send it (compressible records, so kafka-python
    // does compress).
    let spec: Vec<Value> = (0..20)
        .map(|i| {
            let codec = CODECS[i % CODECS.len()];
            let records: Vec<Value> = compressible(&random_records(&mut rng))
                .iter()
                .map(|r| {
                    json!({"timestamp": r.timestamp, "key_b64": b64(&r.key),
                    "value_b64": b64(&r.value), "headers": headers_json(&r.headers)})
                })
                .collect();
            json!({"base_offset": 0, "records": records, "compression": codec.name()})
        })
        .collect();
    let spec_path = temp_file("engine-spec.json");
    let out_path = temp_file("engine-python.log");
    std::fs::write(&spec_path, json!({ "batches": spec }).to_string()).unwrap();
    run_oracle(&[
        "encode",
        spec_path.to_str().unwrap(),
        out_path.to_str().unwrap(),
    ]);
    let python_bytes = Bytes::from(std::fs::read(&out_path).unwrap());
    std::fs::remove_file(&spec_path).ok();
    std::fs::remove_file(&out_path).ok();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (io, _) = Io::start(IoBackendChoice::Auto, dir.path()).unwrap();
        let partition = Partition::open(dir.path(), LogConfig::default(), io, ManualClock::new(0))
            .await
            .unwrap();
        let mut position = 0;
        let mut expected = Vec::new();
        while position < python_bytes.len() {
            let batch = RecordBatch::decode_first(&python_bytes.slice(position..)).unwrap();
            batch.validate_for_append().unwrap();
            position += batch.len();
            let acks = partition
                .append(vec![batch.clone()], Acks::All)
                .await
                .unwrap();
            // Stored bytes = producer bytes with only baseOffset rewritten.
            let mut stored = batch.bytes().to_vec();
            stored[..8].copy_from_slice(&(acks[0].base_offset as i64).to_be_bytes());
            expected.extend_from_slice(&stored);
        }
        let slice = partition.read(0, u64::MAX).await.unwrap();
        assert_eq!(slice.data.as_ref(), expected.as_slice());
        // kafka-python reads what the engine stored, compressed batches included.
        let stored_path = temp_file("engine-stored.log");
        std::fs::write(&stored_path, &slice.data).unwrap();
        let out = run_oracle(&["decode", stored_path.to_str().unwrap()]);
        std::fs::remove_file(&stored_path).ok();
        let decoded: Value = serde_json::from_str(&out).unwrap();
        let codecs: std::collections::BTreeSet<u64> = decoded["batches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                assert_eq!(b["crc_valid"], true);
                b["compression_type"].as_u64().unwrap()
            })
            .collect();
        assert_eq!(codecs.len(), CODECS.len(), "{codecs:?}");
    });
}

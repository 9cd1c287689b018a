//! Which partition a produced record lands on.
//!
//! Strata promises that a keyed record goes to exactly the partition Kafka's default
//! partitioner would pick, so that a topic filled through Strata's HTTP API and one filled by
//! a Kafka client agree on per-key placement (and therefore per-key ordering). That means
//! reproducing the Java client bit for bit: `Utils.murmur2` over the key's raw bytes, then
//! `Utils.toPositive(hash) % partitions`.
//!
//! Keyless records have no placement to agree on; Kafka's sticky partitioner sends a whole
//! producer batch to one partition to keep batches large. Strata's unit of batching is the
//! produce request, so [`StickyPartitioner`] picks one partition per request.

/// Kafka's murmur2 seed (`Utils.murmur2` in the Java client).
const SEED: u32 = 0x9747_b28c;
/// Kafka's murmur2 multiplication constant.
const M: u32 = 0x5bd1_e995;
/// Kafka's murmur2 shift.
const R: u32 = 24;

/// Kafka's 32-bit murmur2 hash of `key`, exactly as `org.apache.kafka.common.utils.Utils.murmur2`
/// returns it (a signed Java `int`).
///
/// Exposed (rather than only [`partition_for_key`]) so callers and tests can compare against
/// other Kafka implementations, which all publish the signed hash. Java's signed 32-bit
/// arithmetic with `>>>` is the same bit pattern as wrapping `u32` arithmetic with `>>`, which
/// is what this uses; the final value is reinterpreted as `i32`.
pub fn murmur2(key: &[u8]) -> i32 {
    // Java uses the array's `int` length; keys are far below 2^31 bytes, and for anything
    // longer wrapping to 32 bits is the only defined choice anyway.
    let mut h = SEED ^ (key.len() as u32);

    let mut blocks = key.chunks_exact(4);
    for block in &mut blocks {
        let mut k = match <[u8; 4]>::try_from(block) {
            Ok(bytes) => u32::from_le_bytes(bytes),
            // `chunks_exact(4)` only yields 4-byte slices.
            Err(_) => continue,
        };
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }

    // Java's `switch (length % 4)` with fall-through: case 3 -> 2 -> 1, and the multiply only
    // when at least one tail byte exists.
    match *blocks.remainder() {
        [a, b, c] => {
            h ^= u32::from(c) << 16;
            h ^= u32::from(b) << 8;
            h ^= u32::from(a);
            h = h.wrapping_mul(M);
        }
        [a, b] => {
            h ^= u32::from(b) << 8;
            h ^= u32::from(a);
            h = h.wrapping_mul(M);
        }
        [a] => {
            h ^= u32::from(a);
            h = h.wrapping_mul(M);
        }
        _ => {}
    }

    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h.cast_signed()
}

/// Kafka's `Utils.toPositive`: clears the sign bit. Not `abs`: that gives a different value for
/// every negative hash (and overflows on `i32::MIN`), so keys would land elsewhere than in Kafka.
fn to_positive(hash: i32) -> u32 {
    hash.cast_unsigned() & 0x7fff_ffff
}

/// The partition Kafka's default partitioner picks for a record with this key:
/// `toPositive(murmur2(key)) % partitions`.
///
/// `key` is the raw key bytes (for a string key, its UTF-8 bytes, as Kafka's
/// `StringSerializer` produces). `partitions` should be at least 1; for 0 this returns 0 rather
/// than panicking, so a caller that has not validated the count gets a value it will reject as
/// out of range instead of a crashed request handler.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    if partitions == 0 {
        return 0;
    }
    to_positive(murmur2(key)) % partitions
}

/// Partition choice for keyless records: one partition for a whole produce request.
///
/// "Sticky per request" means every keyless record of one produce request goes to the same
/// partition, which is what Kafka's sticky partitioner (KIP-480) does per producer batch: it
/// keeps batches large (one append, one fsync) while spreading load across partitions over
/// many requests. Records in the same request that carry a key or an explicit partition are
/// not affected.
///
/// The choice is a pure function of `seed` (mixed with SplitMix64), so there is no global RNG
/// state and no locking: callers pass anything that varies between requests, such as a
/// per-server request counter or a timestamp, and tests can pass a fixed seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StickyPartitioner {
    partition: u32,
}

impl StickyPartitioner {
    /// Picks the partition for one request's keyless records among `partitions`.
    ///
    /// With `partitions == 0` the choice is 0 (no panic); callers validate the count.
    pub fn new(partitions: u32, seed: u64) -> Self {
        let partition = if partitions == 0 {
            0
        } else {
            // The remainder is < partitions <= u32::MAX, so the conversion cannot fail.
            u32::try_from(splitmix64(seed) % u64::from(partitions)).unwrap_or(0)
        };
        Self { partition }
    }

    /// The partition every keyless record of this request goes to.
    pub fn partition(&self) -> u32 {
        self.partition
    }
}

/// SplitMix64 finalizer: a cheap, well-distributed mix so that consecutive seeds (a request
/// counter) land on unrelated partitions.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Partition counts of the golden table's partition columns.
    const PARTITION_COUNTS: [u32; 4] = [1, 3, 12, 100];

    /// Golden vectors from an independent implementation: kafka-python 2.3.3
    /// (`kafka.partitioner.default.murmur2` and `DefaultPartitioner`), generated by
    /// `scripts/murmur2_vectors.py`. Columns: hex key, signed murmur2, partition for 1, 3, 12
    /// and 100 partitions. Covers the empty key, 1..=9 byte keys (every tail length), ASCII,
    /// multi-byte UTF-8, and bytes 0x80..=0xff.
    const KAFKA_PYTHON_VECTORS: &[(&str, i32, [u32; 4])] = &[
        ("", 275646681, [0, 0, 9, 81]),
        ("61", -1563381124, [0, 1, 4, 24]),
        ("6162", 316155434, [0, 2, 2, 34]),
        ("616263", 479470107, [0, 0, 3, 7]),
        ("61626364", -1323649548, [0, 2, 8, 0]),
        ("6162636465", 461995741, [0, 1, 1, 41]),
        ("616263646566", 1870650108, [0, 0, 0, 8]),
        ("61626364656667", -346467175, [0, 1, 1, 73]),
        ("6162636465666768", -955427363, [0, 0, 9, 85]),
        ("616263646566676869", -619679810, [0, 0, 6, 38]),
        ("3231", -973932308, [0, 0, 0, 40]),
        ("616263", 479470107, [0, 0, 3, 7]),
        ("666f6f626172", -790332482, [0, 0, 6, 66]),
        ("6b6579", -1079937367, [0, 1, 1, 81]),
        ("757365722d3432", 1459644460, [0, 1, 4, 60]),
        ("6f726465723a31303031", -387652882, [0, 1, 10, 66]),
        ("4b61666b61", 824573139, [0, 0, 3, 39]),
        (
            "612d6c6974746c652d6269742d6c6f6e672d737472696e67",
            -985981536,
            [0, 2, 8, 12],
        ),
        (
            "612d6c6974746c652d6269742d6c6f6e6765722d737472696e67",
            -1486304829,
            [0, 2, 11, 19],
        ),
        (
            "6c6b6a683233346c68396669756839307932336f697568736166756a6861646f66323239706872396831396838396838",
            -58897971,
            [0, 2, 5, 77],
        ),
        (
            "54686520717569636b2062726f776e20666f78206a756d7073206f76657220746865206c617a7920646f67",
            495243318,
            [0, 0, 6, 18],
        ),
        ("e697a5e69cace8aa9e", 1431860170, [0, 1, 10, 70]),
        ("c3a9", 186971271, [0, 0, 3, 71]),
        ("c3b1616e64c3ba", -1915788724, [0, 1, 4, 24]),
        ("c3966cc3a7c3bc6d", 897975330, [0, 0, 6, 30]),
        ("f09fa680", 1309741855, [0, 1, 7, 55]),
        ("cebacebbceb5ceb9ceb4ceaf2d37", 35701436, [0, 2, 8, 36]),
        ("d0bad0bbd18ed187", 2122343024, [0, 2, 8, 24]),
        ("00", 375494588, [0, 2, 8, 88]),
        ("ff", -311467685, [0, 0, 3, 63]),
        ("8081", 1642145146, [0, 1, 10, 46]),
        ("fffefd", 998637092, [0, 2, 8, 92]),
        ("7f80ff00", -1951576053, [0, 2, 11, 95]),
        ("deadbeef01", -306773845, [0, 1, 7, 3]),
        (
            "808182838485868788898a8b8c8d8e8f",
            1290994154,
            [0, 2, 2, 54],
        ),
        ("ffffffffffffff", -71293549, [0, 1, 7, 99]),
        ("0000000000000000", -522759933, [0, 2, 11, 15]),
    ];

    /// Long keys from the same kafka-python 2.3.3 run, built here by the same expressions the
    /// script uses (their hex would be kilobytes long). Columns as in `KAFKA_PYTHON_VECTORS`.
    fn kafka_python_long_vectors() -> Vec<(&'static str, Vec<u8>, i32, [u32; 4])> {
        vec![
            (
                "bytes(range(256))",
                (0..=255u8).collect(),
                -1948347274,
                [0, 1, 10, 74],
            ),
            ("b'x' * 63", vec![b'x'; 63], -1624067103, [0, 2, 5, 45]),
            (
                "b'0123456789' * 10",
                b"0123456789".repeat(10),
                2142101513,
                [0, 2, 5, 13],
            ),
            (
                "bytes((i * 37 + 11) % 256 for i in range(1000))",
                (0..1000u32).map(|i| ((i * 37 + 11) % 256) as u8).collect(),
                983639225,
                [0, 2, 5, 25],
            ),
        ]
    }

    /// Apache Kafka's own vectors: `UtilsTest.testMurmur2` in
    /// `clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java` (apache/kafka,
    /// commit f55581dc73953c3509a4702433aeeeddc2970779).
    const JAVA_KAFKA_VECTORS: &[(&[u8], i32)] = &[
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (
            b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
            -58897971,
        ),
        (b"abc", 479470107),
    ];

    fn hex_decode(hex: &str) -> Vec<u8> {
        assert!(hex.len().is_multiple_of(2), "odd-length hex {hex:?}");
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("valid hex"))
            .collect()
    }

    fn hex_encode(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn check(label: &str, key: &[u8], hash: i32, parts: [u32; 4]) {
        assert_eq!(murmur2(key), hash, "murmur2 of {label}");
        for (n, expected) in PARTITION_COUNTS.iter().zip(parts) {
            assert_eq!(
                partition_for_key(key, *n),
                expected,
                "partition of {label} among {n} partitions"
            );
        }
    }

    #[test]
    fn murmur2_matches_java_kafka_utils_test() {
        for (key, expected) in JAVA_KAFKA_VECTORS {
            assert_eq!(murmur2(key), *expected, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn partitioner_matches_kafka_python_golden_vectors() {
        assert!(KAFKA_PYTHON_VECTORS.len() >= 35);
        for (hex, hash, parts) in KAFKA_PYTHON_VECTORS {
            check(&format!("key {hex:?}"), &hex_decode(hex), *hash, *parts);
        }
        for (label, key, hash, parts) in kafka_python_long_vectors() {
            check(label, &key, hash, parts);
        }
    }

    #[test]
    fn golden_table_covers_every_tail_length_and_high_bytes() {
        let keys: Vec<Vec<u8>> = KAFKA_PYTHON_VECTORS
            .iter()
            .map(|(hex, _, _)| hex_decode(hex))
            .collect();
        for len in 0..=9 {
            assert!(
                keys.iter().any(|k| k.len() == len),
                "no key of length {len}"
            );
        }
        assert!(keys.iter().any(|k| k.iter().any(|b| *b >= 0x80)));
        assert!(keys.iter().any(|k| k == "日本語".as_bytes()));
    }

    #[test]
    fn partition_count_zero_returns_zero() {
        assert_eq!(partition_for_key(b"foobar", 0), 0);
        assert_eq!(StickyPartitioner::new(0, 42).partition(), 0);
    }

    #[test]
    fn sticky_partitioner_is_stable_and_spreads() {
        let p = StickyPartitioner::new(12, 7);
        assert_eq!(p.partition(), p.partition());
        assert_eq!(p, StickyPartitioner::new(12, 7));
        // Consecutive seeds (a request counter) should reach every partition quickly.
        let mut seen = [false; 12];
        for seed in 0..200 {
            seen[StickyPartitioner::new(12, seed).partition() as usize] = true;
        }
        assert!(seen.iter().all(|s| *s), "{seen:?}");
    }

    /// Deterministic key generator for the live comparison (SplitMix64 stream).
    fn random_keys(count: usize, mut state: u64) -> Vec<Vec<u8>> {
        let mut next = move || {
            state = state.wrapping_add(1);
            splitmix64(state)
        };
        let samples = ["日本語", "ключ", "🦀", "é", "user-", "order:"];
        (0..count)
            .map(|i| match i % 3 {
                // Arbitrary bytes, lengths 0..=64.
                0 | 1 => {
                    let len = (next() % 65) as usize;
                    (0..len).map(|_| next() as u8).collect()
                }
                // UTF-8 text mixing multi-byte characters and digits.
                _ => {
                    let mut s = String::new();
                    for _ in 0..(next() % 6) {
                        s.push_str(samples[(next() % samples.len() as u64) as usize]);
                        s.push_str(&(next() % 1000).to_string());
                    }
                    s.into_bytes()
                }
            })
            .collect()
    }

    /// Runs `scripts/murmur2_vectors.py` under `$STRATA_PYTHON` (default `python3`) on 500
    /// keys and compares every hash and partition. Fails, never skips, when Python or
    /// kafka-python is missing: this is the project's proof of Kafka-identical placement.
    #[test]
    fn partitioner_matches_kafka_python_live() {
        use std::io::Write;
        use std::process::{Command, Stdio};

        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/murmur2_vectors.py");
        let python = std::env::var("STRATA_PYTHON")
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "python3".to_string());
        let hint = "set STRATA_PYTHON to a Python interpreter with kafka-python 2.3.3 installed \
                    (python3 -m venv v && v/bin/pip install kafka-python==2.3.3 && \
                    export STRATA_PYTHON=$PWD/v/bin/python)";

        let keys = random_keys(500, 0x5742_4154_4131);
        let request =
            serde_json::to_string(&keys.iter().map(|k| hex_encode(k)).collect::<Vec<_>>())
                .expect("serialize keys");

        let mut child = Command::new(&python)
            .arg(script)
            .arg("--stdin")
            .arg("--partitions")
            .arg("1,3,12,100,1000")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {python:?} {script}: {e}; {hint}"));
        child
            .stdin
            .take()
            .expect("child stdin")
            .write_all(request.as_bytes())
            .expect("write keys to the script");
        let output = child.wait_with_output().expect("wait for the script");
        assert!(
            output.status.success(),
            "{python:?} {script} failed ({}): {}; {hint}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end()
        );

        let parsed: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("script prints JSON");
        let vectors = parsed["vectors"].as_array().expect("vectors array");
        assert_eq!(vectors.len(), keys.len(), "one vector per key");
        for (key, v) in keys.iter().zip(vectors) {
            assert_eq!(v["key_hex"], hex_encode(key));
            let expected = v["murmur2"].as_i64().expect("murmur2 is an integer");
            assert_eq!(
                i64::from(murmur2(key)),
                expected,
                "murmur2 of {}",
                hex_encode(key)
            );
            for n in [1u32, 3, 12, 100, 1000] {
                let expected = v["partitions"][n.to_string()].as_u64().expect("partition");
                assert_eq!(
                    u64::from(partition_for_key(key, n)),
                    expected,
                    "partition of {} among {n}",
                    hex_encode(key)
                );
            }
        }
    }

    proptest! {
        #[test]
        fn partition_is_always_in_range(
            key in proptest::collection::vec(any::<u8>(), 0..256),
            partitions in 1u32..=u32::MAX,
        ) {
            prop_assert!(partition_for_key(&key, partitions) < partitions);
        }

        #[test]
        fn murmur2_is_deterministic(key in proptest::collection::vec(any::<u8>(), 0..256)) {
            let copy = key.clone();
            prop_assert_eq!(murmur2(&key), murmur2(&copy));
            prop_assert_eq!(
                partition_for_key(&key, 17),
                to_positive(murmur2(&copy)) % 17
            );
        }

        #[test]
        fn sticky_choice_is_in_range(partitions in 1u32..=u32::MAX, seed in any::<u64>()) {
            prop_assert!(StickyPartitioner::new(partitions, seed).partition() < partitions);
        }
    }
}

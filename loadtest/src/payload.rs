//! Records that verify themselves: every value starts with a prefix naming its run, producer
//! and sequence number, and the rest (and the key) is derived from those, so a reader can tell
//! whether the bytes it got are exactly the bytes that were sent without the generator keeping
//! a copy of what it sent.

use std::fmt;
use std::str::FromStr;

use anyhow::{Context, bail};

/// `"SLT1"` + run id (low 4 bytes) + check (4) + producer (4) + sequence (8) + scheduled send
/// time in ns (8). The check is a hash of the other fields, so a changed send time (the one
/// field not derived from the record's id) is caught too.
pub const PREFIX_LEN: usize = 32;
const MAGIC: [u8; 4] = *b"SLT1";

/// Which record of the run: the producer that sent it and its sequence number there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordId {
    pub producer: u32,
    pub seq: u64,
}

/// What a reader learns from a value's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub id: RecordId,
    /// When the producer meant to send it (ns since the run's start), for end-to-end latency.
    pub sent_ns: u64,
}

/// How large record values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeDist {
    Fixed(usize),
    /// Uniform between the two bounds, inclusive.
    Uniform(usize, usize),
}

impl SizeDist {
    pub fn max(self) -> usize {
        match self {
            SizeDist::Fixed(n) | SizeDist::Uniform(_, n) => n,
        }
    }

    pub fn mean(self) -> f64 {
        match self {
            SizeDist::Fixed(n) => n as f64,
            SizeDist::Uniform(a, b) => (a + b) as f64 / 2.0,
        }
    }

    fn pick(self, hash: u64) -> usize {
        match self {
            SizeDist::Fixed(n) => n,
            SizeDist::Uniform(a, b) => a + (hash % (b - a + 1) as u64) as usize,
        }
    }
}

impl FromStr for SizeDist {
    type Err = anyhow::Error;

    /// `100` or `uniform:64-4096`.
    fn from_str(text: &str) -> anyhow::Result<Self> {
        let parse = |n: &str| n.trim().parse::<usize>().context("a size is a byte count");
        let dist = match text.strip_prefix("uniform:") {
            Some(range) => {
                let (low, high) = range
                    .split_once('-')
                    .context("a uniform size is uniform:LOW-HIGH")?;
                let (low, high) = (parse(low)?, parse(high)?);
                if low > high {
                    bail!("uniform:{low}-{high}: the low bound is above the high one");
                }
                SizeDist::Uniform(low, high)
            }
            None => SizeDist::Fixed(parse(text)?),
        };
        let low = match dist {
            SizeDist::Fixed(n) | SizeDist::Uniform(n, _) => n,
        };
        if low < PREFIX_LEN {
            bail!("record values must be at least {PREFIX_LEN} bytes (the verification prefix)");
        }
        Ok(dist)
    }
}

impl fmt::Display for SizeDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeDist::Fixed(n) => write!(f, "{n}"),
            SizeDist::Uniform(a, b) => write!(f, "uniform:{a}-{b}"),
        }
    }
}

/// Which key a record carries.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyDist {
    /// No key: the generator picks partitions round-robin per request.
    None,
    /// One of `n` keys, each as likely.
    Uniform(u64),
    /// One of `n` keys with Zipf's law of exponent `s` (key 0 hottest); `cdf` is cumulative.
    Zipf { n: u64, s: f64, cdf: Vec<f64> },
}

impl KeyDist {
    pub fn is_keyed(&self) -> bool {
        !matches!(self, KeyDist::None)
    }

    fn pick(&self, hash: u64) -> Option<u64> {
        let unit = (hash >> 11) as f64 / (1u64 << 53) as f64;
        match self {
            KeyDist::None => None,
            KeyDist::Uniform(n) => Some(hash % n),
            KeyDist::Zipf { cdf, .. } => {
                let index = cdf.partition_point(|&c| c < unit);
                Some(index.min(cdf.len() - 1) as u64)
            }
        }
    }
}

impl FromStr for KeyDist {
    type Err = anyhow::Error;

    /// `none`, `uniform:1000` or `zipf:1000` / `zipf:1000:1.2` (exponent, default 1.0).
    fn from_str(text: &str) -> anyhow::Result<Self> {
        if text == "none" {
            return Ok(KeyDist::None);
        }
        let count = |n: &str| -> anyhow::Result<u64> {
            let n: u64 = n.parse().context("a key count is a whole number")?;
            if n == 0 || n > 10_000_000 {
                bail!("key counts go from 1 to 10,000,000");
            }
            Ok(n)
        };
        if let Some(n) = text.strip_prefix("uniform:") {
            return Ok(KeyDist::Uniform(count(n)?));
        }
        if let Some(rest) = text.strip_prefix("zipf:") {
            let (n, s) = match rest.split_once(':') {
                Some((n, s)) => (count(n)?, s.parse::<f64>().context("a Zipf exponent")?),
                None => (count(rest)?, 1.0),
            };
            if !(s > 0.0 && s.is_finite()) {
                bail!("the Zipf exponent must be a positive number");
            }
            return Ok(KeyDist::Zipf {
                n,
                s,
                cdf: zipf_cdf(n, s),
            });
        }
        bail!("keys are none, uniform:N or zipf:N[:EXPONENT]")
    }
}

impl fmt::Display for KeyDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyDist::None => write!(f, "none"),
            KeyDist::Uniform(n) => write!(f, "uniform:{n}"),
            KeyDist::Zipf { n, s, .. } => write!(f, "zipf:{n}:{s}"),
        }
    }
}

fn zipf_cdf(n: u64, s: f64) -> Vec<f64> {
    let weights: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-s)).collect();
    let total: f64 = weights.iter().sum();
    let mut running = 0.0;
    weights
        .into_iter()
        .map(|w| {
            running += w / total;
            running
        })
        .collect()
}

/// The run's record factory and checker.
#[derive(Debug, Clone)]
pub struct Payloads {
    run_id: u64,
    sizes: SizeDist,
    keys: KeyDist,
    /// Random bytes the values are cut from (a copy, not a generator, per record).
    pool: Vec<u8>,
}

/// Why a value is not the one its prefix claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// Too short to hold the prefix, or the prefix is not ours.
    Foreign,
    /// Our run's magic, but the prefix's check does not match its fields.
    Prefix,
    Length {
        expected: usize,
        actual: usize,
    },
    Bytes,
    Key,
}

impl Payloads {
    pub fn new(run_id: u64, sizes: SizeDist, keys: KeyDist) -> Self {
        let len = (1 << 20).max(2 * sizes.max());
        let mut pool = Vec::with_capacity(len);
        let mut state = run_id;
        while pool.len() < len {
            state = splitmix(state);
            pool.extend_from_slice(&state.to_le_bytes());
        }
        pool.truncate(len);
        Self {
            run_id,
            sizes,
            keys,
            pool,
        }
    }

    pub fn run_id(&self) -> u64 {
        self.run_id
    }

    pub fn keys(&self) -> &KeyDist {
        &self.keys
    }

    fn hash(&self, id: RecordId, salt: u64) -> u64 {
        splitmix(splitmix(splitmix(self.run_id ^ salt) ^ u64::from(id.producer)) ^ id.seq)
    }

    pub fn value_len(&self, id: RecordId) -> usize {
        self.sizes.pick(self.hash(id, 1))
    }

    /// The key of record `id`, as text (`key-00000042`).
    pub fn key(&self, id: RecordId) -> Option<String> {
        self.keys
            .pick(self.hash(id, 2))
            .map(|k| format!("key-{k:08}"))
    }

    /// Appends record `id`'s value to `out`.
    pub fn write_value(&self, id: RecordId, sent_ns: u64, out: &mut Vec<u8>) {
        let len = self.value_len(id);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&(self.run_id as u32).to_be_bytes());
        out.extend_from_slice(&self.check_word(id, sent_ns).to_be_bytes());
        out.extend_from_slice(&id.producer.to_be_bytes());
        out.extend_from_slice(&id.seq.to_be_bytes());
        out.extend_from_slice(&sent_ns.to_be_bytes());
        let start = self.filler_start(id, len);
        out.extend_from_slice(&self.pool[start..start + len - PREFIX_LEN]);
    }

    fn check_word(&self, id: RecordId, sent_ns: u64) -> u32 {
        (self.hash(id, 4) ^ splitmix(sent_ns)) as u32
    }

    fn filler_start(&self, id: RecordId, len: usize) -> usize {
        let room = self.pool.len() - (len - PREFIX_LEN) + 1;
        (self.hash(id, 3) % room as u64) as usize
    }

    /// Reads a value's prefix: `None` when the value belongs to no record of this run, or its
    /// prefix does not add up.
    pub fn stamp(&self, value: &[u8]) -> Option<Stamp> {
        let prefix = value.get(..PREFIX_LEN)?;
        let word = |at: usize| {
            u32::from_be_bytes([prefix[at], prefix[at + 1], prefix[at + 2], prefix[at + 3]])
        };
        let long = |at: usize| u64::from(word(at)) << 32 | u64::from(word(at + 4));
        if prefix[..4] != MAGIC || word(4) != self.run_id as u32 {
            return None;
        }
        let stamp = Stamp {
            id: RecordId {
                producer: word(12),
                seq: long(16),
            },
            sent_ns: long(24),
        };
        (word(8) == self.check_word(stamp.id, stamp.sent_ns)).then_some(stamp)
    }

    /// Whether a value claims to be of this run (its magic and run id), true or not.
    fn claims_ours(&self, value: &[u8]) -> bool {
        value.len() >= 8 && value[..4] == MAGIC && value[4..8] == (self.run_id as u32).to_be_bytes()
    }

    /// Checks a stored record against what its prefix says was sent: the same length, the same
    /// bytes and the same key.
    pub fn check(&self, key: Option<&[u8]>, value: &[u8]) -> Result<Stamp, Mismatch> {
        let stamp = match self.stamp(value) {
            Some(stamp) => stamp,
            None if self.claims_ours(value) => return Err(Mismatch::Prefix),
            None => return Err(Mismatch::Foreign),
        };
        let expected = self.value_len(stamp.id);
        if value.len() != expected {
            return Err(Mismatch::Length {
                expected,
                actual: value.len(),
            });
        }
        let start = self.filler_start(stamp.id, expected);
        if value[PREFIX_LEN..] != self.pool[start..start + expected - PREFIX_LEN] {
            return Err(Mismatch::Bytes);
        }
        if key != self.key(stamp.id).as_deref().map(str::as_bytes) {
            return Err(Mismatch::Key);
        }
        Ok(stamp)
    }
}

/// SplitMix64: a fast, well-mixed 64-bit hash step.
pub fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn payloads(sizes: &str, keys: &str) -> Payloads {
        Payloads::new(
            7,
            sizes.parse().expect("sizes"),
            keys.parse().expect("keys"),
        )
    }

    proptest! {
        #[test]
        fn every_value_checks_and_any_changed_byte_is_caught(
            producer in 0u32..64, seq in 0u64..1_000_000, sent in any::<u64>(), flip in any::<usize>()
        ) {
            let p = payloads("uniform:32-300", "zipf:100");
            let id = RecordId { producer, seq };
            let mut value = Vec::new();
            p.write_value(id, sent, &mut value);
            let key = p.key(id);
            let key = key.as_deref().map(str::as_bytes);
            prop_assert_eq!(p.check(key, &value), Ok(Stamp { id, sent_ns: sent }));
            let at = flip % value.len();
            value[at] ^= 0x20;
            prop_assert!(p.check(key, &value).is_err());
        }
    }

    #[test]
    fn values_of_other_runs_and_wrong_keys_are_refused() {
        let ours = payloads("100", "uniform:10");
        let theirs = Payloads::new(8, SizeDist::Fixed(100), KeyDist::Uniform(10));
        let id = RecordId {
            producer: 1,
            seq: 5,
        };
        let mut value = Vec::new();
        theirs.write_value(id, 0, &mut value);
        assert_eq!(ours.stamp(&value), None);
        assert_eq!(ours.check(None, &value), Err(Mismatch::Foreign));
        let mut value = Vec::new();
        ours.write_value(id, 0, &mut value);
        assert_eq!(
            ours.check(Some(b"key-99999999"), &value),
            Err(Mismatch::Key)
        );
        value.pop();
        assert!(matches!(
            ours.check(None, &value),
            Err(Mismatch::Length { .. })
        ));
    }

    #[test]
    fn zipf_keys_favour_the_first_and_uniform_ones_do_not() {
        let zipf = payloads("32", "zipf:100:1.2");
        let uniform = payloads("32", "uniform:100");
        let hot = |p: &Payloads| {
            (0..20_000)
                .filter(|&seq| {
                    p.key(RecordId { producer: 0, seq }).as_deref() == Some("key-00000000")
                })
                .count()
        };
        // Zipf(1.2) over 100 keys gives key 0 about 19 % of the draws; uniform about 1 %.
        assert!(
            hot(&zipf) > 3_000,
            "zipf hot key drawn {} times",
            hot(&zipf)
        );
        assert!(
            hot(&uniform) < 400,
            "uniform key 0 drawn {} times",
            hot(&uniform)
        );
    }

    #[test]
    fn bad_distributions_are_refused_with_a_reason() {
        assert!("16".parse::<SizeDist>().is_err());
        assert!("uniform:500-100".parse::<SizeDist>().is_err());
        assert!("zipf:0".parse::<KeyDist>().is_err());
        assert!("zipf:10:-1".parse::<KeyDist>().is_err());
        assert!("hot".parse::<KeyDist>().is_err());
        assert_eq!(
            "uniform:64-4096".parse::<SizeDist>().ok(),
            Some(SizeDist::Uniform(64, 4096))
        );
    }
}

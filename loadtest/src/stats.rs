//! Latency histograms and per-second series, recorded per task and merged at the end.
//!
//! Everything outside the measured window (the warm-up, and anything after the end) is left
//! out of the figures, never out of the verification.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latencies are recorded in microseconds, 3 significant figures, from 1 µs to 1 hour.
fn histogram() -> Histogram<u64> {
    histogram_with(3)
}

fn histogram_with(figures: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, figures).expect("constant, valid bounds")
}

/// One task's measurements.
#[derive(Debug, Clone)]
pub struct Recorder {
    window_start: Instant,
    window: Duration,
    latency: Histogram<u64>,
    seconds: Vec<Second>,
    requests: u64,
    records: u64,
    bytes: u64,
    errors: u64,
}

#[derive(Debug, Clone)]
struct Second {
    requests: u64,
    records: u64,
    bytes: u64,
    latency: Histogram<u64>,
}

impl Recorder {
    /// Records what completes between `window_start` and `window_start + window`.
    pub fn new(window_start: Instant, window: Duration) -> Self {
        Self {
            window_start,
            window,
            latency: histogram(),
            seconds: Vec::new(),
            requests: 0,
            records: 0,
            bytes: 0,
            errors: 0,
        }
    }

    /// A request that ended at `now`, carrying `records` records of `bytes` payload bytes.
    pub fn record(&mut self, now: Instant, latency: Duration, records: u64, bytes: u64) {
        let Some(second) = self.second(now) else {
            return;
        };
        let micros = (latency.as_micros() as u64).max(1);
        let slot = &mut self.seconds[second];
        slot.requests += 1;
        slot.records += records;
        slot.bytes += bytes;
        let _ = slot.latency.record(micros);
        let _ = self.latency.record(micros);
        self.requests += 1;
        self.records += records;
        self.bytes += bytes;
    }

    /// A request that failed at `now`.
    pub fn error(&mut self, now: Instant) {
        if self.second(now).is_some() {
            self.errors += 1;
        }
    }

    fn second(&mut self, now: Instant) -> Option<usize> {
        let since = now.checked_duration_since(self.window_start)?;
        if since > self.window {
            return None;
        }
        let index = since.as_secs() as usize;
        grow_to(&mut self.seconds, index);
        Some(index)
    }

    pub fn merge(&mut self, other: &Recorder) {
        let _ = self.latency.add(&other.latency);
        self.requests += other.requests;
        self.records += other.records;
        self.bytes += other.bytes;
        self.errors += other.errors;
        for (index, second) in other.seconds.iter().enumerate() {
            grow_to(&mut self.seconds, index);
            let slot = &mut self.seconds[index];
            slot.requests += second.requests;
            slot.records += second.records;
            slot.bytes += second.bytes;
            let _ = slot.latency.add(&second.latency);
        }
    }

    /// The figures of the window, which lasted `seconds`.
    pub fn summary(&self, seconds: f64) -> Summary {
        let h = &self.latency;
        let ms = |v: u64| v as f64 / 1000.0;
        let quantile = |q: f64| {
            if h.is_empty() {
                0.0
            } else {
                ms(h.value_at_quantile(q))
            }
        };
        let seconds = seconds.max(1e-9);
        Summary {
            requests: self.requests,
            records: self.records,
            bytes: self.bytes,
            errors: self.errors,
            requests_per_s: self.requests as f64 / seconds,
            records_per_s: self.records as f64 / seconds,
            mib_per_s: self.bytes as f64 / seconds / (1 << 20) as f64,
            latency_ms: Latency {
                mean: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
                p50: quantile(0.5),
                p90: quantile(0.9),
                p99: quantile(0.99),
                p999: quantile(0.999),
                p9999: quantile(0.9999),
                max: ms(h.max()),
            },
            percentile_curve: curve(h),
            per_second: self
                .seconds
                .iter()
                .enumerate()
                .map(|(t, s)| PerSecond {
                    t: t as u64,
                    requests: s.requests,
                    records: s.records,
                    bytes: s.bytes,
                    p50_ms: if s.latency.is_empty() {
                        0.0
                    } else {
                        ms(s.latency.value_at_quantile(0.5))
                    },
                    p99_ms: if s.latency.is_empty() {
                        0.0
                    } else {
                        ms(s.latency.value_at_quantile(0.99))
                    },
                })
                .collect(),
        }
    }
}

/// Adds empty seconds until `index` exists.
fn grow_to(seconds: &mut Vec<Second>, index: usize) {
    while seconds.len() <= index {
        seconds.push(Second {
            requests: 0,
            records: 0,
            bytes: 0,
            latency: histogram_with(2),
        });
    }
}

/// Latency at quantiles 0, 0.5, 0.75, 0.875, ... up to 1 - 1e-5 and the maximum: the points of
/// a percentile plot on a "nines" axis.
fn curve(h: &Histogram<u64>) -> Vec<CurvePoint> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut points = Vec::new();
    let mut q: f64 = 0.0;
    while q < 0.99999 {
        points.push(CurvePoint {
            quantile: q,
            ms: h.value_at_quantile(q) as f64 / 1000.0,
        });
        q = 1.0 - (1.0 - q) * 0.8;
    }
    points.push(CurvePoint {
        quantile: 1.0,
        ms: h.max() as f64 / 1000.0,
    });
    points
}

/// The figures of one kind of request over the measured window.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    pub requests: u64,
    pub records: u64,
    pub bytes: u64,
    pub errors: u64,
    pub requests_per_s: f64,
    pub records_per_s: f64,
    pub mib_per_s: f64,
    pub latency_ms: Latency,
    pub percentile_curve: Vec<CurvePoint>,
    pub per_second: Vec<PerSecond>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct CurvePoint {
    pub quantile: f64,
    pub ms: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct PerSecond {
    pub t: u64,
    pub requests: u64,
    pub records: u64,
    pub bytes: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_window_counts_and_merging_adds_up() {
        let start = Instant::now();
        let mut a = Recorder::new(start + Duration::from_secs(1), Duration::from_secs(2));
        a.record(start, Duration::from_millis(5), 10, 100); // warm-up: left out
        a.record(
            start + Duration::from_millis(1500),
            Duration::from_millis(1),
            10,
            100,
        );
        a.record(
            start + Duration::from_millis(2500),
            Duration::from_millis(3),
            10,
            100,
        );
        a.record(
            start + Duration::from_secs(4),
            Duration::from_millis(9),
            10,
            100,
        ); // after
        let mut b = Recorder::new(start + Duration::from_secs(1), Duration::from_secs(2));
        b.record(
            start + Duration::from_millis(1200),
            Duration::from_millis(2),
            1,
            1,
        );
        b.error(start + Duration::from_millis(1300));
        a.merge(&b);
        let s = a.summary(2.0);
        assert_eq!((s.requests, s.records, s.bytes, s.errors), (3, 21, 201, 1));
        assert_eq!(s.per_second.len(), 2);
        assert_eq!(s.per_second[0].records, 11);
        assert_eq!(s.per_second[1].records, 10);
        assert!(
            (s.latency_ms.max - 3.0).abs() < 0.01,
            "max {}",
            s.latency_ms.max
        );
        assert!((s.records_per_s - 10.5).abs() < 1e-9);
        assert_eq!(s.percentile_curve.last().map(|p| p.quantile), Some(1.0));
    }
}

//! A byte-rate limit for the cleaner's reads and writes (Kafka's
//! `log.cleaner.io.max.bytes.per.second`), so a big compaction cannot take the disk away from
//! produce. One throttle is shared by every partition the cleaner works on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// Times a cleaner read or write was held back by the throttle, since start (process-wide,
/// for `/metrics`).
pub static THROTTLE_WAITS: AtomicU64 = AtomicU64::new(0);

/// Nanoseconds the cleaner spent held back by the throttle, since start.
pub static THROTTLE_WAIT_NANOS: AtomicU64 = AtomicU64::new(0);

/// Credit older than this is forgotten, so an idle cleaner cannot save up a burst.
const MAX_BURST: Duration = Duration::from_secs(1);

/// Sleeps callers so that bytes pass at no more than the configured rate on average.
#[derive(Debug)]
pub struct Throttle {
    bytes_per_second: u64,
    window: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    bytes: u64,
}

impl Throttle {
    /// A limit of `bytes_per_second`; 0 means unlimited.
    // A monotonic rate limiter: byte budgets per elapsed second.
    #[allow(clippy::disallowed_methods)]
    pub fn new(bytes_per_second: u64) -> Self {
        Self {
            bytes_per_second,
            window: Mutex::new(Window {
                started: Instant::now(),
                bytes: 0,
            }),
        }
    }

    /// No limit.
    pub fn unlimited() -> Self {
        Self::new(0)
    }

    /// Accounts for `bytes` of cleaner I/O, sleeping until the average rate is back under the
    /// limit.
    // A monotonic rate limiter: byte budgets per elapsed second.
    #[allow(clippy::disallowed_methods)]
    pub async fn consume(&self, bytes: u64) {
        if self.bytes_per_second == 0 || bytes == 0 {
            return;
        }
        let delay = {
            let mut window = self.window.lock().await;
            let now = Instant::now();
            let earned = budget_time(window.bytes, self.bytes_per_second);
            let elapsed = now.duration_since(window.started);
            if elapsed > earned + MAX_BURST {
                window.started = now - MAX_BURST.min(elapsed);
                window.bytes = 0;
            }
            window.bytes = window.bytes.saturating_add(bytes);
            let due = budget_time(window.bytes, self.bytes_per_second);
            due.saturating_sub(now.duration_since(window.started))
        };
        if !delay.is_zero() {
            THROTTLE_WAITS.fetch_add(1, Ordering::Relaxed);
            let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
            THROTTLE_WAIT_NANOS.fetch_add(nanos, Ordering::Relaxed);
            tokio::time::sleep(delay).await;
        }
    }
}

/// How long `bytes` take at `rate` bytes per second.
fn budget_time(bytes: u64, rate: u64) -> Duration {
    Duration::from_secs_f64(bytes as f64 / rate as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    // A monotonic rate limiter: byte budgets per elapsed second.
    #[allow(clippy::disallowed_methods)]
    async fn bytes_pass_no_faster_than_the_limit() {
        let throttle = Throttle::new(1_000_000);
        let (waits, waited) = (
            THROTTLE_WAITS.load(Ordering::Relaxed),
            THROTTLE_WAIT_NANOS.load(Ordering::Relaxed),
        );
        let start = Instant::now();
        for _ in 0..10 {
            throttle.consume(500_000).await;
        }
        // 5 MB at 1 MB/s, with at most one second of initial burst credit.
        let elapsed = start.elapsed();
        assert!(elapsed >= Duration::from_secs(4), "took {elapsed:?}");
        assert!(elapsed <= Duration::from_secs(6), "took {elapsed:?}");
        // The metrics see the waits (other tests may add to these process-wide counters).
        assert!(THROTTLE_WAITS.load(Ordering::Relaxed) >= waits + 8);
        let slept = THROTTLE_WAIT_NANOS.load(Ordering::Relaxed) - waited;
        assert!(slept >= 3_000_000_000, "{slept} ns");
    }

    #[tokio::test(start_paused = true)]
    // A monotonic rate limiter: byte budgets per elapsed second.
    #[allow(clippy::disallowed_methods)]
    async fn unlimited_never_sleeps() {
        let throttle = Throttle::unlimited();
        let start = Instant::now();
        throttle.consume(u64::MAX).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}

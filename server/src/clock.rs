//! Wall-clock time for everything that ages data (segment rolls, retention, group expiry).
//!
//! Components take an `Arc<dyn Clock>` so tests can drive time with [`ManualClock`] instead of
//! sleeping. Nothing else in the server reads the system clock directly.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, the unit Kafka uses for record timestamps.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time in milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    // The one reader of the system clock: everything else takes a Clock.
    #[allow(clippy::disallowed_methods)]
    fn now_ms(&self) -> i64 {
        // A clock before 1970 is a misconfigured host; report the epoch rather than panic.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

/// A monotonic instant, for durations that metrics report (append stages, request times,
/// recovery, uptime). Durations decide nothing, so they need no injectable clock; this is the
/// one place that reads the monotonic clock for them.
// The one reader of the monotonic clock for measured durations.
#[allow(clippy::disallowed_methods)]
pub fn stopwatch() -> std::time::Instant {
    std::time::Instant::now()
}

/// A clock that only moves when told to, so time-based behaviour is tested without sleeping.
#[derive(Debug)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    /// A clock frozen at `start_ms`.
    pub fn new(start_ms: i64) -> Arc<Self> {
        Arc::new(Self {
            now_ms: AtomicI64::new(start_ms),
        })
    }

    /// Moves the clock forward (or backward, for negative `delta_ms`).
    pub fn advance(&self, delta_ms: i64) {
        self.now_ms.fetch_add(delta_ms, Ordering::SeqCst);
    }

    /// Jumps to an absolute time.
    pub fn set(&self, now_ms: i64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::new(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        clock.advance(500);
        assert_eq!(clock.now_ms(), 1_500);
        clock.set(42);
        assert_eq!(clock.now_ms(), 42);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_ms() > 1_577_836_800_000);
    }
}

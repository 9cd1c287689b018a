//! The open-loop schedule: request k of the run is due at `origin + k / rate`, dealt to the
//! producers in turn. The pacer runs on its own OS thread and sleeps with the kernel's
//! high-resolution timer (tens of microseconds), because the async runtime's timer rounds up
//! to whole milliseconds, which would add up to 1 ms of the generator's own lateness to every
//! latency at 1,000 requests/s. A producer that is still waiting for an answer finds its next
//! ticket queued: the wait counts in that request's latency (no coordinated omission).

use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

pub fn pace(
    rate: f64,
    origin: Instant,
    deadline: Option<Instant>,
    senders: Vec<UnboundedSender<Instant>>,
) {
    let mut open: Vec<bool> = vec![true; senders.len()];
    let mut k: u64 = 0;
    loop {
        let due = origin + Duration::from_secs_f64(k as f64 / rate);
        if deadline.is_some_and(|deadline| due >= deadline) {
            break;
        }
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let slot = (k % senders.len() as u64) as usize;
        if open[slot] && senders[slot].send(due).is_err() {
            // That producer is done (its record budget is spent).
            open[slot] = false;
        }
        if !open.iter().any(|&o| o) {
            break;
        }
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_follow_the_schedule_and_go_round_robin() {
        let (a, mut ra) = tokio::sync::mpsc::unbounded_channel();
        let (b, mut rb) = tokio::sync::mpsc::unbounded_channel();
        let origin = Instant::now();
        // 1,000 per second for 20 ms: tickets 0..19.
        pace(
            1000.0,
            origin,
            Some(origin + Duration::from_millis(20)),
            vec![a, b],
        );
        let mut first = Vec::new();
        while let Ok(at) = ra.try_recv() {
            first.push(at);
        }
        let mut second = Vec::new();
        while let Ok(at) = rb.try_recv() {
            second.push(at);
        }
        assert_eq!((first.len(), second.len()), (10, 10));
        assert_eq!(first[1] - first[0], Duration::from_millis(2));
        assert_eq!(second[0] - origin, Duration::from_millis(1));
    }
}

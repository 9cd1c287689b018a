//! Open streams (SSE) and long polls per principal: each holds a connection and a task for as
//! long as it lasts, so one principal may hold at most `max_streams_per_principal` of them and
//! cannot starve the others. A slot is released when its stream or poll ends (on drop).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::Principal;

/// A refused stream: the principal holds as many as it may.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{principal} has {limit} open streams and long polls, the most allowed; close one first")]
pub struct TooManyStreams {
    /// Who.
    pub principal: Principal,
    /// The limit.
    pub limit: usize,
}

/// Counts of open streams per principal.
#[derive(Debug)]
pub struct StreamSlots {
    limit: usize,
    open: Arc<Mutex<HashMap<Principal, usize>>>,
}

/// One open stream or poll; dropping it frees the slot.
#[derive(Debug)]
pub struct StreamSlot {
    principal: Principal,
    open: Arc<Mutex<HashMap<Principal, usize>>>,
}

impl StreamSlots {
    /// At most `limit` per principal.
    pub fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            open: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Slots held now, all principals together.
    pub fn open_total(&self) -> usize {
        self.open.lock().values().sum()
    }

    /// A slot for `principal`.
    ///
    /// # Errors
    /// The principal holds `limit` slots already.
    pub fn acquire(&self, principal: &Principal) -> Result<StreamSlot, TooManyStreams> {
        let mut open = self.open.lock();
        let count = open.entry(principal.clone()).or_insert(0);
        if *count >= self.limit {
            return Err(TooManyStreams {
                principal: principal.clone(),
                limit: self.limit,
            });
        }
        *count += 1;
        Ok(StreamSlot {
            principal: principal.clone(),
            open: Arc::clone(&self.open),
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock();
        if let Some(count) = open.get_mut(&self.principal) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_per_principal_and_freed_on_drop() {
        let slots = StreamSlots::new(2);
        let alice = Principal::new("alice");
        let first = slots.acquire(&alice).unwrap();
        let _second = slots.acquire(&alice).unwrap();
        assert_eq!(slots.acquire(&alice).unwrap_err().limit, 2);
        assert!(slots.acquire(&Principal::new("bob")).is_ok());
        drop(first);
        assert!(slots.acquire(&alice).is_ok());
    }
}

//! Per-principal quotas: requests, produced bytes and fetched bytes per second, each a GCRA
//! limiter (governor) with a burst of one second's worth. A request over quota is refused
//! before it has any effect, with the time after which the same request would pass.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota as Rate, RateLimiter};
use parking_lot::Mutex;

use super::Principal;
use crate::config::Quota;

/// A refusal: retry after `retry_after`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{principal} exceeded its {what} quota of {limit} per second; retry in {} ms", .retry_after.as_millis())]
pub struct QuotaExceeded {
    /// Who.
    pub principal: Principal,
    /// Which quota ("requests", "produce bytes", "fetch bytes").
    pub what: &'static str,
    /// Its rate.
    pub limit: u64,
    /// When the same request would pass.
    pub retry_after: Duration,
}

/// One principal's limiters (`None`: unlimited).
#[derive(Debug)]
struct Limiters {
    requests: Option<DefaultDirectRateLimiter>,
    produce: Option<DefaultDirectRateLimiter>,
    fetch: Option<DefaultDirectRateLimiter>,
    quota: Quota,
}

/// The quotas of every principal.
#[derive(Debug)]
pub struct Quotas {
    default: Quota,
    named: BTreeMap<String, Quota>,
    limiters: Mutex<HashMap<Principal, Arc<Limiters>>>,
}

fn limiter(per_second: u64) -> Option<DefaultDirectRateLimiter> {
    let rate = NonZeroU32::new(u32::try_from(per_second).unwrap_or(u32::MAX))?;
    Some(RateLimiter::direct(Rate::per_second(rate)))
}

impl Quotas {
    /// `default` for everyone, `named` for the principals it names.
    pub fn new(default: Quota, named: BTreeMap<String, Quota>) -> Self {
        Self {
            default,
            named,
            limiters: Mutex::new(HashMap::new()),
        }
    }

    fn quota_of(&self, principal: &Principal) -> Quota {
        self.named
            .get(principal.as_str())
            .copied()
            .unwrap_or(self.default)
    }

    fn of(&self, principal: &Principal) -> Arc<Limiters> {
        let mut limiters = self.limiters.lock();
        let entry = limiters.entry(principal.clone()).or_insert_with(|| {
            let quota = self.quota_of(principal);
            Arc::new(Limiters {
                requests: limiter(quota.requests_per_second),
                produce: limiter(quota.produce_bytes_per_second),
                fetch: limiter(quota.fetch_bytes_per_second),
                quota,
            })
        });
        Arc::clone(entry)
    }

    /// Counts one request.
    ///
    /// # Errors
    /// Over the requests-per-second quota.
    pub fn request(&self, principal: &Principal) -> Result<(), QuotaExceeded> {
        // Unlimited (the default) costs no lock on this per-request path.
        if self.quota_of(principal).requests_per_second == 0 {
            return Ok(());
        }
        let limiters = self.of(principal);
        let limit = limiters.quota.requests_per_second;
        take(principal, "requests", limit, limiters.requests.as_ref(), 1)
    }

    /// Takes `bytes` of produce quota (at most one second's worth, so any request can pass
    /// eventually).
    ///
    /// # Errors
    /// Over the produce quota.
    pub fn produce(&self, principal: &Principal, bytes: u64) -> Result<(), QuotaExceeded> {
        if self.quota_of(principal).produce_bytes_per_second == 0 {
            return Ok(());
        }
        let limiters = self.of(principal);
        let limit = limiters.quota.produce_bytes_per_second;
        take(
            principal,
            "produce bytes",
            limit,
            limiters.produce.as_ref(),
            bytes,
        )
    }

    /// Takes the quota a fetch of up to `max_bytes` needs and returns the `max_bytes` it may
    /// use: at most one second's worth, so fetched bytes per second stay within the quota.
    ///
    /// # Errors
    /// Over the fetch quota.
    pub fn fetch(&self, principal: &Principal, max_bytes: u64) -> Result<u64, QuotaExceeded> {
        if self.quota_of(principal).fetch_bytes_per_second == 0 {
            return Ok(max_bytes);
        }
        let limiters = self.of(principal);
        let limit = limiters.quota.fetch_bytes_per_second;
        let capped = max_bytes.min(limit).max(1);
        take(
            principal,
            "fetch bytes",
            limit,
            limiters.fetch.as_ref(),
            capped,
        )?;
        Ok(capped)
    }
}

fn take(
    principal: &Principal,
    what: &'static str,
    limit: u64,
    limiter: Option<&DefaultDirectRateLimiter>,
    amount: u64,
) -> Result<(), QuotaExceeded> {
    let Some(limiter) = limiter else {
        return Ok(());
    };
    let amount = u32::try_from(amount.min(limit).max(1)).unwrap_or(u32::MAX);
    let Some(amount) = NonZeroU32::new(amount) else {
        return Ok(());
    };
    match limiter.check_n(amount) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(not_until)) => Err(QuotaExceeded {
            principal: principal.clone(),
            what,
            limit,
            retry_after: not_until.wait_time_from(DefaultClock::default().now()),
        }),
        // More than the burst: cannot happen, amounts are capped at one second's worth.
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_over_quota_is_refused_and_others_are_not() {
        let quota = Quota {
            requests_per_second: 2,
            produce_bytes_per_second: 1000,
            fetch_bytes_per_second: 500,
        };
        let named = BTreeMap::from([("vip".to_string(), Quota::default())]);
        let quotas = Quotas::new(quota, named);
        let alice = Principal::new("alice");
        assert!(quotas.request(&alice).is_ok() && quotas.request(&alice).is_ok());
        let refused = quotas.request(&alice).unwrap_err();
        assert!(
            refused.retry_after > Duration::ZERO && refused.retry_after <= Duration::from_secs(1)
        );
        assert!(quotas.request(&Principal::new("bob")).is_ok());
        for _ in 0..100 {
            assert!(quotas.request(&Principal::new("vip")).is_ok(), "unlimited");
        }
        assert!(quotas.produce(&alice, 600).is_ok());
        assert!(quotas.produce(&alice, 600).is_err());
        assert_eq!(quotas.fetch(&alice, 1 << 20).unwrap(), 500);
        assert!(quotas.fetch(&alice, 10).is_err());
    }
}

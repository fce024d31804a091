//! Named, keyed rate limits (decisions §13): per IP for registration and
//! login, per key for submissions. Exceeding one is 429 with Retry-After.

use std::collections::HashMap;
use std::num::NonZeroU32;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::RateLimits;
use crate::http::problem::ApiError;

/// Keys one limiter tracks before idle keys are swept, bounding memory.
pub const KEYS_PER_LIMITER_MAX: usize = 100_000;

pub struct Limiters {
    limiters: HashMap<String, DefaultKeyedRateLimiter<String>>,
    clock: DefaultClock,
}

impl Limiters {
    pub fn new(limits: &RateLimits) -> Limiters {
        let mut limiters = HashMap::new();
        if let Some(named) = &limits.limits {
            for (name, limit) in named {
                let burst = NonZeroU32::new(limit.burst).unwrap_or(NonZeroU32::MIN);
                let quota = Quota::with_period(limit.period / limit.burst.max(1))
                    .map(|quota| quota.allow_burst(burst));
                if let Some(quota) = quota {
                    limiters.insert(name.clone(), RateLimiter::keyed(quota));
                }
            }
        }
        Limiters {
            limiters,
            clock: DefaultClock::default(),
        }
    }

    /// Counts one request against the named limit for `key`.
    pub fn check(&self, name: &str, key: &str) -> Result<(), ApiError> {
        let Some(limiter) = self.limiters.get(name) else {
            return Ok(());
        };
        if limiter.len() > KEYS_PER_LIMITER_MAX {
            limiter.retain_recent();
        }
        limiter.check_key(&key.to_owned()).map_err(|not_until| {
            let wait = not_until.wait_time_from(self.clock.now());
            // Round up: a client that waits the whole seconds told succeeds.
            let retry_after_s = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            ApiError::RateLimited {
                retry_after_s: retry_after_s.max(1),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_429_with_retry_after() {
        let limiters = Limiters::new(&RateLimits::parse("m2m_register=2/1h").expect("valid"));
        assert!(limiters.check("m2m_register", "1.2.3.4").is_ok());
        assert!(limiters.check("m2m_register", "1.2.3.4").is_ok());
        match limiters.check("m2m_register", "1.2.3.4") {
            Err(ApiError::RateLimited { retry_after_s }) => {
                assert!((1..=1_800).contains(&retry_after_s))
            }
            other => panic!("expected 429, got {other:?}"),
        }
        assert!(
            limiters.check("m2m_register", "5.6.7.8").is_ok(),
            "keys are independent"
        );
    }

    #[test]
    fn off_means_unlimited() {
        let limiters = Limiters::new(&RateLimits::off());
        for _ in 0..100 {
            assert!(limiters.check("login", "k").is_ok());
        }
    }
}

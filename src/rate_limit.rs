//! Named, keyed rate limits (decisions §13): per client address for the
//! unauthenticated endpoints, per merchant for what spends shared resources,
//! per key for submissions. Exceeding one is 429 with Retry-After.
//!
//! Each limiter is a GCRA (one "theoretical arrival time" per key) in a
//! two-generation map: memory stays under [`KEYS_PER_LIMITER_MAX`] whatever
//! the keys, and upkeep is O(1) amortised (a generation is dropped whole, at
//! most once per half-cap of new keys, never swept key by key).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::config::{RateLimit, RateLimits};
use crate::http::problem::ApiError;

/// Keys one limiter holds at most, both generations together: about 48
/// bytes each, so a few megabytes per limiter at worst.
pub const KEYS_PER_LIMITER_MAX: usize = 100_000;

/// A key as stored: the first 128 bits of the SHA-256 of the caller's key,
/// so a long key costs no more memory than a short one and nobody can
/// craft two keys that share a bucket.
type KeyDigest = [u8; 16];

fn digest(key: &str) -> KeyDigest {
    let full = Sha256::digest(key.as_bytes());
    let mut short = [0u8; 16];
    short.copy_from_slice(&full[..16]);
    short
}

/// Two generations of per-key arrival times. New keys go into `current`;
/// when it holds half the cap, `previous` is dropped and `current` takes its
/// place. A key seen again is carried over, so only keys idle for a whole
/// generation are forgotten (and forgetting one only lets it start afresh).
struct Generations {
    current: HashMap<KeyDigest, Instant>,
    previous: HashMap<KeyDigest, Instant>,
    generation_keys_max: usize,
}

impl Generations {
    fn new(keys_max: usize) -> Generations {
        Generations {
            current: HashMap::new(),
            previous: HashMap::new(),
            generation_keys_max: (keys_max / 2).max(1),
        }
    }

    /// The key's arrival time, carrying the key into the current generation
    /// so that a key in use (refused ones included) is never forgotten.
    fn touch(&mut self, key: &KeyDigest) -> Option<Instant> {
        if let Some(arrival) = self.current.get(key) {
            return Some(*arrival);
        }
        let arrival = self.previous.remove(key)?;
        self.insert(*key, arrival);
        Some(arrival)
    }

    fn set(&mut self, key: KeyDigest, arrival: Instant) {
        match self.current.get_mut(&key) {
            Some(slot) => *slot = arrival,
            None => self.insert(key, arrival),
        }
    }

    fn insert(&mut self, key: KeyDigest, arrival: Instant) {
        if self.current.len() >= self.generation_keys_max {
            // Entries own no heap memory, so dropping a generation frees one
            // table: the rotation costs the same however many keys it holds.
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(key, arrival);
    }

    fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }
}

/// One named limit: `burst` requests at once, then one per `emission`.
struct Limiter {
    emission: Duration,
    /// How far ahead of now a key's arrival time may run and still pass.
    tolerance: Duration,
    keys: Mutex<Generations>,
}

impl Limiter {
    fn new(limit: RateLimit, keys_max: usize) -> Limiter {
        let burst = limit.burst.max(1);
        let emission = limit.period / burst;
        Limiter {
            emission,
            tolerance: emission * (burst - 1),
            keys: Mutex::new(Generations::new(keys_max)),
        }
    }

    fn keys(&self) -> MutexGuard<'_, Generations> {
        // Nothing panics while the lock is held; a poisoned map is still a
        // consistent one.
        self.keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts one request at `now`; a refusal says how long to wait.
    fn check(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let key = digest(key);
        let mut keys = self.keys();
        let arrival = keys.touch(&key).map_or(now, |arrival| arrival.max(now));
        let allowed_until = now + self.tolerance;
        if arrival > allowed_until {
            return Err(arrival - allowed_until);
        }
        keys.set(key, arrival + self.emission);
        Ok(())
    }
}

pub struct Limiters {
    limiters: HashMap<String, Limiter>,
}

impl Limiters {
    pub fn new(limits: &RateLimits) -> Limiters {
        Limiters::with_keys_max(limits, KEYS_PER_LIMITER_MAX)
    }

    /// Limiters holding at most `keys_max` keys each (tests use small caps).
    pub fn with_keys_max(limits: &RateLimits, keys_max: usize) -> Limiters {
        let limiters = limits
            .limits
            .iter()
            .flatten()
            .map(|(name, limit)| (name.clone(), Limiter::new(*limit, keys_max)))
            .collect();
        Limiters { limiters }
    }

    /// Counts one request against the named limit for `key`. Callers pass a
    /// key they have validated (an address, an id, a normalised email of
    /// bounded length), never raw input.
    pub fn check(&self, name: &str, key: &str) -> Result<(), ApiError> {
        self.check_at(name, key, Instant::now())
    }

    fn check_at(&self, name: &str, key: &str, now: Instant) -> Result<(), ApiError> {
        let Some(limiter) = self.limiters.get(name) else {
            return Ok(());
        };
        limiter.check(key, now).map_err(|wait| {
            // Round up: a client that waits the whole seconds told succeeds.
            let retry_after_s = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            ApiError::RateLimited {
                retry_after_s: retry_after_s.max(1),
            }
        })
    }

    /// How many keys the named limiter holds now (tests and figures; no
    /// HTTP route shows it).
    pub fn key_count(&self, name: &str) -> usize {
        self.limiters
            .get(name)
            .map_or(0, |limiter| limiter.keys().len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry_after(result: Result<(), ApiError>) -> u64 {
        match result {
            Err(ApiError::RateLimited { retry_after_s }) => retry_after_s,
            other => panic!("expected 429, got {other:?}"),
        }
    }

    #[test]
    fn burst_then_429_with_retry_after() {
        let limiters = Limiters::new(&RateLimits::parse("m2m_register=2/1h").expect("valid"));
        assert!(limiters.check("m2m_register", "1.2.3.4").is_ok());
        assert!(limiters.check("m2m_register", "1.2.3.4").is_ok());
        let retry_after_s = retry_after(limiters.check("m2m_register", "1.2.3.4"));
        assert!((1..=1_800).contains(&retry_after_s), "{retry_after_s}");
        assert!(
            limiters.check("m2m_register", "5.6.7.8").is_ok(),
            "keys are independent"
        );
    }

    #[test]
    fn refills_one_request_per_emission_interval() {
        let limiters = Limiters::new(&RateLimits::parse("login=3/3s").expect("valid"));
        let start = Instant::now();
        for _ in 0..3 {
            assert!(limiters.check_at("login", "k", start).is_ok());
        }
        assert_eq!(retry_after(limiters.check_at("login", "k", start)), 1);
        let later = start + Duration::from_secs(1);
        assert!(limiters.check_at("login", "k", later).is_ok());
        assert!(limiters.check_at("login", "k", later).is_err());
        // Refused requests are not counted: a full refill after the period.
        let much_later = start + Duration::from_secs(10);
        for _ in 0..3 {
            assert!(limiters.check_at("login", "k", much_later).is_ok());
        }
    }

    #[test]
    fn off_means_unlimited() {
        let limiters = Limiters::new(&RateLimits::off());
        for _ in 0..100 {
            assert!(limiters.check("login", "k").is_ok());
        }
    }

    #[test]
    fn distinct_keys_never_hold_more_than_the_cap() {
        let keys_max = 64;
        let limiters =
            Limiters::with_keys_max(&RateLimits::parse("login=1/1h").expect("valid"), keys_max);
        let huge = "x".repeat(60_000);
        for n in 0..10_000 {
            let key = format!("{n}{huge}");
            assert!(limiters.check("login", &key).is_ok());
            assert!(limiters.key_count("login") <= keys_max, "after {n} keys");
        }
        assert!(limiters.key_count("login") >= keys_max / 2);
    }

    #[test]
    fn a_limited_key_survives_a_flood_of_new_ones() {
        let keys_max = 64;
        let limiters =
            Limiters::with_keys_max(&RateLimits::parse("login=2/1h").expect("valid"), keys_max);
        assert!(limiters.check("login", "victim").is_ok());
        assert!(limiters.check("login", "victim").is_ok());
        for n in 0..keys_max * 4 {
            assert!(limiters.check("login", &format!("flood {n}")).is_ok());
            // Refused, and carried into each new generation all the same.
            if n % 8 == 0 {
                assert!(limiters.check("login", "victim").is_err(), "after {n}");
            }
        }
        assert!(limiters.key_count("login") <= keys_max);
    }
}

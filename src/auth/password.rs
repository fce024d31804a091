//! Passwords: argon2id at OWASP's parameters (m = 19 MiB, t = 2, p = 1),
//! hashed on a bounded pool of blocking threads.
//!
//! Hashing is ~30 ms of one core per call, on purpose. Run on the async
//! workers it would stall every other request; run on an unbounded pool it
//! would still take every core. The pool leaves one core to the workers, so
//! a flood of logins makes logins queue, not reads slow down.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use argon2::{Argon2, PasswordHash, PasswordHasher as _, PasswordVerifier as _};
use tokio::sync::Semaphore;

/// Shortest and longest password accepted (decisions §9).
pub const PASSWORD_LENGTH_MIN: usize = 8;
pub const PASSWORD_LENGTH_MAX: usize = 128;
/// Requests that may wait for a hashing thread before more are turned away
/// with 503: a queue this long already means seconds of waiting.
pub const HASH_QUEUE_MAX: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// Too many hashes are already waiting.
    #[error("the password hashing pool is saturated")]
    Busy,
    #[error("password hashing failed: {0}")]
    Failed(String),
}

/// The hashing pool: a fixed number of concurrent argon2 computations.
#[derive(Clone)]
pub struct Passwords {
    permits: Arc<Semaphore>,
    queued: Arc<AtomicUsize>,
    threads: usize,
    /// Verified against when the email is unknown, so an unknown email costs
    /// the same hash as a wrong password (no enumeration by timing).
    dummy: Arc<String>,
}

impl Passwords {
    /// A pool of `threads` hashers (at least one).
    pub fn new(threads: usize) -> Result<Passwords, PasswordError> {
        let dummy = hash_now("tern-dummy-password-for-unknown-users")?;
        Ok(Passwords {
            permits: Arc::new(Semaphore::new(threads.max(1))),
            queued: Arc::new(AtomicUsize::new(0)),
            threads: threads.max(1),
            dummy: Arc::new(dummy),
        })
    }

    /// One hasher per core but one, so the async workers keep a core.
    pub fn threads_default() -> usize {
        std::thread::available_parallelism()
            .map(|cores| cores.get().saturating_sub(1))
            .unwrap_or(1)
            .max(1)
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The PHC string of a fresh argon2id hash with a random salt.
    pub async fn hash(&self, password: String) -> Result<String, PasswordError> {
        self.run(move || hash_now(&password)).await
    }

    /// Whether `password` matches the stored PHC string. A string that is
    /// not a valid hash never matches.
    pub async fn verify(&self, password: String, stored: String) -> Result<bool, PasswordError> {
        self.run(move || Ok(verify_now(&password, &stored))).await
    }

    /// Spends a verification on the dummy hash; always `false`.
    pub async fn verify_dummy(&self, password: String) -> Result<bool, PasswordError> {
        let dummy = self.dummy.as_ref().clone();
        self.run(move || {
            // The outcome is thrown away: only the time spent matters.
            let _ = verify_now(&password, &dummy);
            Ok(false)
        })
        .await
    }

    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, PasswordError> + Send + 'static,
    ) -> Result<T, PasswordError> {
        let queued = QueueSlot::take(&self.queued)?;
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| PasswordError::Failed("the hashing pool is closed".into()))?;
        drop(queued);
        let done = tokio::task::spawn_blocking(move || {
            let result = work();
            drop(permit);
            result
        })
        .await;
        done.map_err(|error| PasswordError::Failed(error.to_string()))?
    }
}

/// A place in the queue for a hashing thread, given back when dropped.
struct QueueSlot<'a>(&'a AtomicUsize);

impl<'a> QueueSlot<'a> {
    fn take(queued: &'a AtomicUsize) -> Result<QueueSlot<'a>, PasswordError> {
        if queued.fetch_add(1, Ordering::AcqRel) >= HASH_QUEUE_MAX {
            queued.fetch_sub(1, Ordering::AcqRel);
            return Err(PasswordError::Busy);
        }
        Ok(QueueSlot(queued))
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn hash_now(password: &str) -> Result<String, PasswordError> {
    // Argon2::default() is argon2id, m = 19456 KiB, t = 2, p = 1: OWASP's
    // first recommended configuration.
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|hash| hash.to_string())
        .map_err(|error| PasswordError::Failed(error.to_string()))
}

fn verify_now(password: &str, stored: &str) -> bool {
    // The parameters come from the stored string, so hashes made with
    // stronger parameters later still verify.
    PasswordHash::new(stored).is_ok_and(|hash| {
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    })
}

/// Length rule of decisions §9, counted in characters.
pub fn check_strength(password: &str) -> Result<(), &'static str> {
    let length = password.chars().count();
    if length < PASSWORD_LENGTH_MIN {
        Err("must be at least 8 characters")
    } else if length > PASSWORD_LENGTH_MAX {
        Err("must be at most 128 characters")
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_web::test]
    async fn hashes_are_argon2id_at_owasp_parameters_and_verify() {
        let passwords = Passwords::new(1).expect("pool");
        let hash = passwords.hash("correct horse".into()).await.expect("hash");
        assert!(
            hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{hash}"
        );
        assert!(passwords
            .verify("correct horse".into(), hash.clone())
            .await
            .expect("verify"));
        assert!(!passwords
            .verify("wrong horse".into(), hash.clone())
            .await
            .expect("verify"));
        let again = passwords.hash("correct horse".into()).await.expect("hash");
        assert_ne!(hash, again, "each hash has its own salt");
    }

    #[actix_web::test]
    async fn junk_hashes_and_the_dummy_never_match() {
        let passwords = Passwords::new(1).expect("pool");
        assert!(!passwords
            .verify("anything".into(), "not a hash".into())
            .await
            .expect("verify"));
        assert!(!passwords
            .verify_dummy("tern-dummy-password-for-unknown-users".into())
            .await
            .expect("verify"));
    }

    #[test]
    fn strength_counts_characters() {
        assert!(check_strength("1234567").is_err());
        assert!(check_strength("12345678").is_ok());
        assert!(check_strength("ééééééé").is_err());
        assert!(check_strength(&"x".repeat(128)).is_ok());
        assert!(check_strength(&"x".repeat(129)).is_err());
    }
}

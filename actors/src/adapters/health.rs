//! What the adapters observe of each provider: whether it answers. A real
//! call is the only honest probe (a ping would test another endpoint), so
//! every request records its outcome here, and /health reports it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::ports::ProviderError;

/// Failures in a row after which a provider counts as degraded.
pub const PROVIDER_FAILURES_DEGRADED: u32 = 3;

/// One provider's record, shared by its adapter and the health endpoint.
#[derive(Debug, Default)]
pub struct ProviderHealth {
    calls: AtomicU64,
    failures_in_a_row: AtomicU32,
    last: Mutex<Last>,
}

#[derive(Debug, Default, Clone)]
struct Last {
    answer_at: Option<DateTime<Utc>>,
    failure_at: Option<DateTime<Utc>>,
    failure: Option<String>,
}

/// A provider's health as /health shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ProviderFigures {
    /// `ok`, or `degraded` after [`PROVIDER_FAILURES_DEGRADED`] failures in a row.
    pub status: &'static str,
    pub calls: u64,
    pub failures_in_a_row: u32,
    pub last_answer_at: Option<DateTime<Utc>>,
    pub last_failure_at: Option<DateTime<Utc>>,
    pub last_failure: Option<String>,
}

impl ProviderHealth {
    /// Records one request's outcome. A definite refusal (a decline, a 4xx)
    /// is an answer: the provider is up. A transient failure or an unknown
    /// outcome (timeout, refused connection, 5xx) is not.
    pub fn observe<T>(&self, outcome: &Result<T, ProviderError>) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let now = Utc::now();
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Ok(_) | Err(ProviderError::Permanent { .. }) => {
                self.failures_in_a_row.store(0, Ordering::Relaxed);
                last.answer_at = Some(now);
            }
            Err(error) => {
                self.failures_in_a_row.fetch_add(1, Ordering::Relaxed);
                last.failure_at = Some(now);
                last.failure = Some(error.to_string());
            }
        }
    }

    pub fn figures(&self) -> ProviderFigures {
        let failures_in_a_row = self.failures_in_a_row.load(Ordering::Relaxed);
        let last = self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        ProviderFigures {
            status: if failures_in_a_row >= PROVIDER_FAILURES_DEGRADED {
                "degraded"
            } else {
                "ok"
            },
            calls: self.calls.load(Ordering::Relaxed),
            failures_in_a_row,
            last_answer_at: last.answer_at,
            last_failure_at: last.failure_at,
            last_failure: last.failure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transient() -> Result<(), ProviderError> {
        Err(ProviderError::Transient {
            reason: "connection refused".into(),
        })
    }

    #[test]
    fn failures_in_a_row_degrade_and_an_answer_restores() {
        let health = ProviderHealth::default();
        assert_eq!(health.figures().status, "ok");
        for _ in 0..PROVIDER_FAILURES_DEGRADED {
            health.observe(&transient());
        }
        let figures = health.figures();
        assert_eq!((figures.status, figures.calls), ("degraded", 3));
        assert!(figures.last_failure.is_some_and(|f| f.contains("refused")));
        let declined: Result<(), ProviderError> = Err(ProviderError::Permanent {
            status: 402,
            code: "card_declined".into(),
            message: "declined".into(),
        });
        health.observe(&declined);
        let figures = health.figures();
        assert_eq!((figures.status, figures.failures_in_a_row), ("ok", 0));
        assert!(figures.last_answer_at.is_some());
    }
}

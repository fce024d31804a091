//! The latest provider calls that failed on this node, for the operator
//! console. Nothing durable records a single call (a settlement keeps its
//! outcome, not each retry), so the HTTP adapters push every failed call
//! here; the ring keeps the newest [`FAILURES_KEPT_MAX`] and forgets the
//! rest. Process-wide, like the metrics recorder: one node, one ring.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};

use crate::ports::ProviderError;

/// Failed calls kept; older ones are dropped as new ones come.
pub const FAILURES_KEPT_MAX: usize = 50;
/// A failure's text is cut to this many characters.
pub const FAILURE_TEXT_CHARS_MAX: usize = 300;

/// One failed provider call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderFailure {
    /// The port: `acquirer`, `custodian`, `card_push`, `issuer`, `push`.
    pub provider: &'static str,
    /// `execute`, `lookup`, `post` or `get`.
    pub operation: &'static str,
    /// `transient`, `unknown` (may have executed) or `refused`.
    pub outcome: &'static str,
    pub error: String,
    pub at: DateTime<Utc>,
}

static FAILURES: Mutex<VecDeque<ProviderFailure>> = Mutex::new(VecDeque::new());

/// Records a failed call (an `Ok` outcome is not recorded).
pub fn record<T>(
    provider: &'static str,
    operation: &'static str,
    outcome: &Result<T, ProviderError>,
) {
    let Err(error) = outcome else {
        return;
    };
    let failure = ProviderFailure {
        provider,
        operation,
        outcome: match error {
            ProviderError::Transient { .. } => "transient",
            ProviderError::Unknown { .. } => "unknown",
            ProviderError::Permanent { .. } => "refused",
        },
        error: without_url_secrets(&error.to_string())
            .chars()
            .take(FAILURE_TEXT_CHARS_MAX)
            .collect(),
        at: Utc::now(),
    };
    // Nothing panics while the lock is held; a poisoned ring is still whole.
    let mut failures = FAILURES.lock().unwrap_or_else(PoisonError::into_inner);
    if failures.len() >= FAILURES_KEPT_MAX {
        failures.pop_front();
    }
    failures.push_back(failure);
}

/// The kept failures, newest first.
pub fn latest() -> Vec<ProviderFailure> {
    let failures = FAILURES.lock().unwrap_or_else(PoisonError::into_inner);
    failures.iter().rev().cloned().collect()
}

/// A transport error names the URL it failed on (`for url (...)`); a
/// provider URL may carry credentials or a key in its query, which the
/// console must not show.
fn without_url_secrets(text: &str) -> String {
    const MARK: &str = "for url (";
    let Some((before, rest)) = text.split_once(MARK) else {
        return text.to_owned();
    };
    let Some((url, after)) = rest.split_once(')') else {
        return text.to_owned();
    };
    let shown = match reqwest::Url::parse(url) {
        Ok(mut url) => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.set_fragment(None);
            url.to_string()
        }
        Err(_) => "…".to_owned(),
    };
    format!("{before}{MARK}{shown}){after}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_failures_only() {
        let ok: Result<(), ProviderError> = Ok(());
        record("acquirer", "execute", &ok);
        for n in 0..FAILURES_KEPT_MAX + 5 {
            let failed: Result<(), ProviderError> = Err(ProviderError::Transient {
                reason: format!("refused {n} {}", "x".repeat(FAILURE_TEXT_CHARS_MAX)),
            });
            record("failures-test", "execute", &failed);
        }
        let latest = latest();
        assert!(latest.len() <= FAILURES_KEPT_MAX);
        let ours: Vec<_> = latest
            .iter()
            .filter(|f| f.provider == "failures-test")
            .collect();
        assert!(ours[0]
            .error
            .contains(&format!("refused {}", FAILURES_KEPT_MAX + 4)));
        assert!(ours.iter().all(|f| f.outcome == "transient"));
        assert!(ours
            .iter()
            .all(|f| f.error.chars().count() <= FAILURE_TEXT_CHARS_MAX));
    }

    #[test]
    fn a_failure_never_shows_a_urls_credentials_or_query() {
        let text = "connection failed: error sending request for url (https://user:secret@provider.example/v1/charges?api_key=k): refused";
        assert_eq!(
            without_url_secrets(text),
            "connection failed: error sending request for url (https://provider.example/v1/charges): refused"
        );
        assert_eq!(without_url_secrets("status 503"), "status 503");
    }
}

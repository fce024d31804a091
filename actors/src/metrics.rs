//! What the actors record as metrics (the edge renders them at /metrics):
//! one function per figure, so names and labels live in one place. Label
//! values are bounded sets (kinds, statuses, providers, outcomes,
//! reasons), never ids.

use std::time::Instant;

use chrono::NaiveDateTime;
use metrics::{counter, histogram};
use tern_schema::types::utc_now;

/// An entity's status changed (`settlement`, `transfer`).
pub fn transition(kind: &'static str, from: &str, to: &str) {
    if from == to {
        return;
    }
    counter!("tern_status_transitions_total", "kind" => kind, "from" => from.to_owned(), "to" => to.to_owned())
        .increment(1);
}

/// A provider call ended with `outcome` (`ok`, `transient`, `unknown`,
/// `refused`).
pub(crate) fn provider_call(
    provider: &'static str,
    operation: &'static str,
    outcome: &'static str,
    started: Instant,
) {
    histogram!("tern_provider_call_duration_seconds", "provider" => provider, "operation" => operation)
        .record(started.elapsed().as_secs_f64());
    counter!("tern_provider_calls_total", "provider" => provider, "operation" => operation, "outcome" => outcome)
        .increment(1);
}

/// A card authorization was decided: approved, or declined for `reason`.
pub(crate) fn card_decision(declined_for: Option<&str>) {
    let (decision, reason) = match declined_for {
        None => ("approved", String::new()),
        Some(reason) => ("declined", reason.to_owned()),
    };
    counter!("tern_card_authorizations_total", "decision" => decision, "reason" => reason)
        .increment(1);
}

/// One webhook delivery attempt: `delivered`, `rejected` (a non-2xx
/// answer) or `failed` (no answer); `dead` when it was the last. Its lag
/// counts from `written_at`, when given (not for a replayed round, whose
/// event was written long before the merchant asked again).
pub(crate) fn webhook_attempt(
    outcome: &'static str,
    written_at: Option<NaiveDateTime>,
    dead: bool,
) {
    counter!("tern_webhook_attempts_total", "outcome" => outcome).increment(1);
    if let (Some(written_at), "delivered") = (written_at, outcome) {
        let lag = (utc_now() - written_at).num_milliseconds().max(0) as f64 / 1_000.0;
        histogram!("tern_webhook_delivery_lag_seconds").record(lag);
    }
    if dead {
        counter!("tern_webhook_dead_letters_total").increment(1);
    }
}

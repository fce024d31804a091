//! The intent of an issuer call that has no row of its own to stand for
//! it (a status change, a wallet token): a timer written before the call,
//! cancelled in the transaction that records the call's outcome, dropped
//! when the issuer did not act, and otherwise left to finish the call
//! (under the same idempotency key) when its answer was lost or the
//! process died. A card being issued needs none: its intent is its row.

use tern_schema::plan::Plan;
use tern_schema::store::timers;
use tern_schema::types::{truncate_micros, utc_now};
use tern_schema::vocabulary::CardId;
use tern_schema::{Db, StoreError};

use super::kind::CardKind;
use super::write::{commit, runtime_error};
use crate::ports::ProviderError;
use crate::runtime::timers::retry_delay_ms;
use crate::runtime::{EntityKind, RuntimeError, TimerFiring, TimerSpec};

/// How long an intent waits before the card finishes its call (again
/// each time finishing fails): past the longest issuer call the request
/// that wrote it can make (`provider_timeout`), which cancels it first,
/// so a live request is not raced by its own intent.
pub fn intent_delay(provider_timeout: std::time::Duration) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(provider_timeout)
        .unwrap_or(chrono::TimeDelta::MAX)
        .checked_add(&INTENT_MARGIN)
        .unwrap_or(chrono::TimeDelta::MAX)
}

/// Beyond the provider timeout: the intent's write and the call's setup.
const INTENT_MARGIN: chrono::TimeDelta = chrono::TimeDelta::seconds(2);

/// What becomes of an intent when the issuer did not answer that it
/// acted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fate {
    /// The issuer did not act and will not: nothing is left to finish.
    Drop,
    /// The issuer may have acted, or may still: the intent stays and
    /// finishes the call later.
    Keep,
}

/// `finishing` when the intent's own timer made the call.
pub(super) fn fate(error: &ProviderError, finishing: bool) -> Fate {
    match error {
        ProviderError::Permanent { .. } => Fate::Drop,
        ProviderError::Unknown { .. } => Fate::Keep,
        // The issuer did not act; a request's caller is told and may try
        // again, an intent tries again itself.
        ProviderError::Transient { .. } if finishing => Fate::Keep,
        ProviderError::Transient { .. } => Fate::Drop,
    }
}

/// An issuer call's intent: the card's timer `id`, whose `payload` says
/// what to call again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Intent {
    pub card_id: CardId,
    pub id: String,
    pub payload: String,
}

impl Intent {
    /// Writes the intent before its call, due after `delay`, replacing one
    /// of the same id. A firing rewrites its own timer by completing its
    /// claim, due later each time as a failing timer's retries are: that
    /// fails when a later request replaced or dropped the intent, and then
    /// the call is not made.
    pub(super) async fn write(
        &self,
        db: &Db,
        delay: chrono::TimeDelta,
        firing: Option<&TimerFiring>,
    ) -> Result<(), RuntimeError> {
        let mut timer = TimerSpec {
            id: &self.id,
            kind: CardKind::NAME,
            entity_id: self.card_id.as_str(),
            due_at: after(delay),
            payload: &self.payload,
        }
        .row();
        if let Some(firing) = firing {
            // The claim counts the attempts; the rewritten row carries them.
            timer.attempts = firing.attempts;
            let delay_ms = u64::try_from(delay.num_milliseconds()).unwrap_or(0);
            let backoff = retry_delay_ms(delay_ms, firing.attempts.saturating_add(1));
            timer.due_at = truncate_micros(after(chrono::TimeDelta::milliseconds(
                i64::try_from(backoff).unwrap_or(i64::MAX),
            )));
        }
        let plan = Plan {
            completes_timer: firing.map(TimerFiring::claim),
            cancels_timers: match firing {
                Some(_) => Vec::new(),
                None => vec![self.id.clone()],
            },
            timers: vec![timer],
            ..Plan::default()
        };
        commit(db, &self.card_id, plan).await.map_err(runtime_error)
    }

    /// Drops the intent: nothing is left to finish.
    pub(super) async fn drop(&self, db: &Db) -> Result<(), RuntimeError> {
        let plan = Plan {
            cancels_timers: vec![self.id.clone()],
            ..Plan::default()
        };
        commit(db, &self.card_id, plan).await.map_err(runtime_error)
    }

    /// After a call the issuer did not confirm: drops the intent when the
    /// issuer did not act, else leaves it to finish the call.
    pub(super) async fn settle(
        &self,
        db: &Db,
        error: &ProviderError,
        finishing: bool,
    ) -> Result<Fate, RuntimeError> {
        let fate = fate(error, finishing);
        if fate == Fate::Drop {
            self.drop(db).await?;
        }
        Ok(fate)
    }
}

fn after(delay: chrono::TimeDelta) -> chrono::NaiveDateTime {
    utc_now()
        .checked_add_signed(delay)
        .unwrap_or(chrono::NaiveDateTime::MAX)
}

/// The pending intent `timer_id`, as `parse` reads its payload.
pub(super) async fn pending<T>(
    db: &Db,
    timer_id: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<Option<T>, StoreError> {
    let mut pooled = db.get().await?;
    let found = timers::find(&mut pooled.tx(), timer_id).await?;
    Ok(found.and_then(|timer| parse(&timer.payload)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_intent_stays_while_the_issuer_may_still_act() {
        let permanent = ProviderError::Permanent {
            status: 422,
            code: "status_declined".into(),
            message: "no".into(),
        };
        let unknown = ProviderError::Unknown {
            reason: "timed out".into(),
            timed_out: true,
        };
        let transient = ProviderError::Transient {
            reason: "503".into(),
        };
        let table = [
            (&permanent, false, Fate::Drop),
            (&permanent, true, Fate::Drop),
            (&unknown, false, Fate::Keep),
            (&unknown, true, Fate::Keep),
            (&transient, false, Fate::Drop),
            (&transient, true, Fate::Keep),
        ];
        for (error, finishing, expected) in table {
            assert_eq!(
                fate(error, finishing),
                expected,
                "{error} finishing={finishing}"
            );
        }
    }
}

//! How an authorization's hold ends other than by its clearing (decisions
//! §10): the network's `authorization.reversal` releases what it names (all
//! of the hold, or part), and a hold nothing cleared within
//! `TERN_CARD_HOLD_TTL` is released by a persisted timer.
//!
//! Exactly once: the expiry timer commits with the hold it ends (in the
//! authorization's write), its firing completes it in the transaction that
//! voids the hold, and ending a hold any other way deletes it in that
//! transaction; a firing that comes anyway finds the authorization ended and
//! does nothing. Holds are never edited: a partial release voids the hold
//! and holds the rest anew, and the authorization points at the new hold.

use chrono::{NaiveDateTime, TimeDelta};
use tern_schema::ledger::{self, Direction, Entry, Line, Phase, SystemAccount};
use tern_schema::models::{CardRow, CardTransactionRow};
use tern_schema::money::MinorUnits;
use tern_schema::plan::{AuthorizationMove, LedgerWrite, Plan, RowMove};
use tern_schema::store::cards as store;
use tern_schema::store::timers::TimerRow;
use tern_schema::vocabulary::{
    AccountId, CardId, CardTransactionKind as Kind, CardTransactionStatus as TxStatus, EventSource,
};

use super::kind::{CardContext, CardKind, CardState};
use super::machine::{Effect, Event, Rejected};
use super::spend::{following, funding_account, replayed};
use super::write::{
    answer, commit, decided, is_unique_violation, recorded, rejected, runtime_error, settled,
    unexpected, Step,
};
use crate::runtime::{EntityEnv, EntityKind, RuntimeError, RuntimeResult, TimerFiring, TimerSpec};

/// How long an authorization's hold lasts when nothing clears it, unless
/// the operator sets `TERN_CARD_HOLD_TTL`.
pub const HOLD_TTL_DEFAULT: TimeDelta = TimeDelta::days(7);
/// Payload prefix of a hold's expiry timer; the authorization's card
/// transaction id follows. The migration that introduced expiries writes
/// the same form.
const TIMER_EXPIRE_HOLD: &str = "expire_hold:";
/// Prefix of the event id an expiry is recorded under: Tern's own event,
/// one per authorization, under its own source so that no provider event id
/// can take it.
const EXPIRY_EVENT_PREFIX: &str = "tern_expiry:";

/// The network's `authorization.reversal`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reversal {
    pub event_id: String,
    pub authorization_id: String,
    /// What it releases; `None` releases the rest of the hold.
    pub amount_minor: Option<MinorUnits>,
}

fn expiry_timer_id(card_id: &CardId, authorization_row_id: &str) -> String {
    format!("{card_id}:hold:{authorization_row_id}")
}

/// The authorization an expiry timer's payload names, if it is one.
pub fn expiring(payload: &str) -> Option<&str> {
    payload
        .strip_prefix(TIMER_EXPIRE_HOLD)
        .filter(|id| !id.is_empty())
}

/// Opens an approved authorization's hold: the row holds its whole amount,
/// and answers the hold's expiry timer, due `ttl` after the approval, for
/// the plan that records the authorization.
pub(super) fn open(authorization: &mut CardTransactionRow, ttl: TimeDelta) -> TimerRow {
    authorization.hold_minor = authorization.amount_minor;
    let payload = format!("{TIMER_EXPIRE_HOLD}{}", authorization.id);
    // The configuration bounds the lifetime; past the calendar's end the
    // hold lasts as long as a date can say.
    let due_at = authorization
        .created_at
        .checked_add_signed(ttl)
        .unwrap_or(NaiveDateTime::MAX);
    TimerSpec {
        id: &expiry_timer_id(&authorization.card_id, &authorization.id),
        kind: CardKind::NAME,
        entity_id: authorization.card_id.as_str(),
        due_at,
        payload: &payload,
    }
    .row()
}

/// Ends an open authorization's hold (`hold`) as `status` (cleared or
/// reversed) in the plan that settles its ledger entry, and cancels its
/// expiry timer there too.
pub(super) fn end(
    plan: &mut Plan,
    authorization: &CardTransactionRow,
    hold: &str,
    status: TxStatus,
    at: NaiveDateTime,
) {
    end_status(plan, authorization, hold, status, at);
    plan.cancels_timers
        .push(expiry_timer_id(&authorization.card_id, &authorization.id));
}

fn end_status(
    plan: &mut Plan,
    authorization: &CardTransactionRow,
    hold: &str,
    status: TxStatus,
    at: NaiveDateTime,
) {
    plan.moves.push(RowMove::Authorization(AuthorizationMove {
        id: authorization.id.clone(),
        hold_id: hold.to_owned(),
        status,
        ledger_transaction_id: hold.to_owned(),
        hold_minor: MinorUnits::ZERO,
        at,
    }));
}

/// What the card makes of a provider event naming one of its
/// authorizations (a clearing, a reversal).
pub(super) enum Heard {
    /// The event was recorded before.
    Repeated,
    /// Nothing to do: `found` is the authorization as stored (if at all),
    /// `open` whether it still holds (the machine ignores the event).
    Ignored {
        found: Option<CardTransactionRow>,
        open: bool,
    },
    /// The open authorization, its hold, and the machine's effects.
    Acts {
        open: (CardTransactionRow, String),
        effects: Vec<Effect>,
    },
}

/// Hears a provider event about `authorization_id`: `event` is built from
/// what the authorization still holds (`None` when unknown or ended).
pub(super) async fn hear(
    env: &EntityEnv<CardContext>,
    state: &CardState,
    event_id: &str,
    authorization_id: &str,
    event: impl FnOnce(Option<MinorUnits>) -> Event,
) -> RuntimeResult<Result<Heard, Rejected>> {
    if replayed(&env.db, event_id).await?.is_some() {
        return Ok(Ok(Heard::Repeated));
    }
    let found = {
        let mut pooled = env.db.get().await?;
        let found = store::authorization(&mut pooled.tx(), &state.row.id, authorization_id).await?;
        found
    };
    let open = open_hold(found.as_ref());
    let held_minor = open
        .as_ref()
        .map(|(authorization, _)| authorization.hold_minor);
    let effects = match decided(state, event(held_minor)) {
        Ok((_, effects)) => effects,
        Err(refused) => return Ok(Err(refused)),
    };
    Ok(Ok(match open {
        Some(open) if !effects.contains(&Effect::Ignore) => Heard::Acts { open, effects },
        open => Heard::Ignored {
            found,
            open: open.is_some(),
        },
    }))
}

/// The open authorization and its hold, or `None` when the authorization is
/// unknown or has ended (or never held: declined).
fn open_hold(authorization: Option<&CardTransactionRow>) -> Option<(CardTransactionRow, String)> {
    let authorization = authorization
        .filter(|row| row.kind == Kind::Authorization && row.status == TxStatus::Approved)?;
    let hold = authorization.ledger_transaction_id.clone()?;
    Some((authorization.clone(), hold))
}

/// The pending entry that holds what a partial reversal left of an
/// authorization, shaped like the authorization's own hold.
fn remainder_entry(
    card: &CardRow,
    funding: &AccountId,
    authorization: &CardTransactionRow,
    remaining_minor: MinorUnits,
) -> Entry {
    let currency = &authorization.currency;
    let line = |account_id: AccountId, direction| Line {
        account_id,
        direction,
        amount_minor: remaining_minor,
        currency: currency.clone(),
    };
    Entry {
        merchant_id: Some(card.merchant_id.clone()),
        settlement_key: None,
        description: format!(
            "card {} authorization {} after a partial reversal",
            card.id, authorization.authorization_id
        ),
        lines: vec![
            line(funding.clone(), Direction::Debit),
            line(
                SystemAccount::CardNetwork.account_id(currency),
                Direction::Credit,
            ),
        ],
    }
}

/// The network's `authorization.reversal`: releases what it names of an
/// open authorization's hold. A reversal for an unknown or ended
/// authorization, or of no amount, is ignored; one above the hold releases
/// the hold.
pub(super) async fn reverse(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    reversal: Reversal,
) -> Step {
    let Reversal {
        event_id,
        authorization_id,
        amount_minor,
    } = reversal;
    let asked_minor = amount_minor;
    let event = |held_minor| Event::Reverse {
        held_minor,
        asked_minor,
    };
    let (open, effects) = match hear(env, &state, &event_id, &authorization_id, event).await? {
        Ok(Heard::Acts { open, effects }) => (open, effects),
        Ok(Heard::Repeated) => return answer(state, recorded(true, false)),
        Ok(Heard::Ignored { open: false, .. }) => {
            tracing::info!(card = %state.row.id, %authorization_id, "reversal for an unknown or ended authorization ignored");
            return answer(state, recorded(false, true));
        }
        Ok(Heard::Ignored { open: true, .. }) => {
            tracing::warn!(card = %state.row.id, %authorization_id, ?amount_minor, "reversal of no amount ignored");
            return answer(state, recorded(false, true));
        }
        Err(refused) => return rejected(state, refused),
    };
    let funding = funding_account(env, &mut state).await?;
    // What it releases is the machine's to say (`RecordRelease`).
    let row = following(
        &state.row,
        &open.0,
        &event_id,
        Kind::Reversal,
        TxStatus::Released,
        MinorUnits::ZERO,
    );
    let mut plan = Plan::default();
    let released_minor = book_release(
        &mut plan,
        effects,
        &state.row,
        &open,
        Some(&funding),
        row,
        "reverse",
    )?;
    if amount_minor.is_some_and(|asked| asked > released_minor) {
        tracing::warn!(card = %state.row.id, %authorization_id, ?amount_minor, held = %open.0.hold_minor, "reversal above the hold released the hold");
    }
    let written = commit(&env.db, &state.row.id, plan).await;
    settled(state, written)
}

/// The hold's expiry timer fired: voids what the authorization still holds,
/// unless something ended it first.
pub(super) async fn expire(
    env: &EntityEnv<CardContext>,
    state: CardState,
    firing: TimerFiring,
) -> Step {
    let found = match expiring(&firing.payload) {
        Some(id) => {
            let mut pooled = env.db.get().await?;
            let mut tx = pooled.tx();
            store::transaction(&mut tx, &state.row.id, id).await?
        }
        None => None,
    };
    let open = open_hold(found.as_ref());
    let event = Event::ExpireHold {
        held_minor: open
            .as_ref()
            .map(|(authorization, _)| authorization.hold_minor),
    };
    let effects = match decided(&state, event) {
        Ok((_, effects)) => effects,
        Err(refused) => return rejected(state, refused),
    };
    let Some(open) = open.filter(|_| !effects.contains(&Effect::Ignore)) else {
        crate::runtime::timers::complete(&env.db, firing).await?;
        return answer(state, recorded(false, true));
    };
    let authorization = &open.0;
    let mut row = following(
        &state.row,
        authorization,
        &format!("{EXPIRY_EVENT_PREFIX}{}", authorization.id),
        Kind::Expiry,
        TxStatus::Released,
        MinorUnits::ZERO,
    );
    row.event_source = EventSource::Tern;
    tracing::info!(card = %state.row.id, authorization_id = %authorization.authorization_id, held = %authorization.hold_minor, "uncleared hold expired");
    let mut plan = Plan {
        completes_timer: Some(firing.claim()),
        ..Plan::default()
    };
    book_release(
        &mut plan,
        effects,
        &state.row,
        &open,
        None,
        row,
        "expire_hold",
    )?;
    let written = commit(&env.db, &state.row.id, plan).await;
    match written {
        Ok(()) => answer(state, recorded(false, false)),
        Err(error) if is_unique_violation(&error) => answer(state, recorded(true, false)),
        Err(error) => Err(runtime_error(error)),
    }
}

/// Carries out a release's effects (a reversal's or an expiry's) in
/// `plan`: the hold's void, which `row` names, what stays held (on
/// `funding`), the authorization's end and `row` itself. Answers what was
/// released.
fn book_release(
    plan: &mut Plan,
    effects: Vec<Effect>,
    card: &CardRow,
    (authorization, hold): &(CardTransactionRow, String),
    funding: Option<&AccountId>,
    mut row: CardTransactionRow,
    command: &str,
) -> Result<MinorUnits, RuntimeError> {
    let at = row.created_at;
    for effect in effects {
        match effect {
            // The release names the void that records it, not the hold.
            Effect::VoidHold => {
                let void = ledger::new_transaction_id();
                plan.ledger.push(LedgerWrite::Void {
                    hold_id: hold.clone(),
                    id: void.clone(),
                });
                row.ledger_transaction_id = Some(void);
            }
            Effect::HoldRest { amount_minor } => {
                let Some(funding) = funding else {
                    return Err(unexpected(&Effect::HoldRest { amount_minor }, command));
                };
                let renewed = ledger::new_transaction_id();
                plan.ledger.push(LedgerWrite::Record {
                    id: renewed.clone(),
                    entry: remainder_entry(card, funding, authorization, amount_minor),
                    phase: Phase::Pending,
                });
                plan.moves.push(RowMove::Authorization(AuthorizationMove {
                    id: authorization.id.clone(),
                    hold_id: hold.clone(),
                    status: TxStatus::Approved,
                    ledger_transaction_id: renewed,
                    hold_minor: amount_minor,
                    at,
                }));
            }
            Effect::EndAuthorization(status) => end_status(plan, authorization, hold, status, at),
            Effect::CancelExpiry => plan
                .cancels_timers
                .push(expiry_timer_id(&authorization.card_id, &authorization.id)),
            Effect::RecordRelease { amount_minor } => row.amount_minor = amount_minor,
            other => return Err(unexpected(&other, command)),
        }
    }
    let released_minor = row.amount_minor;
    plan.card_transactions.push(row);
    Ok(released_minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_expiry_payloads_name_an_authorization() {
        assert_eq!(expiring("expire_hold:ctx_1"), Some("ctx_1"));
        assert_eq!(expiring("expire_hold:"), None);
        assert_eq!(expiring("resume_issue"), None);
        assert_eq!(expiring("ctx_1"), None);
        assert_eq!(
            expiry_timer_id(&CardId::new("card_1"), "ctx_1"),
            "card_1:hold:ctx_1"
        );
    }
}

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
use tern_schema::plan::{AuthorizationMove, LedgerWrite, Plan, RowMove};
use tern_schema::store::cards as store;
use tern_schema::store::timers::TimerRow;
use tern_schema::vocabulary::{
    CardTransactionKind as Kind, CardTransactionStatus as TxStatus, EventSource,
};

use super::kind::{CardContext, CardKind, CardState};
use super::spend::{funding_account, replayed, transaction_row};
use super::write::{answer, commit, is_unique_violation, recorded, runtime_error, settled, Step};
use crate::runtime::{EntityEnv, EntityKind, TimerFiring, TimerSpec};

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
    pub amount_minor: Option<i64>,
}

/// What a reversal of `asked_minor` (absent: the rest) does to a hold of
/// `held_minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// Nothing is held, or the reversal names no positive amount.
    Nothing,
    /// Part of the hold goes back; the rest stays held.
    Part {
        released_minor: i64,
        remaining_minor: i64,
    },
    /// The whole hold goes back: a reversal of at least what is held.
    All { released_minor: i64 },
}

pub fn release(held_minor: i64, asked_minor: Option<i64>) -> Release {
    if held_minor <= 0 {
        return Release::Nothing;
    }
    match asked_minor {
        None => Release::All {
            released_minor: held_minor,
        },
        Some(asked) if asked <= 0 => Release::Nothing,
        Some(asked) if asked >= held_minor => Release::All {
            released_minor: held_minor,
        },
        Some(asked) => Release::Part {
            released_minor: asked,
            remaining_minor: held_minor - asked,
        },
    }
}

fn expiry_timer_id(card_id: &str, authorization_row_id: &str) -> String {
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
        entity_id: &authorization.card_id,
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
        hold_minor: 0,
        at,
    }));
}

/// The open authorization and its hold, or `None` when the authorization is
/// unknown or has ended (or never held: declined).
fn open_hold(authorization: Option<CardTransactionRow>) -> Option<(CardTransactionRow, String)> {
    let authorization = authorization
        .filter(|row| row.kind == Kind::Authorization && row.status == TxStatus::Approved)?;
    let hold = authorization.ledger_transaction_id.clone()?;
    Some((authorization, hold))
}

/// A release's card transaction: what went back, described like the
/// authorization it belongs to.
fn release_row(
    card: &CardRow,
    authorization: &CardTransactionRow,
    event_id: &str,
    kind: Kind,
    released_minor: i64,
) -> CardTransactionRow {
    let mut row = transaction_row(
        card,
        event_id,
        &authorization.authorization_id,
        kind,
        TxStatus::Released,
        released_minor,
        &authorization.currency,
    );
    row.merchant_name = authorization.merchant_name.clone();
    row.mcc = authorization.mcc.clone();
    row.channel = authorization.channel.clone();
    row.country = authorization.country.clone();
    row
}

/// The pending entry that holds what a partial reversal left of an
/// authorization, shaped like the authorization's own hold.
fn remainder_entry(
    card: &CardRow,
    funding: &str,
    authorization: &CardTransactionRow,
    remaining_minor: i64,
) -> Entry {
    let currency = &authorization.currency;
    let line = |account_id: String, direction| Line {
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
            line(funding.to_owned(), Direction::Debit),
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
    if replayed(&env.db, &event_id).await?.is_some() {
        return answer(state, recorded(true, false));
    }
    let found = {
        let mut pooled = env.db.get().await?;
        let mut tx = pooled.tx();
        store::authorization(&mut tx, &state.row.id, &authorization_id).await?
    };
    let Some((authorization, hold)) = open_hold(found) else {
        tracing::info!(card = %state.row.id, %authorization_id, "reversal for an unknown or ended authorization ignored");
        return answer(state, recorded(false, true));
    };
    let released = release(authorization.hold_minor, amount_minor);
    let released_minor = match released {
        Release::Nothing => {
            tracing::warn!(card = %state.row.id, %authorization_id, ?amount_minor, "reversal of no amount ignored");
            return answer(state, recorded(false, true));
        }
        Release::Part { released_minor, .. } | Release::All { released_minor } => released_minor,
    };
    if amount_minor.is_some_and(|asked| asked > released_minor) {
        tracing::warn!(card = %state.row.id, %authorization_id, ?amount_minor, held = authorization.hold_minor, "reversal above the hold released the hold");
    }
    let funding = funding_account(env, &mut state).await?;
    let row = release_row(
        &state.row,
        &authorization,
        &event_id,
        Kind::Reversal,
        released_minor,
    );
    let remainder = match released {
        Release::Part {
            remaining_minor, ..
        } => Some((
            remainder_entry(&state.row, &funding, &authorization, remaining_minor),
            remaining_minor,
        )),
        _ => None,
    };
    let mut plan = Plan::default();
    // The release names the void that records it, not the hold.
    let void = ledger::new_transaction_id();
    plan.ledger.push(LedgerWrite::Void {
        hold_id: hold.clone(),
        id: void.clone(),
    });
    let mut row = row;
    row.ledger_transaction_id = Some(void);
    match remainder {
        Some((entry, remaining_minor)) => {
            let renewed = ledger::new_transaction_id();
            plan.ledger.push(LedgerWrite::Record {
                id: renewed.clone(),
                entry,
                phase: Phase::Pending,
            });
            plan.moves.push(RowMove::Authorization(AuthorizationMove {
                id: authorization.id.clone(),
                hold_id: hold,
                status: TxStatus::Approved,
                ledger_transaction_id: renewed,
                hold_minor: remaining_minor,
                at: row.created_at,
            }));
        }
        None => end(
            &mut plan,
            &authorization,
            &hold,
            TxStatus::Reversed,
            row.created_at,
        ),
    }
    plan.card_transactions.push(row);
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
    let Some((authorization, hold)) = open_hold(found) else {
        crate::runtime::timers::complete(&env.db, firing).await?;
        return answer(state, recorded(false, true));
    };
    let mut row = release_row(
        &state.row,
        &authorization,
        &format!("{EXPIRY_EVENT_PREFIX}{}", authorization.id),
        Kind::Expiry,
        authorization.hold_minor,
    );
    row.event_source = EventSource::Tern;
    tracing::info!(card = %state.row.id, authorization_id = %authorization.authorization_id, held = authorization.hold_minor, "uncleared hold expired");
    let void = ledger::new_transaction_id();
    let mut plan = Plan {
        completes_timer: Some(firing.claim()),
        ledger: vec![LedgerWrite::Void {
            hold_id: hold.clone(),
            id: void.clone(),
        }],
        ..Plan::default()
    };
    row.ledger_transaction_id = Some(void);
    end_status(
        &mut plan,
        &authorization,
        &hold,
        TxStatus::Expired,
        row.created_at,
    );
    plan.card_transactions.push(row);
    let written = commit(&env.db, &state.row.id, plan).await;
    match written {
        Ok(()) => answer(state, recorded(false, false)),
        Err(error) if is_unique_violation(&error) => answer(state, recorded(true, false)),
        Err(error) => Err(runtime_error(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reversal_releases_what_it_names_and_never_more_than_is_held() {
        let part = |released_minor, remaining_minor| Release::Part {
            released_minor,
            remaining_minor,
        };
        let all = |released_minor| Release::All { released_minor };
        let table = [
            // (held, asked) -> release
            (2_000, None, all(2_000)),
            (2_000, Some(500), part(500, 1_500)),
            (2_000, Some(1_999), part(1_999, 1)),
            (2_000, Some(1), part(1, 1_999)),
            (2_000, Some(2_000), all(2_000)),
            (2_000, Some(2_001), all(2_000)),
            (2_000, Some(i64::MAX), all(2_000)),
            (2_000, Some(0), Release::Nothing),
            (2_000, Some(-5), Release::Nothing),
            (2_000, Some(i64::MIN), Release::Nothing),
            (0, None, Release::Nothing),
            (0, Some(100), Release::Nothing),
            (-1, None, Release::Nothing),
            (1, None, all(1)),
        ];
        for (held, asked, expected) in table {
            assert_eq!(
                release(held, asked),
                expected,
                "held {held}, asked {asked:?}"
            );
        }
    }

    #[test]
    fn what_a_release_takes_and_leaves_adds_up_to_the_hold() {
        for held in [1, 2, 7, 1_000, 250_000] {
            for asked in [None, Some(1), Some(held / 2), Some(held), Some(held + 1)] {
                match release(held, asked) {
                    Release::Part {
                        released_minor,
                        remaining_minor,
                    } => {
                        assert!(released_minor > 0 && remaining_minor > 0);
                        assert_eq!(released_minor + remaining_minor, held);
                    }
                    Release::All { released_minor } => assert_eq!(released_minor, held),
                    Release::Nothing => assert_eq!(asked, Some(0), "held {held}"),
                }
            }
        }
    }

    #[test]
    fn only_expiry_payloads_name_an_authorization() {
        assert_eq!(expiring("expire_hold:ctx_1"), Some("ctx_1"));
        assert_eq!(expiring("expire_hold:"), None);
        assert_eq!(expiring("resume_issue"), None);
        assert_eq!(expiring("ctx_1"), None);
        assert_eq!(expiry_timer_id("card_1", "ctx_1"), "card_1:hold:ctx_1");
    }
}

//! Writing the card's changes: one plan per change, committed over the
//! version it was read at (the card's own row through the runtime's
//! [`RowStep`]), and what a write's failure answers.

use tern_schema::ledger::LedgerError;
use tern_schema::models::CardRow;
use tern_schema::plan::Plan;
use tern_schema::vocabulary::CardId;
use tern_schema::{Db, StoreError};

use super::kind::{CardKind, CardState};
use super::machine::{self, Effect, Event, Refusal, Rejected};
use super::messages::{CardFailure, CardReply, CardResult};
use crate::runtime::{
    EntityKind, RuntimeError, RuntimeResult, Step as RowStep, StepError, Transition,
};

/// A card's ledger refusal that no answer below names: never Unavailable,
/// as the same entry is refused again on every retry, so a 503 would have
/// the provider re-send it for ever.
pub(super) fn runtime_error(error: StepError) -> RuntimeError {
    error.into_runtime(|other| {
        RuntimeError::Refused(format!("ledger refused a card entry: {other}"))
    })
}

/// A row the card's plan moves (the card, or an authorization) moved
/// meanwhile, on another node: the card's conflict, so it reloads and the
/// caller may send the event again.
fn the_cards_conflict(error: StepError, card_id: &CardId) -> StepError {
    match error {
        StepError::Runtime(RuntimeError::Store(StoreError::Conflict(_))) => {
            StepError::Runtime(RuntimeError::Conflict {
                kind: CardKind::NAME,
                id: card_id.to_string(),
            })
        }
        other => other,
    }
}

/// Writes one of the card's plans that leaves the card's row as it is
/// (transactions and holds only).
pub(super) async fn commit(db: &Db, card_id: &CardId, plan: Plan) -> Result<(), StepError> {
    match db.commit(plan).await {
        Ok(_) => Ok(()),
        Err(error) => Err(the_cards_conflict(error.into(), card_id)),
    }
}

/// Writes the card's step: its row at the next version, with the plan
/// booked onto the step. Answers the row written.
pub(super) async fn commit_step(db: &Db, step: RowStep<CardRow>) -> Result<CardRow, StepError> {
    let card_id = step.next.id.clone();
    match step.commit(db, Vec::new()).await {
        Ok((row, _)) => Ok(row),
        Err(error) => Err(the_cards_conflict(error, &card_id)),
    }
}

pub(super) fn is_unique_violation(error: &StepError) -> bool {
    matches!(
        error,
        StepError::Runtime(RuntimeError::Store(StoreError::UniqueViolation(_)))
            | StepError::Ledger(LedgerError::Store(StoreError::UniqueViolation(_)))
    )
}

/// What a provider event is answered when the ledger refuses its entry
/// because of the amount or currency it names; `None` for failures that
/// are not the event's fault.
pub(super) fn refused_entry(error: &StepError) -> Option<CardFailure> {
    match error {
        StepError::Ledger(LedgerError::Overflow { .. }) => Some(CardFailure::EntryRefused {
            field: "amount_minor",
            reason: format!(
                "would take a ledger balance past its limit of {} minor units",
                i64::MAX
            ),
        }),
        StepError::Ledger(LedgerError::CurrencyMismatch { .. }) => {
            Some(CardFailure::EntryRefused {
                field: "currency",
                reason: "is not the currency of the card's account".into(),
            })
        }
        _ => None,
    }
}

/// An authorization whose hold the ledger cannot take for good (a balance
/// would overflow) is declined like one the funds cannot cover.
pub(super) fn is_unholdable(error: &StepError) -> bool {
    matches!(
        error,
        StepError::Ledger(LedgerError::Overflow { .. } | LedgerError::CurrencyMismatch { .. })
    )
}

pub(super) fn is_insufficient_funds(error: &StepError) -> bool {
    matches!(
        error,
        StepError::Ledger(LedgerError::InsufficientFunds { .. })
    )
}

pub(super) type Step = RuntimeResult<Transition<CardKind>>;

pub(super) fn answer(state: CardState, reply: CardResult) -> Step {
    Ok(Transition::new(state, reply))
}

pub(super) fn refusal(state: CardState, refusal: Refusal) -> Step {
    answer(state, Err(CardFailure::Refused(refusal)))
}

pub(super) fn recorded(duplicate: bool, ignored: bool) -> CardResult {
    Ok(CardReply::Recorded { duplicate, ignored })
}

/// The answer to a provider event after its write: recorded, recorded
/// before (the event id's unique index), or refused for good by the ledger.
pub(super) fn settled(state: CardState, written: Result<(), StepError>) -> Step {
    match written {
        Ok(()) => answer(state, recorded(false, false)),
        Err(error) if is_unique_violation(&error) => answer(state, recorded(true, false)),
        Err(error) => match refused_entry(&error) {
            Some(failure) => {
                tracing::warn!(card = %state.row.id, %error, "card entry refused by the ledger");
                answer(state, Err(failure))
            }
            None => Err(runtime_error(error)),
        },
    }
}

/// The machine's transition for an event to the card as it stands.
pub(super) fn decided(
    state: &CardState,
    event: Event,
) -> Result<(machine::State, Vec<Effect>), Rejected> {
    machine::transition(&state.machine(), event)
}

/// What the card answers an event its machine rejected. An inapplicable
/// event is the actor's mistake, not the caller's: it fails the message.
pub(super) fn rejected(state: CardState, rejected: Rejected) -> Step {
    match rejected {
        Rejected::Refused(refused) => refusal(state, refused),
        Rejected::InvalidLimits(errors) => answer(state, Err(CardFailure::InvalidLimits(errors))),
        inapplicable @ Rejected::Inapplicable { .. } => Err(RuntimeError::Refused(format!(
            "{} {}: {inapplicable}",
            CardKind::NAME,
            state.row.id
        ))),
    }
}

/// An effect the machine never asks for in reply to `command`: the
/// actor's mistake, failing the message rather than panicking.
pub(super) fn unexpected(effect: &Effect, command: &str) -> RuntimeError {
    RuntimeError::Refused(format!(
        "{} machine asked {effect:?} in reply to {command}",
        CardKind::NAME
    ))
}

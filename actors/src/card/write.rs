//! Writing the card's changes: one plan per change, committed over the
//! version it was read at, and what a write's failure answers.

use tern_schema::ledger::LedgerError;
use tern_schema::plan::Plan;
use tern_schema::{Db, DieselError, PlanError, StoreError};

use super::kind::{CardKind, CardState};
use super::machine::{self, Effect, Event, Refusal, Rejected};
use super::messages::{CardFailure, CardReply, CardResult};
use crate::runtime::{EntityKind, RuntimeError, RuntimeResult, Transition};

/// Errors inside a write: the store's, the ledger's, or a lost version race.
#[derive(Debug, thiserror::Error)]
pub(super) enum WriteError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl From<StoreError> for WriteError {
    fn from(error: StoreError) -> Self {
        WriteError::Runtime(error.into())
    }
}

impl From<DieselError> for WriteError {
    fn from(error: DieselError) -> Self {
        WriteError::Runtime(error.into())
    }
}

impl From<WriteError> for RuntimeError {
    fn from(error: WriteError) -> Self {
        match error {
            WriteError::Runtime(error) => error,
            WriteError::Ledger(LedgerError::Store(error)) => error.into(),
            // Never Unavailable: the same entry is refused again on every
            // retry, so a 503 would have the provider re-send it for ever.
            WriteError::Ledger(other) => {
                RuntimeError::Refused(format!("ledger refused a card entry: {other}"))
            }
        }
    }
}

impl From<PlanError> for WriteError {
    fn from(error: PlanError) -> Self {
        match error {
            PlanError::Ledger(refused) => WriteError::Ledger(refused),
            other => WriteError::Runtime(other.into()),
        }
    }
}

/// Writes one of the card's plans. An authorization moved meanwhile (on
/// another node) is the card's conflict: it reloads and the caller may
/// send the event again.
pub(super) async fn commit(db: &Db, card_id: &str, plan: Plan) -> Result<(), WriteError> {
    match db.commit(plan).await {
        Ok(_) => Ok(()),
        Err(PlanError::Store(StoreError::Conflict(_))) => {
            Err(WriteError::Runtime(RuntimeError::Conflict {
                kind: CardKind::NAME,
                id: card_id.to_owned(),
            }))
        }
        Err(error) => Err(error.into()),
    }
}

impl WriteError {
    pub(super) fn is_unique_violation(&self) -> bool {
        matches!(
            self,
            WriteError::Runtime(RuntimeError::Store(StoreError::UniqueViolation(_)))
                | WriteError::Ledger(LedgerError::Store(StoreError::UniqueViolation(_)))
        )
    }

    /// What a provider event is answered when the ledger refuses its entry
    /// because of the amount or currency it names; `None` for failures
    /// that are not the event's fault.
    pub(super) fn refused_entry(&self) -> Option<CardFailure> {
        match self {
            WriteError::Ledger(LedgerError::Overflow { .. }) => Some(CardFailure::EntryRefused {
                field: "amount_minor",
                reason: format!(
                    "would take a ledger balance past its limit of {} minor units",
                    i64::MAX
                ),
            }),
            WriteError::Ledger(LedgerError::CurrencyMismatch { .. }) => {
                Some(CardFailure::EntryRefused {
                    field: "currency",
                    reason: "is not the currency of the card's account".into(),
                })
            }
            _ => None,
        }
    }

    /// An authorization whose hold the ledger cannot take for good (a
    /// balance would overflow) is declined like one the funds cannot cover.
    pub(super) fn is_unholdable(&self) -> bool {
        matches!(
            self,
            WriteError::Ledger(LedgerError::Overflow { .. } | LedgerError::CurrencyMismatch { .. })
        )
    }

    pub(super) fn is_insufficient_funds(&self) -> bool {
        matches!(
            self,
            WriteError::Ledger(LedgerError::InsufficientFunds { .. })
        )
    }
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
pub(super) fn settled(state: CardState, written: Result<(), WriteError>) -> Step {
    match written {
        Ok(()) => answer(state, recorded(false, false)),
        Err(error) if error.is_unique_violation() => answer(state, recorded(true, false)),
        Err(error) => match error.refused_entry() {
            Some(failure) => {
                tracing::warn!(card = %state.row.id, %error, "card entry refused by the ledger");
                answer(state, Err(failure))
            }
            None => Err(error.into()),
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

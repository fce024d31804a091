//! The step every entity actor repeats after its machine has moved: the row
//! to write (the next version, `updated_at` now), one plan that moves it
//! under the version it was read at with the step's ledger entries, timers,
//! events and audit records, committed as one transaction; and the one
//! error such a step fails with.
//!
//! Kinds keep what is theirs: how the machine's state maps onto the row,
//! which effects book what, and what a ledger refusal answers.

use chrono::NaiveDateTime;
use tern_schema::audit::AuditRecord;
use tern_schema::ledger::LedgerError;
use tern_schema::models::{CardRow, SettlementRow, TransferRow};
use tern_schema::plan::{Plan, RowMove};
use tern_schema::types::utc_now;
use tern_schema::{Db, DieselError, PlanError, StoreError, Written};

use super::error::RuntimeError;
use super::kind::TimerFiring;
use super::version::next_version;

/// Why a step was not written. Nothing of it was.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The ledger refused the step's entries. What that answers is the
    /// kind's to say (a refund short of funds is an answer, not a failure),
    /// see [`StepError::into_runtime`].
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl From<PlanError> for StepError {
    fn from(error: PlanError) -> Self {
        match error {
            PlanError::Ledger(refused) => StepError::Ledger(refused),
            other => StepError::Runtime(other.into()),
        }
    }
}

impl From<StoreError> for StepError {
    fn from(error: StoreError) -> Self {
        StepError::Runtime(error.into())
    }
}

impl From<DieselError> for StepError {
    fn from(error: DieselError) -> Self {
        StepError::Runtime(error.into())
    }
}

impl StepError {
    /// As the runtime's error: a store failure inside the ledger stays a
    /// store failure; any other ledger refusal becomes what `refused` says.
    pub fn into_runtime(self, refused: impl FnOnce(LedgerError) -> RuntimeError) -> RuntimeError {
        match self {
            StepError::Runtime(error) => error,
            StepError::Ledger(LedgerError::Store(error)) => error.into(),
            StepError::Ledger(other) => refused(other),
        }
    }
}

/// A row an entity actor writes by compare-and-swap on its version.
pub trait VersionedRow: Clone {
    fn version(&self) -> i64;

    /// Marks the row as the step's: its new version and write time.
    fn stamp(&mut self, version: i64, updated_at: NaiveDateTime);

    /// The plan's move of the row, applied only where the stored row is
    /// still at `expected_version`.
    fn row_move(self, expected_version: i64) -> RowMove;
}

/// Every entity row keeps its version and write time in the same two
/// columns and has its own `RowMove` variant.
macro_rules! versioned_rows {
    ($($row:ty => $variant:ident),+ $(,)?) => {$(
        impl VersionedRow for $row {
            fn version(&self) -> i64 {
                self.version
            }

            fn stamp(&mut self, version: i64, updated_at: NaiveDateTime) {
                self.version = version;
                self.updated_at = updated_at;
            }

            fn row_move(self, expected_version: i64) -> RowMove {
                RowMove::$variant {
                    row: self,
                    expected_version,
                }
            }
        }
    )+};
}

versioned_rows!(SettlementRow => Settlement, TransferRow => Transfer, CardRow => Card);

/// One step being planned: the kind books its effects into `plan` and
/// onto `next`, then [`Step::commit`]s.
pub struct Step<R> {
    /// The row to write, already at its new version (timer ids name it).
    pub next: R,
    pub plan: Plan,
    expected_version: i64,
}

impl<R: VersionedRow> Step<R> {
    /// The step from `before` to `next` (the machine's state written onto
    /// the row), completing `firing`'s timer if a timer caused it.
    pub fn begin(before: &R, mut next: R, firing: Option<&TimerFiring>) -> Step<R> {
        let expected_version = before.version();
        next.stamp(next_version(expected_version), utc_now());
        Step {
            next,
            plan: Plan {
                completes_timer: firing.map(TimerFiring::claim),
                ..Plan::default()
            },
            expected_version,
        }
    }

    /// Moves the row under the version it was read at, adds `audit`, and
    /// commits the plan. Group-committed with other steps: durable when
    /// this returns `Ok`; a lost compare-and-swap writes nothing.
    pub async fn commit(self, db: &Db, audit: Vec<AuditRecord>) -> Result<(R, Written), StepError> {
        let Step {
            next,
            mut plan,
            expected_version,
        } = self;
        plan.moves.push(next.clone().row_move(expected_version));
        plan.audit.extend(audit);
        let written = db.commit(plan).await?;
        Ok((next, written))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_schema::models::SettlementIntent;
    use tern_schema::money::MinorUnits;
    use tern_schema::vocabulary::{AccountId, MerchantId, SettlementKey, SettlementMethod};

    fn row() -> SettlementRow {
        SettlementRow::pending(
            SettlementIntent {
                merchant_id: MerchantId::new("m"),
                idempotency_key: SettlementKey::new("k"),
                method: SettlementMethod::CardPush,
                currency: "USD".into(),
                amount_minor: MinorUnits::new(100),
                asset: None,
                source: "acc".into(),
                destination: "tok".into(),
                recipient_name: "Ada".into(),
                reference: None,
                request_id: "r".into(),
            },
            utc_now(),
        )
    }

    #[test]
    fn a_step_writes_the_next_version_expecting_the_one_read() {
        let before = row();
        let step = Step::begin(&before, before.clone(), None);
        assert_eq!(step.next.version, before.version + 1);
        assert!(step.next.updated_at >= before.updated_at);
        assert!(step.plan.completes_timer.is_none());
        match step.next.clone().row_move(step.expected_version) {
            RowMove::Settlement {
                expected_version, ..
            } => assert_eq!(expected_version, before.version),
            _ => panic!("a settlement moves as a settlement"),
        }
    }

    #[test]
    fn ledger_refusals_are_the_kinds_and_store_failures_stay_store_failures() {
        let refused = StepError::Ledger(LedgerError::InsufficientFunds {
            account_id: AccountId::new("a"),
        });
        let mapped = refused.into_runtime(|other| RuntimeError::Refused(other.to_string()));
        assert!(matches!(mapped, RuntimeError::Refused(_)));
        let store = StepError::Ledger(LedgerError::Store(StoreError::Unavailable("pool".into())));
        let mapped = store.into_runtime(|_| RuntimeError::Refused("never".into()));
        assert!(matches!(
            mapped,
            RuntimeError::Store(StoreError::Unavailable(_))
        ));
    }
}

//! The store layer's one error type.

use crate::vocabulary::AccountId;
use diesel::result::{DatabaseErrorKind, Error as DieselError};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No connection could be had in time: the database is down or saturated.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A unique constraint rejected the write (duplicate key, prefix, ...).
    #[error("unique violation: {0}")]
    UniqueViolation(String),
    /// A version-guarded update found another writer had been first.
    #[error("concurrent modification of {0}")]
    Conflict(String),
    #[error("migration failed: {0}")]
    Migration(String),
    #[error("invalid database url: {0}")]
    Url(String),
    #[error("query failed: {0}")]
    Query(DieselError),
    /// A guarded write found its guard false. Pipelined writes report it
    /// when their unit ends (see [`crate::db::Behind`]), so it names why.
    #[error("refused: {0}")]
    Refused(Refusal),
}

/// Why a guarded write was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The Idempotency-Key already has a record: the caller reads it.
    #[error("the idempotency key is taken")]
    KeyTaken,
    #[error("insufficient available funds on {account_id}")]
    InsufficientFunds { account_id: AccountId },
}

/// Whether a failure may pass by itself, which decides whether the work
/// that failed is worth trying again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persistence {
    /// An outage, an overload or a concurrent writer: it passes.
    Transient,
    /// A refusal of the data itself (a key someone else holds, a broken
    /// constraint, a ledger refusal): the same work fails the same way.
    Permanent,
    /// Cannot tell (a crash, an unclassified database error): judged by
    /// how often it repeats.
    Unknown,
}

pub type StoreResult<T> = Result<T, StoreError>;

impl From<DieselError> for StoreError {
    fn from(error: DieselError) -> Self {
        match error {
            DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, info) => {
                StoreError::UniqueViolation(info.message().to_owned())
            }
            DieselError::DatabaseError(DatabaseErrorKind::ClosedConnection, info) => {
                StoreError::Unavailable(info.message().to_owned())
            }
            other => StoreError::Query(other),
        }
    }
}

impl From<diesel::ConnectionError> for StoreError {
    fn from(error: diesel::ConnectionError) -> Self {
        StoreError::Unavailable(error.to_string())
    }
}

impl StoreError {
    /// Whether retrying the same operation later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_) | StoreError::Conflict(_))
    }

    /// Whether retrying the same work later may succeed: what decides if
    /// an actor keeps resuming it.
    pub fn persistence(&self) -> Persistence {
        use DatabaseErrorKind as Kind;
        match self {
            StoreError::Unavailable(_) | StoreError::Conflict(_) => Persistence::Transient,
            StoreError::UniqueViolation(_)
            | StoreError::Refused(_)
            | StoreError::Migration(_)
            | StoreError::Url(_) => Persistence::Permanent,
            StoreError::Query(DieselError::DatabaseError(kind, _)) => match kind {
                Kind::SerializationFailure | Kind::ClosedConnection | Kind::ReadOnlyTransaction => {
                    Persistence::Transient
                }
                Kind::UniqueViolation
                | Kind::ForeignKeyViolation
                | Kind::NotNullViolation
                | Kind::CheckViolation
                | Kind::RestrictViolation
                | Kind::ExclusionViolation => Persistence::Permanent,
                // "database is locked" and other engine errors without a kind.
                _ => Persistence::Unknown,
            },
            StoreError::Query(_) => Persistence::Unknown,
        }
    }
}

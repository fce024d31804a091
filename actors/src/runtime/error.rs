//! The runtime layer's one error type, and its conversions.

use std::time::Duration;

pub use tern_schema::Persistence;
use tern_schema::{DieselError, StoreError};

/// How long a caller is told to wait after an overload (the edge's
/// Retry-After): a mailbox drains in well under this.
pub const RETRY_AFTER_OVERLOAD: Duration = Duration::from_secs(1);
/// Retry-After when the database or the runtime itself is unavailable.
pub const RETRY_AFTER_UNAVAILABLE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The entity's mailbox holds its capacity of unhandled messages: 503
    /// with Retry-After at the edge, never an unbounded queue.
    #[error("the mailbox of {kind} {id} is full")]
    MailboxFull { kind: &'static str, id: String },
    /// The kind's live-actor limit is reached: 503 with Retry-After.
    #[error("too many live {kind} actors")]
    Saturated { kind: &'static str },
    /// No row for this entity: 404 at the edge.
    #[error("{kind} {id} not found")]
    NotFound { kind: &'static str, id: String },
    /// A version-guarded write lost to another writer (maybe on another
    /// node). The actor has reloaded its state; the caller may retry: 409.
    #[error("{kind} {id} was modified concurrently")]
    Conflict { kind: &'static str, id: String },
    /// The actor panicked while handling this message. It is restarted from
    /// the database; whether the message took effect is unknown: 500.
    #[error("{kind} {id} crashed while handling a message")]
    Crashed { kind: &'static str, id: String },
    /// No reply within the call timeout; the message may still take effect: 503.
    #[error("{kind} {id} did not answer within {timeout_ms} ms")]
    Timeout {
        kind: &'static str,
        id: String,
        timeout_ms: u64,
    },
    /// The runtime cannot serve now (shutting down, no actix System, a kind
    /// not registered): 503.
    #[error("actor runtime unavailable: {0}")]
    Unavailable(String),
    /// The claim on a timer expired and may have passed to another node; the
    /// transition that wanted to complete the timer must roll back.
    #[error("the claim on timer {id} was lost")]
    TimerClaimLost { id: String },
    /// A persisted timer whose payload the kind cannot decode; the timer is
    /// dropped with an error log rather than retried forever.
    #[error("invalid timer {id}: {reason}")]
    InvalidTimer { id: String, reason: String },
    /// A transition the entity's rules, the ledger or the data refused, for
    /// a reason that will not pass by itself: retrying it changes nothing.
    #[error("refused: {0}")]
    Refused(String),
    /// Another node owns the entity (where several share one PostgreSQL):
    /// the edge forwards the request to `owner`, the owner's advertised
    /// URL, or answers 503 while no node owns it.
    #[error("{kind} {id} is served by another node")]
    Elsewhere {
        kind: &'static str,
        id: String,
        owner: Option<String>,
    },
    /// A database failure; `StoreError::Unavailable` is a 503, the rest 500.
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type RuntimeResult<T> = Result<T, RuntimeError>;

/// Lets kinds run `tern_schema::write_tx!` with `RuntimeError` as the error.
impl From<DieselError> for RuntimeError {
    fn from(error: DieselError) -> Self {
        RuntimeError::Store(StoreError::from(error))
    }
}

/// A plan refused for its data is a refusal that will not pass; a lost
/// timer claim and the store's failures keep their own meaning.
impl From<tern_schema::PlanError> for RuntimeError {
    fn from(error: tern_schema::PlanError) -> Self {
        use tern_schema::PlanError;
        match error {
            PlanError::Store(error) => RuntimeError::Store(error),
            PlanError::TimerLost { timer_id } => RuntimeError::TimerClaimLost { id: timer_id },
            PlanError::Fenced { slot, epoch } => {
                RuntimeError::Unavailable(format!("slot {slot} left this node (epoch {epoch})"))
            }
            refused @ (PlanError::Ledger(_) | PlanError::Source(_)) => {
                RuntimeError::Refused(refused.to_string())
            }
        }
    }
}

impl RuntimeError {
    /// Whether the failure may pass by itself.
    pub fn persistence(&self) -> Persistence {
        match self {
            RuntimeError::MailboxFull { .. }
            | RuntimeError::Saturated { .. }
            | RuntimeError::Conflict { .. }
            | RuntimeError::Timeout { .. }
            | RuntimeError::Unavailable(_)
            | RuntimeError::Elsewhere { .. }
            | RuntimeError::TimerClaimLost { .. } => Persistence::Transient,
            RuntimeError::InvalidTimer { .. } | RuntimeError::Refused(_) => Persistence::Permanent,
            RuntimeError::NotFound { .. } | RuntimeError::Crashed { .. } => Persistence::Unknown,
            RuntimeError::Store(error) => error.persistence(),
        }
    }

    /// Whether this is an overload or outage that clears by itself: the edge
    /// answers 503 with [`RuntimeError::retry_after`].
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            RuntimeError::MailboxFull { .. }
                | RuntimeError::Saturated { .. }
                | RuntimeError::Timeout { .. }
                | RuntimeError::Unavailable(_)
                | RuntimeError::Elsewhere { .. }
                | RuntimeError::Store(StoreError::Unavailable(_))
        )
    }

    /// The Retry-After to send with a 503, or `None` for other errors.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            RuntimeError::MailboxFull { .. }
            | RuntimeError::Saturated { .. }
            | RuntimeError::Elsewhere { .. } => Some(RETRY_AFTER_OVERLOAD),
            RuntimeError::Timeout { .. }
            | RuntimeError::Unavailable(_)
            | RuntimeError::Store(StoreError::Unavailable(_)) => Some(RETRY_AFTER_UNAVAILABLE),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_judged_by_whether_they_pass_by_themselves() {
        use tern_schema::DatabaseErrorKind as Kind;
        let database = |kind| {
            RuntimeError::Store(StoreError::Query(DieselError::DatabaseError(
                kind,
                Box::new(String::from("detail")),
            )))
        };
        let cases = [
            (
                RuntimeError::Store(StoreError::Unavailable("pool".into())),
                Persistence::Transient,
            ),
            (
                RuntimeError::Store(StoreError::Conflict("version".into())),
                Persistence::Transient,
            ),
            (
                RuntimeError::TimerClaimLost { id: "t".into() },
                Persistence::Transient,
            ),
            (database(Kind::SerializationFailure), Persistence::Transient),
            (
                RuntimeError::Store(StoreError::UniqueViolation("key".into())),
                Persistence::Permanent,
            ),
            (
                RuntimeError::Store(StoreError::Refused(tern_schema::Refusal::KeyTaken)),
                Persistence::Permanent,
            ),
            (database(Kind::ForeignKeyViolation), Persistence::Permanent),
            (database(Kind::CheckViolation), Persistence::Permanent),
            (
                RuntimeError::Refused("ledger".into()),
                Persistence::Permanent,
            ),
            (database(Kind::Unknown), Persistence::Unknown),
            (
                RuntimeError::Store(StoreError::Query(DieselError::NotFound)),
                Persistence::Unknown,
            ),
            (
                RuntimeError::Crashed {
                    kind: "probe",
                    id: "p1".into(),
                },
                Persistence::Unknown,
            ),
        ];
        for (error, persistence) in cases {
            assert_eq!(error.persistence(), persistence, "{error}");
        }
    }

    #[test]
    fn overloads_carry_a_retry_after_and_others_do_not() {
        let full = RuntimeError::MailboxFull {
            kind: "probe",
            id: "p1".into(),
        };
        assert!(full.is_unavailable());
        assert_eq!(full.retry_after(), Some(RETRY_AFTER_OVERLOAD));
        let down = RuntimeError::Store(StoreError::Unavailable("pool".into()));
        assert_eq!(down.retry_after(), Some(RETRY_AFTER_UNAVAILABLE));
        let missing = RuntimeError::NotFound {
            kind: "probe",
            id: "p1".into(),
        };
        assert!(!missing.is_unavailable());
        assert_eq!(missing.retry_after(), None);
        let conflict = RuntimeError::Conflict {
            kind: "probe",
            id: "p1".into(),
        };
        assert_eq!(conflict.retry_after(), None);
    }
}

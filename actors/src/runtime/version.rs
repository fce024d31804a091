//! Compare-and-swap on an entity row's version: the guard that lets several
//! nodes hold an actor for the same entity without losing updates.
//!
//! Each entity table carries `version BIGINT NOT NULL`. A transition writes
//! `UPDATE <table> SET ..., version = <next> WHERE id = ? AND version = <held>`
//! and hands the affected row count to [`expect_swapped`]: zero rows means
//! another writer was first, the transaction rolls back, and the actor
//! reloads (the runtime reloads after every failed handler).

use super::error::{RuntimeError, RuntimeResult};

/// State as loaded from, or last written to, the entity's row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned<S> {
    pub value: S,
    pub version: i64,
}

impl<S> Versioned<S> {
    /// The version a fresh row starts at.
    pub const INITIAL: i64 = 1;

    pub fn initial(value: S) -> Self {
        Versioned {
            value,
            version: Self::INITIAL,
        }
    }

    /// The state to write next: `value` at the following version. The
    /// caller's UPDATE sets `version = next.version` where `version = self.version`.
    pub fn successor(&self, value: S) -> Versioned<S> {
        Versioned {
            value,
            version: next_version(self.version),
        }
    }
}

/// The version after `version`. Versions only grow; `i64` does not run out
/// at one write per microsecond for 290,000 years, so overflow is a bug.
pub fn next_version(version: i64) -> i64 {
    assert!(version >= 0, "entity versions are never negative");
    version.saturating_add(1)
}

/// Checks the row count of a version-guarded UPDATE: one row is success,
/// zero is [`RuntimeError::Conflict`]. More than one means the WHERE clause
/// missed the primary key, a programmer error.
pub fn expect_swapped(kind: &'static str, id: &str, rows_affected: usize) -> RuntimeResult<()> {
    assert!(
        rows_affected <= 1,
        "a version-guarded update of {kind} {id} touched {rows_affected} rows"
    );
    if rows_affected == 1 {
        Ok(())
    } else {
        Err(RuntimeError::Conflict {
            kind,
            id: id.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_swaps_and_zero_rows_conflict() {
        assert!(expect_swapped("probe", "p1", 1).is_ok());
        assert!(matches!(
            expect_swapped("probe", "p1", 0),
            Err(RuntimeError::Conflict { kind: "probe", ref id }) if id == "p1"
        ));
    }

    #[test]
    #[should_panic(expected = "touched 2 rows")]
    fn more_than_one_row_is_a_bug() {
        let _ = expect_swapped("probe", "p1", 2);
    }

    #[test]
    fn successors_count_up_from_the_initial_version() {
        let first = Versioned::initial("a");
        assert_eq!(first.version, 1);
        let second = first.successor("b");
        assert_eq!(
            second,
            Versioned {
                value: "b",
                version: 2
            }
        );
        assert_eq!(next_version(i64::MAX), i64::MAX);
    }
}

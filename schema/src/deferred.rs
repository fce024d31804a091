//! Writes a group commit makes once for its whole batch instead of once per
//! unit.
//!
//! A unit that appends to the audit chain would otherwise lock its
//! merchant's chain head, read it, insert the event and rewrite the head:
//! four round trips per event, on the hottest row of the batch. Deferred,
//! the batch locks each head once, inserts every event in one statement and
//! rewrites each head once, just before it commits. Nothing a unit reads
//! depends on these writes, so the order of a unit's statements does not
//! change what it sees; and an event still commits exactly when the change
//! it records does, in the same transaction.

use crate::audit;
use crate::balances::Balances;
use crate::db::Tx;
use crate::known::Known;
use crate::models::AuditEventRow;
use crate::StoreResult;

/// The deferred writes of the units run so far in one batch, and what the
/// committer remembers across batches (see [`crate::known`]).
#[derive(Default)]
pub struct Deferred {
    audit: Vec<AuditEventRow>,
    pub(crate) known: Known,
    /// The batch's ledger balance moves, on PostgreSQL (see
    /// [`crate::balances`]); applied by the committer before it commits.
    pub(crate) balances: Balances,
}

/// How much a batch had deferred before a unit started, so that a unit
/// that rolls back takes its deferred writes with it.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    audit: usize,
    known: usize,
}

impl Deferred {
    pub(crate) fn audit(&mut self, event: AuditEventRow) {
        self.audit.push(event);
    }

    pub fn mark(&self) -> Mark {
        Mark {
            audit: self.audit.len(),
            known: self.known.mark(),
        }
    }

    pub(crate) fn roll_back_to(&mut self, mark: Mark) {
        self.audit.truncate(mark.audit);
        self.known.forget_since(mark.known);
    }

    /// The batch ended, committed or not: nothing deferred is left over,
    /// and what it learned is kept only if it committed.
    pub(crate) fn end_batch(&mut self, committed: bool) {
        self.audit.clear();
        self.known.end_batch(committed);
        self.balances.end_batch();
    }

    /// Makes the batch's deferred writes, in the order the units made them.
    pub(crate) async fn flush(&mut self, tx: &mut Tx<'_>) -> StoreResult<()> {
        let events: Vec<AuditEventRow> = std::mem::take(&mut self.audit);
        if !events.is_empty() {
            audit::chain(tx, events).await?;
        }
        Ok(())
    }
}

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
use crate::{StoreError, StoreResult};

/// The deferred writes of the units run so far in one batch, and what the
/// committer remembers across batches (see [`crate::known`]).
#[derive(Default)]
pub struct Deferred {
    /// `None` where a cancelled claim's event was.
    audit: Vec<Option<AuditEventRow>>,
    pub(crate) known: Known,
    /// The batch's ledger balance moves, on PostgreSQL (see
    /// [`crate::balances`]); applied by the committer before it commits.
    pub(crate) balances: Balances,
    /// The batch's claim units (see [`crate::commit::Rollback::Claim`]):
    /// what each deferred, so that a refused one can be cancelled.
    claims: Vec<Claim>,
    /// Claims cancelled, by unit, with the refusal to answer.
    cancelled: Vec<(usize, StoreError)>,
}

struct Claim {
    unit: usize,
    start: Mark,
    end: Mark,
}

/// How much a batch had deferred before a unit started, so that a unit
/// that rolls back takes its deferred writes with it.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    audit: usize,
    known: usize,
    balances: usize,
}

impl Deferred {
    pub(crate) fn audit(&mut self, event: AuditEventRow) {
        self.audit.push(Some(event));
    }

    /// Remembers what claim unit number `unit` deferred (from `start` to
    /// now), should its claim be refused.
    pub(crate) fn record_claim(&mut self, unit: usize, start: Mark) {
        let end = self.mark();
        self.claims.push(Claim { unit, start, end });
    }

    pub(crate) fn has_claims(&self) -> bool {
        !self.claims.is_empty()
    }

    /// Cancels claim unit number `unit`, whose claim was refused: it wrote
    /// nothing, so its deferred events and balance moves are undone, out of
    /// order (later units' stay). The row locks it took stay with the
    /// batch, as do facts it learned (true of rows that exist, or of a
    /// ledger transaction nothing names).
    pub(crate) fn cancel(&mut self, unit: usize, refusal: StoreError) {
        let Some(claim) = self.claims.iter().find(|claim| claim.unit == unit) else {
            return;
        };
        let (start, end) = (claim.start, claim.end);
        let events = end.audit.min(self.audit.len());
        for event in &mut self.audit[start.audit.min(events)..events] {
            *event = None;
        }
        self.balances.cancel(start.balances..end.balances);
        self.cancelled.push((unit, refusal));
    }

    /// The claims cancelled in this batch, by unit, with their refusals.
    pub(crate) fn take_cancelled(&mut self) -> Vec<(usize, StoreError)> {
        std::mem::take(&mut self.cancelled)
    }

    pub fn mark(&self) -> Mark {
        Mark {
            audit: self.audit.len(),
            known: self.known.mark(),
            balances: self.balances.mark(),
        }
    }

    pub(crate) fn roll_back_to(&mut self, mark: Mark) {
        self.audit.truncate(mark.audit);
        self.known.forget_since(mark.known);
        self.balances.undo_since(mark.balances);
    }

    /// The batch ended, committed or not: nothing deferred is left over,
    /// and what it learned is kept only if it committed.
    pub(crate) fn end_batch(&mut self, committed: bool) {
        self.audit.clear();
        self.claims.clear();
        self.cancelled.clear();
        self.known.end_batch(committed);
        self.balances.end_batch();
    }

    /// Makes the batch's deferred writes, in the order the units made them.
    pub(crate) async fn flush(&mut self, tx: &mut Tx<'_>) -> StoreResult<()> {
        let events: Vec<AuditEventRow> = std::mem::take(&mut self.audit)
            .into_iter()
            .flatten()
            .collect();
        if !events.is_empty() {
            audit::chain(tx, events).await?;
        }
        Ok(())
    }
}

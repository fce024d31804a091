//! An account's balances as buckets, the sums the plan judge reads them
//! as, and what a batch on PostgreSQL has moved on each account.
//!
//! Every settlement moves two balances when it is created and the same two
//! again when its hold is resolved, and a busy merchant's funding account
//! is in nearly every batch. The plan judge (`crate::plan`) sums a batch's
//! lines per account in memory; on PostgreSQL those sums are written with
//! one UPDATE per account just before the commit, in account id order, so
//! that a system account's row, in every node's batches, is locked only
//! for the end of the transaction. No side of an account (its posted plus
//! pending debits, or credits) may pass `i64::MAX` (see [`Buckets::room`]).

use std::collections::HashMap;

use crate::models::LedgerAccountRow;
use crate::money::MinorUnits;
use crate::store::ledger::Bucket;
use crate::vocabulary::AccountId;
use crate::{StoreError, StoreResult};

/// The buckets of an account as read: what its available balance and its
/// room are computed from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Buckets {
    pub posted_debits_minor: MinorUnits,
    pub posted_credits_minor: MinorUnits,
    pub pending_debits_minor: MinorUnits,
    pub pending_credits_minor: MinorUnits,
}

impl From<&LedgerAccountRow> for Buckets {
    fn from(row: &LedgerAccountRow) -> Self {
        Buckets {
            posted_debits_minor: row.posted_debits_minor,
            posted_credits_minor: row.posted_credits_minor,
            pending_debits_minor: row.pending_debits_minor,
            pending_credits_minor: row.pending_credits_minor,
        }
    }
}

impl Buckets {
    /// Posted credits - posted debits - pending debits.
    pub fn available_minor(&self) -> i128 {
        Sums::from(*self).available()
    }

    /// How much more the side of the account that `bucket` is on (its
    /// posted plus pending debits, or credits) may take before it passes
    /// `i64::MAX`. Both buckets of a side count: a posting moves an amount
    /// from pending to posted, so a side that fits when a hold is made
    /// still fits when the hold is posted, whatever happens meanwhile.
    pub fn room(&self, bucket: Bucket) -> i128 {
        Sums::from(*self).room(bucket)
    }
}

/// Buckets in i128, where no sum of them can overflow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sums {
    pub posted_debits: i128,
    pub posted_credits: i128,
    pub pending_debits: i128,
    pub pending_credits: i128,
}

impl From<Buckets> for Sums {
    fn from(read: Buckets) -> Self {
        Sums {
            posted_debits: i128::from(read.posted_debits_minor),
            posted_credits: i128::from(read.posted_credits_minor),
            pending_debits: i128::from(read.pending_debits_minor),
            pending_credits: i128::from(read.pending_credits_minor),
        }
    }
}

impl Sums {
    /// The bucket, to move.
    pub(crate) fn bucket(&mut self, bucket: Bucket) -> &mut i128 {
        match bucket {
            Bucket::PostedDebits => &mut self.posted_debits,
            Bucket::PostedCredits => &mut self.posted_credits,
            Bucket::PendingDebits => &mut self.pending_debits,
            Bucket::PendingCredits => &mut self.pending_credits,
        }
    }

    pub(crate) fn available(&self) -> i128 {
        self.posted_credits - self.posted_debits - self.pending_debits
    }

    /// What the side `bucket` is on may still take before `i64::MAX`.
    pub(crate) fn room(&self, bucket: Bucket) -> i128 {
        let side = match bucket {
            Bucket::PendingDebits | Bucket::PostedDebits => {
                self.posted_debits + self.pending_debits
            }
            Bucket::PendingCredits | Bucket::PostedCredits => {
                self.posted_credits + self.pending_credits
            }
        };
        i128::from(i64::MAX) - side
    }
}

/// The batch's sum of changes per bucket of one account.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moves {
    pub posted_debits_minor: i64,
    pub posted_credits_minor: i64,
    pub pending_debits_minor: i64,
    pub pending_credits_minor: i64,
}

impl Moves {
    /// Adds another batch part's moves, bucket by bucket (saturating: each
    /// amount was judged against its side's room before it moved).
    pub(crate) fn absorb(&mut self, other: Moves) {
        for bucket in [
            Bucket::PostedDebits,
            Bucket::PostedCredits,
            Bucket::PendingDebits,
            Bucket::PendingCredits,
        ] {
            let mut other = other;
            let slot = self.bucket(bucket);
            *slot = slot.saturating_add(*other.bucket(bucket));
        }
    }

    fn bucket(&mut self, bucket: Bucket) -> &mut i64 {
        match bucket {
            Bucket::PostedDebits => &mut self.posted_debits_minor,
            Bucket::PostedCredits => &mut self.posted_credits_minor,
            Bucket::PendingDebits => &mut self.pending_debits_minor,
            Bucket::PendingCredits => &mut self.pending_credits_minor,
        }
    }

    fn is_zero(&self) -> bool {
        *self == Moves::default()
    }
}

/// The batch's moves per account, on PostgreSQL: written by the committer
/// once per account, in id order, just before it commits.
#[derive(Default)]
pub struct Balances {
    accounts: HashMap<AccountId, Moves>,
}

impl Balances {
    /// Adds `amount_minor` (negative to take away) to one bucket.
    pub fn add(
        &mut self,
        account_id: &AccountId,
        bucket: Bucket,
        amount_minor: i64,
    ) -> StoreResult<()> {
        let moves = self.accounts.entry(account_id.to_owned()).or_default();
        let slot = moves.bucket(bucket);
        *slot = slot.checked_add(amount_minor).ok_or_else(|| {
            StoreError::Conflict(format!(
                "ledger account {account_id}: a batch's moves overflow"
            ))
        })?;
        Ok(())
    }

    /// The moves to apply, one per account that moved, in account order
    /// (the order every batch locks its rows in); the batch starts over.
    pub fn take(&mut self) -> Vec<(AccountId, Moves)> {
        let mut moved: Vec<(AccountId, Moves)> = std::mem::take(&mut self.accounts)
            .into_iter()
            .filter(|(_, moves)| !moves.is_zero())
            .collect();
        moved.sort_by(|a, b| a.0.cmp(&b.0));
        moved
    }

    /// The batch ended: nothing is carried over (other transactions may
    /// move these accounts once it has committed).
    pub fn end_batch(&mut self) {
        self.accounts.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_that_cancel_out_write_nothing_and_overflow_is_refused() {
        let mut balances = Balances::default();
        balances
            .add(&AccountId::new("a"), Bucket::PendingDebits, 5)
            .unwrap();
        balances
            .add(&AccountId::new("a"), Bucket::PendingDebits, -5)
            .unwrap();
        assert!(balances.take().is_empty());
        balances
            .add(&AccountId::new("b"), Bucket::PostedCredits, i64::MAX)
            .unwrap();
        assert!(balances
            .add(&AccountId::new("b"), Bucket::PostedCredits, 1)
            .is_err());
        balances
            .add(&AccountId::new("a"), Bucket::PendingCredits, 7)
            .unwrap();
        let moved = balances.take();
        assert_eq!(moved.len(), 2);
        assert_eq!(moved[0].0.as_str(), "a", "in account order");
        assert_eq!(moved[1].1.posted_credits_minor, i64::MAX);
    }
}

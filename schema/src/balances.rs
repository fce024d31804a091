//! What a group commit on PostgreSQL has moved on each ledger account,
//! applied to the rows once, just before it commits.
//!
//! Every settlement moves two balances when it is created and the same two
//! again when its hold is resolved, and a busy merchant's funding account is in every
//! unit of a batch: one UPDATE per line was a third of the committer's
//! statements, all on the batch's hottest rows. Here a batch adds each
//! line's amount to its account's moves in memory, and one UPDATE per
//! account applies the sum before the commit, in the same transaction.
//!
//! Every line is judged here too, against the account's row as read once
//! per batch plus the batch's own moves, and the refusal is known at the
//! call, not when the unit ends. No side of an account (its posted plus
//! pending debits, or credits) may pass `i64::MAX` (see
//! [`Buckets::room`]): the first line on an account reads its row. A debit
//! that a funding account's available balance must cover is judged
//! exactly: its row is read `FOR UPDATE`, so no other transaction can move
//! it until this one commits. Other rows are read without a lock: a system
//! account is in nearly every batch, and a lock from its first line to the
//! commit would queue every other node's batch behind this one. Only this
//! committer moves balances on one node, so the plain read is exact there;
//! with several nodes another node's commit may move the row after the
//! read, and if that took a side past the limit the batch's one UPDATE of
//! the row fails and the batch with it (its writers retry, and the row
//! read again refuses the line).
//!
//! A unit that rolls back takes its moves with it, and forgets a row it
//! read (rolling back to its savepoint released a lock). Balances read
//! inside the batch do not include its moves: nothing in a unit reads them.

use std::collections::HashMap;

use crate::models::LedgerAccountRow;
use crate::store::ledger::Bucket;
use crate::{StoreError, StoreResult};

/// The buckets of an account as read: what its available balance and its
/// room are computed from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Buckets {
    pub posted_debits_minor: i64,
    pub posted_credits_minor: i64,
    pub pending_debits_minor: i64,
    pub pending_credits_minor: i64,
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

/// How an account's row was read in the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// Enough to judge its room.
    Plain,
    /// `FOR UPDATE`: enough to judge its available balance too.
    Locked,
}

#[derive(Default)]
struct Account {
    moves: Moves,
    read: Option<(Buckets, Read)>,
}

enum Undo {
    Moved {
        account_id: String,
        bucket: Bucket,
        amount_minor: i64,
    },
    Read {
        account_id: String,
        before: Option<(Buckets, Read)>,
    },
}

#[derive(Default)]
pub struct Balances {
    accounts: HashMap<String, Account>,
    /// What the batch did, in order, so that a unit's part can be undone.
    log: Vec<Undo>,
}

impl Balances {
    /// Adds `amount_minor` (negative to take away) to one bucket.
    pub fn add(&mut self, account_id: &str, bucket: Bucket, amount_minor: i64) -> StoreResult<()> {
        let account = self.accounts.entry(account_id.to_owned()).or_default();
        let slot = account.moves.bucket(bucket);
        *slot = slot.checked_add(amount_minor).ok_or_else(|| {
            StoreError::Conflict(format!(
                "ledger account {account_id}: a batch's moves overflow"
            ))
        })?;
        self.log.push(Undo::Moved {
            account_id: account_id.to_owned(),
            bucket,
            amount_minor,
        });
        Ok(())
    }

    /// The account's available balance (posted credits - posted debits -
    /// pending debits) with the batch's moves, if its row has been read
    /// `FOR UPDATE` in this batch.
    pub fn available(&self, account_id: &str) -> Option<i128> {
        match self.accounts.get(account_id)?.read? {
            (_, Read::Locked) => Some(self.sums(account_id)?.available()),
            (_, Read::Plain) => None,
        }
    }

    /// How much more the side of the account that `bucket` is on may take
    /// with the batch's moves (see [`Buckets::room`]), if its row has been
    /// read in this batch.
    pub fn room(&self, account_id: &str, bucket: Bucket) -> Option<i128> {
        Some(self.sums(account_id)?.room(bucket))
    }

    fn sums(&self, account_id: &str) -> Option<Sums> {
        let account = self.accounts.get(account_id)?;
        let (read, moves) = (Sums::from(account.read?.0), account.moves);
        Some(Sums {
            posted_debits: read.posted_debits + i128::from(moves.posted_debits_minor),
            posted_credits: read.posted_credits + i128::from(moves.posted_credits_minor),
            pending_debits: read.pending_debits + i128::from(moves.pending_debits_minor),
            pending_credits: read.pending_credits + i128::from(moves.pending_credits_minor),
        })
    }

    /// How the account's row has been read in this batch, if it has.
    pub fn how_read(&self, account_id: &str) -> Option<Read> {
        Some(self.accounts.get(account_id)?.read?.1)
    }

    /// Remembers the account's row as read in this batch.
    pub fn remember(&mut self, account_id: &str, buckets: Buckets, how: Read) {
        let account = self.accounts.entry(account_id.to_owned()).or_default();
        let before = account.read.replace((buckets, how));
        self.log.push(Undo::Read {
            account_id: account_id.to_owned(),
            before,
        });
    }

    /// How much the batch has done, for [`Balances::undo_since`].
    pub fn mark(&self) -> usize {
        self.log.len()
    }

    /// Undoes what was done after `mark` (a unit rolled back).
    pub fn undo_since(&mut self, mark: usize) {
        let undone: Vec<Undo> = self.log.drain(mark.min(self.log.len())..).collect();
        for undo in undone.into_iter().rev() {
            match undo {
                Undo::Moved {
                    account_id,
                    bucket,
                    amount_minor,
                } => {
                    if let Some(account) = self.accounts.get_mut(&account_id) {
                        // The exact inverse of an add that succeeded.
                        *account.moves.bucket(bucket) -= amount_minor;
                    }
                }
                Undo::Read { account_id, before } => {
                    if let Some(account) = self.accounts.get_mut(&account_id) {
                        account.read = before;
                    }
                }
            }
        }
    }

    /// The moves to apply, one per account that moved, in account order
    /// (the order every entry locks its rows in); the batch starts over.
    pub fn take(&mut self) -> Vec<(String, Moves)> {
        self.log.clear();
        let mut moved: Vec<(String, Moves)> = std::mem::take(&mut self.accounts)
            .into_iter()
            .filter(|(_, account)| !account.moves.is_zero())
            .map(|(id, account)| (id, account.moves))
            .collect();
        moved.sort_by(|a, b| a.0.cmp(&b.0));
        moved
    }

    /// The batch ended: nothing is carried over (other transactions may
    /// move these accounts once it has committed).
    pub fn end_batch(&mut self) {
        self.log.clear();
        self.accounts.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCKED: Buckets = Buckets {
        posted_debits_minor: 100,
        posted_credits_minor: 1_000,
        pending_debits_minor: 50,
        pending_credits_minor: 0,
    };

    #[test]
    fn available_counts_the_batch_moves_on_the_locked_row() {
        let mut balances = Balances::default();
        balances.add("a", Bucket::PendingDebits, 300).unwrap();
        assert_eq!(balances.available("a"), None, "not read yet");
        balances.remember("a", LOCKED, Read::Locked);
        assert_eq!(balances.available("a"), Some(1_000 - 100 - 50 - 300));
        balances.add("a", Bucket::PendingDebits, -300).unwrap();
        balances.add("a", Bucket::PostedDebits, 300).unwrap();
        balances.add("a", Bucket::PostedCredits, 20).unwrap();
        assert_eq!(balances.available("a"), Some(1_000 + 20 - 400 - 50));
    }

    #[test]
    fn a_rolled_back_unit_takes_its_moves_and_its_lock_with_it() {
        let mut balances = Balances::default();
        balances.add("a", Bucket::PendingCredits, 7).unwrap();
        let mark = balances.mark();
        balances.remember("a", LOCKED, Read::Locked);
        balances.add("a", Bucket::PendingCredits, 5).unwrap();
        balances.add("b", Bucket::PostedDebits, 9).unwrap();
        balances.undo_since(mark);
        assert_eq!(balances.available("a"), None);
        let moved = balances.take();
        assert_eq!(moved.len(), 1, "b moved by nothing left: {moved:?}");
        assert_eq!(moved[0].0, "a");
        assert_eq!(moved[0].1.pending_credits_minor, 7);
    }

    #[test]
    fn room_counts_both_buckets_of_a_side_with_the_batch_moves() {
        let mut balances = Balances::default();
        assert_eq!(
            balances.room("a", Bucket::PostedCredits),
            None,
            "not read yet"
        );
        let near = Buckets {
            posted_credits_minor: i64::MAX - 30,
            pending_credits_minor: 10,
            ..LOCKED
        };
        balances.remember("a", near, Read::Plain);
        let cases = [
            (Bucket::PostedCredits, 20),
            (Bucket::PendingCredits, 20),
            (Bucket::PostedDebits, i128::from(i64::MAX) - 150),
            (Bucket::PendingDebits, i128::from(i64::MAX) - 150),
        ];
        for (bucket, room) in cases {
            assert_eq!(balances.room("a", bucket), Some(room), "{bucket:?}");
        }
        balances.add("a", Bucket::PendingCredits, 15).unwrap();
        assert_eq!(balances.room("a", Bucket::PostedCredits), Some(5));
        // Posting moves an amount within the side: the room stays.
        balances.add("a", Bucket::PendingCredits, -15).unwrap();
        balances.add("a", Bucket::PostedCredits, 15).unwrap();
        assert_eq!(balances.room("a", Bucket::PendingCredits), Some(5));
        assert_eq!(balances.available("a"), None, "judged only on a locked row");
        assert_eq!(
            (balances.how_read("a"), balances.how_read("b")),
            (Some(Read::Plain), None)
        );
    }

    #[test]
    fn a_row_locked_after_a_plain_read_is_read_plainly_again_when_its_unit_rolls_back() {
        let mut balances = Balances::default();
        balances.remember("a", LOCKED, Read::Plain);
        let mark = balances.mark();
        balances.remember("a", LOCKED, Read::Locked);
        assert_eq!(balances.available("a"), Some(1_000 - 100 - 50));
        balances.undo_since(mark);
        assert_eq!(balances.how_read("a"), Some(Read::Plain));
        assert_eq!(balances.available("a"), None, "the lock went with the unit");
    }

    #[test]
    fn moves_that_cancel_out_write_nothing_and_overflow_is_refused() {
        let mut balances = Balances::default();
        balances.add("a", Bucket::PendingDebits, 5).unwrap();
        balances.add("a", Bucket::PendingDebits, -5).unwrap();
        assert!(balances.take().is_empty());
        balances.add("a", Bucket::PostedCredits, i64::MAX).unwrap();
        assert!(balances.add("a", Bucket::PostedCredits, 1).is_err());
        let mark = balances.mark();
        balances.undo_since(mark);
        assert_eq!(balances.take()[0].1.posted_credits_minor, i64::MAX);
    }
}

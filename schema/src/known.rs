//! What the group committer remembers of rows that never change once
//! written, so that a unit need not read them again: a ledger account's
//! owner, kind and currency, and the lines of a ledger transaction. A
//! settlement reads its source account when it is created and its hold's
//! lines when its hold is resolved; on the committer's one connection each read was a
//! round trip that every other writer waited behind.
//!
//! A fact learned inside a batch is kept only if the batch commits: a unit
//! that rolls back takes its facts with it (an account it opened no longer
//! exists), and a failed commit takes the batch's. Facts are never wrong
//! afterwards, because these rows are neither updated nor deleted; the
//! caches are bounded and simply start over when full.

use std::collections::HashMap;
use std::sync::Arc;

use crate::models::{LedgerAccountRow, LedgerEntryRow};
use crate::vocabulary::{AccountId, AccountKind, MerchantId};

/// Accounts remembered at most before the cache starts over.
pub const ACCOUNTS_MAX: usize = 100_000;
/// Transactions whose lines are remembered at most.
pub const TRANSACTIONS_MAX: usize = 100_000;

/// The parts of a ledger account that never change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountFacts {
    pub id: AccountId,
    pub merchant_id: Option<MerchantId>,
    pub kind: AccountKind,
    pub currency: String,
}

impl From<&LedgerAccountRow> for AccountFacts {
    fn from(row: &LedgerAccountRow) -> Self {
        AccountFacts {
            id: row.id.clone(),
            merchant_id: row.merchant_id.clone(),
            kind: row.kind,
            currency: row.currency.clone(),
        }
    }
}

pub type Lines = Arc<[LedgerEntryRow]>;

#[derive(Default)]
pub struct Known {
    accounts: HashMap<AccountId, Arc<AccountFacts>>,
    lines: HashMap<String, Lines>,
    /// Learned by the batch under way: kept only if it commits.
    fresh_accounts: HashMap<AccountId, Arc<AccountFacts>>,
    fresh_lines: HashMap<String, Lines>,
    /// What the batch learned, in order, so that a unit's facts can be
    /// forgotten when it rolls back.
    log: Vec<Fresh>,
}

enum Fresh {
    Account(AccountId),
    Lines(String),
}

impl Known {
    pub fn account(&self, id: &AccountId) -> Option<Arc<AccountFacts>> {
        self.accounts
            .get(id)
            .or_else(|| self.fresh_accounts.get(id))
            .cloned()
    }

    pub fn learn_account(&mut self, facts: AccountFacts) {
        if self.accounts.contains_key(&facts.id) {
            return;
        }
        self.log.push(Fresh::Account(facts.id.clone()));
        self.fresh_accounts
            .insert(facts.id.clone(), Arc::new(facts));
    }

    pub fn lines(&self, transaction_id: &str) -> Option<Lines> {
        self.lines
            .get(transaction_id)
            .or_else(|| self.fresh_lines.get(transaction_id))
            .cloned()
    }

    pub fn learn_lines(&mut self, transaction_id: &str, lines: Lines) {
        self.log.push(Fresh::Lines(transaction_id.to_owned()));
        self.fresh_lines.insert(transaction_id.to_owned(), lines);
    }

    /// How much the batch has learned, for [`Known::forget_since`].
    pub fn mark(&self) -> usize {
        self.log.len()
    }

    /// Forgets what was learned after `mark` (a unit rolled back).
    pub fn forget_since(&mut self, mark: usize) {
        for fresh in self.log.drain(mark.min(self.log.len())..) {
            match fresh {
                Fresh::Account(id) => {
                    self.fresh_accounts.remove(&id);
                }
                Fresh::Lines(id) => {
                    self.fresh_lines.remove(&id);
                }
            }
        }
    }

    /// The batch ended: keep what it learned if it committed.
    pub fn end_batch(&mut self, committed: bool) {
        self.log.clear();
        let (accounts, lines) = (
            std::mem::take(&mut self.fresh_accounts),
            std::mem::take(&mut self.fresh_lines),
        );
        if !committed {
            return;
        }
        if self.accounts.len() + accounts.len() > ACCOUNTS_MAX {
            self.accounts.clear();
        }
        if self.lines.len() + lines.len() > TRANSACTIONS_MAX {
            self.lines.clear();
        }
        self.accounts.extend(accounts);
        self.lines.extend(lines);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(id: &str) -> AccountFacts {
        AccountFacts {
            id: AccountId::new(id),
            merchant_id: None,
            kind: AccountKind::CardPush,
            currency: "USD".into(),
        }
    }

    #[test]
    fn a_rolled_back_unit_takes_its_facts_with_it() {
        let mut known = Known::default();
        known.learn_account(facts("a"));
        let mark = known.mark();
        known.learn_account(facts("b"));
        known.learn_lines("ltx_1", Arc::from(Vec::new()));
        known.forget_since(mark);
        assert!(known.account(&AccountId::new("a")).is_some());
        assert!(known.account(&AccountId::new("b")).is_none());
        assert!(known.lines("ltx_1").is_none());
        known.end_batch(true);
        assert!(known.account(&AccountId::new("a")).is_some());
    }

    #[test]
    fn only_a_committed_batch_is_remembered() {
        let mut known = Known::default();
        known.learn_account(facts("a"));
        known.end_batch(false);
        assert!(known.account(&AccountId::new("a")).is_none());
        known.learn_account(facts("a"));
        known.learn_lines("ltx_1", Arc::from(Vec::new()));
        known.end_batch(true);
        assert!(known.account(&AccountId::new("a")).is_some());
        assert!(known.lines("ltx_1").is_some());
    }
}

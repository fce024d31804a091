//! The offline check behind `tern ledger check` (decisions §6).
//!
//! How lines count, per their transaction:
//!
//! | transaction | its lines |
//! |---|---|
//! | `pending` (a hold) | add to pending |
//! | `posted`, with `pending_id` (a posting) | move from pending to posted |
//! | `voided`, with `pending_id` (a void) | leave pending |
//! | `posted`, without `pending_id` | add to posted: an entry posted at once, or a hold edited in place before migration 000015 |
//! | `voided`, without `pending_id` | nothing: a hold voided in place before migration 000015 |
//!
//! So each amount counts once, whether the hold was resolved before the
//! ledger became append-only or after.

use std::collections::BTreeMap;

use super::{Direction, LedgerError};
use crate::balances::Buckets;
use crate::models::{LedgerAccountRow, LedgerEntryRow};
use crate::store::ledger::{self as store, Bucket};
use crate::vocabulary::{AccountId, AccountKind, LedgerStatus};
use crate::Tx;

/// Totals of one currency across every account.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CurrencyTotals {
    pub posted_sum_minor: i128,
    pub pending_debits_minor: i128,
    pub pending_credits_minor: i128,
}

/// What `tern ledger check` found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    pub accounts: u64,
    pub entries: u64,
    /// Pending transactions, resolved or not.
    pub holds: u64,
    /// Postings and voids of holds.
    pub resolutions: u64,
    pub currencies: BTreeMap<String, CurrencyTotals>,
    pub violations: Vec<String>,
}

impl CheckReport {
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Verifies the whole ledger: every entry balanced per currency, every
/// resolution the exact lines of a hold, every account's balances equal to
/// what its lines add up to, no side of an account past `i64::MAX`,
/// per-currency sums zero, and no funding account below zero. It reads many
/// pages: they are read in one snapshot, so that movements committed
/// meanwhile cannot make a sound ledger look broken (lines from before,
/// balances from after).
pub async fn check(tx: &mut Tx<'_>) -> Result<CheckReport, LedgerError> {
    crate::snapshot::begin(tx).await?;
    let report = check_in_snapshot(tx).await;
    let ended = crate::snapshot::end(tx, Ok(())).await;
    let report = report?;
    ended?;
    Ok(report)
}

/// An account's buckets as its lines add them up, in the order of
/// [`Bucket`]s below.
type Sums = [i128; 4];
const PENDING_DEBITS: usize = 0;
const PENDING_CREDITS: usize = 1;
const POSTED_DEBITS: usize = 2;
const POSTED_CREDITS: usize = 3;

/// A transaction's lines summed by account, direction and currency: what a
/// resolution must repeat of its hold.
type Shape = BTreeMap<(AccountId, bool, String), i128>;

/// What the lines say, gathered page by page.
#[derive(Default)]
struct Lines {
    per_account: BTreeMap<AccountId, Sums>,
    per_transaction: BTreeMap<String, BTreeMap<String, i128>>,
    holds: BTreeMap<String, Shape>,
    /// Resolution id -> (the hold it names, its shape).
    resolutions: BTreeMap<String, (String, Shape)>,
}

impl Lines {
    fn add(&mut self, line: LedgerEntryRow, status: LedgerStatus, pending_id: Option<String>) {
        let amount = i128::from(line.amount_minor);
        let debit = line.direction == Direction::Debit;
        let (pending, posted) = match debit {
            true => (PENDING_DEBITS, POSTED_DEBITS),
            false => (PENDING_CREDITS, POSTED_CREDITS),
        };
        let sums = self.per_account.entry(line.account_id.clone()).or_default();
        let resolves = pending_id.is_some();
        match (status, resolves) {
            (LedgerStatus::Pending, _) => sums[pending] += amount,
            (LedgerStatus::Posted, true) => {
                sums[pending] -= amount;
                sums[posted] += amount;
            }
            (LedgerStatus::Posted, false) => sums[posted] += amount,
            (LedgerStatus::Voided, true) => sums[pending] -= amount,
            (LedgerStatus::Voided, false) => {}
        }
        let shape = match (status, pending_id) {
            (LedgerStatus::Pending, None) => {
                Some(self.holds.entry(line.transaction_id.clone()).or_default())
            }
            (_, Some(hold)) => Some(
                &mut self
                    .resolutions
                    .entry(line.transaction_id.clone())
                    .or_insert_with(|| (hold, Shape::new()))
                    .1,
            ),
            _ => None,
        };
        if let Some(shape) = shape {
            *shape
                .entry((line.account_id.clone(), debit, line.currency.clone()))
                .or_default() += amount;
        }
        *self
            .per_transaction
            .entry(line.transaction_id)
            .or_default()
            .entry(line.currency)
            .or_default() += if debit { amount } else { -amount };
    }
}

async fn check_in_snapshot(tx: &mut Tx<'_>) -> Result<CheckReport, LedgerError> {
    let mut report = CheckReport::default();
    let mut lines = Lines::default();
    let mut after = String::new();
    loop {
        let page = store::entries_page(tx, &after).await?;
        let Some((last, _, _)) = page.last() else {
            break;
        };
        after = last.id.clone();
        for (line, status, pending_id) in page {
            report.entries += 1;
            lines.add(line, status, pending_id);
        }
    }
    for (transaction, sums) in &lines.per_transaction {
        for (currency, sum) in sums.iter().filter(|(_, sum)| **sum != 0) {
            report.violations.push(format!(
                "transaction {transaction} is unbalanced in {currency} by {sum}"
            ));
        }
    }
    report.holds = lines.holds.len() as u64;
    report.resolutions = lines.resolutions.len() as u64;
    for (resolution, (hold, shape)) in &lines.resolutions {
        match lines.holds.get(hold) {
            None => report.violations.push(format!(
                "transaction {resolution} resolves {hold}, which is not a pending hold"
            )),
            Some(held) if held != shape => report.violations.push(format!(
                "transaction {resolution} does not repeat the lines of the hold {hold}"
            )),
            Some(_) => {}
        }
    }
    let mut after = String::new();
    loop {
        let page = store::accounts_page(tx, &after).await?;
        let Some(last) = page.last() else { break };
        after = last.id.to_string();
        for account in page {
            check_account(
                &mut report,
                &account,
                lines
                    .per_account
                    .get(&account.id)
                    .copied()
                    .unwrap_or_default(),
            );
        }
    }
    for (currency, totals) in &report.currencies {
        if totals.posted_sum_minor != 0 {
            report.violations.push(format!(
                "{currency}: posted balances sum to {}",
                totals.posted_sum_minor
            ));
        }
        if totals.pending_debits_minor != totals.pending_credits_minor {
            report.violations.push(format!(
                "{currency}: pending debits {} differ from pending credits {}",
                totals.pending_debits_minor, totals.pending_credits_minor
            ));
        }
    }
    Ok(report)
}

fn check_account(report: &mut CheckReport, account: &LedgerAccountRow, lines: Sums) {
    report.accounts += 1;
    let stored = [
        account.pending_debits_minor,
        account.pending_credits_minor,
        account.posted_debits_minor,
        account.posted_credits_minor,
    ]
    .map(i128::from);
    if stored != lines {
        report.violations.push(format!(
            "account {} balances {stored:?} differ from its lines {lines:?}",
            account.id
        ));
    }
    let buckets = Buckets::from(account);
    for (side, bucket) in [
        ("debits", Bucket::PostedDebits),
        ("credits", Bucket::PostedCredits),
    ] {
        if buckets.room(bucket) < 0 {
            report.violations.push(format!(
                "account {}: posted and pending {side} pass i64::MAX",
                account.id
            ));
        }
    }
    if account.kind == AccountKind::Funding && buckets.available_minor() < 0 {
        report.violations.push(format!(
            "funding account {} is below zero: {}",
            account.id,
            buckets.available_minor()
        ));
    }
    let totals = report
        .currencies
        .entry(account.currency.clone())
        .or_default();
    totals.posted_sum_minor +=
        i128::from(account.posted_credits_minor) - i128::from(account.posted_debits_minor);
    totals.pending_debits_minor += i128::from(account.pending_debits_minor);
    totals.pending_credits_minor += i128::from(account.pending_credits_minor);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::money::MinorUnits;
    use crate::types::utc_now;

    fn line(transaction: &str, account: &str, debit: bool, amount_minor: i64) -> LedgerEntryRow {
        LedgerEntryRow {
            id: format!("len_{transaction}_{account}"),
            transaction_id: transaction.into(),
            account_id: AccountId::new(account),
            direction: if debit {
                Direction::Debit
            } else {
                Direction::Credit
            },
            amount_minor: MinorUnits::new(amount_minor),
            currency: "USD".into(),
            created_at: utc_now(),
        }
    }

    /// Each row: a transaction's status and resolved hold, and what the
    /// debit of 100 on account `a` leaves in a's buckets.
    #[test]
    fn each_amount_counts_once_whatever_resolved_its_hold() {
        let cases: [(LedgerStatus, Option<&str>, Sums); 5] = [
            (LedgerStatus::Pending, None, [100, 0, 0, 0]),
            (LedgerStatus::Posted, Some("hold"), [-100, 0, 100, 0]),
            (LedgerStatus::Voided, Some("hold"), [-100, 0, 0, 0]),
            (LedgerStatus::Posted, None, [0, 0, 100, 0]),
            (LedgerStatus::Voided, None, [0, 0, 0, 0]),
        ];
        for (status, pending_id, sums) in cases {
            let mut lines = Lines::default();
            lines.add(
                line("t", "a", true, 100),
                status,
                pending_id.map(Into::into),
            );
            lines.add(
                line("t", "b", false, 100),
                status,
                pending_id.map(Into::into),
            );
            assert_eq!(lines.per_account["a"], sums, "{status} {pending_id:?}");
            assert_eq!(lines.per_transaction["t"]["USD"], 0);
        }
    }

    #[test]
    fn a_hold_and_its_resolution_leave_only_the_posting() {
        let mut lines = Lines::default();
        lines.add(line("hold", "a", true, 70), LedgerStatus::Pending, None);
        lines.add(line("hold", "b", false, 70), LedgerStatus::Pending, None);
        lines.add(
            line("post", "a", true, 70),
            LedgerStatus::Posted,
            Some("hold".into()),
        );
        lines.add(
            line("post", "b", false, 70),
            LedgerStatus::Posted,
            Some("hold".into()),
        );
        assert_eq!(lines.per_account["a"], [0, 0, 70, 0]);
        assert_eq!(lines.per_account["b"], [0, 0, 0, 70]);
        assert_eq!(lines.holds["hold"], lines.resolutions["post"].1);
    }
}

//! How money is posted: balanced journal entries over accounts of one
//! currency each, two-phase (pending, then posted or voided, never edited),
//! always inside the caller's transaction so that every movement commits
//! with the state change that causes it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::known::AccountFacts;
use crate::models::{LedgerAccountRow, LedgerEntryRow, LedgerTransactionRow};
use crate::money::Currency;
use crate::store::ledger::{self as store, Bucket};
use crate::types::utc_now;
use crate::{DieselError, Refusal, StoreError, Tx};
use diesel_async::SimpleAsyncConnection;

/// The kind of a merchant's spendable account.
pub const FUNDING: &str = "funding";
/// Most lines one journal entry may have.
pub const LINES_PER_ENTRY_MAX: usize = 16;

/// The system's counterparty accounts, one per currency: where money comes
/// from and goes to outside the merchants' books.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SystemAccount {
    /// Card charges collected through the acquirer (and refunds paid back).
    CardAcquirer,
    /// Pushes paid out to cards.
    CardPush,
    /// On-chain payouts through the custodian.
    Custodian,
    /// Transfers in flight: the charge collected for a transfer waits here
    /// (fiat) until converted, and the asset waits here until paid out.
    TransferClearing,
    /// Platform fees earned on transfers.
    PlatformFees,
    /// Network fees collected on transfers to pay for gas.
    NetworkFees,
    /// The conversion desk: takes fiat in and gives the asset out, so each
    /// currency balances on its own.
    Conversion,
    /// Card spending settled with the card network: what issued cards
    /// authorize (held), clear (posted) and get back as refunds.
    CardNetwork,
}

impl SystemAccount {
    pub const ALL: [SystemAccount; 8] = [
        SystemAccount::CardAcquirer,
        SystemAccount::CardPush,
        SystemAccount::Custodian,
        SystemAccount::TransferClearing,
        SystemAccount::PlatformFees,
        SystemAccount::NetworkFees,
        SystemAccount::Conversion,
        SystemAccount::CardNetwork,
    ];

    pub fn kind(self) -> &'static str {
        match self {
            SystemAccount::CardAcquirer => "card_acquirer",
            SystemAccount::CardPush => "card_push",
            SystemAccount::Custodian => "custodian",
            SystemAccount::TransferClearing => "transfer_clearing",
            SystemAccount::PlatformFees => "platform_fees",
            SystemAccount::NetworkFees => "network_fees",
            SystemAccount::Conversion => "conversion",
            SystemAccount::CardNetwork => "card_network",
        }
    }

    /// Deterministic, so every node names the same row. The row is made on
    /// first use, by [`record`], so the hot path writes nothing to find it.
    pub fn account_id(self, currency: &str) -> String {
        format!("sys_{}_{}", self.kind(), currency.to_ascii_lowercase())
    }

    /// The account and currency an id of [`SystemAccount::account_id`] names.
    pub fn parse_id(id: &str) -> Option<(SystemAccount, String)> {
        let (kind, currency) = id.strip_prefix("sys_")?.rsplit_once('_')?;
        let account = SystemAccount::ALL
            .into_iter()
            .find(|account| account.kind() == kind)?;
        let currency = Currency::find(&currency.to_ascii_uppercase())?;
        Some((account, currency.code.to_owned()))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Debit,
    Credit,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Debit => "debit",
            Direction::Credit => "credit",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Reserved: counts against available, not yet in the balance.
    Pending,
    Posted,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub account_id: String,
    pub direction: Direction,
    pub amount_minor: i64,
    pub currency: String,
}

/// A journal entry to record.
#[derive(Clone, Debug)]
pub struct Entry {
    pub merchant_id: Option<String>,
    pub settlement_key: Option<String>,
    pub description: String,
    pub lines: Vec<Line>,
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// A programming error: the entry would not balance. Nothing is written.
    #[error("unbalanced entry: {0}")]
    Unbalanced(String),
    #[error("insufficient available funds on {account_id}")]
    InsufficientFunds { account_id: String },
    #[error("no ledger account {0}")]
    UnknownAccount(String),
    #[error("account {account_id} holds {account_currency}, not {line_currency}")]
    CurrencyMismatch {
        account_id: String,
        account_currency: String,
        line_currency: String,
    },
    #[error("transaction {id} is {status}, not pending")]
    NotPending { id: String, status: String },
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for LedgerError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Refused(Refusal::InsufficientFunds { account_id }) => {
                LedgerError::InsufficientFunds { account_id }
            }
            other => LedgerError::Store(other),
        }
    }
}

impl From<DieselError> for LedgerError {
    fn from(error: DieselError) -> Self {
        LedgerError::Store(error.into())
    }
}

/// Every entry balances per currency, has at least two lines, and only
/// positive amounts.
pub fn check_balanced(lines: &[Line]) -> Result<(), LedgerError> {
    if lines.len() < 2 || lines.len() > LINES_PER_ENTRY_MAX {
        return Err(LedgerError::Unbalanced(format!("{} lines", lines.len())));
    }
    let mut sums: BTreeMap<&str, i128> = BTreeMap::new();
    for line in lines {
        if line.amount_minor <= 0 {
            return Err(LedgerError::Unbalanced(format!(
                "amount {} on {}",
                line.amount_minor, line.account_id
            )));
        }
        let signed = i128::from(line.amount_minor);
        *sums.entry(&line.currency).or_default() += match line.direction {
            Direction::Debit => signed,
            Direction::Credit => -signed,
        };
    }
    match sums.iter().find(|(_, sum)| **sum != 0) {
        Some((currency, sum)) => Err(LedgerError::Unbalanced(format!("{currency} off by {sum}"))),
        None => Ok(()),
    }
}

/// Opens one funding account per fiat currency for a new merchant.
pub async fn open_funding_accounts(tx: &mut Tx<'_>, merchant_id: &str) -> Result<(), LedgerError> {
    let now = utc_now();
    for currency in Currency::fiat() {
        let row = LedgerAccountRow {
            id: format!("acct_{}", uuid::Uuid::now_v7().simple()),
            merchant_id: Some(merchant_id.to_owned()),
            kind: FUNDING.to_owned(),
            currency: currency.code.to_owned(),
            posted_debits_minor: 0,
            posted_credits_minor: 0,
            pending_debits_minor: 0,
            pending_credits_minor: 0,
            created_at: now,
            updated_at: now,
        };
        store::insert_account(tx, &row).await?;
    }
    Ok(())
}

/// Makes the system account `account_id` names, if it names one and it
/// does not exist yet: for rows that refer to an account before any entry
/// has touched it.
pub async fn ensure_system_account(tx: &mut Tx<'_>, account_id: &str) -> Result<bool, LedgerError> {
    if tx
        .known()
        .is_some_and(|known| known.account(account_id).is_some())
    {
        return Ok(true);
    }
    open_system_account(tx, account_id).await
}

/// The unchanging facts of an account (owner, kind, currency): remembered
/// by the group committer, read otherwise.
pub async fn account_facts(
    tx: &mut Tx<'_>,
    account_id: &str,
) -> Result<Option<Arc<AccountFacts>>, LedgerError> {
    Ok(store::account_facts(tx, account_id).await?)
}

/// Remembers that the system account `account_id` exists, once a line has
/// been applied to it (see [`crate::known`]).
fn learn_system_account(tx: &mut Tx<'_>, account_id: &str) {
    let Some(known) = tx.known() else { return };
    if let Some((account, currency)) = SystemAccount::parse_id(account_id) {
        known.learn_account(AccountFacts {
            id: account_id.to_owned(),
            merchant_id: None,
            kind: account.kind().to_owned(),
            currency,
        });
    }
}

/// Whether a line debits an account known to be a funding account in the
/// line's currency: only its funds can refuse it.
fn is_known_funding(tx: &mut Tx<'_>, line: &Line) -> bool {
    tx.known()
        .and_then(|known| known.account(&line.account_id))
        .is_some_and(|facts| facts.kind == FUNDING && facts.currency == line.currency)
}

/// Whether a line can be applied without a statement that may refuse it:
/// the account is known to exist in the line's currency, and the line is
/// not a debit of a funding account (whose guard must answer now).
fn cannot_be_refused(tx: &mut Tx<'_>, line: &Line) -> bool {
    tx.known()
        .and_then(|known| known.account(&line.account_id))
        .is_some_and(|facts| {
            facts.currency == line.currency
                && (facts.kind != FUNDING || line.direction == Direction::Credit)
        })
}

/// Makes the system account `account_id` names, if it names one.
async fn open_system_account(tx: &mut Tx<'_>, account_id: &str) -> Result<bool, LedgerError> {
    let Some((account, currency)) = SystemAccount::parse_id(account_id) else {
        return Ok(false);
    };
    let now = utc_now();
    let row = LedgerAccountRow {
        id: account_id.to_owned(),
        merchant_id: None,
        kind: account.kind().to_owned(),
        currency,
        posted_debits_minor: 0,
        posted_credits_minor: 0,
        pending_debits_minor: 0,
        pending_credits_minor: 0,
        created_at: now,
        updated_at: now,
    };
    // Two writers may make it at once: the second does nothing.
    store::insert_account_if_absent(tx, &row).await?;
    Ok(true)
}

/// Records a balanced entry and applies it to the balances. Debits of a
/// funding account must be covered by its available balance, checked by the
/// database in the same statement, or nothing is applied (the caller's
/// transaction rolls back on the error). Answers the transaction id.
pub async fn record(tx: &mut Tx<'_>, entry: &Entry, phase: Phase) -> Result<String, LedgerError> {
    record_as(tx, new_transaction_id(), entry, phase, FundsCheck::Now).await
}

/// When a debit of a funding account learns whether the funds cover it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FundsCheck {
    /// At the call: [`LedgerError::InsufficientFunds`], or the account's
    /// other refusal, comes back from [`record`] itself.
    Now,
    /// When the unit ends, for a caller that has ruled out every refusal
    /// but funds (a known funding account in the line's currency) and does
    /// not act on the answer inside its unit: inside a pipelined group
    /// commit the debit is then sent without waiting, and a shortfall fails
    /// the unit with [`Refusal::InsufficientFunds`] (at once elsewhere).
    AtUnitEnd,
}

/// A fresh ledger transaction id, for [`record_as`].
pub fn new_transaction_id() -> String {
    format!("ltx_{}", uuid::Uuid::now_v7().simple())
}

/// [`record`] under an id the caller chose beforehand (to name it in
/// something written before the entry).
pub async fn record_as(
    tx: &mut Tx<'_>,
    transaction_id: String,
    entry: &Entry,
    phase: Phase,
    funds: FundsCheck,
) -> Result<String, LedgerError> {
    let (transaction, rows) = apply(tx, transaction_id, entry, phase, funds).await?;
    // After the balances: a refused entry stops there having written
    // nothing more, and a system account made on first use exists before
    // its lines refer to it.
    store::insert_transaction(tx, &transaction).await?;
    store::insert_entries(tx, &rows).await?;
    Ok(transaction.id)
}

/// [`record_as`] but for its two inserts: applies the entry to the
/// balances and answers the rows to insert, for a caller that inserts them
/// in a statement of its own (a settlement's claimed creation, see
/// [`store::settlements::insert_claimed`]).
pub async fn apply(
    tx: &mut Tx<'_>,
    transaction_id: String,
    entry: &Entry,
    phase: Phase,
    funds: FundsCheck,
) -> Result<(LedgerTransactionRow, Vec<LedgerEntryRow>), LedgerError> {
    check_balanced(&entry.lines)?;
    let now = utc_now();
    let status = match phase {
        Phase::Pending => "pending",
        Phase::Posted => "posted",
    };

    // A fixed lock order (by account id) keeps concurrent entries on
    // PostgreSQL from deadlocking on each other's rows.
    let mut lines: Vec<&Line> = entry.lines.iter().collect();
    lines.sort_by(|a, b| a.account_id.cmp(&b.account_id));
    for line in lines {
        let bucket = match (phase, line.direction) {
            (Phase::Pending, Direction::Debit) => Bucket::PendingDebits,
            (Phase::Pending, Direction::Credit) => Bucket::PendingCredits,
            (Phase::Posted, Direction::Debit) => Bucket::PostedDebits,
            (Phase::Posted, Direction::Credit) => Bucket::PostedCredits,
        };
        // Only a debit can take a funding account below zero.
        let guard = line.direction == Direction::Debit;
        let (id, currency, amount) = (&line.account_id, &line.currency, line.amount_minor);
        if cannot_be_refused(tx, line) {
            store::add_line_sent(tx, id, currency, bucket, amount, false).await?;
            continue;
        }
        if funds == FundsCheck::AtUnitEnd && is_known_funding(tx, line) {
            store::add_line_sent(tx, id, currency, bucket, amount, true).await?;
            continue;
        }
        if store::add_line(tx, id, currency, bucket, amount, guard).await? {
            learn_system_account(tx, id);
            continue;
        }
        // Refused: read the account once, to make a missing system account
        // or to say why.
        let account = match store::find_account(tx, id).await? {
            None if open_system_account(tx, id).await? => {
                if store::add_line(tx, id, currency, bucket, amount, guard).await? {
                    learn_system_account(tx, id);
                    continue;
                }
                store::find_account(tx, id).await?
            }
            found => found,
        };
        return Err(refusal(line, account));
    }
    let transaction = LedgerTransactionRow {
        id: transaction_id.clone(),
        status: status.to_owned(),
        merchant_id: entry.merchant_id.clone(),
        settlement_key: entry.settlement_key.clone(),
        description: entry.description.clone(),
        created_at: now,
        updated_at: now,
    };
    let rows: Vec<LedgerEntryRow> = entry
        .lines
        .iter()
        .map(|line| LedgerEntryRow {
            id: format!("len_{}", uuid::Uuid::now_v7().simple()),
            transaction_id: transaction_id.clone(),
            account_id: line.account_id.clone(),
            direction: line.direction.as_str().to_owned(),
            amount_minor: line.amount_minor,
            currency: line.currency.clone(),
            created_at: now,
        })
        .collect();
    if let Some(known) = tx.known() {
        known.learn_lines(&transaction_id, Arc::from(rows.clone()));
    }
    Ok((transaction, rows))
}

/// Posts a pending entry: its amounts move from pending to posted.
/// Why [`store::add_line`] refused a line: no such account, another
/// currency, or not enough available funds.
fn refusal(line: &Line, account: Option<LedgerAccountRow>) -> LedgerError {
    match account {
        None => LedgerError::UnknownAccount(line.account_id.clone()),
        Some(account) if account.currency != line.currency => LedgerError::CurrencyMismatch {
            account_id: account.id,
            account_currency: account.currency,
            line_currency: line.currency.clone(),
        },
        Some(_) => LedgerError::InsufficientFunds {
            account_id: line.account_id.clone(),
        },
    }
}

pub async fn post(tx: &mut Tx<'_>, transaction_id: &str) -> Result<(), LedgerError> {
    settle(tx, transaction_id, true).await
}

/// Voids a pending entry: its reservations are released.
pub async fn void(tx: &mut Tx<'_>, transaction_id: &str) -> Result<(), LedgerError> {
    settle(tx, transaction_id, false).await
}

async fn settle(tx: &mut Tx<'_>, transaction_id: &str, posting: bool) -> Result<(), LedgerError> {
    let to = if posting { "posted" } else { "voided" };
    if tx.pipelined_writes() {
        // Inside a pipelined group commit a transaction that is not pending
        // fails its unit when the unit ends, rolling back what follows.
        store::transition_transaction_behind(tx, transaction_id, "pending", to).await?;
    } else if !store::transition_transaction(tx, transaction_id, "pending", to).await? {
        let status = store::find_transaction(tx, transaction_id)
            .await?
            .map(|row| row.status)
            .unwrap_or_else(|| "missing".to_owned());
        return Err(LedgerError::NotPending {
            id: transaction_id.to_owned(),
            status,
        });
    }
    let lines = match tx.known().and_then(|known| known.lines(transaction_id)) {
        Some(lines) => lines,
        None => {
            let rows: Arc<[LedgerEntryRow]> =
                Arc::from(store::transaction_entries(tx, transaction_id).await?);
            if let Some(known) = tx.known() {
                known.learn_lines(transaction_id, rows.clone());
            }
            rows
        }
    };
    let mut lines: Vec<&LedgerEntryRow> = lines.iter().collect();
    lines.sort_by(|a, b| a.account_id.cmp(&b.account_id));
    for line in lines {
        let debit = line.direction == Direction::Debit.as_str();
        store::settle_line(tx, &line.account_id, debit, line.amount_minor, posting).await?;
    }
    Ok(())
}

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
    pub currencies: BTreeMap<String, CurrencyTotals>,
    pub violations: Vec<String>,
}

impl CheckReport {
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Verifies the whole ledger: every entry balanced per currency, every
/// account's balances equal to the sum of its lines, per-currency sums zero,
/// and no funding account below zero. It reads many pages: they are read
/// in one snapshot, so that movements committed meanwhile cannot make a
/// sound ledger look broken (lines from before, balances from after).
pub async fn check(tx: &mut Tx<'_>) -> Result<CheckReport, LedgerError> {
    let begin = match tx.backend() {
        crate::db::Backend::Postgres => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        // A deferred transaction keeps the snapshot of its first read.
        crate::db::Backend::Sqlite => "BEGIN DEFERRED",
    };
    crate::dispatch!(tx, conn => conn.batch_execute(begin).await).map_err(StoreError::from)?;
    let report = check_in_snapshot(tx).await;
    // Read only: nothing to keep.
    let ended = crate::dispatch!(tx, conn => conn.batch_execute("ROLLBACK").await)
        .map_err(StoreError::from);
    let report = report?;
    ended?;
    Ok(report)
}

async fn check_in_snapshot(tx: &mut Tx<'_>) -> Result<CheckReport, LedgerError> {
    let mut report = CheckReport::default();
    let mut from_lines: BTreeMap<String, [i128; 4]> = BTreeMap::new();
    let mut per_transaction: BTreeMap<String, BTreeMap<String, i128>> = BTreeMap::new();
    let mut after = String::new();
    loop {
        let page = store::entries_page(tx, &after).await?;
        let Some((last, _)) = page.last() else { break };
        after = last.id.clone();
        for (line, status) in page {
            report.entries += 1;
            let amount = i128::from(line.amount_minor);
            let debit = line.direction == Direction::Debit.as_str();
            let sums = from_lines.entry(line.account_id.clone()).or_default();
            match (status.as_str(), debit) {
                ("pending", true) => sums[0] += amount,
                ("pending", false) => sums[1] += amount,
                ("posted", true) => sums[2] += amount,
                ("posted", false) => sums[3] += amount,
                _ => {}
            }
            *per_transaction
                .entry(line.transaction_id)
                .or_default()
                .entry(line.currency)
                .or_default() += if debit { amount } else { -amount };
        }
    }
    for (transaction, sums) in &per_transaction {
        for (currency, sum) in sums.iter().filter(|(_, sum)| **sum != 0) {
            report.violations.push(format!(
                "transaction {transaction} is unbalanced in {currency} by {sum}"
            ));
        }
    }
    let mut after = String::new();
    loop {
        let page = store::accounts_page(tx, &after).await?;
        let Some(last) = page.last() else { break };
        after = last.id.clone();
        for account in page {
            check_account(
                &mut report,
                &account,
                from_lines.get(&account.id).copied().unwrap_or_default(),
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

fn check_account(report: &mut CheckReport, account: &LedgerAccountRow, lines: [i128; 4]) {
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
    if account.kind == FUNDING && account.available_minor() < 0 {
        report.violations.push(format!(
            "funding account {} is below zero: {}",
            account.id,
            account.available_minor()
        ));
    }
    let totals = report
        .currencies
        .entry(account.currency.clone())
        .or_default();
    totals.posted_sum_minor += i128::from(account.balance_minor());
    totals.pending_debits_minor += i128::from(account.pending_debits_minor);
    totals.pending_credits_minor += i128::from(account.pending_credits_minor);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(account: &str, direction: Direction, amount_minor: i64, currency: &str) -> Line {
        Line {
            account_id: account.into(),
            direction,
            amount_minor,
            currency: currency.into(),
        }
    }

    #[test]
    fn balance_table() {
        use Direction::{Credit, Debit};
        let cases: [(Vec<Line>, bool); 6] = [
            (
                vec![line("a", Debit, 100, "USD"), line("b", Credit, 100, "USD")],
                true,
            ),
            (
                vec![
                    line("a", Debit, 100, "USD"),
                    line("b", Credit, 60, "USD"),
                    line("c", Credit, 40, "USD"),
                ],
                true,
            ),
            (
                vec![line("a", Debit, 100, "USD"), line("b", Credit, 99, "USD")],
                false,
            ),
            (
                vec![line("a", Debit, 100, "USD"), line("b", Credit, 100, "EUR")],
                false,
            ),
            (
                vec![line("a", Debit, 0, "USD"), line("b", Credit, 0, "USD")],
                false,
            ),
            (vec![line("a", Debit, 100, "USD")], false),
        ];
        for (lines, balanced) in cases {
            assert_eq!(check_balanced(&lines).is_ok(), balanced, "{lines:?}");
        }
    }

    #[test]
    fn system_accounts_are_named_deterministically() {
        assert_eq!(
            SystemAccount::CardAcquirer.account_id("USD"),
            "sys_card_acquirer_usd"
        );
        assert_eq!(
            SystemAccount::Custodian.account_id("EUR"),
            "sys_custodian_eur"
        );
    }

    #[test]
    fn every_system_account_id_reads_back() {
        for account in SystemAccount::ALL {
            for currency in ["USD", "JPY", "USDT", "USDC"] {
                let id = account.account_id(currency);
                assert_eq!(
                    SystemAccount::parse_id(&id),
                    Some((account, currency.to_owned())),
                    "{id}"
                );
            }
        }
        assert_eq!(SystemAccount::parse_id("sys_transfer_clearing_xyz"), None);
    }
}

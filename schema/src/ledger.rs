//! How money is posted: balanced journal entries over accounts of one
//! currency each, always inside the caller's transaction so that every
//! movement commits with the state change that causes it.
//!
//! The ledger is append-only and two-phase, as TigerBeetle's: a hold is a
//! `pending` transaction and stays one; its posting or its void is a new
//! transaction (`posted` or `voided`) that names it in `pending_id` and
//! copies its lines, which the database lets happen once per hold. No row
//! is edited after insert (the database refuses it). Balances keep pending
//! and posted debits and credits; each amount is counted once: a hold's
//! lines add to pending, its resolution's take them out again (and, for a
//! posting, add them to posted).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::known::{AccountFacts, Lines};
use crate::models::{LedgerAccountRow, LedgerEntryRow, LedgerTransactionRow};
use crate::money::Currency;
use crate::store::ledger::{self as store, Bucket, LineOutcome};
use crate::types::utc_now;
use crate::{DieselError, Refusal, StoreError, Tx};

mod check;

pub use check::{check, CheckReport, CurrencyTotals};

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
    /// The hold was resolved already (`status` says how), was never a
    /// hold, or does not exist (`missing`).
    #[error("transaction {id} is {status}, not pending")]
    NotPending { id: String, status: String },
    /// A side of the account (its posted plus pending debits, or credits)
    /// would pass `i64::MAX`. Nothing is written.
    #[error("the amount would overflow the balances of {account_id}")]
    Overflow { account_id: String },
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
/// funding account must be covered by its available balance, and no side
/// of an account may pass `i64::MAX`; both are checked by the database in
/// the statement that applies the line (or, inside a group commit on
/// PostgreSQL, against the account's row as read in the batch, see
/// [`crate::balances`]), or nothing is applied (the caller's transaction
/// rolls back on the error). Answers the transaction id.
pub async fn record(tx: &mut Tx<'_>, entry: &Entry, phase: Phase) -> Result<String, LedgerError> {
    record_as(tx, new_transaction_id(), entry, phase).await
}

/// The balance bucket a line of an entry in `phase` moves.
pub(crate) fn bucket_of(phase: Phase, direction: Direction) -> Bucket {
    match (phase, direction) {
        (Phase::Pending, Direction::Debit) => Bucket::PendingDebits,
        (Phase::Pending, Direction::Credit) => Bucket::PendingCredits,
        (Phase::Posted, Direction::Debit) => Bucket::PostedDebits,
        (Phase::Posted, Direction::Credit) => Bucket::PostedCredits,
    }
}

/// A fresh ledger transaction id, for [`record_as`].
pub fn new_transaction_id() -> String {
    format!("ltx_{}", uuid::Uuid::now_v7().simple())
}

pub(crate) fn new_entry_id() -> String {
    format!("len_{}", uuid::Uuid::now_v7().simple())
}

/// [`record`] under an id the caller chose beforehand (to name it in
/// something written before the entry).
pub async fn record_as(
    tx: &mut Tx<'_>,
    transaction_id: String,
    entry: &Entry,
    phase: Phase,
) -> Result<String, LedgerError> {
    let (transaction, rows) = apply(tx, transaction_id, entry, phase).await?;
    // After the balances: a refused entry stops there having written
    // nothing more, and a system account made on first use exists before
    // its lines refer to it.
    store::insert_transaction(tx, &transaction).await?;
    store::insert_entries(tx, &rows).await?;
    Ok(transaction.id)
}

/// Applies the entry to the balances and answers the rows
/// [`record_as`] inserts.
async fn apply(
    tx: &mut Tx<'_>,
    transaction_id: String,
    entry: &Entry,
    phase: Phase,
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
        let bucket = bucket_of(phase, line.direction);
        // Only a debit can take a funding account below zero.
        let guard = line.direction == Direction::Debit;
        let (id, currency, amount) = (&line.account_id, &line.currency, line.amount_minor);
        let outcome = match store::add_line(tx, id, currency, bucket, amount, guard).await? {
            // A system account is made on first use.
            LineOutcome::MissingAccount if open_system_account(tx, id).await? => {
                store::add_line(tx, id, currency, bucket, amount, guard).await?
            }
            outcome => outcome,
        };
        if outcome != LineOutcome::Applied {
            return Err(refusal(tx, line, outcome).await);
        }
        learn_system_account(tx, id);
    }
    let transaction = LedgerTransactionRow {
        id: transaction_id.clone(),
        status: status.to_owned(),
        merchant_id: entry.merchant_id.clone(),
        settlement_key: entry.settlement_key.clone(),
        description: entry.description.clone(),
        created_at: now,
        updated_at: now,
        pending_id: None,
    };
    let rows: Vec<LedgerEntryRow> = entry
        .lines
        .iter()
        .map(|line| LedgerEntryRow {
            id: new_entry_id(),
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

/// Why [`store::add_line`] refused a line.
async fn refusal(tx: &mut Tx<'_>, line: &Line, outcome: LineOutcome) -> LedgerError {
    let account_id = line.account_id.clone();
    match outcome {
        LineOutcome::InsufficientFunds => LedgerError::InsufficientFunds { account_id },
        LineOutcome::Overflow => LedgerError::Overflow { account_id },
        LineOutcome::OtherCurrency => match store::account_facts(tx, &account_id).await {
            Ok(Some(facts)) => LedgerError::CurrencyMismatch {
                account_id,
                account_currency: facts.currency.clone(),
                line_currency: line.currency.clone(),
            },
            Ok(None) => LedgerError::UnknownAccount(account_id),
            Err(error) => error.into(),
        },
        LineOutcome::MissingAccount | LineOutcome::Applied => {
            LedgerError::UnknownAccount(account_id)
        }
    }
}

/// Posts a hold: a new transaction, `posted`, whose lines copy the hold's
/// and move its amounts from pending to posted. The hold itself is never
/// edited; it stays `pending`, named by its posting's `pending_id`. A hold
/// is resolved once: another posting or void of it is
/// [`LedgerError::NotPending`] (inside a pipelined group commit, a conflict
/// that fails the unit when it ends). Answers the posting's id.
pub async fn post(tx: &mut Tx<'_>, hold_id: &str) -> Result<String, LedgerError> {
    resolve(tx, hold_id, new_transaction_id(), true).await
}

/// [`post`] under an id the caller chose beforehand.
pub async fn post_as(tx: &mut Tx<'_>, hold_id: &str, id: String) -> Result<String, LedgerError> {
    resolve(tx, hold_id, id, true).await
}

/// Voids a hold: a new transaction, `voided`, whose lines copy the hold's
/// and record what was released from pending. Otherwise as [`post`].
/// Answers the void's id.
pub async fn void(tx: &mut Tx<'_>, hold_id: &str) -> Result<String, LedgerError> {
    resolve(tx, hold_id, new_transaction_id(), false).await
}

/// [`void`] under an id the caller chose beforehand.
pub async fn void_as(tx: &mut Tx<'_>, hold_id: &str, id: String) -> Result<String, LedgerError> {
    resolve(tx, hold_id, id, false).await
}

async fn resolve(
    tx: &mut Tx<'_>,
    hold_id: &str,
    id: String,
    posting: bool,
) -> Result<String, LedgerError> {
    let lines = hold_lines(tx, hold_id).await?;
    if lines.is_empty() {
        return Err(LedgerError::NotPending {
            id: hold_id.to_owned(),
            status: "missing".to_owned(),
        });
    }
    let now = utc_now();
    let rows: Vec<LedgerEntryRow> = lines
        .iter()
        .map(|line| LedgerEntryRow {
            id: new_entry_id(),
            transaction_id: id.clone(),
            created_at: now,
            ..line.clone()
        })
        .collect();
    let resolution = store::Resolution {
        id: &id,
        status: if posting { "posted" } else { "voided" },
        note: if posting { " posted" } else { " voided" },
        created_at: now,
        hold_id,
        lines: &rows,
    };
    if tx.pipelined_writes() {
        store::send_resolution(tx, &resolution).await?;
    } else if !store::insert_resolution(tx, &resolution).await? {
        let status = store::hold_outcome(tx, hold_id).await?;
        return Err(LedgerError::NotPending {
            id: hold_id.to_owned(),
            status: status.unwrap_or_else(|| "missing".to_owned()),
        });
    }
    let mut lines: Vec<&LedgerEntryRow> = lines.iter().collect();
    lines.sort_by(|a, b| a.account_id.cmp(&b.account_id));
    for line in lines {
        let debit = line.direction == Direction::Debit.as_str();
        store::resolve_line(tx, &line.account_id, debit, line.amount_minor, posting).await?;
    }
    Ok(id)
}

/// A hold's lines: remembered by the group committer, read otherwise.
async fn hold_lines(tx: &mut Tx<'_>, hold_id: &str) -> Result<Lines, LedgerError> {
    if let Some(lines) = tx.known().and_then(|known| known.lines(hold_id)) {
        return Ok(lines);
    }
    let rows: Lines = Arc::from(store::transaction_entries(tx, hold_id).await?);
    if let Some(known) = tx.known() {
        known.learn_lines(hold_id, rows.clone());
    }
    Ok(rows)
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

//! How money is posted: balanced journal entries over accounts of one
//! currency each, written only as parts of plans (see [`crate::plan`]), so
//! that every movement commits with the state change that causes it and is
//! judged by the one funding rule, in `plan::judge`.
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

use crate::known::AccountFacts;
use crate::models::LedgerAccountRow;
use crate::money::{Currency, MinorUnits};
use crate::plan::{LedgerWrite, Plan, PlanError};
use crate::store::ledger::{self as store, Bucket};
use crate::types::utc_now;
use crate::vocabulary::{AccountId, AccountKind, MerchantId, SettlementKey};
use crate::{Db, DieselError, Refusal, StoreError, Tx};

mod check;

pub use check::{check, CheckReport, CurrencyTotals};

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

    pub fn kind(self) -> AccountKind {
        match self {
            SystemAccount::CardAcquirer => AccountKind::CardAcquirer,
            SystemAccount::CardPush => AccountKind::CardPush,
            SystemAccount::Custodian => AccountKind::Custodian,
            SystemAccount::TransferClearing => AccountKind::TransferClearing,
            SystemAccount::PlatformFees => AccountKind::PlatformFees,
            SystemAccount::NetworkFees => AccountKind::NetworkFees,
            SystemAccount::Conversion => AccountKind::Conversion,
            SystemAccount::CardNetwork => AccountKind::CardNetwork,
        }
    }

    /// Deterministic, so every node names the same row. The row is made on
    /// first use, by [`record`], so the hot path writes nothing to find it.
    pub fn account_id(self, currency: &str) -> AccountId {
        AccountId::new(format!(
            "sys_{}_{}",
            self.kind(),
            currency.to_ascii_lowercase()
        ))
    }

    /// The account and currency an id of [`SystemAccount::account_id`] names.
    pub fn parse_id(id: &str) -> Option<(SystemAccount, String)> {
        let (kind, currency) = id.strip_prefix("sys_")?.rsplit_once('_')?;
        let account = SystemAccount::ALL
            .into_iter()
            .find(|account| account.kind().as_str() == kind)?;
        let currency = Currency::find(&currency.to_ascii_uppercase())?;
        Some((account, currency.code.to_owned()))
    }
}

crate::text_enum! {
    /// Which side of its account a line is on.
    pub enum Direction {
        Debit = "debit",
        Credit = "credit",
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
    pub account_id: AccountId,
    pub direction: Direction,
    pub amount_minor: MinorUnits,
    pub currency: String,
}

/// A journal entry to record.
#[derive(Clone, Debug)]
pub struct Entry {
    pub merchant_id: Option<MerchantId>,
    pub settlement_key: Option<SettlementKey>,
    pub description: String,
    pub lines: Vec<Line>,
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// A programming error: the entry would not balance. Nothing is written.
    #[error("unbalanced entry: {0}")]
    Unbalanced(String),
    #[error("insufficient available funds on {account_id}")]
    InsufficientFunds { account_id: AccountId },
    #[error("no ledger account {0}")]
    UnknownAccount(AccountId),
    #[error("account {account_id} holds {account_currency}, not {line_currency}")]
    CurrencyMismatch {
        account_id: AccountId,
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
    Overflow { account_id: AccountId },
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
        if !line.amount_minor.is_positive() {
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
pub async fn open_funding_accounts(
    tx: &mut Tx<'_>,
    merchant_id: &MerchantId,
) -> Result<(), LedgerError> {
    let now = utc_now();
    for currency in Currency::fiat() {
        let row = LedgerAccountRow {
            id: AccountId::generate(),
            merchant_id: Some(merchant_id.to_owned()),
            kind: AccountKind::Funding,
            currency: currency.code.to_owned(),
            posted_debits_minor: MinorUnits::ZERO,
            posted_credits_minor: MinorUnits::ZERO,
            pending_debits_minor: MinorUnits::ZERO,
            pending_credits_minor: MinorUnits::ZERO,
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
pub async fn ensure_system_account(
    tx: &mut Tx<'_>,
    account_id: &AccountId,
) -> Result<bool, LedgerError> {
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
    account_id: &AccountId,
) -> Result<Option<Arc<AccountFacts>>, LedgerError> {
    Ok(store::account_facts(tx, account_id).await?)
}

/// Makes the system account `account_id` names, if it names one.
async fn open_system_account(tx: &mut Tx<'_>, account_id: &AccountId) -> Result<bool, LedgerError> {
    let Some((account, currency)) = SystemAccount::parse_id(account_id.as_str()) else {
        return Ok(false);
    };
    let now = utc_now();
    let row = LedgerAccountRow {
        id: account_id.clone(),
        merchant_id: None,
        kind: account.kind(),
        currency,
        posted_debits_minor: MinorUnits::ZERO,
        posted_credits_minor: MinorUnits::ZERO,
        pending_debits_minor: MinorUnits::ZERO,
        pending_credits_minor: MinorUnits::ZERO,
        created_at: now,
        updated_at: now,
    };
    // Two writers may make it at once: the second does nothing.
    store::insert_account_if_absent(tx, &row).await?;
    Ok(true)
}

/// Records one balanced entry alone, as a plan of its own (see
/// [`crate::plan`]): every movement of money takes that one path, where a
/// debit of a funding account must be covered by its available balance and
/// no side of an account may pass `i64::MAX`. For an entry that commits with
/// a state change, put it in that change's plan instead. Answers the
/// transaction id.
pub async fn record(db: &Db, entry: Entry, phase: Phase) -> Result<String, LedgerError> {
    let id = new_transaction_id();
    let write = LedgerWrite::Record {
        id: id.clone(),
        entry,
        phase,
    };
    alone(db, write).await.map(|()| id)
}

/// Posts a hold alone: a new transaction, `posted`, whose lines copy the
/// hold's and move its amounts from pending to posted. The hold itself is
/// never edited; it stays `pending`, named by its posting's `pending_id`.
/// A hold is resolved once: another posting or void of it is
/// [`LedgerError::NotPending`]. Answers the posting's id.
pub async fn post(db: &Db, hold_id: &str) -> Result<String, LedgerError> {
    let id = new_transaction_id();
    let write = LedgerWrite::Post {
        hold_id: hold_id.to_owned(),
        id: id.clone(),
    };
    alone(db, write).await.map(|()| id)
}

/// Voids a hold alone: a new transaction, `voided`, whose lines copy the
/// hold's and record what was released from pending. Otherwise as
/// [`post`]. Answers the void's id.
pub async fn void(db: &Db, hold_id: &str) -> Result<String, LedgerError> {
    let id = new_transaction_id();
    let write = LedgerWrite::Void {
        hold_id: hold_id.to_owned(),
        id: id.clone(),
    };
    alone(db, write).await.map(|()| id)
}

async fn alone(db: &Db, write: LedgerWrite) -> Result<(), LedgerError> {
    let plan = Plan {
        ledger: vec![write],
        ..Plan::default()
    };
    match db.commit(plan).await {
        Ok(_) => Ok(()),
        Err(PlanError::Ledger(refused)) => Err(refused),
        Err(PlanError::Store(error)) => Err(LedgerError::Store(error)),
        Err(other) => Err(LedgerError::Store(StoreError::Unavailable(
            other.to_string(),
        ))),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn line(account: &str, direction: Direction, amount_minor: i64, currency: &str) -> Line {
        Line {
            account_id: AccountId::new(account),
            direction,
            amount_minor: MinorUnits::new(amount_minor),
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
            AccountId::new("sys_card_acquirer_usd")
        );
        assert_eq!(
            SystemAccount::Custodian.account_id("EUR"),
            AccountId::new("sys_custodian_eur")
        );
    }

    #[test]
    fn every_system_account_id_reads_back() {
        for account in SystemAccount::ALL {
            for currency in ["USD", "JPY", "USDT", "USDC"] {
                let id = account.account_id(currency);
                assert_eq!(
                    SystemAccount::parse_id(id.as_str()),
                    Some((account, currency.to_owned())),
                    "{id}"
                );
            }
        }
        assert_eq!(SystemAccount::parse_id("sys_transfer_clearing_xyz"), None);
    }
}

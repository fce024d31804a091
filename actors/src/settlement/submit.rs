//! Creating a settlement: the intent row, its ledger hold, its audit record
//! and the Idempotency-Key's recorded answer in one transaction, before any
//! provider hears of it (decisions §4, §5).

use serde_json::json;
use tern_schema::audit::{self, AuditActor, AuditRecord};
use tern_schema::idempotency::{self, Claim};
use tern_schema::ledger::{
    self, Direction, Entry, LedgerError, Line, Phase, SystemAccount, FUNDING,
};
use tern_schema::models::{IdempotencyRow, SettlementIntent, SettlementRow};
use tern_schema::store::settlements;
use tern_schema::types::utc_now;
use tern_schema::{Db, DieselError, Refusal, Rollback, StoreError, Tx};

use super::machine::Method;
use crate::runtime::Versioned;

/// The idempotency scope of settlement creation.
pub const IDEMPOTENCY_SCOPE: &str = "settlements";

/// A validated request to create a settlement: the intent as it will be
/// stored, its method as the machine knows it, and who asked.
#[derive(Clone, Debug)]
pub struct NewSettlement {
    pub intent: SettlementIntent,
    pub method: Method,
    pub actor: AuditActor,
}

#[derive(Debug)]
pub enum Submitted {
    Created {
        row: Box<SettlementRow>,
        body: String,
    },
    Replay {
        status: u16,
        body: String,
    },
    /// The first request with this key has not finished (409).
    InProgress,
    /// The key was used with a different request (422).
    Mismatch,
    /// The key is a transfer's leg: a merchant's request never takes it (409).
    LegKey,
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// `source` is not a funding account of this merchant in this currency.
    #[error("{0}")]
    Source(String),
    #[error("the amount exceeds the available balance of the source account")]
    InsufficientFunds,
    /// The amount would take a balance past the int64 limit (decisions
    /// §2): on the source, or on the counterparty's account.
    #[error("the amount would overflow a ledger balance")]
    Overflow,
    /// The Idempotency-Key was used before; its record says how to answer.
    #[error("the idempotency key is taken")]
    KeyTaken,
    #[error(transparent)]
    Store(StoreError),
}

/// A pipelined write's refusal reaches the writer as a store error when
/// its unit ends; it is the same answer as one made at the call.
impl From<StoreError> for SubmitError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Refused(Refusal::KeyTaken) => SubmitError::KeyTaken,
            StoreError::Refused(Refusal::InsufficientFunds { .. }) => {
                SubmitError::InsufficientFunds
            }
            other => SubmitError::Store(other),
        }
    }
}

impl From<DieselError> for SubmitError {
    fn from(error: DieselError) -> Self {
        SubmitError::Store(error.into())
    }
}

impl From<LedgerError> for SubmitError {
    fn from(error: LedgerError) -> Self {
        match error {
            LedgerError::InsufficientFunds { .. } => SubmitError::InsufficientFunds,
            LedgerError::Overflow { .. } => SubmitError::Overflow,
            LedgerError::Store(error) => SubmitError::from(error),
            other => SubmitError::Store(StoreError::Unavailable(other.to_string())),
        }
    }
}

/// The counterparty of a method's money movement.
pub fn counterparty(method: Method) -> SystemAccount {
    match method {
        Method::CardCharge => SystemAccount::CardAcquirer,
        Method::CardPush => SystemAccount::CardPush,
        Method::OnChain => SystemAccount::Custodian,
    }
}

/// Makes the intent durable, or answers what the key already answered.
/// `render` is the 201 body recorded for replays.
pub async fn submit(
    db: &Db,
    new: &NewSettlement,
    request_sha256: &str,
    render: impl Fn(&SettlementRow) -> String + Send + 'static,
) -> Result<Submitted, SubmitError> {
    let new = new.clone();
    let request_sha256 = request_sha256.to_owned();
    let digest = request_sha256.clone();
    let now = utc_now();
    let mut row = SettlementRow::pending(new.intent.clone(), now);
    row.version = Versioned::<()>::INITIAL;
    // Named before it is written, so that the 201 body recorded with the
    // key (written first) is the body of the row as it commits.
    row.funding_transaction_id = Some(ledger::new_transaction_id());
    let body = render(&row);
    let scope = (
        new.intent.merchant_id.clone(),
        new.intent.idempotency_key.clone(),
    );
    // Group-committed: the intent is durable when this answers Created.
    // On PostgreSQL the creation is one statement that claims the key (see
    // `settlements::insert_claimed`); elsewhere a taken key or a shortfall
    // rolls the unit back.
    let written = db
        .write_as(Rollback::Claim, move |tx| {
            Box::pin(async move {
                let intent = &new.intent;
                let key = (
                    intent.merchant_id.as_str(),
                    IDEMPOTENCY_SCOPE,
                    intent.idempotency_key.as_str(),
                );
                let answer = idempotency::answered(key, &request_sha256, 201, &body);
                check_source(tx, intent).await?;
                let row = if tx.pipelined_writes() {
                    record_claimed(tx, row, new.method, &new.actor, &answer).await?
                } else {
                    idempotency::insert_answered(tx, &answer).await?;
                    record_intent(tx, row, new.method, &new.actor).await?
                };
                Ok(Submitted::Created {
                    row: Box::new(row),
                    body,
                })
            })
        })
        .await;
    let key = (scope.0.as_str(), IDEMPOTENCY_SCOPE, scope.1.as_str());
    match written {
        // The unit wrote nothing and its batch has ended: the record read
        // now is committed (or gone, which answers 409 and a retry). A row
        // under the key without a record is a transfer's leg, which has
        // none; on SQLite its row, not a record, refuses the insert.
        Err(SubmitError::KeyTaken | SubmitError::Store(StoreError::UniqueViolation(_))) => {
            match earlier_use(db, key, &digest).await? {
                Some(earlier) => Ok(earlier),
                None if is_settlement(db, key).await? => Ok(Submitted::LegKey),
                None => Ok(Submitted::InProgress),
            }
        }
        // Judged before the key on PostgreSQL (the hold moves the balances
        // before the one statement that claims the key): a repeat of a
        // request that spent the funds, or the room, is still answered as
        // a repeat.
        Err(refused @ (SubmitError::InsufficientFunds | SubmitError::Overflow)) => {
            match earlier_use(db, key, &digest).await? {
                Some(earlier) => Ok(earlier),
                None => Err(refused),
            }
        }
        other => other,
    }
}

/// What the key's committed record answers this request, if it has one.
async fn earlier_use(
    db: &Db,
    key: (&str, &str, &str),
    digest: &str,
) -> Result<Option<Submitted>, SubmitError> {
    let mut pooled = db.get().await?;
    let mut tx = pooled.tx();
    Ok(
        match idempotency::recorded_use(&mut tx, key, digest).await? {
            Some(Claim::Replay { status, body }) => Some(Submitted::Replay { status, body }),
            Some(Claim::Mismatch) => Some(Submitted::Mismatch),
            Some(Claim::New | Claim::InProgress) => Some(Submitted::InProgress),
            None => None,
        },
    )
}

/// Whether a settlement holds the key (merchant, _, key).
async fn is_settlement(
    db: &Db,
    (merchant_id, _, key): (&str, &str, &str),
) -> Result<bool, SubmitError> {
    let mut pooled = db.get().await?;
    let mut tx = pooled.tx();
    Ok(settlements::find(&mut tx, merchant_id, key)
        .await?
        .is_some())
}

/// `source` must be a funding account of the merchant in the intent's
/// currency.
async fn check_source(tx: &mut Tx<'_>, intent: &SettlementIntent) -> Result<(), SubmitError> {
    match ledger::account_facts(tx, &intent.source).await? {
        Some(account)
            if account.kind == FUNDING
                && account.merchant_id.as_deref() == Some(intent.merchant_id.as_str()) =>
        {
            if account.currency != intent.currency {
                return Err(SubmitError::Source(format!(
                    "the source account holds {}, not {}",
                    account.currency, intent.currency
                )));
            }
            Ok(())
        }
        _ => Err(SubmitError::Source(
            "not a funding account of this merchant".into(),
        )),
    }
}

/// A transfer's leg: a settlement the transfer's actor creates inside its
/// own transition, so the leg exists exactly when the transfer says so.
/// No Idempotency-Key record: the transfer chose the key at its creation.
pub async fn insert_leg(
    tx: &mut Tx<'_>,
    intent: SettlementIntent,
    method: Method,
    transfer_id: &str,
) -> Result<SettlementRow, SubmitError> {
    // A charge leg's source is a system account no entry may have made yet.
    ledger::ensure_system_account(tx, &intent.source).await?;
    let mut row = SettlementRow::pending(intent, utc_now());
    row.version = Versioned::<()>::INITIAL;
    row.transfer_id = Some(transfer_id.to_owned());
    record_intent(tx, row, method, &AuditActor::System).await
}

/// [`record_intent`] as one claimed statement (PostgreSQL's group commit):
/// the hold moves the balances at once, and the row, the hold's rows and
/// the key's answer are inserted together, or not at all if the key is
/// taken.
async fn record_claimed(
    tx: &mut Tx<'_>,
    mut row: SettlementRow,
    method: Method,
    actor: &AuditActor,
    answer: &IdempotencyRow,
) -> Result<SettlementRow, SubmitError> {
    let (id, hold) = hold_of(&mut row, method);
    let (transaction, lines) = ledger::apply(tx, id, &hold, Phase::Pending).await?;
    let created = settlements::Created {
        hold: Some((&transaction, lines.as_slice())),
        answer,
    };
    settlements::insert_claimed(tx, &row, created).await?;
    audit::append(tx, created_record(&row, actor)).await?;
    Ok(row)
}

/// The hold a method's intent places on its source, under the transaction
/// id the row names (chosen now if not yet): card_push and on_chain hold
/// the amount (a pending debit the available balance must cover), and
/// card_charge reserves the credit it makes on success (a pending credit).
/// The reservation is what makes the credit sure to fit once the provider
/// has charged the card: a credit that would take a balance past the int64
/// limit is refused here, before anything is executed, and a posting only
/// moves what is reserved from pending to posted.
fn hold_of(row: &mut SettlementRow, method: Method) -> (String, Entry) {
    let system = counterparty(method).account_id(&row.currency);
    let (source_side, system_side) = match method.holds_funds() {
        true => (Direction::Debit, Direction::Credit),
        false => (Direction::Credit, Direction::Debit),
    };
    let what = if method.holds_funds() {
        "hold"
    } else {
        "credit reserved"
    };
    let hold = Entry {
        merchant_id: Some(row.merchant_id.clone()),
        settlement_key: Some(row.idempotency_key.clone()),
        description: format!("{} {what}", method.as_str()),
        lines: vec![
            Line {
                account_id: row.source.clone(),
                direction: source_side,
                amount_minor: row.amount_minor,
                currency: row.currency.clone(),
            },
            Line {
                account_id: system,
                direction: system_side,
                amount_minor: row.amount_minor,
                currency: row.currency.clone(),
            },
        ],
    };
    let id = row
        .funding_transaction_id
        .get_or_insert_with(ledger::new_transaction_id)
        .clone();
    (id, hold)
}

/// The audit record of a settlement's creation.
fn created_record(row: &SettlementRow, actor: &AuditActor) -> AuditRecord {
    AuditRecord {
        merchant_id: row.merchant_id.clone(),
        actor: actor.clone(),
        action: "settlement.created",
        resource_type: "settlement",
        resource_id: row.idempotency_key.clone(),
        request_id: row.request_id.clone(),
        data: json!({
            "method": row.method,
            "amount_minor": row.amount_minor,
            "currency": row.currency,
            "source": row.source,
            "funding_transaction_id": row.funding_transaction_id,
            "transfer_id": row.transfer_id,
        }),
    }
}

/// The intent's hold, its row and its audit record.
async fn record_intent(
    tx: &mut Tx<'_>,
    mut row: SettlementRow,
    method: Method,
    actor: &AuditActor,
) -> Result<SettlementRow, SubmitError> {
    let (id, hold) = hold_of(&mut row, method);
    row.funding_transaction_id = Some(ledger::record_as(tx, id, &hold, Phase::Pending).await?);
    settlements::insert(tx, &row).await?;
    audit::append(tx, created_record(&row, actor)).await?;
    Ok(row)
}

//! Creating a settlement: the intent row, its ledger hold, its audit record
//! and the Idempotency-Key's recorded answer in one transaction, before any
//! provider hears of it (decisions §4, §5).

use serde_json::json;
use tern_schema::audit::{AuditActor, AuditRecord};
use tern_schema::idempotency::{self, KeyUse};
use tern_schema::ledger::{self, Direction, Entry, LedgerError, Line, SystemAccount};
use tern_schema::models::{SettlementIntent, SettlementRow};
use tern_schema::plan::{FundingSource, Plan};
use tern_schema::store::settlements;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{AccountId, MerchantId, SettlementKey, TransferId};
use tern_schema::{Db, DieselError, PlanError, Refusal, StoreError};

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

impl From<PlanError> for SubmitError {
    fn from(error: PlanError) -> Self {
        match error {
            PlanError::Ledger(refused) => refused.into(),
            PlanError::Source(detail) => SubmitError::Source(detail),
            PlanError::Store(error) => error.into(),
            lost @ (PlanError::TimerLost { .. } | PlanError::Fenced { .. }) => {
                SubmitError::Store(StoreError::Unavailable(lost.to_string()))
            }
        }
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
    let now = utc_now();
    let mut row = SettlementRow::pending(new.intent.clone(), now);
    row.version = Versioned::<()>::INITIAL;
    // Named before it is written, so that the 201 body recorded with the
    // key (written first) is the body of the row as it commits.
    row.funding_transaction_id = Some(ledger::new_transaction_id());
    let body = render(&row);
    let key = (
        &new.intent.merchant_id,
        IDEMPOTENCY_SCOPE,
        new.intent.idempotency_key.as_str(),
    );
    let (row, mut plan) = creation_plan(row, new.method, &new.actor);
    plan.funding_source = Some(FundingSource {
        account_id: AccountId::new(new.intent.source.as_str()),
        merchant_id: new.intent.merchant_id.clone(),
        currency: new.intent.currency.clone(),
    });
    plan.answer = Some(idempotency::answered(key, request_sha256, 201, &body));
    // Group-committed: the intent is durable when this answers Created. A
    // taken key or a shortfall refuses this plan alone.
    let written = match db.commit(plan).await {
        Ok(_) => Ok(Submitted::Created {
            row: Box::new(row),
            body,
        }),
        Err(refused) => Err(SubmitError::from(refused)),
    };
    match written {
        // The plan wrote nothing and its batch has ended: the record read
        // now is committed (or gone, which answers 409 and a retry). A row
        // under the key without a record is a transfer's leg, which has
        // none.
        Err(SubmitError::KeyTaken | SubmitError::Store(StoreError::UniqueViolation(_))) => {
            match earlier_use(db, key, request_sha256).await? {
                Some(earlier) => Ok(earlier),
                None if is_settlement(db, key).await? => Ok(Submitted::LegKey),
                None => Ok(Submitted::InProgress),
            }
        }
        // A plan's funds are judged before its answer's key: a repeat of a
        // request that spent the funds, or the room, is still answered as
        // a repeat.
        Err(refused @ (SubmitError::InsufficientFunds | SubmitError::Overflow)) => {
            match earlier_use(db, key, request_sha256).await? {
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
    key: (&MerchantId, &str, &str),
    digest: &str,
) -> Result<Option<Submitted>, SubmitError> {
    let mut pooled = db.get().await?;
    let mut tx = pooled.tx();
    Ok(
        match idempotency::recorded_use(&mut tx, key, digest).await? {
            Some(KeyUse::Replay { status, body }) => Some(Submitted::Replay { status, body }),
            Some(KeyUse::Mismatch) => Some(Submitted::Mismatch),
            Some(KeyUse::InProgress) => Some(Submitted::InProgress),
            None => None,
        },
    )
}

/// Whether a settlement holds the key (merchant, _, key).
async fn is_settlement(
    db: &Db,
    (merchant_id, _, key): (&MerchantId, &str, &str),
) -> Result<bool, SubmitError> {
    let mut pooled = db.get().await?;
    let mut tx = pooled.tx();
    Ok(
        settlements::find(&mut tx, merchant_id, &SettlementKey::new(key))
            .await?
            .is_some(),
    )
}

/// A transfer's leg: a settlement the transfer's actor creates inside its
/// own transition, so the leg exists exactly when the transfer says so.
/// No Idempotency-Key record: the transfer chose the key at its creation.
pub fn leg_plan(
    intent: SettlementIntent,
    method: Method,
    transfer_id: &TransferId,
) -> (SettlementRow, Plan) {
    let mut row = SettlementRow::pending(intent, utc_now());
    row.version = Versioned::<()>::INITIAL;
    row.transfer_id = Some(transfer_id.clone());
    creation_plan(row, method, &AuditActor::System)
}

/// A settlement's creation as a plan: its row, the hold on its source and
/// its audit record. The row, as planned, names its hold (chosen now if
/// not yet).
fn creation_plan(
    mut row: SettlementRow,
    method: Method,
    actor: &AuditActor,
) -> (SettlementRow, Plan) {
    let (_, hold) = hold_of(&mut row, method);
    let plan = Plan {
        audit: vec![created_record(&row, actor)],
        new_settlements: vec![tern_schema::plan::NewSettlement {
            row: row.clone(),
            hold,
        }],
        ..Plan::default()
    };
    (row, plan)
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
                account_id: AccountId::new(row.source.as_str()),
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
        resource_id: row.idempotency_key.to_string(),
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

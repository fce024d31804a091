//! Creating a transfer: one plan with the transfer row (which binds its
//! quote), its audit record, its event and the Idempotency-Key's answer
//! (decisions §3, §4, §7). The legs are created by the transfer's actor
//! when it starts.

use chrono::NaiveDateTime;
use serde_json::json;
use tern_schema::audit::{AuditActor, AuditRecord};
use tern_schema::idempotency::{self, KeyUse};
use tern_schema::models::{QuoteRow, TransferRow};
use tern_schema::plan::Plan;
use tern_schema::store::quotes;
use tern_schema::vocabulary::{MerchantId, QuoteId, TransferId};
use tern_schema::{Db, DieselError, PlanError, Refusal, StoreError, Tx};

use super::legs::leg_key;
use super::machine::{Leg, LegStatus, Status};
use crate::ports::{Asset, Network};
use crate::runtime::{Registry, RuntimeError, Versioned};
use crate::transfer::TransferKind;
use crate::webhook::Outbox;

/// The idempotency scope of transfer creation.
pub const IDEMPOTENCY_SCOPE: &str = "transfers";
/// The only flow (decisions §1).
pub const FLOW: &str = "tern";

/// A validated request to create a transfer.
#[derive(Clone, Debug)]
pub struct NewTransfer {
    pub merchant_id: MerchantId,
    pub idempotency_key: String,
    pub quote_id: String,
    pub card_pm: String,
    pub wallet: String,
    pub network: Network,
    pub asset: Asset,
    pub request_id: String,
    pub actor: AuditActor,
}

#[derive(Debug)]
pub enum Created {
    Created {
        row: Box<TransferRow>,
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
}

/// Why nothing was created; the transaction rolled back and released the
/// key, so a corrected request may use the same key.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("no such quote")]
    QuoteNotFound,
    #[error("the quote expired at {expires_at}")]
    QuoteExpired { expires_at: NaiveDateTime },
    #[error("the quote is already bound to a transfer")]
    QuoteUsed,
    /// `network` or `asset` differ from the quote's (field, message).
    #[error("{0:?}")]
    QuoteMismatch(Vec<(&'static str, String)>),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The transfer cannot be made on this node now (it owns no slot).
    #[error(transparent)]
    Placement(#[from] RuntimeError),
}

impl From<DieselError> for CreateError {
    fn from(error: DieselError) -> Self {
        CreateError::Store(error.into())
    }
}

/// The quote's fields the request must agree with.
fn check_against_quote(new: &NewTransfer, quote: &QuoteRow) -> Result<(), CreateError> {
    let mut mismatches = Vec::new();
    if quote.receive_network != new.network {
        mismatches.push((
            "network",
            format!(
                "must match the quote's receive_network ({})",
                quote.receive_network
            ),
        ));
    }
    if quote.receive_asset != new.asset {
        mismatches.push((
            "asset",
            format!(
                "must match the quote's receive_asset ({})",
                quote.receive_asset
            ),
        ));
    }
    if mismatches.is_empty() {
        Ok(())
    } else {
        Err(CreateError::QuoteMismatch(mismatches))
    }
}

/// The transfer a request makes of its quote: the price is copied, the
/// leg keys derived now from its id (see [`super::legs`]) so that they
/// never change.
fn transfer_of(
    id: TransferId,
    new: &NewTransfer,
    quote: &QuoteRow,
    now: NaiveDateTime,
) -> TransferRow {
    TransferRow {
        leg1_key: leg_key(&id, Leg::One),
        leg2_key: leg_key(&id, Leg::Two),
        id,
        merchant_id: new.merchant_id.clone(),
        idempotency_key: new.idempotency_key.clone(),
        flow: FLOW.to_owned(),
        quote_id: quote.id.clone(),
        card_pm: new.card_pm.clone(),
        wallet: new.wallet.clone(),
        send_currency: quote.send_currency.clone(),
        send_amount_minor: quote.send_amount_minor,
        receive_asset: quote.receive_asset,
        receive_network: quote.receive_network,
        receive_amount_minor: quote.receive_amount_minor,
        rate: quote.rate.clone(),
        platform_fee_minor: quote.platform_fee_minor,
        network_fee_minor: quote.network_fee_minor,
        status: Status::Pending,
        leg1_status: LegStatus::NotStarted,
        leg1_client_secret: None,
        leg1_next_action_type: None,
        leg2_status: LegStatus::NotStarted,
        failure_reason: None,
        conversion_transaction_id: None,
        compensation_attempt: 0,
        next_attempt_at: None,
        alert: None,
        alert_acknowledged_at: None,
        request_id: new.request_id.clone(),
        version: Versioned::<()>::INITIAL,
        created_at: now,
        updated_at: now,
    }
}

/// Makes the transfer durable, or answers what the key already answered.
/// `render` is the 201 body recorded for replays. The transfer's id is
/// minted in a slot this node owns (see [`Registry::mint`]), so it is
/// written and run here.
pub async fn create(
    transfers: &Registry<TransferKind>,
    new: &NewTransfer,
    request_sha256: &str,
    now: NaiveDateTime,
    outbox: &Outbox,
    render: impl Fn(&TransferRow) -> String + Send + 'static,
) -> Result<Created, CreateError> {
    let id = TransferId::new(transfers.mint(|| TransferId::generate().into_inner())?);
    let db = &transfers.local_db(id.as_str())?;
    let key = (
        &new.merchant_id,
        IDEMPOTENCY_SCOPE,
        new.idempotency_key.as_str(),
    );
    // A repeat is answered before its quote is judged: the quote may have
    // expired, or be bound by this very request, since. Both reads on one
    // pooled connection.
    let quote = {
        let mut pooled = db.get().await?;
        let mut tx = pooled.tx();
        if let Some(earlier) = recorded(&mut tx, key, request_sha256).await? {
            return Ok(earlier);
        }
        // Text that cannot be a quote id is no quote, without a lookup.
        match QuoteId::from_text(&new.quote_id) {
            Some(quote_id) => {
                quotes::find_for_merchant(&mut tx, &new.merchant_id, &quote_id).await?
            }
            None => None,
        }
    }
    .ok_or(CreateError::QuoteNotFound)?;
    if quote.is_expired_at(now) {
        return Err(CreateError::QuoteExpired {
            expires_at: quote.expires_at,
        });
    }
    check_against_quote(new, &quote)?;
    let row = transfer_of(id, new, &quote, now);
    let body = render(&row);
    let plan = Plan {
        new_transfers: vec![row.clone()],
        audit: vec![created_record(&row, &new.actor)],
        events: outbox.events(&row, &[Status::Pending]),
        answer: Some(idempotency::answered(key, request_sha256, 201, &body)),
        ..Plan::default()
    };
    // Group-committed: the transfer is durable when this answers Created.
    // A key or a quote taken meanwhile (on another node, or by a request
    // in the same batch) refuses this plan alone.
    match db.commit(plan).await {
        Ok(written) => {
            if written.events_wait {
                outbox.wake(&new.merchant_id);
            }
            Ok(Created::Created {
                row: Box::new(row),
                body,
            })
        }
        Err(PlanError::Store(StoreError::Refused(Refusal::KeyTaken))) => {
            Ok(earlier_use(db, key, request_sha256)
                .await?
                .unwrap_or(Created::InProgress))
        }
        Err(PlanError::Store(StoreError::UniqueViolation(_))) => Err(CreateError::QuoteUsed),
        Err(PlanError::Store(error)) => Err(error.into()),
        Err(other) => Err(CreateError::Store(StoreError::Unavailable(
            other.to_string(),
        ))),
    }
}

/// What the key's committed record answers this request, if it has one.
async fn earlier_use(
    db: &Db,
    key: (&MerchantId, &str, &str),
    digest: &str,
) -> Result<Option<Created>, CreateError> {
    let mut pooled = db.get().await?;
    let mut tx = pooled.tx();
    recorded(&mut tx, key, digest).await
}

async fn recorded(
    tx: &mut Tx<'_>,
    key: (&MerchantId, &str, &str),
    digest: &str,
) -> Result<Option<Created>, CreateError> {
    Ok(match idempotency::recorded_use(tx, key, digest).await? {
        Some(KeyUse::Replay { status, body }) => Some(Created::Replay { status, body }),
        Some(KeyUse::Mismatch) => Some(Created::Mismatch),
        Some(KeyUse::InProgress) => Some(Created::InProgress),
        None => None,
    })
}

/// The audit record of a transfer's creation.
fn created_record(row: &TransferRow, actor: &AuditActor) -> AuditRecord {
    AuditRecord {
        merchant_id: row.merchant_id.clone(),
        actor: actor.clone(),
        action: "transfer.created",
        resource_type: "transfer",
        resource_id: row.id.to_string(),
        request_id: row.request_id.clone(),
        data: json!({
            "quote_id": row.quote_id,
            "send_currency": row.send_currency,
            "send_amount_minor": row.send_amount_minor,
            "receive_asset": row.receive_asset,
            "receive_network": row.receive_network,
            "receive_amount_minor": row.receive_amount_minor,
            "leg1_key": row.leg1_key,
            "leg2_key": row.leg2_key,
        }),
    }
}

//! Creating a transfer: the Idempotency-Key taken, the quote's binding,
//! the transfer row and its audit record in one transaction (decisions §3,
//! §4, §7). The legs are created by the transfer's actor when it starts.

use chrono::NaiveDateTime;
use serde_json::json;
use tern_schema::audit::{self, AuditActor, AuditRecord};
use tern_schema::idempotency::{self, KeyUse};
use tern_schema::models::{QuoteRow, TransferRow};
use tern_schema::store::{quotes, transfers, webhooks};
use tern_schema::StoreError;
use tern_schema::{Db, DieselError};

use super::legs::leg_key;
use super::machine::{Leg, LegStatus, Status};
use super::record::new_id;
use crate::ports::{Asset, Network};
use crate::runtime::Versioned;
use crate::webhook::Outbox;

/// The idempotency scope of transfer creation.
pub const IDEMPOTENCY_SCOPE: &str = "transfers";
/// The only flow (decisions §1).
pub const FLOW: &str = "tern";

/// A validated request to create a transfer.
#[derive(Clone, Debug)]
pub struct NewTransfer {
    pub merchant_id: String,
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
}

impl From<DieselError> for CreateError {
    fn from(error: DieselError) -> Self {
        CreateError::Store(error.into())
    }
}

/// The quote's fields the request must agree with.
fn check_against_quote(new: &NewTransfer, quote: &QuoteRow) -> Result<(), CreateError> {
    let mut mismatches = Vec::new();
    if quote.receive_network != new.network.as_str() {
        mismatches.push((
            "network",
            format!(
                "must match the quote's receive_network ({})",
                quote.receive_network
            ),
        ));
    }
    if quote.receive_asset != new.asset.as_str() {
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
fn transfer_of(new: &NewTransfer, quote: &QuoteRow, now: NaiveDateTime) -> TransferRow {
    let id = new_id();
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
        receive_asset: quote.receive_asset.clone(),
        receive_network: quote.receive_network.clone(),
        receive_amount_minor: quote.receive_amount_minor,
        rate: quote.rate.clone(),
        platform_fee_minor: quote.platform_fee_minor,
        network_fee_minor: quote.network_fee_minor,
        status: Status::Pending.as_str().to_owned(),
        leg1_status: LegStatus::NotStarted.as_str().to_owned(),
        leg1_client_secret: None,
        leg1_next_action_type: None,
        leg2_status: LegStatus::NotStarted.as_str().to_owned(),
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
/// `render` is the 201 body recorded for replays.
pub async fn create(
    db: &Db,
    new: &NewTransfer,
    request_sha256: &str,
    now: NaiveDateTime,
    outbox: &Outbox,
    render: impl Fn(&TransferRow) -> String + Send + 'static,
) -> Result<Created, CreateError> {
    let new = new.clone();
    let merchant_id = new.merchant_id.clone();
    let events = outbox.clone();
    let request_sha256 = request_sha256.to_owned();
    // Group-committed: the transfer is durable when this answers Created.
    let (created, deliver) = db
        .write(move |tx| {
            Box::pin(async move {
                let used = idempotency::use_key(
                    tx,
                    &new.merchant_id,
                    IDEMPOTENCY_SCOPE,
                    &new.idempotency_key,
                    &request_sha256,
                )
                .await?;
                match used {
                    KeyUse::New => {}
                    KeyUse::Replay { status, body } => {
                        return Ok((Created::Replay { status, body }, false))
                    }
                    KeyUse::InProgress => return Ok((Created::InProgress, false)),
                    KeyUse::Mismatch => return Ok((Created::Mismatch, false)),
                }
                let quote = quotes::find_for_merchant(tx, &new.merchant_id, &new.quote_id)
                    .await?
                    .ok_or(CreateError::QuoteNotFound)?;
                if quote.is_expired_at(now) {
                    return Err(CreateError::QuoteExpired {
                        expires_at: quote.expires_at,
                    });
                }
                check_against_quote(&new, &quote)?;
                if transfers::quote_bound(tx, &quote.id).await? {
                    return Err(CreateError::QuoteUsed);
                }
                let row = transfer_of(&new, &quote, now);
                match transfers::insert(tx, &row).await {
                    Ok(()) => {}
                    // Bound by a transfer committed since the check above (on
                    // another node): the unique constraint is the last word.
                    Err(StoreError::UniqueViolation(_)) => return Err(CreateError::QuoteUsed),
                    Err(error) => return Err(error.into()),
                }
                let created = AuditRecord {
                    merchant_id: row.merchant_id.clone(),
                    actor: new.actor.clone(),
                    action: "transfer.created",
                    resource_type: "transfer",
                    resource_id: row.id.clone(),
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
                };
                audit::append(tx, created).await?;
                let deliver =
                    webhooks::insert_events(tx, events.events(&row, &[Status::Pending])).await?;
                let body = render(&row);
                idempotency::complete(
                    tx,
                    &new.merchant_id,
                    IDEMPOTENCY_SCOPE,
                    &new.idempotency_key,
                    201,
                    &body,
                )
                .await?;
                let created = Created::Created {
                    row: Box::new(row),
                    body,
                };
                Ok((created, deliver))
            })
        })
        .await?;
    if deliver {
        outbox.wake(&merchant_id);
    }
    Ok(created)
}

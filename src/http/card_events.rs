//! Card events of the card provider's webhook (decisions §10, §15), after
//! its signature checked out: authorization requests are decided by the
//! card's actor and answered in the response; clearings, reversals and
//! refunds move the card's ledger entries; wallet token updates move its
//! wallet status.
//! The card's actor deduplicates by the provider's event id.

use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};
use tern_actors::card::machine::Channel;
use tern_actors::card::{
    Answer, AuthorizationRequest, CardFailure, Recorded, RefundRequest, Reversal,
};
use tern_actors::runtime::RuntimeError;
use tern_schema::money::MinorUnits;
use tern_schema::vocabulary::{CardId, WalletTokenId};
use utoipa::ToSchema;

use crate::http::cards::cards;
use crate::http::problem::ApiError;
use crate::http::provider_webhooks::{ProviderEvent, Received, EVENT_FIELD_LENGTH_MAX};
use crate::state::AppState;

/// Longest merchant name, MCC or country kept.
pub const DESCRIPTOR_CHARS_MAX: usize = 128;

/// The answer to an `authorization.request`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuthorizationDecision {
    pub approved: bool,
    /// Why it was declined (`card_frozen`, `daily_limit_exceeded`,
    /// `insufficient_funds`, `merchant_inactive`, `user_disabled`, ...);
    /// `null` when approved.
    pub reason: Option<String>,
    pub authorization_id: String,
    /// The card transaction that records the decision; absent for an
    /// unknown card and for a reused authorization id with other data.
    pub transaction_id: Option<String>,
    /// The event was decided before; this is that decision again.
    pub duplicate: bool,
}

#[derive(Debug, Deserialize)]
struct AuthorizationData {
    card_id: CardId,
    amount_minor: MinorUnits,
    currency: String,
    authorization_id: Option<String>,
    #[serde(default)]
    merchant: Option<String>,
    #[serde(default)]
    mcc: Option<String>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    country: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ClearingData {
    card_id: CardId,
    authorization_id: String,
    amount_minor: Option<MinorUnits>,
}

/// `amount_minor` absent releases the rest of the hold (decisions §10).
#[derive(Debug, Deserialize)]
struct ReversalData {
    card_id: CardId,
    authorization_id: String,
    amount_minor: Option<MinorUnits>,
}

#[derive(Debug, Deserialize)]
struct RefundData {
    card_id: CardId,
    amount_minor: MinorUnits,
    currency: String,
    authorization_id: Option<String>,
    #[serde(default)]
    merchant: Option<String>,
    #[serde(default)]
    mcc: Option<String>,
}

/// A `wallet_token.updated` Tern can act on.
#[derive(Debug, Deserialize)]
pub struct WalletUpdate {
    card_id: CardId,
    token_id: String,
    status: String,
}

fn data<T: for<'de> Deserialize<'de>>(event: &ProviderEvent) -> Result<T, ApiError> {
    serde_json::from_value(event.data.clone()).map_err(|error| {
        ApiError::BadRequest(format!(
            "{} data is not understood: {error}",
            event.event_type
        ))
    })
}

fn bounded(field: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() || value.len() > EVENT_FIELD_LENGTH_MAX {
        return Err(ApiError::BadRequest(format!(
            "{field} must be 1 to {EVENT_FIELD_LENGTH_MAX} characters"
        )));
    }
    Ok(())
}

/// A clearing, reversal or refund names money that moves: a positive
/// amount. Zero or less is refused before the card's actor sees it, so
/// nothing is recorded and the provider learns its event is wrong instead of
/// a silent 200 (a zero reversal is refused too: it releases nothing, and an
/// absent amount already says "the rest").
fn positive(amount_minor: MinorUnits) -> Result<(), ApiError> {
    if !amount_minor.is_positive() {
        return Err(ApiError::BadRequest(format!(
            "amount_minor must be a positive number of minor units, not {amount_minor}"
        )));
    }
    Ok(())
}

fn descriptor(value: Option<String>) -> String {
    value
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(DESCRIPTOR_CHARS_MAX)
        .collect()
}

pub async fn authorize(state: &AppState, event: ProviderEvent) -> Result<HttpResponse, ApiError> {
    let data: AuthorizationData = data(&event)?;
    bounded("card_id", data.card_id.as_str())?;
    let authorization_id = data.authorization_id.unwrap_or_else(|| event.id.clone());
    bounded("authorization_id", &authorization_id)?;
    let channel = match data.channel.as_deref() {
        None => Channel::Pos,
        Some(channel) => Channel::parse(channel)
            .ok_or_else(|| ApiError::BadRequest("channel must be online, pos or atm".into()))?,
    };
    let request = AuthorizationRequest {
        event_id: event.id,
        authorization_id: authorization_id.clone(),
        amount_minor: data.amount_minor,
        currency: descriptor(Some(data.currency)),
        merchant: descriptor(data.merchant),
        mcc: descriptor(data.mcc),
        channel,
        country: descriptor(data.country).to_ascii_uppercase(),
    };
    let decided = cards(state)?.authorize(&data.card_id, request).await;
    let decision = match decided {
        Ok(Ok(decision)) => AuthorizationDecision {
            approved: decision.approved,
            reason: decision.reason.map(|reason| reason.as_str().to_owned()),
            authorization_id,
            transaction_id: decision.transaction_id,
            duplicate: decision.duplicate,
        },
        // No such card: nothing to record, and nothing to approve.
        Err(RuntimeError::NotFound { .. }) | Ok(Err(CardFailure::NotFound)) => {
            AuthorizationDecision {
                approved: false,
                reason: Some("card_not_found".into()),
                authorization_id,
                transaction_id: None,
                duplicate: false,
            }
        }
        Ok(Err(failure)) => return Err(failure.into()),
        Err(error) => return Err(error.into()),
    };
    Ok(HttpResponse::Ok().json(decision))
}

fn received(answer: Answer<Recorded>) -> Result<HttpResponse, ApiError> {
    let duplicate = match answer {
        Ok(Ok(Recorded { duplicate, .. })) => duplicate,
        Err(RuntimeError::NotFound { .. }) | Ok(Err(CardFailure::NotFound)) => {
            tracing::warn!("card event for an unknown card ignored");
            false
        }
        Ok(Err(failure)) => return Err(failure.into()),
        Err(error) => return Err(error.into()),
    };
    Ok(HttpResponse::Ok().json(Received {
        received: true,
        duplicate,
    }))
}

pub async fn clear(state: &AppState, event: ProviderEvent) -> Result<HttpResponse, ApiError> {
    let data: ClearingData = data(&event)?;
    bounded("card_id", data.card_id.as_str())?;
    bounded("authorization_id", &data.authorization_id)?;
    data.amount_minor.map(positive).transpose()?;
    let answer = cards(state)?
        .clear(
            &data.card_id,
            event.id,
            data.authorization_id,
            data.amount_minor,
        )
        .await;
    received(answer)
}

pub async fn reverse(state: &AppState, event: ProviderEvent) -> Result<HttpResponse, ApiError> {
    let data: ReversalData = data(&event)?;
    bounded("card_id", data.card_id.as_str())?;
    bounded("authorization_id", &data.authorization_id)?;
    data.amount_minor.map(positive).transpose()?;
    let reversal = Reversal {
        event_id: event.id,
        authorization_id: data.authorization_id,
        amount_minor: data.amount_minor,
    };
    received(cards(state)?.reverse(&data.card_id, reversal).await)
}

pub async fn refund(state: &AppState, event: ProviderEvent) -> Result<HttpResponse, ApiError> {
    let data: RefundData = data(&event)?;
    bounded("card_id", data.card_id.as_str())?;
    positive(data.amount_minor)?;
    if let Some(authorization_id) = &data.authorization_id {
        bounded("authorization_id", authorization_id)?;
    }
    let request = RefundRequest {
        event_id: event.id,
        authorization_id: data.authorization_id,
        amount_minor: data.amount_minor,
        currency: descriptor(Some(data.currency)),
        merchant: descriptor(data.merchant),
        mcc: descriptor(data.mcc),
    };
    received(cards(state)?.refund(&data.card_id, request).await)
}

/// The update an event carries, if it names a card and a token.
pub fn wallet_update(data: &serde_json::Value) -> Option<WalletUpdate> {
    let update: WalletUpdate = serde_json::from_value(data.clone()).ok()?;
    let fits = |text: &str| !text.is_empty() && text.len() <= EVENT_FIELD_LENGTH_MAX;
    (fits(update.card_id.as_str()) && fits(&update.token_id) && fits(&update.status))
        .then_some(update)
}

/// Tells the card's actor about a new wallet token status.
pub async fn follow_wallet(state: &AppState, update: WalletUpdate) -> Result<(), ApiError> {
    let answer = cards(state)?
        .wallet_updated(
            &update.card_id,
            WalletTokenId::new(update.token_id),
            update.status,
        )
        .await;
    match answer {
        Ok(Ok(_)) => Ok(()),
        Err(RuntimeError::NotFound { .. }) | Ok(Err(CardFailure::NotFound)) => {
            tracing::warn!(card_id = %update.card_id, "wallet update for an unknown card ignored");
            Ok(())
        }
        Ok(Err(failure)) => Err(failure.into()),
        Err(error) => Err(error.into()),
    }
}

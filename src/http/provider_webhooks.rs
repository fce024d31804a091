//! Webhooks from the card provider (`POST /v1/webhooks/<card_provider>`):
//! the signature is verified over the raw body before anything is stored,
//! and each provider event id is recorded once however often it arrives.
//! A new event about a charge or refund nudges its settlement's actor, which
//! asks the provider under its own key: the body only says whom to wake.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use tern_actors::adapters::{
    verify_signature, SANDBOX_SIGNATURE_HEADER, SIGNATURE_TOLERANCE_DEFAULT,
};
use tern_actors::runtime::RuntimeError;
use tern_actors::settlement::record::entity_id;
use tern_actors::settlement::SettlementCommand;
use tern_schema::models::InboundEventRow;
use tern_schema::store::inbound_events;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{MerchantId, SettlementKey};
use tern_schema::write_tx;
use tracing::Instrument;
use utoipa::ToSchema;

use crate::http::card_events;
use crate::http::extract::{parse_json, request_id};
use crate::http::problem::{ApiError, Problem};
use crate::state::AppState;

/// The configured card provider's name in the path (decisions §1).
pub const CARD_PROVIDER: &str = "sandbox";
/// Longest event id or type stored.
pub const EVENT_FIELD_LENGTH_MAX: usize = 255;
/// Event types that say a settlement's charge or refund moved at the provider.
pub const SETTLEMENT_EVENT_TYPES: [&str; 4] = [
    "payment.succeeded",
    "payment.failed",
    "refund.succeeded",
    "refund.failed",
];
pub const AUTHORIZATION_REQUEST: &str = "authorization.request";
pub const AUTHORIZATION_CLEARING: &str = "authorization.clearing";
pub const AUTHORIZATION_REVERSAL: &str = "authorization.reversal";
pub const REFUND_SUCCEEDED: &str = "refund.succeeded";
pub const WALLET_TOKEN_UPDATED: &str = "wallet_token.updated";
/// The suffix of a reversal's provider key (see `record::reversal_key`).
const REVERSAL_KEY_SUFFIX: &str = "_reversal";

/// A provider event. Providers add fields over time, so unknown ones are kept, not refused.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ProviderEvent {
    pub id: String,
    #[serde(rename = "type")]
    #[schema(example = "payment.succeeded")]
    pub event_type: String,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Received {
    pub received: bool,
    /// The event id was delivered before; nothing new was recorded.
    pub duplicate: bool,
}

/// Receive a card-provider webhook, verified by its signature header.
#[utoipa::path(post, path = "/v1/webhooks/{provider}", tag = "webhooks", request_body = ProviderEvent,
    params(("provider" = String, Path, description = "The configured card provider: `sandbox`")),
    security(("provider_signature" = [])),
    responses(
        (status = 200, description = "Recorded (or a duplicate). An `authorization.request` is answered with an AuthorizationDecision instead: `{approved, reason, authorization_id, transaction_id, duplicate}`", body = Received),
        (status = 400, description = "Missing, malformed, stale or wrong signature, a body that is not an event, or a clearing, reversal or refund whose amount_minor is zero or negative; nothing recorded", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such provider", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A card refund the ledger cannot credit without a balance passing int64 (errors.amount_minor); nothing recorded, and re-sending it cannot succeed", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Not recorded now (the card's actor is overloaded, or a `wallet_token.updated` names a token whose provisioning the issuer cannot confirm yet); send the same event again after Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn receive(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    if path.as_str() != CARD_PROVIDER {
        return Err(ApiError::NotFound(format!(
            "no provider named {}",
            path.as_str()
        )));
    }
    let secret = state
        .config
        .card_provider_webhook_secret
        .as_deref()
        .ok_or_else(|| ApiError::Internal("no card provider webhook secret".into()))?;
    let header = req
        .headers()
        .get(SANDBOX_SIGNATURE_HEADER)
        .and_then(|value| value.to_str().ok())
        .ok_or_else(|| {
            ApiError::InvalidSignature(format!("the {SANDBOX_SIGNATURE_HEADER} header is missing"))
        })?;
    let now = chrono::Utc::now().timestamp();
    verify_signature(
        secret.as_bytes(),
        header,
        &body,
        now,
        SIGNATURE_TOLERANCE_DEFAULT,
    )
    .map_err(|error| ApiError::InvalidSignature(error.to_string()))?;

    let event: ProviderEvent = parse_json(&body).map_err(|error| match error {
        ApiError::Validation(errors) => {
            ApiError::BadRequest(format!("not a provider event: {errors:?}"))
        }
        other => other,
    })?;
    let too_long = |text: &str| text.is_empty() || text.len() > EVENT_FIELD_LENGTH_MAX;
    if too_long(&event.id) || too_long(&event.event_type) {
        return Err(ApiError::BadRequest(
            "event id and type must be 1 to 255 characters".into(),
        ));
    }
    // Card events are recorded by the card's actor, deduplicated there by
    // the event id (a unique index on its transactions).
    match event.event_type.as_str() {
        AUTHORIZATION_REQUEST => return card_events::authorize(&state, event).await,
        AUTHORIZATION_CLEARING => return card_events::clear(&state, event).await,
        AUTHORIZATION_REVERSAL => return card_events::reverse(&state, event).await,
        REFUND_SUCCEEDED if event.data.get("card_id").is_some() => {
            return card_events::refund(&state, event).await
        }
        _ => {}
    }
    let wallet_update = (event.event_type == WALLET_TOKEN_UPDATED)
        .then(|| card_events::wallet_update(&event.data))
        .flatten();
    let settlement = SETTLEMENT_EVENT_TYPES
        .contains(&event.event_type.as_str())
        .then(|| named_settlement(&event.data));
    let row = InboundEventRow {
        provider: CARD_PROVIDER.to_owned(),
        event_id: event.id,
        event_type: event.event_type,
        payload: String::from_utf8_lossy(&body).into_owned(),
        request_id: request_id(&req),
        received_at: utc_now(),
        processed_at: None,
    };
    // A wallet update is applied before the event is recorded, so a failure
    // leaves it unrecorded and the provider's retry applies it.
    if let Some(update) = wallet_update {
        let seen = {
            let mut pooled = state.db.get().await?;
            let mut tx = pooled.tx();
            inbound_events::find(&mut tx, CARD_PROVIDER, &row.event_id)
                .await?
                .is_some()
        };
        if !seen {
            card_events::follow_wallet(&state, update).await?;
        }
    }
    let new: Result<bool, ApiError> = write_tx!(state.db, |tx| Ok(inbound_events::insert_if_new(
        tx, &row
    )
    .await?));
    let new = new?;
    tracing::info!(event_id = %row.event_id, event_type = %row.event_type, duplicate = !new, "provider event received");
    match settlement {
        // A duplicate was acted on when it first arrived.
        Some(Some((merchant_id, key))) if new => nudge(&state, &merchant_id, &key),
        Some(None) if new => {
            tracing::warn!(event_id = %row.event_id, "provider event names no settlement of ours")
        }
        _ => {}
    }
    Ok(HttpResponse::Ok().json(Received {
        received: true,
        duplicate: !new,
    }))
}

/// The settlement an event is about, as (merchant id, settlement key), when
/// its provider key is one Tern made for that settlement:
/// `{merchant_id}_{settlement_key}`, or with `_reversal` for its reversal.
/// Merchant ids are UUIDs, so they hold no `_` (nor the `/` of actor ids).
fn named_settlement(data: &serde_json::Value) -> Option<(MerchantId, String)> {
    let key = data.get("settlement_key")?.as_str()?;
    let provider_key = data.get("idempotency_key")?.as_str()?;
    if key.is_empty() || key.len() > EVENT_FIELD_LENGTH_MAX {
        return None;
    }
    let bases = [
        Some(provider_key),
        provider_key.strip_suffix(REVERSAL_KEY_SUFFIX),
    ];
    bases.into_iter().flatten().find_map(|base| {
        let merchant_id = base.strip_suffix(key)?.strip_suffix('_')?;
        let plausible = !merchant_id.is_empty()
            && !merchant_id.contains(['_', '/'])
            && merchant_id.len() <= EVENT_FIELD_LENGTH_MAX;
        plausible.then(|| (MerchantId::new(merchant_id), key.to_owned()))
    })
}

/// Tells the settlement's actor to ask its provider, off the request path:
/// the provider gets its 200 at once, whatever the actor is doing.
fn nudge(state: &AppState, merchant_id: &MerchantId, key: &str) {
    let Some(registry) = state.settlements.clone() else {
        tracing::debug!("no settlement provider configured; provider event not followed");
        return;
    };
    let id = entity_id(merchant_id, &SettlementKey::new(key));
    actix_web::rt::spawn(
        async move {
            match registry.call(&id, SettlementCommand::Nudge).await {
                Ok(_) => {}
                Err(RuntimeError::NotFound { .. }) => {
                    tracing::debug!(settlement = %id, "provider event for an unknown settlement")
                }
                // Its node is asked to look (a wake is a nudge for settlements).
                Err(RuntimeError::Elsewhere { .. }) => registry.tell(&id, SettlementCommand::Nudge),
                Err(error) => {
                    tracing::warn!(settlement = %id, %error, "could not nudge the settlement")
                }
            }
        }
        .instrument(tern_actors::trace::current()),
    );
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const MERCHANT: &str = "0b7e6a52-3c1f-4d2e-9a61-5d8f0c2b7e11";
    const KEY: &str = "6f1c2d3e-4a5b-4c6d-8e7f-901a2b3c4d5e";

    fn data(provider_key: &str) -> serde_json::Value {
        json!({"settlement_key": KEY, "idempotency_key": provider_key})
    }

    #[test]
    fn a_charge_or_refund_key_names_its_settlement() {
        let expected = Some((MerchantId::new(MERCHANT), KEY.to_owned()));
        assert_eq!(
            named_settlement(&data(&format!("{MERCHANT}_{KEY}"))),
            expected
        );
        assert_eq!(
            named_settlement(&data(&format!("{MERCHANT}_{KEY}_reversal"))),
            expected
        );
    }

    #[test]
    fn keys_not_made_for_the_settlement_name_nothing() {
        for provider_key in [
            KEY.to_owned(),
            format!("_{KEY}"),
            format!("{MERCHANT}{KEY}"),
            format!("{MERCHANT}_other"),
            format!("{MERCHANT}_{KEY}_refund"),
            format!("a_b_{KEY}"),
            format!("a/b_{KEY}"),
        ] {
            assert_eq!(
                named_settlement(&data(&provider_key)),
                None,
                "{provider_key}"
            );
        }
        assert_eq!(named_settlement(&json!({"idempotency_key": "m_k"})), None);
        assert_eq!(
            named_settlement(&json!({"settlement_key": 7, "idempotency_key": "m_7"})),
            None
        );
        assert_eq!(
            named_settlement(&json!({"settlement_key": "", "idempotency_key": "m_"})),
            None
        );
    }
}

//! Card-network events played through the control API: how a person (or a
//! test) swipes a card against a running Tern. Each event is sent to Tern at
//! once as a signed webhook and Tern's answer comes back in the response, so
//! the swipe shows its decision:
//!
//! - `POST /control/authorizations` sends `authorization.request`;
//! - `POST /control/clearings` sends `authorization.clearing`;
//! - `POST /control/reversals` sends `authorization.reversal`, releasing
//!   `amount_minor` of the hold, or the rest of it when omitted;
//! - `POST /control/refunds` sends `refund.succeeded` whose data carries
//!   `card_id` (the webhook types have no card refund of their own; the card
//!   id is what tells it from an acquirer refund).
//!
//! Each answers 200 `{"event_id", "authorization_id" | "refund_id",
//! "status", "decision"}` with Tern's status and JSON, whatever they are;
//! 502 when Tern cannot be reached, 503 when no callback URL is configured.
//! Nothing is retried and nothing enters the execution log: these are the
//! network's doing, not executions Tern asked for.

use std::collections::{HashMap, VecDeque};

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde_json::{json, Value};
use tern_actors::adapters::http::wire;

use super::acquirer::check_amount;
use super::issuer::check_text;
use super::webhook::SendNowError;
use super::{Sandbox, SandboxError};

/// Authorizations remembered for their amount; the oldest are forgotten
/// first, which only means a later clearing must name its amount.
pub const AUTHORIZATIONS_REMEMBERED_MAX: usize = 10_000;
const CHANNELS: [&str; 3] = ["online", "pos", "atm"];
const CHANNEL_DEFAULT: &str = "pos";
const COUNTRY_DEFAULT: &str = "US";
const MERCHANT_DEFAULT: &str = "Sandbox Merchant";
/// Miscellaneous retail.
const MCC_DEFAULT: &str = "5999";

pub(super) fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route(wire::PATH_CONTROL_AUTHORIZATIONS, web::post().to(authorize))
        .route(wire::PATH_CONTROL_CLEARINGS, web::post().to(clear))
        .route(wire::PATH_CONTROL_REFUNDS, web::post().to(refund))
        .route(wire::PATH_CONTROL_REVERSALS, web::post().to(reverse));
}

/// The amounts of the authorizations played, by authorization id.
#[derive(Debug, Default)]
pub struct PlayedAuthorizations {
    amounts: HashMap<String, i64>,
    order: VecDeque<String>,
}

impl PlayedAuthorizations {
    pub fn remember(&mut self, authorization_id: String, amount_minor: i64) {
        while self.order.len() >= AUTHORIZATIONS_REMEMBERED_MAX {
            if let Some(oldest) = self.order.pop_front() {
                self.amounts.remove(&oldest);
            }
        }
        self.order.push_back(authorization_id.clone());
        self.amounts.insert(authorization_id, amount_minor);
    }

    pub fn amount_minor(&self, authorization_id: &str) -> Option<i64> {
        self.amounts.get(authorization_id).copied()
    }
}

fn invalid(message: &str) -> SandboxError {
    SandboxError::new(StatusCode::BAD_REQUEST, "invalid_event", message)
}

/// Sends the event and wraps Tern's answer.
async fn play(
    sandbox: &Sandbox,
    kind: &'static str,
    data: Value,
) -> Result<(String, super::webhook::Answer), SandboxError> {
    let event_id = format!("evt_sbx_{}", uuid::Uuid::new_v4());
    match sandbox.webhooks.send_now(&event_id, kind, data).await {
        Ok(answer) => Ok((event_id, answer)),
        Err(SendNowError::NoCallback) => Err(SandboxError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no_callback_url",
            &SendNowError::NoCallback.to_string(),
        )),
        Err(failed @ SendNowError::Failed(_)) => Err(SandboxError::new(
            StatusCode::BAD_GATEWAY,
            "callback_failed",
            &format!("{event_id}: {failed}"),
        )),
    }
}

#[tracing::instrument(skip_all, fields(authorization_id))]
async fn authorize(
    sandbox: web::Data<Sandbox>,
    body: web::Json<wire::AuthorizationControl>,
) -> Result<HttpResponse, SandboxError> {
    let body = body.into_inner();
    check_text("card_id", &body.card_id)?;
    check_amount(body.amount_minor, &body.currency)?;
    let channel = body.channel.as_deref().unwrap_or(CHANNEL_DEFAULT);
    if !CHANNELS.contains(&channel) {
        return Err(invalid("channel must be online, pos or atm"));
    }
    let country = body.country.as_deref().unwrap_or(COUNTRY_DEFAULT);
    if country.len() != 2 || !country.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(invalid("country must be two upper-case letters"));
    }
    let mcc = body.mcc.as_deref().unwrap_or(MCC_DEFAULT);
    if mcc.len() != 4 || !mcc.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid("mcc must be four digits"));
    }
    let merchant = body.merchant.as_deref().unwrap_or(MERCHANT_DEFAULT);
    check_text("merchant", merchant)?;
    let authorization_id = format!("auth_{}", uuid::Uuid::new_v4().simple());
    tracing::Span::current().record("authorization_id", authorization_id.as_str());
    // Remembered before sending: Tern may hold funds even if its answer is lost.
    sandbox
        .lock()
        .authorizations
        .remember(authorization_id.clone(), body.amount_minor);
    let data = json!({
        "authorization_id": authorization_id,
        "card_id": body.card_id,
        "amount_minor": body.amount_minor,
        "currency": body.currency,
        "merchant": merchant,
        "mcc": mcc,
        "channel": channel,
        "country": country,
    });
    let (event_id, answer) = play(&sandbox, "authorization.request", data).await?;
    Ok(HttpResponse::Ok().json(wire::CardEventSent {
        event_id,
        authorization_id: Some(authorization_id),
        refund_id: None,
        status: answer.status,
        decision: answer.body,
    }))
}

#[tracing::instrument(skip_all, fields(authorization_id))]
async fn clear(
    sandbox: web::Data<Sandbox>,
    body: web::Json<wire::ClearingControl>,
) -> Result<HttpResponse, SandboxError> {
    let body = body.into_inner();
    tracing::Span::current().record("authorization_id", body.authorization_id.as_str());
    check_text("authorization_id", &body.authorization_id)?;
    check_text("card_id", &body.card_id)?;
    let remembered = sandbox
        .lock()
        .authorizations
        .amount_minor(&body.authorization_id);
    let amount_minor = body.amount_minor.or(remembered).ok_or_else(|| {
        invalid("amount_minor is required: the simulator did not play this authorization")
    })?;
    check_amount(amount_minor, &body.currency)?;
    let data = json!({
        "authorization_id": body.authorization_id,
        "card_id": body.card_id,
        "amount_minor": amount_minor,
        "currency": body.currency,
    });
    let (event_id, answer) = play(&sandbox, "authorization.clearing", data).await?;
    Ok(HttpResponse::Ok().json(wire::CardEventSent {
        event_id,
        authorization_id: Some(body.authorization_id),
        refund_id: None,
        status: answer.status,
        decision: answer.body,
    }))
}

#[tracing::instrument(skip_all, fields(authorization_id))]
async fn reverse(
    sandbox: web::Data<Sandbox>,
    body: web::Json<wire::ReversalControl>,
) -> Result<HttpResponse, SandboxError> {
    let body = body.into_inner();
    tracing::Span::current().record("authorization_id", body.authorization_id.as_str());
    check_text("authorization_id", &body.authorization_id)?;
    check_text("card_id", &body.card_id)?;
    let mut data = json!({
        "authorization_id": body.authorization_id,
        "card_id": body.card_id,
    });
    if let Some(amount_minor) = body.amount_minor {
        if amount_minor <= 0 {
            return Err(invalid("amount_minor must be positive"));
        }
        data["amount_minor"] = json!(amount_minor);
    }
    let (event_id, answer) = play(&sandbox, "authorization.reversal", data).await?;
    Ok(HttpResponse::Ok().json(wire::CardEventSent {
        event_id,
        authorization_id: Some(body.authorization_id),
        refund_id: None,
        status: answer.status,
        decision: answer.body,
    }))
}

#[tracing::instrument(skip_all, fields(refund_id))]
async fn refund(
    sandbox: web::Data<Sandbox>,
    body: web::Json<wire::CardRefundControl>,
) -> Result<HttpResponse, SandboxError> {
    let body = body.into_inner();
    check_text("card_id", &body.card_id)?;
    check_amount(body.amount_minor, &body.currency)?;
    if let Some(authorization_id) = &body.authorization_id {
        check_text("authorization_id", authorization_id)?;
    }
    let merchant = body.merchant.as_deref().unwrap_or(MERCHANT_DEFAULT);
    check_text("merchant", merchant)?;
    let refund_id = format!("cref_{}", uuid::Uuid::new_v4().simple());
    tracing::Span::current().record("refund_id", refund_id.as_str());
    let data = json!({
        "refund_id": refund_id,
        "card_id": body.card_id,
        "amount_minor": body.amount_minor,
        "currency": body.currency,
        "authorization_id": body.authorization_id,
        "merchant": merchant,
        "status": "succeeded",
    });
    let (event_id, answer) = play(&sandbox, "refund.succeeded", data).await?;
    Ok(HttpResponse::Ok().json(wire::CardEventSent {
        event_id,
        authorization_id: None,
        refund_id: Some(refund_id),
        status: answer.status,
        decision: answer.body,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn played_authorizations_are_bounded_and_forget_the_oldest() {
        let mut played = PlayedAuthorizations::default();
        for i in 0..AUTHORIZATIONS_REMEMBERED_MAX {
            played.remember(format!("auth_{i}"), i as i64 + 1);
        }
        assert_eq!(played.amount_minor("auth_0"), Some(1));
        played.remember("auth_new".into(), 7);
        assert_eq!(played.amount_minor("auth_0"), None, "the oldest went");
        assert_eq!(played.amount_minor("auth_1"), Some(2));
        assert_eq!(played.amount_minor("auth_new"), Some(7));
        assert_eq!(played.amounts.len(), AUTHORIZATIONS_REMEMBERED_MAX);
        assert_eq!(played.order.len(), AUTHORIZATIONS_REMEMBERED_MAX);
    }
}

//! Quote endpoints (interface: Quotes; decisions §3): price a send amount
//! into a stablecoin on a network, and read the quote back until it expires.

use actix_web::http::header::LOCATION;
use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tern_actors::ports::{Asset, Network};
use tern_actors::quote::{self, QuoteRequest};
use tern_schema::models::QuoteRow;
use tern_schema::money::{parse_minor, AmountError, Currency, CurrencyKind};
use tern_schema::store::quotes as store;
use tern_schema::types::{as_utc, utc_now};
use tern_schema::vocabulary::{MerchantId, QuoteId};
use utoipa::ToSchema;

use crate::auth::{Caller, MerchantOwned};
use crate::http::extract::JsonBody;
use crate::http::money::canonical_amount;
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateQuoteRequest {
    /// ISO 4217 fiat currency the payer pays: USD, EUR, GBP or JPY.
    #[schema(example = "EUR", pattern = "^[A-Z]{3}$")]
    pub send_currency: String,
    /// Major-unit decimal string with at most the currency's decimals,
    /// 1.00 to 10,000.00 of the send currency.
    #[schema(example = "100.00")]
    pub send_amount: String,
    /// USDT or USDC.
    #[schema(example = "USDC")]
    pub receive_asset: String,
    /// tron, ethereum, polygon or bsc.
    #[schema(example = "polygon")]
    pub receive_network: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Quote {
    /// `qt_` + an opaque, time-sortable id.
    #[schema(value_type = String, example = "qt_019a8b5f3c2e7d4a9b1c0d2e3f405162")]
    pub quote_id: QuoteId,
    #[schema(example = "EUR")]
    pub send_currency: String,
    /// Major units, canonical: exactly the currency's decimals.
    #[schema(example = "100.00")]
    pub send_amount: String,
    #[schema(example = "USDC")]
    pub receive_asset: String,
    #[schema(example = "polygon")]
    pub receive_network: String,
    /// Send currency -> receive asset, an exact decimal in its shortest form.
    #[schema(example = "1.08")]
    pub rate: String,
    /// Send-currency major units: max(1.00, 1% of send_amount), half-up.
    #[schema(example = "1.00")]
    pub platform_fee: String,
    /// The network's gas estimate in send-currency major units.
    #[schema(example = "0.05")]
    pub network_fee: String,
    /// Asset major units, six decimals: (send - fees) x rate, floored.
    #[schema(example = "106.866000")]
    pub receive_amount: String,
    /// 60 seconds after creation by default (TERN_QUOTE_TTL).
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

impl MerchantOwned for QuoteRow {
    fn merchant_id(&self) -> Option<&MerchantId> {
        Some(&self.merchant_id)
    }
}

pub fn view(row: &QuoteRow) -> Quote {
    Quote {
        quote_id: row.id.clone(),
        send_currency: row.send_currency.clone(),
        send_amount: canonical_amount(&row.send_currency, row.send_amount_minor),
        receive_asset: row.receive_asset.as_str().to_owned(),
        receive_network: row.receive_network.as_str().to_owned(),
        rate: row.rate.clone(),
        platform_fee: canonical_amount(&row.send_currency, row.platform_fee_minor),
        network_fee: canonical_amount(&row.send_currency, row.network_fee_minor),
        receive_amount: canonical_amount(row.receive_asset.as_str(), row.receive_amount_minor),
        expires_at: as_utc(row.expires_at),
        created_at: as_utc(row.created_at),
    }
}

/// Checks every field, reporting all problems at once.
fn validate(request: &CreateQuoteRequest, caller: &Caller) -> Result<QuoteRequest, ApiError> {
    let mut errors = FieldErrors::new();
    let currency = Currency::find(&request.send_currency).filter(|c| c.kind == CurrencyKind::Fiat);
    if currency.is_none() {
        let fiat: Vec<&str> = Currency::fiat().map(|c| c.code).collect();
        errors.insert(
            "send_currency".into(),
            format!("must be one of {}", fiat.join(", ")),
        );
    }
    let amount = send_amount(&request.send_amount, currency, &mut errors);
    let asset = Asset::parse(&request.receive_asset);
    if asset.is_none() {
        errors.insert("receive_asset".into(), "must be USDT or USDC".into());
    }
    let network = Network::parse(&request.receive_network);
    if network.is_none() {
        let names: Vec<&str> = Network::ALL.iter().map(|n| n.as_str()).collect();
        errors.insert(
            "receive_network".into(),
            format!("must be one of {}", names.join(", ")),
        );
    }
    match (currency, amount, asset, network) {
        (
            Some(send_currency),
            Some(send_amount_minor),
            Some(receive_asset),
            Some(receive_network),
        ) if errors.is_empty() => Ok(QuoteRequest {
            merchant_id: caller.merchant_id.clone(),
            request_id: caller.request_id.clone(),
            send_currency,
            send_amount_minor,
            receive_asset,
            receive_network,
        }),
        _ => Err(ApiError::Validation(errors)),
    }
}

/// Minor units of the send amount. Without a known currency its decimals
/// are unknown, but a malformed or non-positive amount is still reported.
fn send_amount(text: &str, currency: Option<Currency>, errors: &mut FieldErrors) -> Option<i64> {
    let parsed = match currency {
        Some(currency) => currency.parse(text),
        None => match parse_minor(text, DECIMALS_ANY) {
            Err(error @ (AmountError::NotDecimal | AmountError::NotPositive)) => Err(error),
            _ => return None,
        },
    };
    parsed
        .map_err(|error| errors.insert("send_amount".into(), error.to_string()))
        .ok()
}

/// Enough decimals that only the form of an amount is judged.
const DECIMALS_ANY: u32 = 18;

fn location(id: &str) -> String {
    format!("/v1/quotes/{id}")
}

/// Price a send amount. Each call makes a new quote, valid until
/// `expires_at`; there is no idempotency at this layer.
#[utoipa::path(post, path = "/v1/quotes", operation_id = "create_quote", tag = "quotes", request_body = CreateQuoteRequest,
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 201, body = Quote, description = "Created",
            headers(("Location" = String, description = "The quote's URL"))),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope quotes:write, or merchant suspended or disabled", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Unsupported currency, asset or network; a malformed amount, or one outside 1.00 to 10,000.00; fees that leave nothing to receive", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No rate available right now, or overloaded; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    caller: Caller,
    state: web::Data<AppState>,
    body: Result<JsonBody<CreateQuoteRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let JsonBody(request) = body?;
    caller.require("quotes:write")?;
    caller.require_active()?;
    state
        .limits
        .check("quote_create", caller.merchant_id.as_str())?;
    let request = validate(&request, &caller)?;
    let row = quote::create(
        &state.db,
        state.rates.as_ref(),
        &state.config.quote_pricing,
        state.config.quote_ttl,
        request,
    )
    .await?;
    tracing::info!(merchant_id = %row.merchant_id, quote = %row.id, "quote created");
    Ok(HttpResponse::Created()
        .insert_header((LOCATION, location(row.id.as_str())))
        .json(view(&row)))
}

/// Read a quote. Past `expires_at` it is 410; the stored quote remains.
#[utoipa::path(get, path = "/v1/quotes/{id}", operation_id = "get_quote", tag = "quotes",
    params(("id" = String, Path, description = "The quote_id")),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = Quote),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope quotes:read", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such quote for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "The quote is past expires_at (code QUOTE_EXPIRED)", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require("quotes:read")?;
    state
        .limits
        .check("quote_read", caller.merchant_id.as_str())?;
    let found = match QuoteId::from_text(&path.into_inner()) {
        Some(id) => {
            let mut pooled = state.db.get().await?;
            let mut tx = pooled.tx();
            store::find_for_merchant(&mut tx, &caller.merchant_id, &id).await?
        }
        None => None,
    };
    let row = caller.own(found, "quote")?;
    if row.is_expired_at(utc_now()) {
        return Err(ApiError::Gone {
            code: Some("QUOTE_EXPIRED"),
            detail: format!(
                "the quote expired at {}; request a new one",
                as_utc(row.expires_at).to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
            ),
        });
    }
    Ok(HttpResponse::Ok().json(view(&row)))
}

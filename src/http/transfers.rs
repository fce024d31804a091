//! Transfer endpoints (interface: Transfers; decisions §3, §4, §7): create
//! with Idempotency-Key against an accepted quote, read, list. Handlers
//! validate and make the transfer durable; its actor runs the saga.

use actix_web::http::header::LOCATION;
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tern_actors::ports::{Asset, Network};
use tern_actors::runtime::Registry;
use tern_actors::transfer::create::FLOW;
use tern_actors::transfer::machine::Status;
use tern_actors::transfer::{self, CreateError, Created, NewTransfer, TransferKind};
use tern_schema::idempotency::request_digest;
use tern_schema::models::TransferRow;
use tern_schema::store::transfers as store;
use tern_schema::types::{as_utc, utc_now};
use tern_schema::vocabulary::{MerchantId, QuoteId, SettlementKey, TransferId};
use tracing::Instrument;
use utoipa::{IntoParams, ToSchema};

use crate::auth::{Caller, MerchantOwned};
use crate::http::extract::{JsonBody, Query};
use crate::http::idempotency::{self, idempotency_key};
use crate::http::money::canonical_amount;
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;
use crate::validate;

pub const LIST_LIMIT_DEFAULT: i64 = 50;
pub const LIST_LIMIT_MAX: i64 = 200;
/// Longest quote id or payment-method token accepted.
const TOKEN_LENGTH_MAX: usize = 128;
/// Longest transfer id looked up; longer ones cannot be Tern's.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTransferRequest {
    /// The only flow: `tern`.
    #[schema(example = "tern")]
    pub flow: String,
    /// The accepted quote; it binds this transfer's price.
    #[schema(example = "qt_019a8b5f3c2e7d4a9b1c0d2e3f405162")]
    pub quote_id: String,
    /// The payer's card payment-method token (`pm_card_visa`, ...).
    #[schema(example = "pm_card_visa")]
    pub card_pm: String,
    /// The beneficiary's wallet on `network`: `0x` + 40 hex (EIP-55 checked
    /// when mixed case) on EVM networks, base58check `T...` on tron.
    #[schema(example = "0x52908400098527886E0F7030069857D2E4169EE7")]
    pub wallet: String,
    /// tron, ethereum, polygon or bsc; must be the quote's receive_network.
    #[schema(example = "polygon")]
    pub network: String,
    /// USDT or USDC; must be the quote's receive_asset.
    #[schema(example = "USDC")]
    pub asset: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Leg {
    /// 1 for the card_charge leg, 2 for the on_chain leg.
    pub index: u8,
    /// card_charge or on_chain.
    pub kind: String,
    /// The leg's settlement: GET /v1/settlements/{settlement_key}.
    #[schema(value_type = String)]
    pub settlement_key: SettlementKey,
    /// not_started, in_flight, succeeded, failed, reversing, reversed or reverse_failed.
    pub status: String,
    /// Set when the card_charge leg needed an on-session 3DS challenge.
    pub client_secret: Option<String>,
    /// `redirect_to_url` while the card_charge leg waits for the challenge.
    pub next_action_type: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Transfer {
    /// `tr_` + an opaque, time-sortable id.
    #[schema(value_type = String, example = "tr_019a8b5f3c2e7d4a9b1c0d2e3f405162")]
    pub id: TransferId,
    pub flow: String,
    /// pending, leg1_in_flight, leg1_succeeded, leg2_in_flight, succeeded, compensating or failed.
    pub status: String,
    #[schema(value_type = String)]
    pub quote_id: QuoteId,
    pub send_currency: String,
    pub send_amount: String,
    pub receive_asset: String,
    pub receive_network: String,
    pub receive_amount: String,
    pub platform_fee: String,
    pub network_fee: String,
    /// *extension*: the quote's rate.
    pub rate: String,
    /// *extension*: the beneficiary's wallet.
    pub wallet: String,
    /// *extension*: why the transfer failed (the failing leg's reason).
    pub failure_reason: Option<String>,
    pub legs: Vec<Leg>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TransferListResponse {
    pub items: Vec<Transfer>,
    /// Items in this page.
    pub count: usize,
    /// Transfers matching the filter, independent of the page window.
    pub total: i64,
    pub offset: i64,
    pub limit: i64,
    /// offset + count < total.
    pub has_more: bool,
    /// The status filter applied, if any.
    pub status: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// pending, leg1_in_flight, leg1_succeeded, leg2_in_flight, succeeded, compensating or failed.
    pub status: Option<String>,
    /// 1 to 200, default 50.
    pub limit: Option<i64>,
    /// Zero-based, default 0.
    pub offset: Option<i64>,
}

impl MerchantOwned for TransferRow {
    fn merchant_id(&self) -> Option<&MerchantId> {
        Some(&self.merchant_id)
    }
}

pub fn view(row: &TransferRow) -> Transfer {
    let fiat = row.send_currency.as_str();
    Transfer {
        id: row.id.clone(),
        flow: row.flow.clone(),
        status: row.status.to_string(),
        quote_id: row.quote_id.clone(),
        send_currency: row.send_currency.clone(),
        send_amount: canonical_amount(fiat, row.send_amount_minor),
        receive_asset: row.receive_asset.as_str().to_owned(),
        receive_network: row.receive_network.as_str().to_owned(),
        receive_amount: canonical_amount(row.receive_asset.as_str(), row.receive_amount_minor),
        platform_fee: canonical_amount(fiat, row.platform_fee_minor),
        network_fee: canonical_amount(fiat, row.network_fee_minor),
        rate: row.rate.clone(),
        wallet: row.wallet.clone(),
        failure_reason: row.failure_reason.clone(),
        legs: vec![
            Leg {
                index: 1,
                kind: "card_charge".into(),
                settlement_key: row.leg1_key.clone(),
                status: row.leg1_status.to_string(),
                client_secret: row.leg1_client_secret.clone(),
                next_action_type: row.leg1_next_action_type.clone(),
            },
            Leg {
                index: 2,
                kind: "on_chain".into(),
                settlement_key: row.leg2_key.clone(),
                status: row.leg2_status.to_string(),
                client_secret: None,
                next_action_type: None,
            },
        ],
        created_at: as_utc(row.created_at),
        updated_at: as_utc(row.updated_at),
    }
}

fn registry(state: &AppState) -> Result<&Registry<TransferKind>, ApiError> {
    state
        .transfers
        .as_ref()
        .ok_or_else(|| ApiError::Overloaded {
            detail: "no provider is configured on this deployment".into(),
            retry_after_s: 60,
        })
}

/// A token-like field: present, bounded, printable, no spaces.
fn token(field: &str, value: &str, errors: &mut FieldErrors) -> Option<String> {
    let valid = !value.is_empty()
        && value.len() <= TOKEN_LENGTH_MAX
        && value.bytes().all(|b| b.is_ascii_graphic());
    if valid {
        Some(value.to_owned())
    } else {
        errors.insert(
            field.into(),
            format!("must be 1 to {TOKEN_LENGTH_MAX} printable characters without spaces"),
        );
        None
    }
}

/// Checks every field, reporting all problems at once.
fn validate_create(
    request: &CreateTransferRequest,
    key: uuid::Uuid,
    caller: &Caller,
) -> Result<NewTransfer, ApiError> {
    let mut errors = FieldErrors::new();
    if request.flow != FLOW {
        errors.insert("flow".into(), format!("must be `{FLOW}`"));
    }
    let quote_id = token("quote_id", &request.quote_id, &mut errors);
    let card_pm = token("card_pm", &request.card_pm, &mut errors);
    let network = Network::parse(&request.network);
    if network.is_none() {
        let names: Vec<&str> = Network::ALL.iter().map(|n| n.as_str()).collect();
        errors.insert(
            "network".into(),
            format!("must be one of {}", names.join(", ")),
        );
    }
    let asset = Asset::parse(&request.asset);
    if asset.is_none() {
        errors.insert("asset".into(), "must be USDT or USDC".into());
    }
    if let Some(network) = network {
        if let Err(error) = validate::wallet::wallet(network, &request.wallet) {
            errors.insert("wallet".into(), error.to_string());
        }
    } else if request.wallet.is_empty() {
        errors.insert("wallet".into(), "must not be empty".into());
    }
    match (quote_id, card_pm, network, asset) {
        (Some(quote_id), Some(card_pm), Some(network), Some(asset)) if errors.is_empty() => {
            Ok(NewTransfer {
                merchant_id: caller.merchant_id.clone(),
                idempotency_key: key.to_string(),
                quote_id,
                card_pm,
                wallet: request.wallet.clone(),
                network,
                asset,
                request_id: caller.request_id.clone(),
                actor: caller.actor(),
            })
        }
        _ => Err(ApiError::Validation(errors)),
    }
}

/// What decides "the same request" for the key: the validated fields.
fn digest(new: &NewTransfer) -> String {
    let canonical = json!({
        "flow": FLOW,
        "quote_id": new.quote_id,
        "card_pm": new.card_pm,
        "wallet": new.wallet,
        "network": new.network.as_str(),
        "asset": new.asset.as_str(),
    });
    request_digest(&canonical.to_string())
}

fn location(id: &str) -> String {
    format!("/v1/transfers/{id}")
}

/// Create a transfer bound to an accepted quote. 201 once it is durable;
/// its actor charges the card, pays out on chain, and refunds the card if
/// the payout fails for good.
#[utoipa::path(post, path = "/v1/transfers", operation_id = "create_transfer", tag = "transfers", request_body = CreateTransferRequest,
    params(("Idempotency-Key" = String, Header, description = "UUID v4")),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 201, body = Transfer, description = "Created (or replayed, with Idempotent-Replayed: true)",
            headers(("Location" = String, description = "The transfer's URL"))),
        (status = 400, description = "Malformed JSON, or a missing or malformed Idempotency-Key", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope transfers:write, or merchant suspended or disabled", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such quote for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The quote is already bound to a transfer (code QUOTE_ALREADY_USED), or the first request with this Idempotency-Key is still running", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "The accepted quote expired (code QUOTE_EXPIRED)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields: flow other than `tern`, network or asset not matching the quote, a wallet invalid for the network, or the key reused with another body", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Overloaded or no provider configured; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    body: Result<JsonBody<CreateTransferRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let JsonBody(request) = body?;
    caller.require("transfers:write")?;
    caller.require_active()?;
    state
        .limits
        .check("transfer_create", caller.merchant_id.as_str())?;
    let key = idempotency_key(&req)?;
    let registry = registry(&state)?.clone();
    let new = validate_create(&request, key, &caller)?;
    let created = transfer::create(
        &registry,
        &new,
        &digest(&new),
        utc_now(),
        &state.outbox,
        |row| serde_json::to_string(&view(row)).unwrap_or_default(),
    )
    .await;
    match created {
        Ok(Created::Created { row, body }) => {
            let id = row.id.clone();
            let created = (*row).clone();
            // Durable: start the saga without holding the response. A failed
            // activation is retried by recovery.
            // In a trace, the saga continues the request's.
            actix_web::rt::spawn(
                async move {
                    if let Err(error) = registry.activate_with(id.as_str(), created).await {
                        tracing::warn!(transfer = %id, %error, "transfer actor did not start");
                    }
                }
                .instrument(tern_actors::trace::current()),
            );
            tracing::info!(merchant_id = %row.merchant_id, transfer = %row.id, quote = %row.quote_id, "transfer created");
            Ok(HttpResponse::Created()
                .insert_header((LOCATION, location(row.id.as_str())))
                .content_type("application/json")
                .body(body))
        }
        Ok(Created::Replay { status, body }) => {
            // The recorded body names the transfer the key made.
            let location = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|value| value.get("id").and_then(|id| id.as_str()).map(location));
            idempotency::replay(status, body, location)
        }
        Ok(Created::InProgress) => Err(idempotency::in_progress()),
        Ok(Created::Mismatch) => Err(idempotency::mismatch()),
        Err(CreateError::QuoteNotFound) => Err(ApiError::NotFound(format!(
            "no quote {} for this merchant",
            new.quote_id
        ))),
        Err(CreateError::QuoteExpired { expires_at }) => Err(ApiError::Gone {
            code: Some("QUOTE_EXPIRED"),
            detail: format!(
                "the quote expired at {}; request a new one",
                as_utc(expires_at).to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
            ),
        }),
        Err(CreateError::QuoteUsed) => Err(ApiError::Conflict {
            code: Some("QUOTE_ALREADY_USED"),
            detail: "the quote is already bound to a transfer; request a new quote".into(),
        }),
        Err(CreateError::QuoteMismatch(fields)) => Err(ApiError::Validation(
            fields
                .into_iter()
                .map(|(field, message)| (field.to_owned(), message))
                .collect(),
        )),
        Err(CreateError::Store(error)) => Err(error.into()),
        Err(CreateError::Placement(error)) => Err(error.into()),
    }
}

/// List the merchant's transfers, newest first.
#[utoipa::path(get, path = "/v1/transfers", operation_id = "list_transfers", tag = "transfers", params(ListQuery),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = TransferListResponse),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope transfers:read", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid status, limit or offset", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list(
    caller: Caller,
    state: web::Data<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require("transfers:read")?;
    state
        .limits
        .check("transfer_read", caller.merchant_id.as_str())?;
    let mut errors = FieldErrors::new();
    let limit = validate::list_limit(query.limit, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, &mut errors);
    let offset = query.offset.unwrap_or(0);
    if offset < 0 {
        errors.insert("offset".into(), "must be 0 or more".into());
    }
    if let Some(status) = &query.status {
        if Status::parse(status).is_none() {
            let names: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
            errors.insert(
                "status".into(),
                format!("must be one of {}", names.join(", ")),
            );
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut pooled = state.db.get().await?;
    let (rows, total) = store::list(
        &mut pooled.tx(),
        &caller.merchant_id,
        // Validated above: `None` only when no filter was asked for.
        query.status.as_deref().and_then(Status::parse),
        limit,
        offset,
    )
    .await?;
    let items: Vec<Transfer> = rows.iter().map(view).collect();
    let count = items.len();
    Ok(HttpResponse::Ok().json(TransferListResponse {
        has_more: offset.saturating_add(count as i64) < total,
        items,
        count,
        total,
        offset,
        limit,
        status: query.status,
    }))
}

/// Read a transfer: the authoritative status of the saga and its legs.
#[utoipa::path(get, path = "/v1/transfers/{id}", operation_id = "get_transfer", tag = "transfers",
    params(("id" = String, Path, description = "The transfer's id")),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = Transfer),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope transfers:read", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such transfer for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require("transfers:read")?;
    state
        .limits
        .check("transfer_read", caller.merchant_id.as_str())?;
    let found = match TransferId::from_text(&path) {
        Some(id) => {
            let mut pooled = state.db.get().await?;
            let mut tx = pooled.tx();
            store::find(&mut tx, &id).await?
        }
        None => None,
    };
    let row = caller.own(found, "transfer")?;
    Ok(HttpResponse::Ok().json(view(&row)))
}

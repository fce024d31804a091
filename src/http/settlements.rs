//! Settlement endpoints (interface: Settlements; decisions §4, §5): create
//! with Idempotency-Key, read, list, reverse. Handlers validate and persist
//! the intent; each settlement's actor executes it.

use actix_web::http::header::LOCATION;
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tern_actors::runtime::Registry;
use tern_actors::settlement::machine::{Method, Status};
use tern_actors::settlement::providers::ON_CHAIN_USD_MAX_MINOR;
use tern_actors::settlement::record::entity_id;
use tern_actors::settlement::{
    submit, NewSettlement, ReverseOutcome, SettlementCommand, SettlementKind, SettlementReply,
    SubmitError, Submitted,
};
use tern_actors::transfer::legs::is_leg_key_of;
use tern_schema::idempotency::request_digest;
use tern_schema::models::{SettlementIntent, SettlementRow};
use tern_schema::money::MinorUnits;
use tern_schema::store::settlements as store;
use tern_schema::types::as_utc;
use tern_schema::vocabulary::{Asset, MerchantId, SettlementKey};
use tracing::Instrument;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::{Caller, MerchantOwned};
use crate::http::extract::{JsonBody, Query};
use crate::http::idempotency::{self, idempotency_key};
use crate::http::money::{canonical_amount, Money, SettlementAmount};
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;
use crate::validate;

pub const LIST_LIMIT_DEFAULT: i64 = 50;
pub const LIST_LIMIT_MAX: i64 = 200;
/// Longest destination, reference or reason accepted.
pub const TEXT_LENGTH_MAX: usize = 255;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// Optional; must equal the Idempotency-Key header when present.
    pub idempotency_key: Option<String>,
    /// `card_push`, `card_charge` or `on_chain`.
    #[schema(example = "card_push")]
    pub method: String,
    pub amount: Money,
    /// A funding ledger account id of the caller (GET /v1/ledger/accounts).
    pub source: String,
    /// card_charge: a payment-method token (`pm_card_visa`); card_push: a card
    /// token (`tok_...`); on_chain: `<network>:<wallet_address>`.
    #[schema(example = "tok_visa_4242")]
    pub destination: String,
    #[schema(example = "Ada Lovelace")]
    pub recipient_name: String,
    pub reference: Option<String>,
    /// *extension*, on_chain only: `USDC` (default) or `USDT`.
    pub asset: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Settlement {
    /// Also the settlement's identifier in paths.
    #[schema(value_type = String)]
    pub idempotency_key: SettlementKey,
    pub method: String,
    pub amount: SettlementAmount,
    /// on_chain only: the stablecoin paid out.
    pub asset: Option<String>,
    pub source: String,
    pub destination: String,
    pub recipient_name: String,
    pub reference: Option<String>,
    /// pending, in_flight, retrying, succeeded, failed or reversed.
    pub status: String,
    /// Provider attempts so far.
    pub attempt: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub provider_id: Option<String>,
    pub stan: Option<String>,
    pub retrieval_reference_number: Option<String>,
    pub transaction_identifier: Option<String>,
    pub approval_code: Option<String>,
    pub action_code: Option<String>,
    /// The posting entry: a transaction of its own, never the hold.
    pub ledger_transaction_id: Option<String>,
    /// The hold entry made at creation: the amount held on the source
    /// (card_push, on_chain) or the credit reserved for it (card_charge).
    /// It stays pending; its posting or void is a transaction of its own.
    pub funding_transaction_id: Option<String>,
    pub failure_reason: Option<String>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Empty for off-session charges, card_push and on_chain.
    pub client_secret: Option<String>,
    pub next_action_type: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ListResponse {
    pub items: Vec<Settlement>,
    pub count: usize,
    pub limit: i64,
    /// The status filter applied, if any.
    pub status: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// pending, in_flight, retrying, succeeded, failed or reversed.
    pub status: Option<String>,
    /// 1 to 200, default 50.
    pub limit: Option<i64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReverseRequest {
    #[schema(example = "customer request")]
    pub reason: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReverseResponse {
    #[schema(value_type = String)]
    pub idempotency_key: SettlementKey,
    pub status: String,
    pub attempt: i32,
    pub action_code: Option<String>,
    pub approval_code: Option<String>,
}

impl MerchantOwned for SettlementRow {
    fn merchant_id(&self) -> Option<&MerchantId> {
        Some(&self.merchant_id)
    }
}

pub fn view(row: &SettlementRow) -> Settlement {
    let amount = SettlementAmount {
        amount: canonical_amount(&row.currency, row.amount_minor),
        currency: row.currency.clone(),
    };
    Settlement {
        idempotency_key: row.idempotency_key.clone(),
        method: row.method.to_string(),
        amount,
        asset: row.asset.map(|asset| asset.as_str().to_owned()),
        source: row.source.clone(),
        destination: row.destination.clone(),
        recipient_name: row.recipient_name.clone(),
        reference: row.reference.clone(),
        status: row.status.to_string(),
        attempt: row.attempt,
        created_at: as_utc(row.created_at),
        updated_at: as_utc(row.updated_at),
        provider_id: row.provider_id.clone(),
        stan: row.stan.clone(),
        retrieval_reference_number: row.retrieval_reference_number.clone(),
        transaction_identifier: row.transaction_identifier.clone(),
        approval_code: row.approval_code.clone(),
        action_code: row.action_code.clone(),
        ledger_transaction_id: row.ledger_transaction_id.clone(),
        funding_transaction_id: row.funding_transaction_id.clone(),
        failure_reason: row.failure_reason.clone(),
        next_attempt_at: row.next_attempt_at.map(as_utc),
        client_secret: row.client_secret.clone(),
        next_action_type: row.next_action_type.clone(),
    }
}

/// A settlement id from a path: keys are stored canonical, so a UUID in
/// another spelling still finds its settlement.
fn settlement_id(raw: &str) -> SettlementKey {
    SettlementKey::new(
        Uuid::parse_str(raw)
            .map(|uuid| uuid.to_string())
            .unwrap_or_else(|_| raw.to_owned()),
    )
}

fn registry(state: &AppState) -> Result<&Registry<SettlementKind>, ApiError> {
    state
        .settlements
        .as_ref()
        .ok_or_else(|| ApiError::Overloaded {
            detail: "no settlement provider is configured on this deployment".into(),
            retry_after_s: 60,
        })
}

fn text(field: &str, value: &str, errors: &mut FieldErrors) -> Option<String> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        errors.insert(field.into(), "must not be empty".into());
        None
    } else if trimmed.chars().count() > TEXT_LENGTH_MAX {
        errors.insert(
            field.into(),
            format!("is too long (at most {TEXT_LENGTH_MAX} characters)"),
        );
        None
    } else if trimmed.chars().any(char::is_control) {
        errors.insert(field.into(), "must not contain control characters".into());
        None
    } else {
        Some(trimmed.to_owned())
    }
}

/// Checks every field, reporting all problems at once.
fn validate_submit(
    request: &SubmitRequest,
    key: Uuid,
    caller: &Caller,
    amount_max_minor: MinorUnits,
) -> Result<NewSettlement, ApiError> {
    let mut errors = FieldErrors::new();
    if let Some(body_key) = &request.idempotency_key {
        if Uuid::parse_str(body_key).ok() != Some(key) {
            errors.insert(
                "idempotency_key".into(),
                "must equal the Idempotency-Key header".into(),
            );
        }
    }
    let method = Method::parse(&request.method);
    if method.is_none() {
        errors.insert(
            "method".into(),
            "must be one of card_push, card_charge, on_chain".into(),
        );
    }
    let amount = request.amount.parse_fiat("amount", &mut errors);
    if let Some((currency, amount_minor)) = amount {
        if amount_minor > amount_max_minor {
            errors.insert(
                "amount".into(),
                format!(
                    "must be at most {} {}",
                    canonical_amount(currency.code, amount_max_minor),
                    currency.code
                ),
            );
        }
    }
    if method == Some(Method::OnChain) {
        if let Some((currency, amount_minor)) = amount {
            if currency.code != "USD" {
                errors.insert(
                    "amount.currency".into(),
                    "on_chain settlements are denominated in USD".into(),
                );
            } else if amount_minor > ON_CHAIN_USD_MAX_MINOR {
                errors.insert(
                    "amount".into(),
                    format!(
                        "must be at most {} USD: its payout in micro-units must fit int64",
                        canonical_amount("USD", ON_CHAIN_USD_MAX_MINOR)
                    ),
                );
            }
        }
    }
    let asset = match (&request.asset, method) {
        (None, Some(Method::OnChain)) => Some(Asset::Usdc),
        (None, _) => None,
        (Some(asset), Some(Method::OnChain)) => {
            let asset = Asset::parse(asset);
            if asset.is_none() {
                errors.insert("asset".into(), "must be USDC or USDT".into());
            }
            asset
        }
        (Some(_), _) => {
            errors.insert(
                "asset".into(),
                "applies to on_chain settlements only".into(),
            );
            None
        }
    };
    let source = text("source", &request.source, &mut errors);
    let destination = text("destination", &request.destination, &mut errors);
    if let (Some(Method::OnChain), Some(destination)) = (method, &destination) {
        if let Err(error) = validate::wallet::on_chain_destination(destination) {
            errors.insert("destination".into(), error.to_string());
        }
    }
    let recipient_name = validate::name(&request.recipient_name)
        .map_err(|m| errors.insert("recipient_name".into(), m.into()))
        .ok();
    let reference = match &request.reference {
        None => None,
        Some(reference) => text("reference", reference, &mut errors),
    };
    match (method, amount, source, destination, recipient_name) {
        (
            Some(method),
            Some((currency, amount_minor)),
            Some(source),
            Some(destination),
            Some(recipient_name),
        ) if errors.is_empty() => Ok(NewSettlement {
            intent: SettlementIntent {
                merchant_id: caller.merchant_id.clone(),
                idempotency_key: SettlementKey::new(key.to_string()),
                method,
                currency: currency.code.to_owned(),
                amount_minor,
                asset,
                source,
                destination,
                recipient_name,
                reference,
                request_id: caller.request_id.clone(),
            },
            method,
            actor: caller.actor(),
        }),
        _ => Err(ApiError::Validation(errors)),
    }
}

/// What decides "the same request" for the key: the validated fields.
fn digest(new: &NewSettlement) -> String {
    let intent = &new.intent;
    let canonical = json!({
        "method": new.method.as_str(),
        "currency": intent.currency,
        "amount_minor": intent.amount_minor,
        "asset": intent.asset,
        "source": intent.source,
        "destination": intent.destination,
        "recipient_name": intent.recipient_name,
        "reference": intent.reference,
    });
    request_digest(&canonical.to_string())
}

fn location(key: &SettlementKey) -> String {
    format!("/v1/settlements/{key}")
}

/// Create a settlement. 201 once the intent, its ledger hold and the
/// idempotency record are durable; the settlement's actor executes it.
#[utoipa::path(post, path = "/v1/settlements", operation_id = "create_settlement", tag = "settlements", request_body = SubmitRequest,
    params(("Idempotency-Key" = String, Header, description = "UUID v4; the settlement's identifier")),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 201, body = Settlement, description = "Created (or replayed, with Idempotent-Replayed: true)",
            headers(("Location" = String, description = "The settlement's URL"))),
        (status = 400, description = "Malformed JSON, or a missing or malformed Idempotency-Key", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope settlements:write, or merchant suspended or disabled", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The first request with this Idempotency-Key is still running, or the key is a transfer leg's settlement key (code TRANSFER_LEG_KEY)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields, insufficient funds, an amount a ledger balance cannot hold (int64), or the key reused with another body", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Overloaded or no provider configured; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<AppState>,
    body: Result<JsonBody<SubmitRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let JsonBody(request) = body?;
    caller.require("settlements:write")?;
    caller.require_active()?;
    state
        .limits
        .check("settlement_submit", caller.limit_key())?;
    let key = match idempotency_key(&req) {
        Ok(key) => key,
        Err(malformed) => return Err(leg_key_or(&state, &caller, &req, malformed).await),
    };
    let registry = registry(&state)?.clone();
    let new = validate_submit(
        &request,
        key,
        &caller,
        state.config.settlement_amount_max_minor,
    )?;
    // A legacy leg's key is a UUID: only the set read at start knows it
    // before the leg's row exists.
    if state
        .legacy_leg_keys
        .contains(&caller.merchant_id, new.intent.idempotency_key.as_str())
    {
        return Err(idempotency::leg_key());
    }
    // The node owning the settlement's slot writes it and runs its actor;
    // any other forwards the request there (`http::forward`).
    let db = registry.local_db(&entity_id(&caller.merchant_id, &new.intent.idempotency_key))?;
    let submitted = submit(&db, &new, &digest(&new), |row| {
        serde_json::to_string(&view(row)).unwrap_or_default()
    })
    .await;
    match submitted {
        Ok(Submitted::Created { row, body }) => {
            let id = entity_id(&row.merchant_id, &row.idempotency_key);
            let created = (*row).clone();
            // The intent is durable: start executing without holding the
            // response. A failed activation is retried by recovery.
            // In a trace, the saga continues the request's.
            actix_web::rt::spawn(
                async move {
                    if let Err(error) = registry.activate_with(&id, created).await {
                        tracing::warn!(settlement = %id, %error, "settlement actor did not start");
                    }
                }
                .instrument(tern_actors::trace::current()),
            );
            tracing::info!(merchant_id = %row.merchant_id, settlement = %row.idempotency_key, method = %row.method, "settlement created");
            Ok(HttpResponse::Created()
                .insert_header((LOCATION, location(&row.idempotency_key)))
                .content_type("application/json")
                .body(body))
        }
        Ok(Submitted::Replay { status, body }) => {
            idempotency::replay(status, body, Some(location(&new.intent.idempotency_key)))
        }
        // A taken key is read back and answered as one of the above.
        Ok(Submitted::InProgress) | Err(SubmitError::KeyTaken) => Err(idempotency::in_progress()),
        Ok(Submitted::Mismatch) => Err(idempotency::mismatch()),
        Ok(Submitted::LegKey) => Err(idempotency::leg_key()),
        Err(SubmitError::Source(message)) => Err(ApiError::field("source", message)),
        Err(SubmitError::InsufficientFunds) => Err(ApiError::field(
            "amount",
            "exceeds the available balance of the source account",
        )),
        Err(SubmitError::Overflow) => Err(ApiError::field(
            "amount",
            format!(
                "{} {} would take a ledger balance past its limit of {} minor units",
                canonical_amount(&new.intent.currency, new.intent.amount_minor),
                new.intent.currency,
                i64::MAX
            ),
        )),
        Err(SubmitError::Store(error)) => Err(error.into()),
    }
}

/// Why an Idempotency-Key that is not a UUID v4 is refused: a transfer
/// leg's key of the caller's is a 409 that names it (a merchant reading a
/// leg's key in a transfer may try it), anything else `malformed` (400).
async fn leg_key_or(
    state: &AppState,
    caller: &Caller,
    req: &HttpRequest,
    malformed: ApiError,
) -> ApiError {
    let Some(raw) = idempotency::raw_idempotency_key(req) else {
        return malformed;
    };
    match is_leg_key_of(&state.db, &caller.merchant_id, &SettlementKey::new(raw)).await {
        Ok(true) => idempotency::leg_key(),
        Ok(false) => malformed,
        Err(error) => error.into(),
    }
}

/// List the merchant's settlements, newest first.
#[utoipa::path(get, path = "/v1/settlements", operation_id = "list_settlements", tag = "settlements", params(ListQuery),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = ListResponse),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope settlements:read, or merchant suspended or disabled", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid status filter or limit", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list(
    caller: Caller,
    state: web::Data<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require("settlements:read")?;
    caller.require_active()?;
    state
        .limits
        .check("settlement_read", caller.merchant_id.as_str())?;
    let mut errors = FieldErrors::new();
    let limit = validate::list_limit(query.limit, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, &mut errors);
    if let Some(status) = &query.status {
        if Status::parse(status).is_none() {
            errors.insert(
                "status".into(),
                "must be one of pending, in_flight, retrying, succeeded, failed, reversed".into(),
            );
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut pooled = state.db.get().await?;
    let rows = store::list(
        &mut pooled.tx(),
        &caller.merchant_id,
        // Validated above: `None` only when no filter was asked for.
        query.status.as_deref().and_then(Status::parse),
        limit,
    )
    .await?;
    let items: Vec<Settlement> = rows.iter().map(view).collect();
    Ok(HttpResponse::Ok().json(ListResponse {
        count: items.len(),
        items,
        limit,
        status: query.status,
    }))
}

/// Read a settlement by its idempotency key.
#[utoipa::path(get, path = "/v1/settlements/{id}", operation_id = "get_settlement", tag = "settlements",
    params(("id" = String, Path, description = "The settlement's idempotency key")),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = Settlement),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope settlements:read, or merchant suspended or disabled", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such settlement for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require("settlements:read")?;
    caller.require_active()?;
    state
        .limits
        .check("settlement_read", caller.merchant_id.as_str())?;
    let key = settlement_id(&path.into_inner());
    let mut pooled = state.db.get().await?;
    let found = store::find(&mut pooled.tx(), &caller.merchant_id, &key).await?;
    let row = caller.own(found, "settlement")?;
    Ok(HttpResponse::Ok().json(view(&row)))
}

/// Reverse a succeeded card_charge (refund) or card_push (reversal).
#[utoipa::path(post, path = "/v1/settlements/{id}/reverse", operation_id = "reverse_settlement", tag = "settlements", request_body = ReverseRequest,
    params(("id" = String, Path, description = "The settlement's idempotency key")),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = ReverseResponse, description = "Reversed at the provider"),
        (status = 202, description = "Reversal pending at the provider; it finishes later (type reversal-pending)", body = Problem, content_type = "application/problem+json"),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope settlements:reverse, or merchant suspended or disabled", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such settlement for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Not reversible (method, status, already reversed or under way, a transfer's leg: code TRANSFER_LEG), declined by the provider, or a refund beyond the available funds", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Missing or empty reason", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The provider is unreachable; nothing was reversed", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn reverse(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: Result<JsonBody<ReverseRequest>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let JsonBody(request) = body?;
    caller.require("settlements:reverse")?;
    caller.require_active()?;
    state
        .limits
        .check("settlement_reverse", caller.merchant_id.as_str())?;
    let mut errors = FieldErrors::new();
    let reason = text("reason", &request.reason, &mut errors);
    let key = settlement_id(&path.into_inner());
    let row = {
        let mut pooled = state.db.get().await?;
        let found = store::find(&mut pooled.tx(), &caller.merchant_id, &key).await?;
        caller.own(found, "settlement")?
    };
    let Some(reason) = reason else {
        return Err(ApiError::Validation(errors));
    };
    // A leg's refund belongs to its transfer's saga (compensation), which
    // sends the actor's Reverse itself; a merchant's refund beside it would
    // leave the transfer believing money it no longer holds.
    if let Some(transfer_id) = &row.transfer_id {
        return Err(ApiError::Conflict {
            code: Some("TRANSFER_LEG"),
            detail: format!(
                "this settlement is a leg of transfer {transfer_id}; the transfer refunds it itself"
            ),
        });
    }
    let command = SettlementCommand::Reverse {
        actor: caller.actor(),
        request_id: caller.request_id.clone(),
        reason,
    };
    let id = entity_id(&row.merchant_id, &row.idempotency_key);
    let SettlementReply::Reverse(outcome) = registry(&state)?.call(&id, command).await? else {
        return Err(ApiError::Internal(
            "the settlement actor answered off topic".into(),
        ));
    };
    match outcome {
        ReverseOutcome::Reversed(row) => Ok(HttpResponse::Ok().json(ReverseResponse {
            idempotency_key: row.idempotency_key.clone(),
            status: row.status.to_string(),
            attempt: row.attempt,
            action_code: row.action_code.clone(),
            approval_code: row.approval_code.clone(),
        })),
        ReverseOutcome::Pending(_) => Err(ApiError::ReversalPending(
            "the provider accepted the reversal and finishes it later; GET the settlement for its outcome".into(),
        )),
        // What the provider said may carry its internals (a transport
        // error, its response body): the log keeps it with the request id.
        ReverseOutcome::Declined { row, detail } => {
            tracing::warn!(settlement = %row.idempotency_key, %detail, "reversal declined");
            Err(ApiError::Conflict {
                code: Some("REVERSAL_DECLINED"),
                detail: match &row.action_code {
                    Some(code) => format!("the provider declined the reversal (action code {code})"),
                    None => "the provider declined the reversal".to_owned(),
                },
            })
        }
        ReverseOutcome::Unavailable(detail) => {
            tracing::warn!(%detail, "reversal provider unavailable");
            Err(ApiError::Overloaded {
                detail: "the provider could not be reached; nothing was reversed".into(),
                retry_after_s: 5,
            })
        }
        ReverseOutcome::Refused(rejected) => Err(ApiError::Conflict {
            code: Some("NOT_REVERSIBLE"),
            detail: rejected.to_string(),
        }),
        ReverseOutcome::InsufficientFunds => Err(ApiError::Conflict {
            code: Some("INSUFFICIENT_FUNDS"),
            detail: "a refund needs the merchant's available funds, and they do not cover it".into(),
        }),
    }
}

//! The simulated card issuer: issues Visa and Mastercard cards, mirrors
//! their status, reveals their secrets, signs embed URLs that show them, and
//! provisions mobile-wallet tokens whose outcome arrives later by a
//! `wallet_token.updated` webhook. The PAN and CVV live only in this
//! process's memory.
//!
//! Faults take target `issuer` and match on `card_id` (Tern's), `user_id`,
//! `wallet` (provisioning only) and `operation` (`issue`, `status`,
//! `wallet`):
//! - `decline`: issuing answers 422 `issue_declined`, a status change 422
//!   `status_declined`, provisioning 422 `wallet_not_supported` (the issuer
//!   does not offer that wallet). Nothing executes.
//! - `fail`: issuing and status changes answer 422 `processing_error` and
//!   execute nothing. Provisioning is accepted and its webhook later says
//!   `failed` instead of `active`: the wallet refused the token, which is
//!   how provisioning fails in the field.
//! - `transient`: 503, nothing executes.
//! - `timeout_after_success` and `slow`: executes, then answers late.
//!
//! The execution log shows `issue` under its idempotency key (Tern's card
//! id), `wallet` under its key (Tern's token id), and `status` under
//! `{provider_card_id}:{status}:{n}`, `n` counting that card's changes; a
//! status set to the one the card has executes nothing. Cards belong to no
//! settlement, so `settlement_key` is empty.
//!
//! Embed URLs are signed with a random key drawn at start (not the webhook
//! secret: Tern needs no way to forge them), so they stop working when the
//! simulator restarts, as the cards they show do.

use actix_web::http::header::CACHE_CONTROL;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::Datelike;
use hmac::{Hmac, KeyInit, Mac};
use serde::Deserialize;
use serde_json::json;
use sha2::Sha256;
use tern_actors::adapters::http::wire;
use tern_actors::ports::{CardNetwork, IssuerStatus, Wallet};

use super::acquirer::html_escape;
use super::store::{FaultMode, Operation, Record, RecordKey, Store, Stored, Target};
use super::{
    admit, answer_after, error, idempotency_key, not_found, simulated_failure, unavailable,
    Admission, Sandbox, SandboxError,
};

/// Longest text field accepted (ids, names, device ids).
pub(super) const TEXT_CHARS_MAX: usize = 255;
/// A card is valid this long from issuance.
const CARD_VALIDITY_YEARS: i32 = 3;
/// How far ahead an embed URL may expire; Tern's reveals last a minute.
pub const EMBED_TTL_SECONDS_MAX: i64 = 3_600;
/// The first six digits of the simulator's PANs, per network.
const VISA_PREFIX: &str = "424242";
const MASTERCARD_PREFIX: &str = "555555";
/// A PAN's account digits: 16 minus the prefix and the check digit.
const PAN_ACCOUNT_SPACE: u64 = 1_000_000_000;
/// 3^18: coprime to 10, so multiplying by it modulo 10^9 is a bijection and
/// successive cards get distinct, unsequential-looking account digits.
const PAN_SCRAMBLE: u64 = 387_420_489;
const EMBED_PATH: &str = "/issuer/embed";

type HmacSha256 = Hmac<Sha256>;

pub(super) fn routes(cfg: &mut web::ServiceConfig) {
    // By-key first: `/issuer/cards/by-key/secrets` is a lookup, not the
    // secrets of a card called `by-key`.
    cfg.route(
        &wire::path_issued_by_key("{idempotency_key}"),
        web::get().to(by_key),
    )
    .route(wire::PATH_ISSUER_CARDS, web::post().to(issue))
    .route(
        &wire::path_issuer_card("{provider_card_id}", "status"),
        web::post().to(set_status),
    )
    .route(
        &wire::path_issuer_card("{provider_card_id}", "secrets"),
        web::get().to(secrets),
    )
    .route(
        &wire::path_issuer_card("{provider_card_id}", "embed"),
        web::post().to(embed_url),
    )
    .route(
        &wire::path_issuer_card("{provider_card_id}", "wallets"),
        web::post().to(provision),
    )
    .route(
        &format!("{EMBED_PATH}/{{provider_card_id}}"),
        web::get().to(embed_page),
    );
}

fn at(operation: Operation, key: &str) -> RecordKey {
    RecordKey {
        target: Target::Issuer,
        operation,
        scope: "",
        key: key.to_owned(),
    }
}

fn stored_answer(record: &Record) -> HttpResponse {
    match &record.stored {
        Stored::IssuedCard { card, .. } => HttpResponse::Ok().json(card),
        Stored::WalletToken(token) => HttpResponse::Ok().json(token),
        _ => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "record of another kind",
        ),
    }
}

fn no_such_card() -> HttpResponse {
    error(StatusCode::NOT_FOUND, wire::CODE_NOT_FOUND, "no such card")
}

/// 1 to [`TEXT_CHARS_MAX`] characters, not all blank.
pub(super) fn check_text(field: &str, value: &str) -> Result<(), SandboxError> {
    if !value.trim().is_empty() && value.chars().count() <= TEXT_CHARS_MAX {
        return Ok(());
    }
    Err(SandboxError::new(
        StatusCode::BAD_REQUEST,
        "invalid_field",
        &format!("{field} must be 1 to {TEXT_CHARS_MAX} characters"),
    ))
}

/// The Luhn check digit completing `payload` (digits only).
fn luhn_check_digit(payload: &str) -> u32 {
    let sum: u32 = payload
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let digit = u32::from(b - b'0');
            if i % 2 == 0 {
                let doubled = digit * 2;
                doubled / 10 + doubled % 10
            } else {
                digit
            }
        })
        .sum();
    (10 - sum % 10) % 10
}

/// The PAN of the `ordinal`th card issued since start: unique for the first
/// 10^9 cards, far beyond the simulator's record limit.
fn pan(network: CardNetwork, ordinal: u64) -> String {
    let prefix = match network {
        CardNetwork::Visa => VISA_PREFIX,
        CardNetwork::Mastercard => MASTERCARD_PREFIX,
    };
    let account = (ordinal % PAN_ACCOUNT_SPACE) * PAN_SCRAMBLE % PAN_ACCOUNT_SPACE;
    let payload = format!("{prefix}{account:09}");
    let check = luhn_check_digit(&payload);
    format!("{payload}{check}")
}

fn check_issue(body: &wire::IssueCardRequest) -> Result<CardNetwork, SandboxError> {
    for (field, value) in [
        ("card_id", &body.card_id),
        ("user_id", &body.user_id),
        ("program_id", &body.program_id),
        ("cardholder", &body.cardholder),
    ] {
        check_text(field, value)?;
    }
    let invalid =
        |message: &str| SandboxError::new(StatusCode::BAD_REQUEST, "invalid_card", message);
    if !matches!(body.card_type.as_str(), "virtual" | "physical") {
        return Err(invalid("type must be virtual or physical"));
    }
    let currency_ok =
        body.currency.len() == 3 && body.currency.bytes().all(|b| b.is_ascii_uppercase());
    if !currency_ok {
        return Err(invalid("currency must be three upper-case letters"));
    }
    CardNetwork::parse(&body.network).ok_or_else(|| invalid("network must be visa or mastercard"))
}

#[tracing::instrument(skip_all, fields(key))]
async fn issue(
    sandbox: web::Data<Sandbox>,
    request: HttpRequest,
    body: web::Json<wire::IssueCardRequest>,
) -> Result<HttpResponse, SandboxError> {
    let key = idempotency_key(&request)?;
    tracing::Span::current().record("key", key.as_str());
    let body = body.into_inner();
    let network = check_issue(&body)?;
    let outcome = execute_issue(&sandbox, &key, network, body);
    Ok(answer_after(&sandbox.config, outcome).await)
}

/// Runs under the lock with no await, so checking the key, executing and
/// storing the result are one atomic step.
fn execute_issue(
    sandbox: &Sandbox,
    key: &str,
    network: CardNetwork,
    body: wire::IssueCardRequest,
) -> (HttpResponse, Option<FaultMode>) {
    let record_at = at(Operation::Issue, key);
    let mut store = sandbox.lock();
    let fingerprint = match admit(&mut store, &record_at, &body, stored_answer) {
        Admission::New(fingerprint) => fingerprint,
        Admission::Answer(response) => return (response, None),
    };
    let fields = [
        ("card_id", body.card_id.as_str()),
        ("user_id", body.user_id.as_str()),
    ];
    let fault = store.take_fault(Target::Issuer, Operation::Issue, &fields);
    match fault {
        Some(FaultMode::Transient) => return (unavailable("simulated transient failure"), None),
        Some(FaultMode::Decline) => {
            let message = "the issuer declined to issue the card";
            return (
                error(StatusCode::UNPROCESSABLE_ENTITY, "issue_declined", message),
                None,
            );
        }
        Some(FaultMode::Fail) => return (simulated_failure(), None),
        _ => {}
    }
    store.cards_issued += 1;
    let pan = pan(network, store.cards_issued);
    let now = chrono::Utc::now();
    // A month is 1 to 12: the cast cannot truncate.
    let expiry_month = now.month() as i32;
    let expiry_year = now.year() + CARD_VALIDITY_YEARS;
    let card = wire::IssuedCard {
        id: format!("ic_{}", uuid::Uuid::new_v4().simple()),
        card_id: body.card_id,
        status: IssuerStatus::Active.as_str().into(),
        network: network.as_str().into(),
        // A PAN is ASCII digits: its length counts its characters.
        last_four: pan.chars().skip(pan.len().saturating_sub(4)).collect(),
        expiry_month,
        expiry_year,
    };
    let secrets = wire::CardSecrets {
        pan,
        cvv: sandbox.ids.digits("cvv", key, 3),
        expiry_month,
        expiry_year,
    };
    store
        .by_provider_card_id
        .insert(card.id.clone(), record_at.clone());
    let response = HttpResponse::Ok().json(&card);
    let stored = Stored::IssuedCard {
        card,
        secrets,
        user_id: body.user_id,
        cardholder: body.cardholder,
        status_changes: 0,
    };
    let record = Record {
        fingerprint,
        settlement_key: String::new(),
        stored,
    };
    store.insert(record_at, record, now);
    (response, fault)
}

async fn by_key(sandbox: web::Data<Sandbox>, path: web::Path<String>) -> HttpResponse {
    let store = sandbox.lock();
    match store.get(&at(Operation::Issue, &path)) {
        Some(record) => stored_answer(record),
        None => not_found(),
    }
}

/// What the simulator knows of one issued card.
struct CardView<'a> {
    card: &'a wire::IssuedCard,
    secrets: &'a wire::CardSecrets,
    user_id: &'a str,
    cardholder: &'a str,
}

fn issued<'a>(store: &'a Store, provider_card_id: &str) -> Option<CardView<'a>> {
    let record_at = store.by_provider_card_id.get(provider_card_id)?;
    match &store.get(record_at)?.stored {
        Stored::IssuedCard {
            card,
            secrets,
            user_id,
            cardholder,
            ..
        } => Some(CardView {
            card,
            secrets,
            user_id,
            cardholder,
        }),
        _ => None,
    }
}

fn parse_status(value: &str) -> Option<IssuerStatus> {
    [
        IssuerStatus::Active,
        IssuerStatus::Frozen,
        IssuerStatus::Blocked,
        IssuerStatus::Closed,
    ]
    .into_iter()
    .find(|s| s.as_str() == value)
}

#[tracing::instrument(skip_all, fields(provider_card_id))]
async fn set_status(
    sandbox: web::Data<Sandbox>,
    path: web::Path<String>,
    body: web::Json<wire::CardStatusRequest>,
) -> Result<HttpResponse, SandboxError> {
    let provider_card_id = path.into_inner();
    tracing::Span::current().record("provider_card_id", provider_card_id.as_str());
    let status = parse_status(&body.status).ok_or_else(|| {
        SandboxError::new(
            StatusCode::BAD_REQUEST,
            "invalid_status",
            "status must be active, frozen, blocked or closed",
        )
    })?;
    let outcome = execute_status(&sandbox, &provider_card_id, status);
    Ok(answer_after(&sandbox.config, outcome).await)
}

/// Runs under the lock with no await. Setting the status the card already
/// has answers success and executes nothing, so a retry is always safe.
fn execute_status(
    sandbox: &Sandbox,
    provider_card_id: &str,
    status: IssuerStatus,
) -> (HttpResponse, Option<FaultMode>) {
    let mut store = sandbox.lock();
    let Some(view) = issued(&store, provider_card_id) else {
        return (no_such_card(), None);
    };
    let (card_id, user_id) = (view.card.card_id.clone(), view.user_id.to_owned());
    let current = view.card.status.clone();
    let fields = [("card_id", card_id.as_str()), ("user_id", user_id.as_str())];
    let fault = store.take_fault(Target::Issuer, Operation::Status, &fields);
    match fault {
        Some(FaultMode::Transient) => return (unavailable("simulated transient failure"), None),
        Some(FaultMode::Decline) => {
            let message = "the issuer declined the status change";
            return (
                error(StatusCode::UNPROCESSABLE_ENTITY, "status_declined", message),
                None,
            );
        }
        Some(FaultMode::Fail) => return (simulated_failure(), None),
        _ => {}
    }
    let answer = wire::CardStatus {
        id: provider_card_id.to_owned(),
        status: status.as_str().into(),
    };
    if current == status.as_str() {
        return (HttpResponse::Ok().json(&answer), fault);
    }
    if current == IssuerStatus::Closed.as_str() {
        let message = "a closed card stays closed";
        return (error(StatusCode::CONFLICT, "card_closed", message), None);
    }
    let now = chrono::Utc::now();
    if store.check_room(now).is_err() {
        return (
            unavailable("the simulator holds its maximum of records"),
            None,
        );
    }
    // Making room may have forgotten the card itself: look again.
    let card_at = store.by_provider_card_id.get(provider_card_id).cloned();
    let changes = match card_at.as_ref().and_then(|a| store.get_mut(a)) {
        Some(Record {
            stored:
                Stored::IssuedCard {
                    card,
                    status_changes,
                    ..
                },
            ..
        }) => {
            card.status = status.as_str().into();
            *status_changes += 1;
            *status_changes
        }
        _ => return (no_such_card(), None),
    };
    let record_at = at(
        Operation::Status,
        &format!("{provider_card_id}:{}:{changes}", status.as_str()),
    );
    let response = HttpResponse::Ok().json(&answer);
    let record = Record {
        fingerprint: String::new(),
        settlement_key: String::new(),
        stored: Stored::CardStatus(answer),
    };
    store.insert(record_at, record, now);
    (response, fault)
}

async fn secrets(sandbox: web::Data<Sandbox>, path: web::Path<String>) -> HttpResponse {
    let store = sandbox.lock();
    match issued(&store, &path) {
        Some(view) => HttpResponse::Ok()
            .insert_header((CACHE_CONTROL, "no-store"))
            .json(view.secrets),
        None => no_such_card(),
    }
}

/// A browser origin exactly as browsers serialise it (`scheme://host[:port]`,
/// no path): anything else could smuggle text into the page's CSP header.
fn origin_valid(origin: &str) -> bool {
    url::Url::parse(origin).is_ok_and(|url| {
        matches!(url.scheme(), "http" | "https") && url.origin().ascii_serialization() == origin
    })
}

fn embed_mac(key: &[u8], provider_card_id: &str, origin: &str, expires: i64) -> HmacSha256 {
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC-SHA256 takes keys of any length"),
    };
    mac.update(format!("{provider_card_id}.{origin}.{expires}").as_bytes());
    mac
}

/// Hex HMAC-SHA256 of `"{provider_card_id}.{origin}.{expires}"`.
fn embed_signature(key: &[u8], provider_card_id: &str, origin: &str, expires: i64) -> String {
    hex::encode(
        embed_mac(key, provider_card_id, origin, expires)
            .finalize()
            .into_bytes(),
    )
}

/// Compared in constant time, so the page leaks nothing about a valid one.
fn embed_signature_valid(
    key: &[u8],
    provider_card_id: &str,
    origin: &str,
    expires: i64,
    signature: &str,
) -> bool {
    hex::decode(signature).is_ok_and(|bytes| {
        embed_mac(key, provider_card_id, origin, expires)
            .verify_slice(&bytes)
            .is_ok()
    })
}

fn query_encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

#[tracing::instrument(skip_all, fields(provider_card_id))]
async fn embed_url(
    sandbox: web::Data<Sandbox>,
    path: web::Path<String>,
    body: web::Json<wire::EmbedUrlRequest>,
) -> Result<HttpResponse, SandboxError> {
    let provider_card_id = path.into_inner();
    tracing::Span::current().record("provider_card_id", provider_card_id.as_str());
    let body = body.into_inner();
    if !origin_valid(&body.target_origin) {
        return Err(SandboxError::new(
            StatusCode::BAD_REQUEST,
            "invalid_origin",
            "target_origin must be a browser origin: scheme://host[:port], no path",
        ));
    }
    let now = chrono::Utc::now().timestamp();
    if body.expires_at <= now || body.expires_at > now + EMBED_TTL_SECONDS_MAX {
        return Err(SandboxError::new(
            StatusCode::BAD_REQUEST,
            "invalid_expiry",
            &format!("expires_at must be within {EMBED_TTL_SECONDS_MAX} seconds from now"),
        ));
    }
    if issued(&sandbox.lock(), &provider_card_id).is_none() {
        return Ok(no_such_card());
    }
    let signature = embed_signature(
        &sandbox.embed_key,
        &provider_card_id,
        &body.target_origin,
        body.expires_at,
    );
    let url = format!(
        "{}{EMBED_PATH}/{}?origin={}&expires={}&sig={signature}",
        sandbox.public_base_url,
        query_encode(&provider_card_id),
        query_encode(&body.target_origin),
        body.expires_at,
    );
    Ok(HttpResponse::Ok().json(wire::EmbedUrl { url }))
}

#[derive(Deserialize)]
struct EmbedQuery {
    origin: String,
    expires: i64,
    sig: String,
}

async fn embed_page(
    sandbox: web::Data<Sandbox>,
    path: web::Path<String>,
    query: web::Query<EmbedQuery>,
) -> HttpResponse {
    let query = query.into_inner();
    let signed = embed_signature_valid(
        &sandbox.embed_key,
        &path,
        &query.origin,
        query.expires,
        &query.sig,
    );
    // The origin was checked when signed; checking again costs nothing and
    // keeps the header safe should the signing rule ever loosen.
    if !signed || !origin_valid(&query.origin) {
        let message = "the embed URL's signature does not match";
        return error(StatusCode::FORBIDDEN, "invalid_signature", message);
    }
    if chrono::Utc::now().timestamp() >= query.expires {
        return error(StatusCode::GONE, "expired", "the embed URL has expired");
    }
    let store = sandbox.lock();
    let Some(view) = issued(&store, &path) else {
        return no_such_card();
    };
    let page = card_page(&view);
    drop(store);
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((
            "Content-Security-Policy",
            format!("frame-ancestors {}", query.origin),
        ))
        .insert_header((CACHE_CONTROL, "no-store"))
        // The URL carries its signature; a followed link must not leak it.
        .insert_header(("Referrer-Policy", "no-referrer"))
        .body(page)
}

fn card_page(view: &CardView<'_>) -> String {
    let pan = view
        .secrets
        .pan
        .as_bytes()
        .chunks(4)
        .map(|group| String::from_utf8_lossy(group).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let network = CardNetwork::parse(&view.card.network).map_or("Card", |n| n.display_name());
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Card details</title></head>\
         <body><p>{network}</p><p><code>{pan}</code></p>\
         <p>Expires {month:02}/{year:02} &middot; CVV <code>{cvv}</code></p>\
         <p>{cardholder}</p></body></html>\n",
        cvv = html_escape(&view.secrets.cvv),
        month = view.secrets.expiry_month,
        year = view.secrets.expiry_year % 100,
        cardholder = html_escape(view.cardholder),
    )
}

#[tracing::instrument(skip_all, fields(key, provider_card_id))]
async fn provision(
    sandbox: web::Data<Sandbox>,
    request: HttpRequest,
    path: web::Path<String>,
    body: web::Json<wire::WalletTokenRequest>,
) -> Result<HttpResponse, SandboxError> {
    let key = idempotency_key(&request)?;
    let provider_card_id = path.into_inner();
    let span = tracing::Span::current();
    span.record("key", key.as_str());
    span.record("provider_card_id", provider_card_id.as_str());
    let body = body.into_inner();
    check_text("card_id", &body.card_id)?;
    if let Some(device_id) = &body.device_id {
        check_text("device_id", device_id)?;
    }
    let wallet = Wallet::parse(&body.wallet).ok_or_else(|| {
        SandboxError::new(
            StatusCode::BAD_REQUEST,
            "invalid_wallet",
            "wallet must be apple_pay or google_pay",
        )
    })?;
    let outcome = execute_provision(&sandbox, &key, &provider_card_id, wallet, body);
    Ok(answer_after(&sandbox.config, outcome).await)
}

/// Runs under the lock with no await, so checking the key, executing and
/// storing the result are one atomic step.
fn execute_provision(
    sandbox: &web::Data<Sandbox>,
    key: &str,
    provider_card_id: &str,
    wallet: Wallet,
    body: wire::WalletTokenRequest,
) -> (HttpResponse, Option<FaultMode>) {
    let record_at = at(Operation::Wallet, key);
    let mut store = sandbox.lock();
    // The card is part of the request: the same key for another card conflicts.
    let request = (provider_card_id, &body);
    let fingerprint = match admit(&mut store, &record_at, &request, stored_answer) {
        Admission::New(fingerprint) => fingerprint,
        Admission::Answer(response) => return (response, None),
    };
    let Some(view) = issued(&store, provider_card_id) else {
        return (no_such_card(), None);
    };
    if view.card.card_id != body.card_id {
        let message = "card_id is not the card's";
        return (
            error(StatusCode::UNPROCESSABLE_ENTITY, "card_mismatch", message),
            None,
        );
    }
    let closed = IssuerStatus::Closed.as_str();
    if [closed, IssuerStatus::Blocked.as_str()].contains(&view.card.status.as_str()) {
        let message = "a blocked or closed card cannot be provisioned";
        return (error(StatusCode::CONFLICT, "card_inactive", message), None);
    }
    let user_id = view.user_id.to_owned();
    let fields = [
        ("wallet", wallet.as_str()),
        ("card_id", body.card_id.as_str()),
        ("user_id", user_id.as_str()),
    ];
    let fault = store.take_fault(Target::Issuer, Operation::Wallet, &fields);
    match fault {
        Some(FaultMode::Transient) => return (unavailable("simulated transient failure"), None),
        Some(FaultMode::Decline) => {
            let message = format!("this issuer does not provision {}", wallet.as_str());
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            return (
                error(status, wire::CODE_WALLET_NOT_SUPPORTED, &message),
                None,
            );
        }
        _ => {}
    }
    let token = wire::WalletToken {
        status: "requested".into(),
        provider_token_id: format!("wt_{}", uuid::Uuid::new_v4().simple()),
    };
    let outcome = if fault == Some(FaultMode::Fail) {
        "failed"
    } else {
        "active"
    };
    let data = json!({
        "card_id": body.card_id,
        "token_id": key,
        "provider_token_id": token.provider_token_id,
        "wallet": wallet.as_str(),
        "status": outcome,
    });
    update_token_later(sandbox.clone(), key.to_owned(), data);
    let response = HttpResponse::Ok().json(&token);
    let record = Record {
        fingerprint,
        settlement_key: String::new(),
        stored: Stored::WalletToken(token),
    };
    store.insert(record_at, record, chrono::Utc::now());
    (response, fault)
}

/// The wallet's verdict reaches Tern after the configured delay, as a real
/// token network's does.
fn update_token_later(sandbox: web::Data<Sandbox>, key: String, data: serde_json::Value) {
    actix_web::rt::spawn(async move {
        actix_web::rt::time::sleep(sandbox.config.pending_delay).await;
        let id = sandbox.ids.id("evt_", "wallet_token.updated", &key);
        sandbox.webhooks.send(id, "wallet_token.updated", data);
    });
}

#[cfg(test)]
mod tests;

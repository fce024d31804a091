//! The simulated card acquirer: charges by payment-method token (decisions
//! §7), the 3DS challenge, refunds, and lookup by idempotency key.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;
use tern_actors::adapters::http::wire::{self, ChargeStatus, RefundStatus};
use tern_actors::ports::NEXT_ACTION_REDIRECT_TO_URL;

use super::store::{FaultMode, Operation, Record, RecordKey, Stored, Target};
use super::{
    admit, answer_after, error, idempotency_key, not_found, simulated_failure, unavailable,
    Admission, KeyQuery, Sandbox, SandboxError,
};

pub(super) fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route(wire::PATH_CHARGES, web::post().to(charge))
        .route(wire::PATH_CHARGE_LOOKUP, web::get().to(lookup_charge))
        .route(wire::PATH_REFUNDS, web::post().to(refund))
        .route(wire::PATH_REFUND_LOOKUP, web::get().to(lookup_refund))
        .route("/3ds/{client_secret}", web::get().to(challenge_page))
        .route("/3ds/{client_secret}/approve", web::post().to(approve))
        .route("/3ds/{client_secret}/decline", web::post().to(decline));
}

fn at(operation: Operation, key: &str) -> RecordKey {
    RecordKey {
        target: Target::Acquirer,
        operation,
        scope: "",
        key: key.to_owned(),
    }
}

fn stored_answer(record: &Record) -> HttpResponse {
    match &record.stored {
        Stored::Charge { charge, .. } => HttpResponse::Ok().json(charge),
        Stored::Refund(refund) => HttpResponse::Ok().json(refund),
        _ => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "record of another kind",
        ),
    }
}

pub(super) fn check_amount(amount_minor: i64, currency: &str) -> Result<(), SandboxError> {
    let valid =
        amount_minor > 0 && currency.len() == 3 && currency.bytes().all(|b| b.is_ascii_uppercase());
    if valid {
        return Ok(());
    }
    Err(SandboxError::new(
        StatusCode::BAD_REQUEST,
        "invalid_amount",
        "amount_minor must be positive and currency three upper-case letters",
    ))
}

/// The outcome of a token, before faults (decisions §7).
fn token_outcome(
    payment_method: &str,
    off_session: bool,
) -> Result<(), (&'static str, &'static str)> {
    match payment_method {
        "pm_card_visa" | "pm_card_mastercard" => Ok(()),
        "pm_card_threeDSecureRequired" if off_session => Err((
            "authentication_required",
            "the card requires authentication and the charge is off-session",
        )),
        "pm_card_threeDSecureRequired" => Err(("challenge", "")),
        "pm_card_chargeDeclined" => Err(("card_declined", "the card was declined")),
        "pm_card_chargeDeclinedInsufficientFunds" => {
            Err(("insufficient_funds", "the card has insufficient funds"))
        }
        _ => Err(("invalid_payment_method", "unknown payment method")),
    }
}

#[tracing::instrument(skip_all, fields(key))]
async fn charge(
    sandbox: web::Data<Sandbox>,
    request: HttpRequest,
    body: web::Json<wire::ChargeRequest>,
) -> Result<HttpResponse, SandboxError> {
    let key = idempotency_key(&request)?;
    tracing::Span::current().record("key", key.as_str());
    let body = body.into_inner();
    check_amount(body.amount_minor, &body.currency)?;
    let outcome = execute_charge(&sandbox, &key, body);
    Ok(answer_after(&sandbox.config, outcome).await)
}

/// Runs under the lock with no await, so checking the key, executing and
/// storing the result are one atomic step.
fn execute_charge(
    sandbox: &web::Data<Sandbox>,
    key: &str,
    body: wire::ChargeRequest,
) -> (HttpResponse, Option<FaultMode>) {
    let record_at = at(Operation::Charge, key);
    let mut store = sandbox.lock();
    let fingerprint = match admit(&mut store, &record_at, &body, stored_answer) {
        Admission::New(fingerprint) => fingerprint,
        Admission::Answer(response) => return (response, None),
    };
    let fields = [
        ("payment_method", body.payment_method.as_str()),
        ("destination", body.payment_method.as_str()),
        ("settlement_key", body.metadata.settlement_key.as_str()),
    ];
    let fault = store.take_fault(Target::Acquirer, Operation::Charge, &fields);
    match fault {
        Some(FaultMode::Transient) => return (unavailable("simulated transient failure"), None),
        Some(FaultMode::Fail) => return (simulated_failure(), None),
        _ => {}
    }
    let ids = &sandbox.ids;
    let mut charge = wire::Charge {
        id: ids.id("ch_", "charge", key),
        status: ChargeStatus::Succeeded,
        amount_minor: body.amount_minor,
        currency: body.currency.clone(),
        client_secret: None,
        next_action: None,
        decline_code: None,
        failure_message: None,
    };
    let outcome = if fault == Some(FaultMode::Decline) {
        Err(("card_declined", "the card was declined"))
    } else {
        token_outcome(&body.payment_method, body.off_session)
    };
    match outcome {
        Ok(()) => {}
        Err(("challenge", _)) => {
            let secret = format!("{}_secret_{}", charge.id, ids.hex64("client_secret", key));
            charge.status = ChargeStatus::RequiresAction;
            charge.next_action = Some(wire::NextAction {
                kind: NEXT_ACTION_REDIRECT_TO_URL.into(),
                redirect_url: format!("{}/3ds/{secret}", sandbox.public_base_url),
            });
            store
                .by_client_secret
                .insert(secret.clone(), record_at.clone());
            charge.client_secret = Some(secret);
        }
        Err((code, reason)) => {
            charge.status = ChargeStatus::Declined;
            charge.decline_code = Some(code.into());
            charge.failure_message = Some(reason.into());
        }
    }
    store
        .by_charge_id
        .insert(charge.id.clone(), record_at.clone());
    let response = HttpResponse::Ok().json(&charge);
    let record = Record {
        fingerprint,
        settlement_key: body.metadata.settlement_key,
        stored: Stored::Charge {
            charge,
            payment_method: body.payment_method,
            refunded_minor: 0,
        },
    };
    store.insert(record_at, record, chrono::Utc::now());
    (response, fault)
}

#[tracing::instrument(skip_all, fields(key))]
async fn refund(
    sandbox: web::Data<Sandbox>,
    request: HttpRequest,
    body: web::Json<wire::RefundRequest>,
) -> Result<HttpResponse, SandboxError> {
    let key = idempotency_key(&request)?;
    tracing::Span::current().record("key", key.as_str());
    let body = body.into_inner();
    check_amount(body.amount_minor, &body.currency)?;
    let outcome = execute_refund(&sandbox, &key, body);
    Ok(answer_after(&sandbox.config, outcome).await)
}

/// Runs under the lock with no await, so checking the key, executing and
/// storing the result are one atomic step.
fn execute_refund(
    sandbox: &web::Data<Sandbox>,
    key: &str,
    body: wire::RefundRequest,
) -> (HttpResponse, Option<FaultMode>) {
    let record_at = at(Operation::Refund, key);
    let mut store = sandbox.lock();
    let fingerprint = match admit(&mut store, &record_at, &body, stored_answer) {
        Admission::New(fingerprint) => fingerprint,
        Admission::Answer(response) => return (response, None),
    };
    let charge_at = store.by_charge_id.get(&body.charge_id).cloned();
    let payment_method = match charge_at.as_ref().and_then(|a| store.get(a)) {
        Some(Record {
            stored: Stored::Charge { payment_method, .. },
            ..
        }) => payment_method.clone(),
        _ => String::new(),
    };
    let fields = [
        ("payment_method", payment_method.as_str()),
        ("destination", payment_method.as_str()),
        ("settlement_key", body.metadata.settlement_key.as_str()),
    ];
    let fault = store.take_fault(Target::Acquirer, Operation::Refund, &fields);
    match fault {
        Some(FaultMode::Transient) => return (unavailable("simulated transient failure"), None),
        Some(FaultMode::Fail) => return (simulated_failure(), None),
        _ => {}
    }
    let mut refund = wire::Refund {
        id: sandbox.ids.id("re_", "refund", key),
        status: RefundStatus::Succeeded,
        charge_id: body.charge_id.clone(),
        amount_minor: body.amount_minor,
        decline_code: None,
        failure_message: None,
    };
    let refusal = match (fault, charge_at.as_ref().and_then(|a| store.get_mut(a))) {
        (Some(FaultMode::Decline), _) => Some(("refund_declined", "the refund was declined")),
        (
            _,
            Some(Record {
                stored:
                    Stored::Charge {
                        charge,
                        refunded_minor,
                        ..
                    },
                ..
            }),
        ) => {
            if charge.status != ChargeStatus::Succeeded {
                Some((
                    "charge_not_succeeded",
                    "only a succeeded charge can be refunded",
                ))
            } else if charge.currency != body.currency {
                Some((
                    "currency_mismatch",
                    "the refund's currency differs from the charge's",
                ))
            } else if body.amount_minor > charge.amount_minor - *refunded_minor {
                Some((
                    "amount_too_large",
                    "the refund exceeds the charge's unrefunded amount",
                ))
            } else {
                *refunded_minor += body.amount_minor;
                None
            }
        }
        (_, _) => Some(("charge_not_found", "no such charge")),
    };
    if let Some((code, reason)) = refusal {
        refund.status = RefundStatus::Declined;
        refund.decline_code = Some(code.into());
        refund.failure_message = Some(reason.into());
    } else if fault == Some(FaultMode::ReversalPending) {
        refund.status = RefundStatus::Pending;
        complete_refund_later(sandbox.clone(), record_at.clone());
    }
    let response = HttpResponse::Ok().json(&refund);
    let record = Record {
        fingerprint,
        settlement_key: body.metadata.settlement_key,
        stored: Stored::Refund(refund),
    };
    store.insert(record_at, record, chrono::Utc::now());
    (response, fault)
}

/// A pending refund succeeds after the configured delay and Tern hears of
/// it by `refund.succeeded`.
fn complete_refund_later(sandbox: web::Data<Sandbox>, record_at: RecordKey) {
    actix_web::rt::spawn(async move {
        actix_web::rt::time::sleep(sandbox.config.pending_delay).await;
        let mut store = sandbox.lock();
        let Some(record) = store.get_mut(&record_at) else {
            return;
        };
        let settlement_key = record.settlement_key.clone();
        if let Stored::Refund(refund) = &mut record.stored {
            refund.status = RefundStatus::Succeeded;
            let data = json!({
                "refund_id": refund.id,
                "charge_id": refund.charge_id,
                "amount_minor": refund.amount_minor,
                "status": "succeeded",
                "idempotency_key": record_at.key,
                "settlement_key": settlement_key,
            });
            let id = sandbox.ids.id("evt_", "refund.succeeded", &record_at.key);
            sandbox.webhooks.send(id, "refund.succeeded", data);
        }
    });
}

async fn lookup_charge(sandbox: web::Data<Sandbox>, query: web::Query<KeyQuery>) -> HttpResponse {
    let store = sandbox.lock();
    match store.get(&at(Operation::Charge, &query.idempotency_key)) {
        Some(record) => stored_answer(record),
        None => not_found(),
    }
}

async fn lookup_refund(sandbox: web::Data<Sandbox>, query: web::Query<KeyQuery>) -> HttpResponse {
    let store = sandbox.lock();
    match store.get(&at(Operation::Refund, &query.idempotency_key)) {
        Some(record) => stored_answer(record),
        None => not_found(),
    }
}

/// Escapes the few characters that matter inside HTML attributes and text.
pub(super) fn html_escape(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn challenge_page(sandbox: web::Data<Sandbox>, path: web::Path<String>) -> HttpResponse {
    let secret = path.into_inner();
    let store = sandbox.lock();
    let charge = store
        .by_client_secret
        .get(&secret)
        .and_then(|at| store.get(at))
        .and_then(|record| match &record.stored {
            Stored::Charge { charge, .. } => Some(charge.clone()),
            _ => None,
        });
    drop(store);
    let Some(charge) = charge else {
        return error(
            StatusCode::NOT_FOUND,
            wire::CODE_NOT_FOUND,
            "no such challenge",
        );
    };
    let secret = html_escape(&secret);
    let page = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Sandbox 3-D Secure</title></head>\
         <body><h1>Sandbox 3-D Secure challenge</h1>\
         <p>Charge <code>{id}</code>: {amount} minor units of {currency}, status {status:?}.</p>\
         <form method=\"post\" action=\"/3ds/{secret}/approve\"><button type=\"submit\">Approve</button></form>\
         <form method=\"post\" action=\"/3ds/{secret}/decline\"><button type=\"submit\">Decline</button></form>\
         </body></html>\n",
        id = html_escape(&charge.id),
        amount = charge.amount_minor,
        currency = html_escape(&charge.currency),
        status = charge.status,
    );
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(page)
}

async fn approve(sandbox: web::Data<Sandbox>, path: web::Path<String>) -> HttpResponse {
    finish_challenge(&sandbox, &path.into_inner(), true)
}

async fn decline(sandbox: web::Data<Sandbox>, path: web::Path<String>) -> HttpResponse {
    finish_challenge(&sandbox, &path.into_inner(), false)
}

/// Settles a challenge once; repeating the same decision answers the same,
/// the opposite decision afterwards is 409.
fn finish_challenge(sandbox: &Sandbox, secret: &str, approved: bool) -> HttpResponse {
    let mut store = sandbox.lock();
    let Some(record_at) = store.by_client_secret.get(secret).cloned() else {
        return error(
            StatusCode::NOT_FOUND,
            wire::CODE_NOT_FOUND,
            "no such challenge",
        );
    };
    let Some(record) = store.get_mut(&record_at) else {
        return error(
            StatusCode::NOT_FOUND,
            wire::CODE_NOT_FOUND,
            "no such challenge",
        );
    };
    let settlement_key = record.settlement_key.clone();
    let Stored::Charge { charge, .. } = &mut record.stored else {
        return error(
            StatusCode::NOT_FOUND,
            wire::CODE_NOT_FOUND,
            "no such challenge",
        );
    };
    let wanted = if approved {
        ChargeStatus::Succeeded
    } else {
        ChargeStatus::Declined
    };
    if charge.status == wanted {
        return HttpResponse::Ok().json(&*charge);
    }
    if charge.status != ChargeStatus::RequiresAction {
        return error(
            StatusCode::CONFLICT,
            "challenge_finished",
            "the challenge was already decided",
        );
    }
    charge.status = wanted;
    charge.next_action = None;
    if !approved {
        charge.decline_code = Some("authentication_failed".into());
        charge.failure_message = Some("the payer declined the challenge".into());
    }
    let kind = if approved {
        "payment.succeeded"
    } else {
        "payment.failed"
    };
    let data = json!({
        "charge_id": charge.id,
        "amount_minor": charge.amount_minor,
        "currency": charge.currency,
        "status": if approved { "succeeded" } else { "failed" },
        "decline_code": charge.decline_code,
        "idempotency_key": record_at.key,
        "settlement_key": settlement_key,
    });
    let response = HttpResponse::Ok().json(&*charge);
    drop(store);
    let id = sandbox.ids.id("evt_", kind, &record_at.key);
    sandbox.webhooks.send(id, kind, data);
    response
}

//! The simulated card-push network (Visa Direct style): pushes to any
//! `tok_...` card, reversals, and inquiry by idempotency key. Answers carry
//! ISO 8583 action codes; a transient fault answers `91` without executing.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use tern_actors::adapters::http::wire::{self, ReversalStatus};
use tern_actors::ports::{ACTION_CODE_APPROVED, ACTION_CODE_RETRY};

use super::store::{FaultMode, Operation, Record, RecordKey, Stored, Target};
use super::{
    admit, answer_after, error, idempotency_key, not_found, simulated_failure, Admission, KeyQuery,
    Sandbox, SandboxError,
};

/// Do not honour: the generic decline.
const ACTION_CODE_DO_NOT_HONOUR: &str = "05";
/// Invalid card number: the destination is not a card token.
const ACTION_CODE_INVALID_CARD: &str = "14";
/// Invalid amount: a reversal larger than the push.
const ACTION_CODE_INVALID_AMOUNT: &str = "13";
/// Unable to locate the original transaction.
const ACTION_CODE_NO_ORIGINAL: &str = "25";
/// Duplicate transmission: the push was already reversed.
const ACTION_CODE_DUPLICATE: &str = "94";

pub(super) fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route(wire::PATH_PUSHES, web::post().to(push))
        .route(wire::PATH_PUSH_INQUIRY, web::get().to(inquiry))
        .route(wire::PATH_REVERSALS, web::post().to(reverse))
        .route(wire::PATH_REVERSAL_INQUIRY, web::get().to(reversal_inquiry));
}

fn at(operation: Operation, key: &str) -> RecordKey {
    RecordKey {
        target: Target::CardPush,
        operation,
        scope: "",
        key: key.to_owned(),
    }
}

fn stored_answer(record: &Record) -> HttpResponse {
    match &record.stored {
        Stored::Push { push, .. } => HttpResponse::Ok().json(push),
        Stored::Reversal(reversal) => HttpResponse::Ok().json(reversal),
        _ => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "record of another kind",
        ),
    }
}

fn declined(action_code: &str, reason: &str) -> wire::Push {
    wire::Push {
        action_code: action_code.into(),
        stan: None,
        retrieval_reference_number: None,
        transaction_identifier: None,
        approval_code: None,
        reason: Some(reason.into()),
    }
}

fn retry_later() -> HttpResponse {
    HttpResponse::Ok().json(declined(ACTION_CODE_RETRY, "issuer or switch inoperative"))
}

fn check_amount(amount_minor: i64) -> Result<(), SandboxError> {
    if amount_minor > 0 {
        return Ok(());
    }
    Err(SandboxError::new(
        StatusCode::BAD_REQUEST,
        "invalid_amount",
        "amount_minor must be positive",
    ))
}

#[tracing::instrument(skip_all, fields(key))]
async fn push(
    sandbox: web::Data<Sandbox>,
    request: HttpRequest,
    body: web::Json<wire::PushRequest>,
) -> Result<HttpResponse, SandboxError> {
    let key = idempotency_key(&request)?;
    tracing::Span::current().record("key", key.as_str());
    let body = body.into_inner();
    check_amount(body.amount_minor)?;
    let outcome = execute_push(&sandbox, &key, body);
    Ok(answer_after(&sandbox.config, outcome).await)
}

/// Runs under the lock with no await, so checking the key, executing and
/// storing the result are one atomic step.
fn execute_push(
    sandbox: &web::Data<Sandbox>,
    key: &str,
    body: wire::PushRequest,
) -> (HttpResponse, Option<FaultMode>) {
    let record_at = at(Operation::Push, key);
    let mut store = sandbox.lock();
    let fingerprint = match admit(&mut store, &record_at, &body, stored_answer) {
        Admission::New(fingerprint) => fingerprint,
        Admission::Answer(response) => return (response, None),
    };
    let fields = [
        ("destination", body.destination.as_str()),
        ("settlement_key", body.metadata.settlement_key.as_str()),
    ];
    let fault = store.take_fault(Target::CardPush, Operation::Push, &fields);
    match fault {
        Some(FaultMode::Transient) => return (retry_later(), None),
        Some(FaultMode::Fail) => return (simulated_failure(), None),
        _ => {}
    }
    let ids = &sandbox.ids;
    let push = if fault == Some(FaultMode::Decline) {
        declined(ACTION_CODE_DO_NOT_HONOUR, "do not honour")
    } else if !body.destination.starts_with("tok_") || body.destination.len() <= "tok_".len() {
        declined(ACTION_CODE_INVALID_CARD, "invalid card token")
    } else {
        let push = wire::Push {
            action_code: ACTION_CODE_APPROVED.into(),
            stan: Some(ids.digits("stan", key, 6)),
            retrieval_reference_number: Some(ids.digits("rrn", key, 12)),
            transaction_identifier: Some(ids.digits("transaction_identifier", key, 15)),
            approval_code: Some(ids.alphanumerics("approval_code", key, 6)),
            reason: None,
        };
        if let Some(id) = &push.transaction_identifier {
            store
                .by_transaction_id
                .insert(id.clone(), record_at.clone());
        }
        push
    };
    let response = HttpResponse::Ok().json(&push);
    let record = Record {
        fingerprint,
        settlement_key: body.metadata.settlement_key,
        stored: Stored::Push {
            push,
            destination: body.destination,
            amount_minor: body.amount_minor,
            reversed: false,
        },
    };
    store.insert(record_at, record, chrono::Utc::now());
    (response, fault)
}

#[tracing::instrument(skip_all, fields(key))]
async fn reverse(
    sandbox: web::Data<Sandbox>,
    request: HttpRequest,
    body: web::Json<wire::ReversalRequest>,
) -> Result<HttpResponse, SandboxError> {
    let key = idempotency_key(&request)?;
    tracing::Span::current().record("key", key.as_str());
    let body = body.into_inner();
    check_amount(body.amount_minor)?;
    let outcome = execute_reverse(&sandbox, &key, body);
    Ok(answer_after(&sandbox.config, outcome).await)
}

/// Runs under the lock with no await, so checking the key, executing and
/// storing the result are one atomic step.
fn execute_reverse(
    sandbox: &web::Data<Sandbox>,
    key: &str,
    body: wire::ReversalRequest,
) -> (HttpResponse, Option<FaultMode>) {
    let record_at = at(Operation::Reversal, key);
    let mut store = sandbox.lock();
    let fingerprint = match admit(&mut store, &record_at, &body, stored_answer) {
        Admission::New(fingerprint) => fingerprint,
        Admission::Answer(response) => return (response, None),
    };
    let original_at = store
        .by_transaction_id
        .get(&body.original_transaction_identifier)
        .cloned();
    let destination = match original_at.as_ref().and_then(|a| store.get(a)) {
        Some(Record {
            stored: Stored::Push { destination, .. },
            ..
        }) => destination.clone(),
        _ => String::new(),
    };
    let fields = [
        ("destination", destination.as_str()),
        ("settlement_key", body.metadata.settlement_key.as_str()),
    ];
    let fault = store.take_fault(Target::CardPush, Operation::Reversal, &fields);
    match fault {
        Some(FaultMode::Transient) => {
            let retry = wire::Reversal {
                status: ReversalStatus::Declined,
                action_code: Some(ACTION_CODE_RETRY.into()),
                approval_code: None,
                reason: Some("issuer or switch inoperative".into()),
            };
            return (HttpResponse::Ok().json(retry), None);
        }
        Some(FaultMode::Fail) => return (simulated_failure(), None),
        _ => {}
    }
    let original = original_at.as_ref().and_then(|a| store.get_mut(a));
    let refusal = match (fault, original) {
        (Some(FaultMode::Decline), _) => Some((ACTION_CODE_DO_NOT_HONOUR, "do not honour")),
        (
            _,
            Some(Record {
                stored:
                    Stored::Push {
                        amount_minor,
                        reversed,
                        ..
                    },
                ..
            }),
        ) => {
            if *reversed {
                Some((ACTION_CODE_DUPLICATE, "the push was already reversed"))
            } else if body.amount_minor > *amount_minor {
                Some((ACTION_CODE_INVALID_AMOUNT, "the reversal exceeds the push"))
            } else {
                *reversed = true;
                None
            }
        }
        (_, _) => Some((ACTION_CODE_NO_ORIGINAL, "no such original transaction")),
    };
    let reversal = match refusal {
        Some((code, reason)) => wire::Reversal {
            status: ReversalStatus::Declined,
            action_code: Some(code.into()),
            approval_code: None,
            reason: Some(reason.into()),
        },
        None if fault == Some(FaultMode::ReversalPending) => {
            approve_reversal_later(sandbox.clone(), record_at.clone());
            wire::Reversal {
                status: ReversalStatus::Pending,
                action_code: None,
                approval_code: None,
                reason: None,
            }
        }
        None => approved_reversal(sandbox, key),
    };
    let response = HttpResponse::Ok().json(&reversal);
    let record = Record {
        fingerprint,
        settlement_key: body.metadata.settlement_key,
        stored: Stored::Reversal(reversal),
    };
    store.insert(record_at, record, chrono::Utc::now());
    (response, fault)
}

fn approved_reversal(sandbox: &Sandbox, key: &str) -> wire::Reversal {
    wire::Reversal {
        status: ReversalStatus::Approved,
        action_code: Some(ACTION_CODE_APPROVED.into()),
        approval_code: Some(sandbox.ids.alphanumerics("reversal_approval", key, 6)),
        reason: None,
    }
}

/// A pending reversal is approved after the configured delay; the caller
/// learns it by reversal inquiry.
fn approve_reversal_later(sandbox: web::Data<Sandbox>, record_at: RecordKey) {
    actix_web::rt::spawn(async move {
        actix_web::rt::time::sleep(sandbox.config.pending_delay).await;
        let approved = approved_reversal(&sandbox, &record_at.key);
        let mut store = sandbox.lock();
        if let Some(Record {
            stored: Stored::Reversal(reversal),
            ..
        }) = store.get_mut(&record_at)
        {
            *reversal = approved;
        }
    });
}

async fn inquiry(sandbox: web::Data<Sandbox>, query: web::Query<KeyQuery>) -> HttpResponse {
    let store = sandbox.lock();
    match store.get(&at(Operation::Push, &query.idempotency_key)) {
        Some(record) => stored_answer(record),
        None => not_found(),
    }
}

async fn reversal_inquiry(
    sandbox: web::Data<Sandbox>,
    query: web::Query<KeyQuery>,
) -> HttpResponse {
    let store = sandbox.lock();
    match store.get(&at(Operation::Reversal, &query.idempotency_key)) {
        Some(record) => stored_answer(record),
        None => not_found(),
    }
}

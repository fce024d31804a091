//! The simulated push gateway: accepts one notification per idempotency
//! key and keeps what it received, listable at `GET /control/pushes`.
//! Faults with target `push` match on `user_id`: `decline` and `fail` refuse
//! the message (permanent), `transient` answers 503 without keeping it,
//! `slow` and `timeout_after_success` keep it and answer late.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use tern_actors::adapters::http::wire;
use tern_actors::ports::Platform;

use super::store::{FaultMode, Operation, Record, RecordKey, Stored, Target};
use super::{
    admit, answer_after, error, idempotency_key, simulated_failure, unavailable, Admission,
    Sandbox, SandboxError,
};

/// Longest device token accepted (Tern's own bound).
const TOKEN_CHARS_MAX: usize = 4_096;

pub(super) fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route(wire::PATH_PUSH_MESSAGES, web::post().to(send));
}

fn at(key: &str) -> RecordKey {
    RecordKey {
        target: Target::Push,
        operation: Operation::Message,
        scope: "",
        key: key.to_owned(),
    }
}

fn stored_answer(record: &Record) -> HttpResponse {
    match &record.stored {
        Stored::PushMessage { accepted, .. } => HttpResponse::Ok().json(accepted),
        _ => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "record of another kind",
        ),
    }
}

#[tracing::instrument(skip_all, fields(key))]
async fn send(
    sandbox: web::Data<Sandbox>,
    request: HttpRequest,
    body: web::Json<wire::PushMessageRequest>,
) -> Result<HttpResponse, SandboxError> {
    let key = idempotency_key(&request)?;
    tracing::Span::current().record("key", key.as_str());
    let body = body.into_inner();
    let data_ok = body.data.as_ref().is_none_or(serde_json::Value::is_object);
    if Platform::parse(&body.platform).is_none()
        || body.token.is_empty()
        || body.token.chars().count() > TOKEN_CHARS_MAX
        || !data_ok
    {
        return Err(SandboxError::new(
            StatusCode::BAD_REQUEST,
            "invalid_message",
            "platform must be ios or android, token 1 to 4096 characters, data an object",
        ));
    }
    let outcome = execute(&sandbox, &key, body);
    Ok(answer_after(&sandbox.config, outcome).await)
}

/// Runs under the lock with no await, so checking the key, executing and
/// storing the result are one atomic step.
fn execute(
    sandbox: &Sandbox,
    key: &str,
    body: wire::PushMessageRequest,
) -> (HttpResponse, Option<FaultMode>) {
    let record_at = at(key);
    let mut store = sandbox.lock();
    let fingerprint = match admit(&mut store, &record_at, &body, stored_answer) {
        Admission::New(fingerprint) => fingerprint,
        Admission::Answer(response) => return (response, None),
    };
    let fields = [
        ("user_id", body.user_id.as_str()),
        ("destination", body.token.as_str()),
    ];
    let fault = store.take_fault(Target::Push, Operation::Message, &fields);
    match fault {
        Some(FaultMode::Transient) => return (unavailable("simulated transient failure"), None),
        // A refused message is not delivered, so nothing is kept for it.
        Some(FaultMode::Fail | FaultMode::Decline) => return (simulated_failure(), None),
        _ => {}
    }
    let accepted = wire::PushMessageAccepted {
        id: sandbox.ids.id("msg_", "push", key),
    };
    let now = chrono::Utc::now();
    let received = wire::ReceivedPush {
        key: key.to_owned(),
        platform: body.platform,
        token: body.token,
        user_id: body.user_id,
        title: body.title,
        body: body.body,
        data: body.data,
        received_at: now,
    };
    let response = HttpResponse::Ok().json(&accepted);
    let record = Record {
        fingerprint,
        // Pushes belong to no settlement.
        settlement_key: String::new(),
        stored: Stored::PushMessage { accepted, received },
    };
    store.insert(record_at, record, now);
    (response, fault)
}

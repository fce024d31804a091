//! The control API: arm and clear faults, read the execution log and the
//! push messages received.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;
use tern_actors::adapters::http::wire;

use super::store::Fault;
use super::{error, Sandbox, SANDBOX_FAULTS_MAX};

pub(super) fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route(wire::PATH_FAULTS, web::post().to(arm))
        .route(wire::PATH_FAULTS, web::delete().to(clear))
        .route(wire::PATH_EXECUTIONS, web::get().to(executions))
        .route(wire::PATH_RECEIVED_PUSHES, web::get().to(pushes));
}

async fn arm(sandbox: web::Data<Sandbox>, body: web::Json<wire::FaultSpec>) -> HttpResponse {
    let spec = body.into_inner();
    let fault = match Fault::from_spec(spec.clone()) {
        Ok(fault) => fault,
        Err(message) => return error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_fault", &message),
    };
    if sandbox.lock().arm(fault).is_err() {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "too_many_faults",
            &format!("at most {SANDBOX_FAULTS_MAX} faults may be armed"),
        );
    }
    tracing::info!(target = %spec.target, mode = %spec.mode, count = ?spec.count, "sandbox fault armed");
    HttpResponse::Created().json(spec)
}

async fn clear(sandbox: web::Data<Sandbox>) -> HttpResponse {
    sandbox.lock().clear_faults();
    HttpResponse::NoContent().finish()
}

#[derive(Deserialize)]
struct ExecutionQuery {
    key: Option<String>,
    settlement_key: Option<String>,
}

async fn executions(
    sandbox: web::Data<Sandbox>,
    query: web::Query<ExecutionQuery>,
) -> HttpResponse {
    let data = sandbox
        .lock()
        .executions(query.key.as_deref(), query.settlement_key.as_deref());
    HttpResponse::Ok().json(wire::ExecutionList { data })
}

#[derive(Deserialize)]
struct PushQuery {
    user_id: Option<String>,
}

async fn pushes(sandbox: web::Data<Sandbox>, query: web::Query<PushQuery>) -> HttpResponse {
    let data = sandbox.lock().pushes(query.user_id.as_deref());
    HttpResponse::Ok().json(wire::ReceivedPushList { data })
}

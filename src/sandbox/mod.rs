//! The sandbox provider simulator (decisions §15): its own listener, reached
//! by Tern's provider adapters over HTTP exactly as a real provider would be.
//! Its provider endpoints (acquirer, card push, custodian, faults,
//! executions) arrive with the settlement work; this is the listener.

use std::net::TcpListener;

use actix_web::dev::Server;
use actix_web::{web, App, HttpResponse, HttpServer};
use serde_json::json;

/// Workers of the simulator's listener; it is a test double, not a hot path.
pub const SANDBOX_WORKERS: usize = 1;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(identity))
        .route("/health", web::get().to(health));
}

async fn identity() -> HttpResponse {
    HttpResponse::Ok().json(json!({"service": "tern-sandbox", "version": crate::state::VERSION}))
}

async fn health() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// Starts the simulator on `listener`; the returned server runs when awaited
/// or spawned.
pub fn serve(listener: TcpListener) -> std::io::Result<Server> {
    Ok(HttpServer::new(|| App::new().configure(routes))
        .workers(SANDBOX_WORKERS)
        .disable_signals()
        .listen(listener)?
        .run())
}

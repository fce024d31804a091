//! The HTTP edge: thin handlers per context, wired here.

pub mod api_keys;
pub mod audit;
pub mod auth;
pub mod card_events;
pub mod cards;
pub mod client_address;
pub mod console;
pub mod devices;
pub mod docs;
pub mod extract;
pub mod forward;
pub mod idempotency;
pub mod ledger;
pub mod m2m;
pub mod middleware;
pub mod money;
pub mod notifications;
pub mod ops;
pub mod password_reset;
pub mod problem;
pub mod profile;
pub mod provider_webhooks;
pub mod quotes;
pub mod sessions;
pub mod settlements;
pub mod transfers;
pub mod verification;
pub mod webhooks;

use actix_web::{web, HttpRequest, HttpResponse};

use crate::http::problem::ApiError;
use crate::state::AppState;

/// Registers every route of the API listener.
pub fn routes(cfg: &mut web::ServiceConfig, state: &AppState) {
    // First: documents such as /v1/webhooks/openapi.json must win over the
    // templated business routes beside them (/v1/webhooks/{provider}).
    crate::openapi::configure_docs(cfg, state.docs.clone());
    cfg.route("/", web::get().to(ops::root))
        .route("/live", web::get().to(ops::live))
        .route("/ready", web::get().to(ops::ready))
        .route("/version", web::get().to(ops::version))
        .route("/health", web::get().to(ops::health))
        .route("/health/actors", web::get().to(ops::actors))
        .route("/metrics", web::get().to(ops::metrics))
        .route("/internal/cluster/wake", web::post().to(forward::wake))
        .route("/problems/{slug}", web::get().to(problem::problem_page))
        .configure(console::routes)
        .service(web::resource("/v1/auth/m2m/register").route(web::post().to(m2m::register)))
        .service(web::resource("/v1/auth/register").route(web::post().to(auth::register)))
        .service(web::resource("/v1/auth/login").route(web::post().to(auth::login)))
        .service(web::resource("/v1/auth/logout").route(web::post().to(auth::logout)))
        .service(
            web::resource("/v1/auth/sessions")
                .route(web::get().to(sessions::list))
                .route(web::delete().to(sessions::revoke_others)),
        )
        .service(web::resource("/v1/auth/sessions/{id}").route(web::delete().to(sessions::revoke)))
        .service(
            web::resource("/v1/auth/me")
                .route(web::get().to(profile::me))
                .route(web::patch().to(profile::update_me)),
        )
        .service(
            web::resource("/v1/profile")
                .route(web::get().to(profile::profile))
                .route(web::patch().to(profile::update_profile)),
        )
        .service(
            web::resource("/v1/auth/verify-email")
                .route(web::post().to(verification::verify_email)),
        )
        .service(
            web::resource("/v1/auth/verify-email/resend")
                .route(web::post().to(verification::resend)),
        )
        .service(
            web::resource("/v1/auth/password-reset/request")
                .route(web::post().to(password_reset::request)),
        )
        .service(
            web::resource("/v1/auth/password-reset/confirm")
                .route(web::post().to(password_reset::confirm)),
        )
        .service(
            web::resource("/v1/api-keys")
                .route(web::get().to(api_keys::list))
                .route(web::post().to(api_keys::create)),
        )
        .service(web::resource("/v1/api-keys/{id}").route(web::delete().to(api_keys::revoke)))
        .service(web::resource("/v1/ledger/accounts").route(web::get().to(ledger::accounts)))
        .service(
            web::resource("/v1/ledger/accounts/{id}/entries").route(web::get().to(ledger::entries)),
        )
        .service(web::resource("/v1/quotes").route(web::post().to(quotes::create)))
        .service(web::resource("/v1/quotes/{id}").route(web::get().to(quotes::get)))
        .service(
            web::resource("/v1/transfers")
                .route(web::get().to(transfers::list))
                .route(web::post().to(transfers::create)),
        )
        .service(web::resource("/v1/transfers/{id}").route(web::get().to(transfers::get)))
        .service(
            web::resource("/v1/settlements")
                .route(web::get().to(settlements::list))
                .route(web::post().to(settlements::create)),
        )
        .service(web::resource("/v1/settlements/{id}").route(web::get().to(settlements::get)))
        .service(
            web::resource("/v1/settlements/{id}/reverse")
                .route(web::post().to(settlements::reverse)),
        )
        .service(
            web::resource("/v1/devices")
                .route(web::get().to(devices::list))
                .route(web::post().to(devices::register)),
        )
        .service(web::resource("/v1/devices/{id}").route(web::delete().to(devices::revoke)))
        .service(
            web::resource("/v1/notifications/dispatch")
                .route(web::post().to(notifications::dispatch)),
        )
        .configure(cards::routes)
        .service(web::resource("/v1/audit/events").route(web::get().to(audit::events)))
        .service(web::resource("/v1/audit/verify").route(web::get().to(audit::verify)))
        .service(
            web::resource("/v1/webhooks/endpoint")
                .route(web::put().to(webhooks::put_endpoint))
                .route(web::get().to(webhooks::get_endpoint))
                .route(web::delete().to(webhooks::delete_endpoint)),
        )
        .service(web::resource("/v1/webhooks/replay").route(web::post().to(webhooks::replay)))
        .service(
            web::resource("/v1/webhooks/deliveries").route(web::get().to(webhooks::deliveries)),
        )
        .service(
            web::resource("/v1/webhooks/{provider}")
                .route(web::post().to(provider_webhooks::receive)),
        );
    if state.config.fault_routes {
        cfg.route("/__fault/panic", web::get().to(panic_for_tests));
    }
}

/// Unknown paths are 404; known paths with another method are 405 with Allow.
pub async fn fallback(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    match state.docs.allowed_methods(req.path()) {
        Some(methods)
            if !methods
                .iter()
                .any(|m| m.eq_ignore_ascii_case(req.method().as_str())) =>
        {
            Err(ApiError::MethodNotAllowed(methods))
        }
        _ => Err(ApiError::NotFound(format!(
            "no route for {} {}",
            req.method(),
            req.path()
        ))),
    }
}

/// Proves that a panicking handler answers a 500 problem without internals.
#[allow(
    clippy::panic,
    reason = "a fault route, mounted only when config.fault_routes is set: panicking is its purpose"
)]
async fn panic_for_tests() -> actix_web::HttpResponse {
    panic!("deliberate panic with secret internals: sk_live_do_not_leak");
}

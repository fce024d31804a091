//! The OpenAPI description of each context, generated from the handlers and
//! their types. `crate::openapi` aggregates these and serves them as 3.0.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::http::{
    api_keys, audit, auth, card_events, cards, devices, ledger, m2m, notifications, ops,
    password_reset, problem, profile, provider_webhooks, quotes, sessions, settlements, transfers,
    verification, webhooks,
};

/// The three credential forms of the interface.
pub struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("svc_<prefix>_<secret>")
                    .description(Some(
                        "Merchant API key: Authorization: Bearer svc_<prefix>_<secret>",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-API-Key",
                "The same merchant API key in the X-API-Key header",
            ))),
        );
        components.add_security_scheme(
            "provider_signature",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Sandbox-Signature",
                "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, \"{t}.{body}\")>, from the card provider",
            ))),
        );
        components.add_security_scheme(
            "service_signature",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Svc-Signature",
                "t=<unix seconds>,v1=<hex HMAC-SHA256(dispatch secret, \"{t}.{raw body}\")>, within 5 minutes",
            ))),
        );
        components.add_security_scheme(
            "session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                "svc_session",
                "Human session cookie set by login and registration",
            ))),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    paths(ops::root, ops::live, ops::ready, ops::version, ops::health, ops::actors, ops::metrics),
    components(schemas(problem::Problem)),
    tags((name = "ops", description = "Operational endpoints: identity, liveness, readiness, health, version")),
    modifiers(&SecuritySchemes)
)]
pub struct OpsApi;

#[derive(OpenApi)]
#[openapi(
    paths(m2m::register),
    components(schemas(problem::Problem)),
    tags((name = "auth-m2m", description = "Merchant self-service registration and the first API key")),
    modifiers(&SecuritySchemes)
)]
pub struct AuthM2mApi;

#[derive(OpenApi)]
#[openapi(
    paths(
        auth::register, auth::login, auth::logout, sessions::list, sessions::revoke,
        sessions::revoke_others, profile::me, profile::update_me,
        profile::profile, profile::update_profile, verification::verify_email,
        verification::resend, password_reset::request, password_reset::confirm,
        m2m::register, api_keys::list, api_keys::create, api_keys::revoke
    ),
    components(schemas(problem::Problem)),
    tags(
        (name = "auth", description = "Human accounts: registration, login, sessions, email verification, password reset, profile"),
        (name = "auth-m2m", description = "Merchant self-service registration and the first API key"),
        (name = "api-keys", description = "Merchant API keys: list, create, revoke (extension)"),
    ),
    modifiers(&SecuritySchemes)
)]
pub struct AuthApi;

#[derive(OpenApi)]
#[openapi(
    paths(settlements::create, settlements::list, settlements::get, settlements::reverse),
    components(schemas(problem::Problem)),
    tags((name = "settlements", description = "Durable settlement intents executed exactly once")),
    modifiers(&SecuritySchemes)
)]
pub struct SettlementsApi;

#[derive(OpenApi)]
#[openapi(
    paths(quotes::create, quotes::get),
    components(schemas(problem::Problem)),
    tags((name = "quotes", description = "Server-side quotes: rate, fees and receive amount, valid for 60 seconds")),
    modifiers(&SecuritySchemes)
)]
pub struct QuotesApi;

#[derive(OpenApi)]
#[openapi(
    paths(transfers::create, transfers::list, transfers::get),
    components(schemas(problem::Problem)),
    tags((name = "transfers", description = "Card to chain transfers: a card charge, then an on-chain payout, with a refund when the payout fails")),
    modifiers(&SecuritySchemes)
)]
pub struct TransfersApi;

#[derive(OpenApi)]
#[openapi(
    paths(
        webhooks::put_endpoint,
        webhooks::get_endpoint,
        webhooks::delete_endpoint,
        webhooks::replay,
        webhooks::deliveries,
        provider_webhooks::receive
    ),
    components(schemas(problem::Problem)),
    tags((name = "webhooks", description = "Signed outbound webhooks, and the card provider's inbound ones")),
    modifiers(&SecuritySchemes)
)]
pub struct WebhooksApi;

#[derive(OpenApi)]
#[openapi(
    paths(ledger::accounts, ledger::entries),
    components(schemas(problem::Problem)),
    tags((name = "ledger", description = "The merchant's funding accounts and their double-entry lines (extension)")),
    modifiers(&SecuritySchemes)
)]
pub struct LedgerApi;

#[derive(OpenApi)]
#[openapi(
    paths(audit::events, audit::verify),
    components(schemas(problem::Problem)),
    tags((name = "audit", description = "The merchant's tamper-evident audit chain")),
    modifiers(&SecuritySchemes)
)]
pub struct AuditApi;

#[derive(OpenApi)]
#[openapi(
    paths(devices::register, devices::list, devices::revoke),
    components(schemas(problem::Problem)),
    tags((name = "devices", description = "Users' push tokens: register, list, revoke")),
    modifiers(&SecuritySchemes)
)]
pub struct DevicesApi;

#[derive(OpenApi)]
#[openapi(
    paths(
        cards::card_art, cards::list, cards::create, cards::get, cards::update,
        cards::balance, cards::close, cards::events, cards::freeze, cards::unfreeze,
        cards::limits, cards::update_limits, cards::replace, cards::transactions,
        cards::secure::reveal, cards::wallet::provision_apple_pay,
        cards::wallet::provision_google_pay, cards::wallet::status,
    ),
    components(schemas(problem::Problem, card_events::AuthorizationDecision)),
    tags((name = "cards", description = "Card issuance and controls: freeze, limits, replace, secure details, wallets; activity from the card provider's webhooks")),
    modifiers(&SecuritySchemes)
)]
pub struct CardsApi;

#[derive(OpenApi)]
#[openapi(
    paths(notifications::dispatch),
    components(schemas(problem::Problem)),
    tags((name = "notifications", description = "Push notifications to a user's devices, requested by a signed service call")),
    modifiers(&SecuritySchemes)
)]
pub struct NotificationsApi;

//! What every handler can reach, shared across actix-web workers.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tern_actors::adapters::health::ProviderHealth;
use tern_actors::card::CardKind;
use tern_actors::mail_outbox::MailSender;
use tern_actors::ports::{CardIssuer, RateSource};
use tern_actors::push::PushDelivery;
use tern_actors::runtime::{Registry, Runtime};
use tern_actors::settlement::SettlementKind;
use tern_actors::transfer::legs::LegacyLegKeys;
use tern_actors::transfer::TransferKind;
use tern_actors::webhook::{Outbox, WebhookEndpointKind};
use tern_schema::Db;

use crate::auth::key_cache::KeyCache;
use crate::auth::password::Passwords;
use crate::config::Config;
use crate::openapi::Documents;
use crate::rate_limit::Limiters;

pub struct AppState {
    pub config: Config,
    pub db: Db,
    pub keys: KeyCache,
    pub limits: Limiters,
    pub docs: Arc<Documents>,
    pub runtime: Arc<Runtime>,
    /// `None` when no provider is configured (sandbox off, no TERN_PROVIDER_URL).
    pub settlements: Option<Registry<SettlementKind>>,
    /// `None` exactly when `settlements` is: transfers run on settlements.
    pub transfers: Option<Registry<TransferKind>>,
    /// One actor per card; `None` without a provider (card endpoints 503).
    pub cards: Option<Registry<CardKind>>,
    /// The issuer secure details are read from; `None` exactly when `cards` is.
    pub issuer: Option<Arc<dyn CardIssuer>>,
    /// One actor per merchant endpoint: endpoint changes, replays, deliveries.
    pub webhooks: Registry<WebhookEndpointKind>,
    /// Where transfer status events are written; transfer creation writes
    /// the first.
    pub outbox: Outbox,
    /// Leg keys of transfers made before leg keys took their own form,
    /// which a merchant's Idempotency-Key must not take (read at start).
    pub legacy_leg_keys: Arc<LegacyLegKeys>,
    /// Argon2id on its bounded pool of threads.
    pub passwords: Passwords,
    /// Sends the mail outbox (verification and password reset mail).
    pub mail: MailSender,
    /// Password reset requests handled after their answer
    /// ([`crate::http::password_reset::RESET_REQUESTS_IN_FLIGHT_MAX`]).
    pub reset_permits: Arc<tokio::sync::Semaphore>,
    /// Sends dispatched push messages; `None` when no provider is
    /// configured (dispatch answers 503).
    pub push: Option<PushDelivery>,
    /// Where quotes get their rates.
    pub rates: Arc<dyn RateSource>,
    /// What the adapters observed of each provider, by name; empty when no
    /// provider is configured.
    pub providers: Vec<(&'static str, Arc<ProviderHealth>)>,
    pub started_at: DateTime<Utc>,
    /// The signed channel to the other nodes (TERN_CLUSTER_SECRET), where
    /// several share one PostgreSQL.
    pub cluster: Option<Arc<crate::cluster::Link>>,
}

/// The build's version and source revision.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const BUILD: &str = match option_env!("TERN_BUILD") {
    Some(build) => build,
    None => "unknown",
};

//! Building and running the application: migrations, database, actor
//! runtime, the API listener and the in-process sandbox listener.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::middleware::{from_fn, Compress};
use actix_web::{web, App, HttpServer};
use anyhow::Context;
use tern_actors::adapters::health::ProviderHealth;
use tern_actors::adapters::http::{
    HttpCardAcquirer, HttpCardIssuer, HttpCardPush, HttpCustodian, HttpProviderConfig,
    HttpPushGateway,
};
use tern_actors::adapters::static_rates::StaticRates;
use tern_actors::card::standing::StandingCache;
use tern_actors::card::{CardContext, CardKind};
use tern_actors::mail_outbox::MailSender;
use tern_actors::ports::CardIssuer;
use tern_actors::push::PushDelivery;
use tern_actors::runtime::{Registry, RegistryConfig, Runtime, RuntimeConfig};
use tern_actors::settlement::machine::RetryPolicy;
use tern_actors::settlement::{Parents, Providers, SettlementContext, SettlementKind};
use tern_actors::transfer::legs::{self, LegacyLegKeys};
use tern_actors::transfer::machine::Policy;
use tern_actors::transfer::{TransferContext, TransferKind, TransferLegs};
use tern_actors::webhook::machine::Policy as DeliveryPolicy;
use tern_actors::webhook::{
    Deliverer, DeliveryConfig, Outbox, RenderTransfer, WebhookContext, WebhookEndpointKind,
};
use tern_schema::{migrate, Db};

use crate::auth::key_cache::KeyCache;
use crate::auth::password::Passwords;
use crate::config::Config;
use crate::http::{self, middleware};
use crate::rate_limit::Limiters;
use crate::sandbox::SandboxConfig;
use crate::state::AppState;

/// Time in-flight requests get to finish after a stop signal.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Concurrent connections per worker before new ones wait.
pub const CONNECTIONS_PER_WORKER_MAX: usize = 10_000;
/// How soon Tern asks again about an operation a provider reported pending.
pub const PENDING_POLL: Duration = Duration::from_secs(2);

pub struct Application {
    port: u16,
    sandbox_port: Option<u16>,
    server: Server,
    sandbox: Option<Server>,
    state: web::Data<AppState>,
}

impl Application {
    /// Migrates, connects, recovers the actor runtime and binds the
    /// listeners (port 0 picks a free port). Serving starts with
    /// [`Application::run_until_stopped`].
    pub async fn build(mut config: Config) -> anyhow::Result<Application> {
        tern_actors::adapters::install_crypto_provider();
        // Counting starts with the process, not with the first scrape.
        crate::metrics::install();
        // One secret for both ends of the sandbox's signed webhooks.
        let webhook_secret = config
            .card_provider_webhook_secret
            .get_or_insert_with(|| uuid::Uuid::new_v4().simple().to_string())
            .clone();
        migrate::run_pending(&config.database_url)
            .await
            .context("running migrations")?;
        let db = Db::connect(&config.database_url)
            .await
            .context("connecting to the database")?;
        let listener =
            TcpListener::bind(&config.bind).with_context(|| format!("binding {}", config.bind))?;
        let port = listener.local_addr()?.port();
        let link = match &config.cluster.secret {
            Some(secret) => Some(Arc::new(
                crate::cluster::Link::new(secret).context("building the cluster client")?,
            )),
            None => None,
        };
        let runtime = Arc::new(Runtime::with_config(
            db.clone(),
            RuntimeConfig {
                node_id: crate::cluster::node_id(&config, port),
                cluster: Some(crate::cluster::runtime_config(&config, link.clone())),
                ..RuntimeConfig::default()
            },
        ));
        if db.backend() == tern_schema::Backend::Postgres
            && (config.cluster.secret.is_none() || config.cluster.advertise_url.is_none())
        {
            tracing::warn!(
                "TERN_CLUSTER_SECRET or TERN_ADVERTISE_URL is unset: should another node share \
                 this database, requests for the entities it owns answer 503 here instead of \
                 being forwarded (README, Running several nodes)"
            );
        }
        let docs = Arc::new(crate::openapi::documents(&config.public_url));
        let (sandbox, sandbox_port) = match &config.sandbox_bind {
            Some(bind) => {
                let listener = TcpListener::bind(bind)
                    .with_context(|| format!("binding the sandbox on {bind}"))?;
                // The simulator calls the API listener back on loopback.
                let callback = format!("http://127.0.0.1:{port}");
                let sandbox = SandboxConfig::new(Some(callback), webhook_secret);
                let sandbox_port = listener.local_addr()?.port();
                (
                    Some(crate::sandbox::serve(listener, sandbox)?),
                    Some(sandbox_port),
                )
            }
            None => (None, None),
        };
        let provider_url = config.provider_url.clone().or_else(|| {
            let port = sandbox_port?;
            Some(format!("http://127.0.0.1:{port}"))
        });
        let (webhooks, outbox) = webhook_runtime(&runtime, &config)?;
        let health = ProviderHealths::default();
        // The transfers their legs report to: bound once the transfer
        // registry exists, which is made after the settlement one.
        let parents = Parents::default();
        let push = match &provider_url {
            Some(url) => Some(push_delivery(url, &config, &db, &health)?),
            None => None,
        };
        let (cards, issuer) = match &provider_url {
            Some(url) => {
                let (cards, issuer) = card_runtime(&runtime, url, &config, &health)?;
                (Some(cards), Some(issuer))
            }
            None => (None, None),
        };
        let (settlements, transfers, providers) = match provider_url {
            Some(url) => {
                let context = settlement_context(&url, &config, &health, parents.clone())?;
                // A refund that fails is asked again on the settlements' schedule.
                let policy = Policy {
                    refund_delays: context.policy.delays.clone(),
                };
                let settlements = runtime
                    .register::<SettlementKind>(RegistryConfig::default(), context)
                    .context("registering the settlement actors")?;
                let transfers = runtime
                    .register::<TransferKind>(
                        RegistryConfig::default(),
                        TransferContext {
                            settlements: settlements.clone(),
                            policy,
                            outbox: outbox.clone(),
                        },
                    )
                    .context("registering the transfer actors")?;
                // Legs tell their transfer how they moved.
                parents.set(Arc::new(TransferLegs {
                    transfers: transfers.clone(),
                }));
                (Some(settlements), Some(transfers), health.named())
            }
            None => {
                tracing::warn!("no provider: TERN_SANDBOX_BIND is off and TERN_PROVIDER_URL unset; settlements and transfers answer 503");
                (None, None, Vec::new())
            }
        };
        let legacy_leg_keys = Arc::new(LegacyLegKeys::default());
        legacy_leg_keys
            .refresh(&db)
            .await
            .context("reading legacy transfer leg keys")?;
        if !legacy_leg_keys.is_empty() {
            tracing::info!(
                keys = legacy_leg_keys.len(),
                "legacy leg keys of in-flight transfers are reserved"
            );
        }
        if runtime.ownership().is_some() {
            let pinned = legs::pin_legacy_legs(&db)
                .await
                .context("placing legacy transfer legs with their transfers")?;
            if pinned > 0 {
                tracing::info!(pinned, "legacy transfer legs placed with their transfers");
            }
        }
        // Every kind is registered: re-activate their in-flight work.
        runtime
            .recover()
            .await
            .context("recovering the actor runtime")?;
        if let Some(push) = &push {
            push.resume()
                .await
                .context("resuming pending push deliveries")?;
        }

        let mailer = tern_actors::adapters::mail::mailer_from(
            config.smtp_url.as_deref(),
            &config.data_dir,
            &config.mail_from,
        )
        .context("setting up mail")?;
        let passwords =
            Passwords::new(config.password_hashers).context("setting up password hashing")?;
        // Its first pass sends what an earlier process committed but did
        // not send.
        let mail = MailSender::new(db.clone(), mailer);
        mail.start();
        let state = web::Data::new(AppState {
            mail,
            reset_permits: Arc::new(tokio::sync::Semaphore::new(
                crate::http::password_reset::RESET_REQUESTS_IN_FLIGHT_MAX,
            )),
            passwords,
            rates: Arc::new(StaticRates::new(config.quote_rates.clone())),
            keys: KeyCache::new(db.clone()),
            limits: Limiters::new(&config.rate_limits),
            started_at: chrono::Utc::now(),
            config,
            db,
            docs,
            runtime,
            settlements,
            transfers,
            cards,
            issuer,
            webhooks,
            outbox,
            legacy_leg_keys,
            push,
            providers,
            cluster: link,
        });
        crate::auth::purge::start(&state.clone().into_inner());
        let server = api_server(listener, state.clone())?;
        Ok(Application {
            port,
            sandbox_port,
            server,
            sandbox,
            state,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn sandbox_port(&self) -> Option<u16> {
        self.sandbox_port
    }

    pub fn state(&self) -> web::Data<AppState> {
        self.state.clone()
    }

    /// Handle to stop the API listener gracefully.
    pub fn handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    /// Serves until the API server stops (SIGINT/SIGTERM, or its handle).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let sandbox_handle = self.sandbox.as_ref().map(Server::handle);
        if let Some(sandbox) = self.sandbox {
            actix_web::rt::spawn(sandbox);
        }
        let served = self.server.await;
        if let Some(handle) = sandbox_handle {
            handle.stop(true).await;
        }
        self.state.mail.stop();
        // A node stopping on purpose hands its slots over at once: the
        // others take them at their next beat, not after the lease.
        if let Some(ownership) = self.state.runtime.ownership() {
            self.state.runtime.shutdown();
            if let Err(error) = ownership.leave(&self.state.db).await {
                tracing::warn!(%error, "could not release this node's slots; they pass after the lease");
            }
        }
        self.state.db.close();
        served
    }
}

/// Webhook jitter: each retry lands within this fraction of its delay.
pub const WEBHOOK_RETRY_JITTER: f64 = 0.1;

/// The webhook endpoint actors and the outbox transfers write to.
fn webhook_runtime(
    runtime: &Runtime,
    config: &Config,
) -> anyhow::Result<(tern_actors::runtime::Registry<WebhookEndpointKind>, Outbox)> {
    let deliverer = Deliverer::new(&DeliveryConfig {
        allow_private: config.webhook_allow_private,
        ca_file: config.webhook_ca_file.clone(),
        timeout: None,
    })?;
    let webhooks = runtime
        .register::<WebhookEndpointKind>(
            RegistryConfig::default(),
            WebhookContext {
                deliverer: Arc::new(deliverer),
                policy: DeliveryPolicy {
                    delays: config.webhook_retry_schedule.clone(),
                    jitter: WEBHOOK_RETRY_JITTER,
                },
            },
        )
        .context("registering the webhook endpoint actors")?;
    let render: RenderTransfer =
        Arc::new(|row| serde_json::to_value(http::transfers::view(row)).unwrap_or_default());
    let outbox = Outbox::new(render, webhooks.clone());
    Ok((webhooks, outbox))
}

/// One health record per provider the settlements reach.
#[derive(Default)]
struct ProviderHealths {
    acquirer: Arc<ProviderHealth>,
    card_push: Arc<ProviderHealth>,
    custodian: Arc<ProviderHealth>,
    push_gateway: Arc<ProviderHealth>,
    issuer: Arc<ProviderHealth>,
}

impl ProviderHealths {
    fn named(&self) -> Vec<(&'static str, Arc<ProviderHealth>)> {
        vec![
            ("card_acquirer", self.acquirer.clone()),
            ("card_push", self.card_push.clone()),
            ("custodian", self.custodian.clone()),
            ("push_gateway", self.push_gateway.clone()),
            ("card_issuer", self.issuer.clone()),
        ]
    }
}

/// The settlement actors' providers (HTTP adapters on `provider_url`, each
/// recording its outcomes in `health`), retry policy and challenge lifetime,
/// and the (late-bound) transfers their legs report to.
fn settlement_context(
    provider_url: &str,
    config: &Config,
    health: &ProviderHealths,
    parents: Parents,
) -> anyhow::Result<SettlementContext> {
    let adapter =
        HttpProviderConfig::new(provider_url).with_request_timeout(config.provider_timeout);
    let observed = |health: &Arc<ProviderHealth>| adapter.clone().with_health(health.clone());
    let providers = Providers {
        acquirer: Arc::new(HttpCardAcquirer::new(&observed(&health.acquirer))?),
        card_push: Arc::new(HttpCardPush::new(&observed(&health.card_push))?),
        custodian: Arc::new(HttpCustodian::new(&observed(&health.custodian))?),
        pending_poll: chrono::Duration::from_std(PENDING_POLL)?,
    };
    let delays = config
        .settlement_retry_schedule
        .iter()
        .map(|delay| chrono::Duration::from_std(*delay))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SettlementContext {
        providers,
        policy: RetryPolicy {
            delays,
            challenge_ttl: chrono::Duration::from_std(config.challenge_ttl)?,
        },
        parents,
    })
}

/// The card actors and the issuer they (and secure details) reach on
/// `provider_url`.
fn card_runtime(
    runtime: &Runtime,
    provider_url: &str,
    config: &Config,
    health: &ProviderHealths,
) -> anyhow::Result<(Registry<CardKind>, Arc<dyn CardIssuer>)> {
    let adapter = HttpProviderConfig::new(provider_url)
        .with_request_timeout(config.provider_timeout)
        .with_health(health.issuer.clone());
    let issuer: Arc<dyn CardIssuer> =
        Arc::new(HttpCardIssuer::new(&adapter).context("building the card issuer adapter")?);
    let cards = runtime
        .register::<CardKind>(
            RegistryConfig::default(),
            CardContext {
                issuer: issuer.clone(),
                standing: Arc::new(StandingCache::new()),
                hold_ttl: chrono::Duration::from_std(config.card_hold_ttl)
                    .context("TERN_CARD_HOLD_TTL is out of range")?,
                intent_delay: tern_actors::card::intent_delay(config.provider_timeout),
            },
        )
        .context("registering the card actors")?;
    Ok((cards, issuer))
}

/// Push delivery through the gateway on `provider_url`.
fn push_delivery(
    provider_url: &str,
    config: &Config,
    db: &Db,
    health: &ProviderHealths,
) -> anyhow::Result<PushDelivery> {
    let adapter = HttpProviderConfig::new(provider_url)
        .with_request_timeout(config.provider_timeout)
        .with_health(health.push_gateway.clone());
    let gateway = HttpPushGateway::new(&adapter).context("building the push gateway adapter")?;
    Ok(PushDelivery::new(db.clone(), Arc::new(gateway)))
}

fn api_server(listener: TcpListener, state: web::Data<AppState>) -> anyhow::Result<Server> {
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            // Raw-body handlers (signed webhooks) get the same 64 KiB bound.
            .app_data(web::PayloadConfig::new(
                crate::http::extract::BODY_BYTES_MAX,
            ))
            .configure(|cfg| http::routes(cfg, &state))
            .default_service(web::to(http::fallback))
            .wrap(Compress::default())
            .wrap(from_fn(http::forward::relay))
            .wrap(from_fn(middleware::edge))
            // Outermost: it sees every answer, errors turned into problem
            // documents included.
            .wrap(from_fn(crate::metrics::record))
    })
    .max_connections(CONNECTIONS_PER_WORKER_MAX)
    .shutdown_timeout(SHUTDOWN_GRACE.as_secs())
    .listen(listener)?
    .run();
    Ok(server)
}

//! The sandbox provider simulator (decisions §15): its own listener, reached
//! by Tern's provider adapters over HTTP exactly as a real provider would be.
//! It keeps its own records in memory, honours idempotency keys (a key never
//! executes twice while it runs), takes faults through its control API and
//! signs the webhooks it sends back to Tern. The protocol is
//! `tern_actors::adapters::http::wire`.

mod acquirer;
mod card_network;
mod card_push;
mod control;
mod custodian;
mod issuer;
mod push;
mod store;
mod webhook;

use std::net::TcpListener;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::http::StatusCode;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use serde::Deserialize;
use serde_json::json;
use tern_actors::adapters::http::wire;

use store::{Begin, Ids, Record, RecordKey, Store, IDEMPOTENCY_KEY_CHARS_MAX};
pub use store::{SANDBOX_FAULTS_MAX, SANDBOX_RECORDS_MAX};

/// Workers of the simulator's listener; it is a test double, not a hot path.
pub const SANDBOX_WORKERS: usize = 1;
/// Request bodies larger than this are refused (413).
pub const SANDBOX_BODY_BYTES_MAX: usize = 16 * 1024;
/// How long `timeout_after_success` holds the answer: longer than an
/// adapter's default request timeout, so the caller gives up first.
pub const TIMEOUT_HANG_DEFAULT: Duration = Duration::from_secs(30);
/// How long `slow` delays an answer that then succeeds.
pub const SLOW_DELAY_DEFAULT: Duration = Duration::from_secs(3);
/// How long a pending refund, reversal or payout stays pending, and how
/// long a wallet token waits for its `wallet_token.updated` webhook.
pub const PENDING_DELAY_DEFAULT: Duration = Duration::from_secs(2);
/// Waits between webhook delivery attempts (the first attempt is
/// immediate); then the event is dropped with an error log.
pub const WEBHOOK_RETRY_DEFAULT: [Duration; 3] = [
    Duration::from_millis(500),
    Duration::from_secs(2),
    Duration::from_secs(8),
];

/// How the simulator reaches Tern, and its timings.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Tern's base URL; webhooks go to `{callback_base_url}/v1/webhooks/sandbox`.
    /// `None`: webhooks are logged and dropped.
    pub callback_base_url: Option<String>,
    /// The HMAC secret of `X-Sandbox-Signature` (Tern's
    /// TERN_CARD_PROVIDER_WEBHOOK_SECRET).
    pub webhook_secret: String,
    /// Base of the 3DS `redirect_url`; `None`: the listener's own address.
    pub public_base_url: Option<String>,
    pub timeout_hang: Duration,
    pub slow_delay: Duration,
    pub pending_delay: Duration,
    pub webhook_retry_schedule: Vec<Duration>,
}

impl SandboxConfig {
    pub fn new(callback_base_url: Option<String>, webhook_secret: String) -> SandboxConfig {
        SandboxConfig {
            callback_base_url,
            webhook_secret,
            public_base_url: None,
            timeout_hang: TIMEOUT_HANG_DEFAULT,
            slow_delay: SLOW_DELAY_DEFAULT,
            pending_delay: PENDING_DELAY_DEFAULT,
            webhook_retry_schedule: WEBHOOK_RETRY_DEFAULT.to_vec(),
        }
    }
}

/// The simulator's shared state.
pub(crate) struct Sandbox {
    config: SandboxConfig,
    public_base_url: String,
    store: Mutex<Store>,
    ids: Ids,
    webhooks: webhook::Sender,
    /// Signs the issuer's embed URLs; random per start, so URLs die with
    /// the simulator, as the cards they show do.
    embed_key: [u8; 32],
}

impl Sandbox {
    /// A poisoned lock only means a handler panicked mid-request; the
    /// records are still the best truth there is.
    fn lock(&self) -> MutexGuard<'_, Store> {
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(identity))
        .route("/health", web::get().to(health));
    acquirer::routes(cfg);
    card_push::routes(cfg);
    custodian::routes(cfg);
    issuer::routes(cfg);
    card_network::routes(cfg);
    push::routes(cfg);
    control::routes(cfg);
}

async fn identity() -> HttpResponse {
    HttpResponse::Ok().json(json!({"service": "tern-sandbox", "version": crate::state::VERSION}))
}

async fn health() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// Starts the simulator on `listener`; the returned server runs when
/// awaited or spawned.
pub fn serve(listener: TcpListener, config: SandboxConfig) -> std::io::Result<Server> {
    // reqwest (webhook delivery) needs a rustls provider; installing twice is harmless.
    tern_actors::adapters::install_crypto_provider();
    let public_base_url = match &config.public_base_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => format!("http://{}", listener.local_addr()?),
    };
    let webhooks = webhook::Sender::new(&config).map_err(std::io::Error::other)?;
    let sandbox = web::Data::new(Sandbox {
        ids: Ids::new(uuid::Uuid::new_v4().simple().to_string()),
        config,
        public_base_url,
        store: Mutex::new(Store::default()),
        webhooks,
        embed_key: rand::random(),
    });
    Ok(HttpServer::new(move || {
        App::new()
            .app_data(sandbox.clone())
            .app_data(
                web::JsonConfig::default()
                    .limit(SANDBOX_BODY_BYTES_MAX)
                    .error_handler(|err, _| {
                        let response =
                            error(StatusCode::BAD_REQUEST, "bad_request", &err.to_string());
                        actix_web::error::InternalError::from_response(err, response).into()
                    }),
            )
            .app_data(web::QueryConfig::default().error_handler(|err, _| {
                let response = error(StatusCode::BAD_REQUEST, "bad_request", &err.to_string());
                actix_web::error::InternalError::from_response(err, response).into()
            }))
            .wrap(actix_web::middleware::from_fn(traced))
            .configure(routes)
    })
    .workers(SANDBOX_WORKERS)
    .disable_signals()
    .listen(listener)?
    .run())
}

/// Each request as a span in the caller's trace, as a provider that takes
/// `traceparent` would show it (recorded only when traces are exported).
async fn traced(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody>,
) -> Result<actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    use tracing::Instrument;
    let span = tracing::debug_span!(
        target: tern_actors::trace::TARGET,
        "sandbox.request",
        method = %req.method(),
        path = %req.path(),
        otel.kind = "server",
    );
    crate::telemetry::continue_trace(&span, req.headers());
    next.call(req).instrument(span).await
}

/// A provider error body: `{"error": {"code", "message"}}`.
pub(crate) fn error(status: StatusCode, code: &str, message: &str) -> HttpResponse {
    HttpResponse::build(status).json(wire::ErrorBody {
        error: wire::ErrorDetail {
            code: code.to_owned(),
            message: message.to_owned(),
        },
    })
}

pub(crate) fn unavailable(message: &str) -> HttpResponse {
    error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
}

pub(crate) fn simulated_failure() -> HttpResponse {
    error(
        StatusCode::UNPROCESSABLE_ENTITY,
        "processing_error",
        "simulated permanent failure",
    )
}

/// A refusal before anything is looked up or executed; it answers the
/// provider error body.
#[derive(Debug)]
pub(crate) struct SandboxError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl SandboxError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: &str) -> SandboxError {
        SandboxError {
            status,
            code,
            message: message.to_owned(),
        }
    }
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.message)
    }
}

impl actix_web::ResponseError for SandboxError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        error(self.status, self.code, &self.message)
    }
}

/// The `Idempotency-Key` header, required on every executing request.
pub(crate) fn idempotency_key(request: &HttpRequest) -> Result<String, SandboxError> {
    let key = request
        .headers()
        .get(wire::IDEMPOTENCY_KEY_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or_default();
    if key.is_empty() || key.chars().count() > IDEMPOTENCY_KEY_CHARS_MAX {
        return Err(SandboxError::new(
            StatusCode::BAD_REQUEST,
            "idempotency_key_required",
            "an Idempotency-Key header of 1 to 255 characters is required",
        ));
    }
    Ok(key.to_owned())
}

/// Query of the lookup and inquiry endpoints.
#[derive(Deserialize)]
pub(crate) struct KeyQuery {
    idempotency_key: String,
}

/// What the idempotency check decided before any execution.
pub(crate) enum Admission {
    /// Execute under the held lock.
    New(String),
    /// Answer without executing.
    Answer(HttpResponse),
}

/// Checks the key under the held lock: a replay answers the stored result,
/// a conflicting reuse is 409, a full store is 503.
pub(crate) fn admit(
    store: &mut Store,
    at: &RecordKey,
    request: &impl serde::Serialize,
    replay: impl Fn(&Record) -> HttpResponse,
) -> Admission {
    // Serialising a plain struct cannot fail; an empty print would only make
    // a later reuse look like a conflict.
    let fingerprint = serde_json::to_string(request).unwrap_or_default();
    match store.begin(at, &fingerprint) {
        Begin::Replay(record) => Admission::Answer(replay(record)),
        Begin::Conflict => Admission::Answer(error(
            StatusCode::CONFLICT,
            wire::CODE_IDEMPOTENCY_CONFLICT,
            "this idempotency key was used with different parameters",
        )),
        Begin::New => match store.check_room(chrono::Utc::now()) {
            Ok(()) => Admission::New(fingerprint),
            Err(store::Full) => {
                Admission::Answer(unavailable("the simulator holds its maximum of records, all younger than its 24-hour key retention"))
            }
        },
    }
}

pub(crate) fn not_found() -> HttpResponse {
    error(
        StatusCode::NOT_FOUND,
        wire::CODE_NOT_FOUND,
        "no execution under this key",
    )
}

/// Holds the answer first when a fault says so (`slow`, and
/// `timeout_after_success`, whose execution is already stored so a caller
/// that gave up finds it by inquiry).
pub(crate) async fn answer_after(
    config: &SandboxConfig,
    (response, fault): (HttpResponse, Option<store::FaultMode>),
) -> HttpResponse {
    let delay = match fault {
        Some(store::FaultMode::Slow) => Some(config.slow_delay),
        Some(store::FaultMode::TimeoutAfterSuccess) => Some(config.timeout_hang),
        _ => None,
    };
    if let Some(delay) = delay {
        actix_web::rt::time::sleep(delay).await;
    }
    response
}

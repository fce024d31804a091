//! Operational endpoints (decisions §12): public, unauthenticated, cheap.
//! /health and /health/actors show strangers aggregate figures only; ids,
//! reasons and error text need the operator token ([`crate::auth::operator`]).

use std::time::{Duration, Instant};

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use tern_schema::store::transfers;

use crate::auth::operator::{self, Viewer};
use crate::http::problem::{ApiError, Problem};
use crate::state::{AppState, BUILD, VERSION};

/// How long readiness and health wait for the database before calling it down.
pub const DATABASE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// Most open alerts listed by /health and /health/actors (all are counted).
pub const ALERTS_LISTED_MAX: i64 = 20;

#[derive(Serialize, ToSchema)]
pub struct ServiceIdentity {
    #[schema(example = "tern")]
    service: &'static str,
    #[schema(example = "1.0.0")]
    version: &'static str,
    #[schema(example = "/docs")]
    docs: &'static str,
    #[schema(example = "/openapi.json")]
    openapi: &'static str,
}

#[derive(Serialize, ToSchema)]
pub struct StatusBody {
    /// `alive` for /live, `ready` for /ready.
    status: &'static str,
}

#[derive(Serialize, ToSchema)]
pub struct VersionBody {
    service: &'static str,
    version: &'static str,
    environment: &'static str,
    /// The source revision the binary was built from.
    build: &'static str,
    /// The server's current time.
    timestamp: String,
    started_at: String,
}

#[derive(Serialize, ToSchema)]
pub struct HealthBody {
    /// `ok`, `degraded` (serving, something needs attention) or `down`.
    #[schema(example = "ok")]
    status: &'static str,
    version: &'static str,
    environment: &'static str,
    /// Per component: `status` and details.
    #[schema(value_type = Object)]
    components: serde_json::Value,
}

/// Service identity.
#[utoipa::path(get, path = "/", tag = "ops", responses((status = 200, body = ServiceIdentity)))]
pub async fn root() -> HttpResponse {
    HttpResponse::Ok().json(ServiceIdentity {
        service: "tern",
        version: VERSION,
        docs: "/docs",
        openapi: "/openapi.json",
    })
}

/// Process liveness: answers while the process can serve at all.
#[utoipa::path(get, path = "/live", tag = "ops", responses((status = 200, body = StatusBody)))]
pub async fn live() -> HttpResponse {
    HttpResponse::Ok().json(StatusBody { status: "alive" })
}

/// Readiness for traffic: 503 naming the failing component.
#[utoipa::path(get, path = "/ready", tag = "ops", responses(
    (status = 200, body = StatusBody),
    (status = 503, description = "A component is unavailable", body = Problem, content_type = "application/problem+json"),
))]
pub async fn ready(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    // The component is named; its error text goes to the log only.
    check_database(&state).await.map_err(|cause| {
        tracing::warn!(%cause, "not ready: database");
        ApiError::NotReady("database: unavailable".into())
    })?;
    Ok(HttpResponse::Ok().json(StatusBody { status: "ready" }))
}

/// Service, version, environment and build.
#[utoipa::path(get, path = "/version", tag = "ops", responses((status = 200, body = VersionBody)))]
pub async fn version(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(VersionBody {
        service: "tern",
        version: VERSION,
        environment: state.config.environment.as_str(),
        build: BUILD,
        timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        started_at: state
            .started_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    })
}

/// Aggregate health of the database and the actor runtime.
#[utoipa::path(get, path = "/health", tag = "ops", responses(
    (status = 200, body = HealthBody, description = "Health; ids and error text only with the operator token"),
    (status = 401, description = "An Authorization header that is not the operator token", body = Problem, content_type = "application/problem+json"),
))]
pub async fn health(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let viewer = operator::viewer(&req, state.config.operator_token.as_deref())?;
    let started = Instant::now();
    let database = match check_database(&state).await {
        Ok(()) => {
            json!({"status": "ok", "backend": state.db.backend().as_str(), "latency_ms": started.elapsed().as_millis() as u64})
        }
        Err(cause) => {
            json!({"status": "down", "backend": state.db.backend().as_str(), "error": cause})
        }
    };
    let figures = state.runtime.figures();
    let actors_ok = figures.healthy();
    let actors = json!({"status": if actors_ok { "ok" } else { "degraded" }, "kinds": figures.kinds, "timers": figures.timers});
    let database_ok = database["status"] == "ok";
    let mut providers_ok = true;
    let mut components = serde_json::Map::new();
    for (name, health) in &state.providers {
        let figures = health.figures();
        providers_ok &= figures.status == "ok";
        components.insert((*name).to_owned(), json!(figures));
    }
    if state.providers.is_empty() {
        components.insert("providers".into(), json!({"status": "unconfigured"}));
    }
    let alerts = open_alerts(&state).await;
    let alerts_ok = alerts["status"] == "ok";
    components.insert("database".into(), database);
    components.insert("actors".into(), actors);
    components.insert("alerts".into(), alerts);
    let status = match (database_ok, actors_ok && providers_ok && alerts_ok) {
        (false, _) => "down",
        (true, false) => "degraded",
        (true, true) => "ok",
    };
    let mut components = serde_json::Value::Object(components);
    if viewer == Viewer::Stranger {
        for component in components
            .as_object_mut()
            .into_iter()
            .flat_map(|c| c.values_mut())
        {
            redact(component);
        }
    }
    Ok(HttpResponse::Ok().json(HealthBody {
        status,
        version: VERSION,
        environment: state.config.environment.as_str(),
        components,
    }))
}

/// The actor runtime's figures per kind: live, backlog, restarts, oldest
/// in-flight age, stuck entities.
#[utoipa::path(get, path = "/health/actors", tag = "ops", responses(
    (status = 200, description = "Figures per actor kind; stuck entities and alerts by id only with the operator token", body = Object),
    (status = 401, description = "An Authorization header that is not the operator token", body = Problem, content_type = "application/problem+json"),
))]
pub async fn actors(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let viewer = operator::viewer(&req, state.config.operator_token.as_deref())?;
    let mut body = serde_json::to_value(state.runtime.figures()).unwrap_or_else(|_| json!({}));
    if let Some(body) = body.as_object_mut() {
        body.insert("alerts".into(), open_alerts(&state).await);
    }
    if viewer == Viewer::Stranger {
        redact(&mut body);
    }
    Ok(HttpResponse::Ok().json(body))
}

/// The Prometheus text format: request, actor, timer and cluster figures
/// (see [`crate::metrics`]). Open without TERN_OPERATOR_TOKEN; with it,
/// only the operator token reads it.
#[utoipa::path(get, path = "/metrics", tag = "ops", responses(
    (status = 200, description = "Metrics in the Prometheus text format", body = String, content_type = "text/plain"),
    (status = 401, description = "The operator token is set and was not presented", body = Problem, content_type = "application/problem+json"),
    (status = 503, description = "Metrics are off (no recorder)", body = Problem, content_type = "application/problem+json"),
))]
pub async fn metrics(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let operator = match state.config.operator_token.as_deref() {
        Some(token) => {
            if operator::viewer(&req, Some(token))? != Viewer::Operator {
                return Err(ApiError::Unauthorized(
                    "/metrics needs the operator token (Authorization: Bearer)",
                ));
            }
            true
        }
        None => false,
    };
    let Some(body) = crate::metrics::render(|| state.runtime.figures(), operator) else {
        return Err(ApiError::Overloaded {
            detail: "metrics are off: another recorder was installed".into(),
            retry_after_s: 60,
        });
    };
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(body.to_string()))
}

/// What a stranger may not read of a health component, at any depth:
/// entity ids and merchant ids (stuck entities, alerting transfers), and
/// error text (the database's, a provider's, a stuck entity's reason).
/// Counts and statuses stay.
/// Of the cluster: nodes' names and addresses, and where slots came from.
const DETAIL_FIELDS: [&str; 8] = [
    "stuck_entities",
    "entities",
    "error",
    "last_failure",
    "nodes",
    "node_id",
    "advertise_url",
    "from",
];

fn redact(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|key, _| !DETAIL_FIELDS.contains(&key.as_str()));
            map.values_mut().for_each(redact);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

/// Open operator alerts (transfers whose refund could not be made), until
/// an operator acknowledges them with `tern alerts ack <transfer_id>`.
async fn open_alerts(state: &AppState) -> serde_json::Value {
    let listed = async {
        let mut pooled = state.db.get().await?;
        let tx = &mut pooled.tx();
        let count = transfers::open_alert_count(tx).await?;
        let open = transfers::open_alerts(tx, ALERTS_LISTED_MAX).await?;
        Ok::<_, tern_schema::StoreError>((count, open))
    };
    match tokio::time::timeout(DATABASE_CHECK_TIMEOUT, listed).await {
        Ok(Ok((count, open))) => {
            let entities: Vec<_> = open
                .into_iter()
                .map(|(id, merchant_id, alert)| {
                    json!({"kind": "transfer", "id": id, "merchant_id": merchant_id, "alert": alert})
                })
                .collect();
            json!({
                "status": if count == 0 { "ok" } else { "alerting" },
                "open": count,
                "entities": entities,
            })
        }
        Ok(Err(error)) => json!({"status": "unknown", "error": error.to_string()}),
        Err(_) => json!({"status": "unknown", "error": "the database did not answer in time"}),
    }
}

async fn check_database(state: &AppState) -> Result<(), String> {
    match tokio::time::timeout(DATABASE_CHECK_TIMEOUT, state.db.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!(
            "no answer within {} ms",
            DATABASE_CHECK_TIMEOUT.as_millis()
        )),
    }
}

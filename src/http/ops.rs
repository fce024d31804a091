//! Operational endpoints (decisions §12): public, unauthenticated, cheap.

use std::time::{Duration, Instant};

use actix_web::{web, HttpResponse};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use tern_schema::store::transfers;

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
    check_database(&state)
        .await
        .map_err(|cause| ApiError::NotReady(format!("database: {cause}")))?;
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
#[utoipa::path(get, path = "/health", tag = "ops", responses((status = 200, body = HealthBody)))]
pub async fn health(state: web::Data<AppState>) -> HttpResponse {
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
    HttpResponse::Ok().json(HealthBody {
        status,
        version: VERSION,
        environment: state.config.environment.as_str(),
        components: serde_json::Value::Object(components),
    })
}

/// The actor runtime's figures per kind: live, backlog, restarts, oldest
/// in-flight age, stuck entities.
#[utoipa::path(get, path = "/health/actors", tag = "ops", responses((status = 200, description = "Figures per actor kind", body = Object)))]
pub async fn actors(state: web::Data<AppState>) -> HttpResponse {
    let mut body = serde_json::to_value(state.runtime.figures()).unwrap_or_else(|_| json!({}));
    if let Some(body) = body.as_object_mut() {
        body.insert("alerts".into(), open_alerts(&state).await);
    }
    HttpResponse::Ok().json(body)
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

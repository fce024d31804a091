use serde_json::Value;

use crate::helpers::{assert_problem, RequestExt, TestApp};

#[actix_web::test]
async fn identity_liveness_and_version() {
    let app = TestApp::spawn().await;
    let root: Value = app.get("/").read_json().await;
    assert_eq!(root["service"], "tern");
    assert_eq!(root["version"], "1.0.0");
    assert_eq!(root["docs"], "/docs");
    assert_eq!(root["openapi"], "/openapi.json");

    let live = app.get("/live").send().await.expect("req");
    assert_eq!(live.status(), 200);
    assert_eq!(live.json::<Value>().await.expect("json")["status"], "alive");

    let version: Value = app.get("/version").read_json().await;
    for field in ["service", "version", "environment", "build", "timestamp"] {
        assert!(
            version[field].as_str().is_some_and(|v| !v.is_empty()),
            "{field} in {version}"
        );
    }
    assert_eq!(version["environment"], "development");
}

#[actix_web::test]
async fn ready_and_health_report_the_database() {
    let app = TestApp::spawn().await;
    let ready = app.get("/ready").send().await.expect("req");
    assert_eq!(ready.status(), 200);
    assert_eq!(
        ready.json::<Value>().await.expect("json")["status"],
        "ready"
    );

    let health: Value = app.get("/health").read_json().await;
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["components"]["database"]["status"], "ok");
    assert!(health["components"]["actors"].is_object(), "{health}");

    let actors = app.get("/health/actors").send().await.expect("req");
    assert_eq!(actors.status(), 200);
    assert!(actors.json::<Value>().await.expect("json").is_object());
}

#[actix_web::test]
async fn ready_is_503_naming_the_database_when_it_is_unreachable() {
    let app = TestApp::spawn().await;
    app.state.db.close();
    let body = assert_problem(
        app.get("/ready").send().await.expect("req"),
        503,
        "not-ready",
    )
    .await;
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("database")),
        "{body}"
    );

    let health: Value = app.get("/health").read_json().await;
    assert_eq!(health["status"], "down");
    assert_eq!(health["components"]["database"]["status"], "down");
    // The database's own words are for the operator only.
    assert_eq!(
        health["components"]["database"]["error"],
        Value::Null,
        "{health}"
    );
    assert_eq!(body["detail"], "database: unavailable", "{body}");
    let detailed = app.operator_json("/health").await;
    assert!(
        detailed["components"]["database"]["error"].is_string(),
        "{detailed}"
    );
    // Liveness does not depend on the database.
    assert_eq!(app.get("/live").send().await.expect("req").status(), 200);
}

#[actix_web::test]
async fn request_ids_are_echoed_when_sane_and_generated_otherwise() {
    let app = TestApp::spawn().await;
    let echoed = app
        .get("/live")
        .header("X-Request-ID", "trace-abc.123")
        .send()
        .await
        .expect("req");
    assert_eq!(echoed.headers()["x-request-id"], "trace-abc.123");

    let generated = app.get("/live").send().await.expect("req");
    let id = generated.headers()["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert_eq!(id.len(), 36, "a uuid: {id}");

    let too_long = "x".repeat(129);
    let replaced = app
        .get("/live")
        .header("X-Request-ID", &too_long)
        .send()
        .await
        .expect("req");
    assert_ne!(replaced.headers()["x-request-id"], too_long.as_str());

    let in_problem = app
        .get("/nowhere")
        .header("X-Request-ID", "corr-42")
        .send()
        .await
        .expect("req");
    let body = assert_problem(in_problem, 404, "not-found").await;
    assert_eq!(body["request_id"], "corr-42");
}

#[actix_web::test]
async fn the_sandbox_listener_runs_beside_the_api() {
    let app = TestApp::spawn().await;
    let sandbox = app.sandbox_address.clone().expect("sandbox listener");
    let identity: Value = app.client.get(format!("{sandbox}/")).read_json().await;
    assert_eq!(identity["service"], "tern-sandbox");
}

/// `tern status --url <url>` on `app`'s database, with the operator
/// token; answers stdout once it exited successfully.
async fn tern_status(app: &crate::helpers::TestApp, url: &str) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["status", "--url", url])
        .env("TERN_DATABASE_URL", app.database.url())
        .env("TERN_OPERATOR_TOKEN", crate::helpers::OPERATOR_TOKEN)
        .env("TERN_LOG", "warn")
        .output()
        .await
        .expect("run tern status");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `tern status` against a running app and its database: work in flight,
/// alerts and dead letters from the database; health and each actor
/// kind's figures from the node, read with the operator token.
#[actix_web::test]
async fn tern_status_prints_the_database_and_the_running_node() {
    let app = crate::helpers::TestApp::spawn().await;
    let merchant = app.merchant().await;
    let created =
        crate::helpers::transfers::create(&app, &merchant, "pm_card_threeDSecureRequired").await;
    crate::helpers::transfers::challenged(
        &app,
        &merchant,
        &crate::helpers::transfers::id(&created),
    )
    .await;
    let stdout = tern_status(&app, &app.address).await;
    assert!(
        stdout.contains("transfers in flight:   leg1_in_flight 1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("settlements in flight: in_flight 1"),
        "{stdout}"
    );
    assert!(stdout.contains("open alerts:           0"), "{stdout}");
    assert!(
        stdout.contains("dead-lettered webhook events: none"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("node {}: ", app.address)),
        "{stdout}"
    );
    for kind in ["settlement", "transfer", "webhook_endpoint"] {
        assert!(stdout.contains(&format!("  {kind} ")), "{kind}: {stdout}");
    }

    // A node that does not answer: the database part stands.
    let stdout = tern_status(&app, "http://127.0.0.1:9").await;
    assert!(stdout.contains("transfers in flight:"), "{stdout}");
    assert!(stdout.contains("not reached"), "{stdout}");
}

//! The `tern` binary itself: configuration errors, the CLI, serving and
//! stopping on SIGTERM.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tern_schema::models::UserRow;
use tern_schema::store::users;
use tern_schema::testing::TestDatabase;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{MerchantId, UserId, UserStatus};
use tern_schema::{write_tx, StoreError};

use crate::helpers::{assert_problem, TestApp};

const TERN: &str = env!("CARGO_BIN_EXE_tern");

fn tern(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut command = Command::new(TERN);
    command.args(args).env("TERN_LOG", "warn");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run tern")
}

/// [`tern`] while a `TestApp` runs on this thread: waiting for the process
/// here would stop the app mid-transaction, holding SQLite's write lock
/// that the process then waits for.
async fn tern_beside_app(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    actix_web::rt::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        tern(&args, &env)
    })
    .await
    .expect("run tern")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

#[test]
fn a_bad_setting_stops_the_process_naming_the_variable() {
    for (variable, value) in [
        ("TERN_BIND", "everywhere"),
        ("TERN_QUOTE_TTL", "a while"),
        ("TERN_RATE_LIMITS", "login=lots"),
    ] {
        let output = tern(&["serve"], &[(variable, value)]);
        assert!(
            !output.status.success(),
            "{variable}={value} must stop the process"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(variable), "{variable}: {stderr}");
    }
}

#[test]
fn openapi_prints_a_3_0_document() {
    let output = tern(&["openapi"], &[]);
    assert!(output.status.success());
    let doc: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.0.")),
        "{}",
        doc["openapi"]
    );
    assert_eq!(doc["info"]["version"], "1.0.0");
    assert!(doc["paths"]["/v1/auth/m2m/register"]["post"].is_object());
}

#[actix_web::test]
async fn merchant_status_commands_take_effect_within_a_second() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let url = app.database.url().to_owned();
    let env = [("TERN_DATABASE_URL", url.as_str())];

    let output = tern_beside_app(
        &["merchant", "suspend", merchant.merchant_id.as_str()],
        &env,
    )
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("active -> suspended"));
    let suspended_at = Instant::now();
    loop {
        let response = app
            .post("/v1/api-keys")
            .bearer_auth(&merchant.api_key)
            .send()
            .await
            .expect("req");
        if response.status() == 403 {
            let problem = assert_problem(response, 403, "merchant-inactive").await;
            assert_eq!(problem["code"], "MERCHANT_SUSPENDED");
            break;
        }
        assert!(
            suspended_at.elapsed() < Duration::from_secs(1),
            "still {} after a second",
            response.status()
        );
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
    // Reading stays allowed while suspended.
    assert_eq!(
        app.get("/v1/api-keys")
            .bearer_auth(&merchant.api_key)
            .send()
            .await
            .expect("req")
            .status(),
        200
    );

    assert!(tern_beside_app(
        &["merchant", "disable", merchant.merchant_id.as_str()],
        &env
    )
    .await
    .status
    .success());
    actix_web::rt::time::sleep(Duration::from_millis(600)).await;
    let problem = assert_problem(
        app.post("/v1/api-keys")
            .bearer_auth(&merchant.api_key)
            .send()
            .await
            .expect("req"),
        403,
        "merchant-inactive",
    )
    .await;
    assert_eq!(problem["code"], "MERCHANT_DISABLED");

    assert!(tern_beside_app(
        &["merchant", "activate", merchant.merchant_id.as_str()],
        &env
    )
    .await
    .status
    .success());
    actix_web::rt::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        app.post("/v1/api-keys")
            .bearer_auth(&merchant.api_key)
            .send()
            .await
            .expect("req")
            .status(),
        201
    );

    let unknown = tern_beside_app(
        &[
            "merchant",
            "suspend",
            "00000000-0000-0000-0000-000000000000",
        ],
        &env,
    )
    .await;
    assert!(!unknown.status.success(), "an unknown merchant is an error");
}

/// A user row written directly: registration is not on this branch.
async fn insert_user(app: &TestApp, merchant_id: &MerchantId, email: &str) -> UserRow {
    let now = utc_now();
    let row = UserRow {
        id: UserId::new(uuid::Uuid::now_v7().to_string()),
        merchant_id: merchant_id.clone(),
        email: email.to_owned(),
        name: "Ada Lovelace".into(),
        password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2g".into(),
        status: UserStatus::Active,
        email_verified_at: None,
        created_at: now,
        updated_at: now,
    };
    let inserted: Result<(), StoreError> =
        write_tx!(app.state.db, |tx| users::insert(tx, &row).await);
    inserted.expect("insert the user");
    row
}

#[actix_web::test]
async fn user_disable_and_enable_change_the_status_and_audit_it() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let user = insert_user(&app, &merchant.merchant_id, "ada@example.com").await;
    let url = app.database.url().to_owned();
    let env = [("TERN_DATABASE_URL", url.as_str())];

    // The email is matched trimmed and case-blind, as stored.
    let disabled = tern_beside_app(&["user", "disable", "  Ada@Example.COM "], &env).await;
    assert!(
        disabled.status.success(),
        "{}",
        String::from_utf8_lossy(&disabled.stderr)
    );
    let stdout = String::from_utf8_lossy(&disabled.stdout);
    assert!(stdout.contains("active -> disabled"), "{stdout}");
    let mut pooled = app.state.db.get().await.expect("conn");
    let row = users::find(&mut pooled.tx(), &user.id)
        .await
        .expect("read")
        .expect("the user");
    assert_eq!(row.status, UserStatus::Disabled);
    let events =
        tern_schema::store::audit::events_before(&mut pooled.tx(), &merchant.merchant_id, None, 1)
            .await
            .expect("audit");
    let event = events.first().expect("an audit event");
    assert_eq!(event.action, "user.disabled");
    assert_eq!(
        (event.actor_type.as_str(), event.actor_id.as_str()),
        ("operator", "cli")
    );
    assert_eq!(
        (event.resource_type.as_str(), event.resource_id.as_str()),
        ("user", user.id.as_str())
    );
    drop(pooled);

    let enabled = tern_beside_app(&["user", "enable", "ada@example.com"], &env).await;
    assert!(enabled.status.success());
    assert!(String::from_utf8_lossy(&enabled.stdout).contains("disabled -> active"));
    let mut pooled = app.state.db.get().await.expect("conn");
    let row = users::find(&mut pooled.tx(), &user.id)
        .await
        .expect("read")
        .expect("the user");
    assert_eq!(row.status, UserStatus::Active);
    let events =
        tern_schema::store::audit::events_before(&mut pooled.tx(), &merchant.merchant_id, None, 1)
            .await
            .expect("audit");
    assert_eq!(events[0].action, "user.enabled");
    drop(pooled);
    let verify = tern_beside_app(
        &[
            "audit",
            "verify",
            "--merchant",
            merchant.merchant_id.as_str(),
        ],
        &env,
    )
    .await;
    assert!(verify.status.success(), "the chain stays valid");

    let unknown = tern_beside_app(&["user", "disable", "nobody@example.com"], &env).await;
    assert!(!unknown.status.success(), "an unknown email is an error");
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("no user with email nobody@example.com"),
        "{}",
        String::from_utf8_lossy(&unknown.stderr)
    );
}

#[actix_web::test]
async fn serve_becomes_ready_and_stops_on_sigterm() {
    let database = TestDatabase::create().await;
    let data_dir = tempfile::tempdir().expect("dir");
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");

    let migrated = tern(&["migrate"], &[("TERN_DATABASE_URL", database.url())]);
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );

    let mut child = Command::new(TERN)
        .env("TERN_DATABASE_URL", database.url())
        .env("TERN_BIND", &bind)
        .env("TERN_SANDBOX_BIND", format!("127.0.0.1:{}", free_port()))
        .env("TERN_DATA_DIR", data_dir.path())
        .env("TERN_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn tern");
    tern_actors::adapters::install_crypto_provider();
    let client = reqwest::Client::new();
    let started = Instant::now();
    let ready = loop {
        if let Ok(response) = client.get(format!("http://{bind}/ready")).send().await {
            break response.status();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not ready after 30 s"
        );
        actix_web::rt::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(ready, 200);

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let stopping = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            stopping.elapsed() < Duration::from_secs(15),
            "still running 15 s after SIGTERM"
        );
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit status {status}");
}

#[actix_web::test]
async fn ledger_check_and_audit_verify_report_tampering() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    // The test breaks both on purpose, to see the commands report it.
    app.allow_broken_ledger();
    app.allow_broken_audit_chain(&merchant);
    let url = app.database.url().to_owned();
    let env = [("TERN_DATABASE_URL", url.as_str())];
    let check = tern_beside_app(&["ledger", "check"], &env).await;
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    assert!(String::from_utf8_lossy(&check.stdout).contains("ledger ok"));
    let verify = tern_beside_app(&["audit", "verify"], &env).await;
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );

    let sql = format!(
        "UPDATE ledger_accounts SET posted_credits_minor = 5 WHERE merchant_id = '{id}' AND currency = 'USD'; \
         DELETE FROM audit_events WHERE merchant_id = '{id}' AND seq = 2",
        id = merchant.merchant_id
    );
    app.sql(&sql).await.expect("tamper");

    let check = tern_beside_app(&["ledger", "check"], &env).await;
    assert!(!check.status.success(), "a tampered ledger fails the check");
    assert!(String::from_utf8_lossy(&check.stdout).contains("VIOLATION"));
    let verify = tern_beside_app(
        &[
            "audit",
            "verify",
            "--merchant",
            merchant.merchant_id.as_str(),
        ],
        &env,
    )
    .await;
    assert!(!verify.status.success());
    assert!(
        String::from_utf8_lossy(&verify.stdout).contains("first invalid seq Some(2)"),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

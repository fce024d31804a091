//! POST /v1/auth/register.

use serde_json::{json, Value};

use crate::helpers::humans::{attributes, set_cookie, unique_email, PASSWORD};
use crate::helpers::{assert_problem, TestApp};

#[actix_web::test]
async fn registration_creates_a_user_a_merchant_and_a_session() {
    let app = TestApp::spawn().await;
    let email = unique_email();
    let response = app
        .register_human(json!({"name": " Ada  King Lovelace ", "email": format!("  {}", email.to_uppercase()), "password": PASSWORD}))
        .await;
    assert_eq!(response.status(), 201);
    let header = set_cookie(&response).expect("Set-Cookie svc_session");
    let attrs = attributes(&header);
    for expected in ["httponly", "samesite=lax", "path=/", "secure"] {
        assert!(attrs.contains(&expected.to_owned()), "{header}");
    }
    assert!(attrs.iter().any(|a| a == "max-age=86400"), "{header}");
    let token = header
        .split(';')
        .next()
        .and_then(|pair| pair.strip_prefix("svc_session="))
        .expect("token");
    assert!(token.len() >= 43, "256 bits of token: {token}");
    let cookie = format!("svc_session={token}");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["email_verified"], false);
    assert!(body["session_expires_at"].as_str().is_some());
    let user_id = body["user_id"].as_str().expect("user_id");
    let merchant_id = body["merchant_id"].as_str().expect("merchant_id");
    uuid::Uuid::parse_str(user_id).expect("user_id is a UUID");
    uuid::Uuid::parse_str(merchant_id).expect("merchant_id is a UUID");

    let me: Value = app.me(&cookie).await.json().await.expect("json");
    assert_eq!(me["user_id"], user_id);
    assert_eq!(me["merchant_id"], merchant_id);
    assert_eq!(me["email"], email, "trimmed and lowercased");
    assert_eq!(me["name"], "Ada  King Lovelace");
    assert_eq!(me["preferred_name"], me["name"]);
    assert_eq!(me["first_name"], "Ada");
    assert_eq!(me["last_name"], "King Lovelace");
    assert_eq!(me["email_verified"], false);
    let scopes: Vec<&str> = me["scopes"]
        .as_array()
        .expect("scopes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for scope in [
        "transfers:write",
        "settlements:read",
        "audit:read",
        "devices:write",
    ] {
        assert!(scopes.contains(&scope), "{scopes:?}");
    }

    // The session acts on the merchant it owns: its ledger and audit chain.
    let accounts = app
        .get("/v1/ledger/accounts")
        .header("cookie", &cookie)
        .send()
        .await
        .expect("request");
    assert_eq!(accounts.status(), 200);
    let events = app.audit_events(&cookie).await;
    let actions: Vec<&str> = events.iter().filter_map(|e| e["action"].as_str()).collect();
    assert!(actions.contains(&"merchant.registered"), "{actions:?}");
    assert!(actions.contains(&"user.registered"), "{actions:?}");
}

#[actix_web::test]
async fn an_email_registers_once_whatever_its_case() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let again = app
        .register_human(json!({"name": "Someone Else", "email": format!(" {} ", human.email.to_uppercase()), "password": "another password"}))
        .await;
    let problem = assert_problem(again, 409, "conflict").await;
    assert_eq!(problem["code"], "EMAIL_ALREADY_REGISTERED");
    // The first password still logs in; the second never does.
    assert_eq!(app.login(&human.email, PASSWORD).await.status(), 200);
    assert_eq!(
        app.login(&human.email, "another password").await.status(),
        401
    );
}

#[actix_web::test]
async fn bad_registrations_name_their_fields_and_store_nothing() {
    let app = TestApp::spawn().await;
    let email = unique_email();
    let cases = [
        (
            json!({"name": "", "email": email, "password": PASSWORD}),
            vec!["name"],
        ),
        (
            json!({"name": "  ", "email": email, "password": PASSWORD}),
            vec!["name"],
        ),
        (
            json!({"name": "Ada", "email": "not-an-email", "password": PASSWORD}),
            vec!["email"],
        ),
        (
            json!({"name": "Ada", "email": email, "password": "short"}),
            vec!["password"],
        ),
        (
            json!({"name": "Ada", "email": email, "password": "x".repeat(129)}),
            vec!["password"],
        ),
        (
            json!({"name": "", "email": "nope", "password": "1"}),
            vec!["name", "email", "password"],
        ),
        (json!({"name": "Ada", "email": email}), vec!["password"]),
        (
            json!({"name": "Ada", "email": email, "password": 12345678}),
            vec!["password"],
        ),
        (
            json!({"name": "Ada", "email": email, "password": PASSWORD, "admin": true}),
            vec!["admin"],
        ),
    ];
    for (body, fields) in cases {
        let response = app.register_human(body.clone()).await;
        let problem = assert_problem(response, 422, "validation-error").await;
        for field in fields {
            assert!(problem["errors"][field].is_string(), "{body}: {problem}");
        }
    }
    let malformed = app
        .post("/v1/auth/register")
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .expect("request");
    assert_problem(malformed, 400, "malformed-json").await;
    let form = app
        .post("/v1/auth/register")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("name=a&email=b&password=c")
        .send()
        .await
        .expect("request");
    assert_eq!(form.status(), 415);
    let huge = app
        .post("/v1/auth/register")
        .header("content-type", "application/json")
        .body(format!("{{\"name\": \"{}\"}}", "a".repeat(70_000)))
        .send()
        .await
        .expect("request");
    assert_eq!(huge.status(), 413);
    assert!(app.stored_user(&email).await.is_none(), "nothing stored");
}

#[actix_web::test]
async fn registration_is_limited_per_ip_and_can_be_disabled() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = tern::config::RateLimits::parse("register=2/1m").expect("limits");
    })
    .await;
    for _ in 0..2 {
        let response = app
            .register_human(json!({"name": "Ada", "email": unique_email(), "password": PASSWORD}))
            .await;
        assert_eq!(response.status(), 201);
    }
    let email = unique_email();
    let limited = app
        .register_human(json!({"name": "Ada", "email": email, "password": PASSWORD}))
        .await;
    let retry_after: u64 = limited
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After seconds");
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_problem(limited, 429, "rate-limited").await;
    assert!(app.stored_user(&email).await.is_none());

    let closed = TestApp::spawn_with(|config| config.self_service_registration = false).await;
    let response = closed
        .register_human(json!({"name": "Ada", "email": unique_email(), "password": PASSWORD}))
        .await;
    assert_problem(response, 503, "registration-disabled").await;
}

#[actix_web::test]
async fn plain_http_development_drops_the_secure_attribute() {
    let app = TestApp::spawn_with(|config| config.cookie_secure = false).await;
    let response = app
        .register_human(json!({"name": "Ada", "email": unique_email(), "password": PASSWORD}))
        .await;
    let header = set_cookie(&response).expect("cookie");
    let attrs = attributes(&header);
    assert!(!attrs.contains(&"secure".to_owned()), "{header}");
    assert!(attrs.contains(&"httponly".to_owned()), "{header}");
}

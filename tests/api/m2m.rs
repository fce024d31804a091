//! POST /v1/auth/m2m/register.

use serde_json::{json, Value};

use crate::helpers::{assert_problem, TestApp};

#[actix_web::test]
async fn registration_issues_a_working_key_shown_once() {
    let app = TestApp::spawn().await;
    let response = app
        .register(json!({"organization_name": "Acme", "email": "ops@acme.example"}))
        .await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.expect("json");
    let key = body["api_key"].as_str().expect("key");
    let prefix = body["api_key_prefix"].as_str().expect("prefix");
    assert!(key.starts_with(&format!("svc_{prefix}_")), "{key}");
    assert!(
        key.len() >= 4 + prefix.len() + 1 + 64,
        "at least 32 bytes of secret: {key}"
    );
    uuid::Uuid::parse_str(body["merchant_id"].as_str().expect("id"))
        .expect("merchant_id is a uuid");
    uuid::Uuid::parse_str(body["api_key_id"].as_str().expect("id")).expect("api_key_id is a uuid");
    let scopes: Vec<&str> = body["scopes"]
        .as_array()
        .expect("scopes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for scope in tern::auth::scopes::ALL_SCOPES {
        assert!(scopes.contains(&scope), "default scopes include {scope}");
    }

    for header in ["authorization", "x-api-key"] {
        let value = if header == "authorization" {
            format!("Bearer {key}")
        } else {
            key.to_owned()
        };
        let listed = app
            .get("/v1/api-keys")
            .header(header, value)
            .send()
            .await
            .expect("req");
        assert_eq!(listed.status(), 200, "{header}");
        let text = listed.text().await.expect("text");
        assert!(!text.contains(key), "the secret is never shown again");
        assert!(text.contains(prefix));
    }
}

#[actix_web::test]
async fn requested_scopes_narrow_the_key() {
    let app = TestApp::spawn().await;
    let response = app
        .register(json!({"organization_name": "Narrow", "email": "a@b.co", "scopes": ["quotes:read", "api_keys:read"]}))
        .await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["scopes"], json!(["quotes:read", "api_keys:read"]));
    let key = body["api_key"].as_str().expect("key");
    let denied = app
        .post("/v1/api-keys")
        .bearer_auth(key)
        .send()
        .await
        .expect("req");
    let problem = assert_problem(denied, 403, "insufficient-scope").await;
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("api_keys:write")),
        "{problem}"
    );
}

#[actix_web::test]
async fn invalid_registrations_are_422_by_field() {
    let app = TestApp::spawn().await;
    let cases = [
        (
            json!({"organization_name": "", "email": "a@b.co"}),
            vec!["organization_name"],
        ),
        (
            json!({"organization_name": "   ", "email": "a@b.co"}),
            vec!["organization_name"],
        ),
        (
            json!({"organization_name": "A", "email": "not-an-email"}),
            vec!["email"],
        ),
        (
            json!({"organization_name": "", "email": ""}),
            vec!["organization_name", "email"],
        ),
        (
            json!({"organization_name": "A", "email": "a@b.co", "scopes": ["quotes:read", "god:mode"]}),
            vec!["scopes"],
        ),
        (
            json!({"organization_name": "A", "email": "a@b.co", "scopes": []}),
            vec!["scopes"],
        ),
    ];
    for (body, fields) in cases {
        let problem =
            assert_problem(app.register(body.clone()).await, 422, "validation-error").await;
        for field in fields {
            assert!(
                problem["errors"][field].is_string(),
                "{field} for {body}: {problem}"
            );
        }
    }
    let problem = assert_problem(
        app.register(json!({"organization_name": "A", "email": "a@b.co", "scopes": ["god:mode"]}))
            .await,
        422,
        "validation-error",
    )
    .await;
    assert!(
        problem["errors"]["scopes"]
            .as_str()
            .is_some_and(|m| m.contains("god:mode")),
        "{problem}"
    );
}

#[actix_web::test]
async fn registration_is_rate_limited_per_ip_with_retry_after() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = tern::config::RateLimits::parse("m2m_register=2/1h").expect("valid");
    })
    .await;
    let body = json!({"organization_name": "Busy", "email": "a@b.co"});
    assert_eq!(app.register(body.clone()).await.status(), 201);
    assert_eq!(app.register(body.clone()).await.status(), 201);
    let limited = app.register(body).await;
    let retry_after: u64 = limited.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!((1..=3_600).contains(&retry_after), "{retry_after}");
    assert_problem(limited, 429, "rate-limited").await;
}

#[actix_web::test]
async fn registration_can_be_disabled() {
    let app = TestApp::spawn_with(|config| config.self_service_registration = false).await;
    let response = app
        .register(json!({"organization_name": "Acme", "email": "a@b.co"}))
        .await;
    assert_problem(response, 503, "registration-disabled").await;
}

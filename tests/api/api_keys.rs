//! GET/POST /v1/api-keys and DELETE /v1/api-keys/{id}.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{assert_problem, RequestExt, TestApp};

#[actix_web::test]
async fn create_list_and_revoke() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let created = app
        .post("/v1/api-keys")
        .bearer_auth(&merchant.api_key)
        .json(&json!({"name": "reporting", "scopes": ["settlements:read"]}))
        .send()
        .await
        .expect("req");
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.expect("json");
    let new_key = created["api_key"].as_str().expect("key").to_owned();
    assert_eq!(created["scopes"], json!(["settlements:read"]));

    let listed: Value = app
        .get("/v1/api-keys")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    let data = listed["data"].as_array().expect("data");
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["name"], "reporting", "newest first");
    for key in data {
        for field in ["api_key_id", "api_key_prefix", "scopes", "created_at"] {
            assert!(!key[field].is_null(), "{field}");
        }
        assert!(
            key.get("api_key").is_none() && key.get("secret_sha256").is_none(),
            "no secret listed"
        );
    }

    // The narrow key may not manage keys.
    let denied = app
        .get("/v1/api-keys")
        .bearer_auth(&new_key)
        .send()
        .await
        .expect("req");
    let problem = assert_problem(denied, 403, "insufficient-scope").await;
    assert_eq!(problem["code"], "INSUFFICIENT_SCOPE");

    let id = created["api_key_id"].as_str().expect("id");
    let revoked = app
        .delete(&format!("/v1/api-keys/{id}"))
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("req");
    assert_eq!(revoked.status(), 204);
    let again = app
        .delete(&format!("/v1/api-keys/{id}"))
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("req");
    assert_eq!(again.status(), 204, "revoking twice is harmless");
    let listed: Value = app
        .get("/v1/api-keys")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    assert!(listed["data"][0]["revoked_at"].is_string());
}

#[actix_web::test]
async fn a_revoked_key_is_refused_within_one_second() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    // Warm the cache with the key about to be revoked.
    assert_eq!(
        app.get("/v1/api-keys")
            .bearer_auth(&merchant.api_key)
            .send()
            .await
            .expect("req")
            .status(),
        200
    );
    let revoked_at = Instant::now();
    let path = format!("/v1/api-keys/{}", merchant.api_key_id);
    assert_eq!(
        app.delete(&path)
            .bearer_auth(&merchant.api_key)
            .send()
            .await
            .expect("req")
            .status(),
        204
    );
    loop {
        let status = app
            .get("/v1/api-keys")
            .bearer_auth(&merchant.api_key)
            .send()
            .await
            .expect("req")
            .status();
        if status == 401 {
            break;
        }
        assert!(
            revoked_at.elapsed() < Duration::from_secs(1),
            "still {status} a second after revocation"
        );
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
    let problem = assert_problem(
        app.get("/v1/api-keys")
            .bearer_auth(&merchant.api_key)
            .send()
            .await
            .expect("req"),
        401,
        "unauthorized",
    )
    .await;
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("revoked")),
        "{problem}"
    );
}

#[actix_web::test]
async fn missing_unknown_malformed_and_expired_keys_are_401() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    assert_problem(
        app.get("/v1/api-keys").send().await.expect("req"),
        401,
        "unauthorized",
    )
    .await;
    let forged = format!("svc_000000000000_{}", "0".repeat(64));
    let wrong_secret = format!(
        "{}{}",
        &merchant.api_key[..merchant.api_key.len() - 64],
        "f".repeat(64)
    );
    for key in [
        "garbage",
        "svc_abc_def",
        forged.as_str(),
        wrong_secret.as_str(),
    ] {
        let response = app
            .get("/v1/api-keys")
            .bearer_auth(key)
            .send()
            .await
            .expect("req");
        assert_problem(response, 401, "unauthorized").await;
        let response = app
            .get("/v1/api-keys")
            .header("x-api-key", key)
            .send()
            .await
            .expect("req");
        assert_problem(response, 401, "unauthorized").await;
    }

    let expires_at = (chrono::Utc::now() + chrono::Duration::milliseconds(1_200)).to_rfc3339();
    let created: Value = app
        .post("/v1/api-keys")
        .bearer_auth(&merchant.api_key)
        .json(&json!({"expires_at": expires_at}))
        .read_json()
        .await;
    let short_lived = created["api_key"].as_str().expect("key").to_owned();
    assert_eq!(
        app.get("/v1/api-keys")
            .bearer_auth(&short_lived)
            .send()
            .await
            .expect("req")
            .status(),
        200
    );
    actix_web::rt::time::sleep(Duration::from_millis(1_400)).await;
    let problem = assert_problem(
        app.get("/v1/api-keys")
            .bearer_auth(&short_lived)
            .send()
            .await
            .expect("req"),
        401,
        "unauthorized",
    )
    .await;
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("expired")),
        "{problem}"
    );
}

#[actix_web::test]
async fn another_merchants_key_is_404() {
    let app = TestApp::spawn().await;
    let alice = app.merchant().await;
    let bob = app.merchant().await;
    let path = format!("/v1/api-keys/{}", bob.api_key_id);
    assert_problem(
        app.delete(&path)
            .bearer_auth(&alice.api_key)
            .send()
            .await
            .expect("req"),
        404,
        "not-found",
    )
    .await;
    assert_problem(
        app.delete("/v1/api-keys/no-such-key")
            .bearer_auth(&alice.api_key)
            .send()
            .await
            .expect("req"),
        404,
        "not-found",
    )
    .await;
    // Bob's key still works.
    assert_eq!(
        app.get("/v1/api-keys")
            .bearer_auth(&bob.api_key)
            .send()
            .await
            .expect("req")
            .status(),
        200
    );
}

#[actix_web::test]
async fn a_key_cannot_grant_more_than_its_creator_has() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let limited = app
        .key_with_scopes(&merchant, &["api_keys:write", "quotes:read"])
        .await;
    let escalation = app
        .post("/v1/api-keys")
        .bearer_auth(&limited)
        .json(&json!({"scopes": ["settlements:write"]}))
        .send()
        .await
        .expect("req");
    let problem = assert_problem(escalation, 403, "forbidden").await;
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("settlements:write")),
        "{problem}"
    );
    // With no scopes named, the new key inherits the creator's.
    let inherited: Value = app
        .post("/v1/api-keys")
        .bearer_auth(&limited)
        .read_json()
        .await;
    assert_eq!(
        inherited["scopes"],
        json!(["quotes:read", "api_keys:write"])
    );
}

#[actix_web::test]
async fn invalid_key_requests_are_422() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let past = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    let cases = [
        (json!({"scopes": ["nope"]}), "scopes"),
        (json!({"scopes": []}), "scopes"),
        (json!({"name": ""}), "name"),
        (json!({"expires_at": past}), "expires_at"),
        (json!({"expires_at": "tomorrow"}), "expires_at"),
        (json!({"colour": "red"}), "colour"),
    ];
    for (body, field) in cases {
        let response = app
            .post("/v1/api-keys")
            .bearer_auth(&merchant.api_key)
            .json(&body)
            .send()
            .await
            .expect("req");
        let problem = assert_problem(response, 422, "validation-error").await;
        assert!(problem["errors"][field].is_string(), "{field}: {problem}");
    }
    let listed: Value = app
        .get("/v1/api-keys")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    assert_eq!(
        listed["data"].as_array().map(Vec::len),
        Some(1),
        "nothing was created"
    );
}

/// Creates a key with `key`; answers the created body.
async fn created(app: &TestApp, key: &str, body: Value) -> Value {
    let response = app
        .post("/v1/api-keys")
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 201);
    response.json().await.expect("json")
}

fn instant(value: &Value) -> chrono::DateTime<chrono::Utc> {
    value
        .as_str()
        .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
        .map(|at| at.with_timezone(&chrono::Utc))
        .unwrap_or_else(|| panic!("a time: {value}"))
}

#[actix_web::test]
async fn a_key_created_by_an_expiring_key_expires_no_later_than_it() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let in_an_hour = chrono::Utc::now() + chrono::Duration::hours(1);
    let parent = created(
        &app,
        &merchant.api_key,
        json!({"expires_at": in_an_hour.to_rfc3339()}),
    )
    .await;
    let parent_key = parent["api_key"].as_str().expect("key").to_owned();
    let parent_expiry = instant(&parent["expires_at"]);

    // Omitted, or later than the parent: capped to the parent's expiry.
    let omitted = created(&app, &parent_key, json!({})).await;
    assert_eq!(instant(&omitted["expires_at"]), parent_expiry, "{omitted}");
    let later = (in_an_hour + chrono::Duration::days(365)).to_rfc3339();
    let capped = created(&app, &parent_key, json!({"expires_at": later})).await;
    assert_eq!(instant(&capped["expires_at"]), parent_expiry, "{capped}");
    // A grandchild of a capped child is capped the same way.
    let grandchild_key = capped["api_key"].as_str().expect("key");
    let grandchild = created(&app, grandchild_key, json!({})).await;
    assert_eq!(instant(&grandchild["expires_at"]), parent_expiry);
    // Earlier than the parent: kept.
    let sooner = in_an_hour - chrono::Duration::minutes(30);
    let earlier = created(
        &app,
        &parent_key,
        json!({"expires_at": sooner.to_rfc3339()}),
    )
    .await;
    let kept = instant(&earlier["expires_at"]);
    assert!((kept - sooner).num_milliseconds().abs() < 1, "{earlier}");

    // The listing shows the capped expiry, not the requested one.
    let listed: Value = app
        .get("/v1/api-keys")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    let row = listed["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|k| k["api_key_id"] == capped["api_key_id"])
        .expect("listed")
        .clone();
    assert_eq!(instant(&row["expires_at"]), parent_expiry);

    // A key without expiry mints keys without expiry.
    let forever = created(&app, &merchant.api_key, json!({})).await;
    assert!(forever["expires_at"].is_null(), "{forever}");
}

//! POST, GET and DELETE /v1/devices (decisions §11) through machine keys.

use serde_json::{json, Value};

use crate::helpers::{assert_problem, Merchant, RequestExt, TestApp};

const TOKEN: &str = "9f2c4e1a7b3d5f60e8a1c2b3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d";

async fn register(app: &TestApp, key: &str, body: Value) -> reqwest::Response {
    app.post("/v1/devices")
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .expect("request")
}

/// Registers a device and answers its id.
pub async fn device(app: &TestApp, merchant: &Merchant, user_id: &str, token: &str) -> String {
    let response = register(
        app,
        &merchant.api_key,
        json!({"platform": "android", "token": token, "user_id": user_id}),
    )
    .await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.expect("json");
    body["id"].as_str().expect("id").to_owned()
}

async fn list(app: &TestApp, key: &str, query: &str) -> reqwest::Response {
    app.get(&format!("/v1/devices{query}"))
        .bearer_auth(key)
        .send()
        .await
        .expect("request")
}

async fn listed_ids(app: &TestApp, key: &str, query: &str) -> Vec<String> {
    let response = list(app, key, query).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    body["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|d| d["id"].as_str().expect("id").to_owned())
        .collect()
}

#[actix_web::test]
async fn the_same_token_again_answers_the_existing_device() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    let body = json!({"platform": "ios", "token": TOKEN, "user_id": user});

    let first = register(&app, &merchant.api_key, body.clone()).await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.expect("json");
    let id = first["id"].as_str().expect("id");
    assert!(id.starts_with("dev_"), "{first}");
    assert_eq!(first["platform"], "ios");
    assert_eq!(first["user_id"], user.as_str());
    assert_eq!(first["status"], "active");
    assert!(first["created_at"].is_string());
    assert!(first.get("token").is_none(), "the token is not echoed");

    let again = register(&app, &merchant.api_key, body).await;
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.expect("json");
    assert_eq!(again, first);

    // The same token for another user is that user's own device.
    let other = app.user(&merchant).await;
    let theirs = register(
        &app,
        &merchant.api_key,
        json!({"platform": "ios", "token": TOKEN, "user_id": other}),
    )
    .await;
    assert_eq!(theirs.status(), 201);
    let theirs: Value = theirs.json().await.expect("json");
    assert_ne!(theirs["id"], first["id"]);
    assert_eq!(theirs["user_id"], other.as_str());
}

#[actix_web::test]
async fn invalid_registrations_are_422_naming_the_field() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    for (body, field) in [
        (
            json!({"platform": "web", "token": TOKEN, "user_id": user}),
            "platform",
        ),
        (json!({"platform": "ios", "token": TOKEN}), "user_id"),
        (
            json!({"platform": "ios", "token": "", "user_id": user}),
            "token",
        ),
        (
            json!({"platform": "ios", "token": "has spaces", "user_id": user}),
            "token",
        ),
        (
            json!({"platform": "ios", "token": "t".repeat(4_097), "user_id": user}),
            "token",
        ),
        (
            json!({"platform": "ios", "token": TOKEN, "user_id": user, "name": "x"}),
            "name",
        ),
        (json!({"token": TOKEN, "user_id": user}), "platform"),
    ] {
        let response = register(&app, &merchant.api_key, body.clone()).await;
        let problem = assert_problem(response, 422, "validation-error").await;
        assert!(problem["errors"][field].is_string(), "{body}: {problem}");
    }
    assert!(listed_ids(&app, &merchant.api_key, "").await.is_empty());
}

#[actix_web::test]
async fn each_operation_needs_its_scope() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    let id = device(&app, &merchant, &user, TOKEN).await;

    let reader = app.key_with_scopes(&merchant, &["devices:read"]).await;
    let response = register(
        &app,
        &reader,
        json!({"platform": "ios", "token": "other", "user_id": user}),
    )
    .await;
    let problem = assert_problem(response, 403, "insufficient-scope").await;
    assert!(problem["detail"]
        .as_str()
        .is_some_and(|d| d.contains("devices:write")));
    let response = app
        .delete(&format!("/v1/devices/{id}"))
        .bearer_auth(&reader)
        .send()
        .await
        .expect("request");
    assert_problem(response, 403, "insufficient-scope").await;
    assert_eq!(
        listed_ids(&app, &reader, "").await,
        std::slice::from_ref(&id)
    );

    let writer = app.key_with_scopes(&merchant, &["devices:write"]).await;
    let problem = assert_problem(list(&app, &writer, "").await, 403, "insufficient-scope").await;
    assert!(problem["detail"]
        .as_str()
        .is_some_and(|d| d.contains("devices:read")));

    let response = app.get("/v1/devices").send().await.expect("request");
    assert_problem(response, 401, "unauthorized").await;
}

#[actix_web::test]
async fn another_merchants_users_and_devices_are_404() {
    let app = TestApp::spawn().await;
    let ours = app.merchant().await;
    let theirs = app.merchant().await;
    let their_user = app.user(&theirs).await;
    let their_device = device(&app, &theirs, &their_user, TOKEN).await;

    let response = register(
        &app,
        &ours.api_key,
        json!({"platform": "ios", "token": TOKEN, "user_id": their_user}),
    )
    .await;
    assert_problem(response, 404, "not-found").await;
    let unknown = uuid::Uuid::new_v4().to_string();
    let response = register(
        &app,
        &ours.api_key,
        json!({"platform": "ios", "token": TOKEN, "user_id": unknown}),
    )
    .await;
    assert_problem(response, 404, "not-found").await;

    let query = format!("?user_id={their_user}");
    assert_problem(list(&app, &ours.api_key, &query).await, 404, "not-found").await;
    assert!(listed_ids(&app, &ours.api_key, "").await.is_empty());

    for id in [their_device.as_str(), "dev_0000", "not-a-device"] {
        let response = app
            .delete(&format!("/v1/devices/{id}"))
            .bearer_auth(&ours.api_key)
            .send()
            .await
            .expect("request");
        assert_problem(response, 404, "not-found").await;
    }
    // Untouched for its owner.
    assert_eq!(listed_ids(&app, &theirs.api_key, "").await, [their_device]);
}

#[actix_web::test]
async fn revoking_is_idempotent_and_lists_show_active_devices_newest_first() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let alice = app.user(&merchant).await;
    let bob = app.user(&merchant).await;
    let first = device(&app, &merchant, &alice, "token-1").await;
    let second = device(&app, &merchant, &alice, "token-2").await;
    let bobs = device(&app, &merchant, &bob, "token-3").await;

    assert_eq!(
        listed_ids(&app, &merchant.api_key, "").await,
        [bobs.clone(), second.clone(), first.clone()]
    );
    assert_eq!(
        listed_ids(&app, &merchant.api_key, &format!("?user_id={alice}")).await,
        [second.clone(), first.clone()]
    );
    assert_eq!(
        listed_ids(&app, &merchant.api_key, "?limit=1").await,
        std::slice::from_ref(&bobs)
    );
    assert_problem(
        list(&app, &merchant.api_key, "?limit=0").await,
        422,
        "validation-error",
    )
    .await;

    for _ in 0..2 {
        let response = app
            .delete(&format!("/v1/devices/{first}"))
            .bearer_auth(&merchant.api_key)
            .header("X-Request-ID", "revoke-device-1")
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 204);
    }
    assert_eq!(
        listed_ids(&app, &merchant.api_key, "").await,
        [bobs, second]
    );

    // The revoked token can be registered again, as a new device.
    let again = device(&app, &merchant, &alice, "token-1").await;
    assert_ne!(again, first);

    let events: Value = app
        .get("/v1/audit/events")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    let data = events["data"].as_array().expect("data");
    let revoked: Vec<&Value> = data
        .iter()
        .filter(|e| e["action"] == "device.revoked")
        .collect();
    assert_eq!(revoked.len(), 1, "only the first revocation is audited");
    assert_eq!(revoked[0]["resource_id"], first.as_str());
    assert_eq!(revoked[0]["request_id"], "revoke-device-1");
    assert_eq!(revoked[0]["actor_type"], "api_key");
    let registered = data
        .iter()
        .filter(|e| e["action"] == "device.registered")
        .count();
    assert_eq!(registered, 4);
    assert!(
        !events.to_string().contains("token-1"),
        "tokens stay out of the audit chain"
    );
}

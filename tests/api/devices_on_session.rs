//! Devices through a human's session: a person registers, lists and revokes
//! their own devices only; a machine key of the same merchant manages any
//! of its users' devices.

use serde_json::{json, Value};

use crate::helpers::humans::Human;
use crate::helpers::{assert_problem, Merchant, RequestExt, TestApp};

const TOKEN: &str = "fcm-token-of-adas-phone-0123456789abcdef";

async fn register(app: &TestApp, human: &Human, body: Value) -> reqwest::Response {
    app.post("/v1/devices")
        .header("cookie", &human.cookie)
        .json(&body)
        .send()
        .await
        .expect("request")
}

async fn listed(app: &TestApp, human: &Human) -> Vec<Value> {
    let body = app
        .get("/v1/devices")
        .header("cookie", &human.cookie)
        .json_at(200)
        .await;
    body["data"].as_array().expect("data").clone()
}

/// A machine key of the human's own merchant, made through the session.
async fn own_key(app: &TestApp, human: &Human) -> Merchant {
    let body = app
        .post("/v1/api-keys")
        .header("cookie", &human.cookie)
        .json(&json!({"name": "backend"}))
        .json_at(201)
        .await;
    Merchant {
        merchant_id: human.merchant_id.clone(),
        api_key: body["api_key"].as_str().expect("key").to_owned(),
        api_key_id: body["api_key_id"].as_str().expect("id").to_owned(),
    }
}

#[actix_web::test]
async fn a_person_registers_their_own_device_once() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let first = register(&app, &human, json!({"platform": "ios", "token": TOKEN})).await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.expect("json");
    assert_eq!(first["user_id"], human.user_id.as_str());
    assert_eq!(first["platform"], "ios");
    assert_eq!(first["status"], "active");
    assert!(first["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("dev_")));
    let again = register(
        &app,
        &human,
        json!({"platform": "ios", "token": TOKEN, "user_id": human.user_id}),
    )
    .await;
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.expect("json");
    assert_eq!(again["id"], first["id"]);
    assert_eq!(listed(&app, &human).await.len(), 1);

    let registered = app
        .audit_events(&human.cookie)
        .await
        .into_iter()
        .find(|e| e["action"] == "device.registered")
        .expect("audited");
    assert_eq!(registered["actor_type"], "user", "{registered}");
    assert_eq!(registered["actor_id"], human.user_id.as_str());
}

#[actix_web::test]
async fn a_person_never_reaches_another_users_devices() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let machine = own_key(&app, &human).await;
    let colleague = app.user(&machine).await;
    let theirs = crate::devices::device(&app, &machine, &colleague, "colleague-token-0001").await;

    let as_them = register(
        &app,
        &human,
        json!({"platform": "android", "token": "x-0001", "user_id": colleague}),
    )
    .await;
    assert_problem(as_them, 403, "forbidden").await;
    assert!(listed(&app, &human).await.is_empty(), "not the colleague's");
    let delete = app
        .delete(&format!("/v1/devices/{theirs}"))
        .header("cookie", &human.cookie)
        .send()
        .await
        .expect("request");
    assert_problem(delete, 404, "not-found").await;
    // The machine key of the merchant still sees the colleague's device.
    let all: Value = app
        .get(&format!("/v1/devices?user_id={colleague}"))
        .bearer_auth(&machine.api_key)
        .read_json()
        .await;
    assert_eq!(all["data"][0]["id"], theirs.as_str());

    let mine = register(&app, &human, json!({"platform": "android", "token": TOKEN})).await;
    let mine: Value = mine.json().await.expect("json");
    let id = mine["id"].as_str().expect("id");
    for _ in 0..2 {
        let revoked = app
            .delete(&format!("/v1/devices/{id}"))
            .header("cookie", &human.cookie)
            .send()
            .await
            .expect("request");
        assert_eq!(revoked.status(), 204);
    }
    assert!(listed(&app, &human).await.is_empty());
}

#[actix_web::test]
async fn cross_site_device_changes_are_refused() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let forged = app
        .post("/v1/devices")
        .header("cookie", &human.cookie)
        .header("origin", "https://evil.example")
        .json(&json!({"platform": "ios", "token": TOKEN}))
        .send()
        .await
        .expect("request");
    assert_problem(forged, 403, "csrf-rejected").await;
    assert!(listed(&app, &human).await.is_empty());
}

//! Session lifetime: logout, expiry, password resets, and sessions as
//! merchant credentials.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::humans::{attributes, set_cookie, PASSWORD};
use crate::helpers::{assert_problem, RequestExt, TestApp};

#[actix_web::test]
async fn logout_revokes_clears_and_is_idempotent() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let other = crate::helpers::humans::session_cookie(&app.login(&human.email, PASSWORD).await)
        .expect("cookie");
    let logout = app
        .post("/v1/auth/logout")
        .header("cookie", &human.cookie)
        .send()
        .await
        .expect("request");
    assert_eq!(logout.status(), 204);
    let cleared = set_cookie(&logout).expect("the cookie is cleared");
    let attrs = attributes(&cleared);
    assert!(cleared.starts_with("svc_session=;"), "{cleared}");
    assert!(attrs.contains(&"max-age=0".to_owned()), "{cleared}");
    assert!(attrs.contains(&"path=/".to_owned()), "{cleared}");
    assert_problem(app.me(&human.cookie).await, 401, "unauthorized").await;
    // The other session of the same user is untouched.
    assert_eq!(app.me(&other).await.status(), 200);

    let again = app
        .post("/v1/auth/logout")
        .header("cookie", &human.cookie)
        .send()
        .await
        .expect("request");
    assert_eq!(again.status(), 204, "a revoked cookie still logs out");
    assert!(set_cookie(&again).is_some());
    let garbage = app
        .post("/v1/auth/logout")
        .header("cookie", "svc_session=not-a-token")
        .send()
        .await
        .expect("request");
    assert_eq!(garbage.status(), 204);
    let none = app.post("/v1/auth/logout").send().await.expect("request");
    assert_problem(none, 401, "unauthorized").await;

    let logged_out = app
        .audit_events(&other)
        .await
        .into_iter()
        .filter(|e| e["action"] == "user.logged_out")
        .count();
    assert_eq!(logged_out, 1, "one logout, however often it was repeated");
}

#[actix_web::test]
async fn sessions_expire_at_their_absolute_lifetime() {
    let app = TestApp::spawn_with(|config| config.session_ttl = Duration::from_secs(1)).await;
    let human = app.human().await;
    assert_eq!(app.me(&human.cookie).await.status(), 200);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_problem(app.me(&human.cookie).await, 401, "unauthorized").await;
    let quotes = app
        .post("/v1/quotes")
        .header("cookie", &human.cookie)
        .json(&json!({}))
        .send()
        .await
        .expect("request");
    assert_problem(quotes, 401, "unauthorized").await;
    let logout = app
        .post("/v1/auth/logout")
        .header("cookie", &human.cookie)
        .send()
        .await
        .expect("request");
    assert_eq!(logout.status(), 204, "an expired cookie still logs out");
}

#[actix_web::test]
async fn unknown_and_missing_sessions_are_401() {
    let app = TestApp::spawn().await;
    assert_problem(app.me("svc_session=AAAA").await, 401, "unauthorized").await;
    let none = app.get("/v1/auth/me").send().await.expect("request");
    assert_problem(none, 401, "unauthorized").await;
    let profile = app.get("/v1/profile").send().await.expect("request");
    assert_problem(profile, 401, "unauthorized").await;
    let resend = app
        .post("/v1/auth/verify-email/resend")
        .send()
        .await
        .expect("request");
    assert_problem(resend, 401, "unauthorized").await;
}

#[actix_web::test]
async fn the_profile_reads_and_renames() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    for path in ["/v1/auth/me", "/v1/profile"] {
        let me: Value = app
            .get(path)
            .header("cookie", &human.cookie)
            .read_json()
            .await;
        assert_eq!(me["name"], "Ada Lovelace", "{path}");
    }
    let patch = |path: &'static str, body: Value| {
        app.client
            .patch(app.url(path))
            .header("cookie", &human.cookie)
            .json(&body)
            .send()
    };
    let renamed: Value = patch("/v1/auth/me", json!({"preferred_name": "Grace Hopper"}))
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    assert_eq!(renamed["name"], "Grace Hopper");
    assert_eq!(renamed["preferred_name"], "Grace Hopper");
    assert_eq!(renamed["first_name"], "Grace");
    assert_eq!(renamed["last_name"], "Hopper");
    let last: Value = patch("/v1/profile", json!({"last_name": "Brewster Murray"}))
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    assert_eq!(last["name"], "Grace Brewster Murray");
    let me: Value = app.me(&human.cookie).await.json().await.expect("json");
    assert_eq!(me["name"], "Grace Brewster Murray", "stored");

    let empty = patch("/v1/auth/me", json!({"name": ""}))
        .await
        .expect("request");
    let problem = assert_problem(empty, 422, "validation-error").await;
    assert!(problem["errors"]["name"].is_string());
    let unknown = patch("/v1/auth/me", json!({"email": "x@example.com"}))
        .await
        .expect("request");
    assert_problem(unknown, 422, "validation-error").await;
    let me: Value = app.me(&human.cookie).await.json().await.expect("json");
    assert_eq!(
        me["name"], "Grace Brewster Murray",
        "bad updates change nothing"
    );
}

#[actix_web::test]
async fn a_session_is_a_merchant_credential_with_every_scope() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let quote_body = json!({"send_currency": "USD", "send_amount": "10.00", "receive_asset": "USDT", "receive_network": "tron"});
    let quote = app
        .post("/v1/quotes")
        .header("cookie", &human.cookie)
        .json(&quote_body)
        .send()
        .await
        .expect("request");
    assert_eq!(quote.status(), 201);
    let key = app
        .post("/v1/api-keys")
        .header("cookie", &human.cookie)
        .json(&json!({"name": "from the dashboard"}))
        .send()
        .await
        .expect("request");
    assert_eq!(key.status(), 201);
    let key: Value = key.json().await.expect("json");
    let keys: Value = app
        .get("/v1/api-keys")
        .bearer_auth(key["api_key"].as_str().expect("key"))
        .read_json()
        .await;
    assert_eq!(
        keys["data"][0]["api_key_id"], key["api_key_id"],
        "the key made with the session belongs to the session's merchant"
    );
    // Another merchant's resources stay 404 to a session.
    let other = app.merchant().await;
    let foreign: Value = app
        .post("/v1/quotes")
        .bearer_auth(&other.api_key)
        .json(&quote_body)
        .read_json()
        .await;
    let id = foreign["quote_id"].as_str().expect("quote id");
    let read = app
        .get(&format!("/v1/quotes/{id}"))
        .header("cookie", &human.cookie)
        .send()
        .await
        .expect("request");
    assert_problem(read, 404, "not-found").await;
}

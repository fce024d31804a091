//! The CSRF rule of decisions §9 for cookie-authenticated unsafe requests.

use serde_json::json;

use crate::helpers::{assert_problem, TestApp};

fn quote() -> serde_json::Value {
    json!({"send_currency": "USD", "send_amount": "10.00", "receive_asset": "USDT", "receive_network": "tron"})
}

#[actix_web::test]
async fn cross_site_shapes_are_refused_and_change_nothing() {
    let app = TestApp::spawn().await;
    let human = app.human().await;

    // A form post, as a cross-site page could send without a preflight.
    let form = app
        .post("/v1/auth/logout")
        .header("cookie", &human.cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("a=b")
        .send()
        .await
        .expect("request");
    let problem = assert_problem(form, 403, "csrf-rejected").await;
    assert_eq!(problem["code"], "CSRF_REJECTED");
    assert_eq!(app.me(&human.cookie).await.status(), 200, "still logged in");

    let text = app
        .post("/v1/quotes")
        .header("cookie", &human.cookie)
        .header("content-type", "text/plain")
        .body(quote().to_string())
        .send()
        .await
        .expect("request");
    assert_problem(text, 403, "csrf-rejected").await;

    let foreign_origin = app
        .post("/v1/quotes")
        .header("cookie", &human.cookie)
        .header("origin", "https://evil.example")
        .json(&quote())
        .send()
        .await
        .expect("request");
    assert_problem(foreign_origin, 403, "csrf-rejected").await;
    let null_origin = app
        .client
        .patch(app.url("/v1/auth/me"))
        .header("cookie", &human.cookie)
        .header("origin", "null")
        .json(&json!({"name": "Mallory"}))
        .send()
        .await
        .expect("request");
    assert_problem(null_origin, 403, "csrf-rejected").await;
    let me: serde_json::Value = app.me(&human.cookie).await.json().await.expect("json");
    assert_eq!(me["name"], "Ada Lovelace", "nothing changed");
}

#[actix_web::test]
async fn same_origin_json_and_machine_callers_pass() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let same_origin = app
        .post("/v1/quotes")
        .header("cookie", &human.cookie)
        .header("origin", "http://tern.test")
        .json(&quote())
        .send()
        .await
        .expect("request");
    assert_eq!(same_origin.status(), 201);
    let no_origin = app
        .post("/v1/quotes")
        .header("cookie", &human.cookie)
        .json(&quote())
        .send()
        .await
        .expect("request");
    assert_eq!(no_origin.status(), 201);
    // Reads are not subject to the rule.
    let read = app
        .get("/v1/auth/me")
        .header("cookie", &human.cookie)
        .header("origin", "https://evil.example")
        .send()
        .await
        .expect("request");
    assert_eq!(read.status(), 200);
    // A key never rides on ambient browser state: no CSRF rule for it.
    let merchant = app.merchant().await;
    let keyed = app
        .post("/v1/quotes")
        .bearer_auth(&merchant.api_key)
        .header("origin", "https://evil.example")
        .json(&quote())
        .send()
        .await
        .expect("request");
    assert_eq!(keyed.status(), 201);
}

#[actix_web::test]
async fn configured_origins_are_allowed() {
    let app = TestApp::spawn_with(|config| {
        config
            .allowed_origins
            .push("https://dashboard.example".into());
    })
    .await;
    let human = app.human().await;
    let response = app
        .post("/v1/quotes")
        .header("cookie", &human.cookie)
        .header("origin", "https://dashboard.example")
        .json(&quote())
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 201);
}

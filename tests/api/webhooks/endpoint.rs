//! Endpoint management, replay and deliveries-listing requests, the events
//! written without an endpoint, and the SSRF guard at delivery time.

use serde_json::{json, Value};

use crate::helpers::transfers::{self, finished, id};
use crate::helpers::webhooks::*;
use crate::helpers::{assert_problem, TestApp};

async fn get_endpoint(app: &TestApp, api_key: &str) -> reqwest::Response {
    app.get("/v1/webhooks/endpoint")
        .bearer_auth(api_key)
        .send()
        .await
        .expect("request")
}

async fn delete_endpoint(app: &TestApp, api_key: &str) -> reqwest::Response {
    app.delete("/v1/webhooks/endpoint")
        .bearer_auth(api_key)
        .send()
        .await
        .expect("request")
}

#[actix_web::test]
async fn an_endpoint_is_stored_replaced_masked_and_removed() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let key = &merchant.api_key;
    assert_problem(get_endpoint(&app, key).await, 404, "not-found").await;

    configure(&app, &merchant, "https://hooks.example/tern", WHSEC_SECRET).await;
    let response = get_endpoint(&app, key).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("body");
    assert!(!text.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), "{text}");
    let first: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(first["merchant_id"], merchant.merchant_id.as_str());
    assert_eq!(first["url"], "https://hooks.example/tern");
    assert_eq!(first["secret_mask"], "whsec_****LaSw");

    configure(&app, &merchant, "https://hooks.example/v2", PLAIN_SECRET).await;
    let second: Value = get_endpoint(&app, key).await.json().await.expect("json");
    assert_eq!(second["url"], "https://hooks.example/v2");
    assert_eq!(second["secret_mask"], "****hars");
    assert_eq!(
        second["created_at"], first["created_at"],
        "replacing keeps created_at"
    );
    assert!(second["updated_at"].as_str() >= first["updated_at"].as_str());

    assert_eq!(delete_endpoint(&app, key).await.status(), 204);
    assert_problem(get_endpoint(&app, key).await, 404, "not-found").await;
    assert_eq!(delete_endpoint(&app, key).await.status(), 204, "idempotent");
}

#[actix_web::test]
async fn invalid_endpoints_are_422_with_field_errors_and_store_nothing() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let key = &merchant.api_key;
    let long = format!("https://hooks.example/{}", "a".repeat(2_048));
    for (body, field) in [
        (
            json!({"url": "http://hooks.example/", "secret": PLAIN_SECRET}),
            "url",
        ),
        (
            json!({"url": "https://u:p@hooks.example/", "secret": PLAIN_SECRET}),
            "url",
        ),
        (
            json!({"url": "https://user@hooks.example/", "secret": PLAIN_SECRET}),
            "url",
        ),
        (json!({"url": long, "secret": PLAIN_SECRET}), "url"),
        (
            json!({"url": "hooks.example", "secret": PLAIN_SECRET}),
            "url",
        ),
        (
            json!({"url": "https://127.0.0.1/hook", "secret": PLAIN_SECRET}),
            "url",
        ),
        (
            json!({"url": "https://169.254.169.254/latest", "secret": PLAIN_SECRET}),
            "url",
        ),
        (
            json!({"url": "https://[::1]:8443/", "secret": PLAIN_SECRET}),
            "url",
        ),
        (
            json!({"url": "https://10.0.0.7/", "secret": PLAIN_SECRET}),
            "url",
        ),
        (
            json!({"url": "https://hooks.example/", "secret": "too-short-secret"}),
            "secret",
        ),
        (
            json!({"url": "https://hooks.example/", "secret": "whsec_not*base64*at*all*!!"}),
            "secret",
        ),
    ] {
        let response = put_endpoint(&app, key, &body).await;
        let problem = assert_problem(response, 422, "validation-error").await;
        assert!(
            problem["errors"].get(field).is_some(),
            "{body} -> {problem}"
        );
    }
    // Unknown and missing fields, wrong types, malformed JSON.
    for body in [
        json!({"url": "https://hooks.example/", "secret": PLAIN_SECRET, "events": ["*"]}),
        json!({"url": "https://hooks.example/"}),
        json!({"url": 7, "secret": PLAIN_SECRET}),
    ] {
        assert_problem(
            put_endpoint(&app, key, &body).await,
            422,
            "validation-error",
        )
        .await;
    }
    let malformed = app
        .client
        .put(app.url("/v1/webhooks/endpoint"))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body("{\"url\": ")
        .send()
        .await
        .expect("request");
    assert_problem(malformed, 400, "malformed-json").await;
    assert_problem(get_endpoint(&app, key).await, 404, "not-found").await;
}

#[actix_web::test]
async fn endpoints_need_their_scopes_and_stay_with_their_merchant() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let other = app.merchant().await;
    configure(&app, &merchant, "https://hooks.example/a", PLAIN_SECRET).await;

    let reader = app.key_with_scopes(&merchant, &["webhooks:read"]).await;
    assert_eq!(get_endpoint(&app, &reader).await.status(), 200);
    let body = json!({"url": "https://hooks.example/b", "secret": PLAIN_SECRET});
    assert_problem(
        put_endpoint(&app, &reader, &body).await,
        403,
        "insufficient-scope",
    )
    .await;
    assert_problem(
        delete_endpoint(&app, &reader).await,
        403,
        "insufficient-scope",
    )
    .await;
    let replayed = replay(&app, &reader, &json!({"transfer_id": "tr_x"})).await;
    assert_problem(replayed, 403, "insufficient-scope").await;

    let unrelated = app.key_with_scopes(&merchant, &["transfers:read"]).await;
    assert_problem(
        get_endpoint(&app, &unrelated).await,
        403,
        "insufficient-scope",
    )
    .await;
    let listed = app
        .get("/v1/webhooks/deliveries")
        .bearer_auth(&unrelated)
        .send()
        .await
        .expect("request");
    assert_problem(listed, 403, "insufficient-scope").await;

    let unauthenticated = app
        .get("/v1/webhooks/endpoint")
        .send()
        .await
        .expect("request");
    assert_problem(unauthenticated, 401, "unauthorized").await;

    // The other merchant sees none of it and cannot remove it.
    assert_problem(get_endpoint(&app, &other.api_key).await, 404, "not-found").await;
    assert_eq!(delete_endpoint(&app, &other.api_key).await.status(), 204);
    let still: Value = get_endpoint(&app, &merchant.api_key)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(still["url"], "https://hooks.example/a");
}

#[actix_web::test]
async fn replay_requests_are_checked() {
    let app = transfers::app().await;
    let merchant = app.merchant().await;
    let other = app.merchant().await;
    let key = &merchant.api_key;
    for body in [
        json!({}),
        json!({"transfer_id": ""}),
        json!({"transfer_id": null}),
    ] {
        let problem = assert_problem(replay(&app, key, &body).await, 422, "validation-error").await;
        assert!(problem["errors"].get("transfer_id").is_some(), "{problem}");
    }
    let unknown = replay(&app, key, &json!({"transfer_id": "tr_0000"})).await;
    assert_problem(unknown, 404, "not-found").await;
    let extra = replay(&app, key, &json!({"transfer_id": "tr_0000", "force": true})).await;
    assert_problem(extra, 422, "validation-error").await;

    let transfer = transfers::create(&app, &merchant, "pm_card_visa").await;
    let transfer_id = id(&transfer);
    let body = json!({"transfer_id": transfer_id});
    // No endpoint to deliver to.
    let response = replay(&app, key, &body).await;
    let problem = assert_problem(response, 409, "conflict").await;
    assert_eq!(problem["code"], "WEBHOOK_ENDPOINT_NOT_CONFIGURED");
    // Another merchant's transfer is not found, endpoint or not.
    configure(&app, &other, "https://hooks.example/o", PLAIN_SECRET).await;
    assert_problem(replay(&app, &other.api_key, &body).await, 404, "not-found").await;
}

#[actix_web::test]
async fn without_an_endpoint_events_are_written_and_skipped_softly() {
    let app = transfers::app().await;
    let merchant = app.merchant().await;
    let transfer = transfers::create(&app, &merchant, "pm_card_visa").await;
    let transfer_id = id(&transfer);
    let done = finished(&app, &merchant, &transfer_id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let events = events_when(&app, &merchant, &transfer_id, |events| {
        events.len() == SUCCEEDED_TYPES.len()
    })
    .await;
    assert_eq!(types(&events), SUCCEEDED_TYPES);
    for event in &events {
        assert_eq!(event["status"], "skipped", "{event}");
        assert_eq!(event["attempt_log"], json!([]));
        assert!(event["event_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("evt_")));
        assert_eq!(event["transfer_id"], transfer_id.as_str());
    }
    let skipped = deliveries(&app, &merchant, "?status=skipped").await;
    assert_eq!(skipped.len(), SUCCEEDED_TYPES.len());
    assert!(deliveries(&app, &merchant, "?status=pending")
        .await
        .is_empty());
    // Another merchant sees none of them.
    let other = app.merchant().await;
    let theirs = deliveries(&app, &other, &format!("?transfer_id={transfer_id}")).await;
    assert!(theirs.is_empty());
}

#[actix_web::test]
async fn deliveries_queries_are_checked() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    for query in [
        "?status=sent",
        "?limit=0",
        "?limit=201",
        "?limit=x",
        "?since=1",
    ] {
        let response = app
            .get_as(&merchant, &format!("/v1/webhooks/deliveries{query}"))
            .await;
        assert_problem(response, 422, "validation-error").await;
    }
}

#[actix_web::test]
async fn names_of_internal_addresses_are_refused_at_delivery_and_dead_lettered() {
    let app = TestApp::spawn_with(fast_webhooks).await;
    let merchant = app.merchant().await;
    // A name passes when stored; what it resolves to is checked at delivery.
    configure(&app, &merchant, "https://localhost:9/hook", PLAIN_SECRET).await;
    let transfer = transfers::create(&app, &merchant, "pm_card_visa").await;
    let transfer_id = id(&transfer);
    finished(&app, &merchant, &transfer_id).await;
    let events = events_when(&app, &merchant, &transfer_id, |events| {
        events.len() == SUCCEEDED_TYPES.len() && all_settled(events)
    })
    .await;
    for event in &events {
        assert_eq!(event["status"], "dead", "{event}");
        let log = event["attempt_log"].as_array().cloned().unwrap_or_default();
        assert_eq!(log.len(), 3, "the first attempt and two retries: {event}");
        for attempt in log {
            let error = attempt["error"].as_str().unwrap_or_default();
            // Nothing of the address the name resolved to, nor why it is
            // internal: that would map the network behind Tern.
            assert_eq!(error, "refused: private or reserved address", "{attempt}");
            assert_eq!(attempt["status_code"], Value::Null);
        }
    }
}

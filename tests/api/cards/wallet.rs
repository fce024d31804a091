//! Mobile-wallet provisioning: requested at once, active or failed when the
//! simulator's signed `wallet_token.updated` webhook arrives; wallets the
//! issuer does not offer are 501 and leave nothing behind; the webhook is
//! deduplicated and must be signed.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::cards::{get_card, issue, json_of, operate, provider_event, send};
use crate::helpers::settlements::fault;
use crate::helpers::{assert_problem, Merchant, TestApp};

/// How long the simulator's verdict may take (its pending delay is 2 s).
const VERDICT_WAIT: Duration = Duration::from_secs(10);

async fn provision(
    app: &TestApp,
    merchant: &Merchant,
    card: &str,
    wallet: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let path = format!("/v1/cards/{card}/wallet/{wallet}");
    send(app, &merchant.api_key, "POST", &path, body).await
}

async fn wallet_status(app: &TestApp, merchant: &Merchant, card: &str) -> Value {
    let path = format!("/v1/cards/{card}/wallet/status");
    json_of(send(app, &merchant.api_key, "GET", &path, None).await, 200).await
}

/// Polls until the card's first token has `status`; answers the last view.
async fn until_token(app: &TestApp, merchant: &Merchant, card: &str, status: &str) -> Value {
    let deadline = tokio::time::Instant::now() + VERDICT_WAIT;
    loop {
        let view = wallet_status(app, merchant, card).await;
        if view["tokens"][0]["status"] == status || tokio::time::Instant::now() >= deadline {
            return view;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn card_for(app: &TestApp, merchant: &Merchant) -> String {
    let user = app.user(merchant).await;
    let card = issue(app, merchant, &user, json!({})).await;
    card["id"].as_str().expect("id").to_owned()
}

#[actix_web::test]
async fn a_token_is_requested_then_active_once_the_issuer_confirms() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let card = card_for(&app, &merchant).await;

    let requested = json_of(
        provision(
            &app,
            &merchant,
            &card,
            "apple_pay",
            Some(json!({"device_id": "iphone-15-ada"})),
        )
        .await,
        200,
    )
    .await;
    let token_id = requested["token_id"].as_str().expect("token_id").to_owned();
    assert!(token_id.starts_with("wtk_"), "{requested}");
    assert_eq!(requested["status"], "requested");
    assert_eq!(requested["wallet"], "apple_pay");
    assert!(requested["created_at"].is_string());

    let view = wallet_status(&app, &merchant, &card).await;
    assert_eq!(view["card_id"], card.as_str());
    assert_eq!(view["status"], "requested", "{view}");
    assert_eq!(view["tokens"][0]["token_id"], token_id.as_str());
    assert_eq!(view["tokens"][0]["device_id"], "iphone-15-ada");
    assert_eq!(
        get_card(&app, &merchant, &card).await["wallet_status"],
        "requested"
    );

    let view = until_token(&app, &merchant, &card, "active").await;
    assert_eq!(view["status"], "active", "{view}");
    assert_eq!(view["tokens"].as_array().map(Vec::len), Some(1));
    let shown = get_card(&app, &merchant, &card).await;
    assert_eq!(shown["wallet_status"], "active");
    assert_eq!(shown["wallet"]["apple_pay"]["status"], "active");
    assert_eq!(shown["wallet"]["google_pay"]["status"], "none");

    // A cards:read key sees the status but provisions nothing.
    let reader = app.key_with_scopes(&merchant, &["cards:read"]).await;
    let status_path = format!("/v1/cards/{card}/wallet/status");
    json_of(send(&app, &reader, "GET", &status_path, None).await, 200).await;
    let google = format!("/v1/cards/{card}/wallet/google_pay");
    assert_problem(
        send(&app, &reader, "POST", &google, None).await,
        403,
        "insufficient-scope",
    )
    .await;
    // Another merchant sees neither.
    let other = app.merchant().await;
    assert_problem(
        send(&app, &other.api_key, "GET", &status_path, None).await,
        404,
        "not-found",
    )
    .await;
    assert_problem(
        provision(&app, &other, &card, "google_pay", None).await,
        404,
        "not-found",
    )
    .await;
}

#[actix_web::test]
async fn a_wallet_refusing_the_token_makes_it_failed() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let card = card_for(&app, &merchant).await;
    fault(
        &app,
        json!({"target": "issuer", "match": {"wallet": "apple_pay"}, "mode": "fail"}),
    )
    .await;
    let requested = json_of(
        provision(&app, &merchant, &card, "apple_pay", None).await,
        200,
    )
    .await;
    assert_eq!(requested["status"], "requested");
    let view = until_token(&app, &merchant, &card, "failed").await;
    assert_eq!(view["status"], "failed", "{view}");
    assert_eq!(view["tokens"][0]["device_id"], Value::Null);
    let shown = get_card(&app, &merchant, &card).await;
    assert_eq!(shown["wallet_status"], "failed");
    assert_eq!(shown["wallet"]["apple_pay"]["status"], "failed");
    assert_eq!(shown["wallet"]["google_pay"]["status"], "none");
}

#[actix_web::test]
async fn a_wallet_the_issuer_does_not_offer_is_501_and_stores_nothing() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let card = card_for(&app, &merchant).await;
    fault(
        &app,
        json!({"target": "issuer", "match": {"wallet": "google_pay"}, "mode": "decline"}),
    )
    .await;
    assert_problem(
        provision(&app, &merchant, &card, "google_pay", None).await,
        501,
        "wallet-not-supported",
    )
    .await;
    let view = wallet_status(&app, &merchant, &card).await;
    assert_eq!(view["status"], "none", "{view}");
    assert_eq!(view["tokens"], json!([]));
    let shown = get_card(&app, &merchant, &card).await;
    assert_eq!(shown["wallet_status"], "none");
    assert_eq!(shown["wallet"]["google_pay"]["status"], "none");

    // Unknown wallets are unknown paths; bad bodies are refused before the issuer.
    assert_problem(
        provision(&app, &merchant, &card, "samsung_pay", None).await,
        404,
        "not-found",
    )
    .await;
    for body in [
        json!({"device_id": "d".repeat(129)}),
        json!({"device_id": ""}),
        json!({"device": "x"}),
    ] {
        assert_problem(
            provision(&app, &merchant, &card, "apple_pay", Some(body)).await,
            422,
            "validation-error",
        )
        .await;
    }
    assert_eq!(
        wallet_status(&app, &merchant, &card).await["tokens"],
        json!([])
    );
}

#[actix_web::test]
async fn a_closed_card_gets_no_token() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let card = card_for(&app, &merchant).await;
    json_of(operate(&app, &merchant, &card, "close").await, 200).await;
    let problem = assert_problem(
        provision(&app, &merchant, &card, "apple_pay", None).await,
        409,
        "conflict",
    )
    .await;
    assert_eq!(problem["code"], "CARD_CLOSED");
    // Reading a closed card's wallet is still allowed.
    assert_eq!(
        wallet_status(&app, &merchant, &card).await["tokens"],
        json!([])
    );
}

#[actix_web::test]
async fn wallet_webhooks_are_deduplicated_and_must_be_signed() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let card = card_for(&app, &merchant).await;
    json_of(
        provision(&app, &merchant, &card, "google_pay", None).await,
        200,
    )
    .await;
    let view = until_token(&app, &merchant, &card, "active").await;
    let token_id = view["tokens"][0]["token_id"]
        .as_str()
        .expect("token")
        .to_owned();

    let event_id = format!("evt_{}", uuid::Uuid::new_v4().simple());
    let update = |status: &str| {
        json!({"id": event_id, "type": "wallet_token.updated",
            "data": {"card_id": card, "token_id": token_id, "wallet": "google_pay", "status": status}})
    };
    let first = json_of(provider_event(&app, &update("suspended")).await, 200).await;
    assert_eq!(first["duplicate"], false, "{first}");
    assert_eq!(
        wallet_status(&app, &merchant, &card).await["status"],
        "suspended"
    );
    // The same event again, whatever it now says, changes nothing.
    let again = json_of(provider_event(&app, &update("active")).await, 200).await;
    assert_eq!(again["duplicate"], true, "{again}");
    let view = wallet_status(&app, &merchant, &card).await;
    assert_eq!(view["status"], "suspended", "{view}");
    assert_eq!(view["tokens"][0]["status"], "suspended");

    // An unsigned event is refused and changes nothing.
    let forged = json!({"id": format!("evt_{}", uuid::Uuid::new_v4().simple()),
        "type": "wallet_token.updated",
        "data": {"card_id": card, "token_id": token_id, "status": "active"}});
    let refused = app
        .post("/v1/webhooks/sandbox")
        .header("content-type", "application/json")
        .body(forged.to_string())
        .send()
        .await
        .expect("request");
    assert_problem(refused, 400, "invalid-signature").await;
    let bad_signature = app
        .post("/v1/webhooks/sandbox")
        .header("content-type", "application/json")
        .header(
            "X-Sandbox-Signature",
            format!(
                "t={},v1={}",
                chrono::Utc::now().timestamp(),
                "00".repeat(32)
            ),
        )
        .body(forged.to_string())
        .send()
        .await
        .expect("request");
    assert_problem(bad_signature, 400, "invalid-signature").await;
    let view = wallet_status(&app, &merchant, &card).await;
    assert_eq!(view["status"], "suspended", "{view}");
    let shown = get_card(&app, &merchant, &card).await;
    assert_eq!(shown["wallet"]["google_pay"]["status"], "suspended");
    assert_eq!(shown["wallet"]["apple_pay"]["status"], "none");
}

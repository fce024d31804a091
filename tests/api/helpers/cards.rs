//! Card setup: cards issued to a merchant's users, funded, operated and
//! read, and the simulator's signed authorization events.

use reqwest::Response;
use serde_json::{json, Value};
use tern_actors::adapters::sign_payload;

use super::settlements::funded;
use super::{Merchant, TestApp};

/// Sends a request with the merchant's key.
pub async fn send(
    app: &TestApp,
    key: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Response {
    request(app, method, path, body, |request| request.bearer_auth(key)).await
}

/// Sends a request with a session cookie (no Origin header, as a
/// same-site fetch or a non-browser client sends it).
pub async fn with_cookie(
    app: &TestApp,
    cookie: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Response {
    request(app, method, path, body, |request| {
        request.header("cookie", cookie)
    })
    .await
}

pub use super::json_of;

/// Sends `method path` with `body`, authenticated by `authenticate`.
async fn request(
    app: &TestApp,
    method: &str,
    path: &str,
    body: Option<Value>,
    authenticate: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
) -> Response {
    let url = app.url(path);
    let request = authenticate(match method {
        "GET" => app.client.get(url),
        "PATCH" => app.client.patch(url),
        _ => app.client.post(url),
    });
    let request = match body {
        Some(body) => request.json(&body),
        None => request,
    };
    request.send().await.expect("request")
}

/// Issues a card for `user_id` with the merchant's key; answers the card.
pub async fn issue(app: &TestApp, merchant: &Merchant, user_id: &str, extra: Value) -> Value {
    let mut body = json!({"user_id": user_id});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    json_of(
        send(app, &merchant.api_key, "POST", "/v1/cards", Some(body)).await,
        201,
    )
    .await
}

/// A card operation with the merchant's key, e.g. `freeze`.
pub async fn operate(app: &TestApp, merchant: &Merchant, card: &str, operation: &str) -> Response {
    send(
        app,
        &merchant.api_key,
        "POST",
        &format!("/v1/cards/{card}/{operation}"),
        None,
    )
    .await
}

pub async fn get_card(app: &TestApp, merchant: &Merchant, card: &str) -> Value {
    json_of(
        send(
            app,
            &merchant.api_key,
            "GET",
            &format!("/v1/cards/{card}"),
            None,
        )
        .await,
        200,
    )
    .await
}

pub async fn patch_limits(
    app: &TestApp,
    merchant: &Merchant,
    card: &str,
    limits: Value,
) -> Response {
    send(
        app,
        &merchant.api_key,
        "PATCH",
        &format!("/v1/cards/{card}/limits"),
        Some(limits),
    )
    .await
}

/// The secret the app checks provider webhooks against.
pub fn secret(app: &TestApp) -> String {
    app.state
        .config
        .card_provider_webhook_secret
        .clone()
        .expect("a secret is always resolved at start")
}

/// Posts a signed provider event; answers the response.
pub async fn provider_event(app: &TestApp, event: &Value) -> Response {
    let body = event.to_string();
    let signature = sign_payload(
        secret(app).as_bytes(),
        chrono::Utc::now().timestamp(),
        body.as_bytes(),
    );
    app.post("/v1/webhooks/sandbox")
        .header("content-type", "application/json")
        .header("X-Sandbox-Signature", signature)
        .body(body)
        .send()
        .await
        .expect("request")
}

/// An `authorization.request` event with a fresh event id.
pub fn authorization(card: &str, amount_minor: i64, channel: &str, country: &str) -> Value {
    let id = uuid::Uuid::new_v4().simple();
    json!({"id": format!("evt_{id}"), "type": "authorization.request", "data": {
        "authorization_id": format!("auth_{id}"), "card_id": card, "amount_minor": amount_minor,
        "currency": "USD", "merchant": "Blue Bottle Coffee", "mcc": "5814",
        "channel": channel, "country": country}})
}

/// Decides a POS authorization in the US; answers the decision.
pub async fn authorize(app: &TestApp, card: &str, amount_minor: i64) -> Value {
    let event = authorization(card, amount_minor, "pos", "US");
    json_of(provider_event(app, &event).await, 200).await
}

/// A merchant funded with `amount` USD and a card of one of its users.
pub(crate) async fn funded_card(app: &TestApp, amount: &str) -> (Merchant, String) {
    let (merchant, _) = funded(app, amount).await;
    let user = app.user(&merchant).await;
    let card = issue(app, &merchant, &user, json!({})).await;
    (merchant, card["id"].as_str().expect("id").to_owned())
}

pub(crate) async fn balance(app: &TestApp, merchant: &Merchant, card: &str) -> Value {
    json_of(
        send(
            app,
            &merchant.api_key,
            "GET",
            &format!("/v1/cards/{card}/balance"),
            None,
        )
        .await,
        200,
    )
    .await
}

pub(crate) async fn transactions(app: &TestApp, merchant: &Merchant, card: &str) -> Vec<Value> {
    list_data(app, merchant, &format!("/v1/cards/{card}/transactions")).await
}

/// The `data` of a 200 list at `path`, as `merchant`.
pub(crate) async fn list_data(app: &TestApp, merchant: &Merchant, path: &str) -> Vec<Value> {
    let body = json_of(send(app, &merchant.api_key, "GET", path, None).await, 200).await;
    body["data"].as_array().cloned().unwrap_or_default()
}

//! POST /v1/webhooks/sandbox: verified before stored, recorded once.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tern_actors::adapters::http::{HttpCardAcquirer, HttpProviderConfig};
use tern_actors::adapters::sign_payload;
use tern_actors::ports::{CardAcquirer, ChargeOutcome, ChargeRequest, RequestKeys};
use tern_schema::money::MinorUnits;
use tern_schema::store::inbound_events;

use crate::helpers::cards::secret;
use crate::helpers::{assert_problem, TestApp};

const PATH: &str = "/v1/webhooks/sandbox";

async fn deliver(app: &TestApp, body: &str, signature: Option<String>) -> reqwest::Response {
    let mut request = app
        .post(PATH)
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(signature) = signature {
        request = request.header("X-Sandbox-Signature", signature);
    }
    request.send().await.expect("request")
}

async fn stored(app: &TestApp) -> i64 {
    let mut pooled = app.state.db.get().await.expect("conn");
    let mut tx = pooled.tx();
    inbound_events::count(&mut tx, "sandbox")
        .await
        .expect("count")
}

#[actix_web::test]
async fn a_signed_event_is_recorded_once() {
    let app = TestApp::spawn().await;
    let body = json!({"id": "evt_1", "type": "payment.succeeded", "data": {"charge_id": "ch_1"}, "livemode": false}).to_string();
    let now = chrono::Utc::now().timestamp();
    let signature = sign_payload(secret(&app).as_bytes(), now, body.as_bytes());
    let first: Value = deliver(&app, &body, Some(signature.clone()))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(first, json!({"received": true, "duplicate": false}));
    let again: Value = deliver(&app, &body, Some(signature))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(again, json!({"received": true, "duplicate": true}));
    assert_eq!(stored(&app).await, 1);
}

#[actix_web::test]
async fn bad_signatures_are_400_and_record_nothing() {
    let app = TestApp::spawn().await;
    let secret = secret(&app);
    let body = json!({"id": "evt_2", "type": "payment.failed", "data": {}}).to_string();
    let now = chrono::Utc::now().timestamp();
    let tampered = body.replace("failed", "succeeded");
    let cases = [
        (body.clone(), None),
        (body.clone(), Some("garbage".to_owned())),
        (
            tampered.clone(),
            Some(sign_payload(secret.as_bytes(), now, body.as_bytes())),
        ),
        (
            body.clone(),
            Some(sign_payload(b"not-the-secret", now, body.as_bytes())),
        ),
        (
            body.clone(),
            Some(sign_payload(
                secret.as_bytes(),
                now - 3_600,
                body.as_bytes(),
            )),
        ),
    ];
    for (sent, signature) in cases {
        assert_problem(
            deliver(&app, &sent, signature).await,
            400,
            "invalid-signature",
        )
        .await;
    }
    let not_an_event = "{\"hello\": 1}";
    let signed = sign_payload(secret.as_bytes(), now, not_an_event.as_bytes());
    assert_problem(
        deliver(&app, not_an_event, Some(signed)).await,
        400,
        "bad-request",
    )
    .await;
    assert_eq!(stored(&app).await, 0);

    let other = app
        .post("/v1/webhooks/acme")
        .body(body)
        .send()
        .await
        .expect("request");
    assert_problem(other, 404, "not-found").await;
}

#[actix_web::test]
async fn a_3ds_approval_at_the_simulator_reaches_tern_signed() {
    let app = TestApp::spawn().await;
    let sandbox = app.sandbox_address.clone().expect("sandbox");
    let acquirer =
        HttpCardAcquirer::new(&HttpProviderConfig::new(sandbox.clone())).expect("adapter");
    let charge = ChargeRequest {
        keys: RequestKeys {
            idempotency_key: "idem-3ds-1".into(),
            settlement_key: "stl-3ds-1".into(),
        },
        amount_minor: MinorUnits::new(2_500),
        currency: "USD".into(),
        payment_method: "pm_card_threeDSecureRequired".into(),
        off_session: false,
    };
    let ChargeOutcome::RequiresAction { client_secret, .. } =
        acquirer.charge(&charge).await.expect("charge")
    else {
        panic!("an on-session 3DS card needs a challenge");
    };
    let approved = app
        .client
        .post(format!("{sandbox}/3ds/{client_secret}/approve"))
        .send()
        .await
        .expect("approve");
    assert!(approved.status().is_success());
    let waited = Instant::now();
    while stored(&app).await == 0 {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "no webhook reached Tern"
        );
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
    let mut pooled = app.state.db.get().await.expect("conn");
    let count = inbound_events::count(&mut pooled.tx(), "sandbox")
        .await
        .expect("count");
    assert_eq!(count, 1);
}

/// A NUL in a signed event's text (its id here) is refused before anything
/// is stored: PostgreSQL cannot hold one.
#[actix_web::test]
async fn a_signed_event_with_a_nul_is_400_and_records_nothing() {
    let app = TestApp::spawn().await;
    let body = json!({"id": "evt_\u{0}1", "type": "payment.succeeded", "data": {"charge_id": "ch_1"}, "livemode": false}).to_string();
    let now = chrono::Utc::now().timestamp();
    let signature = sign_payload(secret(&app).as_bytes(), now, body.as_bytes());
    assert_problem(
        deliver(&app, &body, Some(signature)).await,
        400,
        "bad-request",
    )
    .await;
    assert_eq!(stored(&app).await, 0);
}

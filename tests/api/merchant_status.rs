//! A suspended or disabled merchant gets 403 on every settlement operation
//! (list, read, submit, reverse), naming its status, while the ledger and
//! audit reads and the risk-reducing actions (key revocation, deleting the
//! webhook endpoint) stay open. The change is written to the database as
//! the CLI or another node writes it, so it reaches this process only
//! through its caches: it must take effect within a second, both ways, and
//! nothing is stored by a refused request.

use std::time::{Duration, Instant};

use reqwest::Response;
use tern_schema::store::merchants;
use tern_schema::types::MerchantStatus;
use tern_schema::{write_tx, StoreError};
use uuid::Uuid;

use crate::helpers::settlements::{app, create, funded, push, settled};
use crate::helpers::webhooks::{configure, PLAIN_SECRET};
use crate::helpers::{assert_problem, Merchant, TestApp};

pub(crate) const TAKES_EFFECT_WITHIN: Duration = Duration::from_secs(1);

/// Writes the status as `tern merchant` does, with no word to this
/// process's caches.
pub(crate) async fn set_status(app: &TestApp, merchant: &Merchant, status: MerchantStatus) {
    let id = merchant.merchant_id.clone();
    let changed: Result<_, StoreError> =
        write_tx!(app.state.db, |tx| merchants::set_status(tx, &id, status)
            .await);
    assert!(changed.expect("status change").is_some());
}

/// The code a refusal names for `status`.
pub(crate) fn code_of(status: MerchantStatus) -> &'static str {
    match status {
        MerchantStatus::Suspended => "MERCHANT_SUSPENDED",
        _ => "MERCHANT_DISABLED",
    }
}

/// Asserts the merchant-inactive problem naming `status`.
pub(crate) async fn assert_inactive(response: Response, status: MerchantStatus) {
    let url = response.url().to_string();
    let problem = assert_problem(response, 403, "merchant-inactive").await;
    assert_eq!(problem["code"], code_of(status), "{url}: {problem}");
}

/// Polls a fresh create until it answers `want` (a 403 naming `status`,
/// or 201), within a second of `since`; answers how many creates
/// succeeded before it did.
async fn submit_answers(
    app: &TestApp,
    merchant: &Merchant,
    usd: &str,
    want: u16,
    status: MerchantStatus,
    since: Instant,
) -> u64 {
    let mut created = 0;
    loop {
        let key = Uuid::new_v4().to_string();
        let body = push(usd, "1.00", "tok_visa");
        let response = app
            .post_with_key("/v1/settlements", &merchant.api_key, &key, &body)
            .await;
        let got = response.status().as_u16();
        assert!(
            since.elapsed() < TAKES_EFFECT_WITHIN,
            "still {got} after {:?}",
            since.elapsed()
        );
        if got == want {
            if want == 403 {
                assert_inactive(response, status).await;
            }
            return created;
        }
        let old = if want == 403 { 201 } else { 403 };
        assert_eq!(got, old, "only the old answer may come first");
        if got == 201 {
            created += 1;
        }
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn get(app: &TestApp, merchant: &Merchant, path: &str) -> Response {
    app.get(path)
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request")
}

/// Every settlement operation is refused; ledger and audit reads are not.
async fn assert_settlements_closed(
    app: &TestApp,
    merchant: &Merchant,
    paid: &str,
    status: MerchantStatus,
) {
    let reversed = app
        .post(&format!("/v1/settlements/{paid}/reverse"))
        .bearer_auth(&merchant.api_key)
        .json(&serde_json::json!({"reason": "customer asked"}))
        .send()
        .await
        .expect("request");
    assert_inactive(reversed, status).await;
    let read = get(app, merchant, &format!("/v1/settlements/{paid}")).await;
    assert_inactive(read, status).await;
    let missing = get(
        app,
        merchant,
        &format!("/v1/settlements/{}", Uuid::new_v4()),
    )
    .await;
    assert_inactive(missing, status).await;
    assert_inactive(get(app, merchant, "/v1/settlements").await, status).await;
    assert_inactive(
        get(app, merchant, "/v1/settlements?status=succeeded").await,
        status,
    )
    .await;

    let accounts: serde_json::Value = get(app, merchant, "/v1/ledger/accounts")
        .await
        .json()
        .await
        .expect("json");
    let account = accounts["data"][0]["id"].as_str().expect("an account");
    for path in [
        "/v1/ledger/accounts".to_owned(),
        format!("/v1/ledger/accounts/{account}/entries"),
        "/v1/audit/events".to_owned(),
        "/v1/audit/verify".to_owned(),
    ] {
        assert_eq!(get(app, merchant, &path).await.status(), 200, "{path}");
    }
}

#[actix_web::test]
async fn a_suspended_merchant_gets_403_on_every_settlement_operation() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let paid = create(&app, &merchant, push(&usd, "1.00", "tok_visa")).await;
    assert_eq!(settled(&app, &merchant, &paid).await["status"], "succeeded");

    let suspended = MerchantStatus::Suspended;
    set_status(&app, &merchant, suspended).await;
    let since = Instant::now();
    let before_it_took_effect = submit_answers(&app, &merchant, &usd, 403, suspended, since).await;
    assert_settlements_closed(&app, &merchant, &paid, suspended).await;

    set_status(&app, &merchant, MerchantStatus::Active).await;
    let since = Instant::now();
    submit_answers(&app, &merchant, &usd, 201, suspended, since).await;
    let listed: serde_json::Value = get(&app, &merchant, "/v1/settlements")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        listed["count"].as_u64(),
        Some(3 + before_it_took_effect),
        "the refused creates stored nothing"
    );
    assert_eq!(
        get(&app, &merchant, &format!("/v1/settlements/{paid}"))
            .await
            .status(),
        200
    );
}

#[actix_web::test]
async fn a_disabled_merchant_is_refused_but_may_still_reduce_its_risk() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let paid = create(&app, &merchant, push(&usd, "1.00", "tok_visa")).await;
    assert_eq!(settled(&app, &merchant, &paid).await["status"], "succeeded");
    configure(&app, &merchant, "https://hooks.example/tern", PLAIN_SECRET).await;
    let spare = app
        .post("/v1/api-keys")
        .bearer_auth(&merchant.api_key)
        .json(&serde_json::json!({"name": "spare"}))
        .send()
        .await
        .expect("request");
    assert_eq!(spare.status(), 201);
    let spare: serde_json::Value = spare.json().await.expect("json");
    let spare_id = spare["api_key_id"].as_str().expect("id");

    let disabled = MerchantStatus::Disabled;
    set_status(&app, &merchant, disabled).await;
    submit_answers(&app, &merchant, &usd, 403, disabled, Instant::now()).await;
    assert_settlements_closed(&app, &merchant, &paid, disabled).await;

    let revoked = app
        .delete(&format!("/v1/api-keys/{spare_id}"))
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request");
    assert_eq!(revoked.status(), 204, "revoking a key stays allowed");
    let deleted = app
        .delete("/v1/webhooks/endpoint")
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request");
    assert_eq!(deleted.status(), 204, "deleting the endpoint stays allowed");
    let gone = get(&app, &merchant, "/v1/webhooks/endpoint").await;
    assert_eq!(gone.status(), 404);
}

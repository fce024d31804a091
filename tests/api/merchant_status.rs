//! A suspended or disabled merchant cannot move money (403 naming the
//! status) but can still read what it has; an operator's change takes
//! effect within a second, and nothing is stored by a refused request.

use std::time::{Duration, Instant};

use tern_schema::store::merchants;
use tern_schema::types::MerchantStatus;
use tern_schema::{write_tx, StoreError};
use uuid::Uuid;

use crate::helpers::{assert_problem, Merchant, TestApp};
use crate::settlements::{app, create, funded, post_with_key, push, settled};

const TAKES_EFFECT_WITHIN: Duration = Duration::from_secs(1);

async fn set_status(app: &TestApp, merchant: &Merchant, status: MerchantStatus) {
    let id = merchant.merchant_id.clone();
    let changed: Result<_, StoreError> =
        write_tx!(app.state.db, |tx| merchants::set_status(tx, &id, status)
            .await);
    assert!(changed.expect("status change").is_some());
}

/// Polls a fresh create until it answers `want`, within a second; answers
/// how many creates succeeded before it did.
async fn submit_answers(app: &TestApp, merchant: &Merchant, usd: &str, want: u16) -> u64 {
    let started = Instant::now();
    let mut created = 0;
    loop {
        let key = Uuid::new_v4().to_string();
        let body = push(usd, "1.00", "tok_visa");
        let response = post_with_key(app, &merchant.api_key, &key, &body).await;
        let status = response.status().as_u16();
        if status == want {
            if want == 403 {
                let problem = assert_problem(response, 403, "merchant-inactive").await;
                assert_eq!(problem["code"], "MERCHANT_SUSPENDED", "{problem}");
            }
            return created;
        }
        let old = if want == 403 { 201 } else { 403 };
        assert_eq!(status, old, "only the old answer may come first");
        if status == 201 {
            created += 1;
        }
        assert!(
            started.elapsed() < TAKES_EFFECT_WITHIN * 2,
            "still {status} after {:?}",
            started.elapsed()
        );
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
}

#[actix_web::test]
async fn a_suspended_merchant_cannot_move_money_but_can_read() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let paid = create(&app, &merchant, push(&usd, "1.00", "tok_visa")).await;
    assert_eq!(settled(&app, &merchant, &paid).await["status"], "succeeded");

    set_status(&app, &merchant, MerchantStatus::Suspended).await;
    let before_it_took_effect = submit_answers(&app, &merchant, &usd, 403).await;
    let reversed = app
        .post(&format!("/v1/settlements/{paid}/reverse"))
        .bearer_auth(&merchant.api_key)
        .json(&serde_json::json!({"reason": "customer asked"}))
        .send()
        .await
        .expect("request");
    assert_problem(reversed, 403, "merchant-inactive").await;
    let read = app
        .get(&format!("/v1/settlements/{paid}"))
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request");
    assert_eq!(read.status(), 200, "reads stay open");
    let listed = app
        .get("/v1/settlements")
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request");
    let listed: serde_json::Value = listed.json().await.expect("json");
    assert_eq!(
        listed["count"].as_u64(),
        Some(2 + before_it_took_effect),
        "the refused creates stored nothing"
    );

    set_status(&app, &merchant, MerchantStatus::Active).await;
    submit_answers(&app, &merchant, &usd, 201).await;
}

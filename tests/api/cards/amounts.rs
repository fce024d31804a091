//! Amounts a provider event names that Tern must refuse for good: a
//! clearing, reversal or refund of no or negative amount (400), and an
//! amount the ledger cannot take without overflowing a balance (a refund is
//! 422 naming `amount_minor`, an authorization is declined), never a 503
//! the provider would retry for ever. Nothing is recorded in each case.

use serde_json::{json, Value};

use crate::helpers::cards::{authorize, json_of, patch_limits, provider_event};
use crate::helpers::cards::{balance, funded_card, transactions};
use crate::helpers::{assert_problem, Merchant, TestApp};

/// About half of `i64::MAX`: two of these overflow any side of a balance.
const HALF_MINOR: i64 = i64::MAX / 2;

fn refund(card: &str, amount_minor: i64) -> Value {
    json!({"id": format!("evt_rf_{}", uuid::Uuid::new_v4().simple()), "type": "refund.succeeded",
        "data": {"card_id": card, "amount_minor": amount_minor, "currency": "USD",
            "merchant": "Blue Bottle Coffee"}})
}

fn card_event(kind: &str, card: &str, authorization_id: &str, amount_minor: i64) -> Value {
    json!({"id": format!("evt_{}", uuid::Uuid::new_v4().simple()), "type": kind,
        "data": {"card_id": card, "authorization_id": authorization_id, "amount_minor": amount_minor}})
}

/// (balance, available, hold) of the card.
async fn figures(app: &TestApp, merchant: &Merchant, card: &str) -> (i64, i64, i64) {
    let body = balance(app, merchant, card).await;
    let minor = |field: &str| body[field].as_i64().expect(field);
    (
        minor("balance_minor"),
        minor("available_minor"),
        minor("hold_minor"),
    )
}

/// A funded card with no amount limits, so only the ledger bounds it.
async fn unlimited_card(app: &TestApp) -> (Merchant, String) {
    let (merchant, card) = funded_card(app, "50.00").await;
    let limits = json!({"per_transaction_minor": null, "daily_spend_minor": null,
        "monthly_spend_minor": null});
    json_of(patch_limits(app, &merchant, &card, limits).await, 200).await;
    (merchant, card)
}

#[actix_web::test]
async fn a_clearing_reversal_or_refund_of_no_or_negative_amount_is_refused_and_records_nothing() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let approved = authorize(&app, &card, 2_000).await;
    assert_eq!(approved["approved"], true, "{approved}");
    let authorization_id = approved["authorization_id"].as_str().expect("id");
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 3_000, 2_000));

    for amount_minor in [-100, 0, i64::MIN] {
        for kind in ["authorization.clearing", "authorization.reversal"] {
            let event = card_event(kind, &card, authorization_id, amount_minor);
            let problem =
                assert_problem(provider_event(&app, &event).await, 400, "bad-request").await;
            assert!(
                problem["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("amount_minor")),
                "{problem}"
            );
        }
        let refused = provider_event(&app, &refund(&card, amount_minor)).await;
        assert_problem(refused, 400, "bad-request").await;
    }
    assert_eq!(
        figures(&app, &merchant, &card).await,
        (5_000, 3_000, 2_000),
        "the hold is still open and nothing was posted"
    );
    let listed = transactions(&app, &merchant, &card).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["status"], "approved");
    assert_eq!(listed[0]["hold_minor"], 2_000);

    // The hold still clears normally afterwards.
    let cleared = card_event("authorization.clearing", &card, authorization_id, 1_500);
    json_of(provider_event(&app, &cleared).await, 200).await;
    assert_eq!(figures(&app, &merchant, &card).await, (3_500, 3_500, 0));
}

#[actix_web::test]
async fn a_refund_that_would_overflow_the_balance_is_422_and_records_nothing() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let first = refund(&card, HALF_MINOR);
    json_of(provider_event(&app, &first).await, 200).await;
    let funded = 5_000 + HALF_MINOR;
    assert_eq!(figures(&app, &merchant, &card).await, (funded, funded, 0));

    let overflowing = refund(&card, HALF_MINOR + 10);
    for _ in 0..2 {
        let problem = assert_problem(
            provider_event(&app, &overflowing).await,
            422,
            "validation-error",
        )
        .await;
        assert!(problem["errors"]["amount_minor"].is_string(), "{problem}");
    }
    assert_eq!(figures(&app, &merchant, &card).await, (funded, funded, 0));
    assert_eq!(transactions(&app, &merchant, &card).await.len(), 1);
}

/// Two merchants' holds credit the one card-network account; the second
/// would take its credits past `i64::MAX`. Each merchant can cover its own.
#[actix_web::test]
async fn an_authorization_the_ledger_cannot_hold_is_declined_not_503() {
    let app = TestApp::spawn().await;
    let (first, first_card) = unlimited_card(&app).await;
    let (second, second_card) = unlimited_card(&app).await;
    let quarter = 1_i64 << 62;
    json_of(
        provider_event(&app, &refund(&first_card, quarter)).await,
        200,
    )
    .await;
    json_of(
        provider_event(&app, &refund(&second_card, quarter - 1)).await,
        200,
    )
    .await;
    let held = authorize(&app, &first_card, quarter).await;
    assert_eq!(held["approved"], true, "{held}");

    let asked = quarter - 1 + 5_000;
    let declined = authorize(&app, &second_card, asked).await;
    assert_eq!(declined["approved"], false, "{declined}");
    assert_eq!(declined["reason"], "amount_too_large", "{declined}");
    assert_eq!(
        figures(&app, &second, &second_card).await,
        (asked, asked, 0),
        "nothing is held"
    );
    assert_eq!(figures(&app, &first, &first_card).await.2, quarter);
}

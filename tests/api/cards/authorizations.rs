//! Authorization requests decided by the card's actor through signed
//! provider webhooks: each decline reason, holds, clearings, refunds,
//! duplicates and concurrency, with the ledger balanced after each.

use serde_json::{json, Value};

use crate::helpers::cards::{
    authorization, authorize, balance, funded_card, get_card, json_of, operate, patch_limits,
    provider_event, send, transactions,
};
use crate::helpers::{assert_problem, TestApp};

fn declined(decision: &Value, reason: &str) {
    assert_eq!(decision["approved"], false, "{decision}");
    assert_eq!(decision["reason"], reason, "{decision}");
}

#[actix_web::test]
async fn an_approval_holds_a_clearing_posts_and_a_refund_credits() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "100.00").await;
    let before = balance(&app, &merchant, &card).await;
    assert_eq!(before["balance_minor"], 10_000);
    assert_eq!(before["available_minor"], 10_000);

    let event = authorization(&card, 2_500, "pos", "US");
    let decision = json_of(provider_event(&app, &event).await, 200).await;
    assert_eq!(decision["approved"], true, "{decision}");
    assert_eq!(decision["reason"], Value::Null);
    assert_eq!(decision["duplicate"], false);
    let held = balance(&app, &merchant, &card).await;
    assert_eq!(
        (
            held["balance_minor"].as_i64(),
            held["available_minor"].as_i64(),
            held["hold_minor"].as_i64()
        ),
        (Some(10_000), Some(7_500), Some(2_500)),
        "{held}"
    );
    assert_eq!(get_card(&app, &merchant, &card).await["hold_minor"], 2_500);

    // The same event again answers the same decision and records nothing.
    let again = json_of(provider_event(&app, &event).await, 200).await;
    assert_eq!(again["approved"], true);
    assert_eq!(again["duplicate"], true);
    assert_eq!(again["transaction_id"], decision["transaction_id"]);
    assert_eq!(
        balance(&app, &merchant, &card).await["available_minor"],
        7_500
    );

    let authorization_id = event["data"]["authorization_id"].clone();
    let clearing = json!({"id": format!("evt_clr_{}", uuid::Uuid::new_v4().simple()), "type": "authorization.clearing",
        "data": {"card_id": card, "authorization_id": authorization_id, "amount_minor": 2_500}});
    assert_eq!(
        json_of(provider_event(&app, &clearing).await, 200).await,
        json!({"received": true, "duplicate": false})
    );
    assert_eq!(
        json_of(provider_event(&app, &clearing).await, 200).await,
        json!({"received": true, "duplicate": true})
    );
    let posted = balance(&app, &merchant, &card).await;
    assert_eq!(
        (
            posted["balance_minor"].as_i64(),
            posted["available_minor"].as_i64(),
            posted["hold_minor"].as_i64()
        ),
        (Some(7_500), Some(7_500), Some(0)),
        "{posted}"
    );

    let refund = json!({"id": format!("evt_rf_{}", uuid::Uuid::new_v4().simple()), "type": "refund.succeeded",
        "data": {"card_id": card, "authorization_id": authorization_id, "amount_minor": 1_000, "currency": "USD", "merchant": "Blue Bottle Coffee"}});
    assert_eq!(
        json_of(provider_event(&app, &refund).await, 200).await["duplicate"],
        false
    );
    assert_eq!(
        json_of(provider_event(&app, &refund).await, 200).await["duplicate"],
        true
    );
    assert_eq!(
        balance(&app, &merchant, &card).await["balance_minor"],
        8_500
    );

    let kinds: Vec<(String, String)> = transactions(&app, &merchant, &card)
        .await
        .iter()
        .map(|t| {
            (
                t["kind"].as_str().unwrap_or("").to_owned(),
                t["status"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("refund".into(), "posted".into()),
            ("clear".into(), "posted".into()),
            ("authorization".into(), "cleared".into())
        ]
    );
    let events = json_of(
        send(
            &app,
            &merchant.api_key,
            "GET",
            &format!("/v1/cards/{card}/events"),
            None,
        )
        .await,
        200,
    )
    .await;
    let types: Vec<&str> = events["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert_eq!(types, ["refund", "clearing", "authorization"]);
    assert!(events["data"][2]["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("evt_")));
    assert_eq!(events["data"][2]["amount_minor"], 2_500);
}

#[actix_web::test]
async fn a_partial_clearing_posts_what_cleared_and_releases_the_rest() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let event = authorization(&card, 2_000, "online", "US");
    assert_eq!(
        json_of(provider_event(&app, &event).await, 200).await["approved"],
        true
    );
    let clearing = json!({"id": format!("evt_{}", uuid::Uuid::new_v4().simple()), "type": "authorization.clearing",
        "data": {"card_id": card, "authorization_id": event["data"]["authorization_id"], "amount_minor": 1_500}});
    json_of(provider_event(&app, &clearing).await, 200).await;
    let after = balance(&app, &merchant, &card).await;
    assert_eq!(
        (
            after["balance_minor"].as_i64(),
            after["available_minor"].as_i64(),
            after["hold_minor"].as_i64()
        ),
        (Some(3_500), Some(3_500), Some(0)),
        "{after}"
    );
}

#[actix_web::test]
async fn each_decline_reason_declines_and_holds_nothing() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "100.00").await;
    let decide = |amount: i64, channel: &'static str, country: &'static str| {
        let event = authorization(&card, amount, channel, country);
        let app = &app;
        async move { json_of(provider_event(app, &event).await, 200).await }
    };
    // Channels: a virtual card starts with ATM off.
    declined(&decide(100, "atm", "US").await, "atm_disabled");
    json_of(
        patch_limits(
            &app,
            &merchant,
            &card,
            json!({"online_enabled": false, "international_enabled": false}),
        )
        .await,
        200,
    )
    .await;
    declined(&decide(100, "online", "US").await, "online_disabled");
    declined(&decide(100, "pos", "FR").await, "international_disabled");
    json_of(patch_limits(&app, &merchant, &card, json!({"online_enabled": true, "international_enabled": true, "atm_enabled": true, "atm_daily_minor": 300})).await, 200).await;
    assert_eq!(decide(100, "pos", "FR").await["approved"], true);
    assert_eq!(decide(300, "atm", "US").await["approved"], true);
    declined(&decide(1, "atm", "US").await, "atm_daily_limit_exceeded");

    // Amount limits: equal passes, one more does not. 400 spent so far today.
    json_of(patch_limits(&app, &merchant, &card, json!({"per_transaction_minor": 500, "daily_spend_minor": 1_400, "monthly_spend_minor": 1_900})).await, 200).await;
    declined(
        &decide(501, "pos", "US").await,
        "per_transaction_limit_exceeded",
    );
    assert_eq!(decide(500, "pos", "US").await["approved"], true);
    assert_eq!(decide(500, "pos", "US").await["approved"], true);
    declined(&decide(1, "pos", "US").await, "daily_limit_exceeded");
    json_of(
        patch_limits(&app, &merchant, &card, json!({"daily_spend_minor": null})).await,
        200,
    )
    .await;
    assert_eq!(decide(500, "pos", "US").await["approved"], true);
    declined(&decide(1, "pos", "US").await, "monthly_limit_exceeded");

    // Funds: the funding account holds 10,000 and 1,900 is held.
    json_of(
        patch_limits(
            &app,
            &merchant,
            &card,
            json!({"per_transaction_minor": null, "monthly_spend_minor": null}),
        )
        .await,
        200,
    )
    .await;
    declined(&decide(8_101, "pos", "US").await, "insufficient_funds");
    assert_eq!(decide(8_100, "pos", "US").await["approved"], true);
    declined(&decide(1, "pos", "US").await, "insufficient_funds");
    // Another currency than the card's.
    let mut eur = authorization(&card, 100, "pos", "US");
    eur["data"]["currency"] = json!("EUR");
    declined(
        &json_of(provider_event(&app, &eur).await, 200).await,
        "currency_mismatch",
    );
    let held = balance(&app, &merchant, &card).await;
    assert_eq!(
        (
            held["available_minor"].as_i64(),
            held["hold_minor"].as_i64()
        ),
        (Some(0), Some(10_000)),
        "{held}"
    );

    // Status: frozen, then blocked (replaced), then closed.
    json_of(operate(&app, &merchant, &card, "freeze").await, 200).await;
    declined(&decide(1, "pos", "US").await, "card_frozen");
    let replacement = json_of(operate(&app, &merchant, &card, "replace").await, 200).await;
    declined(&decide(1, "pos", "US").await, "card_blocked");
    json_of(operate(&app, &merchant, &card, "close").await, 200).await;
    declined(&decide(1, "pos", "US").await, "card_closed");
    // The replacement spends from the same (now exhausted) account.
    let new_card = replacement["id"].as_str().expect("id");
    declined(&authorize(&app, new_card, 1).await, "insufficient_funds");

    let all = transactions(&app, &merchant, &card).await;
    let declines = all.iter().filter(|t| t["status"] == "declined").count();
    assert_eq!(declines, 13, "{all:?}");
    assert!(all
        .iter()
        .filter(|t| t["status"] == "declined")
        .all(|t| t["decline_reason"].is_string()));
}

#[actix_web::test]
async fn unknown_cards_and_bad_events_change_nothing() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "10.00").await;
    let unknown = authorize(&app, "card_does_not_exist", 100).await;
    declined(&unknown, "card_not_found");

    // A bad signature is 400 before anything is decided or stored.
    let event = authorization(&card, 100, "pos", "US");
    let unsigned = app
        .post("/v1/webhooks/sandbox")
        .header("content-type", "application/json")
        .header("X-Sandbox-Signature", "t=1,v1=00")
        .body(event.to_string())
        .send()
        .await
        .expect("request");
    assert_problem(unsigned, 400, "invalid-signature").await;
    let mut no_amount = authorization(&card, 100, "pos", "US");
    no_amount["data"]
        .as_object_mut()
        .expect("data")
        .remove("amount_minor");
    assert_problem(provider_event(&app, &no_amount).await, 400, "bad-request").await;
    let mut bad_channel = authorization(&card, 100, "pos", "US");
    bad_channel["data"]["channel"] = json!("telepathy");
    assert_problem(provider_event(&app, &bad_channel).await, 400, "bad-request").await;
    assert!(transactions(&app, &merchant, &card).await.is_empty());
    assert_eq!(balance(&app, &merchant, &card).await["hold_minor"], 0);

    // A clearing for an authorization the card never saw records nothing.
    let clearing = json!({"id": "evt_orphan_clearing", "type": "authorization.clearing",
        "data": {"card_id": card, "authorization_id": "auth_unknown", "amount_minor": 100}});
    json_of(provider_event(&app, &clearing).await, 200).await;
    assert!(transactions(&app, &merchant, &card).await.is_empty());
}

/// Many authorizations of one card at once never pass a limit or the
/// funds: the card's actor decides them one at a time.
#[actix_web::test]
async fn concurrent_authorizations_never_exceed_a_limit_or_the_balance() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "100.00").await;
    json_of(patch_limits(&app, &merchant, &card, json!({"per_transaction_minor": null, "daily_spend_minor": 3_000, "monthly_spend_minor": null})).await, 200).await;
    let decisions =
        futures_util::future::join_all((0..40).map(|_| authorize(&app, &card, 300))).await;
    let approved = decisions.iter().filter(|d| d["approved"] == true).count();
    assert_eq!(approved, 10, "{decisions:?}");
    assert!(decisions
        .iter()
        .filter(|d| d["approved"] == false)
        .all(|d| d["reason"] == "daily_limit_exceeded"));
    assert_eq!(balance(&app, &merchant, &card).await["hold_minor"], 3_000);

    // Now the balance binds: 7,000 left, 30 requests of 500.
    json_of(
        patch_limits(&app, &merchant, &card, json!({"daily_spend_minor": null})).await,
        200,
    )
    .await;
    let decisions =
        futures_util::future::join_all((0..30).map(|_| authorize(&app, &card, 500))).await;
    let approved = decisions.iter().filter(|d| d["approved"] == true).count();
    assert_eq!(approved, 14, "{decisions:?}");
    let after = balance(&app, &merchant, &card).await;
    assert_eq!(
        (
            after["available_minor"].as_i64(),
            after["hold_minor"].as_i64()
        ),
        (Some(0), Some(10_000)),
        "{after}"
    );
}

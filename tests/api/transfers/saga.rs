//! The saga against the sandbox: leg 1 charges the card (on-session, so 3DS
//! waits for the payer), the conversion books fiat into the asset, leg 2
//! pays out on chain; a payout that fails for good refunds leg 1, and a
//! refund that keeps failing raises an operator alert.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::settlements::{assert_ledger_balanced, fault, sandbox, settlement};
use crate::helpers::transfers::{
    answer_challenge, app, assert_executions, audited_statuses, challenged, client_secret, create,
    create_with, eur_quote, fast_retries, finished, get, id, json_of, leg, leg_key, quote,
    EVM_WALLET, TRON_WALLET,
};
use crate::helpers::TestApp;

/// Fields a transfer copies from its quote.
const COPIED: [&str; 9] = [
    "quote_id",
    "send_currency",
    "send_amount",
    "receive_asset",
    "receive_network",
    "receive_amount",
    "platform_fee",
    "network_fee",
    "rate",
];

async fn public_json(app: &TestApp, path: &str) -> Value {
    let response = app.get(path).send().await.expect("request");
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.expect("json")
}

#[actix_web::test]
async fn a_visa_transfer_charges_converts_and_pays_out_once() {
    let app = app().await;
    let merchant = app.merchant().await;
    let quote = eur_quote(&app, &merchant).await;
    let key = uuid::Uuid::new_v4().to_string();
    let response = app
        .post_with_key(
            "/v1/transfers",
            &merchant.api_key,
            &key,
            &crate::helpers::transfers::body(&quote, "pm_card_visa", EVM_WALLET),
        )
        .await;
    assert_eq!(response.status(), 201);
    let location = response.headers()["location"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let created: Value = response.json().await.expect("json");

    let transfer_id = id(&created);
    assert!(transfer_id.starts_with("tr_"), "{created}");
    assert_eq!(location, format!("/v1/transfers/{transfer_id}"));
    assert_eq!(created["status"], "pending");
    assert_eq!(created["flow"], "tern");
    assert_eq!(created["wallet"], EVM_WALLET);
    assert_eq!(created["failure_reason"], Value::Null);
    for field in COPIED {
        assert!(quote[field].is_string(), "the quote has {field}: {quote}");
        assert_eq!(
            created[field], quote[field],
            "{field} copied from the quote"
        );
    }
    let legs = created["legs"].as_array().expect("legs");
    assert_eq!(legs.len(), 2, "{created}");
    for (leg, (index, kind)) in legs.iter().zip([(1, "card_charge"), (2, "on_chain")]) {
        assert_eq!(leg["index"], index, "{leg}");
        assert_eq!(leg["kind"], kind, "{leg}");
        assert_eq!(leg["status"], "not_started", "{leg}");
        assert_eq!(leg["client_secret"], Value::Null, "{leg}");
        assert_eq!(leg["next_action_type"], Value::Null, "{leg}");
    }
    let (leg1, leg2) = (leg_key(&created, 1), leg_key(&created, 2));
    assert_ne!(leg1, leg2);

    let done = finished(&app, &merchant, &transfer_id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(leg(&done, 1)["status"], "succeeded", "{done}");
    assert_eq!(leg(&done, 2)["status"], "succeeded", "{done}");
    assert_eq!(done["failure_reason"], Value::Null);
    for field in COPIED {
        assert_eq!(done[field], quote[field], "{field} unchanged");
    }

    let charge = settlement(&app, &merchant, &leg1).await;
    assert_eq!(charge["method"], "card_charge");
    assert_eq!(charge["status"], "succeeded", "{charge}");
    assert_eq!(
        charge["amount"],
        json!({"currency": "EUR", "amount": quote["send_amount"]}),
        "leg 1 charges the send amount, fees included"
    );
    assert_eq!(charge["destination"], "pm_card_visa");
    assert_eq!(charge["client_secret"], Value::Null, "no challenge");
    let payout = settlement(&app, &merchant, &leg2).await;
    assert_eq!(payout["method"], "on_chain");
    assert_eq!(payout["status"], "succeeded", "{payout}");
    assert_eq!(
        payout["amount"],
        json!({"currency": "USDC", "amount": quote["receive_amount"]}),
        "leg 2 pays the receive amount in the asset"
    );
    assert_eq!(payout["destination"], format!("polygon:{EVM_WALLET}"));

    assert_executions(&app, &leg1, &[("acquirer", "charge")]).await;
    assert_executions(&app, &leg2, &[("custodian", "payout")]).await;
    assert_ledger_balanced(&app).await;

    assert_eq!(
        audited_statuses(&app, &merchant, &transfer_id).await,
        [
            "leg1_in_flight",
            "leg1_succeeded",
            "leg2_in_flight",
            "succeeded"
        ]
    );
    let verified = json_of(&app, &merchant, "/v1/audit/verify").await;
    assert_eq!(verified["valid"], true, "{verified}");
    assert_eq!(verified["first_invalid_seq"], Value::Null);
    let health = public_json(&app, "/health").await;
    assert_eq!(health["components"]["alerts"]["open"], 0, "{health}");
}

#[actix_web::test]
async fn a_tron_usdt_transfer_from_usd_succeeds() {
    let app = app().await;
    let merchant = app.merchant().await;
    let quote = quote(&app, &merchant, ("USD", "25.00", "USDT", "tron")).await;
    let created = create_with(
        &app,
        &merchant,
        &crate::helpers::transfers::body(&quote, "pm_card_mastercard", TRON_WALLET),
    )
    .await;
    let done = finished(&app, &merchant, &id(&created)).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let payout = settlement(&app, &merchant, &leg_key(&done, 2)).await;
    assert_eq!(
        payout["amount"],
        json!({"currency": "USDT", "amount": quote["receive_amount"]})
    );
    assert_eq!(payout["destination"], format!("tron:{TRON_WALLET}"));
    assert_executions(&app, &leg_key(&done, 1), &[("acquirer", "charge")]).await;
    assert_executions(&app, &leg_key(&done, 2), &[("custodian", "payout")]).await;
}

#[actix_web::test]
async fn a_declined_card_fails_the_transfer_before_any_payout() {
    let app = app().await;
    let merchant = app.merchant().await;
    for (card_pm, reason) in [
        ("pm_card_chargeDeclined", "card_declined"),
        (
            "pm_card_chargeDeclinedInsufficientFunds",
            "insufficient_funds",
        ),
        ("pm_card_doesNotExist", "invalid_payment_method"),
    ] {
        let created = create(&app, &merchant, card_pm).await;
        let done = finished(&app, &merchant, &id(&created)).await;
        assert_eq!(done["status"], "failed", "{card_pm}: {done}");
        assert_eq!(done["failure_reason"], reason, "{card_pm}: {done}");
        assert_eq!(leg(&done, 1)["status"], "failed", "{card_pm}: {done}");
        assert_eq!(leg(&done, 2)["status"], "not_started", "{card_pm}: {done}");
        let charge = settlement(&app, &merchant, &leg_key(&done, 1)).await;
        assert_eq!(charge["status"], "failed", "{charge}");
        assert_eq!(charge["failure_reason"], reason, "{charge}");
        assert_executions(&app, &leg_key(&done, 1), &[("acquirer", "charge")]).await;
        assert_executions(&app, &leg_key(&done, 2), &[]).await;
    }
}

#[actix_web::test]
async fn a_3ds_card_waits_for_the_payer_and_an_approval_completes_the_transfer() {
    let app = app().await;
    let merchant = app.merchant().await;
    let created = create(&app, &merchant, "pm_card_threeDSecureRequired").await;
    let transfer_id = id(&created);
    let open = challenged(&app, &merchant, &transfer_id).await;
    let secret = client_secret(&open);

    let page = app
        .client
        .get(sandbox(&app, &format!("/3ds/{secret}")))
        .send()
        .await
        .expect("request");
    assert_eq!(page.status(), 200);
    let content_type = page.headers()["content-type"].to_str().expect("ascii");
    assert!(content_type.starts_with("text/html"), "{content_type}");
    let html = page.text().await.expect("text");
    assert!(html.contains(&format!("/3ds/{secret}/approve")), "{html}");
    assert!(html.contains(&format!("/3ds/{secret}/decline")), "{html}");
    assert_eq!(
        get(&app, &merchant, &transfer_id).await["status"],
        "leg1_in_flight",
        "reading the page decides nothing"
    );

    answer_challenge(&app, &secret, "approve").await;
    let done = finished(&app, &merchant, &transfer_id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(leg(&done, 1)["status"], "succeeded");
    assert_eq!(leg(&done, 1)["next_action_type"], Value::Null, "{done}");
    assert_eq!(leg(&done, 1)["client_secret"], secret.as_str(), "kept");
    assert_eq!(leg(&done, 2)["status"], "succeeded");
    assert_executions(&app, &leg_key(&done, 1), &[("acquirer", "charge")]).await;
    assert_executions(&app, &leg_key(&done, 2), &[("custodian", "payout")]).await;
}

#[actix_web::test]
async fn a_declined_challenge_fails_the_transfer_with_authentication_failed() {
    let app = app().await;
    let merchant = app.merchant().await;
    let created = create(&app, &merchant, "pm_card_threeDSecureRequired").await;
    let transfer_id = id(&created);
    let secret = client_secret(&challenged(&app, &merchant, &transfer_id).await);
    answer_challenge(&app, &secret, "decline").await;
    let done = finished(&app, &merchant, &transfer_id).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["failure_reason"], "authentication_failed");
    assert_eq!(leg(&done, 1)["status"], "failed");
    assert_eq!(leg(&done, 1)["next_action_type"], Value::Null);
    assert_eq!(leg(&done, 2)["status"], "not_started");
    assert_executions(&app, &leg_key(&done, 1), &[("acquirer", "charge")]).await;
    assert_executions(&app, &leg_key(&done, 2), &[]).await;
}

#[actix_web::test]
async fn an_unanswered_challenge_expires_and_fails_the_transfer() {
    let app = TestApp::spawn_with(|config| {
        fast_retries(config);
        config.challenge_ttl = Duration::from_secs(1);
    })
    .await;
    let merchant = app.merchant().await;
    let created = create(&app, &merchant, "pm_card_threeDSecureRequired").await;
    let done = finished(&app, &merchant, &id(&created)).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["failure_reason"], "challenge_expired");
    assert_eq!(leg(&done, 1)["status"], "failed");
    assert!(
        leg(&done, 1)["client_secret"].is_string(),
        "the challenge was shown: {done}"
    );
    assert_eq!(leg(&done, 1)["next_action_type"], Value::Null);
    assert_eq!(leg(&done, 2)["status"], "not_started");
    assert_executions(&app, &leg_key(&done, 1), &[("acquirer", "charge")]).await;
    assert_executions(&app, &leg_key(&done, 2), &[]).await;
}

#[actix_web::test]
async fn transient_custodian_errors_are_retried_and_the_transfer_succeeds() {
    let app = app().await;
    let merchant = app.merchant().await;
    fault(
        &app,
        json!({"target": "custodian", "match": {"wallet": EVM_WALLET}, "mode": "transient", "count": 2}),
    )
    .await;
    let created = create(&app, &merchant, "pm_card_visa").await;
    let done = finished(&app, &merchant, &id(&created)).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(leg(&done, 2)["status"], "succeeded");
    let payout = settlement(&app, &merchant, &leg_key(&done, 2)).await;
    assert_eq!(payout["status"], "succeeded");
    assert!(
        payout["attempt"].as_i64().is_some_and(|a| a > 1),
        "retried: {payout}"
    );
    assert_executions(&app, &leg_key(&done, 1), &[("acquirer", "charge")]).await;
    assert_executions(&app, &leg_key(&done, 2), &[("custodian", "payout")]).await;
}

#[actix_web::test]
async fn a_payout_declined_for_good_refunds_the_card() {
    let app = app().await;
    let merchant = app.merchant().await;
    fault(
        &app,
        json!({"target": "custodian", "match": {"wallet": EVM_WALLET}, "mode": "decline"}),
    )
    .await;
    let created = create(&app, &merchant, "pm_card_visa").await;
    let transfer_id = id(&created);
    let done = finished(&app, &merchant, &transfer_id).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(leg(&done, 1)["status"], "reversed", "{done}");
    assert_eq!(leg(&done, 2)["status"], "failed", "{done}");
    assert!(done["failure_reason"].is_string(), "{done}");

    let (leg1, leg2) = (leg_key(&done, 1), leg_key(&done, 2));
    assert_eq!(
        settlement(&app, &merchant, &leg1).await["status"],
        "reversed"
    );
    assert_eq!(settlement(&app, &merchant, &leg2).await["status"], "failed");
    assert_executions(
        &app,
        &leg1,
        &[("acquirer", "charge"), ("acquirer", "refund")],
    )
    .await;
    assert_executions(&app, &leg2, &[("custodian", "payout")]).await;
    assert_ledger_balanced(&app).await;
    assert_eq!(
        audited_statuses(&app, &merchant, &transfer_id).await,
        [
            "leg1_in_flight",
            "leg1_succeeded",
            "leg2_in_flight",
            "compensating",
            "failed"
        ]
    );
    let health = public_json(&app, "/health").await;
    assert_eq!(
        health["components"]["alerts"]["open"], 0,
        "a completed refund needs no operator: {health}"
    );
}

#[actix_web::test]
async fn a_refund_that_keeps_failing_ends_reverse_failed_with_an_operator_alert() {
    let app = app().await;
    let merchant = app.merchant().await;
    let healthy = public_json(&app, "/health").await;
    assert_eq!(healthy["components"]["alerts"]["open"], 0, "{healthy}");
    fault(
        &app,
        json!({"target": "custodian", "match": {"wallet": EVM_WALLET}, "mode": "decline"}),
    )
    .await;
    // Only refunds: the charge itself goes through.
    fault(
        &app,
        json!({"target": "acquirer",
            "match": {"payment_method": "pm_card_mastercard", "operation": "refund"},
            "mode": "transient"}),
    )
    .await;
    let created = create(&app, &merchant, "pm_card_mastercard").await;
    let transfer_id = id(&created);
    let done = finished(&app, &merchant, &transfer_id).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(leg(&done, 1)["status"], "reverse_failed", "{done}");
    assert_eq!(leg(&done, 2)["status"], "failed", "{done}");

    let (leg1, leg2) = (leg_key(&done, 1), leg_key(&done, 2));
    assert_eq!(
        settlement(&app, &merchant, &leg1).await["status"],
        "succeeded",
        "the card was never refunded"
    );
    // A transient answer executes nothing at the simulator.
    assert_executions(&app, &leg1, &[("acquirer", "charge")]).await;
    assert_executions(&app, &leg2, &[("custodian", "payout")]).await;
    assert_ledger_balanced(&app).await;

    // A stranger sees that something is alerting, and nothing of what.
    let public = public_json(&app, "/health").await;
    assert_eq!(public["status"], "degraded", "{public}");
    assert_eq!(public["components"]["alerts"]["open"], 1, "{public}");
    let text = public.to_string() + &public_json(&app, "/health/actors").await.to_string();
    for secret in [transfer_id.as_str(), merchant.merchant_id.as_str()] {
        assert!(
            !text.contains(secret),
            "{secret} shown to a stranger: {text}"
        );
    }
    let health = app.operator_json("/health").await;
    assert_eq!(health["status"], "degraded", "{health}");
    let alerts = &health["components"]["alerts"];
    assert_eq!(alerts["status"], "alerting", "{health}");
    assert_eq!(alerts["open"], 1, "{health}");
    assert_eq!(
        alerts["entities"][0]["id"],
        transfer_id.as_str(),
        "{health}"
    );
    assert_eq!(
        alerts["entities"][0]["merchant_id"],
        merchant.merchant_id.as_str()
    );
    assert!(alerts["entities"][0]["alert"].is_string(), "{health}");
    let actors = app.operator_json("/health/actors").await;
    let entities = actors["alerts"]["entities"].as_array().expect("entities");
    let ids: Vec<&str> = entities.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(ids, [transfer_id.as_str()], "{actors}");
    assert_eq!(entities[0]["kind"], "transfer");

    let events = json_of(&app, &merchant, "/v1/audit/events?limit=200").await;
    let raised = events["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|e| e["resource_id"] == transfer_id.as_str())
        .filter(|e| e["action"] == "transfer.alert_raised")
        .count();
    assert_eq!(raised, 1, "the alert is audited once");
    let verified = json_of(&app, &merchant, "/v1/audit/verify").await;
    assert_eq!(verified["valid"], true, "{verified}");
}

#[actix_web::test]
async fn a_payout_whose_answer_is_lost_is_inquired_not_sent_twice() {
    let app = app().await;
    let merchant = app.merchant().await;
    // The custodian pays, then holds its answer past Tern's request timeout.
    fault(
        &app,
        json!({"target": "custodian", "match": {"wallet": EVM_WALLET}, "mode": "timeout_after_success", "count": 1}),
    )
    .await;
    let created = create(&app, &merchant, "pm_card_visa").await;
    let done = finished(&app, &merchant, &id(&created)).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(leg(&done, 2)["status"], "succeeded");
    assert_executions(&app, &leg_key(&done, 1), &[("acquirer", "charge")]).await;
    assert_executions(&app, &leg_key(&done, 2), &[("custodian", "payout")]).await;
}

#[actix_web::test]
async fn a_refund_pending_at_the_acquirer_completes_the_compensation_later() {
    let app = app().await;
    let merchant = app.merchant().await;
    fault(
        &app,
        json!({"target": "custodian", "match": {"wallet": EVM_WALLET}, "mode": "decline"}),
    )
    .await;
    fault(
        &app,
        json!({"target": "acquirer", "match": {"operation": "refund"}, "mode": "reversal_pending"}),
    )
    .await;
    let created = create(&app, &merchant, "pm_card_visa").await;
    let transfer_id = id(&created);
    // The refund is asked for and answered pending; the acquirer's webhook
    // finishes it.
    let done = finished(&app, &merchant, &transfer_id).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(leg(&done, 1)["status"], "reversed", "{done}");
    assert_eq!(leg(&done, 2)["status"], "failed", "{done}");
    let leg1 = leg_key(&done, 1);
    assert_eq!(
        settlement(&app, &merchant, &leg1).await["status"],
        "reversed"
    );
    assert_executions(
        &app,
        &leg1,
        &[("acquirer", "charge"), ("acquirer", "refund")],
    )
    .await;
    assert_executions(&app, &leg_key(&done, 2), &[("custodian", "payout")]).await;
    assert_ledger_balanced(&app).await;
    let health = public_json(&app, "/health").await;
    assert_eq!(health["components"]["alerts"]["open"], 0, "{health}");
}

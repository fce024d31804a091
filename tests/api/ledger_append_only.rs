//! The append-only ledger over HTTP (decisions §6): a settlement's posting
//! and a card clearing are journal entries of their own, a failure is a
//! recorded void, the database refuses to edit an entry, and an amount no
//! balance can hold is a 422 (decisions §2).

use serde_json::{json, Value};
use uuid::Uuid;

use crate::helpers::cards::{authorization, issue, json_of, provider_event};
use crate::helpers::settlements::{
    account, app, charge, create, executions, fault, funded, push, settled,
};
use crate::helpers::{assert_problem, Merchant, RequestExt, TestApp};
use tern_schema::money::MinorUnits;

/// Every entry of the account, newest first.
async fn entries(app: &TestApp, merchant: &Merchant, account: &str) -> Vec<Value> {
    let body: Value = app
        .get(&format!("/v1/ledger/accounts/{account}/entries?limit=200"))
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    assert_eq!(body["has_more"], false);
    body["data"].as_array().expect("data").clone()
}

/// The account's entries of one journal entry.
fn of<'e>(entries: &'e [Value], transaction: &Value) -> Vec<&'e Value> {
    entries
        .iter()
        .filter(|e| e["transaction_id"] == *transaction)
        .collect()
}

/// The one entry of `transaction` on the account, with its status,
/// direction, amount and the hold it resolves.
fn line(entries: &[Value], transaction: &Value) -> (String, String, i64, Value) {
    let lines = of(entries, transaction);
    assert_eq!(lines.len(), 1, "{transaction}: {entries:?}");
    let line = lines[0];
    (
        line["status"].as_str().unwrap_or_default().to_owned(),
        line["direction"].as_str().unwrap_or_default().to_owned(),
        line["amount_minor"].as_i64().unwrap_or_default(),
        line["pending_transaction_id"].clone(),
    )
}

#[actix_web::test]
async fn a_settled_push_posts_a_transaction_of_its_own_and_a_failed_one_records_a_void() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "100.00").await;
    let key = create(&app, &merchant, push(&usd, "30.00", "tok_visa_4242")).await;
    let done = settled(&app, &merchant, &key).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let (hold, posting) = (
        &done["funding_transaction_id"],
        &done["ledger_transaction_id"],
    );
    assert!(hold.is_string() && posting.is_string(), "{done}");
    assert_ne!(hold, posting, "a posting is a new transaction");

    fault(
        &app,
        json!({"target": "card_push", "match": {"destination": "tok_declined"}, "mode": "decline"}),
    )
    .await;
    let failed_key = create(&app, &merchant, push(&usd, "20.00", "tok_declined")).await;
    let failed = settled(&app, &merchant, &failed_key).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(
        failed["ledger_transaction_id"],
        Value::Null,
        "nothing posted"
    );
    let failed_hold = &failed["funding_transaction_id"];

    let listed = entries(&app, &merchant, &usd).await;
    assert_eq!(
        line(&listed, hold),
        ("pending".into(), "debit".into(), 3_000, Value::Null),
        "the hold stays as it was made"
    );
    assert_eq!(
        line(&listed, posting),
        ("posted".into(), "debit".into(), 3_000, hold.clone()),
    );
    let void: Vec<&Value> = listed
        .iter()
        .filter(|e| e["pending_transaction_id"] == *failed_hold)
        .collect();
    assert_eq!(void.len(), 1, "{listed:?}");
    assert_ne!(void[0]["transaction_id"], *failed_hold);
    assert_eq!(
        (
            void[0]["status"].as_str(),
            void[0]["amount_minor"].as_i64(),
            void[0]["settlement_key"].as_str()
        ),
        (Some("voided"), Some(2_000), Some(failed_key.as_str())),
        "the release is recorded"
    );
    assert_eq!(line(&listed, failed_hold).0, "pending");
    assert!(of(&listed, posting)[0]["settlement_key"] == key.as_str());

    // Each amount counts once: 100.00 - 30.00, nothing held.
    let funding = account(&app, &merchant, &usd).await;
    assert_eq!(
        (
            funding["balance_minor"].as_i64(),
            funding["pending_minor"].as_i64(),
            funding["available_minor"].as_i64()
        ),
        (Some(7_000), Some(0), Some(7_000)),
        "{funding}"
    );
}

#[actix_web::test]
async fn a_card_charge_reserves_its_credit_and_posts_it_on_success() {
    let app = app().await;
    let merchant = app.merchant().await;
    let usd = account_id(&app, &merchant, "USD").await;
    let key = create(&app, &merchant, charge(&usd, "12.34", "pm_card_visa")).await;
    let done = settled(&app, &merchant, &key).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let (reserved, posting) = (
        &done["funding_transaction_id"],
        &done["ledger_transaction_id"],
    );
    assert!(
        reserved.is_string() && posting.is_string() && reserved != posting,
        "{done}"
    );

    let declined = create(
        &app,
        &merchant,
        charge(&usd, "5.00", "pm_card_chargeDeclined"),
    )
    .await;
    let failed = settled(&app, &merchant, &declined).await;
    assert_eq!(failed["status"], "failed", "{failed}");

    let listed = entries(&app, &merchant, &usd).await;
    assert_eq!(
        line(&listed, reserved),
        ("pending".into(), "credit".into(), 1_234, Value::Null)
    );
    assert_eq!(
        line(&listed, posting),
        ("posted".into(), "credit".into(), 1_234, reserved.clone())
    );
    let void: Vec<&Value> = listed
        .iter()
        .filter(|e| e["pending_transaction_id"] == failed["funding_transaction_id"])
        .collect();
    assert_eq!(void.len(), 1, "{listed:?}");
    assert_eq!(void[0]["status"], "voided");
    let funding = account(&app, &merchant, &usd).await;
    assert_eq!(
        (
            funding["balance_minor"].as_i64(),
            funding["available_minor"].as_i64()
        ),
        (Some(1_234), Some(1_234))
    );
}

async fn account_id(app: &TestApp, merchant: &Merchant, currency: &str) -> String {
    let body: Value = app
        .get("/v1/ledger/accounts")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    body["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|a| a["currency"] == currency)
        .and_then(|a| a["id"].as_str())
        .expect("account")
        .to_owned()
}

#[actix_web::test]
async fn a_card_clearing_posts_a_new_transaction_and_a_partial_one_voids_the_hold() {
    let app = TestApp::spawn().await;
    let (merchant, usd) = funded(&app, "100.00").await;
    let user = app.user(&merchant).await;
    let card = issue(&app, &merchant, &user, json!({})).await;
    let card = card["id"].as_str().expect("id");

    let mut holds = Vec::new();
    for (held, cleared) in [(2_500, 2_500), (2_000, 1_500)] {
        let event = authorization(card, held, "pos", "US");
        let decision = json_of(provider_event(&app, &event).await, 200).await;
        assert_eq!(decision["approved"], true, "{decision}");
        let clearing = json!({"id": format!("evt_clr_{}", Uuid::new_v4().simple()), "type": "authorization.clearing",
            "data": {"card_id": card, "authorization_id": event["data"]["authorization_id"], "amount_minor": cleared}});
        json_of(provider_event(&app, &clearing).await, 200).await;
        holds.push((held, cleared));
    }

    let listed = entries(&app, &merchant, &usd).await;
    let holds_listed: Vec<&Value> = listed
        .iter()
        .filter(|e| e["status"] == "pending" && e["direction"] == "debit")
        .collect();
    assert_eq!(holds_listed.len(), 2, "both holds stay pending: {listed:?}");
    for hold in holds_listed {
        let amount = hold["amount_minor"].as_i64().expect("amount");
        let resolutions: Vec<&Value> = listed
            .iter()
            .filter(|e| e["pending_transaction_id"] == hold["transaction_id"])
            .collect();
        assert_eq!(resolutions.len(), 1, "{listed:?}");
        let resolution = resolutions[0];
        assert_ne!(resolution["transaction_id"], hold["transaction_id"]);
        assert_eq!(
            resolution["amount_minor"], amount,
            "a resolution repeats its hold"
        );
        let expected = if amount == 2_500 { "posted" } else { "voided" };
        assert_eq!(resolution["status"], expected, "{resolution}");
    }
    // The partial clearing posts what cleared as an entry of its own.
    assert!(
        listed.iter().any(|e| e["status"] == "posted"
            && e["amount_minor"] == 1_500
            && e["pending_transaction_id"].is_null()),
        "{listed:?}"
    );
    let funding = account(&app, &merchant, &usd).await;
    assert_eq!(
        (
            funding["balance_minor"].as_i64(),
            funding["pending_minor"].as_i64()
        ),
        (Some(10_000 - 2_500 - 1_500), Some(0)),
        "{funding}"
    );
}

#[actix_web::test]
async fn the_database_refuses_to_edit_or_delete_a_ledger_entry() {
    let app = TestApp::spawn().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let columns = "id, transaction_id, account_id, direction, amount_minor, currency, created_at";
    let rewritten = "id, transaction_id, account_id, direction, 999999, currency, created_at";
    let transaction_columns = "id, 'voided', merchant_id, settlement_key, description, \
        created_at, updated_at, pending_id";
    // Rewrites by insert: SQLite's REPLACE deletes the old row without its
    // DELETE triggers, PostgreSQL's upsert updates it.
    let upserts = match app.state.db.backend() {
        tern_schema::db::Backend::Sqlite => vec![
            format!("REPLACE INTO ledger_entries SELECT {rewritten} FROM ledger_entries"),
            format!(
                "INSERT OR REPLACE INTO ledger_transactions SELECT {transaction_columns} \
                 FROM ledger_transactions"
            ),
        ],
        tern_schema::db::Backend::Postgres => vec![format!(
            "INSERT INTO ledger_entries ({columns}) SELECT {rewritten} FROM ledger_entries \
             ON CONFLICT (id) DO UPDATE SET amount_minor = excluded.amount_minor"
        )],
    };
    for sql in [
        format!("UPDATE ledger_entries SET amount_minor = 1000000 WHERE account_id = '{usd}'"),
        format!("DELETE FROM ledger_entries WHERE account_id = '{usd}'"),
        "UPDATE ledger_transactions SET status = 'voided'".to_owned(),
    ]
    .into_iter()
    .chain(upserts)
    {
        let error = app.sql(&sql).await.expect_err(&sql).to_string();
        assert!(error.contains("append-only"), "{sql}: {error}");
    }
    let funding = account(&app, &merchant, &usd).await;
    assert_eq!(funding["balance_minor"], 1_000);
    assert_eq!(
        entries(&app, &merchant, &usd).await.len(),
        2,
        "a reservation and its posting"
    );
}

#[actix_web::test]
async fn an_amount_no_balance_can_hold_is_a_422_and_nothing_is_stored() {
    // The per-settlement cap keeps amounts far below the int64 limit; it is
    // lifted here to reach the ledger's own guard.
    let app = TestApp::spawn_with(|config| {
        config.settlement_amount_max_minor = MinorUnits::new(i64::MAX);
        config.settlement_retry_schedule = vec![std::time::Duration::from_millis(100); 3];
    })
    .await;
    // i64::MAX - 100 minor units: the funding account is then 1.00 short
    // of the int64 limit.
    let (merchant, usd) = funded(&app, "92233720368547757.07").await;
    let key = Uuid::new_v4().to_string();
    let response = app
        .post_with_key(
            "/v1/settlements",
            &merchant.api_key,
            &key,
            &charge(&usd, "1.01", "pm_card_visa"),
        )
        .await;
    let problem = assert_problem(response, 422, "validation-error").await;
    let detail = problem["errors"]["amount"].as_str().unwrap_or_default();
    assert!(
        detail.contains("1.01 USD") && detail.contains("limit"),
        "{problem}"
    );
    let missing = app
        .get(&format!("/v1/settlements/{key}"))
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request");
    assert_eq!(missing.status(), 404, "nothing stored");
    assert!(executions(&app, &key).await.is_empty(), "nothing executed");

    // What still fits is taken to the limit exactly, never past it.
    let exact = create(&app, &merchant, charge(&usd, "1.00", "pm_card_visa")).await;
    assert_eq!(
        settled(&app, &merchant, &exact).await["status"],
        "succeeded"
    );
    let funding = account(&app, &merchant, &usd).await;
    assert_eq!(
        (
            funding["balance_minor"].as_i64(),
            funding["available_minor"].as_i64()
        ),
        (Some(i64::MAX), Some(i64::MAX)),
        "{funding}"
    );
    let another = Uuid::new_v4().to_string();
    let response = app
        .post_with_key(
            "/v1/settlements",
            &merchant.api_key,
            &another,
            &charge(&usd, "0.01", "pm_card_visa"),
        )
        .await;
    assert_problem(response, 422, "validation-error").await;
    // The acquirer's side is full as well: another merchant's charge is
    // refused on the counterparty, before anything is executed.
    let other = app.merchant().await;
    let other_usd = account_id(&app, &other, "USD").await;
    let response = app
        .post_with_key(
            "/v1/settlements",
            &other.api_key,
            &another,
            &charge(&other_usd, "0.01", "pm_card_visa"),
        )
        .await;
    assert_problem(response, 422, "validation-error").await;
    assert_eq!(account(&app, &other, &other_usd).await["balance_minor"], 0);

    // An on_chain payout counts micro-units of its asset: past int64 it is
    // refused at creation, not saturated.
    let payout = json!({"method": "on_chain", "amount": {"amount": "922337203685477.59", "currency": "USD"},
        "source": usd, "destination": "polygon:0x52908400098527886E0F7030069857D2E4169EE7", "recipient_name": "Ada"});
    let response = app
        .post_with_key(
            "/v1/settlements",
            &merchant.api_key,
            &Uuid::new_v4().to_string(),
            &payout,
        )
        .await;
    let problem = assert_problem(response, 422, "validation-error").await;
    assert!(problem["errors"]["amount"].is_string(), "{problem}");
}

#[actix_web::test]
async fn one_settlement_is_capped_so_no_merchant_can_fill_a_shared_account() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    for (method, body) in [
        (
            "card_charge",
            charge(&usd, "10000000000.01", "pm_card_visa"),
        ),
        ("card_push", push(&usd, "10000000000.01", "tok_visa")),
    ] {
        let key = Uuid::new_v4().to_string();
        let response = app
            .post_with_key("/v1/settlements", &merchant.api_key, &key, &body)
            .await;
        let problem = assert_problem(response, 422, "validation-error").await;
        assert_eq!(
            problem["errors"]["amount"], "must be at most 10000000000.00 USD",
            "{method}: {problem}"
        );
        assert!(executions(&app, &key).await.is_empty(), "nothing executed");
    }
    let at_cap = create(
        &app,
        &merchant,
        charge(&usd, "10000000000.00", "pm_card_visa"),
    )
    .await;
    assert_eq!(
        settled(&app, &merchant, &at_cap).await["status"],
        "succeeded"
    );
}

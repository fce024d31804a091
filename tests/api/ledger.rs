//! GET /v1/ledger/accounts and /v1/ledger/accounts/{id}/entries.

use serde_json::Value;
use tern_schema::ledger::{self, Direction, Entry, Line, Phase, SystemAccount};
use tern_schema::money::MinorUnits;
use tern_schema::vocabulary::{AccountId, SettlementKey};

use crate::helpers::settlements::accounts;
use crate::helpers::{assert_problem, Merchant, RequestExt, TestApp};

/// Posts `count` card collections of 1.00 into the account, as the
/// settlement actor will; the API under test only reads them.
async fn collect(app: &TestApp, merchant: &Merchant, account_id: &str, count: usize) {
    for i in 0..count {
        let acquirer = SystemAccount::CardAcquirer.account_id("USD");
        let entry = Entry {
            merchant_id: Some(merchant.merchant_id.clone()),
            settlement_key: Some(SettlementKey::new(format!("key-{i}"))),
            description: "collection".into(),
            lines: vec![
                Line {
                    account_id: acquirer,
                    direction: Direction::Debit,
                    amount_minor: MinorUnits::new(100),
                    currency: "USD".into(),
                },
                Line {
                    account_id: AccountId::new(account_id),
                    direction: Direction::Credit,
                    amount_minor: MinorUnits::new(100),
                    currency: "USD".into(),
                },
            ],
        };
        ledger::record(&app.state.db, entry, Phase::Posted)
            .await
            .expect("posted");
    }
}

#[actix_web::test]
async fn a_new_merchant_has_an_empty_funding_account_per_currency() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let accounts = accounts(&app, &merchant).await;
    let currencies: Vec<&str> = accounts
        .iter()
        .filter_map(|a| a["currency"].as_str())
        .collect();
    assert_eq!(currencies, ["EUR", "GBP", "JPY", "USD"]);
    for account in &accounts {
        assert_eq!(account["kind"], "funding");
        for field in ["balance_minor", "pending_minor", "available_minor"] {
            assert_eq!(account[field], 0, "{field}");
        }
        assert!(account["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("acct_")));
    }
}

#[actix_web::test]
async fn entries_page_newest_first_and_balances_follow() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let usd = accounts(&app, &merchant)
        .await
        .into_iter()
        .find(|a| a["currency"] == "USD")
        .expect("usd");
    let usd_id = usd["id"].as_str().expect("id").to_owned();
    collect(&app, &merchant, &usd_id, 5).await;

    let usd = accounts(&app, &merchant)
        .await
        .into_iter()
        .find(|a| a["currency"] == "USD")
        .expect("usd");
    assert_eq!(
        (
            usd["balance_minor"].as_i64(),
            usd["available_minor"].as_i64()
        ),
        (Some(500), Some(500))
    );

    let path = format!("/v1/ledger/accounts/{usd_id}/entries?limit=3");
    let first: Value = app
        .get(&path)
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    let data = first["data"].as_array().expect("data");
    assert_eq!((data.len(), first["has_more"].as_bool()), (3, Some(true)));
    assert_eq!(data[0]["settlement_key"], "key-4", "newest first");
    assert_eq!(
        (
            data[0]["direction"].as_str(),
            data[0]["status"].as_str(),
            data[0]["amount_minor"].as_i64()
        ),
        (Some("credit"), Some("posted"), Some(100))
    );
    let cursor = data[2]["id"].as_str().expect("id");
    let next: Value = app
        .get(&format!(
            "/v1/ledger/accounts/{usd_id}/entries?limit=3&starting_after={cursor}"
        ))
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    let keys: Vec<&str> = next["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|e| e["settlement_key"].as_str())
        .collect();
    assert_eq!(keys, ["key-1", "key-0"]);
    assert_eq!(next["has_more"], false);
}

#[actix_web::test]
async fn another_merchants_account_is_404_and_bad_queries_are_422() {
    let app = TestApp::spawn().await;
    let alice = app.merchant().await;
    let bob = app.merchant().await;
    let bobs = accounts(&app, &bob).await[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let alices = accounts(&app, &alice).await[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let response = app
        .get(&format!("/v1/ledger/accounts/{bobs}/entries"))
        .bearer_auth(&alice.api_key)
        .send()
        .await
        .expect("req");
    assert_problem(response, 404, "not-found").await;
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("limit=ten", "limit"),
        ("colour=red", "colour"),
        ("starting_after=len_nope", "starting_after"),
    ] {
        let response = app
            .get(&format!("/v1/ledger/accounts/{alices}/entries?{query}"))
            .bearer_auth(&alice.api_key)
            .send()
            .await
            .expect("req");
        let problem = assert_problem(response, 422, "validation-error").await;
        assert!(problem["errors"][field].is_string(), "{query}: {problem}");
    }
}

#[actix_web::test]
async fn the_ledger_needs_settlements_read() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let narrow = &app.key_with_scopes(&merchant, &["quotes:read"]).await;
    let problem = assert_problem(
        app.get("/v1/ledger/accounts")
            .bearer_auth(narrow)
            .send()
            .await
            .expect("req"),
        403,
        "insufficient-scope",
    )
    .await;
    assert!(problem["detail"]
        .as_str()
        .is_some_and(|d| d.contains("settlements:read")));
}

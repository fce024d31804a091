//! Settlements over HTTP: creation under Idempotency-Key, execution by the
//! settlement actor against the sandbox, retries and inquiries, reversals,
//! and the ledger and audit trail they leave.

use std::time::Duration;

use serde_json::{json, Value};
use uuid::Uuid;

use crate::helpers::settlements::{
    account, app, assert_ledger_balanced, charge, create, executions, fault, funded,
    funding_account, push, settled, settlement, WAIT_MAX,
};
use crate::helpers::{assert_problem, Merchant, RequestExt, TestApp};

async fn list(app: &TestApp, merchant: &Merchant, query: &str) -> Value {
    let response = app
        .get(&format!("/v1/settlements{query}"))
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    response.json().await.expect("json")
}

#[actix_web::test]
async fn a_charge_funds_the_merchant_and_a_push_pays_out_once() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "100.00").await;
    assert_eq!(
        account(&app, &merchant, &usd).await["available_minor"],
        10_000
    );

    let key = Uuid::new_v4().to_string();
    let response = app
        .post_with_key(
            "/v1/settlements",
            &merchant.api_key,
            &key,
            &push(&usd, "30.00", "tok_visa_4242"),
        )
        .await;
    assert_eq!(response.status(), 201);
    assert_eq!(
        response.headers()["location"].to_str().expect("ascii"),
        format!("/v1/settlements/{key}")
    );
    let created: Value = response.json().await.expect("json");
    assert_eq!(created["status"], "pending");
    assert_eq!(
        created["amount"],
        json!({"amount": "30.00", "currency": "USD"})
    );
    assert!(
        created["funding_transaction_id"].is_string(),
        "the hold is made at creation"
    );
    // The hold counts against available at once.
    assert_eq!(
        account(&app, &merchant, &usd).await["available_minor"],
        7_000
    );

    let done = settled(&app, &merchant, &key).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["attempt"], 1);
    assert_eq!(done["action_code"], "00");
    for (field, digits) in [
        ("stan", 6),
        ("retrieval_reference_number", 12),
        ("transaction_identifier", 15),
    ] {
        let value = done[field].as_str().expect(field);
        assert_eq!(value.len(), digits, "{field}");
        assert!(value.chars().all(|c| c.is_ascii_digit()), "{field}");
    }
    assert_eq!(done["approval_code"].as_str().map(str::len), Some(6));
    assert!(done["ledger_transaction_id"].is_string(), "{done}");
    assert_ne!(
        done["ledger_transaction_id"], done["funding_transaction_id"],
        "the posting is a transaction of its own, not the hold"
    );
    let usd_account = account(&app, &merchant, &usd).await;
    assert_eq!(usd_account["balance_minor"], 7_000);
    assert_eq!(usd_account["pending_minor"], 0);
    assert_eq!(
        executions(&app, &key).await.len(),
        1,
        "one execution at the provider"
    );
    assert_ledger_balanced(&app).await;

    // The audit chain holds the creation and every status change, and verifies.
    let events: Value = app
        .get("/v1/audit/events?limit=200")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    let actions: Vec<String> = events["data"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["resource_id"] == key.as_str())
        .map(|e| e["action"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        actions
            .iter()
            .filter(|a| *a == "settlement.status_changed")
            .count(),
        2,
        "pending -> in_flight -> succeeded: {actions:?}"
    );
    assert!(
        actions.contains(&"settlement.created".to_owned()),
        "{actions:?}"
    );
    let verify: Value = app
        .get("/v1/audit/verify")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    assert_eq!(verify["valid"], true, "{verify}");
}

#[actix_web::test]
async fn a_repeated_key_replays_and_a_different_body_is_refused() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "50.00").await;
    let key = Uuid::new_v4().to_string();
    let body = push(&usd, "5.00", "tok_visa");
    let first = app
        .post_with_key("/v1/settlements", &merchant.api_key, &key, &body)
        .await;
    assert_eq!(first.status(), 201);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.expect("json");

    // Same key, same body (reformatted, with the key in the body too): replay.
    let mut same = body.clone();
    same["idempotency_key"] = json!(key.to_uppercase());
    let replay = app
        .post_with_key(
            "/v1/settlements",
            &merchant.api_key,
            &key.to_uppercase(),
            &same,
        )
        .await;
    assert_eq!(replay.status(), 201);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let replayed: Value = replay.json().await.expect("json");
    assert_eq!(
        replayed, first,
        "the original response, byte for byte in meaning"
    );

    // Same key, another amount: 422, nothing changes.
    let other = push(&usd, "6.00", "tok_visa");
    let refused = app
        .post_with_key("/v1/settlements", &merchant.api_key, &key, &other)
        .await;
    let problem = assert_problem(refused, 422, "validation-error").await;
    assert!(
        problem["errors"]["Idempotency-Key"].is_string(),
        "{problem}"
    );

    settled(&app, &merchant, &key).await;
    assert_eq!(
        list(&app, &merchant, "?status=succeeded").await["count"],
        2,
        "the charge and one push"
    );
    assert_eq!(executions(&app, &key).await.len(), 1);
    // The same key is free for another merchant, and stays apart.
    let other_merchant = app.merchant().await;
    let their_usd = funding_account(&app, &other_merchant, "USD").await;
    let theirs = app
        .post_with_key(
            "/v1/settlements",
            &other_merchant.api_key,
            &key,
            &charge(&their_usd, "1.00", "pm_card_visa"),
        )
        .await;
    assert_eq!(theirs.status(), 201);
}

#[actix_web::test]
async fn idempotency_key_header_is_required_and_must_be_a_uuid_v4() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let body = push(&usd, "1.00", "tok_visa");
    let missing = app
        .post("/v1/settlements")
        .bearer_auth(&merchant.api_key)
        .json(&body)
        .send()
        .await
        .expect("request");
    assert_problem(missing, 400, "invalid-idempotency-key").await;
    for bad in ["not-a-uuid", "", "6ba7b810-9dad-11d1-80b4-00c04fd430c8"] {
        let response = app
            .post_with_key("/v1/settlements", &merchant.api_key, bad, &body)
            .await;
        assert_problem(response, 400, "invalid-idempotency-key").await;
    }
    // Header and body disagree.
    let mut mismatched = body.clone();
    mismatched["idempotency_key"] = json!(Uuid::new_v4().to_string());
    let response = app
        .post_with_key(
            "/v1/settlements",
            &merchant.api_key,
            &Uuid::new_v4().to_string(),
            &mismatched,
        )
        .await;
    let problem = assert_problem(response, 422, "validation-error").await;
    assert!(
        problem["errors"]["idempotency_key"].is_string(),
        "{problem}"
    );
    assert_eq!(
        list(&app, &merchant, "").await["count"],
        1,
        "only the funding charge"
    );
}

#[actix_web::test]
async fn fifty_concurrent_posts_with_one_key_make_one_settlement() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let key = Uuid::new_v4().to_string();
    let body = push(&usd, "2.00", "tok_visa");
    let requests =
        (0..50).map(|_| app.post_with_key("/v1/settlements", &merchant.api_key, &key, &body));
    let responses = futures_util::future::join_all(requests).await;
    let mut created = 0;
    let mut replays = 0;
    let mut bodies = Vec::new();
    for response in responses {
        match response.status().as_u16() {
            201 if response.headers().contains_key("idempotent-replayed") => {
                replays += 1;
                bodies.push(response.json::<Value>().await.expect("json"));
            }
            201 => {
                created += 1;
                bodies.push(response.json::<Value>().await.expect("json"));
            }
            409 => {}
            other => panic!(
                "unexpected {other}: {}",
                response.text().await.unwrap_or_default()
            ),
        }
    }
    assert_eq!(
        created, 1,
        "exactly one request created it ({replays} replays)"
    );
    assert!(
        bodies.windows(2).all(|pair| pair[0] == pair[1]),
        "every 201 is the same"
    );
    assert_eq!(settled(&app, &merchant, &key).await["status"], "succeeded");
    assert_eq!(executions(&app, &key).await.len(), 1);
    assert_eq!(account(&app, &merchant, &usd).await["balance_minor"], 800);
}

#[actix_web::test]
async fn concurrent_pushes_never_overdraw_the_funding_account() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let requests = (0..25).map(|_| {
        let key = Uuid::new_v4().to_string();
        let body = push(&usd, "1.00", "tok_visa");
        let app = &app;
        let api_key = merchant.api_key.clone();
        async move {
            (
                key.clone(),
                app.post_with_key("/v1/settlements", &api_key, &key, &body)
                    .await,
            )
        }
    });
    let responses = futures_util::future::join_all(requests).await;
    let mut accepted = Vec::new();
    for (key, response) in responses {
        match response.status().as_u16() {
            201 => accepted.push(key),
            422 => {
                let problem = assert_problem(response, 422, "validation-error").await;
                assert!(problem["errors"]["amount"].is_string(), "{problem}");
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(accepted.len(), 10, "exactly the funded amount is held");
    for key in &accepted {
        assert_eq!(settled(&app, &merchant, key).await["status"], "succeeded");
    }
    let usd_account = account(&app, &merchant, &usd).await;
    assert_eq!(usd_account["balance_minor"], 0);
    assert_eq!(usd_account["available_minor"], 0);
    assert_eq!(
        list(&app, &merchant, "?status=succeeded&limit=200").await["count"],
        11
    );
}

#[actix_web::test]
async fn refused_duplicates_hold_no_funds_from_the_requests_beside_them() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let keys: Vec<String> = (0..10).map(|_| Uuid::new_v4().to_string()).collect();
    let body = push(&usd, "1.00", "tok_visa");
    // Ten distinct pushes take exactly the funds; thirty repeats of the
    // first arrive among them. A repeat's hold is refused with its key, and
    // must never count against the others, even inside one group commit.
    let requests = keys
        .iter()
        .chain(std::iter::repeat_n(&keys[0], 30))
        .map(|key| app.post_with_key("/v1/settlements", &merchant.api_key, key, &body));
    let responses = futures_util::future::join_all(requests).await;
    let mut created = 0;
    for response in responses {
        match response.status().as_u16() {
            201 if response.headers().contains_key("idempotent-replayed") => {}
            201 => created += 1,
            409 => {}
            other => panic!(
                "unexpected {other}: {}",
                response.text().await.unwrap_or_default()
            ),
        }
    }
    assert_eq!(created, 10, "every distinct push was created once");
    for key in &keys {
        assert_eq!(settled(&app, &merchant, key).await["status"], "succeeded");
        assert_eq!(executions(&app, key).await.len(), 1);
    }
    let usd_account = account(&app, &merchant, &usd).await;
    assert_eq!(usd_account["balance_minor"], 0);
    assert_eq!(usd_account["available_minor"], 0);
}

#[actix_web::test]
async fn transient_failures_retry_under_the_same_provider_key() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    fault(&app, json!({"target": "card_push", "match": {"destination": "tok_flaky"}, "mode": "transient", "count": 2})).await;
    let key = create(&app, &merchant, push(&usd, "3.00", "tok_flaky")).await;
    let done = settled(&app, &merchant, &key).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["attempt"], 3, "two transient failures, then success");
    let executed = executions(&app, &key).await;
    assert_eq!(executed.len(), 1, "{executed:?}");
}

#[actix_web::test]
async fn an_unknown_outcome_is_inquired_and_never_executed_twice() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    // The provider executes, then holds the answer past Tern's timeout.
    fault(&app, json!({"target": "card_push", "match": {"destination": "tok_slowpoke"}, "mode": "timeout_after_success", "count": 1})).await;
    let key = create(&app, &merchant, push(&usd, "4.00", "tok_slowpoke")).await;
    let done = settled(&app, &merchant, &key).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(
        done["attempt"], 2,
        "the second attempt inquired and found it"
    );
    assert_eq!(executions(&app, &key).await.len(), 1);
    assert_eq!(account(&app, &merchant, &usd).await["balance_minor"], 600);
}

#[actix_web::test]
async fn declines_fail_the_settlement_and_release_the_hold() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    fault(
        &app,
        json!({"target": "card_push", "match": {"destination": "tok_declined"}, "mode": "decline"}),
    )
    .await;
    let key = create(&app, &merchant, push(&usd, "4.00", "tok_declined")).await;
    let done = settled(&app, &merchant, &key).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["failure_reason"].is_string());
    assert!(
        done["action_code"].as_str().is_some_and(|c| c != "00"),
        "{done}"
    );
    let usd_account = account(&app, &merchant, &usd).await;
    assert_eq!(
        usd_account["available_minor"], 1_000,
        "the hold is released"
    );

    // Off-session charges cannot do 3DS; declined cards fail too.
    for (payment_method, reason) in [
        ("pm_card_threeDSecureRequired", "authentication_required"),
        ("pm_card_chargeDeclined", "card_declined"),
    ] {
        let key = create(&app, &merchant, charge(&usd, "1.00", payment_method)).await;
        let done = settled(&app, &merchant, &key).await;
        assert_eq!(
            (done["status"].as_str(), done["failure_reason"].as_str()),
            (Some("failed"), Some(reason)),
            "{done}"
        );
        assert_eq!(done["client_secret"], Value::Null);
    }
    assert_eq!(account(&app, &merchant, &usd).await["balance_minor"], 1_000);
}

#[actix_web::test]
async fn on_chain_payouts_settle_through_the_custodian() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "20.00").await;
    let body = json!({"method": "on_chain", "amount": {"amount": "12.50", "currency": "USD"}, "source": usd,
        "destination": "tron:TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7", "recipient_name": "Ada", "asset": "USDT"});
    let key = create(&app, &merchant, body).await;
    let done = settled(&app, &merchant, &key).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["asset"], "USDT");
    assert_eq!(account(&app, &merchant, &usd).await["balance_minor"], 750);
    // Not reversible.
    let response = app
        .post(&format!("/v1/settlements/{key}/reverse"))
        .bearer_auth(&merchant.api_key)
        .json(&json!({"reason": "changed my mind"}))
        .send()
        .await
        .expect("request");
    assert_problem(response, 409, "conflict").await;
}

async fn reverse(app: &TestApp, merchant: &Merchant, key: &str) -> reqwest::Response {
    app.post(&format!("/v1/settlements/{key}/reverse"))
        .bearer_auth(&merchant.api_key)
        .json(&json!({"reason": "customer request"}))
        .send()
        .await
        .expect("request")
}

#[actix_web::test]
async fn reversals_return_the_money_once() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let key = create(&app, &merchant, push(&usd, "4.00", "tok_visa")).await;
    settled(&app, &merchant, &key).await;
    let response = reverse(&app, &merchant, &key).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["status"], "reversed");
    assert_eq!(body["idempotency_key"], key.as_str());
    assert_eq!(body["action_code"], "00");
    assert_eq!(account(&app, &merchant, &usd).await["balance_minor"], 1_000);
    let again = reverse(&app, &merchant, &key).await;
    assert_problem(again, 409, "conflict").await;
    assert_eq!(
        settlement(&app, &merchant, &key).await["status"],
        "reversed"
    );

    // A refund takes the charge back out of the merchant's funds.
    let charge_key = create(&app, &merchant, charge(&usd, "2.00", "pm_card_mastercard")).await;
    settled(&app, &merchant, &charge_key).await;
    assert_eq!(reverse(&app, &merchant, &charge_key).await.status(), 200);
    assert_eq!(account(&app, &merchant, &usd).await["balance_minor"], 1_000);

    // ... and needs them: a refund beyond the available balance is refused.
    let big = create(&app, &merchant, charge(&usd, "5.00", "pm_card_visa")).await;
    settled(&app, &merchant, &big).await;
    let drain = create(&app, &merchant, push(&usd, "15.00", "tok_visa")).await;
    settled(&app, &merchant, &drain).await;
    let refused = reverse(&app, &merchant, &big).await;
    let problem = assert_problem(refused, 409, "conflict").await;
    assert_eq!(problem["code"], "INSUFFICIENT_FUNDS");
    assert_eq!(
        settlement(&app, &merchant, &big).await["status"],
        "succeeded"
    );

    // A failed settlement is not reversible; another merchant's is not found.
    fault(
        &app,
        json!({"target": "card_push", "match": {"destination": "tok_nope"}, "mode": "decline"}),
    )
    .await;
    let charge_more = create(&app, &merchant, charge(&usd, "1.00", "pm_card_visa")).await;
    settled(&app, &merchant, &charge_more).await;
    let failed = create(&app, &merchant, push(&usd, "1.00", "tok_nope")).await;
    settled(&app, &merchant, &failed).await;
    assert_problem(reverse(&app, &merchant, &failed).await, 409, "conflict").await;
    let stranger = app.merchant().await;
    assert_problem(reverse(&app, &stranger, &key).await, 404, "not-found").await;
}

#[actix_web::test]
async fn a_pending_reversal_answers_202_and_finishes_later() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let key = create(&app, &merchant, push(&usd, "4.00", "tok_visa")).await;
    settled(&app, &merchant, &key).await;
    fault(
        &app,
        json!({"target": "card_push", "match": {}, "mode": "reversal_pending", "count": 1}),
    )
    .await;
    let response = reverse(&app, &merchant, &key).await;
    let problem = assert_problem(response, 202, "reversal-pending").await;
    assert!(problem["detail"].is_string());
    assert_eq!(
        settlement(&app, &merchant, &key).await["status"],
        "succeeded"
    );
    let second = reverse(&app, &merchant, &key).await;
    assert_problem(second, 409, "conflict").await;
    let done = settled_as(&app, &merchant, &key, "reversed").await;
    assert_eq!(done["status"], "reversed");
    assert_eq!(account(&app, &merchant, &usd).await["balance_minor"], 1_000);
}

async fn settled_as(app: &TestApp, merchant: &Merchant, key: &str, status: &str) -> Value {
    let started = std::time::Instant::now();
    loop {
        let body = settlement(app, merchant, key).await;
        if body["status"] == status {
            return body;
        }
        assert!(started.elapsed() < WAIT_MAX, "never {status}: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[actix_web::test]
async fn reads_and_lists_are_the_merchants_own() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let push_key = create(&app, &merchant, push(&usd, "1.00", "tok_visa")).await;
    settled(&app, &merchant, &push_key).await;
    let stranger = app.merchant().await;
    let response = app
        .get(&format!("/v1/settlements/{push_key}"))
        .bearer_auth(&stranger.api_key)
        .send()
        .await
        .expect("request");
    assert_problem(response, 404, "not-found").await;
    assert_eq!(list(&app, &stranger, "").await["count"], 0);

    let all = list(&app, &merchant, "").await;
    assert_eq!(all["count"], 2);
    assert_eq!(all["limit"], 50);
    assert_eq!(
        all["items"][0]["idempotency_key"],
        push_key.as_str(),
        "newest first"
    );
    let one = list(&app, &merchant, "?limit=1&status=succeeded").await;
    assert_eq!(
        (one["count"].as_u64(), one["status"].as_str()),
        (Some(1), Some("succeeded"))
    );
    assert_eq!(list(&app, &merchant, "?status=failed").await["count"], 0);
    for query in [
        "?limit=0",
        "?limit=201",
        "?limit=ten",
        "?status=done",
        "?colour=red",
    ] {
        let response = app
            .get(&format!("/v1/settlements{query}"))
            .bearer_auth(&merchant.api_key)
            .send()
            .await
            .expect("request");
        assert_problem(response, 422, "validation-error").await;
    }
    // Scopes: a read-only key can read but not create or reverse.
    let reader = app.key_with_scopes(&merchant, &["settlements:read"]).await;
    let created = app
        .post_with_key(
            "/v1/settlements",
            &reader,
            &Uuid::new_v4().to_string(),
            &push(&usd, "1.00", "tok_visa"),
        )
        .await;
    assert_problem(created, 403, "insufficient-scope").await;
    let reversed = app
        .post(&format!("/v1/settlements/{push_key}/reverse"))
        .bearer_auth(&reader)
        .json(&json!({"reason": "x"}))
        .send()
        .await
        .expect("request");
    assert_problem(reversed, 403, "insufficient-scope").await;
}

/// Every bad request answers its problem document and stores nothing: no
/// settlement, no hold, no idempotency record (the same key then works).
#[actix_web::test]
async fn bad_requests_store_nothing() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let stranger = app.merchant().await;
    let strangers_usd = funding_account(&app, &stranger, "USD").await;
    let eur = funding_account(&app, &merchant, "EUR").await;
    let good = push(&usd, "1.00", "tok_visa");
    let with = |field: &str, value: Value| {
        let mut body = good.clone();
        body[field] = value;
        body
    };
    let cases: Vec<(Value, &str)> = vec![
        (
            with("amount", json!({"amount": "1.001", "currency": "USD"})),
            "amount.amount",
        ),
        (
            with("amount", json!({"amount": "0.00", "currency": "USD"})),
            "amount.amount",
        ),
        (
            with("amount", json!({"amount": "-1.00", "currency": "USD"})),
            "amount.amount",
        ),
        (
            with("amount", json!({"amount": "1e3", "currency": "USD"})),
            "amount.amount",
        ),
        (
            with(
                "amount",
                json!({"amount": "92233720368547758.08", "currency": "USD"}),
            ),
            "amount.amount",
        ),
        (
            with("amount", json!({"amount": "1", "currency": "usd"})),
            "amount.currency",
        ),
        (
            with("amount", json!({"amount": "1", "currency": "USDT"})),
            "amount.currency",
        ),
        (
            with("amount", json!({"amount": 1, "currency": "USD"})),
            "amount.amount",
        ),
        (with("method", json!("wire")), "method"),
        (with("recipient_name", json!("  ")), "recipient_name"),
        (with("destination", json!("")), "destination"),
        (with("source", json!(strangers_usd)), "source"),
        (with("source", json!("acct_nope")), "source"),
        (with("source", json!(eur)), "source"),
        (
            with("amount", json!({"amount": "10.01", "currency": "USD"})),
            "amount",
        ),
        (with("asset", json!("USDT")), "asset"),
        (with("colour", json!("red")), "colour"),
        (
            json!({"method": "on_chain", "amount": {"amount": "1.00", "currency": "USD"}, "source": usd,
            "destination": "0x52908400098527886E0F7030069857D2E4169EE7", "recipient_name": "Ada"}),
            "destination",
        ),
        (
            json!({"method": "on_chain", "amount": {"amount": "1.00", "currency": "USD"}, "source": usd,
            "destination": "ethereum:0x52908400098527886e0F7030069857D2E4169EE7", "recipient_name": "Ada"}),
            "destination",
        ),
        (
            json!({"method": "on_chain", "amount": {"amount": "1.00", "currency": "USD"}, "source": usd,
            "destination": "solana:0x52908400098527886E0F7030069857D2E4169EE7", "recipient_name": "Ada"}),
            "destination",
        ),
        (
            json!({"method": "on_chain", "amount": {"amount": "1.00", "currency": "EUR"}, "source": eur,
            "destination": "tron:TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7", "recipient_name": "Ada"}),
            "amount.currency",
        ),
    ];
    let key = Uuid::new_v4().to_string();
    for (body, field) in cases {
        let response = app
            .post_with_key("/v1/settlements", &merchant.api_key, &key, &body)
            .await;
        let problem = assert_problem(response, 422, "validation-error").await;
        assert!(problem["errors"][field].is_string(), "{field}: {problem}");
    }
    // Malformed JSON, another media type, a huge body.
    let raw = |body: &'static str, content_type: &'static str| {
        app.post("/v1/settlements")
            .bearer_auth(&merchant.api_key)
            .header("Idempotency-Key", &key)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    assert_problem(
        raw("{\"method\":", "application/json")
            .await
            .expect("request"),
        400,
        "malformed-json",
    )
    .await;
    assert_problem(
        raw("method=card_push", "application/x-www-form-urlencoded")
            .await
            .expect("request"),
        415,
        "unsupported-media-type",
    )
    .await;
    let huge = app
        .post("/v1/settlements")
        .bearer_auth(&merchant.api_key)
        .header("Idempotency-Key", &key)
        .header("content-type", "application/json")
        .body(format!("{{\"reference\": \"{}\"}}", "x".repeat(70 * 1024)))
        .send()
        .await
        .expect("request");
    assert_problem(huge, 413, "payload-too-large").await;

    assert_eq!(
        list(&app, &merchant, "").await["count"],
        1,
        "only the funding charge"
    );
    let usd_account = account(&app, &merchant, &usd).await;
    assert_eq!(
        (
            usd_account["available_minor"].as_i64(),
            usd_account["pending_minor"].as_i64()
        ),
        (Some(1_000), Some(0))
    );
    // The key was never spent.
    let response = app
        .post_with_key("/v1/settlements", &merchant.api_key, &key, &good)
        .await;
    assert_eq!(response.status(), 201);
    assert!(response.headers().get("idempotent-replayed").is_none());
}

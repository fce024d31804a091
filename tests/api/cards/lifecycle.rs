//! Issuance, the card status table, replacement, limits and bad input, with
//! an API key naming the user.

use serde_json::{json, Value};

use crate::helpers::cards::{get_card, issue, json_of, operate, patch_limits, send};
use crate::helpers::settlements::fault;
use crate::helpers::{assert_problem, RequestExt, TestApp};

#[actix_web::test]
async fn a_machine_caller_issues_a_card_for_a_user_of_its_merchant() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    let response = send(
        &app,
        &merchant.api_key,
        "POST",
        "/v1/cards",
        Some(json!({"user_id": user, "display_name": "Groceries"})),
    )
    .await;
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let card = json_of(response, 201).await;
    let id = card["id"].as_str().expect("id");
    assert!(id.starts_with("card_"), "{card}");
    assert_eq!(
        location.as_deref(),
        Some(format!("/v1/cards/{id}").as_str())
    );
    assert_eq!(card["status"], "active");
    assert_eq!(card["program_id"], "SVC_VIRTUAL_USD");
    assert_eq!(card["type"], "virtual");
    assert_eq!(card["network"], "visa");
    assert_eq!(card["currency"], "USD");
    assert_eq!(card["currency_symbol"], "$");
    assert_eq!(card["cardholder"], "Test User");
    assert_eq!(card["display_name"], "Groceries");
    assert_eq!(card["wallet_status"], "none");
    assert_eq!(card["wallet"]["apple_pay"]["status"], "none");
    assert_eq!(card["wallet"]["google_pay"]["status"], "none");
    assert_eq!(card["card_art"], "tern_virtual_usd");
    let last_four = card["last_four"].as_str().expect("last_four");
    assert!(
        last_four.len() == 4 && last_four.chars().all(|c| c.is_ascii_digit()),
        "{card}"
    );
    assert_eq!(card["display_label"], format!("Visa **** {last_four}"));
    assert!((1..=12).contains(&card["expiry_month"].as_i64().expect("month")));
    assert!(card["expiry_year"].as_i64().expect("year") >= 2026);
    assert_eq!(card["limits"]["online_enabled"], true);
    assert_eq!(card["limits"]["atm_enabled"], false);
    assert_eq!(card["balance_minor"], 0);
    assert_eq!(card["hold_minor"], 0);
    // Never a PAN or CVV.
    assert!(card.get("pan").is_none() && card.get("cvv").is_none());

    assert_eq!(get_card(&app, &merchant, id).await["id"], id);
    let listed = json_of(
        send(
            &app,
            &merchant.api_key,
            "GET",
            &format!("/v1/cards?user_id={user}"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(listed["data"].as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed["data"][0]["id"], id);

    // Without a session and without user_id there is no one to list for.
    assert_problem(
        send(&app, &merchant.api_key, "GET", "/v1/cards", None).await,
        401,
        "unauthorized",
    )
    .await;

    // One live virtual card per user.
    let again = send(
        &app,
        &merchant.api_key,
        "POST",
        "/v1/cards",
        Some(json!({"user_id": user})),
    )
    .await;
    let problem = assert_problem(again, 409, "conflict").await;
    assert_eq!(problem["code"], "ACTIVE_CARD_ALREADY_EXISTS");

    // The simulator executed one issue for the card.
    let executions: Value = app
        .client
        .get(format!("{}/control/executions", app.sandbox()))
        .read_json()
        .await;
    let issues = executions["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|e| e["target"] == "issuer" && e["key"] == id)
        .count();
    assert_eq!(issues, 1, "{executions}");
}

#[actix_web::test]
async fn programs_set_network_currency_and_the_legacy_alias_maps_to_the_default() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let legacy = issue(
        &app,
        &merchant,
        &app.user(&merchant).await,
        json!({"program_id": "SVC_VIRTUAL"}),
    )
    .await;
    assert_eq!(legacy["program_id"], "SVC_VIRTUAL_USD");
    assert_eq!(legacy["network"], "visa");
    let eur = issue(
        &app,
        &merchant,
        &app.user(&merchant).await,
        json!({"program_id": "SVC_VIRTUAL_EUR"}),
    )
    .await;
    assert_eq!(
        (eur["network"].as_str(), eur["currency"].as_str()),
        (Some("mastercard"), Some("EUR"))
    );
    assert!(eur["display_label"]
        .as_str()
        .is_some_and(|l| l.starts_with("Mastercard **** ")));
    let business = issue(&app, &merchant, &app.user(&merchant).await, json!({"program_id": "SVC_BUSINESS", "currency": "GBP", "type": "physical", "cardholder": "Grace Hopper"})).await;
    assert_eq!(business["currency"], "GBP");
    assert_eq!(business["type"], "physical");
    assert_eq!(business["cardholder"], "Grace Hopper");
    assert_eq!(business["limits"]["atm_enabled"], true);
}

#[actix_web::test]
async fn the_card_status_table_holds_row_by_row() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let card = issue(&app, &merchant, &app.user(&merchant).await, json!({})).await;
    let id = card["id"].as_str().expect("id");
    let expect = |status: u16, response| async move { json_of(response, status).await };

    let frozen = expect(200, operate(&app, &merchant, id, "freeze").await).await;
    assert_eq!(frozen["status"], "frozen");
    let twice = assert_problem(
        operate(&app, &merchant, id, "freeze").await,
        409,
        "conflict",
    )
    .await;
    assert_eq!(twice["code"], "CARD_ALREADY_FROZEN");
    let active = expect(200, operate(&app, &merchant, id, "unfreeze").await).await;
    assert_eq!(active["status"], "active");
    let not_frozen = assert_problem(
        operate(&app, &merchant, id, "unfreeze").await,
        409,
        "conflict",
    )
    .await;
    assert_eq!(not_frozen["code"], "CARD_NOT_FROZEN");

    let closed = expect(200, operate(&app, &merchant, id, "close").await).await;
    assert_eq!(closed["status"], "closed");
    // Close is idempotent; anything else on a closed card is CARD_CLOSED.
    assert_eq!(
        expect(200, operate(&app, &merchant, id, "close").await).await["status"],
        "closed"
    );
    for operation in ["freeze", "unfreeze", "replace"] {
        let refused = assert_problem(
            operate(&app, &merchant, id, operation).await,
            409,
            "conflict",
        )
        .await;
        assert_eq!(refused["code"], "CARD_CLOSED", "{operation}");
    }
    let rename = send(
        &app,
        &merchant.api_key,
        "PATCH",
        &format!("/v1/cards/{id}"),
        Some(json!({"display_name": "x"})),
    )
    .await;
    assert_eq!(
        assert_problem(rename, 409, "conflict").await["code"],
        "CARD_CLOSED"
    );
    let limits = patch_limits(&app, &merchant, id, json!({"daily_spend_minor": 1})).await;
    assert_eq!(
        assert_problem(limits, 409, "conflict").await["code"],
        "CARD_CLOSED"
    );
    assert_eq!(get_card(&app, &merchant, id).await["status"], "closed");

    // With the card closed, the user may have a new one.
    let user = card["user_id"].as_str().expect("user");
    issue(&app, &merchant, user, json!({})).await;

    // Each change is in the merchant's audit chain, by the key that made it,
    // once: the repeated close and the refusals wrote nothing.
    let audit = json_of(
        send(
            &app,
            &merchant.api_key,
            "GET",
            "/v1/audit/events?limit=200",
            None,
        )
        .await,
        200,
    )
    .await;
    let actions: Vec<&str> = audit["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|e| e["resource_id"] == id)
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions,
        ["card.closed", "card.unfrozen", "card.frozen", "card.issued"],
        "{audit}"
    );
    assert!(audit["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|e| e["resource_id"] == id && e["action"] != "card.issued")
        .all(|e| e["actor_id"] == merchant.api_key_id.as_str()));
    let verified = json_of(
        send(&app, &merchant.api_key, "GET", "/v1/audit/verify", None).await,
        200,
    )
    .await;
    assert_eq!(verified["valid"], true);
}

#[actix_web::test]
async fn replace_blocks_the_old_card_and_issues_a_new_one() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    let old = issue(&app, &merchant, &user, json!({"display_name": "Travel"})).await;
    let old_id = old["id"].as_str().expect("id");
    patch_limits(
        &app,
        &merchant,
        old_id,
        json!({"per_transaction_minor": 10000, "daily_spend_minor": 12345}),
    )
    .await;
    let response = send(
        &app,
        &merchant.api_key,
        "POST",
        &format!("/v1/cards/{old_id}/replace"),
        Some(json!({"reason": "lost"})),
    )
    .await;
    let new = json_of(response, 200).await;
    assert_ne!(new["id"], old["id"]);
    assert_eq!(new["status"], "active");
    assert_eq!(new["display_name"], "Travel");
    assert_eq!(new["limits"]["daily_spend_minor"], 12345);
    assert_eq!(new["replaces_card_id"], old_id);
    let old = get_card(&app, &merchant, old_id).await;
    assert_eq!(old["status"], "blocked");
    assert_eq!(old["replaced_by_card_id"], new["id"]);
    // A blocked card is neither frozen nor unfrozen.
    let code = |body: Value| body["code"].as_str().map(str::to_owned);
    assert_eq!(
        code(
            assert_problem(
                operate(&app, &merchant, old_id, "freeze").await,
                409,
                "conflict"
            )
            .await
        )
        .as_deref(),
        Some("CARD_BLOCKED")
    );
    assert_eq!(
        code(
            assert_problem(
                operate(&app, &merchant, old_id, "unfreeze").await,
                409,
                "conflict"
            )
            .await
        )
        .as_deref(),
        Some("CARD_NOT_FROZEN")
    );
    // The replacement is the user's live card.
    let again = send(
        &app,
        &merchant.api_key,
        "POST",
        "/v1/cards",
        Some(json!({"user_id": user})),
    )
    .await;
    assert_eq!(
        code(assert_problem(again, 409, "conflict").await).as_deref(),
        Some("ACTIVE_CARD_ALREADY_EXISTS")
    );
    // A blocked card may still be closed.
    assert_eq!(
        json_of(operate(&app, &merchant, old_id, "close").await, 200).await["status"],
        "closed"
    );
}

#[actix_web::test]
async fn an_issuer_failure_is_502_and_leaves_nothing_half_made() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    fault(
        &app,
        json!({"target": "issuer", "match": {"user_id": user}, "mode": "fail", "count": 1}),
    )
    .await;
    let failed = send(
        &app,
        &merchant.api_key,
        "POST",
        "/v1/cards",
        Some(json!({"user_id": user})),
    )
    .await;
    assert_problem(failed, 502, "issuer-unavailable").await;
    let listed = json_of(
        send(
            &app,
            &merchant.api_key,
            "GET",
            &format!("/v1/cards?user_id={user}"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(listed["data"], json!([]));
    // Nothing blocks the next attempt.
    let card = issue(&app, &merchant, &user, json!({})).await;

    // A replacement the issuer refuses leaves the old card as it was.
    let id = card["id"].as_str().expect("id");
    fault(
        &app,
        json!({"target": "issuer", "match": {"user_id": user}, "mode": "fail", "count": 1}),
    )
    .await;
    let refused = operate(&app, &merchant, id, "replace").await;
    assert_problem(refused, 502, "issuer-unavailable").await;
    let after = get_card(&app, &merchant, id).await;
    assert_eq!(after["status"], "active");
    assert_eq!(after["replaced_by_card_id"], Value::Null);
    let listed = json_of(
        send(
            &app,
            &merchant.api_key,
            "GET",
            &format!("/v1/cards?user_id={user}"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(listed["data"].as_array().map(Vec::len), Some(1));
}

#[actix_web::test]
async fn limits_merge_and_out_of_order_or_out_of_bounds_limits_are_422() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let card = issue(&app, &merchant, &app.user(&merchant).await, json!({})).await;
    let id = card["id"].as_str().expect("id");
    let before = json_of(
        send(
            &app,
            &merchant.api_key,
            "GET",
            &format!("/v1/cards/{id}/limits"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(before, card["limits"]);

    let merged = json_of(
        patch_limits(
            &app,
            &merchant,
            id,
            json!({"per_transaction_minor": 10000, "daily_spend_minor": 20000, "online_enabled": false}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(merged["daily_spend_minor"], 20000);
    assert_eq!(merged["online_enabled"], false);
    assert_eq!(merged["monthly_spend_minor"], before["monthly_spend_minor"]);
    assert_eq!(merged["per_transaction_minor"], 10000);
    assert_eq!(merged["atm_daily_minor"], before["atm_daily_minor"]);
    assert_eq!(
        merged["international_enabled"],
        before["international_enabled"]
    );
    // Equal limits are in order; null removes one.
    let equal = json_of(
        patch_limits(
            &app,
            &merchant,
            id,
            json!({"per_transaction_minor": 20000, "monthly_spend_minor": null}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(equal["per_transaction_minor"], 20000);
    assert_eq!(equal["monthly_spend_minor"], Value::Null);

    let cases = [
        (
            json!({"per_transaction_minor": 20001}),
            "per_transaction_minor",
        ),
        (
            json!({"daily_spend_minor": 100, "monthly_spend_minor": 99}),
            "daily_spend_minor",
        ),
        (json!({"atm_daily_minor": -1}), "atm_daily_minor"),
        (
            json!({"monthly_spend_minor": 1_000_000_000_001i64}),
            "monthly_spend_minor",
        ),
        (json!({"daily_spend_minor": "10"}), "daily_spend_minor"),
        (json!({"online_enabled": "yes"}), "online_enabled"),
        (json!({"spend_everything": true}), "spend_everything"),
    ];
    for (body, field) in cases {
        let problem = assert_problem(
            patch_limits(&app, &merchant, id, body.clone()).await,
            422,
            "validation-error",
        )
        .await;
        assert!(
            problem["errors"].get(field).is_some(),
            "{body} -> {problem}"
        );
    }
    let unchanged = json_of(
        send(
            &app,
            &merchant.api_key,
            "GET",
            &format!("/v1/cards/{id}/limits"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(unchanged, equal);
}

/// Decisions §10: a program default never makes a PATCH fail; the order
/// rule holds among the values the merchant set, and the effective
/// per-transaction limit is never above the daily one.
#[actix_web::test]
async fn program_default_limits_never_make_a_limits_patch_fail() {
    let app = TestApp::spawn().await;
    let (merchant, card) = crate::helpers::cards::funded_card(&app, "1000.00").await;
    let id = card.as_str();
    let before = get_card(&app, &merchant, id).await["limits"].clone();
    assert!(
        before["per_transaction_minor"].as_i64() > Some(50_000),
        "the program's default is above the new daily limit: {before}"
    );

    let limits = json_of(
        patch_limits(
            &app,
            &merchant,
            id,
            json!({"daily_spend_minor": 50000, "monthly_spend_minor": 500000}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(limits["daily_spend_minor"], 50_000, "{limits}");
    assert_eq!(limits["monthly_spend_minor"], 500_000, "{limits}");
    assert_eq!(limits["per_transaction_minor"], 50_000, "{limits}");
    assert_eq!(limits["atm_daily_minor"], before["atm_daily_minor"]);
    // What authorizations are decided against is what GET shows.
    let declined = crate::helpers::cards::authorize(&app, id, 50_001).await;
    assert_eq!(
        declined["reason"], "per_transaction_limit_exceeded",
        "{declined}"
    );
    assert_eq!(
        crate::helpers::cards::authorize(&app, id, 50_000).await["approved"],
        true
    );

    // The merchant's own values still must be in order.
    let problem = assert_problem(
        patch_limits(&app, &merchant, id, json!({"per_transaction_minor": 60000})).await,
        422,
        "validation-error",
    )
    .await;
    assert!(
        problem["errors"].get("per_transaction_minor").is_some(),
        "{problem}"
    );
    // A higher daily limit lets the default per-transaction one back up to
    // its own value, never above the new daily.
    let raised = json_of(
        patch_limits(&app, &merchant, id, json!({"daily_spend_minor": 200000})).await,
        200,
    )
    .await;
    assert_eq!(raised["per_transaction_minor"], 200_000, "{raised}");
    let raised = json_of(
        patch_limits(&app, &merchant, id, json!({"daily_spend_minor": 500000})).await,
        200,
    )
    .await;
    assert_eq!(
        raised["per_transaction_minor"], before["per_transaction_minor"],
        "{raised}"
    );
}

#[actix_web::test]
async fn bad_card_requests_get_their_problem_and_store_nothing() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let other = app.merchant().await;
    let user = app.user(&merchant).await;
    let cases = [
        (
            json!({"user_id": user, "program_id": "SVC_GOLD"}),
            "program_id",
        ),
        (json!({"user_id": user, "type": "metal"}), "type"),
        (
            json!({"user_id": user, "program_id": "SVC_VIRTUAL_EUR", "currency": "USD"}),
            "currency",
        ),
        (
            json!({"user_id": user, "program_id": "SVC_PREPAID", "currency": "USDT"}),
            "currency",
        ),
        (json!({"user_id": user, "display_name": ""}), "display_name"),
        (json!({"user_id": user, "color": "red"}), "color"),
        (json!({"user_id": 7}), "user_id"),
        (json!({}), "user_id"),
        (json!({"user_id": "not-a-uuid"}), "user_id"),
    ];
    for (body, field) in cases {
        let response = send(
            &app,
            &merchant.api_key,
            "POST",
            "/v1/cards",
            Some(body.clone()),
        )
        .await;
        let problem = assert_problem(response, 422, "validation-error").await;
        assert!(
            problem["errors"].get(field).is_some(),
            "{body} -> {problem}"
        );
    }
    let malformed = app
        .post("/v1/cards")
        .bearer_auth(&merchant.api_key)
        .header("content-type", "application/json")
        .body("{\"user_id\": ")
        .send()
        .await
        .expect("request");
    assert_problem(malformed, 400, "malformed-json").await;
    // Another merchant's user is not found.
    let foreign = send(
        &app,
        &other.api_key,
        "POST",
        "/v1/cards",
        Some(json!({"user_id": user})),
    )
    .await;
    assert_problem(foreign, 404, "not-found").await;
    let listed = json_of(
        send(
            &app,
            &merchant.api_key,
            "GET",
            &format!("/v1/cards?user_id={user}"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(listed["data"], json!([]));

    // Another merchant's card is 404 everywhere.
    let card = issue(&app, &merchant, &user, json!({})).await;
    let id = card["id"].as_str().expect("id");
    for (method, path) in [
        ("GET", format!("/v1/cards/{id}")),
        ("GET", format!("/v1/cards/{id}/balance")),
        ("GET", format!("/v1/cards/{id}/limits")),
        ("GET", format!("/v1/cards/{id}/events")),
        ("GET", format!("/v1/cards/{id}/transactions")),
        ("POST", format!("/v1/cards/{id}/freeze")),
        ("POST", format!("/v1/cards/{id}/close")),
        ("POST", format!("/v1/cards/{id}/replace")),
    ] {
        assert_problem(
            send(&app, &other.api_key, method, &path, None).await,
            404,
            "not-found",
        )
        .await;
    }
    assert_eq!(get_card(&app, &merchant, id).await["status"], "active");

    // Scopes: a read-only key reads but does not write.
    let reader = app.key_with_scopes(&merchant, &["cards:read"]).await;
    assert_eq!(
        send(&app, &reader, "GET", &format!("/v1/cards/{id}"), None)
            .await
            .status(),
        200
    );
    let problem = assert_problem(
        send(
            &app,
            &reader,
            "POST",
            &format!("/v1/cards/{id}/freeze"),
            None,
        )
        .await,
        403,
        "insufficient-scope",
    )
    .await;
    assert!(problem["detail"]
        .as_str()
        .is_some_and(|d| d.contains("cards:write")));
    let none = app.key_with_scopes(&merchant, &["settlements:read"]).await;
    assert_problem(
        send(&app, &none, "GET", &format!("/v1/cards/{id}"), None).await,
        403,
        "insufficient-scope",
    )
    .await;
    // No credential at all.
    assert_problem(
        app.get(&format!("/v1/cards/{id}"))
            .send()
            .await
            .expect("request"),
        401,
        "unauthorized",
    )
    .await;
}

#[actix_web::test]
async fn card_art_lists_every_design_cards_wear() {
    let app = TestApp::spawn().await;
    let art = json_of(app.get("/v1/card-art").send().await.expect("request"), 200).await;
    let ids: Vec<&str> = art["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert!(ids.contains(&"tern_virtual_usd"), "{art}");
    assert!(art["data"]
        .as_array()
        .expect("data")
        .iter()
        .all(|a| a["title"].as_str().is_some_and(|t| !t.is_empty())));
}

//! The request side of transfers: every refused request (and that it
//! stores nothing), the Idempotency-Key, lists and their windows, merchant
//! isolation on every endpoint, scopes.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use uuid::Uuid;

use crate::helpers::settlements::{settlement, settlement_response};
use crate::helpers::transfers::{
    app, assert_executions, body, create, eur_quote, fast_retries, finished, get, id, leg_key,
    list, quote, total, EVM_WALLET, TRON_WALLET,
};
use crate::helpers::{assert_problem, TestApp};

/// Asserts a 422 whose `errors` names `field`.
async fn assert_field_error(response: reqwest::Response, field: &str, context: &str) {
    let problem = assert_problem(response, 422, "validation-error").await;
    assert!(
        problem["errors"][field].is_string(),
        "{context}: errors.{field} expected in {problem}"
    );
}

/// EIP-55 with the case of its first letter flipped: a bad checksum.
fn flipped_case(address: &str) -> String {
    let mut chars: Vec<char> = address.chars().collect();
    let at = (2..chars.len())
        .find(|&i| chars[i].is_ascii_alphabetic())
        .expect("a letter");
    chars[at] = if chars[at].is_ascii_uppercase() {
        chars[at].to_ascii_lowercase()
    } else {
        chars[at].to_ascii_uppercase()
    };
    chars.into_iter().collect()
}

#[actix_web::test]
async fn refused_requests_store_nothing_and_free_their_key() {
    let app = app().await;
    let merchant = app.merchant().await;
    let bob = app.merchant().await;
    let polygon = eur_quote(&app, &merchant).await;
    let tron = quote(&app, &merchant, ("USD", "50.00", "USDT", "tron")).await;
    let good = body(&polygon, "pm_card_visa", EVM_WALLET);
    let key = Uuid::new_v4().to_string();
    let api_key = merchant.api_key.as_str();

    // The Idempotency-Key: missing, not a UUID, a UUID but not v4.
    let response = app
        .post("/v1/transfers")
        .bearer_auth(api_key)
        .json(&good)
        .send()
        .await
        .expect("request");
    assert_problem(response, 400, "invalid-idempotency-key").await;
    for bad_key in ["not-a-uuid", "", "0192f1c4-7d2a-7c3e-9b1a-3f6e2d1c0b9a"] {
        let response = app
            .post_with_key("/v1/transfers", api_key, bad_key, &good)
            .await;
        assert_problem(response, 400, "invalid-idempotency-key").await;
    }
    // Not JSON at all.
    let response = app
        .post("/v1/transfers")
        .bearer_auth(api_key)
        .header("Idempotency-Key", &key)
        .header("content-type", "application/json")
        .body("{\"flow\": \"tern\",")
        .send()
        .await
        .expect("request");
    assert_problem(response, 400, "malformed-json").await;

    let with = |field: &str, value: Value| {
        let mut changed = good.clone();
        changed[field] = value;
        changed
    };
    let mut unknown = good.clone();
    unknown["fee"] = json!("0.00");
    let mut missing = good.clone();
    missing.as_object_mut().expect("object").remove("wallet");
    let mut tron_body = body(&tron, "pm_card_visa", TRON_WALLET);
    let cases: Vec<(Value, &str, &str)> = vec![
        (unknown, "fee", "an unknown field"),
        (missing, "wallet", "a missing field"),
        (with("flow", json!("classic")), "flow", "another flow"),
        (
            with("network", json!("ethereum")),
            "network",
            "not the quote's network",
        ),
        (
            with("asset", json!("USDT")),
            "asset",
            "not the quote's asset",
        ),
        (
            with("network", json!("solana")),
            "network",
            "an unknown network",
        ),
        (
            with("wallet", json!(flipped_case(EVM_WALLET))),
            "wallet",
            "a bad EIP-55 checksum",
        ),
        (
            with("wallet", json!(&EVM_WALLET[..41])),
            "wallet",
            "an EVM wallet too short",
        ),
        (
            with("wallet", json!(TRON_WALLET)),
            "wallet",
            "a tron wallet on polygon",
        ),
        (with("card_pm", json!("")), "card_pm", "an empty card_pm"),
        (
            with("quote_id", json!(5)),
            "quote_id",
            "a quote_id of the wrong type",
        ),
        (
            {
                tron_body["wallet"] = json!(TRON_WALLET.replace("8q8", "8q9"));
                tron_body.clone()
            },
            "wallet",
            "a bad tron checksum",
        ),
        (
            {
                tron_body["wallet"] = json!(&TRON_WALLET[..33]);
                tron_body.clone()
            },
            "wallet",
            "a tron wallet too short",
        ),
        (
            {
                tron_body["wallet"] = json!(EVM_WALLET);
                tron_body.clone()
            },
            "wallet",
            "an EVM wallet on tron",
        ),
    ];
    for (request, field, context) in &cases {
        let response = app
            .post_with_key("/v1/transfers", api_key, &key, request)
            .await;
        assert_field_error(response, field, context).await;
    }

    // Quotes that cannot be used: unknown, another merchant's.
    let response = app
        .post_with_key(
            "/v1/transfers",
            api_key,
            &key,
            &with("quote_id", json!("qt_unknown")),
        )
        .await;
    assert_problem(response, 404, "not-found").await;
    let bobs = eur_quote(&app, &bob).await;
    let response = app
        .post_with_key(
            "/v1/transfers",
            api_key,
            &key,
            &body(&bobs, "pm_card_visa", EVM_WALLET),
        )
        .await;
    assert_problem(response, 404, "not-found").await;
    assert_eq!(total(&app, &merchant).await, 0, "nothing stored");

    // The same key, corrected, creates the transfer.
    let response = app
        .post_with_key("/v1/transfers", api_key, &key, &good)
        .await;
    let status = response.status();
    let created: Value = response.json().await.expect("json");
    assert_eq!(status, 201, "{created}");
    assert_eq!(total(&app, &merchant).await, 1);

    // A second transfer on the same quote, whatever the key.
    let other_key = Uuid::new_v4().to_string();
    let response = app
        .post_with_key("/v1/transfers", api_key, &other_key, &good)
        .await;
    let problem = assert_problem(response, 409, "conflict").await;
    assert_eq!(problem["code"], "QUOTE_ALREADY_USED", "{problem}");
    let response = app
        .post_with_key(
            "/v1/transfers",
            api_key,
            &Uuid::new_v4().to_string(),
            &body(&polygon, "pm_card_mastercard", EVM_WALLET),
        )
        .await;
    let problem = assert_problem(response, 409, "conflict").await;
    assert_eq!(problem["code"], "QUOTE_ALREADY_USED", "{problem}");
    assert_eq!(total(&app, &merchant).await, 1, "nothing more stored");
    // The refused key was not kept: it still serves another quote.
    let fresh = eur_quote(&app, &merchant).await;
    let response = app
        .post_with_key(
            "/v1/transfers",
            api_key,
            &other_key,
            &body(&fresh, "pm_card_visa", EVM_WALLET),
        )
        .await;
    assert_eq!(response.status(), 201);
    assert_eq!(total(&app, &merchant).await, 2);
    assert_eq!(total(&app, &bob).await, 0);

    let done = finished(&app, &merchant, &id(&created)).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_executions(&app, &leg_key(&done, 1), &[("acquirer", "charge")]).await;
}

#[actix_web::test]
async fn an_expired_quote_is_410_and_stores_nothing() {
    const TTL: Duration = Duration::from_secs(1);
    let app = TestApp::spawn_with(|config| {
        fast_retries(config);
        config.quote_ttl = TTL;
    })
    .await;
    let merchant = app.merchant().await;
    let quote = eur_quote(&app, &merchant).await;
    let quote_id = quote["quote_id"].as_str().expect("quote_id");
    // Until the quote reads as expired (410) to its owner.
    let started = Instant::now();
    while app
        .get(&format!("/v1/quotes/{quote_id}"))
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request")
        .status()
        != 410
    {
        assert!(started.elapsed() < Duration::from_secs(20), "never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let key = Uuid::new_v4().to_string();
    let request = body(&quote, "pm_card_visa", EVM_WALLET);
    let response = app
        .post_with_key("/v1/transfers", &merchant.api_key, &key, &request)
        .await;
    let problem = assert_problem(response, 410, "gone").await;
    assert_eq!(problem["code"], "QUOTE_EXPIRED", "{problem}");
    assert_eq!(total(&app, &merchant).await, 0);
    // The key is free for a fresh quote (used at once, within its life).
    let fresh = eur_quote(&app, &merchant).await;
    let response = app
        .post_with_key(
            "/v1/transfers",
            &merchant.api_key,
            &key,
            &body(&fresh, "pm_card_visa", EVM_WALLET),
        )
        .await;
    assert_eq!(response.status(), 201);
    assert_eq!(total(&app, &merchant).await, 1);
}

#[actix_web::test]
async fn a_repeated_key_replays_and_another_body_under_it_is_422() {
    let app = app().await;
    let merchant = app.merchant().await;
    let quote = eur_quote(&app, &merchant).await;
    let request = body(&quote, "pm_card_visa", EVM_WALLET);
    let key = Uuid::new_v4().to_string();
    let first = app
        .post_with_key("/v1/transfers", &merchant.api_key, &key, &request)
        .await;
    assert_eq!(first.status(), 201);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let location = first.headers()["location"].clone();
    let created: Value = first.json().await.expect("json");
    // The saga moves on; the replay answers what the first request did.
    let done = finished(&app, &merchant, &id(&created)).await;
    assert_eq!(done["status"], "succeeded", "{done}");

    let again = app
        .post_with_key("/v1/transfers", &merchant.api_key, &key, &request)
        .await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.headers()["location"], location);
    let replayed: Value = again.json().await.expect("json");
    assert_eq!(replayed, created, "the original body");

    let mut other = request.clone();
    other["card_pm"] = json!("pm_card_mastercard");
    let response = app
        .post_with_key("/v1/transfers", &merchant.api_key, &key, &other)
        .await;
    assert_field_error(response, "Idempotency-Key", "the key with another body").await;
    assert_eq!(total(&app, &merchant).await, 1);
    assert_executions(&app, &leg_key(&done, 1), &[("acquirer", "charge")]).await;
    assert_executions(&app, &leg_key(&done, 2), &[("custodian", "payout")]).await;
}

#[actix_web::test]
async fn twenty_concurrent_requests_with_one_key_make_one_transfer() {
    let app = app().await;
    let merchant = app.merchant().await;
    let quote = eur_quote(&app, &merchant).await;
    let request = body(&quote, "pm_card_visa", EVM_WALLET);
    let key = Uuid::new_v4().to_string();
    let requests =
        (0..20).map(|_| app.post_with_key("/v1/transfers", &merchant.api_key, &key, &request));
    let responses = futures_util::future::join_all(requests).await;
    let mut bodies = Vec::new();
    let mut originals = 0;
    for response in responses {
        match response.status().as_u16() {
            201 => {
                if response.headers().get("idempotent-replayed").is_none() {
                    originals += 1;
                }
                bodies.push(response.json::<Value>().await.expect("json"));
            }
            409 => {
                let problem = assert_problem(response, 409, "conflict").await;
                assert_eq!(problem["code"], "IDEMPOTENCY_KEY_IN_USE", "{problem}");
            }
            other => panic!(
                "unexpected {other}: {}",
                response.text().await.unwrap_or_default()
            ),
        }
    }
    assert!(!bodies.is_empty(), "at least one request answered 201");
    assert_eq!(originals, 1, "one request created it, the others replayed");
    assert!(
        bodies.windows(2).all(|pair| pair[0] == pair[1]),
        "every 201 is the same transfer: {bodies:?}"
    );
    let listed = list(&app, &merchant, "").await;
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(listed["items"][0]["id"], bodies[0]["id"]);
    let done = finished(&app, &merchant, &id(&bodies[0])).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_executions(&app, &leg_key(&done, 1), &[("acquirer", "charge")]).await;
    assert_executions(&app, &leg_key(&done, 2), &[("custodian", "payout")]).await;
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(id)
        .collect()
}

#[actix_web::test]
async fn lists_are_newest_first_filtered_and_windowed() {
    let app = app().await;
    let merchant = app.merchant().await;
    let mut created = Vec::new();
    for card_pm in [
        "pm_card_visa",
        "pm_card_chargeDeclined",
        "pm_card_visa",
        "pm_card_chargeDeclined",
        "pm_card_visa",
    ] {
        let transfer = create(&app, &merchant, card_pm).await;
        finished(&app, &merchant, &id(&transfer)).await;
        created.push(id(&transfer));
    }
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();

    let all = list(&app, &merchant, "").await;
    assert_eq!(ids(&all), newest_first);
    assert_eq!(
        (
            &all["count"],
            &all["total"],
            &all["offset"],
            &all["limit"],
            &all["has_more"]
        ),
        (&json!(5), &json!(5), &json!(0), &json!(50), &json!(false)),
        "{all}"
    );
    assert_eq!(all["status"], Value::Null);
    assert_eq!(
        all["items"][0],
        get(&app, &merchant, &newest_first[0]).await
    );

    let first = list(&app, &merchant, "?limit=2").await;
    assert_eq!(ids(&first), newest_first[..2]);
    assert_eq!(
        (&first["count"], &first["total"], &first["has_more"]),
        (&json!(2), &json!(5), &json!(true))
    );
    let middle = list(&app, &merchant, "?limit=2&offset=2").await;
    assert_eq!(ids(&middle), newest_first[2..4]);
    assert_eq!(
        (&middle["offset"], &middle["has_more"]),
        (&json!(2), &json!(true))
    );
    let last = list(&app, &merchant, "?limit=2&offset=4").await;
    assert_eq!(ids(&last), newest_first[4..]);
    assert_eq!(
        (&last["count"], &last["total"], &last["has_more"]),
        (&json!(1), &json!(5), &json!(false))
    );
    let beyond = list(&app, &merchant, "?offset=5").await;
    assert_eq!(
        (&beyond["count"], &beyond["total"], &beyond["has_more"]),
        (&json!(0), &json!(5), &json!(false))
    );

    let failed = list(&app, &merchant, "?status=failed").await;
    assert_eq!(
        ids(&failed),
        [newest_first[1].clone(), newest_first[3].clone()]
    );
    assert_eq!(
        (&failed["status"], &failed["total"]),
        (&json!("failed"), &json!(2))
    );
    let succeeded = list(&app, &merchant, "?status=succeeded&limit=1&offset=1").await;
    assert_eq!(ids(&succeeded), [newest_first[2].clone()]);
    assert_eq!(
        (
            &succeeded["status"],
            &succeeded["total"],
            &succeeded["count"],
            &succeeded["has_more"]
        ),
        (&json!("succeeded"), &json!(3), &json!(1), &json!(true))
    );
    let none = list(&app, &merchant, "?status=compensating").await;
    assert_eq!((&none["total"], &none["count"]), (&json!(0), &json!(0)));

    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("limit=ten", "limit"),
        ("offset=-1", "offset"),
        ("status=done", "status"),
        ("status=SUCCEEDED", "status"),
        ("colour=red", "colour"),
    ] {
        let response = app
            .get(&format!("/v1/transfers?{query}"))
            .bearer_auth(&merchant.api_key)
            .send()
            .await
            .expect("request");
        assert_field_error(response, field, query).await;
    }
    assert_eq!(list(&app, &merchant, "?limit=200").await["limit"], 200);
}

#[actix_web::test]
async fn another_merchant_sees_nothing_and_legs_are_not_reversed_directly() {
    let app = app().await;
    let alice = app.merchant().await;
    let bob = app.merchant().await;
    let created = create(&app, &alice, "pm_card_visa").await;
    let transfer_id = id(&created);
    let done = finished(&app, &alice, &transfer_id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let (leg1, leg2) = (leg_key(&done, 1), leg_key(&done, 2));

    let response = app
        .get(&format!("/v1/transfers/{transfer_id}"))
        .bearer_auth(&bob.api_key)
        .send()
        .await
        .expect("request");
    assert_problem(response, 404, "not-found").await;
    let bobs = list(&app, &bob, "").await;
    assert_eq!(
        (&bobs["total"], &bobs["count"]),
        (&json!(0), &json!(0)),
        "{bobs}"
    );
    // Alice's quotes, used or not, do not exist for Bob.
    let unused = eur_quote(&app, &alice).await;
    for quote_id in [&created["quote_id"], &unused["quote_id"]] {
        let mut request = body(&unused, "pm_card_visa", EVM_WALLET);
        request["quote_id"] = quote_id.clone();
        let response = app
            .post_with_key(
                "/v1/transfers",
                &bob.api_key,
                &Uuid::new_v4().to_string(),
                &request,
            )
            .await;
        assert_problem(response, 404, "not-found").await;
    }
    for key in [&leg1, &leg2] {
        let response = settlement_response(&app, &bob, key).await;
        assert_problem(response, 404, "not-found").await;
        let response = app
            .post(&format!("/v1/settlements/{key}/reverse"))
            .bearer_auth(&bob.api_key)
            .json(&json!({"reason": "not mine"}))
            .send()
            .await
            .expect("request");
        assert_problem(response, 404, "not-found").await;
    }
    assert_eq!(total(&app, &bob).await, 0);
    // Keys are per merchant: Alice's key is Bob's to use, and no replay of hers.
    let alices_key = Uuid::new_v4().to_string();
    let request = body(&unused, "pm_card_visa", EVM_WALLET);
    let response = app
        .post_with_key("/v1/transfers", &alice.api_key, &alices_key, &request)
        .await;
    assert_eq!(response.status(), 201);
    let bobs_quote = eur_quote(&app, &bob).await;
    let request = body(&bobs_quote, "pm_card_visa", EVM_WALLET);
    let response = app
        .post_with_key("/v1/transfers", &bob.api_key, &alices_key, &request)
        .await;
    assert_eq!(response.status(), 201);
    assert!(response.headers().get("idempotent-replayed").is_none());
    let bobs_transfer: Value = response.json().await.expect("json");
    assert_eq!(bobs_transfer["quote_id"], bobs_quote["quote_id"]);
    assert_eq!(total(&app, &bob).await, 1);
    assert_eq!(
        finished(&app, &bob, &id(&bobs_transfer)).await["status"],
        "succeeded"
    );

    // The owner may read its legs but not reverse them: the saga does.
    for key in [&leg1, &leg2] {
        let response = app
            .post(&format!("/v1/settlements/{key}/reverse"))
            .bearer_auth(&alice.api_key)
            .json(&json!({"reason": "customer request"}))
            .send()
            .await
            .expect("request");
        let problem = assert_problem(response, 409, "conflict").await;
        assert_eq!(problem["code"], "TRANSFER_LEG", "{problem}");
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains(&transfer_id)),
            "{problem}"
        );
    }
    assert_eq!(settlement(&app, &alice, &leg1).await["status"], "succeeded");
    assert_eq!(get(&app, &alice, &transfer_id).await["status"], "succeeded");
    assert_executions(&app, &leg1, &[("acquirer", "charge")]).await;
}

#[actix_web::test]
async fn transfers_need_their_scopes() {
    let app = app().await;
    let merchant = app.merchant().await;
    let created = create(&app, &merchant, "pm_card_visa").await;
    let transfer_id = id(&created);
    let read_only = app
        .key_with_scopes(
            &merchant,
            &["transfers:read", "quotes:read", "quotes:write"],
        )
        .await;
    let write_only = app
        .key_with_scopes(
            &merchant,
            &["transfers:write", "quotes:read", "quotes:write"],
        )
        .await;

    let quote = eur_quote(&app, &merchant).await;
    let request = body(&quote, "pm_card_visa", EVM_WALLET);
    let response = app
        .post_with_key(
            "/v1/transfers",
            &read_only,
            &Uuid::new_v4().to_string(),
            &request,
        )
        .await;
    let problem = assert_problem(response, 403, "insufficient-scope").await;
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("transfers:write")),
        "{problem}"
    );
    let response = app
        .post("/v1/transfers")
        .header("Idempotency-Key", Uuid::new_v4().to_string())
        .json(&request)
        .send()
        .await
        .expect("request");
    assert_problem(response, 401, "unauthorized").await;
    assert_eq!(total(&app, &merchant).await, 1, "nothing stored");

    for path in [
        format!("/v1/transfers/{transfer_id}"),
        "/v1/transfers".to_owned(),
    ] {
        let response = app
            .get(&path)
            .bearer_auth(&write_only)
            .send()
            .await
            .expect("request");
        let problem = assert_problem(response, 403, "insufficient-scope").await;
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|d| d.contains("transfers:read")),
            "{path}: {problem}"
        );
        let response = app
            .get(&path)
            .bearer_auth(&read_only)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 200, "{path}");
    }
    // The scoped keys work for what they hold.
    let response = app
        .post_with_key(
            "/v1/transfers",
            &write_only,
            &Uuid::new_v4().to_string(),
            &request,
        )
        .await;
    assert_eq!(response.status(), 201);
    let second: Value = response.json().await.expect("json");
    for transfer in [&created, &second] {
        let done = finished(&app, &merchant, &id(transfer)).await;
        assert_eq!(done["status"], "succeeded", "{done}");
    }
}

#[actix_web::test]
async fn unknown_transfer_ids_are_404() {
    let app = app().await;
    let merchant = app.merchant().await;
    let long = format!("tr_{}", "0".repeat(200));
    for unknown in [
        "tr_0192f1c4-7d2a-7c3e-9b1a-3f6e2d1c0b9a",
        "nope",
        long.as_str(),
    ] {
        let response = app
            .get(&format!("/v1/transfers/{unknown}"))
            .bearer_auth(&merchant.api_key)
            .send()
            .await
            .expect("request");
        assert_problem(response, 404, "not-found").await;
    }
}

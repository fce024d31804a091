//! Quotes over HTTP: exact pricing for each currency, asset and network,
//! every refused field, merchant isolation, scopes, expiry (410) with the
//! row kept, and the OpenAPI description.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tern::config::Config;
use tern_actors::adapters::static_rates::RateTable;
use tern_schema::money::MinorUnits;
use tern_schema::store::{merchants, quotes};
use tern_schema::types::MerchantStatus;
use tern_schema::vocabulary::QuoteId;
use tern_schema::{write_tx, StoreError};

use crate::helpers::{assert_problem, Merchant, RequestExt, TestApp};

/// The defaults, and one rate with more digits than its product keeps, so
/// that flooring the receive amount shows.
fn rates_with_a_long_eur_usdt(config: &mut Config) {
    config.quote_rates = RateTable::with_overrides("EUR/USDT=1.0866667").expect("a valid override");
}

fn body(currency: &str, amount: &str, asset: &str, network: &str) -> Value {
    json!({"send_currency": currency, "send_amount": amount,
        "receive_asset": asset, "receive_network": network})
}

async fn post(app: &TestApp, api_key: &str, body: &Value) -> reqwest::Response {
    app.post("/v1/quotes")
        .bearer_auth(api_key)
        .json(body)
        .send()
        .await
        .expect("request")
}

async fn read(app: &TestApp, api_key: &str, id: &str) -> reqwest::Response {
    app.get(&format!("/v1/quotes/{id}"))
        .bearer_auth(api_key)
        .send()
        .await
        .expect("request")
}

/// Creates a quote; answers its body.
async fn create(app: &TestApp, merchant: &Merchant, body: &Value) -> Value {
    let response = post(app, &merchant.api_key, body).await;
    let status = response.status();
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let quote: Value = response.json().await.expect("json");
    assert_eq!(status, 201, "{quote}");
    let id = quote["quote_id"].as_str().expect("quote_id");
    assert_eq!(location, Some(format!("/v1/quotes/{id}")));
    quote
}

fn at(value: &Value) -> DateTime<Utc> {
    value
        .as_str()
        .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
        .map(|at| at.with_timezone(&Utc))
        .unwrap_or_else(|| panic!("{value} is not a date-time"))
}

#[actix_web::test]
async fn quotes_are_priced_exactly_for_each_combination() {
    let app = TestApp::spawn_with(rates_with_a_long_eur_usdt).await;
    let merchant = app.merchant().await;
    // (request) -> (send_amount, rate, platform_fee, network_fee, receive_amount)
    let cases = [
        // 1% of 100.00 is the 1.00 minimum; tron gas 1.00 USD.
        (
            ("USD", "100", "USDT", "tron"),
            ("100.00", "1", "1.00", "1.00", "98.000000"),
        ),
        // EUR: 2.50 USD of ethereum gas is 2.50 / 1.08 = 2.3148 -> 2.31 EUR.
        (
            ("EUR", "100.00", "USDC", "ethereum"),
            ("100.00", "1.08", "1.00", "2.31", "104.425200"),
        ),
        (
            ("EUR", "20.00", "USDC", "polygon"),
            ("20.00", "1.08", "1.00", "0.05", "20.466000"),
        ),
        (
            ("GBP", "12.34", "USDC", "bsc"),
            ("12.34", "1.27", "1.00", "0.08", "14.300200"),
        ),
        // JPY has no decimals: 1% of 10,000 is 100; 0.05 / 0.0067 = 7.46 -> 7.
        (
            ("JPY", "10000", "USDT", "polygon"),
            ("10000", "0.0067", "100", "7", "66.283100"),
        ),
        // 1.505 rounds half-up to 1.51.
        (
            ("USD", "150.50", "USDC", "polygon"),
            ("150.50", "1", "1.51", "0.05", "148.940000"),
        ),
        (
            ("USD", "150.49", "USDT", "bsc"),
            ("150.49", "1", "1.50", "0.10", "148.890000"),
        ),
        // The configured rate: 8.08 x 1.0866667 = 8.780266936, floored.
        (
            ("EUR", "10.00", "USDT", "tron"),
            ("10.00", "1.0866667", "1.00", "0.92", "8.780266"),
        ),
        // The bounds themselves are quotable.
        (
            ("USD", "10000.00", "USDC", "ethereum"),
            ("10000.00", "1", "100.00", "2.50", "9897.500000"),
        ),
        (
            ("USD", "2.01", "USDT", "tron"),
            ("2.01", "1", "1.00", "1.00", "0.010000"),
        ),
    ];
    for ((currency, amount, asset, network), expected) in cases {
        let label = format!("{currency} {amount} -> {asset} on {network}");
        let quote = create(&app, &merchant, &body(currency, amount, asset, network)).await;
        let (send_amount, rate, platform_fee, network_fee, receive_amount) = expected;
        assert!(
            quote["quote_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("qt_")),
            "{label}: {quote}"
        );
        for (field, want) in [
            ("send_currency", currency),
            ("send_amount", send_amount),
            ("receive_asset", asset),
            ("receive_network", network),
            ("rate", rate),
            ("platform_fee", platform_fee),
            ("network_fee", network_fee),
            ("receive_amount", receive_amount),
        ] {
            assert_eq!(quote[field], want, "{label}: {field} in {quote}");
        }
        let lifetime = at(&quote["expires_at"]) - at(&quote["created_at"]);
        assert_eq!(lifetime, chrono::Duration::seconds(60), "{label}");
        let fields = quote.as_object().map(|o| o.len());
        assert_eq!(fields, Some(11), "exactly the interface's fields: {quote}");

        let id = quote["quote_id"].as_str().expect("id");
        let response = read(&app, &merchant.api_key, id).await;
        assert_eq!(response.status(), 200, "{label}");
        let again: Value = response.json().await.expect("json");
        assert_eq!(again, quote, "{label}: GET answers the quote as created");
    }
}

#[actix_web::test]
async fn each_post_makes_a_new_time_ordered_quote() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let request = body("USD", "25.00", "USDC", "polygon");
    let mut ids = Vec::new();
    for _ in 0..3 {
        let quote = create(&app, &merchant, &request).await;
        ids.push(quote["quote_id"].as_str().expect("id").to_owned());
    }
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, ids, "distinct, and sorted by creation: {ids:?}");
}

#[actix_web::test]
async fn every_invalid_field_is_422_naming_it() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let usd = |amount: &str| body("USD", amount, "USDT", "tron");
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            body("XYZ", "10.00", "USDT", "tron"),
            "send_currency",
            "must be one of USD, EUR, GBP, JPY",
        ),
        (
            body("usd", "10.00", "USDT", "tron"),
            "send_currency",
            "must be one of",
        ),
        (
            body("USDT", "10.00", "USDC", "tron"),
            "send_currency",
            "must be one of",
        ),
        (
            body("USD", "10.00", "DAI", "tron"),
            "receive_asset",
            "must be USDT or USDC",
        ),
        (
            body("USD", "10.00", "usdt", "tron"),
            "receive_asset",
            "must be USDT or USDC",
        ),
        (
            body("USD", "10.00", "USDT", "solana"),
            "receive_network",
            "must be one of tron, ethereum, polygon, bsc",
        ),
        (usd("abc"), "send_amount", "must be a decimal string"),
        (usd(""), "send_amount", "must be a decimal string"),
        (usd("1e3"), "send_amount", "must be a decimal string"),
        (usd(" 10.00"), "send_amount", "must be a decimal string"),
        (usd("0"), "send_amount", "must be greater than zero"),
        (usd("0.00"), "send_amount", "must be greater than zero"),
        (usd("-10.00"), "send_amount", "must be greater than zero"),
        (usd("10.001"), "send_amount", "more than 2 decimal places"),
        (
            body("JPY", "1000.5", "USDT", "tron"),
            "send_amount",
            "more than 0 decimal places",
        ),
        (usd("99999999999999999999"), "send_amount", "is too large"),
        (
            usd("92233720368547758.07"),
            "send_amount",
            "must be at most 10000.00 USD",
        ),
        (usd("0.99"), "send_amount", "must be at least 1.00 USD"),
        (
            usd("10000.01"),
            "send_amount",
            "must be at most 10000.00 USD",
        ),
        (
            body("JPY", "10001", "USDT", "tron"),
            "send_amount",
            "must be at most 10000 JPY",
        ),
        // Fees that leave nothing: the receive amount would not be positive.
        (
            usd("2.00"),
            "send_amount",
            "does not cover the fees (1.00 platform + 1.00 network USD)",
        ),
        (
            body("USD", "1.00", "USDC", "ethereum"),
            "send_amount",
            "does not cover the fees",
        ),
        (
            body("JPY", "150", "USDT", "tron"),
            "send_amount",
            "does not cover the fees (2 platform + 149 network JPY)",
        ),
        // A malformed amount is reported even when the currency is unknown.
        (
            body("XYZ", "-1", "USDT", "tron"),
            "send_amount",
            "must be greater than zero",
        ),
        // Shape errors name the field too.
        (
            json!({"send_currency": "USD", "send_amount": "10.00", "receive_asset": "USDT"}),
            "receive_network",
            "is required",
        ),
        (
            json!({"send_currency": "USD", "send_amount": 10, "receive_asset": "USDT", "receive_network": "tron"}),
            "send_amount",
            "invalid type",
        ),
        (
            json!({"send_currency": "USD", "send_amount": "10.00", "receive_asset": "USDT", "receive_network": "tron", "platform_fee": "0.00"}),
            "platform_fee",
            "is not a known field",
        ),
        (json!(["USD"]), "body", "must be a JSON object"),
    ];
    for (request, field, message) in cases {
        let response = post(&app, &merchant.api_key, &request).await;
        let problem = assert_problem(response, 422, "validation-error").await;
        let got = problem["errors"][field].as_str().unwrap_or_default();
        assert!(
            got.contains(message),
            "{request}: errors.{field} = {problem}"
        );
    }

    // Every problem at once.
    let response = post(
        &app,
        &merchant.api_key,
        &body("XYZ", "1.0", "DAI", "solana"),
    )
    .await;
    let problem = assert_problem(response, 422, "validation-error").await;
    let fields: Vec<&str> = problem["errors"]
        .as_object()
        .map(|errors| errors.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        fields,
        ["receive_asset", "receive_network", "send_currency"],
        "{problem}"
    );
}

#[actix_web::test]
async fn malformed_bodies_are_400_or_415() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    for text in ["{", "not json", "{\"send_currency\": }"] {
        let response = app
            .post("/v1/quotes")
            .bearer_auth(&merchant.api_key)
            .header("content-type", "application/json")
            .body(text)
            .send()
            .await
            .expect("request");
        assert_problem(response, 400, "malformed-json").await;
    }
    let response = app
        .post("/v1/quotes")
        .bearer_auth(&merchant.api_key)
        .header("content-type", "text/plain")
        .body(body("USD", "10.00", "USDT", "tron").to_string())
        .send()
        .await
        .expect("request");
    assert_problem(response, 415, "unsupported-media-type").await;
}

#[actix_web::test]
async fn another_merchants_quote_and_unknown_ids_are_404() {
    let app = TestApp::spawn().await;
    let owner = app.merchant().await;
    let other = app.merchant().await;
    let quote = create(&app, &owner, &body("EUR", "50.00", "USDC", "tron")).await;
    let id = quote["quote_id"].as_str().expect("id");

    let response = read(&app, &other.api_key, id).await;
    let problem = assert_problem(response, 404, "not-found").await;
    assert_eq!(problem["detail"], "no such quote");
    for unknown in [
        "qt_019a0000000070008000000000000000",
        "nothing-like-an-id",
        "qt_",
    ] {
        assert_problem(read(&app, &owner.api_key, unknown).await, 404, "not-found").await;
    }
    assert_eq!(read(&app, &owner.api_key, id).await.status(), 200);
}

#[actix_web::test]
async fn an_expired_quote_is_410_and_its_row_is_kept() {
    const TTL: Duration = Duration::from_millis(1_500);
    let app = TestApp::spawn_with(|config| config.quote_ttl = TTL).await;
    let merchant = app.merchant().await;
    let quote = create(&app, &merchant, &body("GBP", "40.00", "USDT", "ethereum")).await;
    let id = quote["quote_id"].as_str().expect("id").to_owned();
    let lifetime = at(&quote["expires_at"]) - at(&quote["created_at"]);
    assert_eq!(lifetime, chrono::Duration::milliseconds(1_500));

    // created_at precedes the response, so this is past expires_at.
    tokio::time::sleep(TTL + Duration::from_millis(100)).await;
    let response = read(&app, &merchant.api_key, &id).await;
    let problem = assert_problem(response, 410, "gone").await;
    assert_eq!(problem["code"], "QUOTE_EXPIRED", "{problem}");
    // Expiry does not reveal another merchant's quote either.
    let other = app.merchant().await;
    assert_problem(read(&app, &other.api_key, &id).await, 404, "not-found").await;

    let mut pooled = app.state.db.get().await.expect("connection");
    let row = quotes::find_for_merchant(&mut pooled.tx(), &merchant.merchant_id, &QuoteId::new(id))
        .await
        .expect("query")
        .expect("the expired quote is kept");
    assert_eq!(
        (
            row.send_amount_minor.get(),
            row.platform_fee_minor.get(),
            row.network_fee_minor.get()
        ),
        (4_000, 100, 197),
        "2.50 USD / 1.27 = 1.9685 -> 1.97 GBP"
    );
    assert_eq!(
        row.receive_amount_minor,
        MinorUnits::new(47_028_100),
        "37.03 x 1.27 = 47.0281"
    );
}

#[actix_web::test]
async fn quotes_need_a_key_with_their_scope() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let request = body("USD", "10.00", "USDT", "tron");
    let quote = create(&app, &merchant, &request).await;
    let id = quote["quote_id"].as_str().expect("id");

    let anonymous = app
        .post("/v1/quotes")
        .json(&request)
        .send()
        .await
        .expect("request");
    assert_problem(anonymous, 401, "unauthorized").await;
    let anonymous = app
        .get(&format!("/v1/quotes/{id}"))
        .send()
        .await
        .expect("request");
    assert_problem(anonymous, 401, "unauthorized").await;
    assert_problem(
        post(&app, "svc_nope_nope", &request).await,
        401,
        "unauthorized",
    )
    .await;
    assert_problem(read(&app, "svc_nope_nope", id).await, 401, "unauthorized").await;

    let reader = app.key_with_scopes(&merchant, &["quotes:read"]).await;
    let writer = app.key_with_scopes(&merchant, &["quotes:write"]).await;
    let neither = app
        .key_with_scopes(&merchant, &["settlements:read", "settlements:write"])
        .await;
    for (key, scope) in [(&reader, "quotes:write"), (&neither, "quotes:write")] {
        let problem =
            assert_problem(post(&app, key, &request).await, 403, "insufficient-scope").await;
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|d| d.contains(scope)),
            "{problem}"
        );
    }
    for (key, scope) in [(&writer, "quotes:read"), (&neither, "quotes:read")] {
        let problem = assert_problem(read(&app, key, id).await, 403, "insufficient-scope").await;
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|d| d.contains(scope)),
            "{problem}"
        );
    }
    assert_eq!(read(&app, &reader, id).await.status(), 200);
    assert_eq!(post(&app, &writer, &request).await.status(), 201);
}

#[actix_web::test]
async fn a_suspended_merchant_cannot_quote_but_can_read() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let request = body("USD", "10.00", "USDC", "bsc");
    let quote = create(&app, &merchant, &request).await;
    let id = quote["quote_id"].as_str().expect("id");

    let merchant_id = merchant.merchant_id.clone();
    let suspended: Result<_, StoreError> = write_tx!(app.state.db, |tx| {
        merchants::set_status(tx, &merchant_id, MerchantStatus::Suspended).await
    });
    assert!(suspended.expect("status change").is_some());
    // The change takes effect within a second (decisions §1a).
    let started = std::time::Instant::now();
    let response = loop {
        let response = post(&app, &merchant.api_key, &request).await;
        if response.status() == 403 || started.elapsed() > Duration::from_secs(2) {
            break response;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let problem = assert_problem(response, 403, "merchant-inactive").await;
    assert_eq!(problem["code"], "MERCHANT_SUSPENDED");
    assert_eq!(read(&app, &merchant.api_key, id).await.status(), 200);
}

#[actix_web::test]
async fn the_quotes_context_documents_both_operations() {
    let app = TestApp::spawn().await;
    for path in ["/v1/quotes/openapi.json", "/openapi.json"] {
        let doc: Value = app.get(path).read_json().await;
        let create = &doc["paths"]["/v1/quotes"]["post"];
        let get = &doc["paths"]["/v1/quotes/{id}"]["get"];
        assert_eq!(create["operationId"], "create_quote", "{path}");
        assert_eq!(get["operationId"], "get_quote", "{path}");
        for status in ["201", "400", "401", "403", "422"] {
            assert!(
                create["responses"][status].is_object(),
                "{path} POST {status}"
            );
        }
        for status in ["200", "401", "403", "404", "410"] {
            assert!(get["responses"][status].is_object(), "{path} GET {status}");
        }
        let quote = &doc["components"]["schemas"]["Quote"]["properties"];
        for field in [
            "quote_id",
            "send_currency",
            "send_amount",
            "receive_asset",
            "receive_network",
            "rate",
            "platform_fee",
            "network_fee",
            "receive_amount",
            "expires_at",
            "created_at",
        ] {
            assert!(quote[field].is_object(), "{path}: Quote.{field}");
        }
    }
}

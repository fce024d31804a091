//! Secure card details: each operator mode, the step-up password of
//! sessions, the scope of API keys, the issuer's signed embed page, and a
//! PAN that never lands in Tern's database.

use serde_json::{json, Value};
use tern::config::SecureDetailsMode;

use crate::helpers::cards::{issue, json_of, operate, send, with_cookie};
use crate::helpers::humans::PASSWORD;
use crate::helpers::{assert_problem, TestApp};

fn path(card: &str) -> String {
    format!("/v1/cards/{card}/secure-details")
}

fn cache_control(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get("cache-control")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Seconds from now until the answer's `revealed_until`.
fn seconds_left(details: &Value) -> i64 {
    let until = details["revealed_until"].as_str().expect("revealed_until");
    let until = chrono::DateTime::parse_from_rfc3339(until).expect("a date-time");
    (until.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_seconds()
}

async fn actions(app: &TestApp, key: &str) -> Vec<Value> {
    let events = json_of(send(app, key, "GET", "/v1/audit/events", None).await, 200).await;
    events["data"].as_array().expect("data").clone()
}

/// Whether `needle` appears anywhere in Tern's database: every byte of the
/// SQLite files, or every row of every PostgreSQL table as text.
async fn database_contains(app: &TestApp, needle: &str) -> bool {
    if !app.database.is_postgres() {
        let file = app
            .database
            .url()
            .strip_prefix("sqlite://")
            .expect("a sqlite url")
            .to_owned();
        return [file.clone(), format!("{file}-wal")].iter().any(|file| {
            std::fs::read(file).is_ok_and(|bytes| {
                bytes
                    .windows(needle.len())
                    .any(|window| window == needle.as_bytes())
            })
        });
    }
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Table {
        #[diesel(sql_type = diesel::sql_types::Text)]
        name: String,
    }
    #[derive(diesel::QueryableByName)]
    struct Hits {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        hits: i64,
    }
    let mut pooled = app.state.db.get().await.expect("connection");
    let tx = &mut pooled.tx();
    let tables: Vec<Table> = tern_schema::dispatch!(tx, conn => diesel::sql_query(
        "SELECT table_name::text AS name FROM information_schema.tables \
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
    )
    .load(conn)
    .await)
    .expect("tables");
    assert!(tables.iter().any(|t| t.name == "cards"), "no cards table");
    for table in tables {
        let sql = format!(
            "SELECT count(*) AS hits FROM \"{}\" AS r WHERE r::text LIKE $1",
            table.name
        );
        let found: Vec<Hits> = tern_schema::dispatch!(tx, conn => diesel::sql_query(&sql)
            .bind::<diesel::sql_types::Text, _>(format!("%{needle}%"))
            .load(conn)
            .await)
        .expect("search");
        if found.iter().any(|row| row.hits > 0) {
            return true;
        }
    }
    false
}

#[actix_web::test]
async fn demo_mode_relays_the_issuers_details_and_tern_keeps_none() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    let card = issue(&app, &merchant, &user, json!({})).await;
    let id = card["id"].as_str().expect("id");

    let response = send(&app, &merchant.api_key, "POST", &path(id), None).await;
    assert_eq!(cache_control(&response).as_deref(), Some("no-store"));
    let details = json_of(response, 200).await;
    assert_eq!(details["enabled"], true, "{details}");
    assert_eq!(details["card_id"], id);
    assert_eq!(details["mode"], "demo");
    let pan = details["pan"].as_str().expect("pan").to_owned();
    assert!(
        pan.len() == 16 && pan.chars().all(|c| c.is_ascii_digit()),
        "{pan}"
    );
    assert!(pan.ends_with(card["last_four"].as_str().expect("last_four")));
    let cvv = details["cvv"].as_str().expect("cvv");
    assert!(cvv.len() == 3 && cvv.chars().all(|c| c.is_ascii_digit()));
    assert_eq!(details["expiry_month"], card["expiry_month"]);
    assert_eq!(details["expiry_year"], card["expiry_year"]);
    assert_eq!(details["ttl_seconds"], 60);
    assert!((58..=60).contains(&seconds_left(&details)), "{details}");
    assert!(details.get("embed_url").is_none() && details.get("code").is_none());

    // A body is optional; an unknown field in one is refused.
    let with_body = send(&app, &merchant.api_key, "POST", &path(id), Some(json!({}))).await;
    assert_eq!(json_of(with_body, 200).await["pan"], pan.as_str());
    let unknown = send(
        &app,
        &merchant.api_key,
        "POST",
        &path(id),
        Some(json!({"reveal": "all"})),
    )
    .await;
    assert_problem(unknown, 422, "validation-error").await;

    let events = actions(&app, &merchant.api_key).await;
    let revealed: Vec<&Value> = events
        .iter()
        .filter(|e| e["action"] == "card.secure_details_revealed")
        .collect();
    assert_eq!(revealed.len(), 2, "{events:?}");
    assert_eq!(revealed[0]["resource_id"], id);
    assert_eq!(revealed[0]["data"]["mode"], "demo");
    assert_eq!(revealed[0]["actor_type"], "api_key", "{:?}", revealed[0]);

    // The issuer keeps the number; Tern's database has none of it.
    assert!(
        database_contains(&app, id).await,
        "the search finds what is stored"
    );
    assert!(!database_contains(&app, &pan).await, "the PAN is stored");
}

#[actix_web::test]
async fn api_keys_need_cards_write_and_see_only_their_merchants_cards() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    let card = issue(&app, &merchant, &user, json!({})).await;
    let id = card["id"].as_str().expect("id");

    let reader = app.key_with_scopes(&merchant, &["cards:read"]).await;
    let problem = assert_problem(
        send(&app, &reader, "POST", &path(id), None).await,
        403,
        "insufficient-scope",
    )
    .await;
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("cards:write")),
        "{problem}"
    );
    let writer = app.key_with_scopes(&merchant, &["cards:write"]).await;
    let details = json_of(send(&app, &writer, "POST", &path(id), None).await, 200).await;
    assert!(details["pan"].is_string());

    let other = app.merchant().await;
    assert_problem(
        send(&app, &other.api_key, "POST", &path(id), None).await,
        404,
        "not-found",
    )
    .await;
    assert_problem(
        send(&app, &merchant.api_key, "POST", &path("card_missing"), None).await,
        404,
        "not-found",
    )
    .await;
    // No credential at all: 401, even with a body that would not parse.
    let anonymous = app
        .post(&path(id))
        .json(&json!({"bogus": true}))
        .send()
        .await
        .expect("request");
    assert_problem(anonymous, 401, "unauthorized").await;
}

#[actix_web::test]
async fn a_session_must_give_its_password_again() {
    let app = TestApp::spawn().await;
    let ada = app.human().await;
    let card = json_of(
        with_cookie(&app, &ada.cookie, "POST", "/v1/cards", None).await,
        201,
    )
    .await;
    let id = card["id"].as_str().expect("id");

    for body in [
        None,
        Some(json!({})),
        Some(json!({"password": "not the password"})),
        Some(json!({"password": "x".repeat(4_000)})),
    ] {
        let refused = with_cookie(&app, &ada.cookie, "POST", &path(id), body).await;
        let problem = assert_problem(refused, 401, "unauthorized").await;
        assert!(problem.get("pan").is_none(), "{problem}");
    }
    let response = with_cookie(
        &app,
        &ada.cookie,
        "POST",
        &path(id),
        Some(json!({"password": PASSWORD})),
    )
    .await;
    assert_eq!(cache_control(&response).as_deref(), Some("no-store"));
    let details = json_of(response, 200).await;
    assert_eq!(details["mode"], "demo");
    assert!(details["pan"]
        .as_str()
        .is_some_and(|pan| pan.ends_with(card["last_four"].as_str().expect("last_four"))));

    let events = app.audit_events(&ada.cookie).await;
    let refused: Vec<&str> = events
        .iter()
        .filter(|e| e["action"] == "card.secure_details_refused")
        .filter_map(|e| e["data"]["reason"].as_str())
        .collect();
    assert_eq!(
        refused,
        [
            "wrong_password",
            "wrong_password",
            "missing_password",
            "missing_password"
        ],
        "{events:?}"
    );
    let revealed = events
        .iter()
        .filter(|e| e["action"] == "card.secure_details_revealed")
        .count();
    assert_eq!(revealed, 1);

    // Another person's password does not open Ada's card: it is not theirs to see.
    let bob = app.human().await;
    let peek = with_cookie(
        &app,
        &bob.cookie,
        "POST",
        &path(id),
        Some(json!({"password": PASSWORD})),
    )
    .await;
    assert_problem(peek, 404, "not-found").await;
}

#[actix_web::test]
async fn a_closed_card_reveals_nothing() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    let card = issue(&app, &merchant, &user, json!({})).await;
    let id = card["id"].as_str().expect("id");
    json_of(operate(&app, &merchant, id, "close").await, 200).await;
    let problem = assert_problem(
        send(&app, &merchant.api_key, "POST", &path(id), None).await,
        409,
        "conflict",
    )
    .await;
    assert_eq!(problem["code"], "CARD_CLOSED");
    // A frozen or replaced card still shows its details to its owner.
    let fresh = issue(&app, &merchant, &user, json!({})).await;
    let fresh = fresh["id"].as_str().expect("id");
    json_of(operate(&app, &merchant, fresh, "freeze").await, 200).await;
    let details = json_of(
        send(&app, &merchant.api_key, "POST", &path(fresh), None).await,
        200,
    )
    .await;
    assert!(details["pan"].is_string());
}

#[actix_web::test]
async fn disabled_mode_answers_not_enabled_after_the_usual_checks() {
    let app = TestApp::spawn_with(|config| {
        config.secure_details_mode = SecureDetailsMode::Disabled;
    })
    .await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    let card = issue(&app, &merchant, &user, json!({})).await;
    let id = card["id"].as_str().expect("id");
    let response = send(&app, &merchant.api_key, "POST", &path(id), None).await;
    assert_eq!(cache_control(&response).as_deref(), Some("no-store"));
    let details = json_of(response, 200).await;
    assert_eq!(details["enabled"], false, "{details}");
    assert_eq!(details["card_id"], id);
    assert_eq!(details["code"], "SECURE_DETAILS_NOT_ENABLED");
    assert!(details["reason"].as_str().is_some_and(|r| !r.is_empty()));
    for absent in ["mode", "pan", "cvv", "embed_url", "revealed_until"] {
        assert!(details.get(absent).is_none(), "{absent}: {details}");
    }
    // Nothing was revealed, so nothing is audited as revealed.
    assert!(!actions(&app, &merchant.api_key)
        .await
        .iter()
        .any(|e| e["action"] == "card.secure_details_revealed"));
    // The scope, the card and the step-up still come first.
    let reader = app.key_with_scopes(&merchant, &["cards:read"]).await;
    assert_problem(
        send(&app, &reader, "POST", &path(id), None).await,
        403,
        "insufficient-scope",
    )
    .await;
    let ada = app.human().await;
    let own = json_of(
        with_cookie(&app, &ada.cookie, "POST", "/v1/cards", None).await,
        201,
    )
    .await;
    let own = own["id"].as_str().expect("id");
    assert_problem(
        with_cookie(&app, &ada.cookie, "POST", &path(own), None).await,
        401,
        "unauthorized",
    )
    .await;
    let answered = with_cookie(
        &app,
        &ada.cookie,
        "POST",
        &path(own),
        Some(json!({"password": PASSWORD})),
    )
    .await;
    assert_eq!(json_of(answered, 200).await["enabled"], false);
}

#[actix_web::test]
async fn embed_mode_hands_out_an_issuer_signed_url_bound_to_the_origin() {
    let app = TestApp::spawn_with(|config| {
        config.secure_details_mode = SecureDetailsMode::Embed;
    })
    .await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    let card = issue(&app, &merchant, &user, json!({})).await;
    let id = card["id"].as_str().expect("id");

    for bad in [
        json!({}),
        json!({"target_origin": "http://app.example.com"}),
        json!({"target_origin": "https://app.example.com/cards"}),
        json!({"target_origin": "https://app.example.com\r\nX: y"}),
    ] {
        let refused = send(&app, &merchant.api_key, "POST", &path(id), Some(bad)).await;
        let problem = assert_problem(refused, 422, "validation-error").await;
        assert!(problem["errors"]["target_origin"].is_string(), "{problem}");
    }

    let origin = "https://app.example.com";
    let response = send(
        &app,
        &merchant.api_key,
        "POST",
        &path(id),
        Some(json!({"target_origin": origin})),
    )
    .await;
    assert_eq!(cache_control(&response).as_deref(), Some("no-store"));
    let details = json_of(response, 200).await;
    assert_eq!(details["enabled"], true, "{details}");
    assert_eq!(details["mode"], "embed");
    assert_eq!(details["card_id"], id);
    assert_eq!(details["ttl_seconds"], 60);
    assert!((58..=60).contains(&seconds_left(&details)), "{details}");
    assert_eq!(details["expiry_month"], card["expiry_month"]);
    assert_eq!(details["expiry_year"], card["expiry_year"]);
    assert!(details.get("pan").is_none() && details.get("cvv").is_none());
    let url = details["embed_url"].as_str().expect("embed_url");
    assert!(url.starts_with(app.sandbox()), "{url}");

    let page = app.client.get(url).send().await.expect("embed page");
    assert_eq!(page.status(), 200);
    assert_eq!(
        page.headers()
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok()),
        Some(format!("frame-ancestors {origin}").as_str())
    );
    let html = page.text().await.expect("html");
    assert!(
        html.contains(card["last_four"].as_str().expect("last_four")),
        "the page shows the card"
    );

    // The signature covers the card, the origin and the expiry.
    let mut tampered = url.to_owned();
    let last = tampered.pop().expect("a signature");
    tampered.push(if last == '0' { '1' } else { '0' });
    let forged = app.client.get(&tampered).send().await.expect("request");
    assert_eq!(forged.status(), 403);
    let moved = url.replace("app.example.com", "evil.example.com");
    let reframed = app.client.get(&moved).send().await.expect("request");
    assert_eq!(reframed.status(), 403);

    let events = actions(&app, &merchant.api_key).await;
    assert!(events.iter().any(|e| {
        e["action"] == "card.secure_details_revealed" && e["data"]["mode"] == "embed"
    }));
}

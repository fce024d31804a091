//! Rate limits under attack (issue 19): floods of distinct subjects keep
//! answer time and limiter memory flat, per-IP buckets follow the real
//! client address (forwarding headers only from trusted proxies), and
//! limits on shared resources count per merchant, not per key.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use reqwest::Response;
use serde_json::{json, Value};
use tern::config::{parse_trusted_proxies, RateLimits};

use crate::helpers::cards::{issue, send};
use crate::helpers::{assert_problem, TestApp};

const RESET_REQUEST: &str = "/v1/auth/password-reset/request";

async fn reset_request(app: &TestApp, email: &str, forwarded_for: Option<&str>) -> Response {
    let request = app.post(RESET_REQUEST).json(&json!({"email": email}));
    let request = match forwarded_for {
        Some(address) => request.header("x-forwarded-for", address),
        None => request,
    };
    request.send().await.expect("request")
}

/// Sends `count` reset requests for distinct emails, `concurrency` at a
/// time; answers how long the whole batch took.
async fn reset_batch(
    app: &TestApp,
    batch: usize,
    count: usize,
    email: impl Fn(usize) -> String,
) -> Duration {
    let started = Instant::now();
    let concurrency = 16;
    for chunk in (0..count).collect::<Vec<_>>().chunks(concurrency) {
        let answers = join_all(chunk.iter().map(|n| {
            let email = email(batch * count + n);
            async move { reset_request(app, &email, None).await.status().as_u16() }
        }))
        .await;
        assert!(answers.iter().all(|status| *status == 202), "{answers:?}");
    }
    started.elapsed()
}

fn retry_after_s(response: &Response) -> u64 {
    response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
        .expect("a 429 carries Retry-After in seconds")
}

#[actix_web::test]
async fn a_flood_of_distinct_reset_emails_keeps_time_and_memory_flat() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits =
            RateLimits::parse("password_reset_ip=1000000/1s").expect("valid limits");
    })
    .await;
    let batches = 6;
    let per_batch = 400;
    // 60 KB addresses no registration could store: answered alike, never a key.
    let huge = "a".repeat(60_000);
    let huge_email = |n: usize| format!("{n}{huge}@flood.example");
    let mut times = Vec::new();
    for batch in 0..2 {
        times.push(reset_batch(&app, batch, per_batch / 4, &huge_email).await);
    }
    assert_eq!(app.state.limits.key_count("password_reset"), 0);

    // Valid distinct addresses: one key each, under the cap, same pace.
    times.clear();
    let email = |n: usize| format!("flood{n}@flood.example");
    for batch in 0..batches {
        times.push(reset_batch(&app, batch, per_batch, email).await);
    }
    let keys = app.state.limits.key_count("password_reset");
    assert!(keys <= tern::rate_limit::KEYS_PER_LIMITER_MAX, "{keys}");
    assert_eq!(keys, batches * per_batch);
    let (first, last) = (times[0], times[batches - 1]);
    assert!(
        last <= first * 4 + Duration::from_secs(2),
        "answer time grew: first batch {first:?}, last {last:?} ({times:?})"
    );
}

#[actix_web::test]
async fn password_reset_is_limited_per_address_whatever_the_email() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = RateLimits::parse("password_reset_ip=3/1h").expect("valid limits");
    })
    .await;
    for n in 0..3 {
        let response = reset_request(&app, &format!("walker{n}@example.com"), None).await;
        assert_eq!(response.status(), 202);
    }
    let refused = reset_request(&app, "walker-next@example.com", None).await;
    assert!(retry_after_s(&refused) >= 1);
    assert_problem(refused, 429, "rate-limited").await;
    // Confirmations count against the same address budget.
    let confirm = app
        .post("/v1/auth/password-reset/confirm")
        .json(&json!({"token": "guess", "new_password": "a long enough one"}))
        .send()
        .await
        .expect("request");
    assert_problem(confirm, 429, "rate-limited").await;
}

#[actix_web::test]
async fn email_verification_guesses_are_limited_per_address() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = RateLimits::parse("verify_email_ip=2/1h").expect("valid limits");
    })
    .await;
    let guess = |n: usize| {
        app.post("/v1/auth/verify-email")
            .json(&json!({"token": format!("guess-{n}")}))
            .send()
    };
    assert_problem(guess(0).await.expect("request"), 410, "gone").await;
    assert_problem(guess(1).await.expect("request"), 410, "gone").await;
    let refused = guess(2).await.expect("request");
    assert!(retry_after_s(&refused) >= 1);
    assert_problem(refused, 429, "rate-limited").await;
}

#[actix_web::test]
async fn a_spoofed_forwarded_header_from_an_untrusted_peer_is_ignored() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = RateLimits::parse("password_reset_ip=2/1h").expect("valid limits");
    })
    .await;
    let mut statuses = Vec::new();
    for n in 0..4 {
        let spoofed = format!("198.51.100.{n}");
        let email = format!("spoof{n}@example.com");
        let response = reset_request(&app, &email, Some(&spoofed)).await;
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [202, 202, 429, 429]);
    let forwarded = app
        .post(RESET_REQUEST)
        .header("forwarded", "for=198.51.100.77")
        .json(&json!({"email": "spoof-forwarded@example.com"}))
        .send()
        .await
        .expect("request");
    assert_eq!(forwarded.status(), 429);
}

#[actix_web::test]
async fn behind_a_trusted_proxy_each_forwarded_client_has_its_own_bucket() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = RateLimits::parse("password_reset_ip=2/1h").expect("valid limits");
        config.trusted_proxies = parse_trusted_proxies("127.0.0.1/32").expect("valid");
    })
    .await;
    let client = |n: usize| format!("spoofed-by-client.example, 198.51.100.{n}");
    for n in 0..3 {
        for attempt in 0..2 {
            let email = format!("proxied{n}-{attempt}@example.com");
            let response = reset_request(&app, &email, Some(&client(n))).await;
            assert_eq!(response.status(), 202, "client {n} attempt {attempt}");
        }
        let email = format!("proxied{n}-over@example.com");
        let response = reset_request(&app, &email, Some(&client(n))).await;
        assert_eq!(response.status(), 429, "client {n} is over its own budget");
    }
    // Two addresses of one IPv6 /64 are one client.
    let first = reset_request(&app, "v6a@example.com", Some("2001:db8:7:7::1")).await;
    let second = reset_request(&app, "v6b@example.com", Some("2001:db8:7:7::2")).await;
    let third = reset_request(&app, "v6c@example.com", Some("2001:db8:7:7:ffff::3")).await;
    assert_eq!(
        [first.status(), second.status(), third.status()].map(|s| s.as_u16()),
        [202, 202, 429]
    );
    let other_64 = reset_request(&app, "v6d@example.com", Some("2001:db8:7:8::1")).await;
    assert_eq!(other_64.status(), 202);
}

async fn issue_with(app: &TestApp, key: &str, user_id: &str) -> Response {
    send(
        app,
        key,
        "POST",
        "/v1/cards",
        Some(json!({"user_id": user_id})),
    )
    .await
}

#[actix_web::test]
async fn keys_of_one_merchant_share_the_card_budgets() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = RateLimits::parse(
            "card_issue=2/1h,card_secure=1/1h,wallet_provision=1/1h,webhook_read=1/1h",
        )
        .expect("valid limits");
    })
    .await;
    let merchant = app.merchant().await;
    let second_key = app
        .key_with_scopes(&merchant, &["cards:read", "cards:write", "webhooks:read"])
        .await;
    let users = [app.user(&merchant).await, app.user(&merchant).await];

    let card: Value = issue(&app, &merchant, &users[0], json!({})).await;
    let card = card["id"].as_str().expect("card id").to_owned();
    let replaced = send(
        &app,
        &merchant.api_key,
        "POST",
        &format!("/v1/cards/{card}/replace"),
        None,
    )
    .await;
    assert_eq!(replaced.status(), 200, "a replacement is the second issue");
    let replacement: Value = replaced.json().await.expect("json");
    let card = replacement["id"].as_str().expect("card id").to_owned();
    let refused = issue_with(&app, &second_key, &users[1]).await;
    assert!(retry_after_s(&refused) >= 1);
    assert_problem(refused, 429, "rate-limited").await;

    let secure = format!("/v1/cards/{card}/secure-details");
    let revealed = send(&app, &merchant.api_key, "POST", &secure, None).await;
    assert_eq!(revealed.status(), 200);
    let refused = send(&app, &second_key, "POST", &secure, None).await;
    assert!(retry_after_s(&refused) >= 1);
    assert_problem(refused, 429, "rate-limited").await;

    let wallet = format!("/v1/cards/{card}/wallet/apple_pay");
    let provisioned = send(&app, &merchant.api_key, "POST", &wallet, None).await;
    assert_eq!(provisioned.status(), 200);
    let refused = send(&app, &second_key, "POST", &wallet, None).await;
    assert_problem(refused, 429, "rate-limited").await;

    // An existing per-key limit now counts the merchant too.
    let endpoint = "/v1/webhooks/endpoint";
    let first = send(&app, &merchant.api_key, "GET", endpoint, None).await;
    assert_ne!(first.status(), 429);
    let refused = send(&app, &second_key, "GET", endpoint, None).await;
    assert_problem(refused, 429, "rate-limited").await;

    // Another merchant's budgets are its own.
    let other = app.merchant().await;
    let other_user = app.user(&other).await;
    let issued = issue_with(&app, &other.api_key, &other_user).await;
    assert_eq!(issued.status(), 201);
}

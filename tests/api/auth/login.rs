//! POST /v1/auth/login: one identical 401, disabled accounts, fresh tokens.

use serde_json::{json, Value};
use tern_schema::store::users;

use crate::helpers::humans::{comparable, session_cookie, unique_email, PASSWORD};
use crate::helpers::{assert_problem, TestApp};

#[actix_web::test]
async fn each_login_gets_a_fresh_session_and_both_stay_valid() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let first = app.login(&human.email.to_uppercase(), PASSWORD).await;
    assert_eq!(first.status(), 200);
    let first_cookie = session_cookie(&first).expect("cookie");
    let body: Value = first.json().await.expect("json");
    assert_eq!(body["user_id"], human.user_id.as_str());
    assert_eq!(body["merchant_id"], human.merchant_id.as_str());
    assert_eq!(body["email_verified"], false);
    assert!(body["session_expires_at"].is_string());
    let second = app
        .post("/v1/auth/login")
        .json(&json!({"email": human.email, "password": PASSWORD, "remember_me": true}))
        .send()
        .await
        .expect("request");
    assert_eq!(second.status(), 200);
    let second_cookie = session_cookie(&second).expect("cookie");
    assert_ne!(first_cookie, second_cookie);
    assert_ne!(first_cookie, human.cookie);
    for cookie in [&human.cookie, &first_cookie, &second_cookie] {
        assert_eq!(app.me(cookie).await.status(), 200);
    }
}

#[actix_web::test]
async fn unknown_email_and_wrong_password_answer_the_same_401() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let wrong = app.login(&human.email, "not the password").await;
    assert!(session_cookie(&wrong).is_none());
    let wrong = assert_problem(wrong, 401, "unauthorized").await;
    let unknown = app.login(&unique_email(), "not the password").await;
    let unknown = assert_problem(unknown, 401, "unauthorized").await;
    assert_eq!(comparable(wrong), comparable(unknown));
    // Audited after the answer, so that it costs the answer no time.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let failed = loop {
        let found = app
            .audit_events(&human.cookie)
            .await
            .into_iter()
            .find(|e| e["action"] == "user.login_failed");
        match found {
            Some(event) => break event,
            None if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await
            }
            None => panic!("a failed login is audited on the user's chain"),
        }
    };
    assert_eq!(failed["data"]["reason"], "wrong_password");
}

#[actix_web::test]
async fn a_disabled_account_is_403_with_the_right_password_only() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let disabled: Result<_, tern_schema::StoreError> = tern_schema::write_tx!(app.state.db, |tx| {
        users::set_status_by_email(
            tx,
            &human.email,
            tern_schema::vocabulary::UserStatus::Disabled,
            tern_schema::types::utc_now(),
        )
        .await
    });
    disabled.expect("disabled");
    let right = app.login(&human.email, PASSWORD).await;
    let problem = assert_problem(right, 403, "account-disabled").await;
    assert_eq!(problem["code"], "ACCOUNT_DISABLED");
    // Without the password, a disabled account looks like any other failure.
    assert_problem(
        app.login(&human.email, "not the password").await,
        401,
        "unauthorized",
    )
    .await;
    // Its sessions stop working too.
    assert_problem(app.me(&human.cookie).await, 403, "account-disabled").await;
}

#[actix_web::test]
async fn bad_login_bodies_and_the_per_ip_limit() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = tern::config::RateLimits::parse("login=3/1m").expect("limits");
    })
    .await;
    let missing = app
        .post("/v1/auth/login")
        .json(&json!({"email": "a@example.com"}))
        .send()
        .await
        .expect("request");
    let problem = assert_problem(missing, 422, "validation-error").await;
    assert!(problem["errors"]["password"].is_string(), "{problem}");
    let malformed = app
        .post("/v1/auth/login")
        .header("content-type", "application/json")
        .body("not json")
        .send()
        .await
        .expect("request");
    assert_problem(malformed, 400, "malformed-json").await;
    // Bad bodies count too: the limit is checked before anything is read.
    assert_eq!(app.login("a@example.com", "whatever1").await.status(), 401);
    let limited = app.login("a@example.com", "whatever1").await;
    assert!(limited.headers().contains_key("retry-after"));
    assert_problem(limited, 429, "rate-limited").await;
}

//! Mailed tokens: email verification and password reset, through the
//! outbox folder and through a real SMTP server.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::humans::{comparable, session_cookie, unique_email, PASSWORD};
use crate::helpers::{assert_problem, TestApp};
use crate::smtp_sink::{token_in, SmtpSink};

async fn verify(app: &TestApp, token: &str) -> reqwest::Response {
    app.post("/v1/auth/verify-email")
        .json(&json!({"token": token}))
        .send()
        .await
        .expect("request")
}

async fn confirm(app: &TestApp, token: &str, password: &str) -> reqwest::Response {
    app.post("/v1/auth/password-reset/confirm")
        .json(&json!({"token": token, "new_password": password}))
        .send()
        .await
        .expect("request")
}

async fn request_reset(app: &TestApp, email: &str) -> reqwest::Response {
    app.post("/v1/auth/password-reset/request")
        .json(&json!({"email": email}))
        .send()
        .await
        .expect("request")
}

#[actix_web::test]
async fn the_verification_link_verifies_once() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let mails = app.outbox_mails(&human.email, 1).await;
    assert_eq!(mails.len(), 1);
    assert!(
        mails[0].contains("http://tern.test/verify-email?token="),
        "{}",
        mails[0]
    );
    let token = app.mailed_token(&human.email, 1).await;
    assert_eq!(verify(&app, &token).await.status(), 204);
    let me: Value = app.me(&human.cookie).await.json().await.expect("json");
    assert_eq!(me["email_verified"], true);
    let login: Value = app
        .login(&human.email, PASSWORD)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(login["email_verified"], true);
    let reused = assert_problem(verify(&app, &token).await, 410, "gone").await;
    assert_eq!(reused["code"], "TOKEN_INVALID");
    assert_problem(verify(&app, "made-up-token").await, 410, "gone").await;
    assert_problem(verify(&app, &"x".repeat(10_000)).await, 410, "gone").await;
    let missing = app
        .post("/v1/auth/verify-email")
        .json(&json!({}))
        .send()
        .await
        .expect("request");
    assert_problem(missing, 400, "bad-request").await;
    let empty = app
        .post("/v1/auth/verify-email")
        .json(&json!({"token": ""}))
        .send()
        .await
        .expect("request");
    assert_problem(empty, 400, "bad-request").await;
}

#[actix_web::test]
async fn resend_issues_a_new_token_and_the_old_one_still_works() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let resend = || {
        app.post("/v1/auth/verify-email/resend")
            .header("cookie", &human.cookie)
            .send()
    };
    assert_eq!(resend().await.expect("request").status(), 204);
    let first = app.mailed_token(&human.email, 1).await;
    let second = app.mailed_token(&human.email, 2).await;
    assert_ne!(first, second);
    assert_eq!(verify(&app, &first).await.status(), 204);
    assert_eq!(
        verify(&app, &second).await.status(),
        204,
        "still valid until used"
    );
    assert_problem(verify(&app, &second).await, 410, "gone").await;
    // Verified: resend answers 204 and sends nothing.
    assert_eq!(resend().await.expect("request").status(), 204);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app.outbox_mails(&human.email, 3).await.len(), 2);
}

#[actix_web::test]
async fn resend_is_limited_per_user() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    for _ in 0..3 {
        let response = app
            .post("/v1/auth/verify-email/resend")
            .header("cookie", &human.cookie)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 204);
    }
    let limited = app
        .post("/v1/auth/verify-email/resend")
        .header("cookie", &human.cookie)
        .send()
        .await
        .expect("request");
    assert!(limited.headers().contains_key("retry-after"));
    assert_problem(limited, 429, "rate-limited").await;
    // Another user is not held back by the first one's limit.
    let other = app.human().await;
    let response = app
        .post("/v1/auth/verify-email/resend")
        .header("cookie", &other.cookie)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 204);
}

#[actix_web::test]
async fn expired_tokens_are_gone() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let verification = app.mailed_token(&human.email, 1).await;
    assert_eq!(request_reset(&app, &human.email).await.status(), 202);
    let reset = app.mailed_token(&human.email, 2).await;
    app.expire_tokens(&human.user_id).await;
    assert_problem(verify(&app, &verification).await, 410, "gone").await;
    assert_problem(confirm(&app, &reset, "a new password").await, 410, "gone").await;
    assert_eq!(app.login(&human.email, PASSWORD).await.status(), 200);
}

#[actix_web::test]
async fn a_password_reset_changes_the_password_and_revokes_every_session() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let second = session_cookie(&app.login(&human.email, PASSWORD).await).expect("cookie");
    assert_eq!(
        request_reset(&app, &human.email.to_uppercase())
            .await
            .status(),
        202
    );
    let mails = app.outbox_mails(&human.email, 2).await;
    assert!(
        mails[1].contains("http://tern.test/reset-password?token="),
        "{}",
        mails[1]
    );
    let token = token_in(&mails[1]).expect("token");

    // A verification token is not a reset token, nor the other way round.
    let verification = app.mailed_token(&human.email, 1).await;
    assert_problem(
        confirm(&app, &verification, "a new password").await,
        410,
        "gone",
    )
    .await;
    assert_problem(verify(&app, &token).await, 410, "gone").await;

    let weak = confirm(&app, &token, "short").await;
    let problem = assert_problem(weak, 422, "validation-error").await;
    assert!(problem["errors"]["new_password"].is_string());
    // The weak attempt did not use the token up.
    assert_eq!(confirm(&app, &token, "a new password").await.status(), 204);
    assert_problem(confirm(&app, &token, "another password").await, 410, "gone").await;

    for cookie in [&human.cookie, &second] {
        assert_problem(app.me(cookie).await, 401, "unauthorized").await;
    }
    assert_eq!(app.login(&human.email, PASSWORD).await.status(), 401);
    let fresh = app.login(&human.email, "a new password").await;
    assert_eq!(fresh.status(), 200);
    let cookie = session_cookie(&fresh).expect("cookie");
    let reset = app
        .audit_events(&cookie)
        .await
        .into_iter()
        .find(|e| e["action"] == "user.password_reset")
        .expect("audited");
    assert_eq!(reset["data"]["sessions_revoked"], 2);
}

#[actix_web::test]
async fn a_reset_request_answers_the_same_for_unknown_emails() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let known = request_reset(&app, &human.email).await;
    let unknown_email = unique_email();
    let unknown = request_reset(&app, &unknown_email).await;
    assert_eq!(known.status(), 202);
    assert_eq!(unknown.status(), 202);
    let known_body = known.text().await.expect("body");
    let unknown_body = unknown.text().await.expect("body");
    assert_eq!(known_body, unknown_body);
    assert_eq!(app.outbox_mails(&human.email, 2).await.len(), 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(app.outbox_mails(&unknown_email, 1).await.is_empty());
    let invalid = request_reset(&app, "not an email").await;
    assert_eq!(invalid.status(), 202);
    let malformed = app
        .post("/v1/auth/password-reset/request")
        .header("content-type", "application/json")
        .body("{")
        .send()
        .await
        .expect("request");
    let malformed = assert_problem(malformed, 400, "malformed-json").await;
    let _ = comparable(malformed);
}

#[actix_web::test]
async fn with_smtp_configured_mail_goes_to_the_smtp_server() {
    let sink = SmtpSink::start().await;
    let url = sink.url();
    let app = TestApp::spawn_with(|config| config.smtp_url = Some(url)).await;
    let human = app.human().await;
    let mails = sink
        .wait_for(&human.email, 1, Duration::from_secs(10))
        .await;
    assert_eq!(mails.len(), 1);
    assert_eq!(
        mails[0].subject().as_deref(),
        Some("Verify your email address")
    );
    let token = token_in(&mails[0].text()).expect("token");
    assert_eq!(verify(&app, &token).await.status(), 204);
    assert!(
        app.outbox_mails(&human.email, 1).await.is_empty(),
        "nothing in the outbox when SMTP is configured"
    );
    assert_eq!(request_reset(&app, &human.email).await.status(), 202);
    let mails = sink
        .wait_for(&human.email, 2, Duration::from_secs(10))
        .await;
    let reset = token_in(&mails[1].text()).expect("token");
    assert_eq!(
        confirm(&app, &reset, "a brand new password").await.status(),
        204
    );
    assert_eq!(
        app.login(&human.email, "a brand new password")
            .await
            .status(),
        200
    );
}

#[actix_web::test]
async fn a_password_reset_invalidates_the_other_reset_links() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    assert_eq!(request_reset(&app, &human.email).await.status(), 202);
    let _ = app.outbox_mails(&human.email, 2).await;
    assert_eq!(request_reset(&app, &human.email).await.status(), 202);
    let first = app.mailed_token(&human.email, 2).await;
    let second = app.mailed_token(&human.email, 3).await;
    assert_ne!(first, second);

    assert_eq!(
        confirm(&app, &second, "the chosen password").await.status(),
        204
    );
    // The older link, never used, no longer changes the password.
    assert_problem(
        confirm(&app, &first, "an attacker's password").await,
        410,
        "gone",
    )
    .await;
    assert_eq!(
        app.login(&human.email, "an attacker's password")
            .await
            .status(),
        401
    );
    assert_eq!(
        app.login(&human.email, "the chosen password")
            .await
            .status(),
        200
    );
}

//! What strangers may not learn (issue: no internals to strangers):
//! operator details behind TERN_OPERATOR_TOKEN, no provider words in
//! problem documents, and no Server-Timing for the unauthenticated in
//! production.

use serde_json::json;
use tern::config::Environment;

use crate::helpers::settlements::{app, create, fault, funded, push, settled};
use crate::helpers::{assert_problem, TestApp, OPERATOR_TOKEN};

#[actix_web::test]
async fn a_wrong_or_unconfigured_operator_token_is_401_not_a_redacted_page() {
    let app = TestApp::spawn().await;
    for path in ["/health", "/health/actors"] {
        let wrong = app
            .get(path)
            .bearer_auth(format!("{OPERATOR_TOKEN}x"))
            .send()
            .await
            .expect("request");
        assert_problem(wrong, 401, "unauthorized").await;
        let stranger = app.get(path).send().await.expect("request");
        assert_eq!(stranger.status(), 200, "{path}");
    }
    let unset = TestApp::spawn_with(|config| config.operator_token = None).await;
    let response = unset
        .get("/health")
        .bearer_auth(OPERATOR_TOKEN)
        .send()
        .await
        .expect("request");
    let problem = assert_problem(response, 401, "unauthorized").await;
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("TERN_OPERATOR_TOKEN")),
        "{problem}"
    );
}

#[actix_web::test]
async fn a_declined_reversal_names_the_action_code_and_not_the_providers_words() {
    let app = app().await;
    let (merchant, usd) = funded(&app, "10.00").await;
    let key = create(&app, &merchant, push(&usd, "4.00", "tok_visa")).await;
    settled(&app, &merchant, &key).await;
    // The simulator's permanent failure carries its own message.
    fault(
        &app,
        json!({"target": "card_push", "match": {}, "mode": "fail", "count": 1}),
    )
    .await;
    let response = app
        .post(&format!("/v1/settlements/{key}/reverse"))
        .bearer_auth(&merchant.api_key)
        .json(&json!({"reason": "customer request"}))
        .send()
        .await
        .expect("request");
    let problem = assert_problem(response, 409, "conflict").await;
    assert_eq!(problem["code"], "REVERSAL_DECLINED", "{problem}");
    let text = problem.to_string();
    for internal in ["simulated", "processing_error", "127.0.0.1", "http"] {
        assert!(
            !text
                .replace("http://tern.test/problems", "")
                .contains(internal),
            "{internal} in {text}"
        );
    }
}

#[actix_web::test]
async fn production_sends_server_timing_to_authenticated_callers_only() {
    let app = TestApp::spawn_with(|config| config.environment = Environment::Production).await;
    let merchant = app.merchant().await;
    for path in ["/health", "/live", "/v1/ledger/accounts", "/nowhere"] {
        let response = app.get(path).send().await.expect("request");
        assert!(
            response.headers().get("server-timing").is_none(),
            "{path}: {:?}",
            response.headers()
        );
    }
    let reset = app
        .post("/v1/auth/password-reset/request")
        .json(&json!({"email": "nobody@example.com"}))
        .send()
        .await
        .expect("request");
    assert!(reset.headers().get("server-timing").is_none());
    let mine = app
        .get("/v1/ledger/accounts")
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request");
    assert_eq!(mine.status(), 200);
    assert!(mine.headers().get("server-timing").is_some());

    let development = TestApp::spawn().await;
    let response = development.get("/live").send().await.expect("request");
    assert!(response.headers().get("server-timing").is_some());
}

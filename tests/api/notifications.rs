//! POST /v1/notifications/dispatch (decisions §11): signed with
//! X-Svc-Signature, recorded with its deliveries, then sent once per active
//! device through the push gateway (the simulator here).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tern_actors::adapters::sign_payload;
use tern_schema::models::PushDeliveryRow;
use tern_schema::vocabulary::{DeviceId, DispatchId, PushStatus, UserId};

use crate::devices::device;
use crate::helpers::{assert_problem, RequestExt, TestApp};

const SECRET: &str = "dispatch-secret-for-tests-0123456789";
/// How long a test waits for background deliveries.
const DELIVERY_DEADLINE: Duration = Duration::from_secs(20);

async fn spawn() -> TestApp {
    TestApp::spawn_with(|config| config.dispatch_secret = Some(SECRET.into())).await
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

async fn send(app: &TestApp, body: &str, signature: Option<String>) -> reqwest::Response {
    let mut request = app
        .post("/v1/notifications/dispatch")
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(signature) = signature {
        request = request.header("X-Svc-Signature", signature);
    }
    request.send().await.expect("request")
}

/// Sends `body` signed now with the test secret.
async fn dispatch(app: &TestApp, body: &Value) -> reqwest::Response {
    let text = body.to_string();
    let signature = sign_payload(SECRET.as_bytes(), now(), text.as_bytes());
    send(app, &text, Some(signature)).await
}

async fn accepted(app: &TestApp, body: &Value) -> Value {
    let response = dispatch(app, body).await;
    assert_eq!(response.status(), 202);
    response.json().await.expect("json")
}

async fn pushes(app: &TestApp, user_id: &str) -> Vec<Value> {
    let body: Value = app
        .client
        .get(format!(
            "{}/control/pushes?user_id={user_id}",
            app.sandbox()
        ))
        .read_json()
        .await;
    body["data"].as_array().expect("data").clone()
}

/// Waits until the simulator received `count` messages for the user.
async fn await_pushes(app: &TestApp, user_id: &str, count: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let received = pushes(app, user_id).await;
        if received.len() >= count || started.elapsed() > DELIVERY_DEADLINE {
            return received;
        }
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn deliveries(app: &TestApp, dispatch_id: &str) -> Vec<PushDeliveryRow> {
    let mut pooled = app.state.db.get().await.expect("connection");
    let mut tx = pooled.tx();
    tern_schema::store::push::deliveries(&mut tx, &DispatchId::new(dispatch_id))
        .await
        .expect("deliveries")
}

/// Waits until none of the dispatch's deliveries is pending.
async fn settled(app: &TestApp, dispatch_id: &str) -> Vec<PushDeliveryRow> {
    let started = Instant::now();
    loop {
        let rows = deliveries(app, dispatch_id).await;
        if rows.iter().all(|row| row.status != PushStatus::Pending)
            || started.elapsed() > DELIVERY_DEADLINE
        {
            return rows;
        }
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn audit_events(app: &TestApp, api_key: &str) -> Vec<Value> {
    let body: Value = app
        .get("/v1/audit/events")
        .bearer_auth(api_key)
        .read_json()
        .await;
    body["data"].as_array().expect("data").clone()
}

async fn arm_fault(app: &TestApp, fault: Value) {
    let response = app
        .client
        .post(format!("{}/control/faults", app.sandbox()))
        .json(&fault)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 201);
}

#[actix_web::test]
async fn without_a_dispatch_secret_dispatch_is_503() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    let response = dispatch(&app, &json!({"user_id": user, "title": "t", "body": "b"})).await;
    assert_problem(response, 503, "dispatch-disabled").await;
}

#[actix_web::test]
async fn bad_signatures_are_401_and_record_nothing() {
    let app = spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    device(&app, &merchant, &user, "token-a").await;
    let body = json!({"user_id": user, "title": "Hello", "body": "World"}).to_string();
    let other = json!({"user_id": user, "title": "Hello", "body": "Changed"}).to_string();
    let sign =
        |secret: &str, at: i64, text: &str| sign_payload(secret.as_bytes(), at, text.as_bytes());
    let cases = [
        None,
        Some(sign("another secret", now(), &body)),
        Some(sign(SECRET, now() - 301, &body)),
        Some(sign(SECRET, now() + 301, &body)),
        Some(sign(SECRET, now(), &other)),
        Some("t=abc,v1=00".to_owned()),
        Some(String::new()),
    ];
    for signature in cases {
        let response = send(&app, &body, signature.clone()).await;
        assert_problem(response, 401, "invalid-service-signature").await;
    }
    // The signature is checked before the body is even parsed.
    let response = send(&app, "not json", None).await;
    assert_problem(response, 401, "invalid-service-signature").await;

    actix_web::rt::time::sleep(Duration::from_millis(300)).await;
    assert!(pushes(&app, &user).await.is_empty());
    let events = audit_events(&app, &merchant.api_key).await;
    assert!(events.iter().all(|e| e["action"] != "push.dispatched"));
}

#[actix_web::test]
async fn invalid_dispatches_are_422_and_unknown_users_404() {
    let app = spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    for (body, field) in [
        (json!({"user_id": user, "title": "", "body": "b"}), "title"),
        (json!({"user_id": user, "title": "t", "body": "  "}), "body"),
        (
            json!({"user_id": user, "title": "t".repeat(257), "body": "b"}),
            "title",
        ),
        (
            json!({"user_id": user, "title": "t", "body": "b", "data": [1]}),
            "data",
        ),
        (
            json!({"user_id": user, "title": "t", "body": "b", "badge": 1}),
            "badge",
        ),
        (json!({"title": "t", "body": "b"}), "user_id"),
    ] {
        let response = dispatch(&app, &body).await;
        let problem = assert_problem(response, 422, "validation-error").await;
        assert!(problem["errors"][field].is_string(), "{body}: {problem}");
    }
    let unknown = uuid::Uuid::new_v4().to_string();
    let response = dispatch(
        &app,
        &json!({"user_id": unknown, "title": "t", "body": "b"}),
    )
    .await;
    assert_problem(response, 404, "not-found").await;

    // A user without devices is a valid target of nobody.
    let none = accepted(&app, &json!({"user_id": user, "title": "t", "body": "b"})).await;
    assert_eq!(none["devices"], 0);
    assert!(none["dispatch_id"]
        .as_str()
        .is_some_and(|id| id.starts_with("psh_")));
}

#[actix_web::test]
async fn each_active_device_gets_the_message_once() {
    let app = spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    let other_user = app.user(&merchant).await;
    device(&app, &merchant, &user, "token-a").await;
    device(&app, &merchant, &user, "token-b").await;
    let revoked = device(&app, &merchant, &user, "token-c").await;
    device(&app, &merchant, &other_user, "token-d").await;
    let response = app
        .delete(&format!("/v1/devices/{revoked}"))
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 204);

    let body = json!({
        "user_id": user,
        "title": "Payment received",
        "body": "Secret message text",
        "data": {"transfer_id": "tr_1"},
    });
    let response = dispatch(&app, &body).await;
    assert_eq!(response.status(), 202);
    let request_id = response
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .expect("request id")
        .to_owned();
    let answer: Value = response.json().await.expect("json");
    assert_eq!(answer["devices"], 2);
    let dispatch_id = answer["dispatch_id"].as_str().expect("dispatch_id");

    let received = await_pushes(&app, &user, 2).await;
    assert_eq!(received.len(), 2, "{received:?}");
    let mut tokens: Vec<&str> = received
        .iter()
        .filter_map(|m| m["token"].as_str())
        .collect();
    tokens.sort_unstable();
    assert_eq!(tokens, ["token-a", "token-b"]);
    for message in &received {
        assert_eq!(message["title"], "Payment received");
        assert_eq!(message["body"], "Secret message text");
        assert_eq!(message["data"], json!({"transfer_id": "tr_1"}));
        assert_eq!(message["platform"], "android");
        let key = message["key"].as_str().expect("key");
        assert!(
            key.starts_with(&format!("push_{dispatch_id}_dev_")),
            "{key}"
        );
    }
    assert!(pushes(&app, &other_user).await.is_empty());

    let rows = settled(&app, dispatch_id).await;
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter()
            .all(|r| r.status == PushStatus::Delivered && r.attempts == 1),
        "{rows:?}"
    );

    let events = audit_events(&app, &merchant.api_key).await;
    let dispatched: Vec<&Value> = events
        .iter()
        .filter(|e| e["action"] == "push.dispatched")
        .collect();
    assert_eq!(dispatched.len(), 1);
    assert_eq!(dispatched[0]["resource_id"], dispatch_id);
    assert_eq!(dispatched[0]["actor_type"], "system");
    assert_eq!(dispatched[0]["request_id"], request_id.as_str());
    assert_eq!(dispatched[0]["data"]["devices"], 2);
    assert!(
        !dispatched[0].to_string().contains("Secret message text"),
        "the body stays out of the audit chain"
    );
}

#[actix_web::test]
async fn transient_gateway_failures_are_retried_and_still_deliver_once() {
    let app = spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    device(&app, &merchant, &user, "token-a").await;
    device(&app, &merchant, &user, "token-b").await;
    arm_fault(
        &app,
        json!({"target": "push", "match": {"user_id": user}, "mode": "transient", "count": 2}),
    )
    .await;

    let answer = accepted(&app, &json!({"user_id": user, "title": "t", "body": "b"})).await;
    let dispatch_id = answer["dispatch_id"].as_str().expect("dispatch_id");
    let rows = settled(&app, dispatch_id).await;
    assert!(
        rows.iter().all(|r| r.status == PushStatus::Delivered),
        "{rows:?}"
    );
    let attempts: i32 = rows.iter().map(|r| r.attempts).sum();
    assert_eq!(
        attempts, 4,
        "two failed attempts, then one success each: {rows:?}"
    );

    let received = pushes(&app, &user).await;
    assert_eq!(received.len(), 2, "{received:?}");
    let executions: Value = app
        .client
        .get(format!("{}/control/executions", app.sandbox()))
        .read_json()
        .await;
    let push_executions = executions["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|e| e["target"] == "push")
        .count();
    assert_eq!(push_executions, 2);
}

#[actix_web::test]
async fn a_permanent_gateway_failure_is_recorded_as_failed() {
    let app = spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    device(&app, &merchant, &user, "token-a").await;
    arm_fault(
        &app,
        json!({"target": "push", "match": {"user_id": user}, "mode": "fail"}),
    )
    .await;
    let answer = accepted(&app, &json!({"user_id": user, "title": "t", "body": "b"})).await;
    let rows = settled(&app, answer["dispatch_id"].as_str().expect("id")).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status, PushStatus::Failed);
    assert_eq!(rows[0].attempts, 1, "a refusal is not retried");
    assert!(rows[0].last_error.is_some());
    assert!(pushes(&app, &user).await.is_empty());
}

#[actix_web::test]
async fn deliveries_left_pending_are_sent_at_the_next_start() {
    let app = spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    let device_id = device(&app, &merchant, &user, "token-a").await;
    // What a crash between the dispatch's commit and its send leaves.
    let now = tern_schema::types::utc_now();
    let dispatch = tern_schema::models::PushDispatchRow {
        id: DispatchId::generate(),
        merchant_id: merchant.merchant_id.clone(),
        user_id: UserId::new(user.clone()),
        title: "Left behind".into(),
        body: "b".into(),
        data: None,
        request_id: "crashed-request".into(),
        created_at: now,
        replay_sha256: None,
    };
    let delivery = PushDeliveryRow {
        dispatch_id: dispatch.id.clone(),
        device_id: DeviceId::new(device_id),
        status: PushStatus::Pending,
        attempts: 0,
        last_error: None,
        provider_message_id: None,
        created_at: now,
        updated_at: now,
        delivered_at: None,
    };
    let written: Result<(), tern_schema::StoreError> = tern_schema::write_tx!(app.state.db, |tx| {
        tern_schema::store::push::insert_dispatch(tx, &dispatch).await?;
        tern_schema::store::push::insert_deliveries(tx, std::slice::from_ref(&delivery)).await
    });
    written.expect("written");

    // A second process on the same database, with a simulator of its own.
    let data_dir = tempfile::tempdir().expect("data dir");
    let config = crate::helpers::test_config(app.database.url(), data_dir.path());
    let restarted = tern::startup::Application::build(config)
        .await
        .expect("the application starts");
    let sandbox = format!(
        "http://127.0.0.1:{}",
        restarted.sandbox_port().expect("sandbox")
    );
    let handle = restarted.handle();
    actix_web::rt::spawn(restarted.run_until_stopped());

    let started = Instant::now();
    let received = loop {
        let body: Value = app
            .client
            .get(format!("{sandbox}/control/pushes?user_id={user}"))
            .read_json()
            .await;
        let data = body["data"].as_array().cloned().unwrap_or_default();
        if !data.is_empty() || started.elapsed() > DELIVERY_DEADLINE {
            break data;
        }
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(received[0]["title"], "Left behind");
    let rows = settled(&app, dispatch.id.as_str()).await;
    assert_eq!(rows[0].status, PushStatus::Delivered, "{rows:?}");
    handle.stop(false).await;
}

#[actix_web::test]
async fn a_disabled_user_is_not_notified() {
    let app = spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    device(&app, &merchant, &user, "token-of-a-disabled-user").await;
    let email = format!("{user}@users.tern.test");
    let disabled: Result<_, tern_schema::StoreError> = tern_schema::write_tx!(app.state.db, |tx| {
        tern_schema::store::users::set_status_by_email(
            tx,
            &email,
            tern_schema::vocabulary::UserStatus::Disabled,
            tern_schema::types::utc_now(),
        )
        .await
    });
    assert!(disabled.expect("disabled").is_some());
    let answer = accepted(
        &app,
        &json!({"user_id": user, "title": "Hi", "body": "There"}),
    )
    .await;
    assert_eq!(answer["devices"], 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(pushes(&app, &user).await.is_empty());
}

/// The same signed request written as a sender could rewrite it: spacing,
/// a leading zero in `t`, an extra `v1` entry. Each still verifies.
fn rewritten(signature: &str) -> Vec<String> {
    let (t, v1) = signature.split_once(',').expect("t=..,v1=..");
    let ts = t.trim_start_matches("t=");
    vec![
        signature.to_owned(),
        format!("{t}, {v1}"),
        format!("t=0{ts},{v1}"),
        format!("{v1},{t}"),
        format!("{t},{v1},v1={}", "0".repeat(64)),
    ]
}

#[actix_web::test]
async fn a_repeated_signed_dispatch_answers_the_first_and_sends_nothing_again() {
    let app = spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    device(&app, &merchant, &user, "token-a").await;
    device(&app, &merchant, &user, "token-b").await;
    let body = json!({"user_id": user, "title": "Once", "body": "only once"}).to_string();
    let signature = sign_payload(SECRET.as_bytes(), now(), body.as_bytes());

    let first = send(&app, &body, Some(signature.clone())).await;
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.expect("json");
    assert_eq!(first["devices"], 2);
    assert_eq!(await_pushes(&app, &user, 2).await.len(), 2);
    for replay in rewritten(&signature) {
        let response = send(&app, &body, Some(replay.clone())).await;
        assert_eq!(response.status(), 202, "{replay}");
        let answer: Value = response.json().await.expect("json");
        assert_eq!(answer, first, "{replay}");
    }
    actix_web::rt::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(pushes(&app, &user).await.len(), 2, "nothing sent again");
    let dispatched = audit_events(&app, &merchant.api_key)
        .await
        .into_iter()
        .filter(|e| e["action"] == "push.dispatched")
        .count();
    assert_eq!(dispatched, 1);

    // Signed anew (another timestamp), the same message is a new dispatch.
    let later = sign_payload(SECRET.as_bytes(), now() + 1, body.as_bytes());
    let again: Value = send(&app, &body, Some(later))
        .await
        .json()
        .await
        .expect("json");
    assert_ne!(again["dispatch_id"], first["dispatch_id"]);
    assert_eq!(await_pushes(&app, &user, 4).await.len(), 4);
}

#[actix_web::test]
async fn identical_dispatches_at_once_record_one() {
    let app = spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    device(&app, &merchant, &user, "token-a").await;
    let body = json!({"user_id": user, "title": "Race", "body": "at once"}).to_string();
    let signature = sign_payload(SECRET.as_bytes(), now(), body.as_bytes());
    let answers =
        futures_util::future::join_all((0..8).map(|_| send(&app, &body, Some(signature.clone()))))
            .await;
    let mut ids = Vec::new();
    for response in answers {
        assert_eq!(response.status(), 202);
        let answer: Value = response.json().await.expect("json");
        assert_eq!(answer["devices"], 1);
        ids.push(answer["dispatch_id"].as_str().expect("id").to_owned());
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(await_pushes(&app, &user, 1).await.len(), 1);
    actix_web::rt::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(pushes(&app, &user).await.len(), 1);
}

#[actix_web::test]
async fn a_replay_on_a_second_node_answers_the_first() {
    let app = spawn().await;
    let merchant = app.merchant().await;
    let user = app.user(&merchant).await;
    device(&app, &merchant, &user, "token-a").await;
    // A second node on the same database, with a simulator of its own.
    let data_dir = tempfile::tempdir().expect("data dir");
    let mut config = crate::helpers::test_config(app.database.url(), data_dir.path());
    config.dispatch_secret = Some(SECRET.into());
    let second = tern::startup::Application::build(config)
        .await
        .expect("the second node starts");
    let second_api = format!("http://127.0.0.1:{}", second.port());
    let second_sandbox = format!(
        "http://127.0.0.1:{}",
        second.sandbox_port().expect("sandbox")
    );
    let handle = second.handle();
    actix_web::rt::spawn(second.run_until_stopped());

    let body = json!({"user_id": user, "title": "Two nodes", "body": "one push"}).to_string();
    let signature = sign_payload(SECRET.as_bytes(), now(), body.as_bytes());
    let to_second = app
        .client
        .post(format!("{second_api}/v1/notifications/dispatch"))
        .header("content-type", "application/json")
        .header("X-Svc-Signature", signature.clone())
        .body(body.clone())
        .send();
    let (first, second) = futures_util::join!(send(&app, &body, Some(signature)), to_second);
    let first: Value = first.json().await.expect("json");
    let second: Value = second.expect("request").json().await.expect("json");
    assert_eq!(
        first["dispatch_id"], second["dispatch_id"],
        "{first} {second}"
    );
    assert_eq!(first["devices"], 1);

    // One node sent the one message; together the simulators saw it once.
    let started = Instant::now();
    while pushes_on_both(&app, &second_sandbox, &user).await == 0
        && started.elapsed() < DELIVERY_DEADLINE
    {
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
    actix_web::rt::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(pushes_on_both(&app, &second_sandbox, &user).await, 1);
    handle.stop(false).await;
}

/// Messages the first node's and the second node's simulators received.
async fn pushes_on_both(app: &TestApp, second_sandbox: &str, user: &str) -> usize {
    let body: Value = app
        .client
        .get(format!("{second_sandbox}/control/pushes?user_id={user}"))
        .read_json()
        .await;
    let second = body["data"].as_array().map_or(0, Vec::len);
    pushes(app, user).await.len() + second
}

//! Deliveries to a real HTTPS receiver (tests/api/webhook_receiver.rs),
//! every signature checked with the `standardwebhooks` crate: success,
//! retries, dead letters and replay, redirects, ordering under
//! concurrency, an endpoint removed mid-stream, and a SIGKILL during a
//! delivery.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use uuid::Uuid;

use crate::helpers::transfers::{self, body, eur_quote, finished, id, EVM_WALLET};
use crate::helpers::webhooks::*;
use crate::helpers::{RequestExt, TestApp};
use crate::processes::{put_endpoint_at, quote_at, transfer_at, Cluster};
use crate::webhook_receiver::{verify, Received, Receiver};

/// Tern with short retries, trusting the receiver's CA and allowed to
/// deliver to loopback, where the receiver listens.
async fn app_for(receiver: &Receiver) -> TestApp {
    let ca_file = receiver.ca_file().to_path_buf();
    TestApp::spawn_with(move |config| {
        fast_webhooks(config);
        config.webhook_allow_private = true;
        config.webhook_ca_file = Some(ca_file);
    })
    .await
}

/// Every request verified with `secret`; answers their bodies.
fn verified(secret: &str, received: &[Received]) -> Vec<Value> {
    received
        .iter()
        .map(|request| match verify(secret, request) {
            Ok(body) => body,
            Err(error) => panic!("signature of {request:?}: {error}"),
        })
        .collect()
}

/// The receiver's requests grouped by transfer, each group's event types in
/// arrival order.
fn types_by_transfer(bodies: &[Value]) -> BTreeMap<String, Vec<String>> {
    let mut by_transfer: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for body in bodies {
        let transfer = body["data"]["id"].as_str().unwrap_or_default().to_owned();
        let kind = body["type"].as_str().unwrap_or_default().to_owned();
        by_transfer.entry(transfer).or_default().push(kind);
    }
    by_transfer
}

#[actix_web::test]
async fn a_succeeding_transfer_delivers_its_events_signed_and_in_order() {
    let receiver = Receiver::start().await;
    let app = app_for(&receiver).await;
    // Both secret forms: base64 after whsec_, and plain UTF-8 bytes.
    for (path, secret) in [("/whsec", WHSEC_SECRET), ("/plain", PLAIN_SECRET)] {
        let merchant = app.merchant().await;
        configure(&app, &merchant, &receiver.url(path), secret).await;
        let quote = eur_quote(&app, &merchant).await;
        let request_id = format!("req-{}", Uuid::new_v4());
        let transfer = app
            .post("/v1/transfers")
            .bearer_auth(&merchant.api_key)
            .header("Idempotency-Key", Uuid::new_v4().to_string())
            .header("X-Request-ID", &request_id)
            .json(&body(&quote, "pm_card_visa", EVM_WALLET))
            .json_at(201)
            .await;
        let transfer_id = id(&transfer);
        let done = finished(&app, &merchant, &transfer_id).await;
        assert_eq!(done["status"], "succeeded");

        let events = events_when(&app, &merchant, &transfer_id, |events| {
            events.len() == SUCCEEDED_TYPES.len() && all_settled(events)
        })
        .await;
        for event in &events {
            assert_eq!(event["status"], "delivered", "{event}");
            assert_eq!(event["attempts"], 1);
            assert_eq!(event["attempt_log"][0]["status_code"], 200);
            assert_eq!(event["request_id"], request_id.as_str());
        }
        let received: Vec<Received> = receiver
            .requests()
            .into_iter()
            .filter(|request| request.path == path)
            .collect();
        assert_eq!(received.len(), SUCCEEDED_TYPES.len());
        let bodies = verified(secret, &received);
        let kinds: Vec<&str> = bodies.iter().filter_map(|b| b["type"].as_str()).collect();
        assert_eq!(kinds, SUCCEEDED_TYPES);
        for (request, body) in received.iter().zip(&bodies) {
            assert_eq!(request.method, "POST");
            assert_eq!(request.header("x-request-id"), Some(request_id.as_str()));
            assert_eq!(request.header("content-type"), Some("application/json"));
            // No trace exporter here: no trace context is sent.
            assert_eq!(request.header("traceparent"), None);
            assert_eq!(request.header("webhook-id"), body["id"].as_str());
            assert!(body["id"].as_str().is_some_and(|id| id.starts_with("evt_")));
            assert_eq!(body["data"]["id"], transfer_id.as_str());
            let status = body["type"].as_str().unwrap_or_default();
            assert_eq!(
                format!(
                    "transfer.{}",
                    body["data"]["status"].as_str().unwrap_or_default()
                ),
                status
            );
            assert!(body["created_at"].as_str().is_some());
        }
        // A tampered body fails the same check.
        let mut tampered = received[0].clone();
        tampered.body.extend_from_slice(b" ");
        assert!(verify(secret, &tampered).is_err());
    }
}

#[actix_web::test]
async fn a_failing_receiver_is_retried_with_the_same_id_and_holds_back_later_events() {
    let receiver = Receiver::start().await;
    let app = app_for(&receiver).await;
    let merchant = app.merchant().await;
    configure(&app, &merchant, &receiver.url("/flaky"), PLAIN_SECRET).await;
    receiver.fail_next(2, 500);
    let transfer = transfers::create(&app, &merchant, "pm_card_visa").await;
    let transfer_id = id(&transfer);
    finished(&app, &merchant, &transfer_id).await;
    let received = receiver.wait_for(SUCCEEDED_TYPES.len() + 2, WAIT_MAX).await;
    let bodies = verified(PLAIN_SECRET, &received);
    let kinds: Vec<&str> = bodies.iter().filter_map(|b| b["type"].as_str()).collect();
    // The first event twice refused and then accepted before any later one.
    let mut expected = vec!["transfer.pending"; 2];
    expected.extend(SUCCEEDED_TYPES);
    assert_eq!(kinds, expected);
    let first_ids: Vec<Option<&str>> = received[..3]
        .iter()
        .map(|r| r.header("webhook-id"))
        .collect();
    assert!(
        first_ids.iter().all(|id| *id == first_ids[0]),
        "{first_ids:?}"
    );
    assert_eq!(
        received.iter().map(|r| r.status).collect::<Vec<_>>()[..3],
        [500, 500, 200]
    );

    let events = events_when(&app, &merchant, &transfer_id, |events| {
        events.len() == SUCCEEDED_TYPES.len() && all_settled(events)
    })
    .await;
    let first = &events[0];
    assert_eq!(first["status"], "delivered");
    assert_eq!(first["attempts"], 3);
    let codes: Vec<&Value> = first["attempt_log"]
        .as_array()
        .map(|log| log.iter().map(|a| &a["status_code"]).collect())
        .unwrap_or_default();
    assert_eq!(codes, [&json!(500), &json!(500), &json!(200)]);
    assert!(first["attempt_log"][0]["error"]
        .as_str()
        .is_some_and(|e| e.contains("500")));
}

#[actix_web::test]
async fn a_receiver_down_dead_letters_and_replay_delivers_again() {
    let receiver = Receiver::start().await;
    let app = app_for(&receiver).await;
    let merchant = app.merchant().await;
    configure(&app, &merchant, &receiver.url("/down"), WHSEC_SECRET).await;
    receiver.stop();
    let transfer = transfers::create(&app, &merchant, "pm_card_visa").await;
    let transfer_id = id(&transfer);
    finished(&app, &merchant, &transfer_id).await;
    let events = events_when(&app, &merchant, &transfer_id, |events| {
        events.len() == SUCCEEDED_TYPES.len() && all_settled(events)
    })
    .await;
    for event in &events {
        assert_eq!(event["status"], "dead", "{event}");
        assert_eq!(event["attempts"], 3, "one attempt and two retries");
        assert_eq!(event["next_attempt_at"], Value::Null);
        let error = event["attempt_log"][0]["error"]
            .as_str()
            .unwrap_or_default();
        assert!(error.starts_with("connection failed"), "{error}");
    }
    assert_eq!(deliveries(&app, &merchant, "?status=dead").await.len(), 5);

    receiver.restart();
    let replayed = replay(
        &app,
        &merchant.api_key,
        &json!({"transfer_id": transfer_id}),
    )
    .await;
    assert_eq!(replayed.status(), 200);
    let requeued: Value = replayed.json().await.expect("json");
    assert_eq!(requeued, json!({"requeued": 5}));
    let received = receiver.wait_for(5, WAIT_MAX).await;
    let bodies = verified(WHSEC_SECRET, &received);
    let kinds: Vec<&str> = bodies.iter().filter_map(|b| b["type"].as_str()).collect();
    assert_eq!(kinds, SUCCEEDED_TYPES);
    let ids: Vec<&str> = events
        .iter()
        .filter_map(|e| e["event_id"].as_str())
        .collect();
    let delivered_ids: Vec<&str> = received
        .iter()
        .filter_map(|r| r.header("webhook-id"))
        .collect();
    assert_eq!(ids, delivered_ids, "replay sends the same events");
    let after = events_when(&app, &merchant, &transfer_id, all_settled).await;
    assert!(after.iter().all(|event| event["status"] == "delivered"));
    assert!(after
        .iter()
        .all(|event| event["attempt_log"].as_array().map(Vec::len) == Some(4)));

    // Delivered events are re-armed too.
    let again = replay(
        &app,
        &merchant.api_key,
        &json!({"transfer_id": transfer_id}),
    )
    .await;
    assert_eq!(
        again.json::<Value>().await.expect("json"),
        json!({"requeued": 5})
    );
    assert_eq!(receiver.wait_for(10, WAIT_MAX).await.len(), 10);
}

#[actix_web::test]
async fn redirects_are_not_followed() {
    let receiver = Receiver::start().await;
    let app = app_for(&receiver).await;
    let merchant = app.merchant().await;
    configure(&app, &merchant, &receiver.url("/moved"), PLAIN_SECRET).await;
    receiver.redirect_to(&receiver.url("/elsewhere"));
    let transfer = transfers::create(&app, &merchant, "pm_card_visa").await;
    let transfer_id = id(&transfer);
    let events = events_when(&app, &merchant, &transfer_id, |events| {
        events.len() == SUCCEEDED_TYPES.len() && all_settled(events)
    })
    .await;
    assert!(events.iter().all(|event| event["status"] == "dead"));
    assert_eq!(events[0]["attempt_log"][0]["status_code"], 302);
    assert!(receiver.requests().iter().all(|r| r.path == "/moved"));
}

#[actix_web::test]
async fn each_transfers_events_arrive_in_order_under_concurrency_and_failures() {
    const TRANSFERS: usize = 8;
    let receiver = Receiver::start().await;
    let app = app_for(&receiver).await;
    let merchant = app.merchant().await;
    configure(&app, &merchant, &receiver.url("/many"), PLAIN_SECRET).await;
    // Failures scattered over the first deliveries force retries that
    // overtake nothing.
    receiver.fail_next(7, 503);
    let created = futures_util::future::join_all(
        (0..TRANSFERS).map(|_| transfers::create(&app, &merchant, "pm_card_visa")),
    )
    .await;
    for transfer in &created {
        finished(&app, &merchant, &id(transfer)).await;
    }
    let expected = TRANSFERS * SUCCEEDED_TYPES.len() + 7;
    let received = receiver.wait_for(expected, WAIT_MAX).await;
    assert_eq!(received.len(), expected);
    let accepted: Vec<Received> = received.into_iter().filter(|r| r.status == 200).collect();
    let by_transfer = types_by_transfer(&verified(PLAIN_SECRET, &accepted));
    assert_eq!(by_transfer.len(), TRANSFERS);
    for (transfer, kinds) in by_transfer {
        assert_eq!(kinds, SUCCEEDED_TYPES, "transfer {transfer}");
    }
}

#[actix_web::test]
async fn removing_the_endpoint_mid_stream_skips_what_is_left() {
    let receiver = Receiver::start().await;
    let app = app_for(&receiver).await;
    let merchant = app.merchant().await;
    configure(&app, &merchant, &receiver.url("/slow"), PLAIN_SECRET).await;
    // The first delivery hangs while the endpoint is removed.
    receiver.delay(Duration::from_secs(2));
    let transfer = transfers::create(&app, &merchant, "pm_card_visa").await;
    let transfer_id = id(&transfer);
    assert_eq!(receiver.wait_for(1, WAIT_MAX).await.len(), 1);
    let removed = app
        .delete("/v1/webhooks/endpoint")
        .bearer_auth(&merchant.api_key)
        .send()
        .await
        .expect("request");
    assert_eq!(removed.status(), 204);
    receiver.delay(Duration::ZERO);
    let done = finished(&app, &merchant, &transfer_id).await;
    assert_eq!(
        done["status"], "succeeded",
        "nothing fails without an endpoint"
    );
    let events = events_when(&app, &merchant, &transfer_id, |events| {
        events.len() == SUCCEEDED_TYPES.len() && all_settled(events)
    })
    .await;
    assert!(
        events.iter().all(|event| event["status"] == "skipped"),
        "{}",
        Value::from(events.clone())
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        receiver.requests().len(),
        1,
        "nothing is sent after the removal"
    );
}

#[actix_web::test]
async fn a_sigkill_during_a_delivery_is_followed_by_the_same_event_after_restart() {
    let receiver = Receiver::start().await;
    let env = [
        ("TERN_WEBHOOK_ALLOW_PRIVATE", "true".to_owned()),
        (
            "TERN_WEBHOOK_CA_FILE",
            receiver.ca_file().display().to_string(),
        ),
        ("TERN_WEBHOOK_RETRY_SCHEDULE", "100ms,100ms".to_owned()),
    ];
    let mut cluster = Cluster::start_with("200ms,200ms,200ms", &env).await;
    let api_key = cluster.register("Webhook Crash").await;
    put_endpoint_at(
        &cluster.client,
        &cluster.base,
        &api_key,
        &receiver.url("/crash"),
        WHSEC_SECRET,
    )
    .await;
    // The receiver holds the first delivery until Tern is dead.
    receiver.delay(Duration::from_secs(5));
    let quote = quote_at(&cluster.client, &cluster.base, &api_key).await;
    let created = transfer_at(&cluster.client, &cluster.base, &api_key, &quote)
        .send()
        .await
        .expect("transfer");
    assert_eq!(created.status(), 201);
    let first = receiver.wait_for(1, WAIT_MAX).await;
    let first_id = first[0].header("webhook-id").map(str::to_owned);
    cluster.kill();
    receiver.delay(Duration::ZERO);
    cluster.restart().await;

    let received = receiver.wait_for(SUCCEEDED_TYPES.len() + 1, WAIT_MAX).await;
    let bodies = verified(WHSEC_SECRET, &received);
    let kinds: Vec<&str> = bodies.iter().filter_map(|b| b["type"].as_str()).collect();
    // The interrupted delivery again, under the same id, then the rest in order.
    let mut expected = vec!["transfer.pending"];
    expected.extend(SUCCEEDED_TYPES);
    assert_eq!(kinds, expected);
    assert_eq!(
        received[1].header("webhook-id").map(str::to_owned),
        first_id
    );
}

//! The console's pages: stored text escaped, the stylesheet, and a replay
//! pressed in the console reaching a receiver.

use reqwest::header::LOCATION;
use tern_schema::models::WebhookEventRow;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{EventId, MerchantId, TransferId};

use super::{content_type, csrf_of, get, page, post_form, sign_in};
use crate::helpers::transfers::{self, finished, id};
use crate::helpers::webhooks::{
    all_settled, configure, events_when, fast_webhooks, SUCCEEDED_TYPES, WAIT_MAX, WHSEC_SECRET,
};
use crate::helpers::TestApp;
use crate::webhook_receiver::{verify, Receiver};

#[actix_web::test]
async fn stored_text_comes_out_escaped() {
    let app = TestApp::spawn().await;
    let response = app
        .register(serde_json::json!({"organization_name": "<script>alert(1)</script>", "email": "ops@xss.example"}))
        .await;
    assert_eq!(response.status(), 201);
    let body: serde_json::Value = response.json().await.expect("json");
    let merchant = crate::helpers::Merchant {
        merchant_id: MerchantId::new(body["merchant_id"].as_str().expect("id")),
        api_key: body["api_key"].as_str().expect("key").to_owned(),
        api_key_id: body["api_key_id"].as_str().expect("key id").to_owned(),
    };
    let transfer = transfers::create(&app, &merchant, "pm_card_visa").await;
    let transfer_id = id(&transfer);
    finished(&app, &merchant, &transfer_id).await;
    let now = utc_now();
    let row = WebhookEventRow {
        id: EventId::generate(),
        merchant_id: merchant.merchant_id.clone(),
        transfer_id: TransferId::new(transfer_id.as_str()),
        seq: 99,
        // Unique per transfer with the real events, and markup too.
        event_type: "transfer.<b>odd</b>".into(),
        payload: "{}".into(),
        request_id: "console-test".into(),
        status: tern_schema::vocabulary::DeliveryStatus::Dead,
        attempts: 3,
        round: 0,
        next_attempt_at: None,
        last_attempt_at: Some(now),
        last_status_code: Some(500),
        last_error: Some("<img src=x onerror=alert(2)> \"quoted\" & more".into()),
        delivered_at: None,
        created_at: now,
        updated_at: now,
    };
    let inserted: Result<(), tern_schema::StoreError> =
        tern_schema::write_tx!(app.state.db, |tx| {
            tern_schema::store::webhooks::insert_event(tx, &row).await
        });
    inserted.expect("the event is stored");

    let cookie = sign_in(&app).await;
    let html = page(&app, &cookie).await;
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{html}"
    );
    assert!(html.contains("transfer.&lt;b&gt;odd&lt;/b&gt;"), "{html}");
    assert!(
        html.contains("&lt;img src=x onerror=alert(2)&gt; &quot;quoted&quot; &amp; more"),
        "{html}"
    );
    assert!(
        !html.contains("<script") && !html.contains("<img") && !html.contains("<b>"),
        "{html}"
    );
    assert!(
        html.contains(&format!("data-transfer=\"{transfer_id}\"")),
        "{html}"
    );
}

#[actix_web::test]
async fn the_stylesheet_is_served_with_its_type_and_a_long_cache() {
    let app = TestApp::spawn().await;
    let response = get(&app, "/console/assets/console.css", None).await;
    assert_eq!(response.status(), 200);
    assert_eq!(content_type(&response), "text/css; charset=utf-8");
    let cache = response.headers()["cache-control"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(cache.contains("max-age=31536000"), "{cache}");
    assert!(response.text().await.expect("css").contains("font"));
    let html = get(&app, "/console", None)
        .await
        .text()
        .await
        .expect("html");
    assert!(
        html.contains("href=\"/console/assets/console.css?v="),
        "{html}"
    );
}

#[actix_web::test]
async fn replay_from_the_console_delivers_dead_lettered_events() {
    let receiver = Receiver::start().await;
    let ca_file = receiver.ca_file().to_path_buf();
    let app = TestApp::spawn_with(move |config| {
        fast_webhooks(config);
        config.webhook_allow_private = true;
        config.webhook_ca_file = Some(ca_file);
    })
    .await;
    let merchant = app.merchant().await;
    configure(&app, &merchant, &receiver.url("/console"), WHSEC_SECRET).await;
    receiver.stop();
    let transfer_id = id(&transfers::create(&app, &merchant, "pm_card_visa").await);
    events_when(&app, &merchant, &transfer_id, |events| {
        events.len() == SUCCEEDED_TYPES.len() && all_settled(events)
    })
    .await;
    let cookie = sign_in(&app).await;
    let html = page(&app, &cookie).await;
    assert_eq!(
        html.matches("class=\"dead-letter\"").count(),
        SUCCEEDED_TYPES.len(),
        "{html}"
    );
    assert!(html.contains("connection failed"), "{html}");

    receiver.restart();
    let fields = [
        ("csrf", csrf_of(&html)),
        ("merchant_id", merchant.merchant_id.to_string()),
        ("transfer_id", transfer_id.clone()),
    ];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let response = post_form(&app, "/console/replay", Some(&cookie), None, &fields).await;
    assert_eq!(response.status(), 303);
    let location = response.headers()[LOCATION]
        .to_str()
        .expect("ascii")
        .to_owned();
    let shown = get(&app, &location, Some(&cookie))
        .await
        .text()
        .await
        .expect("html");
    assert!(
        shown.contains(&format!("replayed 5 events of transfer {transfer_id}")),
        "{shown}"
    );
    let received = receiver.wait_for(SUCCEEDED_TYPES.len(), WAIT_MAX).await;
    for request in &received {
        verify(WHSEC_SECRET, request).expect("signed by Tern");
    }
    let after = events_when(&app, &merchant, &transfer_id, all_settled).await;
    assert!(after.iter().all(|event| event["status"] == "delivered"));
    assert!(page(&app, &cookie).await.contains("id=\"no-dead-letters\""));
}

#[actix_web::test]
async fn a_failed_provider_call_is_listed() {
    let app = crate::helpers::settlements::app().await;
    let (merchant, usd) = crate::helpers::settlements::funded(&app, "10.00").await;
    crate::helpers::settlements::fault(
        &app,
        serde_json::json!({"target": "custodian", "mode": "transient"}),
    )
    .await;
    let payout = serde_json::json!({"method": "on_chain",
        "amount": {"amount": "1.00", "currency": "USD"}, "source": usd,
        "destination": "tron:TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7", "recipient_name": "Ada"});
    let key = crate::helpers::settlements::create(&app, &merchant, payout).await;
    let settled = crate::helpers::settlements::settled(&app, &merchant, &key).await;
    assert_eq!(settled["status"], "failed");
    let cookie = sign_in(&app).await;
    let html = page(&app, &cookie).await;
    let section = &html[html.find("id=\"provider-failures\"").expect("the section")..];
    assert!(
        section.contains("<tr class=\"provider-failure\"><td>custodian</td>"),
        "{section}"
    );
    assert!(
        section.contains("provider temporarily unavailable"),
        "{section}"
    );
}

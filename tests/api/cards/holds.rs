//! How holds end besides clearing (decisions §10, §15): the network's
//! `authorization.reversal`, full or partial, played through the
//! simulator's `POST /control/reversals` or sent signed; and the expiry of
//! a hold nothing cleared within TERN_CARD_HOLD_TTL. Exactly once, with the
//! ledger balanced after each.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tern_actors::adapters::sign_payload;
use tern_schema::store::timers::{self, TimerRow};
use tern_schema::types::utc_now;

use crate::helpers::cards::{balance, funded_card, list_data, transactions};
use crate::helpers::cards::{json_of, provider_event};
use crate::helpers::{assert_problem, Merchant, TestApp};

/// Short enough to watch a hold expire, long enough that a test acts on an
/// open hold first.
const SHORT_TTL: Duration = Duration::from_secs(2);
const WAIT_MAX: Duration = Duration::from_secs(30);

async fn short_ttl_app() -> TestApp {
    TestApp::spawn_with(|config| config.card_hold_ttl = SHORT_TTL).await
}

/// Plays `path` at the simulator (`/control/...`); answers its JSON.
async fn play(app: &TestApp, path: &str, body: Value) -> Value {
    let response = app
        .client
        .post(format!("{}{path}", app.sandbox()))
        .json(&body)
        .send()
        .await
        .expect("request");
    json_of(response, 200).await
}

/// A swipe of `amount_minor` through the simulator; answers the
/// authorization id of the approval.
async fn swipe(app: &TestApp, card: &str, amount_minor: i64) -> String {
    let played = play(
        app,
        "/control/authorizations",
        json!({"card_id": card, "amount_minor": amount_minor, "currency": "USD", "merchant": "Hotel Tern"}),
    )
    .await;
    assert_eq!(played["decision"]["approved"], true, "{played}");
    played["authorization_id"]
        .as_str()
        .expect("authorization_id")
        .to_owned()
}

async fn events(app: &TestApp, merchant: &Merchant, card: &str) -> Vec<Value> {
    list_data(app, merchant, &format!("/v1/cards/{card}/events")).await
}

/// (balance, available, hold) of the card.
async fn figures(app: &TestApp, merchant: &Merchant, card: &str) -> (i64, i64, i64) {
    let body = balance(app, merchant, card).await;
    let minor = |field: &str| body[field].as_i64().expect(field);
    (
        minor("balance_minor"),
        minor("available_minor"),
        minor("hold_minor"),
    )
}

/// The card's authorization `authorization_id` as listed.
async fn listed(app: &TestApp, merchant: &Merchant, card: &str, authorization_id: &str) -> Value {
    transactions(app, merchant, card)
        .await
        .into_iter()
        .find(|t| t["kind"] == "authorization" && t["authorization_id"] == authorization_id)
        .expect("the authorization is listed")
}

fn event_summary(events: &[Value]) -> Vec<(String, String, i64)> {
    events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default().to_owned(),
                e["status"].as_str().unwrap_or_default().to_owned(),
                e["amount_minor"].as_i64().unwrap_or_default(),
            )
        })
        .collect()
}

fn reversal(card: &str, authorization_id: &str, amount_minor: Option<i64>) -> Value {
    let mut data = json!({"card_id": card, "authorization_id": authorization_id});
    if let Some(amount_minor) = amount_minor {
        data["amount_minor"] = json!(amount_minor);
    }
    json!({"id": format!("evt_rev_{}", uuid::Uuid::new_v4().simple()),
        "type": "authorization.reversal", "data": data})
}

fn clearing(card: &str, authorization_id: &str, amount_minor: Option<i64>) -> Value {
    let mut data = json!({"card_id": card, "authorization_id": authorization_id});
    if let Some(amount_minor) = amount_minor {
        data["amount_minor"] = json!(amount_minor);
    }
    json!({"id": format!("evt_clr_{}", uuid::Uuid::new_v4().simple()),
        "type": "authorization.clearing", "data": data})
}

/// The card's persisted timers (its holds' expiries).
async fn card_timers(app: &TestApp) -> i64 {
    let mut pooled = app.state.db.get().await.expect("connection");
    let count = timers::count_for_kind(&mut pooled.tx(), "card")
        .await
        .expect("count");
    count
}

async fn wait_for_hold(app: &TestApp, merchant: &Merchant, card: &str, hold_minor: i64) {
    let started = Instant::now();
    loop {
        let (_, _, hold) = figures(app, merchant, card).await;
        if hold == hold_minor {
            return;
        }
        assert!(
            started.elapsed() < WAIT_MAX,
            "the hold stayed at {hold}, not {hold_minor}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[actix_web::test]
async fn an_uncleared_hold_expires_and_its_funds_come_back() {
    let app = short_ttl_app().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let authorization_id = swipe(&app, &card, 2_000).await;
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 3_000, 2_000));
    assert_eq!(
        card_timers(&app).await,
        1,
        "the expiry commits with the hold"
    );

    wait_for_hold(&app, &merchant, &card, 0).await;
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 5_000, 0));
    let authorization = listed(&app, &merchant, &card, &authorization_id).await;
    assert_eq!(authorization["status"], "expired", "{authorization}");
    assert_eq!(authorization["hold_minor"], 0);
    assert_eq!(authorization["amount_minor"], 2_000);
    assert_eq!(
        event_summary(&events(&app, &merchant, &card).await),
        [
            ("expiry".into(), "released".into(), 2_000),
            ("authorization".into(), "expired".into(), 2_000)
        ]
    );
    assert_eq!(card_timers(&app).await, 0, "the firing completed its timer");

    // The network clearing it late finds nothing held: ignored.
    let late = clearing(&card, &authorization_id, Some(2_000));
    json_of(provider_event(&app, &late).await, 200).await;
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 5_000, 0));
}

#[actix_web::test]
async fn a_partly_reversed_hold_expires_with_what_is_left() {
    let app = short_ttl_app().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let authorization_id = swipe(&app, &card, 2_000).await;
    let part = reversal(&card, &authorization_id, Some(800));
    json_of(provider_event(&app, &part).await, 200).await;
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 3_800, 1_200));

    wait_for_hold(&app, &merchant, &card, 0).await;
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 5_000, 0));
    assert_eq!(
        event_summary(&events(&app, &merchant, &card).await),
        [
            ("expiry".into(), "released".into(), 1_200),
            ("reversal".into(), "released".into(), 800),
            ("authorization".into(), "expired".into(), 2_000)
        ]
    );
    assert_eq!(card_timers(&app).await, 0);
}

#[actix_web::test]
async fn a_full_reversal_from_the_simulator_releases_the_hold() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let authorization_id = swipe(&app, &card, 2_000).await;
    let kept = swipe(&app, &card, 700).await;
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 2_300, 2_700));

    let played = play(
        &app,
        "/control/reversals",
        json!({"authorization_id": authorization_id, "card_id": card}),
    )
    .await;
    assert_eq!(played["status"], 200, "{played}");
    assert_eq!(
        played["decision"],
        json!({"received": true, "duplicate": false})
    );
    assert!(played["event_id"]
        .as_str()
        .is_some_and(|id| id.starts_with("evt_sbx_")));
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 4_300, 700));
    let reversed = listed(&app, &merchant, &card, &authorization_id).await;
    assert_eq!(reversed["status"], "reversed", "{reversed}");
    assert_eq!(reversed["hold_minor"], 0);
    assert_eq!(
        listed(&app, &merchant, &card, &kept).await["status"],
        "approved"
    );
    let summary = event_summary(&events(&app, &merchant, &card).await);
    assert_eq!(summary[0], ("reversal".into(), "released".into(), 2_000));
    assert_eq!(
        card_timers(&app).await,
        1,
        "only the open hold's expiry is left"
    );

    // Reversed is final: a second reversal and a clearing are ignored.
    let again = play(
        &app,
        "/control/reversals",
        json!({"authorization_id": authorization_id, "card_id": card, "amount_minor": 100}),
    )
    .await;
    assert_eq!(again["status"], 200, "{again}");
    json_of(
        provider_event(&app, &clearing(&card, &authorization_id, None)).await,
        200,
    )
    .await;
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 4_300, 700));

    // The simulator refuses a reversal of no amount before sending it.
    let refused = app
        .client
        .post(format!("{}/control/reversals", app.sandbox()))
        .json(&json!({"authorization_id": kept, "card_id": card, "amount_minor": 0}))
        .send()
        .await
        .expect("request");
    assert_eq!(refused.status(), 400);
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 4_300, 700));
}

#[actix_web::test]
async fn a_partial_reversal_releases_that_much_and_a_clearing_posts_the_rest() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let authorization_id = swipe(&app, &card, 2_000).await;

    let played = play(
        &app,
        "/control/reversals",
        json!({"authorization_id": authorization_id, "card_id": card, "amount_minor": 500}),
    )
    .await;
    assert_eq!(
        played["decision"],
        json!({"received": true, "duplicate": false})
    );
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 3_500, 1_500));
    let open = listed(&app, &merchant, &card, &authorization_id).await;
    assert_eq!(
        (open["status"].as_str(), open["hold_minor"].as_i64()),
        (Some("approved"), Some(1_500)),
        "{open}"
    );
    assert_eq!(
        event_summary(&events(&app, &merchant, &card).await)[0],
        ("reversal".into(), "released".into(), 500)
    );

    // The clearing names no amount: it posts what is still held.
    let cleared = clearing(&card, &authorization_id, None);
    assert_eq!(
        json_of(provider_event(&app, &cleared).await, 200).await,
        json!({"received": true, "duplicate": false})
    );
    assert_eq!(figures(&app, &merchant, &card).await, (3_500, 3_500, 0));
    let done = listed(&app, &merchant, &card, &authorization_id).await;
    assert_eq!(
        (done["status"].as_str(), done["hold_minor"].as_i64()),
        (Some("cleared"), Some(0))
    );
    let kinds: Vec<String> = transactions(&app, &merchant, &card)
        .await
        .iter()
        .map(|t| t["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        kinds,
        ["clear", "authorization"],
        "a reversal shows in the authorization and the events, not as a Transaction kind"
    );
    assert_eq!(
        card_timers(&app).await,
        0,
        "the clearing removed the expiry"
    );
}

#[actix_web::test]
async fn a_repeated_reversal_is_a_no_op_and_one_above_the_hold_releases_the_hold() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let authorization_id = swipe(&app, &card, 2_000).await;

    let part = reversal(&card, &authorization_id, Some(600));
    assert_eq!(
        json_of(provider_event(&app, &part).await, 200).await,
        json!({"received": true, "duplicate": false})
    );
    assert_eq!(
        json_of(provider_event(&app, &part).await, 200).await,
        json!({"received": true, "duplicate": true})
    );
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 3_600, 1_400));

    // Unknown authorizations and cards are ignored, never an error.
    for ignored in [
        reversal(&card, "auth_never_seen", None),
        reversal("card_never_seen", &authorization_id, None),
    ] {
        assert_eq!(
            json_of(provider_event(&app, &ignored).await, 200).await["received"],
            true
        );
    }
    // A reversal of no amount releases nothing: refused, as the simulator does.
    let nothing = reversal(&card, &authorization_id, Some(0));
    assert_problem(provider_event(&app, &nothing).await, 400, "bad-request").await;
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 3_600, 1_400));

    let above = reversal(&card, &authorization_id, Some(99_999));
    json_of(provider_event(&app, &above).await, 200).await;
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 5_000, 0));
    assert_eq!(
        listed(&app, &merchant, &card, &authorization_id).await["status"],
        "reversed"
    );
    assert_eq!(
        event_summary(&events(&app, &merchant, &card).await),
        [
            ("reversal".into(), "released".into(), 1_400),
            ("reversal".into(), "released".into(), 600),
            ("authorization".into(), "reversed".into(), 2_000)
        ]
    );
}

#[actix_web::test]
async fn an_expiry_after_the_clearing_does_nothing() {
    let app = short_ttl_app().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let authorization_id = swipe(&app, &card, 2_000).await;
    let cleared = clearing(&card, &authorization_id, Some(2_000));
    json_of(provider_event(&app, &cleared).await, 200).await;
    assert_eq!(figures(&app, &merchant, &card).await, (3_000, 3_000, 0));
    assert_eq!(
        card_timers(&app).await,
        0,
        "the clearing removed the expiry"
    );

    // A firing that was already under way when the clearing came (or a
    // timer carried over by the migration) finds the hold ended.
    let authorization = listed(&app, &merchant, &card, &authorization_id).await;
    let row_id = authorization["id"].as_str().expect("id");
    let now = utc_now();
    let stale = TimerRow {
        id: format!("{card}:hold:{row_id}"),
        kind: "card".into(),
        entity_id: card.clone(),
        due_at: now,
        payload: format!("expire_hold:{row_id}"),
        claim_token: None,
        claimed_until: None,
        attempts: 0,
        created_at: now,
        slot: 0,
    };
    let inserted: Result<(), tern_schema::StoreError> =
        tern_schema::write_tx!(app.state.db, |tx| timers::insert(tx, &stale).await);
    inserted.expect("the timer is stored");
    let started = Instant::now();
    while card_timers(&app).await > 0 {
        assert!(started.elapsed() < WAIT_MAX, "the timer never fired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // And past the hold's own lifetime nothing else happens either.
    tokio::time::sleep(SHORT_TTL + Duration::from_millis(1_500)).await;
    assert_eq!(figures(&app, &merchant, &card).await, (3_000, 3_000, 0));
    assert_eq!(
        listed(&app, &merchant, &card, &authorization_id).await["status"],
        "cleared"
    );
    let types: Vec<String> = event_summary(&events(&app, &merchant, &card).await)
        .into_iter()
        .map(|(kind, ..)| kind)
        .collect();
    assert_eq!(types, ["clearing", "authorization"]);
}

#[actix_web::test]
async fn a_reversal_with_a_bad_signature_is_refused_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let authorization_id = swipe(&app, &card, 2_000).await;
    let event = reversal(&card, &authorization_id, None);
    let body = event.to_string();
    let forged = sign_payload(
        b"not-the-provider-secret",
        chrono::Utc::now().timestamp(),
        body.as_bytes(),
    );
    let refused = app
        .post("/v1/webhooks/sandbox")
        .header("content-type", "application/json")
        .header("X-Sandbox-Signature", forged)
        .body(body)
        .send()
        .await
        .expect("request");
    assert_problem(refused, 400, "invalid-signature").await;
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 3_000, 2_000));
    assert_eq!(
        listed(&app, &merchant, &card, &authorization_id).await["status"],
        "approved"
    );

    // Nothing was recorded: the same event, signed, is new.
    assert_eq!(
        json_of(provider_event(&app, &event).await, 200).await,
        json!({"received": true, "duplicate": false})
    );
    assert_eq!(figures(&app, &merchant, &card).await, (5_000, 5_000, 0));
}

/// Tern's expiry of a hold is recorded under an event id of its own
/// (`tern_expiry:<authorization row id>`); a provider event that takes the
/// same id first must not make the expiry a duplicate.
#[actix_web::test]
async fn a_provider_event_named_like_an_expiry_does_not_stop_the_hold_expiring() {
    let app = short_ttl_app().await;
    let (merchant, card) = funded_card(&app, "50.00").await;
    let authorization_id = swipe(&app, &card, 2_000).await;
    let row_id = listed(&app, &merchant, &card, &authorization_id).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let squatter = json!({"id": format!("tern_expiry:{row_id}"), "type": "refund.succeeded",
        "data": {"card_id": card, "amount_minor": 100, "currency": "USD"}});
    assert_eq!(
        json_of(provider_event(&app, &squatter).await, 200).await,
        json!({"received": true, "duplicate": false})
    );
    assert_eq!(figures(&app, &merchant, &card).await, (5_100, 3_100, 2_000));

    wait_for_hold(&app, &merchant, &card, 0).await;
    assert_eq!(figures(&app, &merchant, &card).await, (5_100, 5_100, 0));
    assert_eq!(
        listed(&app, &merchant, &card, &authorization_id).await["status"],
        "expired"
    );
    assert_eq!(card_timers(&app).await, 0, "the firing completed its timer");
    // The provider's event is still its own: sent again, a duplicate.
    assert_eq!(
        json_of(provider_event(&app, &squatter).await, 200).await,
        json!({"received": true, "duplicate": true})
    );
    assert_eq!(figures(&app, &merchant, &card).await, (5_100, 5_100, 0));
}

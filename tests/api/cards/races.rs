//! Card events raced and replayed against one card.
//! Every open authorization keeps one expiry timer and every ended one
//! none; each replay answers duplicate; the books balance.

use futures_util::future::join_all;
use serde_json::{json, Value};
use tern_schema::store::timers;

use crate::helpers::cards::{authorization, json_of, provider_event};
use crate::helpers::cards::{balance, funded_card, transactions};
use crate::helpers::TestApp;

fn event(kind: &str, card: &str, authorization_id: &str, amount_minor: Option<i64>) -> Value {
    let mut data = json!({"card_id": card, "authorization_id": authorization_id});
    if let Some(amount_minor) = amount_minor {
        data["amount_minor"] = json!(amount_minor);
    }
    json!({"id": format!("evt_{}_{}", kind.replace('.', "_"), uuid::Uuid::new_v4().simple()),
        "type": kind, "data": data})
}

async fn send_all(app: &TestApp, events: &[Value]) -> Vec<(u16, Value)> {
    join_all(events.iter().map(|e| async move {
        let response = provider_event(app, e).await;
        let status = response.status().as_u16();
        (
            status,
            response.json::<Value>().await.unwrap_or(Value::Null),
        )
    }))
    .await
}

async fn approve(app: &TestApp, card: &str, amount: i64) -> (Value, String) {
    let event = authorization(card, amount, "pos", "US");
    let decision = json_of(provider_event(app, &event).await, 200).await;
    assert_eq!(decision["approved"], true, "{decision}");
    let id = event["data"]["authorization_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (event, id)
}

async fn card_timers(app: &TestApp) -> i64 {
    let mut pooled = app.state.db.get().await.expect("connection");
    let count = timers::count_for_kind(&mut pooled.tx(), "card")
        .await
        .expect("count");
    count
}

#[actix_web::test]
async fn card_events_raced_and_replayed_move_money_once_and_answer_as_repeats() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "100.00").await;
    let (_, a1) = approve(&app, &card, 1_000).await;
    let (_, a2) = approve(&app, &card, 2_000).await;
    let (_, a3) = approve(&app, &card, 3_000).await;
    let (_, _a4) = approve(&app, &card, 500).await;
    assert_eq!(card_timers(&app).await, 4);

    // The same clearing twice at once.
    let clear1 = event("authorization.clearing", &card, &a1, None);
    let got = send_all(&app, &[clear1.clone(), clear1.clone()]).await;
    eprintln!("same clearing twice: {got:?}");
    let dups: Vec<bool> = got.iter().map(|(_, b)| b["duplicate"] == true).collect();
    assert!(got.iter().all(|(s, _)| *s == 200), "{got:?}");
    assert_eq!(dups.iter().filter(|d| **d).count(), 1, "{got:?}");

    // A clearing and a full reversal of one authorization at once.
    let clear2 = event("authorization.clearing", &card, &a2, None);
    let rev2 = event("authorization.reversal", &card, &a2, None);
    let got = send_all(&app, &[clear2.clone(), rev2.clone()]).await;
    eprintln!("clear+reverse: {got:?}");
    assert!(got.iter().all(|(s, _)| *s == 200), "{got:?}");

    // Part reversed, then a clearing of more than the rest.
    let rev3 = event("authorization.reversal", &card, &a3, Some(1_000));
    let clear3 = event("authorization.clearing", &card, &a3, Some(5_000));
    json_of(provider_event(&app, &rev3).await, 200).await;
    json_of(provider_event(&app, &clear3).await, 200).await;

    // One authorization event twice at once, and one authorization id under
    // two event ids at once.
    let a5 = authorization(&card, 700, "pos", "US");
    let mut a6a = authorization(&card, 300, "pos", "US");
    let mut a6b = authorization(&card, 300, "pos", "US");
    a6a["data"]["authorization_id"] = json!("auth_same");
    a6b["data"]["authorization_id"] = json!("auth_same");
    let got = send_all(&app, &[a5.clone(), a5.clone(), a6a.clone(), a6b.clone()]).await;
    eprintln!("auth dups: {got:?}");
    assert!(
        got.iter().all(|(s, b)| *s == 200 && b["approved"] == true),
        "{got:?}"
    );
    assert_eq!(got[0].1["transaction_id"], got[1].1["transaction_id"]);
    assert_eq!(got[2].1["transaction_id"], got[3].1["transaction_id"]);

    // A refund twice at once.
    let refund = json!({"id": format!("evt_ref_{}", uuid::Uuid::new_v4().simple()),
        "type": "refund.succeeded", "data": {"card_id": card, "amount_minor": 250,
        "currency": "USD"}});
    let got = send_all(&app, &[refund.clone(), refund.clone()]).await;
    eprintln!("refund twice: {got:?}");
    assert_eq!(
        got.iter().filter(|(_, b)| b["duplicate"] == true).count(),
        1,
        "{got:?}"
    );

    // Open: a4 (500), a5 (700), auth_same (300).
    let body = balance(&app, &merchant, &card).await;
    eprintln!("balance: {body}");
    assert_eq!(body["hold_minor"], 1_500, "{body}");
    assert_eq!(
        card_timers(&app).await,
        3,
        "one expiry timer per open authorization"
    );
    let listed = transactions(&app, &merchant, &card).await;
    let open = listed
        .iter()
        .filter(|t| t["kind"] == "authorization" && t["status"] == "approved")
        .count();
    assert_eq!(open, 3, "{listed:#?}");

    // Every event replayed answers duplicate, and changes nothing. Of
    // clear2 and rev2, whichever lost was ignored (not recorded) and
    // answers as it did the first time.
    let mut recorded = 0;
    for raced in [&clear2, &rev2] {
        let again = json_of(provider_event(&app, raced).await, 200).await;
        recorded += usize::from(again["duplicate"] == true);
    }
    assert_eq!(
        recorded, 1,
        "one of a clearing and a reversal raced is recorded"
    );
    for replay in [&clear1, &rev3, &clear3, &refund] {
        let again = json_of(provider_event(&app, replay).await, 200).await;
        assert_eq!(again["duplicate"], true, "{replay} -> {again}");
    }
    for replay in [&a5, &a6a, &a6b] {
        let again = json_of(provider_event(&app, replay).await, 200).await;
        assert_eq!(again["duplicate"], true, "{replay} -> {again}");
    }
    assert_eq!(balance(&app, &merchant, &card).await, body);
}

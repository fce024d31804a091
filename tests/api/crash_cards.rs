//! A card whose issue was under way when the process died is finished by
//! the next process, with one issue at the issuer: the intent was durable
//! before the call and the retry reuses its key. A hold whose expiry fell
//! due while no process ran is released by the next one, and a freeze the
//! issuer carried out before the process died is finished by the next one,
//! as is a wallet token the issuer made.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::humans::sign_up_at;
use crate::helpers::RequestExt;
use crate::processes::Cluster;

const WAIT_MAX: Duration = Duration::from_secs(60);

async fn cards(cluster: &Cluster, cookie: &str) -> Value {
    get_json(cluster, cookie, "/v1/cards").await
}

#[actix_web::test]
async fn a_card_being_issued_when_the_process_dies_is_issued_once_after_restart() {
    let mut cluster = Cluster::start("1s").await;
    let (cookie, user_id) = sign_up_at(&cluster.client, &cluster.base).await;

    // The issuer issues the card, then holds its answer past the kill.
    cluster
        .arm(json!({"target": "issuer", "match": {"user_id": user_id}, "mode": "timeout_after_success", "count": 1}))
        .await;
    let url = format!("{}/v1/cards", cluster.base);
    let request = cluster.client.post(url).header("cookie", &cookie);
    cluster.kill_after_issuer(request, "issue").await;

    cluster.restart().await;
    let started = Instant::now();
    let card = loop {
        let listed = cards(&cluster, &cookie).await;
        if let Some(card) = listed["data"].as_array().and_then(|data| data.first()) {
            break card.clone();
        }
        assert!(
            started.elapsed() < WAIT_MAX,
            "the card was never finished: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(card["status"], "active", "{card}");
    let issued = cluster.issuer_keys("issue").await;
    assert_eq!(issued.len(), 1, "{issued:?}");
    assert_eq!(card["id"], issued[0].as_str());
    // The finished card is the user's one live virtual card.
    let again = cluster
        .client
        .post(format!("{}/v1/cards", cluster.base))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("second card");
    assert_eq!(again.status(), 409);
    assert_eq!(
        cards(&cluster, &cookie).await["data"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

async fn get_json(cluster: &Cluster, cookie: &str, path: &str) -> Value {
    cluster
        .client
        .get(format!("{}{path}", cluster.base))
        .header("cookie", cookie)
        .read_json()
        .await
}

/// Issues the person's card; answers its id.
async fn issue_card(cluster: &Cluster, cookie: &str) -> String {
    let issued = cluster
        .client
        .post(format!("{}/v1/cards", cluster.base))
        .header("cookie", cookie)
        .send()
        .await
        .expect("issue");
    assert_eq!(issued.status(), 201);
    let card: Value = issued.json().await.expect("json");
    card["id"].as_str().expect("id").to_owned()
}

/// Funds the person's merchant with a 50.00 USD card charge.
async fn fund(cluster: &Cluster, cookie: &str) {
    let accounts = get_json(cluster, cookie, "/v1/ledger/accounts").await;
    let usd = accounts["data"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["currency"] == "USD"))
        .and_then(|a| a["id"].as_str())
        .expect("USD account")
        .to_owned();
    let key = uuid::Uuid::new_v4().to_string();
    let created = cluster
        .client
        .post(format!("{}/v1/settlements", cluster.base))
        .header("cookie", cookie)
        .header("Idempotency-Key", &key)
        .json(
            &json!({"method": "card_charge", "amount": {"amount": "50.00", "currency": "USD"},
            "source": usd, "destination": "pm_card_visa", "recipient_name": "Ada Lovelace"}),
        )
        .send()
        .await
        .expect("charge");
    assert_eq!(created.status(), 201);
    let started = Instant::now();
    loop {
        let settlement = get_json(cluster, cookie, &format!("/v1/settlements/{key}")).await;
        if settlement["status"] == "succeeded" {
            return;
        }
        assert!(started.elapsed() < WAIT_MAX, "never funded: {settlement}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[actix_web::test]
async fn a_hold_that_fell_due_while_the_process_was_down_expires_after_restart() {
    let mut cluster = Cluster::start_with("1s", &[("TERN_CARD_HOLD_TTL", "3s".to_owned())]).await;
    let (cookie, _) = sign_up_at(&cluster.client, &cluster.base).await;
    fund(&cluster, &cookie).await;
    let card_id = issue_card(&cluster, &cookie).await;
    let swiped: Value = cluster
        .client
        .post(format!("{}/control/authorizations", cluster.sandbox_url))
        .json(&json!({"card_id": card_id, "amount_minor": 2_000, "currency": "USD"}))
        .read_json()
        .await;
    assert_eq!(swiped["decision"]["approved"], true, "{swiped}");
    let balance_path = format!("/v1/cards/{card_id}/balance");
    assert_eq!(
        get_json(&cluster, &cookie, &balance_path).await["hold_minor"],
        2_000
    );

    cluster.kill();
    // Past the hold's lifetime with no process to fire its timer.
    tokio::time::sleep(Duration::from_secs(4)).await;
    cluster.restart().await;
    let started = Instant::now();
    let balance = loop {
        let balance = get_json(&cluster, &cookie, &balance_path).await;
        if balance["hold_minor"] == 0 {
            break balance;
        }
        assert!(
            started.elapsed() < WAIT_MAX,
            "the hold was never released: {balance}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(balance["available_minor"], 5_000, "{balance}");
    assert_eq!(balance["balance_minor"], 5_000, "{balance}");
    let listed = get_json(
        &cluster,
        &cookie,
        &format!("/v1/cards/{card_id}/transactions"),
    )
    .await;
    assert_eq!(listed["data"][0]["status"], "expired", "{listed}");
    let events = get_json(&cluster, &cookie, &format!("/v1/cards/{card_id}/events")).await;
    let types: Vec<&str> = events["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert_eq!(types, ["expiry", "authorization"], "released once");
}

#[actix_web::test]
async fn a_freeze_cut_short_after_the_issuer_froze_the_card_is_finished_after_restart() {
    let mut cluster = Cluster::start("1s").await;
    let (cookie, user_id) = sign_up_at(&cluster.client, &cluster.base).await;
    let card_id = issue_card(&cluster, &cookie).await;

    // The issuer freezes the card, then holds its answer past the kill.
    cluster
        .arm(
            json!({"target": "issuer", "match": {"user_id": user_id, "operation": "status"},
                    "mode": "timeout_after_success", "count": 1}),
        )
        .await;
    let url = format!("{}/v1/cards/{card_id}/freeze", cluster.base);
    let request = cluster.client.post(url).header("cookie", &cookie);
    cluster.kill_after_issuer(request, "status").await;

    cluster.restart().await;
    let path = format!("/v1/cards/{card_id}");
    let started = Instant::now();
    loop {
        let card = get_json(&cluster, &cookie, &path).await;
        if card["status"] == "frozen" {
            break;
        }
        assert!(
            started.elapsed() < WAIT_MAX,
            "Tern never caught up with the issuer: {card}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let changes = cluster.issuer_keys("status").await;
    assert_eq!(changes.len(), 1, "frozen once at the issuer: {changes:?}");
}

#[actix_web::test]
async fn a_token_made_before_the_process_died_is_recorded_when_the_issuer_reports_it() {
    let mut cluster = Cluster::start("1s").await;
    let (cookie, user_id) = sign_up_at(&cluster.client, &cluster.base).await;
    let card_id = issue_card(&cluster, &cookie).await;

    // The issuer makes the token, then holds its answer past the kill.
    cluster
        .arm(
            json!({"target": "issuer", "match": {"user_id": user_id, "operation": "wallet"},
                    "mode": "timeout_after_success", "count": 1}),
        )
        .await;
    let url = format!("{}/v1/cards/{card_id}/wallet/apple_pay", cluster.base);
    let request = cluster
        .client
        .post(url)
        .header("cookie", &cookie)
        .json(&json!({}));
    cluster.kill_after_issuer(request, "wallet").await;
    cluster.restart().await;

    // The issuer's `wallet_token.updated` (re-sent for about 12 s) arrives
    // while the provisioning's intent still waits (20 s provider timeout):
    // it proves the token was made, and Tern records the token and the
    // update. Were it refused until the intent ran, the issuer would have
    // given up and the token would stay `requested`.
    let path = format!("/v1/cards/{card_id}/wallet/status");
    let started = Instant::now();
    let view = loop {
        let view = get_json(&cluster, &cookie, &path).await;
        if view["tokens"][0]["status"] == "active" {
            break view;
        }
        assert!(
            started.elapsed() < WAIT_MAX,
            "the token never became active: {view}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(view["tokens"].as_array().map(Vec::len), Some(1), "{view}");
    let made = cluster.issuer_keys("wallet").await;
    assert_eq!(made.len(), 1, "made once at the issuer: {made:?}");
}

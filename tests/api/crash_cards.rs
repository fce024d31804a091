//! A card whose issue was under way when the process died is finished by
//! the next process, with one issue at the issuer: the intent was durable
//! before the call and the retry reuses its key.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::processes::Cluster;

const WAIT_MAX: Duration = Duration::from_secs(60);

async fn issues(cluster: &Cluster) -> Vec<Value> {
    let executions: Value = cluster
        .client
        .get(format!("{}/control/executions", cluster.sandbox_url))
        .send()
        .await
        .expect("executions")
        .json()
        .await
        .expect("json");
    executions["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|e| e["target"] == "issuer" && e["operation"] == "issue")
        .cloned()
        .collect()
}

async fn cards(cluster: &Cluster, cookie: &str) -> Value {
    cluster
        .client
        .get(format!("{}/v1/cards", cluster.base))
        .header("cookie", cookie)
        .send()
        .await
        .expect("cards")
        .json()
        .await
        .expect("json")
}

#[actix_web::test]
async fn a_card_being_issued_when_the_process_dies_is_issued_once_after_restart() {
    let mut cluster = Cluster::start("1s").await;
    let email = format!("c{}@crash.example", uuid::Uuid::new_v4().simple());
    let registered = cluster
        .client
        .post(format!("{}/v1/auth/register", cluster.base))
        .json(&json!({"name": "Ada Lovelace", "email": email, "password": "correct horse battery"}))
        .send()
        .await
        .expect("register");
    assert_eq!(registered.status(), 201);
    let cookie = registered
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("svc_session="))
        .and_then(|v| v.split(';').next())
        .expect("session cookie")
        .to_owned();
    let user: Value = registered.json().await.expect("json");
    let user_id = user["user_id"].as_str().expect("user_id").to_owned();

    // The issuer issues the card, then holds its answer past the kill.
    cluster
        .arm(json!({"target": "issuer", "match": {"user_id": user_id}, "mode": "timeout_after_success", "count": 1}))
        .await;
    let client = cluster.client.clone();
    let url = format!("{}/v1/cards", cluster.base);
    let pending_cookie = cookie.clone();
    let hanging = actix_web::rt::spawn(async move {
        let _ = client
            .post(url)
            .header("cookie", pending_cookie)
            .send()
            .await;
    });
    let started = Instant::now();
    while issues(&cluster).await.is_empty() {
        assert!(started.elapsed() < WAIT_MAX, "the issuer never issued");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.kill();
    hanging.abort();

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
    let issued = issues(&cluster).await;
    assert_eq!(issued.len(), 1, "{issued:?}");
    assert_eq!(issued[0]["key"], card["id"]);
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

//! Two Tern processes on one PostgreSQL: a card replacement whose node was
//! killed while the issuer made the new card is finished by the node that
//! takes its slots, with one card made at the issuer. Skipped without
//! PostgreSQL.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::humans::sign_up_at;
use crate::helpers::RequestExt;
use crate::nodes::Nodes;
use crate::processes::hang;

const WAIT_MAX: Duration = Duration::from_secs(60);

async fn cards(nodes: &Nodes, node: usize, cookie: &str) -> Vec<Value> {
    let listed: Value = nodes
        .client
        .get(format!("{}/v1/cards", nodes.bases[node]))
        .header("cookie", cookie)
        .read_json()
        .await;
    listed["data"].as_array().cloned().unwrap_or_default()
}

#[actix_web::test]
async fn a_replacement_whose_node_died_during_the_issuer_call_is_finished_by_another() {
    let Some(mut nodes) = Nodes::start(2, &[]).await else {
        eprintln!("skipped: several nodes need PostgreSQL (TERN_TEST_DATABASE_URL)");
        return;
    };
    let (cookie, user_id) = sign_up_at(&nodes.client, &nodes.bases[0]).await;
    // Created through node 0: its id is minted in a slot node 0 owns.
    let created: Value = nodes
        .client
        .post(format!("{}/v1/cards", nodes.bases[0]))
        .header("cookie", &cookie)
        .read_json()
        .await;
    let old_id = created["id"].as_str().expect("id").to_owned();

    // The issuer makes the new card, then holds its answer past the kill.
    nodes
        .arm(
            json!({"target": "issuer", "match": {"user_id": user_id, "operation": "issue"},
                    "mode": "timeout_after_success", "count": 1}),
        )
        .await;
    let url = format!("{}/v1/cards/{old_id}/replace", nodes.bases[0]);
    let hanging = hang(nodes.client.post(url).header("cookie", &cookie));
    let started = Instant::now();
    while nodes.issuer_keys("issue").await.len() < 2 {
        assert!(started.elapsed() < WAIT_MAX, "the issuer never made it");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    nodes.kill(0);
    hanging.abort();
    nodes.settled(&[1]).await;

    let started = Instant::now();
    let listed = loop {
        let listed = cards(&nodes, 1, &cookie).await;
        if listed
            .iter()
            .any(|card| card["id"] != old_id.as_str() && card["status"] == "active")
        {
            break listed;
        }
        assert!(
            started.elapsed() < WAIT_MAX,
            "the replacement was never finished: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let old = listed
        .iter()
        .find(|card| card["id"] == old_id.as_str())
        .expect("the old card is listed");
    assert_eq!(old["status"], "blocked", "{old}");
    let new = listed
        .iter()
        .find(|card| card["id"] != old_id.as_str())
        .expect("the replacement");
    assert_eq!(old["replaced_by_card_id"], new["id"], "{listed:?}");
    let keys = nodes.issuer_keys("issue").await;
    assert_eq!(keys.len(), 2, "one card made per issue: {keys:?}");
    assert!(keys.iter().any(|key| new["id"] == key.as_str()), "{keys:?}");
}

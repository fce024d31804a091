//! Exactly-once across crashes: the real binary is killed with SIGKILL while
//! settlements are in every stage (pending, a provider call executed but its
//! answer not yet committed, a retry wait), then started again on the same
//! database. The provider is a standalone `tern sandbox` process that
//! outlives Tern, as a real provider would, and counts its executions.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use uuid::Uuid;

use crate::helpers::RequestExt;
use crate::processes::Cluster;

const WAIT_MAX: Duration = Duration::from_secs(60);
/// Wide windows: a retry waits 3 s, long enough to be killed in.
const RETRY_SCHEDULE: &str = "3s,1s,1s,1s";

struct Api {
    client: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    async fn create(&self, key: &str, body: &Value) -> u16 {
        self.client
            .post(format!("{}/v1/settlements", self.base))
            .bearer_auth(&self.key)
            .header("Idempotency-Key", key)
            .json(body)
            .send()
            .await
            .expect("request")
            .status()
            .as_u16()
    }

    async fn status(&self, key: &str) -> String {
        let body: Value = self
            .client
            .get(format!("{}/v1/settlements/{key}", self.base))
            .bearer_auth(&self.key)
            .read_json()
            .await;
        body["status"].as_str().unwrap_or_default().to_owned()
    }

    /// The merchant's USD funding account, as the ledger lists it.
    async fn usd_account(&self) -> Value {
        let accounts: Value = self
            .client
            .get(format!("{}/v1/ledger/accounts", self.base))
            .bearer_auth(&self.key)
            .read_json()
            .await;
        accounts["data"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["currency"] == "USD"))
            .cloned()
            .expect("USD account")
    }

    async fn wait_for(&self, key: &str, wanted: &[&str]) -> String {
        let started = Instant::now();
        loop {
            let status = self.status(key).await;
            if wanted.contains(&status.as_str()) {
                return status;
            }
            assert!(started.elapsed() < WAIT_MAX, "{key} stuck in {status}");
            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn push(source: &str, card: &str) -> Value {
    json!({"method": "card_push", "amount": {"amount": "1.00", "currency": "USD"},
        "source": source, "destination": card, "recipient_name": "Ada"})
}

#[actix_web::test]
async fn a_killed_process_loses_nothing_and_repeats_nothing() {
    let mut cluster = Cluster::start(RETRY_SCHEDULE).await;
    let api = Api {
        client: cluster.client.clone(),
        base: cluster.base.clone(),
        key: cluster.register("Crash Test").await,
    };
    let usd = api.usd_account().await["id"]
        .as_str()
        .expect("USD account id")
        .to_owned();
    let funding = Uuid::new_v4().to_string();
    let charge = json!({"method": "card_charge", "amount": {"amount": "100.00", "currency": "USD"},
        "source": usd, "destination": "pm_card_visa", "recipient_name": "Ada"});
    assert_eq!(api.create(&funding, &charge).await, 201);
    api.wait_for(&funding, &["succeeded"]).await;

    // The provider executes this push, then holds its answer past the kill.
    cluster
        .arm(json!({"target": "card_push", "match": {"destination": "tok_hang"}, "mode": "timeout_after_success", "count": 1}))
        .await;
    // This one fails once and waits 3 s for its retry: killed in the wait.
    cluster
        .arm(json!({"target": "card_push", "match": {"destination": "tok_retry"}, "mode": "transient", "count": 1}))
        .await;
    let hang = Uuid::new_v4().to_string();
    let retry = Uuid::new_v4().to_string();
    assert_eq!(api.create(&hang, &push(&usd, "tok_hang")).await, 201);
    assert_eq!(api.create(&retry, &push(&usd, "tok_retry")).await, 201);
    api.wait_for(&retry, &["retrying"]).await;
    // A burst whose intents are durable but whose calls race the kill.
    let burst: Vec<String> = (0..30).map(|_| Uuid::new_v4().to_string()).collect();
    let burst_body = push(&usd, "tok_burst");
    let creates = burst.iter().map(|key| api.create(key, &burst_body));
    let statuses = futures_util::future::join_all(creates).await;
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    assert_eq!(
        api.status(&hang).await,
        "in_flight",
        "the executed call has no answer yet"
    );
    cluster.kill();

    // A new process on the same database finishes everything.
    cluster.restart().await;
    let mut all = vec![hang.clone(), retry.clone()];
    all.extend(burst.iter().cloned());
    for key in &all {
        assert_eq!(
            api.wait_for(key, &["succeeded", "failed"]).await,
            "succeeded",
            "{key}"
        );
    }
    for key in &all {
        let operations = cluster.operations(key).await;
        assert_eq!(operations, ["push"], "{key} executed {operations:?}");
    }
    let usd_account = api.usd_account().await;
    let expected = 10_000 - 100 * all.len() as i64;
    assert_eq!(usd_account["balance_minor"], expected, "{usd_account}");
    assert_eq!(usd_account["pending_minor"], 0, "{usd_account}");
}

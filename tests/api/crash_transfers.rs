//! Exactly-once across crashes for transfers (decisions §7, §15): the real
//! binary is killed with SIGKILL while transfers are held in every stage of
//! the saga (a leg's provider call executed but unanswered, a leg's retry
//! wait, a refund executed but unanswered, a refund's retry wait, and a burst
//! racing the kill between legs), then started again on the same database.
//! Every transfer must end as its faults dictate, each provider operation of
//! each leg executed exactly once, and the ledger balanced.
//!
//! Faults are matched per group, so each group is held in one stage: by
//! payment method and operation at the acquirer, by wallet at the custodian.
//! Count-limited faults are spent before the kill, so the restarted process
//! meets a recovered provider.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tern_schema::store::transfers;
use tern_schema::vocabulary::{TransferId, TransferStatus};
use tern_schema::Db;
use uuid::Uuid;

use crate::helpers::RequestExt;
use crate::processes::Cluster;

/// How long any one awaited state may take to show.
const WAIT_MAX: Duration = Duration::from_secs(60);
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// A leg's or a refund's first retry waits 10 s: long enough for every
/// group to reach its stage and be killed there, short enough for the
/// restarted process to finish soon after.
const RETRY_SCHEDULE: &str = "10s,1s,1s,1s";
/// Transfers held in each deterministic stage.
const GROUP_TRANSFERS: usize = 10;
/// Transfers created all at once just before the kill.
const BURST_TRANSFERS: usize = 20;
const VISA: &str = "pm_card_visa";
const MASTERCARD: &str = "pm_card_mastercard";

/// A polygon wallet of one group: lower-case hex, so no EIP-55 checksum.
fn wallet(group: u8) -> String {
    format!("0x{group:040x}")
}

/// How a transfer must end once the restarted process is done with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Both legs succeeded: one charge, one payout.
    Paid,
    /// Leg 2 was declined and leg 1 refunded: one charge, one payout
    /// (the declined one), one refund.
    Refunded,
}

#[derive(Clone, Debug)]
struct Transfer {
    id: String,
    leg1_key: String,
    leg2_key: String,
    outcome: Outcome,
}

struct Api {
    client: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    async fn get(&self, path: &str) -> Value {
        self.client
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .json_at(200)
            .await
    }

    async fn post(&self, path: &str, body: &Value, idempotency_key: Option<&str>) -> Value {
        let mut request = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .json(body);
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        let response = request.send().await.expect("request");
        let status = response.status();
        let body: Value = response.json().await.expect("json");
        assert_eq!(status, 201, "POST {path}: {body}");
        body
    }

    /// A quote of 100.00 USD into USDC on polygon, and a transfer on it.
    async fn create(&self, card_pm: &str, wallet: &str, outcome: Outcome) -> Transfer {
        let quote = json!({"send_currency": "USD", "send_amount": "100.00",
            "receive_asset": "USDC", "receive_network": "polygon"});
        let quote = self.post("/v1/quotes", &quote, None).await;
        let body = json!({"flow": "tern", "quote_id": quote["quote_id"], "card_pm": card_pm,
            "wallet": wallet, "network": "polygon", "asset": "USDC"});
        let key = Uuid::new_v4().to_string();
        let created = self.post("/v1/transfers", &body, Some(&key)).await;
        let leg = |index: usize| {
            created["legs"][index]["settlement_key"]
                .as_str()
                .expect("leg key")
                .to_owned()
        };
        Transfer {
            id: created["id"].as_str().expect("id").to_owned(),
            leg1_key: leg(0),
            leg2_key: leg(1),
            outcome,
        }
    }

    /// `count` transfers created concurrently.
    async fn create_many(
        &self,
        count: usize,
        card_pm: &str,
        wallet: &str,
        outcome: Outcome,
    ) -> Vec<Transfer> {
        let creates = (0..count).map(|_| self.create(card_pm, wallet, outcome));
        futures_util::future::join_all(creates).await
    }

    async fn transfer(&self, id: &str) -> Value {
        self.get(&format!("/v1/transfers/{id}")).await
    }

    /// A leg's settlement status; `not_created` before the transfer has
    /// made the leg (leg 2 exists only once leg 1 succeeded).
    async fn settlement_status(&self, key: &str) -> String {
        let response = self
            .client
            .get(format!("{}/v1/settlements/{key}", self.base))
            .bearer_auth(&self.key)
            .send()
            .await
            .expect("request");
        if response.status() == 404 {
            return "not_created".to_owned();
        }
        assert_eq!(response.status(), 200, "GET /v1/settlements/{key}");
        let body: Value = response.json().await.expect("json");
        body["status"].as_str().unwrap_or_default().to_owned()
    }

    async fn wait_transfer(&self, id: &str, wanted: &[&str]) -> Value {
        let started = Instant::now();
        loop {
            let body = self.transfer(id).await;
            if wanted.contains(&body["status"].as_str().unwrap_or_default()) {
                return body;
            }
            assert!(
                started.elapsed() < WAIT_MAX,
                "{id} never {wanted:?}: {body}"
            );
            actix_web::rt::time::sleep(POLL_INTERVAL).await;
        }
    }

    async fn wait_settlement(&self, key: &str, wanted: &str) {
        let started = Instant::now();
        loop {
            let status = self.settlement_status(key).await;
            if status == wanted {
                return;
            }
            assert!(started.elapsed() < WAIT_MAX, "{key} stuck in {status}");
            actix_web::rt::time::sleep(POLL_INTERVAL).await;
        }
    }
}

/// Waits until the sandbox has executed exactly `wanted` for a settlement.
async fn wait_operations(cluster: &Cluster, key: &str, wanted: &[&str]) {
    let started = Instant::now();
    loop {
        let operations = cluster.operations(key).await;
        if operations == wanted {
            return;
        }
        assert!(
            started.elapsed() < WAIT_MAX,
            "{key} executed {operations:?}, expected {wanted:?}"
        );
        actix_web::rt::time::sleep(POLL_INTERVAL).await;
    }
}

/// Waits until the transfer's refund was asked for, not made, and its
/// retry scheduled: what the row says (the API does not show the due time).
async fn wait_refund_retry_scheduled(db: &Db, id: &str) {
    let started = Instant::now();
    loop {
        let row = {
            let mut pooled = db.get().await.expect("connection");
            let mut tx = pooled.tx();
            transfers::find(&mut tx, &TransferId::new(id))
                .await
                .expect("read")
                .expect("row")
        };
        if row.status == TransferStatus::Compensating && row.next_attempt_at.is_some() {
            assert_eq!(row.compensation_attempt, 1, "{id}");
            return;
        }
        assert!(
            started.elapsed() < WAIT_MAX,
            "{id} never waited for a refund retry: {} attempt {}",
            row.status,
            row.compensation_attempt
        );
        actix_web::rt::time::sleep(POLL_INTERVAL).await;
    }
}

/// Every transfer ended as its outcome says, with each of its legs'
/// provider operations executed exactly once, and the ledger balances.
async fn assert_finished_once(cluster: &Cluster, api: &Api, all: &[Transfer]) {
    for transfer in all {
        let body = api
            .wait_transfer(&transfer.id, &["succeeded", "failed"])
            .await;
        let (status, legs, leg1_operations, leg1_settlement) = match transfer.outcome {
            Outcome::Paid => (
                "succeeded",
                ["succeeded", "succeeded"],
                vec!["charge"],
                "succeeded",
            ),
            Outcome::Refunded => (
                "failed",
                ["reversed", "failed"],
                vec!["charge", "refund"],
                "reversed",
            ),
        };
        let seen = [
            body["status"].as_str(),
            body["legs"][0]["status"].as_str(),
            body["legs"][1]["status"].as_str(),
        ];
        assert_eq!(seen, [Some(status), Some(legs[0]), Some(legs[1])], "{body}");
        assert_eq!(
            api.settlement_status(&transfer.leg1_key).await,
            leg1_settlement,
            "{body}"
        );
        let leg1 = cluster.operations(&transfer.leg1_key).await;
        assert_eq!(leg1, leg1_operations, "leg 1 of {}", transfer.id);
        let leg2 = cluster.operations(&transfer.leg2_key).await;
        assert_eq!(leg2, ["payout"], "leg 2 of {}", transfer.id);
    }
}

async fn merchant(cluster: &Cluster) -> Api {
    Api {
        client: cluster.client.clone(),
        base: cluster.base.clone(),
        key: cluster.register("Transfer Crash Test").await,
    }
}

/// Killed while a charge, a payout and a refund have each executed at the
/// provider but their answers are held, and while a burst of new transfers
/// is between stages: the restarted process asks under the same keys and
/// finishes each transfer without executing anything twice.
#[actix_web::test]
async fn a_kill_with_provider_answers_outstanding_finishes_each_transfer_once() {
    let mut cluster = Cluster::start(RETRY_SCHEDULE).await;
    let api = merchant(&cluster).await;
    let (charge_held, payout_held, refund_held, burst) =
        (wallet(1), wallet(2), wallet(3), wallet(4));
    let count = GROUP_TRANSFERS;
    cluster
        .arm(json!({"target": "acquirer", "match": {"payment_method": MASTERCARD, "operation": "charge"},
            "mode": "timeout_after_success", "count": count}))
        .await;
    cluster
        .arm(
            json!({"target": "custodian", "match": {"wallet": payout_held},
            "mode": "timeout_after_success", "count": count}),
        )
        .await;
    cluster
        .arm(json!({"target": "custodian", "match": {"wallet": refund_held}, "mode": "decline"}))
        .await;
    cluster
        .arm(
            json!({"target": "acquirer", "match": {"payment_method": VISA, "operation": "refund"},
            "mode": "timeout_after_success", "count": count}),
        )
        .await;

    let (leg1_held, leg2_held, compensating) = futures_util::join!(
        api.create_many(count, MASTERCARD, &charge_held, Outcome::Paid),
        api.create_many(count, VISA, &payout_held, Outcome::Paid),
        api.create_many(count, VISA, &refund_held, Outcome::Refunded),
    );
    for transfer in &leg1_held {
        wait_operations(&cluster, &transfer.leg1_key, &["charge"]).await;
        api.wait_transfer(&transfer.id, &["leg1_in_flight"]).await;
    }
    for transfer in &leg2_held {
        wait_operations(&cluster, &transfer.leg2_key, &["payout"]).await;
        api.wait_transfer(&transfer.id, &["leg2_in_flight"]).await;
    }
    for transfer in &compensating {
        wait_operations(&cluster, &transfer.leg1_key, &["charge", "refund"]).await;
        api.wait_transfer(&transfer.id, &["compensating"]).await;
    }
    // Still held: nothing the provider did has been answered.
    for transfer in leg1_held.iter().chain(&leg2_held).chain(&compensating) {
        let body = api.transfer(&transfer.id).await;
        assert_ne!(body["legs"][1]["status"], "succeeded", "{body}");
        assert_ne!(body["legs"][0]["status"], "reversed", "{body}");
    }
    let racing = api
        .create_many(BURST_TRANSFERS, VISA, &burst, Outcome::Paid)
        .await;
    cluster.kill();

    cluster.restart().await;
    let mut all = leg1_held;
    all.extend(leg2_held);
    all.extend(compensating);
    all.extend(racing);
    assert_finished_once(&cluster, &api, &all).await;
}

/// Killed while a charge, a payout and a refund each wait for their retry
/// after a transient failure: the restarted process fires the persisted
/// timers and finishes each transfer, each operation executed once.
#[actix_web::test]
async fn a_kill_in_retry_waits_finishes_each_transfer_once() {
    let mut cluster = Cluster::start(RETRY_SCHEDULE).await;
    let api = merchant(&cluster).await;
    let (charge_retry, payout_retry, refund_retry) = (wallet(1), wallet(2), wallet(3));
    let count = GROUP_TRANSFERS;
    cluster
        .arm(json!({"target": "acquirer", "match": {"payment_method": MASTERCARD, "operation": "charge"},
            "mode": "transient", "count": count}))
        .await;
    cluster
        .arm(
            json!({"target": "custodian", "match": {"wallet": payout_retry},
            "mode": "transient", "count": count}),
        )
        .await;
    cluster
        .arm(json!({"target": "custodian", "match": {"wallet": refund_retry}, "mode": "decline"}))
        .await;
    cluster
        .arm(
            json!({"target": "acquirer", "match": {"payment_method": VISA, "operation": "refund"},
            "mode": "transient", "count": count}),
        )
        .await;

    let (leg1_waiting, leg2_waiting, refund_waiting) = futures_util::join!(
        api.create_many(count, MASTERCARD, &charge_retry, Outcome::Paid),
        api.create_many(count, VISA, &payout_retry, Outcome::Paid),
        api.create_many(count, VISA, &refund_retry, Outcome::Refunded),
    );
    for transfer in &leg1_waiting {
        api.wait_settlement(&transfer.leg1_key, "retrying").await;
        api.wait_transfer(&transfer.id, &["leg1_in_flight"]).await;
    }
    for transfer in &leg2_waiting {
        api.wait_settlement(&transfer.leg2_key, "retrying").await;
        api.wait_transfer(&transfer.id, &["leg2_in_flight"]).await;
    }
    let db = Db::connect(cluster.database_url())
        .await
        .expect("the test database");
    for transfer in &refund_waiting {
        wait_refund_retry_scheduled(&db, &transfer.id).await;
    }
    drop(db);
    // Nothing has executed yet that a retry could repeat wrongly.
    for transfer in leg1_waiting.iter().chain(&leg2_waiting) {
        assert_eq!(
            cluster.operations(&transfer.leg2_key).await,
            Vec::<String>::new()
        );
    }
    for transfer in &refund_waiting {
        assert_eq!(cluster.operations(&transfer.leg1_key).await, ["charge"]);
    }
    cluster.kill();

    cluster.restart().await;
    let mut all = leg1_waiting;
    all.extend(leg2_waiting);
    all.extend(refund_waiting);
    assert_finished_once(&cluster, &api, &all).await;
}

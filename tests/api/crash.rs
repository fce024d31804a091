//! Exactly-once across crashes: the real binary is killed with SIGKILL while
//! settlements are in every stage (pending, a provider call executed but its
//! answer not yet committed, a retry wait), then started again on the same
//! database. The provider is a standalone `tern sandbox` process that
//! outlives Tern, as a real provider would, and counts its executions.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tern_schema::testing::TestDatabase;
use uuid::Uuid;

const TERN: &str = env!("CARGO_BIN_EXE_tern");
const SECRET: &str = "crash-test-webhook-secret";
const WAIT_MAX: Duration = Duration::from_secs(60);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A child process killed with SIGKILL when dropped, so a failing test
/// leaves nothing running.
struct Process(Child);

impl Process {
    fn kill_hard(&mut self) {
        // std's kill() is SIGKILL on Unix: no shutdown code runs.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill_hard();
    }
}

fn sandbox(port: u16, api_port: u16) -> Process {
    let child = Command::new(TERN)
        .arg("sandbox")
        .env("TERN_SANDBOX_BIND", format!("127.0.0.1:{port}"))
        .env("TERN_PUBLIC_URL", format!("http://127.0.0.1:{api_port}"))
        .env("TERN_CARD_PROVIDER_WEBHOOK_SECRET", SECRET)
        .env("TERN_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the sandbox");
    Process(child)
}

fn tern(
    database_url: &str,
    data_dir: &std::path::Path,
    api_port: u16,
    sandbox_port: u16,
) -> Process {
    let child = Command::new(TERN)
        .env("TERN_DATABASE_URL", database_url)
        .env("TERN_DATA_DIR", data_dir)
        .env("TERN_BIND", format!("127.0.0.1:{api_port}"))
        .env("TERN_SANDBOX_BIND", "off")
        .env(
            "TERN_PROVIDER_URL",
            format!("http://127.0.0.1:{sandbox_port}"),
        )
        // Wide windows: a hanging call outlives the kill, a retry waits 3 s.
        .env("TERN_PROVIDER_TIMEOUT", "20s")
        .env("TERN_SETTLEMENT_RETRY_SCHEDULE", "3s,1s,1s,1s")
        .env("TERN_CARD_PROVIDER_WEBHOOK_SECRET", SECRET)
        .env("TERN_RATE_LIMITS", "off")
        .env("TERN_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn tern");
    Process(child)
}

async fn wait_ready(client: &reqwest::Client, url: &str) {
    let started = Instant::now();
    loop {
        if let Ok(response) = client.get(url).send().await {
            if response.status().is_success() {
                return;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{url} not ready"
        );
        actix_web::rt::time::sleep(Duration::from_millis(25)).await;
    }
}

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
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json");
        body["status"].as_str().unwrap_or_default().to_owned()
    }

    /// The merchant's USD funding account, as the ledger lists it.
    async fn usd_account(&self) -> Value {
        let accounts: Value = self
            .client
            .get(format!("{}/v1/ledger/accounts", self.base))
            .bearer_auth(&self.key)
            .send()
            .await
            .expect("accounts")
            .json()
            .await
            .expect("json");
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
    tern_actors::adapters::install_crypto_provider();
    let database = TestDatabase::create().await;
    let data_dir = tempfile::tempdir().expect("dir");
    let (api_port, sandbox_port) = (free_port(), free_port());
    let client = reqwest::Client::new();
    let _sandbox = sandbox(sandbox_port, api_port);
    let sandbox_url = format!("http://127.0.0.1:{sandbox_port}");
    wait_ready(&client, &format!("{sandbox_url}/control/executions")).await;
    let mut first = tern(database.url(), data_dir.path(), api_port, sandbox_port);
    let base = format!("http://127.0.0.1:{api_port}");
    wait_ready(&client, &format!("{base}/ready")).await;

    let registered: Value = client
        .post(format!("{base}/v1/auth/m2m/register"))
        .json(&json!({"organization_name": "Crash Test", "email": "ops@crash.example"}))
        .send()
        .await
        .expect("register")
        .json()
        .await
        .expect("json");
    let api = Api {
        client: client.clone(),
        base: base.clone(),
        key: registered["api_key"].as_str().expect("key").to_owned(),
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
    let arm = |spec: Value| {
        client
            .post(format!("{sandbox_url}/control/faults"))
            .json(&spec)
            .send()
    };
    arm(json!({"target": "card_push", "match": {"destination": "tok_hang"}, "mode": "timeout_after_success", "count": 1}))
        .await
        .expect("fault");
    // This one fails once and waits 3 s for its retry: killed in the wait.
    arm(json!({"target": "card_push", "match": {"destination": "tok_retry"}, "mode": "transient", "count": 1}))
        .await
        .expect("fault");
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
    first.kill_hard();

    // A new process on the same database finishes everything.
    let _second = tern(database.url(), data_dir.path(), api_port, sandbox_port);
    wait_ready(&client, &format!("{base}/ready")).await;
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
        let executions: Value = client
            .get(format!(
                "{sandbox_url}/control/executions?settlement_key={key}"
            ))
            .send()
            .await
            .expect("executions")
            .json()
            .await
            .expect("json");
        let count = executions["data"].as_array().map_or(0, Vec::len);
        assert_eq!(count, 1, "{key} executed {count} times: {executions}");
    }
    let usd_account = api.usd_account().await;
    let expected = 10_000 - 100 * all.len() as i64;
    assert_eq!(usd_account["balance_minor"], expected, "{usd_account}");
    assert_eq!(usd_account["pending_minor"], 0, "{usd_account}");

    let check = Command::new(TERN)
        .args(["ledger", "check"])
        .env("TERN_DATABASE_URL", database.url())
        .env("TERN_LOG", "warn")
        .output()
        .expect("ledger check");
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

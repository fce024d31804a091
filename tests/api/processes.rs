//! The real binary as child processes, for the crash tests: a standalone
//! `tern sandbox` that outlives Tern (as a real provider would) and counts
//! its executions, and a Tern that can be killed with SIGKILL and started
//! again on the same database.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tern_schema::testing::TestDatabase;

use crate::helpers::invariants;
use crate::helpers::RequestExt;

pub(crate) const TERN: &str = env!("CARGO_BIN_EXE_tern");
pub(crate) const SECRET: &str = "crash-test-webhook-secret";
/// How long a process may take to answer its readiness probe.
// Generous: three nodes, their migrations and the rest of the suite share
// two cores on CI.
const READY_WAIT_MAX: Duration = Duration::from_secs(60);
/// How long one provider call may take before Tern counts its outcome as
/// unknown: wider than any test's wait before the kill, so a held call is
/// still held when the process dies.
pub(crate) const PROVIDER_TIMEOUT: &str = "20s";

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A child process killed with SIGKILL when dropped, so a failing test
/// leaves nothing running.
pub(crate) struct Process(pub(crate) Child);

impl Process {
    pub(crate) fn kill_hard(&mut self) {
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

/// A database, a sandbox process and a Tern process on it; Tern can be
/// killed and started again with everything else kept.
pub struct Cluster {
    pub client: reqwest::Client,
    /// Tern's base URL.
    pub base: String,
    pub sandbox_url: String,
    /// TERN_SETTLEMENT_RETRY_SCHEDULE (also the transfer refund schedule).
    retry_schedule: String,
    /// More environment for Tern, e.g. webhook settings.
    env: Vec<(String, String)>,
    api_port: u16,
    sandbox_port: u16,
    tern: Option<Process>,
    _sandbox: Process,
    data_dir: tempfile::TempDir,
    database: TestDatabase,
}

impl Cluster {
    /// Starts the sandbox and Tern, both ready.
    pub async fn start(retry_schedule: &str) -> Cluster {
        Cluster::start_with(retry_schedule, &[]).await
    }

    /// Starts them with more environment for Tern, kept across restarts.
    pub async fn start_with(retry_schedule: &str, env: &[(&str, String)]) -> Cluster {
        tern_actors::adapters::install_crypto_provider();
        let database = TestDatabase::create().await;
        let data_dir = tempfile::tempdir().expect("dir");
        let (api_port, sandbox_port) = (free_port(), free_port());
        // The sandbox gets the same environment (trace export, say); its
        // own settings below win.
        let sandbox = spawn_sandbox(sandbox_port, api_port, env);
        let mut cluster = Cluster {
            client: reqwest::Client::new(),
            base: format!("http://127.0.0.1:{api_port}"),
            sandbox_url: format!("http://127.0.0.1:{sandbox_port}"),
            retry_schedule: retry_schedule.to_owned(),
            env: env
                .iter()
                .map(|(key, value)| ((*key).to_owned(), value.clone()))
                .collect(),
            api_port,
            sandbox_port,
            tern: None,
            _sandbox: sandbox,
            data_dir,
            database,
        };
        let executions = format!("{}/control/executions", cluster.sandbox_url);
        wait_ready(&cluster.client, &executions).await;
        cluster.restart().await;
        cluster
    }

    /// Starts Tern (again) on the same database and waits until it is ready.
    pub async fn restart(&mut self) {
        assert!(self.tern.is_none(), "Tern is already running");
        let child = Command::new(TERN)
            .env("TERN_DATABASE_URL", self.database.url())
            .env("TERN_DATA_DIR", self.data_dir.path())
            .env("TERN_BIND", format!("127.0.0.1:{}", self.api_port))
            .env("TERN_SANDBOX_BIND", "off")
            .env(
                "TERN_PROVIDER_URL",
                format!("http://127.0.0.1:{}", self.sandbox_port),
            )
            .env("TERN_PROVIDER_TIMEOUT", PROVIDER_TIMEOUT)
            .env("TERN_SETTLEMENT_RETRY_SCHEDULE", &self.retry_schedule)
            .env("TERN_CARD_PROVIDER_WEBHOOK_SECRET", SECRET)
            .env("TERN_RATE_LIMITS", "off")
            .env("TERN_LOG", "warn")
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn tern");
        self.tern = Some(Process(child));
        wait_ready(&self.client, &format!("{}/ready", self.base)).await;
    }

    /// SIGKILL: no shutdown code runs, whatever was in flight is lost.
    pub fn kill(&mut self) {
        let mut tern = self.tern.take().expect("Tern is running");
        tern.kill_hard();
    }

    pub fn database_url(&self) -> &str {
        self.database.url()
    }

    /// Registers a merchant; answers its API key.
    pub async fn register(&self, name: &str) -> String {
        let registered: Value = self
            .client
            .post(format!("{}/v1/auth/m2m/register", self.base))
            .json(&json!({"organization_name": name, "email": "ops@crash.example"}))
            .read_json()
            .await;
        registered["api_key"].as_str().expect("key").to_owned()
    }

    /// Arms a sandbox fault (decisions §15).
    pub async fn arm(&self, spec: Value) {
        arm(&self.client, &self.sandbox_url, spec).await;
    }

    /// The operations the sandbox executed for one settlement, sorted: one
    /// entry per real execution, so a duplicate shows twice.
    pub async fn operations(&self, settlement_key: &str) -> Vec<String> {
        operations(&self.client, &self.sandbox_url, settlement_key).await
    }

    /// The keys of the card issuer's executions of `operation`.
    pub async fn issuer_keys(&self, operation: &str) -> Vec<String> {
        issuer_keys(&self.client, &self.sandbox_url, operation).await
    }

    /// Sends `request`, waits until the card issuer has executed
    /// `operation` (its answer held back by a `timeout_after_success`
    /// fault), then kills Tern: the call happened, its answer never came.
    pub async fn kill_after_issuer(&mut self, request: reqwest::RequestBuilder, operation: &str) {
        let hanging = hang(request);
        let started = Instant::now();
        while self.issuer_keys(operation).await.is_empty() {
            assert!(
                started.elapsed() < READY_WAIT_MAX,
                "the issuer never executed {operation}"
            );
            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        }
        self.kill();
        hanging.abort();
    }
}

impl Drop for Cluster {
    /// The invariants of [`invariants`], while Tern (if running) and the
    /// database are still there.
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let bases = self.tern.iter().map(|_| self.base.clone()).collect();
        let broken = invariants::check_processes(self.database.url(), bases, Default::default());
        invariants::assert_held(&self.base, &broken);
    }
}

/// Arms a fault at the sandbox of `sandbox_url` (decisions §15).
pub(crate) async fn arm(client: &reqwest::Client, sandbox_url: &str, spec: Value) {
    let response = client
        .post(format!("{sandbox_url}/control/faults"))
        .json(&spec)
        .send()
        .await
        .expect("fault");
    assert_eq!(response.status(), 201, "{spec}");
}

/// The operations the sandbox executed for one settlement, sorted: one
/// entry per real execution, so a duplicate shows twice.
pub(crate) async fn operations(
    client: &reqwest::Client,
    sandbox_url: &str,
    settlement_key: &str,
) -> Vec<String> {
    let executions: Value = client
        .get(format!(
            "{sandbox_url}/control/executions?settlement_key={settlement_key}"
        ))
        .read_json()
        .await;
    let mut operations: Vec<String> = executions["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|e| e["operation"].as_str().unwrap_or_default().to_owned())
        .collect();
    operations.sort();
    operations
}

/// The idempotency keys of the card issuer's executions of `operation`
/// (`issue`, `status`, `wallet`) at the sandbox of `sandbox_url`.
pub(crate) async fn issuer_keys(
    client: &reqwest::Client,
    sandbox_url: &str,
    operation: &str,
) -> Vec<String> {
    let executions: Value = client
        .get(format!("{sandbox_url}/control/executions"))
        .read_json()
        .await;
    executions["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|e| e["target"] == "issuer" && e["operation"] == operation)
        .filter_map(|e| e["key"].as_str().map(str::to_owned))
        .collect()
}

/// Sends a request whose answer nobody waits for (its process is about to
/// be killed); abort the handle once done with it.
pub(crate) fn hang(request: reqwest::RequestBuilder) -> actix_web::rt::task::JoinHandle<()> {
    actix_web::rt::spawn(async move {
        let _ = request.send().await;
    })
}

pub(crate) fn spawn_sandbox(port: u16, api_port: u16, env: &[(&str, String)]) -> Process {
    let child = Command::new(TERN)
        .arg("sandbox")
        .envs(env.iter().map(|(key, value)| (key, value)))
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

pub(crate) async fn wait_ready(client: &reqwest::Client, url: &str) {
    let started = Instant::now();
    loop {
        if let Ok(response) = client.get(url).send().await {
            if response.status().is_success() {
                return;
            }
        }
        assert!(started.elapsed() < READY_WAIT_MAX, "{url} not ready");
        actix_web::rt::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Sets the merchant's webhook endpoint through the node at `base`.
pub(crate) async fn put_endpoint_at(
    client: &reqwest::Client,
    base: &str,
    api_key: &str,
    url: &str,
    secret: &str,
) {
    let put = client
        .put(format!("{base}/v1/webhooks/endpoint"))
        .bearer_auth(api_key)
        .json(&json!({"url": url, "secret": secret}))
        .send()
        .await
        .expect("endpoint");
    assert_eq!(put.status(), 204);
}

/// A quote for EUR 100.00 paid out as USDC on polygon, through `base`.
pub(crate) async fn quote_at(client: &reqwest::Client, base: &str, api_key: &str) -> Value {
    client
        .post(format!("{base}/v1/quotes"))
        .bearer_auth(api_key)
        .json(&json!({"send_currency": "EUR", "send_amount": "100.00",
            "receive_asset": "USDC", "receive_network": "polygon"}))
        .read_json()
        .await
}

/// A transfer of `quote` from a card that succeeds to an EVM wallet,
/// through `base`, under a new idempotency key: the request, for the
/// caller to add to and send.
pub(crate) fn transfer_at(
    client: &reqwest::Client,
    base: &str,
    api_key: &str,
    quote: &Value,
) -> reqwest::RequestBuilder {
    client
        .post(format!("{base}/v1/transfers"))
        .bearer_auth(api_key)
        .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
        .json(&crate::helpers::transfers::body(
            quote,
            "pm_card_visa",
            crate::helpers::transfers::EVM_WALLET,
        ))
}

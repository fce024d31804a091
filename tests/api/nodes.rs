//! Several Tern processes on one PostgreSQL, each with its own port and
//! advertised URL, one shared cluster secret, and a standalone sandbox as
//! their provider: the harness of the several-nodes tests. A node can be
//! killed (SIGKILL), paused (SIGSTOP), resumed and started again.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tern_schema::testing::TestDatabase;

use crate::helpers::invariants;
use crate::helpers::RequestExt;
use crate::processes::{
    arm, free_port, issuer_keys, operations, spawn_sandbox, wait_ready, Process, PROVIDER_TIMEOUT,
    SECRET, TERN,
};

pub const CLUSTER_SECRET: &str = "several-nodes-test-cluster-secret";
pub const OPERATOR_TOKEN: &str = "several-nodes-test-operator-token";
/// Short, so that the tests wait a few seconds for a failover, not many.
pub const LEASE_TTL: Duration = Duration::from_secs(2);
const SETTLE_WAIT_MAX: Duration = Duration::from_secs(30);

pub struct Nodes {
    pub client: reqwest::Client,
    pub sandbox_url: String,
    pub bases: Vec<String>,
    ports: Vec<u16>,
    processes: Vec<Option<Process>>,
    env: Vec<(String, String)>,
    data_dirs: Vec<tempfile::TempDir>,
    _sandbox: Process,
    database: TestDatabase,
}

impl Nodes {
    /// `count` nodes on a fresh PostgreSQL database, every slot owned;
    /// `None` without PostgreSQL (several nodes need it).
    pub async fn start(count: usize, env: &[(&str, &str)]) -> Option<Nodes> {
        tern_actors::adapters::install_crypto_provider();
        let database = TestDatabase::create_postgres_if_configured().await?;
        let ports: Vec<u16> = (0..count).map(|_| free_port()).collect();
        let sandbox_port = free_port();
        let sandbox = spawn_sandbox(sandbox_port, ports[0], &[]);
        let mut nodes = Nodes {
            client: reqwest::Client::new(),
            sandbox_url: format!("http://127.0.0.1:{sandbox_port}"),
            bases: ports
                .iter()
                .map(|port| format!("http://127.0.0.1:{port}"))
                .collect(),
            ports,
            processes: (0..count).map(|_| None).collect(),
            env: env
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
            data_dirs: (0..count)
                .map(|_| tempfile::tempdir().expect("dir"))
                .collect(),
            _sandbox: sandbox,
            database,
        };
        let executions = format!("{}/control/executions", nodes.sandbox_url);
        wait_ready(&nodes.client, &executions).await;
        for index in 0..count {
            nodes.spawn(index);
        }
        for base in nodes.bases.clone() {
            wait_ready(&nodes.client, &format!("{base}/ready")).await;
        }
        nodes.settled(&(0..count).collect::<Vec<_>>()).await;
        Some(nodes)
    }

    fn spawn(&mut self, index: usize) {
        let port = self.ports[index];
        let child = Command::new(TERN)
            .env("TERN_DATABASE_URL", self.database.url())
            .env("TERN_DATA_DIR", self.data_dirs[index].path())
            .env("TERN_BIND", format!("127.0.0.1:{port}"))
            .env("TERN_ADVERTISE_URL", format!("http://127.0.0.1:{port}"))
            .env("TERN_CLUSTER_SECRET", CLUSTER_SECRET)
            .env("TERN_OPERATOR_TOKEN", OPERATOR_TOKEN)
            .env("TERN_LEASE_TTL", format!("{}ms", LEASE_TTL.as_millis()))
            .env("TERN_SANDBOX_BIND", "off")
            .env(
                "TERN_PROVIDER_URL",
                format!("http://127.0.0.1:{}", self.sandbox_url_port()),
            )
            .env("TERN_PROVIDER_TIMEOUT", PROVIDER_TIMEOUT)
            .env("TERN_CARD_PROVIDER_WEBHOOK_SECRET", SECRET)
            .env("TERN_RATE_LIMITS", "off")
            .env("TERN_LOG", "warn")
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .stdout(self.log(index))
            .stderr(self.log(index))
            .spawn()
            .expect("spawn tern");
        self.processes[index] = Some(Process(child));
    }

    /// Where node `index` writes its log (warnings and errors): read it
    /// when a test fails, from TERN_TEST_NODE_LOGS when set.
    fn log(&self, index: usize) -> Stdio {
        let Ok(folder) = std::env::var("TERN_TEST_NODE_LOGS") else {
            return Stdio::null();
        };
        let path = std::path::Path::new(&folder).join(format!("node-{}.log", self.ports[index]));
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_or_else(|_| Stdio::null(), Stdio::from)
    }

    fn sandbox_url_port(&self) -> &str {
        self.sandbox_url.rsplit(':').next().unwrap_or_default()
    }

    /// Starts a killed node again, on its port, and waits until it is ready.
    pub async fn restart(&mut self, index: usize) {
        assert!(self.processes[index].is_none(), "node {index} runs");
        self.spawn(index);
        wait_ready(&self.client, &format!("{}/ready", self.bases[index])).await;
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut process) = self.processes[index].take() {
            process.kill_hard();
        }
    }

    fn signal(&self, index: usize, signal: &str) {
        let process = self.processes[index].as_ref().expect("running");
        let status = Command::new("kill")
            .args([signal, &process.0.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {signal}");
    }

    /// SIGSTOP: the process is frozen, its connections open, its memory kept.
    pub fn pause(&self, index: usize) {
        self.signal(index, "-STOP");
    }

    pub fn resume(&self, index: usize) {
        self.signal(index, "-CONT");
    }

    /// The node's cluster figures from /health/actors, with details.
    pub async fn cluster(&self, index: usize) -> Value {
        let figures: Value = self
            .client
            .get(format!("{}/health/actors", self.bases[index]))
            .bearer_auth(OPERATOR_TOKEN)
            .timeout(Duration::from_secs(2))
            .read_json()
            .await;
        figures["cluster"].clone()
    }

    /// The slots node `index` owns.
    pub async fn owned(&self, index: usize) -> Vec<i32> {
        self.cluster(index).await["owned_slots"]
            .as_array()
            .map(|slots| {
                slots
                    .iter()
                    .filter_map(|slot| slot.as_i64().map(|s| s as i32))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits until the nodes `live` own every slot between them, each some.
    pub async fn settled(&self, live: &[usize]) -> Duration {
        let started = Instant::now();
        loop {
            let mut total = 0;
            let mut each = true;
            for index in live {
                let owned = self.owned(*index).await.len();
                total += owned;
                each &= owned > 0;
            }
            if total == 64 && each {
                let settled = started.elapsed();
                // One more beat: every node has read the others' claims
                // and knows where to forward.
                actix_web::rt::time::sleep(LEASE_TTL / 2).await;
                return settled;
            }
            assert!(
                started.elapsed() < SETTLE_WAIT_MAX,
                "nodes {live:?} never owned every slot ({total})"
            );
            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Registers a merchant through node 0; answers its API key and id.
    pub async fn register(&self, name: &str) -> (String, String) {
        let registered: Value = self
            .client
            .post(format!("{}/v1/auth/m2m/register", self.bases[0]))
            .json(&json!({"organization_name": name, "email": "ops@nodes.example"}))
            .read_json()
            .await;
        let text = |field: &str| registered[field].as_str().expect(field).to_owned();
        (text("api_key"), text("merchant_id"))
    }

    pub async fn arm(&self, spec: Value) {
        arm(&self.client, &self.sandbox_url, spec).await;
    }

    /// The operations the sandbox executed for one settlement, sorted.
    pub async fn operations(&self, settlement_key: &str) -> Vec<String> {
        operations(&self.client, &self.sandbox_url, settlement_key).await
    }

    /// The keys of the card issuer's executions of `operation`.
    pub async fn issuer_keys(&self, operation: &str) -> Vec<String> {
        issuer_keys(&self.client, &self.sandbox_url, operation).await
    }

    /// `tern nodes` on the shared database.
    pub fn tern_nodes(&self) -> String {
        let listed = Command::new(TERN)
            .arg("nodes")
            .env("TERN_DATABASE_URL", self.database.url())
            .env("TERN_LEASE_TTL", format!("{}ms", LEASE_TTL.as_millis()))
            .env("TERN_LOG", "warn")
            .output()
            .expect("tern nodes");
        assert!(listed.status.success(), "{listed:?}");
        String::from_utf8_lossy(&listed.stdout).into_owned()
    }
}

impl Drop for Nodes {
    /// The invariants of [`invariants`], over every node still running and
    /// the shared database.
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let bases = self
            .processes
            .iter()
            .zip(&self.bases)
            .filter(|(process, _)| process.is_some())
            .map(|(_, base)| base.clone())
            .collect();
        let broken = invariants::check_processes(self.database.url(), bases, Default::default());
        invariants::assert_held(&self.bases.join(", "), &broken);
    }
}

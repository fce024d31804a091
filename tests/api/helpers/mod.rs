//! `TestApp`: one running Tern per test, whose teardown checks the
//! invariants (see [`invariants`]).

pub mod cards;
pub mod humans;
pub mod invariants;
pub mod settlements;
pub mod transfers;
pub mod webhooks;

use std::cell::RefCell;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use reqwest::{Client, RequestBuilder, Response};
use serde_json::{json, Value};
use tern::config::{Config, RateLimits};
use tern::startup::Application;
use tern::state::AppState;
use tern_schema::testing::TestDatabase;
use tern_schema::vocabulary::{MerchantId, UserId};

use self::invariants::Exemptions;

pub struct TestApp {
    pub address: String,
    pub sandbox_address: Option<String>,
    pub client: Client,
    pub state: actix_web::web::Data<AppState>,
    pub database: TestDatabase,
    handle: ServerHandle,
    exemptions: RefCell<Exemptions>,
    _data_dir: tempfile::TempDir,
}

/// A registered merchant and its first key.
pub struct Merchant {
    pub merchant_id: MerchantId,
    pub api_key: String,
    pub api_key_id: String,
}

pub fn test_config(database_url: &str, data_dir: &std::path::Path) -> Config {
    let mut config = Config::from_lookup(|_| None).expect("default configuration is valid");
    config.database_url = database_url.to_owned();
    config.data_dir = data_dir.to_path_buf();
    config.bind = "127.0.0.1:0".into();
    config.sandbox_bind = Some("127.0.0.1:0".into());
    config.public_url = "http://tern.test".into();
    config.rate_limits =
        RateLimits::parse("m2m_register=10000/1s,register=10000/1s,login=10000/1s")
            .expect("valid limits");
    config.fault_routes = true;
    config.operator_token = Some(OPERATOR_TOKEN.into());
    config
}

/// TERN_OPERATOR_TOKEN of every TestApp.
pub const OPERATOR_TOKEN: &str = "operator-token-for-tests-0123456789";

impl TestApp {
    pub async fn spawn() -> TestApp {
        TestApp::spawn_with(|_| {}).await
    }

    /// Spawns with configuration changes applied over the test defaults.
    pub async fn spawn_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
        tern_actors::adapters::install_crypto_provider();
        if std::env::var("TERN_TEST_LOG").is_ok() {
            let _ = tern::telemetry::init("info", None, "tern");
        }
        let database = TestDatabase::create().await;
        let data_dir = tempfile::tempdir().expect("data dir");
        let mut config = test_config(database.url(), data_dir.path());
        tweak(&mut config);
        let app = Application::build(config)
            .await
            .expect("the application starts");
        let address = format!("http://127.0.0.1:{}", app.port());
        let sandbox_address = app
            .sandbox_port()
            .map(|port| format!("http://127.0.0.1:{port}"));
        let handle = app.handle();
        let state = app.state();
        actix_web::rt::spawn(app.run_until_stopped());
        let client = Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("http client");
        TestApp {
            address,
            sandbox_address,
            client,
            state,
            database,
            handle,
            exemptions: RefCell::default(),
            _data_dir: data_dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    pub fn get(&self, path: &str) -> RequestBuilder {
        self.client.get(self.url(path))
    }

    pub fn post(&self, path: &str) -> RequestBuilder {
        self.client.post(self.url(path))
    }

    /// A GET with the operator token, for the details of /health.
    pub async fn operator_json(&self, path: &str) -> Value {
        let response = self
            .get(path)
            .bearer_auth(OPERATOR_TOKEN)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 200, "{path}");
        response.json().await.expect("json")
    }

    pub fn delete(&self, path: &str) -> RequestBuilder {
        self.client.delete(self.url(path))
    }

    pub async fn register(&self, body: Value) -> Response {
        self.post("/v1/auth/m2m/register")
            .json(&body)
            .send()
            .await
            .expect("request")
    }

    /// Registers a fresh merchant with every scope.
    pub async fn merchant(&self) -> Merchant {
        let response = self
            .register(json!({"organization_name": "Acme Test", "email": "ops@acme.example"}))
            .await;
        assert_eq!(response.status(), 201);
        let body: Value = response.json().await.expect("json");
        Merchant {
            merchant_id: MerchantId::new(body["merchant_id"].as_str().expect("merchant_id")),
            api_key: body["api_key"].as_str().expect("api_key").to_owned(),
            api_key_id: body["api_key_id"].as_str().expect("api_key_id").to_owned(),
        }
    }
}

impl TestApp {
    /// GET `path` with `merchant`'s key: the response.
    pub async fn get_as(&self, merchant: &Merchant, path: &str) -> Response {
        self.get(path).bearer_auth(&merchant.api_key).sent().await
    }

    /// POST `body` to `path` with `api_key`, under this Idempotency-Key.
    pub async fn post_with_key(
        &self,
        path: &str,
        api_key: &str,
        key: &str,
        body: &Value,
    ) -> Response {
        self.post(path)
            .bearer_auth(api_key)
            .header("Idempotency-Key", key)
            .json(body)
            .sent()
            .await
    }

    /// A new key of `merchant` with only these scopes.
    pub async fn key_with_scopes(&self, merchant: &Merchant, scopes: &[&str]) -> String {
        let body = self
            .post("/v1/api-keys")
            .bearer_auth(&merchant.api_key)
            .json(&json!({"scopes": scopes}))
            .json_at(201)
            .await;
        body["api_key"].as_str().expect("api_key").to_owned()
    }
}

impl TestApp {
    /// Teardown leaves `merchant`'s audit chain alone, and verifies every
    /// other: for a test that tampers with that one on purpose (say why at
    /// the call).
    pub fn allow_broken_audit_chain(&self, merchant: &Merchant) {
        self.exemptions
            .borrow_mut()
            .broken_audit_chains
            .push(merchant.merchant_id.clone());
    }

    /// Teardown leaves the ledger alone: for a test that writes ledger rows
    /// by hand on purpose (say why at the call).
    pub fn allow_broken_ledger(&self) {
        self.exemptions.borrow_mut().broken_ledger = true;
    }

    /// What teardown checks, now: the runtime's stuck entities and the
    /// database's invariants. Empty when all hold.
    pub fn broken_invariants(&self) -> Vec<invariants::Broken> {
        let mut broken = invariants::check_stuck(&self.state.runtime.figures());
        broken.extend(self.broken_in_database());
        broken
    }

    fn broken_in_database(&self) -> Vec<invariants::Broken> {
        let url = self.state.config.database_url.clone();
        let exemptions = self.exemptions.borrow().clone();
        invariants::run_apart(
            move || async move { invariants::check_database(&url, exemptions).await },
        )
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if std::thread::panicking() {
            drop(self.handle.stop(false));
            return;
        }
        // The figures are read before the stop, which ends every actor.
        let mut broken = invariants::check_stuck(&self.state.runtime.figures());
        // Sends the stop command at once; the returned future only awaits
        // it. Work still committing cannot make a sound ledger or chain look
        // broken: each check reads one snapshot.
        drop(self.handle.stop(false));
        broken.extend(self.broken_in_database());
        invariants::assert_held(&self.address, &broken);
    }
}

/// The response's header as text; empty when absent or not text.
pub fn header(response: &Response, name: &str) -> String {
    text_of(response.headers().get(name))
}

/// The X-Sandbox-Signature a stand-in for Tern's provider webhook
/// endpoint received; empty when none.
pub fn sandbox_signature(request: &actix_web::HttpRequest) -> String {
    text_of(request.headers().get("X-Sandbox-Signature"))
}

fn text_of<V: HeaderText>(value: Option<&V>) -> String {
    value
        .and_then(HeaderText::text)
        .unwrap_or_default()
        .to_owned()
}

/// reqwest and actix-web name the same header value with two types.
trait HeaderText {
    fn text(&self) -> Option<&str>;
}

impl HeaderText for reqwest::header::HeaderValue {
    fn text(&self) -> Option<&str> {
        self.to_str().ok()
    }
}

impl HeaderText for actix_web::http::header::HeaderValue {
    fn text(&self) -> Option<&str> {
        self.to_str().ok()
    }
}

/// Asserts a problem document with this status and slug; answers its body.
pub async fn assert_problem(response: Response, status: u16, slug: &str) -> Value {
    assert_eq!(response.status(), status, "status of {}", response.url());
    assert_eq!(
        header(&response, "content-type"),
        "application/problem+json"
    );
    let request_id = response
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .expect("x-request-id on every response");
    let body: Value = response.json().await.expect("problem json");
    assert_eq!(
        body["type"],
        format!("http://tern.test/problems/{slug}"),
        "{body}"
    );
    assert_eq!(body["status"], status, "{body}");
    assert!(
        body["title"].as_str().is_some_and(|t| !t.is_empty()),
        "{body}"
    );
    assert!(
        body["instance"]
            .as_str()
            .is_some_and(|i| i.starts_with('/')),
        "{body}"
    );
    assert_eq!(body["request_id"], request_id.as_str(), "{body}");
    body
}

impl TestApp {
    /// A second user of `merchant`, written straight to the store (human
    /// registration makes a merchant of its own). Answers the user id.
    pub async fn user(&self, merchant: &Merchant) -> String {
        let now = tern_schema::types::utc_now();
        let id = uuid::Uuid::new_v4().to_string();
        let row = tern_schema::models::UserRow {
            id: UserId::new(id.clone()),
            merchant_id: merchant.merchant_id.clone(),
            email: format!("{id}@users.tern.test"),
            name: "Test User".into(),
            password_hash: "not-a-real-hash".into(),
            status: tern_schema::vocabulary::UserStatus::Active,
            email_verified_at: None,
            created_at: now,
            updated_at: now,
        };
        let inserted: Result<(), tern_schema::StoreError> =
            tern_schema::write_tx!(self.state.db, |tx| {
                tern_schema::store::users::insert(tx, &row).await
            });
        inserted.expect("the user is stored");
        id
    }

    /// Runs raw SQL on the app's database, past the store: for tests that
    /// tamper with rows, or see the database refuse to.
    pub async fn sql(&self, statements: &str) -> Result<(), tern_schema::DieselError> {
        let mut pooled = self.state.db.get().await.expect("a connection");
        let tx = &mut pooled.tx();
        tern_schema::dispatch!(tx, conn =>
            diesel_async::SimpleAsyncConnection::batch_execute(conn, statements).await)
    }

    /// The simulator's address; tests that reach it need the sandbox on.
    pub fn sandbox(&self) -> &str {
        self.sandbox_address.as_deref().expect("the sandbox runs")
    }
}

/// Sending and reading, in one place: a transport failure or a body that
/// is not JSON fails the test.
pub(crate) trait RequestExt {
    /// Sends the request; answers the response.
    async fn sent(self) -> Response;
    /// Sends the request; answers its JSON body whatever the status (a test
    /// that cares about the status reads through [`json_of`]).
    async fn read_json(self) -> Value;
    /// Sends the request; answers its JSON body after checking the status.
    async fn json_at(self, status: u16) -> Value;
}

impl RequestExt for RequestBuilder {
    async fn sent(self) -> Response {
        self.send().await.expect("request")
    }

    async fn read_json(self) -> Value {
        self.sent().await.json().await.expect("json")
    }

    async fn json_at(self, status: u16) -> Value {
        json_of(self.sent().await, status).await
    }
}

/// The response's JSON body, after checking its status (the body is in
/// the failure message).
pub async fn json_of(response: Response, status: u16) -> Value {
    let got = response.status().as_u16();
    let body: Value = response.json().await.expect("json");
    assert_eq!(got, status, "{body}");
    body
}

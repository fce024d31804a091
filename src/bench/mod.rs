//! `tern bench settlements`: the project's load tool. Against a running
//! server it registers a merchant, funds it with one card_charge, drives N
//! card_push settlements at concurrency C over HTTP, waits until every one is
//! terminal, prints created/s, completed/s and the create latency
//! percentiles, and ends with the ledger check on the server's database.
//!
//! It speaks only the public API, as a client would; timing lives here and
//! never in tests. `tern bench transfers` ([`transfers`]) drives the product;
//! `tern bench webhooks` ([`webhooks`]) drives it again and measures the
//! signed webhooks it sends to a receiver of the bench's own. `tern bench
//! logins` ([`logins`]) floods the password pool with logins and times a
//! session read meanwhile. `tern bench authorizations` ([`authorizations`])
//! drives signed card authorization requests, as the card provider sends
//! them, at the cards' actors.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};
use tern_schema::money::Currency;
use tern_schema::{ledger, Db};

pub mod authorizations;
mod deliveries;
pub mod logins;
mod receiver;
pub mod tls;
pub mod transfers;
pub mod webhooks;

/// The most settlements one run drives: latencies are kept in memory.
pub const SETTLEMENTS_MAX: u64 = 5_000_000;
/// The most requests in flight at once.
pub const CONCURRENCY_MAX: usize = 4_096;
/// How often completion is polled (one ledger read per poll).
const COMPLETION_POLL: Duration = Duration::from_millis(50);
/// One request's limit: past it the bench reports the server as stuck.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The card_push destination: any `tok_` succeeds at the sandbox.
const PUSH_DESTINATION: &str = "tok_bench_visa";
const CURRENCY: &str = "USD";

/// What to drive, from the command line.
#[derive(Clone, Debug)]
pub struct Options {
    pub url: String,
    pub count: u64,
    pub concurrency: usize,
    /// Creates per second; `None` sends as fast as the concurrency allows.
    pub rate_per_s: Option<f64>,
    pub amount_minor: i64,
    /// How long to wait for every settlement to become terminal.
    pub wait: Duration,
    /// The server's database, for the closing ledger check; `None` skips it.
    pub database_url: Option<String>,
}

/// One run's figures.
#[derive(Debug)]
pub struct Report {
    pub created: u64,
    pub refused: Vec<(u16, u64)>,
    pub create_elapsed: Duration,
    pub complete_elapsed: Duration,
    pub succeeded: u64,
    pub failed: u64,
    pub latency_us: Percentiles,
}

#[derive(Debug, Default)]
pub struct Percentiles {
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub max: u64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `samples` (sorted here).
    pub fn of(samples: &mut [u64]) -> Percentiles {
        if samples.is_empty() {
            return Percentiles::default();
        }
        samples.sort_unstable();
        let rank = |p: f64| {
            let index = ((p / 100.0) * samples.len() as f64).ceil() as usize;
            samples[index.clamp(1, samples.len()) - 1]
        };
        Percentiles {
            p50: rank(50.0),
            p95: rank(95.0),
            p99: rank(99.0),
            max: samples[samples.len() - 1],
        }
    }
}

/// How a bench request says who sends it: a merchant's API key, or a
/// person's session (the `svc_session` cookie).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Credential<'a> {
    Key(&'a str),
    Session(&'a str),
}

impl Credential<'_> {
    pub(crate) fn apply(self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Credential::Key(key) => request.bearer_auth(key),
            Credential::Session(token) => request.header(
                reqwest::header::COOKIE,
                format!("{}={token}", crate::auth::session::SESSION_COOKIE),
            ),
        }
    }
}

/// A merchant of the bench's own, with its USD funding account.
pub(crate) struct Merchant {
    id: String,
    key: String,
    account: String,
}

pub(crate) struct Client {
    http: reqwest::Client,
    /// The servers' base URLs; requests take them in turn (several nodes
    /// on one database, README "Running several nodes").
    bases: Vec<String>,
    next: std::sync::atomic::AtomicUsize,
}

impl Client {
    pub(crate) fn new(url: &str, concurrency: usize) -> anyhow::Result<Client> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .context("building the HTTP client")?;
        let bases: Vec<String> = url
            .split(',')
            .map(|base| base.trim().trim_end_matches('/').to_owned())
            .filter(|base| !base.is_empty())
            .collect();
        if bases.is_empty() {
            bail!("--url names no server");
        }
        Ok(Client {
            http,
            bases,
            next: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// The base URL of the next request: the servers in turn.
    pub(crate) fn base(&self) -> &str {
        let turn = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &self.bases[turn % self.bases.len()]
    }

    pub(crate) async fn json(
        &self,
        request: reqwest::RequestBuilder,
        want: u16,
    ) -> anyhow::Result<Value> {
        let response = request.send().await.context("sending a request")?;
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status != want {
            if status == 429 {
                bail!("rate limited (429): start the server with TERN_RATE_LIMITS=off, or raise the limit named in {body}");
            }
            bail!("expected {want}, got {status}: {body}");
        }
        Ok(body)
    }

    pub(crate) async fn register(&self) -> anyhow::Result<Merchant> {
        let tag = uuid::Uuid::new_v4().simple().to_string();
        let body = json!({"organization_name": format!("Bench {tag:.8}"),
            "email": format!("bench-{tag}@bench.example")});
        let request = self
            .http
            .post(format!("{}/v1/auth/m2m/register", self.base()));
        let registered = self.json(request.json(&body), 201).await?;
        let text = |field: &str| {
            registered[field]
                .as_str()
                .map(str::to_owned)
                .with_context(|| format!("no {field} in the registration"))
        };
        let (id, key) = (text("merchant_id")?, text("api_key")?);
        let account = self.account(Credential::Key(&key), None).await?;
        let account = account["id"].as_str().context("no account id")?.to_owned();
        Ok(Merchant { id, key, account })
    }

    /// The merchant's USD funding account (or the one with `id`).
    pub(crate) async fn account(
        &self,
        credential: Credential<'_>,
        id: Option<&str>,
    ) -> anyhow::Result<Value> {
        let request =
            credential.apply(self.http.get(format!("{}/v1/ledger/accounts", self.base())));
        let accounts = self.json(request, 200).await?;
        accounts["data"]
            .as_array()
            .and_then(|all| {
                all.iter().find(|a| match id {
                    Some(id) => a["id"] == id,
                    None => a["currency"] == CURRENCY,
                })
            })
            .cloned()
            .context("no USD funding account")
    }

    async fn submit(&self, merchant: &Merchant, body: &Value) -> anyhow::Result<u16> {
        let response = self
            .http
            .post(format!("{}/v1/settlements", self.base()))
            .bearer_auth(&merchant.key)
            .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
            .json(body)
            .send()
            .await?;
        Ok(response.status().as_u16())
    }
}

fn usd(amount_minor: i64) -> anyhow::Result<String> {
    let currency = Currency::find(CURRENCY).context("USD is a supported currency")?;
    Ok(currency.format(amount_minor))
}

/// Funds the funding `account` with one card_charge and waits for it to
/// succeed.
pub(crate) async fn fund(
    client: &Client,
    credential: Credential<'_>,
    account: &str,
    amount_minor: i64,
) -> anyhow::Result<()> {
    let key = uuid::Uuid::new_v4().to_string();
    let body = json!({"method": "card_charge",
        "amount": {"amount": usd(amount_minor)?, "currency": CURRENCY},
        "source": account, "destination": "pm_card_visa", "recipient_name": "Bench"});
    let request = credential
        .apply(
            client
                .http
                .post(format!("{}/v1/settlements", client.base())),
        )
        .header("Idempotency-Key", &key)
        .json(&body);
    client.json(request, 201).await?;
    let started = Instant::now();
    loop {
        let request = credential.apply(
            client
                .http
                .get(format!("{}/v1/settlements/{key}", client.base())),
        );
        let settlement = client.json(request, 200).await?;
        match settlement["status"].as_str() {
            Some("succeeded") => return Ok(()),
            Some("failed") => bail!("the funding charge failed: {settlement}"),
            _ if started.elapsed() > REQUEST_TIMEOUT => bail!("the funding charge is stuck"),
            _ => actix_web::rt::time::sleep(COMPLETION_POLL).await,
        }
    }
}

pub(crate) fn bar(length: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(length);
    let template = format!("{what:>9} [{{bar:40}}] {{pos}}/{{len}} {{per_sec}} {{elapsed}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Sends every create, paced when a rate is given; answers each one's
/// status and latency in microseconds.
async fn drive(client: &Client, merchant: &Merchant, options: &Options) -> Vec<(u16, u64)> {
    let body = json!({"method": "card_push",
        "amount": {"amount": usd(options.amount_minor).unwrap_or_default(), "currency": CURRENCY},
        "source": merchant.account, "destination": PUSH_DESTINATION, "recipient_name": "Bench"});
    let progress = bar(options.count, "created");
    let started = tokio::time::Instant::now();
    let results = futures_util::stream::iter(0..options.count)
        .map(|i| {
            let (body, progress) = (&body, &progress);
            async move {
                if let Some(rate) = options.rate_per_s {
                    let due = started + Duration::from_secs_f64(i as f64 / rate);
                    tokio::time::sleep_until(due).await;
                }
                let sent = Instant::now();
                let status = client.submit(merchant, body).await.unwrap_or(0);
                progress.inc(1);
                (status, sent.elapsed().as_micros() as u64)
            }
        })
        .buffer_unordered(options.concurrency)
        .collect::<Vec<_>>()
        .await;
    progress.finish();
    results
}

/// Waits until the funding account holds nothing pending: every push is
/// then terminal (success posts its hold, failure voids it).
async fn await_terminal(
    client: &Client,
    merchant: &Merchant,
    options: &Options,
    created: u64,
) -> anyhow::Result<Value> {
    let progress = bar(created, "completed");
    let started = Instant::now();
    loop {
        let account = client
            .account(Credential::Key(&merchant.key), Some(&merchant.account))
            .await?;
        let pending_minor = account["pending_minor"].as_i64().unwrap_or(i64::MAX);
        let in_flight = (pending_minor / options.amount_minor) as u64;
        progress.set_position(created.saturating_sub(in_flight));
        if pending_minor == 0 {
            progress.finish();
            return Ok(account);
        }
        if started.elapsed() > options.wait {
            progress.abandon();
            bail!(
                "{in_flight} settlement(s) still in flight after {:?}",
                options.wait
            );
        }
        actix_web::rt::time::sleep(COMPLETION_POLL).await;
    }
}

/// Refuses a count or a concurrency the bench cannot hold.
pub(crate) fn check_bounds(count: u64, concurrency: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=SETTLEMENTS_MAX).contains(&count),
        "--count is 1 to {SETTLEMENTS_MAX}"
    );
    anyhow::ensure!(
        (1..=CONCURRENCY_MAX).contains(&concurrency),
        "--concurrency is 1 to {CONCURRENCY_MAX}"
    );
    Ok(())
}

/// Runs the whole bench and answers its figures.
pub async fn settlements(options: &Options) -> anyhow::Result<Report> {
    check_bounds(options.count, options.concurrency)?;
    anyhow::ensure!(options.amount_minor > 0, "--amount must be positive");
    let client = Client::new(&options.url, options.concurrency)?;
    let merchant = client.register().await?;
    let total_minor = options
        .amount_minor
        .checked_mul(options.count as i64)
        .context("count x amount overflows")?;
    let credential = Credential::Key(&merchant.key);
    fund(&client, credential, &merchant.account, total_minor).await?;

    let started = Instant::now();
    let mut results = drive(&client, &merchant, options).await;
    let create_elapsed = started.elapsed();
    let created = results.iter().filter(|(status, _)| *status == 201).count() as u64;
    let mut refused = std::collections::BTreeMap::new();
    for (status, _) in results.iter().filter(|(status, _)| *status != 201) {
        *refused.entry(*status).or_insert(0u64) += 1;
    }
    let account = await_terminal(&client, &merchant, options, created).await?;
    let complete_elapsed = started.elapsed();
    let balance_minor = account["balance_minor"].as_i64().unwrap_or_default();
    let succeeded = ((total_minor - balance_minor) / options.amount_minor) as u64;
    let mut latencies: Vec<u64> = results.drain(..).map(|(_, us)| us).collect();
    Ok(Report {
        created,
        refused: refused.into_iter().collect(),
        create_elapsed,
        complete_elapsed,
        succeeded,
        failed: created.saturating_sub(succeeded),
        latency_us: Percentiles::of(&mut latencies),
    })
}

pub(crate) fn per_s(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(f64::EPSILON)
}

fn ms(us: u64) -> f64 {
    us as f64 / 1_000.0
}

/// `p50 .. ms, p95 .., p99 .., max ..` of percentiles in microseconds.
pub(crate) fn in_ms(p: &Percentiles) -> String {
    format!(
        "p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(p.p50),
        ms(p.p95),
        ms(p.p99),
        ms(p.max)
    )
}

/// `<name> latency: p50 .. ms, p95 .., p99 .., max ..`, as the notes quote it.
pub(crate) fn print_latency(name: &str, p: &Percentiles) {
    println!("{name} latency: {}", in_ms(p));
}

/// Prints the report the way the closing notes quote it.
pub fn print(options: &Options, report: &Report) {
    let pace = match options.rate_per_s {
        Some(rate) => format!("paced at {rate}/s"),
        None => "unpaced".to_owned(),
    };
    println!(
        "settlements: {} card_push at concurrency {} ({pace}) against {}",
        options.count, options.concurrency, options.url
    );
    println!(
        "created:     {} in {:.2} s = {:.0}/s{}",
        report.created,
        report.create_elapsed.as_secs_f64(),
        per_s(report.created, report.create_elapsed),
        if report.refused.is_empty() {
            String::new()
        } else {
            format!(" (refused by status: {:?})", report.refused)
        }
    );
    print_latency("create", &report.latency_us);
    println!(
        "completed:   {} terminal in {:.2} s = {:.0}/s (succeeded {}, failed {})",
        report.created,
        report.complete_elapsed.as_secs_f64(),
        per_s(report.created, report.complete_elapsed),
        report.succeeded,
        report.failed
    );
}

/// The closing ledger check, on the server's database.
pub async fn check_ledger(database_url: &str) -> anyhow::Result<()> {
    let db = Db::connect(database_url).await?;
    let mut pooled = db.get().await?;
    let report = ledger::check(&mut pooled.tx()).await?;
    if report.is_ok() {
        println!(
            "ledger check: ok ({} accounts, {} entries)",
            report.accounts, report.entries
        );
        return Ok(());
    }
    for violation in &report.violations {
        println!("VIOLATION {violation}");
    }
    bail!("{} ledger violation(s)", report.violations.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut samples: Vec<u64> = (1..=100).rev().collect();
        let p = Percentiles::of(&mut samples);
        assert_eq!((p.p50, p.p95, p.p99, p.max), (50, 95, 99, 100));
        let mut one = vec![7];
        let p = Percentiles::of(&mut one);
        assert_eq!((p.p50, p.p99, p.max), (7, 7, 7));
        assert_eq!(Percentiles::of(&mut []).max, 0);
    }
}

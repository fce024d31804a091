//! `tern bench logins`: the password pool under load. It registers a few
//! people, then logs them in from C loops for a while: logins/s is bounded
//! by argon2 on the hashing pool, by design. Meanwhile a few sequential
//! readers ask GET /v1/auth/me with a session, before the logins (idle) and
//! during them, and the report sets the readers' server time (the
//! `Server-Timing: app;dur=` of each answer) and latency side by side: a
//! flood of logins should make logins queue, not reads slow down.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use reqwest::header::{COOKIE, SET_COOKIE};
use serde_json::json;

use super::{in_ms, per_s, print_latency, Client, Percentiles, CONCURRENCY_MAX};

/// The session cookie the server sets (see `crate::auth::session`).
const SESSION_COOKIE: &str = crate::auth::session::SESSION_COOKIE;
/// Every bench user's password.
const PASSWORD: &str = "tern-bench-password";
/// The most users one run registers: each registration costs a hash.
pub const USERS_MAX: usize = 1_000;
/// The most /me readers at once.
pub const READERS_MAX: usize = 64;
/// What the server needs for a login flood (each limit is per address).
pub const RATE_LIMITS_NEEDED: &str = "TERN_RATE_LIMITS=login=1000000/1s,register=1000000/1s";

#[derive(Clone, Debug)]
pub struct Options {
    pub url: String,
    pub users: usize,
    /// Login loops at once.
    pub concurrency: usize,
    /// Sequential GET /v1/auth/me loops.
    pub readers: usize,
    /// How long the logins run.
    pub duration: Duration,
    /// How long the readers run alone first.
    pub baseline: Duration,
    /// The hashing pool's size as far as the bench can tell, for the report.
    pub hashers: String,
}

#[derive(Debug)]
pub struct Report {
    pub logins: u64,
    /// Failed logins, by status (0: no answer).
    pub failures: Vec<(u16, u64)>,
    /// From the first login sent to the last one answered.
    pub elapsed: Duration,
    /// Of the successful logins.
    pub login_latency_us: Percentiles,
    pub idle: Reads,
    pub loaded: Reads,
}

/// One phase of GET /v1/auth/me.
#[derive(Debug, Default)]
pub struct Reads {
    pub ok: u64,
    /// Failed reads, by status (0: no answer).
    pub failures: Vec<(u16, u64)>,
    pub elapsed: Duration,
    /// The answers' `Server-Timing: app;dur=`, in microseconds.
    pub server_us: Percentiles,
    pub client_us: Percentiles,
    /// Successful answers without a readable Server-Timing.
    pub untimed: u64,
}

/// A registered bench user and the session its registration opened.
pub(super) struct User {
    pub(super) email: String,
    pub(super) session: String,
}

/// The `svc_session` token among a response's cookies.
fn session_of(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|cookie| cookie.split(';').next())
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, token)| token.to_owned())
}

/// The `app;dur=<ms>` of a Server-Timing header, in microseconds.
pub fn server_time_us(header: &str) -> Option<u64> {
    header.split(',').find_map(|metric| {
        let mut parts = metric.split(';').map(str::trim);
        if parts.next() != Some("app") {
            return None;
        }
        let ms: f64 = parts.find_map(|p| p.strip_prefix("dur="))?.parse().ok()?;
        Some((ms * 1_000.0).round() as u64)
    })
}

pub(super) fn rate_limited() -> anyhow::Error {
    anyhow::anyhow!("rate limited (429): start the server with {RATE_LIMITS_NEEDED}")
}

pub(super) fn by_status(statuses: impl IntoIterator<Item = u16>) -> Vec<(u16, u64)> {
    let mut counted = BTreeMap::new();
    for status in statuses {
        *counted.entry(status).or_insert(0u64) += 1;
    }
    counted.into_iter().collect()
}

impl Client {
    /// Registers a person (a merchant of their own); a 429 names the
    /// limits the server needs.
    pub(super) async fn register_user(&self) -> anyhow::Result<User> {
        let tag = uuid::Uuid::new_v4().simple().to_string();
        let email = format!("bench-{tag}@example.com");
        let body = json!({"name": format!("Bench {tag:.8}"), "email": email, "password": PASSWORD});
        let response = self
            .http
            .post(format!("{}/v1/auth/register", self.base()))
            .json(&body)
            .send()
            .await
            .context("sending a registration")?;
        match response.status().as_u16() {
            201 => {}
            429 => return Err(rate_limited()),
            status => {
                let body = response.text().await.unwrap_or_default();
                bail!("registering a user: expected 201, got {status}: {body}");
            }
        }
        let session = session_of(&response).context("no svc_session cookie on registration")?;
        Ok(User { email, session })
    }

    /// One login: its status (0: no answer).
    async fn login(&self, email: &str) -> u16 {
        let body = json!({"email": email, "password": PASSWORD});
        let sent = self
            .http
            .post(format!("{}/v1/auth/login", self.base()))
            .json(&body)
            .send()
            .await;
        match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                // Read the body so the connection goes back to the pool.
                let _ = response.bytes().await;
                status
            }
            Err(_) => 0,
        }
    }

    /// One GET /v1/auth/me: its status (0: no answer) and server time.
    async fn me(&self, session: &str) -> (u16, Option<u64>) {
        let sent = self
            .http
            .get(format!("{}/v1/auth/me", self.base()))
            .header(COOKIE, format!("{SESSION_COOKIE}={session}"))
            .send()
            .await;
        match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                let timing = response
                    .headers()
                    .get("server-timing")
                    .and_then(|value| value.to_str().ok())
                    .and_then(server_time_us);
                let _ = response.bytes().await;
                (status, timing)
            }
            Err(_) => (0, None),
        }
    }
}

/// Every reader's samples: (status, client µs, server µs).
type Samples = Vec<(u16, u64, Option<u64>)>;

/// `readers` sequential loops of GET /v1/auth/me until `stop` is set.
async fn read_until(client: &Client, users: &[User], readers: usize, stop: &AtomicBool) -> Reads {
    let started = Instant::now();
    let loops = (0..readers).map(|reader| async move {
        let session = &users[reader % users.len()].session;
        let mut samples: Samples = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let sent = Instant::now();
            let (status, server_us) = client.me(session).await;
            samples.push((status, sent.elapsed().as_micros() as u64, server_us));
        }
        samples
    });
    let samples: Samples = futures_util::future::join_all(loops)
        .await
        .into_iter()
        .flatten()
        .collect();
    let elapsed = started.elapsed();
    let ok: Vec<_> = samples
        .iter()
        .filter(|(status, ..)| *status == 200)
        .collect();
    let mut client_us: Vec<u64> = ok.iter().map(|(_, us, _)| *us).collect();
    let mut server_us: Vec<u64> = ok.iter().filter_map(|(.., us)| *us).collect();
    Reads {
        ok: ok.len() as u64,
        failures: by_status(
            samples
                .iter()
                .map(|(status, ..)| *status)
                .filter(|status| *status != 200),
        ),
        elapsed,
        untimed: (client_us.len() - server_us.len()) as u64,
        server_us: Percentiles::of(&mut server_us),
        client_us: Percentiles::of(&mut client_us),
    }
}

/// Reads for `how_long` with nothing else running.
async fn read_alone(client: &Client, users: &[User], readers: usize, how_long: Duration) -> Reads {
    let stop = AtomicBool::new(false);
    let stopper = async {
        actix_web::rt::time::sleep(how_long).await;
        stop.store(true, Ordering::Relaxed);
    };
    futures_util::future::join(read_until(client, users, readers, &stop), stopper)
        .await
        .0
}

/// `concurrency` loops logging the users in, round-robin, until `deadline`;
/// answers each login's status and latency.
async fn log_in_until(
    client: &Client,
    users: &[User],
    concurrency: usize,
    deadline: Instant,
) -> Vec<(u16, u64)> {
    let next = &AtomicUsize::new(0);
    let loops = (0..concurrency).map(|_| async move {
        let mut results = Vec::new();
        while Instant::now() < deadline {
            let user = &users[next.fetch_add(1, Ordering::Relaxed) % users.len()];
            let sent = Instant::now();
            let status = client.login(&user.email).await;
            results.push((status, sent.elapsed().as_micros() as u64));
        }
        results
    });
    futures_util::future::join_all(loops)
        .await
        .into_iter()
        .flatten()
        .collect()
}

pub async fn run(options: &Options) -> anyhow::Result<Report> {
    anyhow::ensure!(
        (1..=USERS_MAX).contains(&options.users),
        "--users is 1 to {USERS_MAX}"
    );
    anyhow::ensure!(
        (1..=CONCURRENCY_MAX).contains(&options.concurrency),
        "--concurrency is 1 to {CONCURRENCY_MAX}"
    );
    anyhow::ensure!(
        (1..=READERS_MAX).contains(&options.readers),
        "--readers is 1 to {READERS_MAX}"
    );
    let client = Client::new(&options.url, options.concurrency + options.readers)?;
    let mut users = Vec::with_capacity(options.users);
    for _ in 0..options.users {
        users.push(client.register_user().await?);
    }

    let idle = read_alone(&client, &users, options.readers, options.baseline).await;

    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let logins = async {
        let results = log_in_until(
            &client,
            &users,
            options.concurrency,
            started + options.duration,
        )
        .await;
        stop.store(true, Ordering::Relaxed);
        (results, started.elapsed())
    };
    let reads = read_until(&client, &users, options.readers, &stop);
    let ((results, elapsed), loaded) = futures_util::future::join(logins, reads).await;

    let mut latencies: Vec<u64> = results
        .iter()
        .filter(|(status, _)| *status == 200)
        .map(|(_, us)| *us)
        .collect();
    Ok(Report {
        logins: latencies.len() as u64,
        failures: by_status(
            results
                .iter()
                .map(|(status, _)| *status)
                .filter(|status| *status != 200),
        ),
        elapsed,
        login_latency_us: Percentiles::of(&mut latencies),
        idle,
        loaded,
    })
}

fn failed(failures: &[(u16, u64)]) -> String {
    let total: u64 = failures.iter().map(|(_, count)| count).sum();
    if failures.is_empty() {
        "failed 0".to_owned()
    } else {
        format!("failed {total}, by status: {failures:?}")
    }
}

fn print_reads(name: &str, reads: &Reads) {
    println!(
        "{name}: {} in {:.2} s = {:.0}/s ({}{})",
        reads.ok,
        reads.elapsed.as_secs_f64(),
        per_s(reads.ok, reads.elapsed),
        failed(&reads.failures),
        if reads.untimed > 0 {
            format!(", {} without Server-Timing", reads.untimed)
        } else {
            String::new()
        }
    );
    println!("{name} server time: {}", in_ms(&reads.server_us));
    print_latency(name, &reads.client_us);
}

/// Prints the report; a run with no successful login is an error.
pub fn print(options: &Options, report: &Report) -> anyhow::Result<()> {
    println!(
        "logins: {} users, concurrency {} for {:.1} s, {} /me reader(s) ({:.1} s idle first) against {}",
        options.users,
        options.concurrency,
        options.duration.as_secs_f64(),
        options.readers,
        options.baseline.as_secs_f64(),
        options.url
    );
    println!("hashers: {}", options.hashers);
    println!(
        "logins:  {} in {:.2} s = {:.1}/s ({})",
        report.logins,
        report.elapsed.as_secs_f64(),
        per_s(report.logins, report.elapsed),
        failed(&report.failures)
    );
    print_latency("login", &report.login_latency_us);
    print_reads("/me idle", &report.idle);
    print_reads("/me under logins", &report.loaded);
    let limited = |failures: &[(u16, u64)]| failures.iter().any(|(status, _)| *status == 429);
    if limited(&report.failures) || limited(&report.loaded.failures) {
        return Err(rate_limited());
    }
    if report.logins == 0 {
        bail!("no login succeeded");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_timing_is_read_in_microseconds() {
        assert_eq!(server_time_us("app;dur=0.153"), Some(153));
        assert_eq!(server_time_us("db;dur=2, app;dur=12.5"), Some(12_500));
        assert_eq!(server_time_us("app"), None);
        assert_eq!(server_time_us("app;dur=x"), None);
    }
}

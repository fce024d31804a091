//! `tern bench authorizations`: card authorization decisions under load.
//! It registers K people (each a merchant of their own: there is no public
//! way to add a second user to a merchant), funds each one's USD funding
//! account with a card_charge, issues each a card with its session and lifts
//! the card's amount limits, so that the run measures decisions, not
//! declines. Then it posts N `authorization.request` webhooks at concurrency
//! C to `POST /v1/webhooks/sandbox`, signed exactly as the simulator signs
//! them, round-robin over the cards, and prints decisions/s (overall and
//! the median of the run's one-second buckets), approvals, declines by
//! reason, non-200 answers by status and the client-side latency. With
//! `--clear` it then clears every approval. It ends by checking, per card,
//! that the card's holds equal its approvals times the amount and that the
//! funding account's pending debits and balance agree; the ledger check
//! follows on the server's database.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::json;
use tern_actors::adapters::{sign_payload, SANDBOX_SIGNATURE_HEADER};

use super::logins::by_status;
use super::{bar, check_bounds, fund, in_ms, per_s, Client, Credential, Percentiles};

/// The most cards one run issues: each costs a registration (a password hash).
pub const CARDS_MAX: usize = 1_000;
/// The largest amount one authorization asks, in minor units.
pub const AMOUNT_MINOR_MAX: i64 = 1_000_000;
/// People registered and cards issued at once while setting up.
const SETUP_CONCURRENCY: usize = 4;
/// The least a card is funded with, in minor units: a run of one cent per
/// card still funds with a full dollar.
const FUNDING_MINOR_MIN: i64 = 100;
/// Where the card provider's webhooks go (decisions §15).
const WEBHOOK_PATH: &str = "/v1/webhooks/sandbox";
/// The amount limits a bench card runs without: `null` removes each.
const NO_AMOUNT_LIMITS: &str =
    r#"{"per_transaction_minor":null,"daily_spend_minor":null,"monthly_spend_minor":null}"#;

#[derive(Clone, Debug)]
pub struct Options {
    pub url: String,
    /// Cards (and people) the requests are spread over.
    pub cards: usize,
    pub count: u64,
    pub concurrency: usize,
    pub amount_minor: i64,
    /// The server's TERN_CARD_PROVIDER_WEBHOOK_SECRET.
    pub webhook_secret: String,
    /// Then send an `authorization.clearing` for every approval.
    pub clear: bool,
    pub database_url: Option<String>,
}

/// One phase's requests: the authorization requests, or the clearings.
#[derive(Debug, Default)]
pub struct Phase {
    pub sent: u64,
    /// Answered 200 with a body the bench understood.
    pub answered: u64,
    /// Answers other than 200, by status (0: no answer).
    pub failures: Vec<(u16, u64)>,
    /// Answered 200 with a body the bench did not understand.
    pub unreadable: u64,
    /// From the first request sent to the last one answered.
    pub elapsed: Duration,
    /// The median of the answers per whole second of the run; `None` for
    /// a run shorter than one second.
    pub median_per_s: Option<f64>,
    pub latency_us: Percentiles,
}

/// What one card's balance says after the run, beside what the bench expects.
#[derive(Debug)]
pub struct CardCheck {
    pub card_id: String,
    pub approved: u64,
    pub cleared: u64,
    pub expected_hold_minor: i64,
    /// The card's open authorizations (its transactions).
    pub hold_minor: i64,
    /// The funding account's pending debits (its ledger):
    /// `balance_minor - available_minor`.
    pub pending_debits_minor: i64,
    pub expected_balance_minor: i64,
    pub balance_minor: i64,
}

impl CardCheck {
    pub fn holds(&self) -> bool {
        self.hold_minor == self.expected_hold_minor
            && self.pending_debits_minor == self.expected_hold_minor
            && self.balance_minor == self.expected_balance_minor
    }
}

#[derive(Debug)]
pub struct Report {
    pub decisions: Phase,
    pub approved: u64,
    /// Declined decisions by reason.
    pub declines: Vec<(String, u64)>,
    /// With `--clear`: the clearings of the approvals.
    pub clearings: Option<Phase>,
    pub cards: Vec<CardCheck>,
}

/// A card of the run and the session of the person it belongs to.
struct BenchCard {
    id: String,
    session: String,
    funded_minor: i64,
}

/// The decision an `authorization.request` is answered with.
#[derive(Debug, Deserialize)]
struct Decision {
    approved: bool,
    reason: Option<String>,
}

/// The answer to any other provider event.
#[derive(Debug, Deserialize)]
struct Received {
    received: bool,
}

/// One request: which one, its answer and when it came.
struct Sent<A> {
    index: u64,
    status: u16,
    answer: Option<A>,
    latency_us: u64,
    /// Since the phase started.
    finished_ms: u64,
}

fn check_options(options: &Options) -> anyhow::Result<()> {
    check_bounds(options.count, options.concurrency)?;
    anyhow::ensure!(
        (1..=CARDS_MAX).contains(&options.cards),
        "--cards is 1 to {CARDS_MAX}"
    );
    anyhow::ensure!(
        (1..=AMOUNT_MINOR_MAX).contains(&options.amount_minor),
        "--amount-minor is 1 to {AMOUNT_MINOR_MAX}"
    );
    anyhow::ensure!(
        !options.webhook_secret.is_empty(),
        "--webhook-secret (or TERN_CARD_PROVIDER_WEBHOOK_SECRET) must be the server's"
    );
    Ok(())
}

impl Client {
    /// A person with a funded USD account and a card without amount limits.
    async fn bench_card(&self, funded_minor: i64) -> anyhow::Result<BenchCard> {
        let user = self.register_user().await?;
        let credential = Credential::Session(&user.session);
        let account = self.account(credential, None).await?;
        let account = account["id"].as_str().context("no account id")?;
        fund(self, credential, account, funded_minor).await?;
        let issue = credential.apply(self.http.post(format!("{}/v1/cards", self.base())));
        let card = self.json(issue, 201).await.context("issuing a card")?;
        let id = card["id"].as_str().context("no card id")?.to_owned();
        let limits = credential
            .apply(
                self.http
                    .patch(format!("{}/v1/cards/{id}/limits", self.base())),
            )
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(NO_AMOUNT_LIMITS);
        self.json(limits, 200)
            .await
            .context("lifting the card's limits")?;
        Ok(BenchCard {
            id,
            session: user.session,
            funded_minor,
        })
    }

    /// Posts a provider event signed as the simulator signs it; answers the
    /// status (0: no answer) and the answer, if it was understood.
    async fn provider_event<A: DeserializeOwned>(
        &self,
        secret: &str,
        body: String,
    ) -> (u16, Option<A>) {
        let signature = sign_payload(
            secret.as_bytes(),
            chrono::Utc::now().timestamp(),
            body.as_bytes(),
        );
        let sent = self
            .http
            .post(format!("{}{WEBHOOK_PATH}", self.base()))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SANDBOX_SIGNATURE_HEADER, signature)
            .body(body)
            .send()
            .await;
        match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                let bytes = response.bytes().await.unwrap_or_default();
                let answer = (status == 200)
                    .then(|| serde_json::from_slice(&bytes).ok())
                    .flatten();
                (status, answer)
            }
            Err(_) => (0, None),
        }
    }
}

/// The K cards, set up a few at a time.
async fn set_up(client: &Client, options: &Options) -> anyhow::Result<Vec<BenchCard>> {
    let per_card = options.count.div_ceil(options.cards as u64);
    let funded_minor = i64::try_from(per_card)
        .ok()
        .and_then(|count| count.checked_mul(options.amount_minor))
        .context("count x amount overflows")?
        .max(FUNDING_MINOR_MIN);
    let progress = bar(options.cards as u64, "cards");
    let made: Vec<anyhow::Result<BenchCard>> = futures_util::stream::iter(0..options.cards)
        .map(|_| async {
            let card = client.bench_card(funded_minor).await;
            progress.inc(1);
            card
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .collect()
        .await;
    progress.finish();
    made.into_iter().collect()
}

/// Sends the event `body(index)` for every index, `concurrency` at once.
async fn drive<A: DeserializeOwned>(
    client: &Client,
    options: &Options,
    what: &str,
    indices: &[u64],
    body: impl Fn(u64) -> String,
) -> (Vec<Sent<A>>, Duration) {
    let progress = bar(indices.len() as u64, what);
    let started = Instant::now();
    let sent = futures_util::stream::iter(indices.iter().copied())
        .map(|index| {
            let (body, progress) = (&body, &progress);
            async move {
                let sent = Instant::now();
                let (status, answer) = client
                    .provider_event(&options.webhook_secret, body(index))
                    .await;
                progress.inc(1);
                Sent {
                    index,
                    status,
                    answer,
                    latency_us: sent.elapsed().as_micros() as u64,
                    finished_ms: started.elapsed().as_millis() as u64,
                }
            }
        })
        .buffer_unordered(options.concurrency)
        .collect::<Vec<_>>()
        .await;
    progress.finish();
    (sent, started.elapsed())
}

/// The median of the answers counted in each whole second of `elapsed`
/// (the last, partial second left out); `None` under one second.
pub fn median_per_s(finished_ms: impl IntoIterator<Item = u64>, elapsed: Duration) -> Option<f64> {
    let seconds = usize::try_from(elapsed.as_secs()).ok().filter(|s| *s > 0)?;
    let mut buckets = vec![0u64; seconds];
    for ms in finished_ms {
        if let Some(bucket) = usize::try_from(ms / 1_000)
            .ok()
            .and_then(|s| buckets.get_mut(s))
        {
            *bucket += 1;
        }
    }
    buckets.sort_unstable();
    let middle = buckets.len() / 2;
    Some(if buckets.len() % 2 == 1 {
        buckets[middle] as f64
    } else {
        (buckets[middle - 1] + buckets[middle]) as f64 / 2.0
    })
}

/// The phase's figures; `understood` says whether an answer counts.
fn phase<A>(sent: &[Sent<A>], elapsed: Duration, understood: impl Fn(&A) -> bool) -> Phase {
    let understood: Vec<&Sent<A>> = sent
        .iter()
        .filter(|s| s.answer.as_ref().is_some_and(&understood))
        .collect();
    let answered = understood.len() as u64;
    let ok_status = sent.iter().filter(|s| s.status == 200).count() as u64;
    let mut latencies: Vec<u64> = sent.iter().map(|s| s.latency_us).collect();
    Phase {
        sent: sent.len() as u64,
        answered,
        failures: by_status(sent.iter().map(|s| s.status).filter(|s| *s != 200)),
        unreadable: ok_status.saturating_sub(answered),
        elapsed,
        median_per_s: median_per_s(understood.iter().map(|s| s.finished_ms), elapsed),
        latency_us: Percentiles::of(&mut latencies),
    }
}

/// Each card's balance beside its approvals and clearings.
async fn check_cards(
    client: &Client,
    options: &Options,
    cards: &[BenchCard],
    approved: &[u64],
    cleared: &[u64],
) -> anyhow::Result<Vec<CardCheck>> {
    let mut checks = Vec::with_capacity(cards.len());
    for (n, card) in cards.iter().enumerate() {
        let url = format!("{}/v1/cards/{}/balance", client.base(), card.id);
        let request = Credential::Session(&card.session).apply(client.http.get(url));
        let balance = client.json(request, 200).await?;
        let minor = |field: &str| {
            balance[field]
                .as_i64()
                .with_context(|| format!("no {field} in the card's balance"))
        };
        let (approved, cleared) = (approved[n], cleared[n]);
        let amount = options.amount_minor;
        let (balance_minor, available_minor) = (minor("balance_minor")?, minor("available_minor")?);
        checks.push(CardCheck {
            card_id: card.id.clone(),
            approved,
            cleared,
            expected_hold_minor: (approved - cleared) as i64 * amount,
            hold_minor: minor("hold_minor")?,
            pending_debits_minor: balance_minor - available_minor,
            expected_balance_minor: card.funded_minor - cleared as i64 * amount,
            balance_minor,
        });
    }
    Ok(checks)
}

fn authorization_body(tag: &str, index: u64, card_id: &str, amount_minor: i64) -> String {
    json!({"id": format!("evt_{tag}_{index}"), "type": "authorization.request", "data": {
        "authorization_id": format!("auth_{tag}_{index}"), "card_id": card_id,
        "amount_minor": amount_minor, "currency": "USD", "merchant": "Bench", "mcc": "5999",
        "channel": "pos", "country": "US"}})
    .to_string()
}

fn clearing_body(tag: &str, index: u64, card_id: &str, amount_minor: i64) -> String {
    json!({"id": format!("evt_{tag}_{index}_clear"), "type": "authorization.clearing", "data": {
        "authorization_id": format!("auth_{tag}_{index}"), "card_id": card_id,
        "amount_minor": amount_minor}})
    .to_string()
}

pub async fn run(options: &Options) -> anyhow::Result<Report> {
    check_options(options)?;
    let client = Client::new(&options.url, options.concurrency)?;
    let cards = set_up(&client, options).await?;
    let card_of = |index: u64| &cards[(index % cards.len() as u64) as usize];
    // Event and authorization ids unique to this run.
    let tag: String = uuid::Uuid::new_v4()
        .simple()
        .to_string()
        .chars()
        .take(12)
        .collect();

    let indices: Vec<u64> = (0..options.count).collect();
    let (sent, elapsed) = drive::<Decision>(&client, options, "decisions", &indices, |i| {
        authorization_body(&tag, i, &card_of(i).id, options.amount_minor)
    })
    .await;
    let decisions = phase(&sent, elapsed, |_| true);
    let mut approved = vec![0u64; cards.len()];
    let mut approvals = Vec::new();
    let mut declines = BTreeMap::new();
    for s in &sent {
        match &s.answer {
            Some(Decision { approved: true, .. }) => {
                approved[(s.index % cards.len() as u64) as usize] += 1;
                approvals.push(s.index);
            }
            Some(Decision { reason, .. }) => {
                let reason = reason.clone().unwrap_or_else(|| "(none)".into());
                *declines.entry(reason).or_insert(0u64) += 1;
            }
            None => {}
        }
    }
    drop(sent);
    approvals.sort_unstable();

    let mut cleared = vec![0u64; cards.len()];
    let clearings = if options.clear {
        let (sent, elapsed) = drive::<Received>(&client, options, "clearings", &approvals, |i| {
            clearing_body(&tag, i, &card_of(i).id, options.amount_minor)
        })
        .await;
        for s in sent
            .iter()
            .filter(|s| s.answer.as_ref().is_some_and(|a| a.received))
        {
            cleared[(s.index % cards.len() as u64) as usize] += 1;
        }
        Some(phase(&sent, elapsed, |answer| answer.received))
    } else {
        None
    };
    let checks = check_cards(&client, options, &cards, &approved, &cleared).await?;
    Ok(Report {
        decisions,
        approved: approvals.len() as u64,
        declines: declines.into_iter().collect(),
        clearings,
        cards: checks,
    })
}

fn print_phase(name: &str, noun: &str, phase: &Phase) {
    let median = match phase.median_per_s {
        Some(median) => format!(
            "median {median:.0}/s over {} one-second buckets",
            phase.elapsed.as_secs()
        ),
        None => "median n/a (under one second)".to_owned(),
    };
    println!(
        "{:<11} {} {noun} of {} in {:.2} s = {:.0}/s overall, {median}",
        format!("{name}:"),
        phase.answered,
        phase.sent,
        phase.elapsed.as_secs_f64(),
        per_s(phase.answered, phase.elapsed),
    );
    let failures = if phase.failures.is_empty() {
        "none".to_owned()
    } else {
        format!("{:?} (status, count; 0: no answer)", phase.failures)
    };
    println!("{:<11} {failures}", "non-200:");
    if phase.unreadable > 0 {
        println!(
            "{:<11} {} answered 200 unreadably",
            "unreadable:", phase.unreadable
        );
    }
    println!("{name} latency: {}", in_ms(&phase.latency_us));
}

fn phase_failed(phase: &Phase) -> bool {
    !phase.failures.is_empty() || phase.unreadable > 0 || phase.answered < phase.sent
}

/// Prints the report; a request unanswered or a card whose balance does
/// not match its decisions fails the run.
pub fn print(options: &Options, report: &Report) -> anyhow::Result<()> {
    println!(
        "authorizations: {} authorization.request of {} minor over {} card(s) at concurrency {} against {}",
        options.count, options.amount_minor, options.cards, options.concurrency, options.url
    );
    print_phase("decisions", "answered", &report.decisions);
    let declined: u64 = report.declines.iter().map(|(_, n)| n).sum();
    println!(
        "{:<11} {}, declined {declined}{}",
        "approved:",
        report.approved,
        if report.declines.is_empty() {
            String::new()
        } else {
            format!(" by reason {:?}", report.declines)
        }
    );
    if let Some(clearings) = &report.clearings {
        print_phase("clearings", "cleared", clearings);
    }
    let wrong: Vec<&CardCheck> = report.cards.iter().filter(|c| !c.holds()).collect();
    for card in &wrong {
        println!("MISMATCH {card:?}");
    }
    if wrong.is_empty() {
        println!(
            "holds: ok on {} card(s) (hold = (approved - cleared) x amount = the funding account's pending debits; balance = funded - cleared x amount)",
            report.cards.len()
        );
    }
    if phase_failed(&report.decisions) || report.clearings.as_ref().is_some_and(phase_failed) {
        bail!("not every request was answered 200 with a decision or a receipt");
    }
    if !wrong.is_empty() {
        bail!("{} card(s) hold other than their decisions", wrong.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn the_median_is_over_whole_seconds() {
        // 3 in second 0, 1 in second 1, 5 in second 2, the partial 3rd left out.
        let finished = [10, 20, 999, 1_500, 2_000, 2_100, 2_200, 2_300, 2_999, 3_100];
        assert_eq!(
            median_per_s(finished, Duration::from_millis(3_400)),
            Some(3.0)
        );
        assert_eq!(
            median_per_s([10, 1_010, 1_020], Duration::from_secs(2)),
            Some(1.5)
        );
        assert_eq!(median_per_s([10], Duration::from_millis(900)), None);
    }

    #[test]
    fn bodies_are_provider_events() {
        let body: Value =
            serde_json::from_str(&authorization_body("t", 7, "card_1", 3)).expect("json");
        assert_eq!(body["id"], "evt_t_7");
        assert_eq!(body["data"]["authorization_id"], "auth_t_7");
        assert_eq!(body["data"]["amount_minor"], 3);
        let clear: Value = serde_json::from_str(&clearing_body("t", 7, "card_1", 3)).expect("json");
        assert_eq!(clear["type"], "authorization.clearing");
        assert_eq!(clear["data"]["authorization_id"], "auth_t_7");
    }
}

//! `tern bench webhooks`: deliveries/s and delivery lag of signed webhooks.
//! A receiver of the bench's own ([`super::receiver`]) becomes a fresh
//! merchant's endpoint; the transfers of `tern bench transfers` then run for
//! that merchant, and every status change's event is counted, checked and
//! timed on arrival. With `--replay`, every transfer's events are replayed
//! once they are all delivered: re-deliveries free of the transfer pipeline.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::deliveries::{Tally, SUCCEEDED_ORDER};
use super::receiver::{Phase, Receiver};
use super::transfers::{self, drive_to_terminal};
use super::{bar, check_bounds, in_ms, per_s, tls, Client, Merchant, Percentiles};

/// How often the receiver's count is read (in memory, no request).
const RECEIPT_POLL: Duration = Duration::from_millis(20);
/// How long without a receipt before the server is asked whether anything
/// is still to deliver (and how often then): while events arrive, the bench
/// leaves the server alone.
const PENDING_POLL: Duration = Duration::from_millis(500);
/// That question's limit: an overloaded server's silence is no answer.
const PENDING_TIMEOUT: Duration = Duration::from_secs(5);
/// No receipt for this long ends a wait early (unless the server said
/// nothing is left): a healthy receiver answers at once, and the first
/// retry comes after seconds, so the server has stopped delivering.
const STALL_AFTER: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
pub struct Options {
    /// The transfers to drive; their `wait` also bounds each wait for
    /// deliveries.
    pub transfers: transfers::Options,
    pub tls_dir: PathBuf,
    pub receiver_bind: String,
    pub replay: bool,
}

#[derive(Debug)]
pub struct Report {
    pub endpoint: String,
    pub transfers: transfers::Report,
    /// Events the transfers' status changes make.
    pub expected: u64,
    pub delivered: Tally,
    /// From the first transfer started to the last receipt.
    pub whole_run: Duration,
    pub replay: Option<Replayed>,
    pub connections: u64,
    pub handshake_failures: u64,
    /// Why the run stopped short of every delivery, if it did.
    pub shortfall: Option<String>,
}

#[derive(Debug)]
pub struct Replayed {
    pub transfers: u64,
    pub requeued: u64,
    /// Failed replay requests, by status (0: no answer).
    pub refused: Vec<(u16, u64)>,
    pub tally: Tally,
    /// Lag from each replay's answer (its re-arm committed) to receipt;
    /// zero for events that arrived before the answer was read.
    pub answered_lag_us: Percentiles,
    /// From the first replay request sent to the last receipt.
    pub whole_run: Duration,
}

/// What ended a wait for deliveries.
#[derive(Debug, PartialEq)]
enum Waited {
    AllReceived,
    /// The server has nothing left to deliver (failed transfers make fewer
    /// events; dead letters never arrive).
    NothingPending,
    TimedOut,
    /// No receipt for [`STALL_AFTER`].
    Stalled,
    /// Nothing arrived and the server reports this failed attempt.
    Failing(String),
}

impl Waited {
    /// What a phase that ended so lacks, when it lacks anything.
    fn shortfall(
        &self,
        what: &str,
        received: u64,
        expected: u64,
        wait: Duration,
    ) -> Option<String> {
        match self {
            Waited::TimedOut => Some(format!(
                "{received} of {expected} {what} received in {wait:?}"
            )),
            Waited::Stalled => Some(format!(
                "{received} of {expected} {what} received, then none for {STALL_AFTER:?} \
                 (see GET /health/actors, kind webhook_endpoint)"
            )),
            _ if received < expected => Some(format!("{received} of {expected} {what} received")),
            _ => None,
        }
    }
}

pub async fn run(options: &Options) -> anyhow::Result<Report> {
    let flow = &options.transfers;
    check_bounds(flow.count, flow.concurrency)?;
    let (files, made) = tls::ensure(&options.tls_dir)?;
    if made {
        println!(
            "made {}, {} and {}: the server must trust the CA; start it with {}",
            files.ca.display(),
            files.cert.display(),
            files.key.display(),
            files.server_env()
        );
    }
    let key: [u8; 32] = rand::random();
    let receiver = Receiver::start(&options.receiver_bind, &files, key.to_vec())?;
    let client = Client::new(&flow.url, flow.concurrency)?;
    let merchant = client.register().await?;
    let endpoint = endpoint_url(&receiver, &merchant);
    let secret = format!("whsec_{}", STANDARD.encode(key));
    put_endpoint(&client, &merchant, &endpoint, &secret)
        .await
        .with_context(|| {
            format!(
                "storing {endpoint}: start the server with {}",
                files.server_env()
            )
        })?;

    let driven = drive_to_terminal(&client, &merchant, flow).await?;
    let expected = SUCCEEDED_ORDER.len() as u64 * driven.report.created;
    let waited = await_receipts(
        &client,
        &merchant,
        &receiver,
        Phase::Transfers,
        expected,
        flow,
    )
    .await?;
    if let Waited::Failing(error) = waited {
        bail!(
            "the server cannot deliver to the receiver ({error}): start it with {}",
            files.server_env()
        );
    }
    let records = receiver.records(Phase::Transfers);
    let delivered = Tally::of(&records, |record| {
        let lag = record.at_utc - record.created_at?;
        // Same machine, same clock: a negative lag is rounding.
        Some(lag.num_microseconds().unwrap_or_default().max(0) as u64)
    });
    // Fewer events than expected are no shortfall once the server has
    // nothing left to send: failed transfers make fewer.
    let mut shortfall = match waited {
        Waited::NothingPending => None,
        _ => waited.shortfall("events", delivered.unique, expected, flow.wait),
    };
    let replay = match shortfall {
        Some(_) => None,
        None if options.replay => {
            // A failed replay still leaves the first phase's figures to print.
            match replay(&client, &merchant, &receiver, &driven.transfer_ids, flow).await {
                Ok((replayed, waited)) => {
                    shortfall = waited.shortfall(
                        "replayed events",
                        replayed.tally.unique,
                        replayed.requeued,
                        flow.wait,
                    );
                    Some(replayed)
                }
                Err(error) => {
                    shortfall = Some(format!("replay: {error:#}"));
                    None
                }
            }
        }
        None => None,
    };
    Ok(Report {
        endpoint,
        transfers: driven.report,
        expected,
        whole_run: delivered.since(driven.started),
        delivered,
        replay,
        connections: receiver.connections(),
        handshake_failures: receiver.handshake_failures(),
        shortfall,
    })
}

/// `https://<receiver>/bench/<merchant id>`; a wildcard bind is reached on
/// 127.0.0.1, a name the certificate holds.
fn endpoint_url(receiver: &Receiver, merchant: &Merchant) -> String {
    let mut address = receiver.address();
    if address.ip().is_unspecified() {
        address.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    format!("https://{address}/bench/{}", merchant.id)
}

async fn put_endpoint(
    client: &Client,
    merchant: &Merchant,
    url: &str,
    secret: &str,
) -> anyhow::Result<()> {
    let request = (client.http)
        .put(format!("{}/v1/webhooks/endpoint", client.base()))
        .bearer_auth(&merchant.key)
        .json(&json!({"url": url, "secret": secret}));
    client.json(request, 204).await.map(drop)
}

/// The merchant's oldest-listed event still waiting for delivery, if any.
async fn pending(client: &Client, merchant: &Merchant) -> anyhow::Result<Option<Value>> {
    let request = (client.http)
        .get(format!(
            "{}/v1/webhooks/deliveries?status=pending&limit=1",
            client.base()
        ))
        .timeout(PENDING_TIMEOUT)
        .bearer_auth(&merchant.key);
    let page = client.json(request, 200).await?;
    Ok(page["items"]
        .as_array()
        .and_then(|items| items.first())
        .cloned())
}

/// Waits until the receiver has `expected` distinct events of `phase`, or
/// the server has nothing left to deliver, or the wait is over. Stops at
/// once when nothing ever arrived and the server reports a failed attempt:
/// the server does not trust the CA or refuses the loopback target.
async fn await_receipts(
    client: &Client,
    merchant: &Merchant,
    receiver: &Receiver,
    phase: Phase,
    expected: u64,
    flow: &transfers::Options,
) -> anyhow::Result<Waited> {
    let progress = bar(expected, "received");
    let started = Instant::now();
    let (mut asked, mut progressed, mut last) = (started, started, 0);
    let waited = loop {
        let unique = receiver.unique(phase) as u64;
        progress.set_position(unique);
        if unique >= expected {
            break Waited::AllReceived;
        }
        if started.elapsed() > flow.wait {
            break Waited::TimedOut;
        }
        if unique > last {
            (last, progressed) = (unique, Instant::now());
        }
        if progressed.elapsed() > STALL_AFTER {
            break Waited::Stalled;
        }
        if progressed.elapsed() >= PENDING_POLL && asked.elapsed() >= PENDING_POLL {
            // Unanswered (a busy server) tells nothing: keep waiting.
            let answer = pending(client, merchant).await.ok();
            asked = Instant::now();
            match answer {
                Some(None) => break Waited::NothingPending,
                Some(Some(event)) if unique == 0 && phase == Phase::Transfers => {
                    if let Some(error) = first_error(&event) {
                        break Waited::Failing(error);
                    }
                }
                _ => {}
            }
        }
        tokio::time::sleep(RECEIPT_POLL).await;
    };
    match waited {
        Waited::AllReceived => progress.finish(),
        _ => progress.abandon(),
    }
    Ok(waited)
}

fn first_error(event: &Value) -> Option<String> {
    let attempts = event["attempt_log"].as_array()?;
    attempts
        .iter()
        .find_map(|attempt| attempt["error"].as_str().map(str::to_owned))
}

/// Waits until the server has recorded every delivery: a replay re-arms
/// delivered events only, and the receiver sees an event before the server
/// records its answer.
async fn await_recorded(
    client: &Client,
    merchant: &Merchant,
    wait: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let still = match pending(client, merchant).await {
            Ok(None) => return Ok(()),
            Ok(Some(event)) => format!("event {} still pending", event["event_id"]),
            Err(error) => format!("{error:#}"),
        };
        if started.elapsed() > wait {
            bail!("the server had not recorded every delivery after {wait:?}: {still}");
        }
        tokio::time::sleep(RECEIPT_POLL).await;
    }
}

/// Replays every transfer at the run's concurrency and measures the
/// re-deliveries from each transfer's replay request.
async fn replay(
    client: &Client,
    merchant: &Merchant,
    receiver: &Receiver,
    transfer_ids: &[String],
    flow: &transfers::Options,
) -> anyhow::Result<(Replayed, Waited)> {
    await_recorded(client, merchant, flow.wait).await?;
    receiver.begin(Phase::Replay);
    let progress = bar(transfer_ids.len() as u64, "replayed");
    let started = Instant::now();
    let answers = futures_util::stream::iter(transfer_ids)
        .map(|id| {
            let progress = &progress;
            async move {
                let sent = Instant::now();
                let body = json!({"transfer_id": id});
                let (status, answer) = client
                    .post(&merchant.key, "/v1/webhooks/replay", &body, false)
                    .await;
                let answered = Instant::now();
                progress.inc(1);
                (
                    id.as_str(),
                    (sent, answered),
                    status,
                    answer["requeued"].as_u64(),
                )
            }
        })
        .buffer_unordered(flow.concurrency)
        .collect::<Vec<_>>()
        .await;
    progress.finish();
    let mut refused = BTreeMap::new();
    let mut requeued = 0;
    let mut sent_at = HashMap::new();
    for (id, sent, status, count) in answers {
        match count.filter(|_| status == 200) {
            Some(count) => {
                requeued += count;
                sent_at.insert(id, sent);
            }
            None => *refused.entry(status).or_insert(0u64) += 1,
        }
    }
    let waited = await_receipts(client, merchant, receiver, Phase::Replay, requeued, flow).await?;
    let records = receiver.records(Phase::Replay);
    let tally = Tally::of(&records, |record| {
        let (sent, _) = sent_at.get(record.transfer_id.as_str())?;
        Some(record.at.saturating_duration_since(*sent).as_micros() as u64)
    });
    let answered = Tally::of(&records, |record| {
        let (_, answered) = sent_at.get(record.transfer_id.as_str())?;
        Some(record.at.saturating_duration_since(*answered).as_micros() as u64)
    });
    let replayed = Replayed {
        transfers: transfer_ids.len() as u64,
        requeued,
        refused: refused.into_iter().collect(),
        answered_lag_us: answered.lag_us,
        whole_run: tally.since(started),
        tally,
    };
    Ok((replayed, waited))
}

/// `<what>: R received of E expected, U unique webhook-ids, ...`
fn print_counts(what: &str, tally: &Tally, expected: u64) {
    println!(
        "{what}: {} received of {expected} expected, {} unique webhook-ids, {} duplicates, {} bad signatures, {} order violations{}",
        tally.received,
        tally.unique,
        tally.duplicates,
        tally.bad_signatures,
        tally.order_violations,
        if tally.malformed == 0 {
            String::new()
        } else {
            format!(", {} malformed bodies", tally.malformed)
        }
    );
}

/// Received per second; distinct events per second as well, since a
/// duplicate is a delivery but not progress.
fn print_rates(what: &str, tally: &Tally, whole_run: Duration, from: &str) {
    println!(
        "{what}/s: {:.0} over the receipt window ({:.2} s, first to last; {:.0} unique/s), {:.0} over the whole run ({:.2} s from {from})",
        per_s(tally.received, tally.window()),
        tally.window().as_secs_f64(),
        per_s(tally.unique, tally.window()),
        per_s(tally.received, whole_run),
        whole_run.as_secs_f64(),
    );
}

pub fn print(options: &Options, report: &Report) {
    transfers::print(&options.transfers, &report.transfers);
    println!(
        "webhooks:  endpoint {} (HTTP/1.1 keep-alive, TLS from {}), {} connections{}",
        report.endpoint,
        options.tls_dir.display(),
        report.connections,
        match report.handshake_failures {
            0 => String::new(),
            n => format!(", {n} failed TLS handshakes"),
        }
    );
    print_counts("deliveries", &report.delivered, report.expected);
    print_rates(
        "deliveries",
        &report.delivered,
        report.whole_run,
        "the first transfer",
    );
    println!(
        "lag (status change to receipt): {}",
        in_ms(&report.delivered.lag_us)
    );
    if let Some(replay) = &report.replay {
        println!(
            "replay:    {} transfers at concurrency {}, requeued {}{}",
            replay.transfers,
            options.transfers.concurrency,
            replay.requeued,
            if replay.refused.is_empty() {
                String::new()
            } else {
                format!(" (refused by status: {:?})", replay.refused)
            }
        );
        print_counts("replay deliveries", &replay.tally, replay.requeued);
        print_rates(
            "replay deliveries",
            &replay.tally,
            replay.whole_run,
            "the first replay request",
        );
        println!(
            "replay lag (replay request to receipt): {}",
            in_ms(&replay.tally.lag_us)
        );
        println!(
            "replay lag (replay answered to receipt): {}",
            in_ms(&replay.answered_lag_us)
        );
    }
}

//! `tern bench transfers`: the product under load. For each transfer it
//! asks a quote and creates the transfer on it, at concurrency C; then it
//! waits until every transfer is terminal, and prints transfers/s
//! completed, the create latency percentiles and the closing ledger check.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::{bar, check_bounds, per_s, print_latency, Client, Merchant, Percentiles};

/// How often completion is polled (two counting reads per poll).
const COMPLETION_POLL: Duration = Duration::from_millis(100);
/// A wallet valid on every EVM network (all lower case: no checksum).
const EVM_WALLET: &str = "0x52908400098527886e0f7030069857d2e4169ee7";
/// The USDT TRC-20 contract: a valid tron address.
const TRON_WALLET: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";

#[derive(Clone, Debug)]
pub struct Options {
    pub url: String,
    pub count: u64,
    pub concurrency: usize,
    /// Transfers started per second; `None` as fast as the concurrency allows.
    pub rate_per_s: Option<f64>,
    pub send_currency: String,
    /// Major units, as a quote request takes it.
    pub send_amount: String,
    pub asset: String,
    pub network: String,
    pub card_pm: String,
    pub wait: Duration,
    pub database_url: Option<String>,
}

#[derive(Debug)]
pub struct Report {
    pub created: u64,
    /// Failed quote or transfer requests, by status (0: no answer).
    pub refused: Vec<(u16, u64)>,
    pub create_elapsed: Duration,
    pub complete_elapsed: Duration,
    pub succeeded: u64,
    pub failed: u64,
    pub quote_latency_us: Percentiles,
    pub transfer_latency_us: Percentiles,
}

/// One transfer's outcome: the failing status (201 when both calls
/// succeeded), the latencies of the quote and the transfer calls, and the
/// transfer's id when it was created.
struct Started {
    status: u16,
    quote_us: u64,
    transfer_us: Option<u64>,
    transfer_id: Option<String>,
}

/// A run driven to the end: its figures, the transfers it created and when
/// the first of them was started.
pub(crate) struct Driven {
    pub report: Report,
    pub transfer_ids: Vec<String>,
    pub started: Instant,
}

impl Client {
    /// POSTs `body` with the merchant's key; answers the status (0: no
    /// answer) and the body.
    pub(super) async fn post(
        &self,
        key: &str,
        path: &str,
        body: &Value,
        idempotent: bool,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base()))
            .bearer_auth(key)
            .json(body);
        if idempotent {
            request = request.header("Idempotency-Key", uuid::Uuid::new_v4().to_string());
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.json().await.unwrap_or(Value::Null))
            }
            Err(_) => (0, Value::Null),
        }
    }

    /// How many of the merchant's transfers have `status`.
    async fn count(&self, key: &str, status: &str) -> anyhow::Result<u64> {
        let request = self
            .http
            .get(format!(
                "{}/v1/transfers?status={status}&limit=1",
                self.base()
            ))
            .bearer_auth(key);
        let page = self.json(request, 200).await?;
        page["total"]
            .as_u64()
            .context("no total in the transfer list")
    }
}

async fn start_one(client: &Client, merchant: &Merchant, options: &Options) -> Started {
    let quote_body = json!({"send_currency": options.send_currency, "send_amount": options.send_amount,
        "receive_asset": options.asset, "receive_network": options.network});
    let sent = Instant::now();
    let (status, quote) = client
        .post(&merchant.key, "/v1/quotes", &quote_body, false)
        .await;
    let quote_us = sent.elapsed().as_micros() as u64;
    let Some(quote_id) = quote["quote_id"].as_str().filter(|_| status == 201) else {
        return Started {
            status: if status == 201 { 0 } else { status },
            quote_us,
            transfer_us: None,
            transfer_id: None,
        };
    };
    let wallet = if options.network == "tron" {
        TRON_WALLET
    } else {
        EVM_WALLET
    };
    let transfer_body = json!({"flow": "tern", "quote_id": quote_id, "card_pm": options.card_pm,
        "wallet": wallet, "network": options.network, "asset": options.asset});
    let sent = Instant::now();
    let (status, transfer) = client
        .post(&merchant.key, "/v1/transfers", &transfer_body, true)
        .await;
    Started {
        status,
        quote_us,
        transfer_us: Some(sent.elapsed().as_micros() as u64),
        transfer_id: (transfer["id"].as_str())
            .filter(|_| status == 201)
            .map(str::to_owned),
    }
}

async fn drive(client: &Client, merchant: &Merchant, options: &Options) -> Vec<Started> {
    let progress = bar(options.count, "created");
    let started = tokio::time::Instant::now();
    let results = futures_util::stream::iter(0..options.count)
        .map(|i| {
            let progress = &progress;
            async move {
                if let Some(rate) = options.rate_per_s {
                    let due = started + Duration::from_secs_f64(i as f64 / rate);
                    tokio::time::sleep_until(due).await;
                }
                let outcome = start_one(client, merchant, options).await;
                progress.inc(1);
                outcome
            }
        })
        .buffer_unordered(options.concurrency)
        .collect::<Vec<_>>()
        .await;
    progress.finish();
    results
}

/// Waits until every created transfer is succeeded or failed.
async fn await_terminal(
    client: &Client,
    merchant: &Merchant,
    options: &Options,
    created: u64,
) -> anyhow::Result<(u64, u64)> {
    let progress = bar(created, "completed");
    let started = Instant::now();
    loop {
        let succeeded = client.count(&merchant.key, "succeeded").await?;
        let failed = client.count(&merchant.key, "failed").await?;
        progress.set_position(succeeded + failed);
        if succeeded + failed >= created {
            progress.finish();
            return Ok((succeeded, failed));
        }
        if started.elapsed() > options.wait {
            progress.abandon();
            bail!(
                "{} transfer(s) still in flight after {:?}",
                created - succeeded - failed,
                options.wait
            );
        }
        actix_web::rt::time::sleep(COMPLETION_POLL).await;
    }
}

pub async fn run(options: &Options) -> anyhow::Result<Report> {
    check_bounds(options.count, options.concurrency)?;
    let client = Client::new(&options.url, options.concurrency)?;
    let merchant = client.register().await?;
    Ok(drive_to_terminal(&client, &merchant, options).await?.report)
}

/// Creates the transfers for `merchant` and waits until each is terminal.
pub(crate) async fn drive_to_terminal(
    client: &Client,
    merchant: &Merchant,
    options: &Options,
) -> anyhow::Result<Driven> {
    let started = Instant::now();
    let results = drive(client, merchant, options).await;
    let create_elapsed = started.elapsed();
    let created = results.iter().filter(|r| r.status == 201).count() as u64;
    let mut refused = std::collections::BTreeMap::new();
    for result in results.iter().filter(|r| r.status != 201) {
        *refused.entry(result.status).or_insert(0u64) += 1;
    }
    let (succeeded, failed) = await_terminal(client, merchant, options, created).await?;
    let complete_elapsed = started.elapsed();
    let mut quotes: Vec<u64> = results.iter().map(|r| r.quote_us).collect();
    let mut transfers: Vec<u64> = results.iter().filter_map(|r| r.transfer_us).collect();
    let report = Report {
        created,
        refused: refused.into_iter().collect(),
        create_elapsed,
        complete_elapsed,
        succeeded,
        failed,
        quote_latency_us: Percentiles::of(&mut quotes),
        transfer_latency_us: Percentiles::of(&mut transfers),
    };
    Ok(Driven {
        report,
        transfer_ids: results.into_iter().filter_map(|r| r.transfer_id).collect(),
        started,
    })
}

pub fn print(options: &Options, report: &Report) {
    let pace = match options.rate_per_s {
        Some(rate) => format!("paced at {rate}/s"),
        None => "unpaced".to_owned(),
    };
    println!(
        "transfers: {} of {} {} -> {} on {} with {} at concurrency {} ({pace}) against {}",
        options.count,
        options.send_amount,
        options.send_currency,
        options.asset,
        options.network,
        options.card_pm,
        options.concurrency,
        options.url
    );
    println!(
        "created:   {} in {:.2} s = {:.0}/s (quote + transfer){}",
        report.created,
        report.create_elapsed.as_secs_f64(),
        per_s(report.created, report.create_elapsed),
        if report.refused.is_empty() {
            String::new()
        } else {
            format!(" (refused by status: {:?})", report.refused)
        }
    );
    print_latency("quote create", &report.quote_latency_us);
    print_latency("transfer create", &report.transfer_latency_us);
    println!(
        "completed: {} terminal in {:.2} s = {:.0}/s (succeeded {}, failed {})",
        report.created,
        report.complete_elapsed.as_secs_f64(),
        per_s(report.created, report.complete_elapsed),
        report.succeeded,
        report.failed
    );
}

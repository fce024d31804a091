//! `tern status`: the operator's summary in a terminal, the same figures
//! `/health/actors` and `/metrics` serve: from the database, the work in
//! flight, open alerts, dead-lettered webhook events and the nodes; from a
//! running node, its health and each actor kind's figures.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;
use tern_schema::store::{cluster, overview, transfers};
use tern_schema::{Backend, Db};

use crate::config::Config;

/// Merchants listed with their dead-lettered events.
pub const DEAD_LETTER_MERCHANTS_LISTED: i64 = 10;
/// How long the running node may take to answer.
const NODE_TIMEOUT: Duration = Duration::from_secs(5);

/// Prints the summary. `url` is a running node (its `/health` and
/// `/health/actors`, read with TERN_OPERATOR_TOKEN when set); the
/// database part is printed whether or not the node answers.
pub async fn print(config: &Config, url: &str) -> anyhow::Result<()> {
    let db = Db::connect(&config.database_url).await?;
    print!("{}", from_database(&db).await?);
    match from_node(url, config.operator_token.as_deref()).await {
        Ok(text) => print!("{text}"),
        Err(error) => println!("node {url}: not reached ({error})"),
    }
    Ok(())
}

async fn from_database(db: &Db) -> anyhow::Result<String> {
    let mut pooled = db.get().await?;
    let tx = &mut pooled.tx();
    let mut out = String::new();
    let settlements = overview::settlements_in_flight(tx).await?;
    let transfers_open = overview::transfers_in_flight(tx).await?;
    writeln!(out, "settlements in flight: {}", counts(&settlements))?;
    writeln!(out, "transfers in flight:   {}", counts(&transfers_open))?;
    writeln!(
        out,
        "open alerts:           {} (tern alerts list)",
        transfers::open_alert_count(tx).await?
    )?;
    let dead = overview::dead_letters_by_merchant(tx, DEAD_LETTER_MERCHANTS_LISTED).await?;
    if dead.is_empty() {
        writeln!(out, "dead-lettered webhook events: none")?;
    } else {
        writeln!(out, "dead-lettered webhook events (merchant: events):")?;
        for (merchant_id, count) in &dead {
            writeln!(out, "  {merchant_id}: {count}")?;
        }
    }
    if db.backend() == Backend::Postgres {
        let nodes = cluster::nodes(tx).await?;
        let owned: i64 = nodes.iter().map(|node| node.slots).sum();
        writeln!(
            out,
            "nodes: {} live of {}; {owned} of {} slots owned",
            nodes.iter().filter(|node| node.live).count(),
            nodes.len(),
            cluster::SLOTS
        )?;
    }
    Ok(out)
}

/// `status: n, status: n`, or `none`.
fn counts(rows: &[(String, i64)]) -> String {
    if rows.is_empty() {
        return "none".to_owned();
    }
    rows.iter()
        .map(|(status, count)| format!("{status} {count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn from_node(url: &str, token: Option<&str>) -> anyhow::Result<String> {
    let client = reqwest::Client::builder().timeout(NODE_TIMEOUT).build()?;
    let get = |path: &str| {
        let request = client.get(format!("{}{path}", url.trim_end_matches('/')));
        match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    };
    let health: Value = get("/health").send().await?.json().await?;
    let actors: Value = get("/health/actors")
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let mut out = String::new();
    writeln!(
        out,
        "node {url}: {} (version {})",
        health["status"].as_str().unwrap_or("?"),
        health["version"].as_str().unwrap_or("?")
    )?;
    writeln!(
        out,
        "  {:<18} {:>6} {:>8} {:>9} {:>7} {:>14}",
        "kind", "live", "backlog", "restarts", "stuck", "oldest (s)"
    )?;
    if let Some(kinds) = actors["kinds"].as_object() {
        for (kind, figures) in kinds {
            let number = |name: &str| figures[name].as_u64().unwrap_or(0);
            writeln!(
                out,
                "  {kind:<18} {:>6} {:>8} {:>9} {:>7} {:>14.1}",
                number("live_actors"),
                number("mailbox_backlog"),
                number("restarts"),
                number("stuck_count"),
                number("oldest_in_flight_ms") as f64 / 1_000.0
            )?;
            for stuck in figures["stuck_entities"].as_array().into_iter().flatten() {
                writeln!(
                    out,
                    "    stuck {} for {:.0} s: {}",
                    stuck["id"].as_str().unwrap_or("?"),
                    stuck["age_ms"].as_u64().unwrap_or(0) as f64 / 1_000.0,
                    stuck["reason"].as_str().unwrap_or("")
                )?;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_a_line() {
        assert_eq!(counts(&[]), "none");
        let rows = [("in_flight".to_owned(), 2), ("pending".to_owned(), 1)];
        assert_eq!(counts(&rows), "in_flight 2, pending 1");
    }
}

//! What the console shows, gathered in one place: this node and the
//! cluster's, the runtime's figures per actor kind and its stuck entities
//! (as `/health/actors` computes them), dead-lettered webhook events by
//! merchant (as `tern status` counts them), and the latest provider
//! failures on this node. Every list is bounded and says how many it left
//! out.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDateTime, Utc};
use tern_actors::adapters::failures::{self, ProviderFailure};
use tern_actors::runtime::{KindFigures, StuckEntity};
use tern_schema::store::cluster::{self, NodeRow};
use tern_schema::store::overview::{self, DeadLetter};
use tern_schema::vocabulary::{MerchantId, TransferId};
use tern_schema::{Backend, StoreError};

use crate::http::ops::DATABASE_CHECK_TIMEOUT;
use crate::state::{AppState, BUILD, VERSION};

/// Dead-lettered events listed at most (all are counted).
pub const DEAD_LETTERS_LISTED_MAX: i64 = 100;
/// Stuck entities listed at most, over all kinds (all are counted).
pub const STUCK_LISTED_MAX: usize = 50;
/// Provider failures listed at most.
pub const FAILURES_LISTED_MAX: usize = 50;

/// This process.
pub struct ThisNode {
    /// The cluster's name for it, or `None` when it runs alone.
    pub id: Option<String>,
    pub version: &'static str,
    pub build: &'static str,
    pub environment: &'static str,
    pub backend: &'static str,
    pub started_at: DateTime<Utc>,
    pub uptime_s: i64,
}

/// A transfer's dead-lettered events: the unit a replay sends again.
pub struct DeadTransfer {
    pub transfer_id: TransferId,
    pub events: Vec<DeadLetter>,
}

/// A merchant's dead-lettered events, by transfer.
pub struct DeadMerchant {
    pub merchant_id: MerchantId,
    pub name: Option<String>,
    pub transfers: Vec<DeadTransfer>,
}

/// What the database told, or why it could not.
pub struct Stored {
    /// `None` on SQLite, which runs one process and has no nodes table.
    pub nodes: Option<Vec<NodeRow>>,
    pub dead: Vec<DeadMerchant>,
    pub dead_listed: usize,
    pub dead_total: i64,
}

pub struct View {
    pub node: ThisNode,
    /// Figures per actor kind, by kind name.
    pub kinds: BTreeMap<String, KindFigures>,
    /// `(kind, entity)`, longest stuck first within a kind.
    pub stuck: Vec<(String, StuckEntity)>,
    pub stuck_total: u64,
    /// `Err` holds what to tell the operator (the cause is logged).
    pub stored: Result<Stored, &'static str>,
    pub failures: Vec<ProviderFailure>,
    pub now: DateTime<Utc>,
}

/// Gathers the page. The database part has a deadline: the runtime's
/// figures show even while the database does not answer.
pub async fn gather(state: &AppState) -> View {
    let figures = state.runtime.figures();
    let now = Utc::now();
    let node = ThisNode {
        id: figures.cluster.as_ref().map(|c| c.node_id.clone()),
        version: VERSION,
        build: BUILD,
        environment: state.config.environment.as_str(),
        backend: state.db.backend().as_str(),
        started_at: state.started_at,
        uptime_s: (now - state.started_at).num_seconds().max(0),
    };
    let stuck_total = figures.kinds.values().map(|kind| kind.stuck_count).sum();
    let stuck = figures
        .kinds
        .iter()
        .flat_map(|(name, kind)| {
            kind.stuck_entities
                .iter()
                .map(move |entity| (name.clone(), entity.clone()))
        })
        .take(STUCK_LISTED_MAX)
        .collect();
    let stored = match tokio::time::timeout(DATABASE_CHECK_TIMEOUT, stored(state)).await {
        Ok(Ok(stored)) => Ok(stored),
        Ok(Err(error)) => {
            tracing::warn!(%error, "console: the database part failed");
            Err("the database did not answer; its part of the page is missing")
        }
        Err(_) => {
            tracing::warn!("console: the database did not answer in time");
            Err("the database did not answer in time; its part of the page is missing")
        }
    };
    let mut failures = failures::latest();
    failures.truncate(FAILURES_LISTED_MAX);
    View {
        node,
        kinds: figures.kinds,
        stuck,
        stuck_total,
        stored,
        failures,
        now,
    }
}

async fn stored(state: &AppState) -> Result<Stored, StoreError> {
    let mut pooled = state.db.get().await?;
    let tx = &mut pooled.tx();
    let nodes = match state.db.backend() {
        Backend::Postgres => Some(cluster::nodes(tx).await?),
        Backend::Sqlite => None,
    };
    let (letters, dead_total) = overview::dead_letters(tx, DEAD_LETTERS_LISTED_MAX).await?;
    let dead_listed = letters.len();
    let mut ids: Vec<&MerchantId> = letters.iter().map(|l| &l.merchant_id).collect();
    ids.dedup();
    let names: BTreeMap<MerchantId, String> = overview::merchant_names(tx, &ids)
        .await?
        .into_iter()
        .collect();
    Ok(Stored {
        nodes,
        dead: group(letters, &names),
        dead_listed,
        dead_total,
    })
}

/// Groups letters ordered by merchant then transfer.
fn group(letters: Vec<DeadLetter>, names: &BTreeMap<MerchantId, String>) -> Vec<DeadMerchant> {
    let mut merchants: Vec<DeadMerchant> = Vec::new();
    for letter in letters {
        if merchants
            .last()
            .is_none_or(|last| last.merchant_id != letter.merchant_id)
        {
            merchants.push(DeadMerchant {
                merchant_id: letter.merchant_id.clone(),
                name: names.get(&letter.merchant_id).cloned(),
                transfers: Vec::new(),
            });
        }
        let Some(merchant) = merchants.last_mut() else {
            continue;
        };
        match merchant.transfers.last_mut() {
            Some(last) if last.transfer_id == letter.transfer_id => last.events.push(letter),
            _ => merchant.transfers.push(DeadTransfer {
                transfer_id: letter.transfer_id.clone(),
                events: vec![letter],
            }),
        }
    }
    merchants
}

/// `3 h 12 min`, `4 min 5 s`, `12 s`: an age for people.
pub fn age(seconds: i64) -> String {
    let seconds = seconds.max(0);
    let (days, hours, minutes) = (seconds / 86_400, seconds / 3_600 % 24, seconds / 60 % 60);
    match (days, hours, minutes) {
        (0, 0, 0) => format!("{seconds} s"),
        (0, 0, _) => format!("{minutes} min {} s", seconds % 60),
        (0, _, _) => format!("{hours} h {minutes} min"),
        _ => format!("{days} d {hours} h"),
    }
}

/// Seconds from `at` (a stored UTC time) to `now`.
pub fn since(now: DateTime<Utc>, at: NaiveDateTime) -> i64 {
    (now.naive_utc() - at).num_seconds()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(merchant: &str, transfer: &str, event: &str) -> DeadLetter {
        DeadLetter {
            event_id: event.into(),
            merchant_id: MerchantId::new(merchant),
            transfer_id: TransferId::new(transfer),
            event_type: "transfer.pending".into(),
            attempts: 3,
            last_status_code: None,
            last_error: None,
            dead_since: NaiveDateTime::default(),
        }
    }

    #[test]
    fn letters_group_by_merchant_then_transfer() {
        let names = BTreeMap::from([(MerchantId::new("m1"), "One".to_owned())]);
        let grouped = group(
            vec![
                letter("m1", "t1", "e1"),
                letter("m1", "t1", "e2"),
                letter("m1", "t2", "e3"),
                letter("m2", "t3", "e4"),
            ],
            &names,
        );
        assert_eq!(grouped.len(), 2);
        assert_eq!(grouped[0].name.as_deref(), Some("One"));
        assert_eq!(grouped[0].transfers.len(), 2);
        assert_eq!(grouped[0].transfers[0].events.len(), 2);
        assert_eq!(grouped[1].name, None);
        assert_eq!(grouped[1].transfers[0].transfer_id.as_str(), "t3");
    }

    #[test]
    fn ages_read_as_people_say_them() {
        assert_eq!(age(-5), "0 s");
        assert_eq!(age(12), "12 s");
        assert_eq!(age(245), "4 min 5 s");
        assert_eq!(age(3 * 3_600 + 12 * 60 + 9), "3 h 12 min");
        assert_eq!(age(2 * 86_400 + 3_600), "2 d 1 h");
    }
}

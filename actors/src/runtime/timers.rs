//! Persisted timers: how kinds schedule and complete them inside their
//! transition transactions, and the service that claims due ones and
//! delivers them to the entities' actors.
//!
//! The service is a task on the actix System's arbiter that polls at a
//! bounded interval. Claims are leases in the database
//! ([`tern_schema::store::timers::claim_due`]), so several nodes can poll
//! one PostgreSQL: each due timer is held by one claim at a time, and a dead
//! node's claims expire and pass to the others.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::NaiveDateTime;
use tern_schema::store::timers::{self as store, TimerRow};
use tern_schema::types::{truncate_micros, utc_now};
use tern_schema::{write_tx, Db};

use super::error::{RuntimeError, RuntimeResult};
use super::figures::TimerFigures;
use super::kind::TimerFiring;
use super::registry::KindHandle;

/// How often the service looks for due timers when the last poll found
/// fewer than a full batch.
pub const TIMER_POLL_INTERVAL_DEFAULT: Duration = Duration::from_secs(1);
/// How long a claim holds a timer. Longer than a registry's call timeout
/// (30 s by default), so a slow delivery is not fired again by another node
/// while it still runs.
pub const TIMER_CLAIM_LEASE_DEFAULT: Duration = Duration::from_secs(120);
/// Timers claimed and delivered per poll.
pub const TIMER_BATCH_DEFAULT: i64 = 64;
/// First delay before a failed delivery is retried; doubles per attempt.
pub const TIMER_RETRY_DELAY_DEFAULT: Duration = Duration::from_secs(5);
/// Longest delay between retries of a failing timer.
pub const TIMER_RETRY_DELAY_MAX: Duration = Duration::from_secs(600);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimerConfig {
    pub poll_interval_ms: u64,
    pub claim_lease_ms: u64,
    pub batch_max: i64,
    pub retry_delay_ms: u64,
}

impl Default for TimerConfig {
    fn default() -> Self {
        TimerConfig {
            poll_interval_ms: millis(TIMER_POLL_INTERVAL_DEFAULT),
            claim_lease_ms: millis(TIMER_CLAIM_LEASE_DEFAULT),
            batch_max: TIMER_BATCH_DEFAULT,
            retry_delay_ms: millis(TIMER_RETRY_DELAY_DEFAULT),
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn chrono_ms(ms: u64) -> chrono::Duration {
    chrono::Duration::milliseconds(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// A timer to schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimerSpec<'a> {
    /// Unique; derive it from the entity and purpose (`"t_1:retry:2"`) so
    /// that scheduling the same timer twice is detected.
    pub id: &'a str,
    pub kind: &'a str,
    pub entity_id: &'a str,
    pub due_at: NaiveDateTime,
    pub payload: &'a str,
}

impl TimerSpec<'_> {
    /// The timer's row, unclaimed, for a plan to write: the timer exists
    /// exactly when the transition that wants it has committed.
    pub fn row(&self) -> TimerRow {
        TimerRow {
            id: self.id.to_owned(),
            kind: self.kind.to_owned(),
            entity_id: self.entity_id.to_owned(),
            due_at: truncate_micros(self.due_at),
            payload: self.payload.to_owned(),
            claim_token: None,
            claimed_until: None,
            attempts: 0,
            created_at: utc_now(),
            slot: super::cluster::slot_for(self.kind, self.entity_id),
        }
    }
}

impl TimerFiring {
    /// The claim a plan completes when the transition this firing caused
    /// is written.
    pub fn claim(&self) -> tern_schema::plan::TimerClaim {
        tern_schema::plan::TimerClaim {
            timer_id: self.id.clone(),
            claim_token: self.claim_token.clone(),
        }
    }
}

/// Completes a fired timer whose transition writes nothing else. A claim
/// that passed to another node is that node's to act on and complete.
pub async fn complete(db: &Db, firing: TimerFiring) -> RuntimeResult<()> {
    let plan = tern_schema::Plan {
        completes_timer: Some(firing.claim()),
        ..tern_schema::Plan::default()
    };
    match db.commit(plan).await {
        Ok(_) | Err(tern_schema::PlanError::TimerLost { .. }) => Ok(()),
        Err(other) => Err(other.into()),
    }
}

/// Delay before retry number `attempts` (1-based) of a failing timer:
/// doubling from `retry_delay_ms`, capped at [`TIMER_RETRY_DELAY_MAX`].
pub fn retry_delay_ms(retry_delay_ms: u64, attempts: i32) -> u64 {
    let doublings = u32::try_from(attempts.saturating_sub(1))
        .unwrap_or(0)
        .min(16);
    retry_delay_ms
        .saturating_mul(1u64 << doublings)
        .min(millis(TIMER_RETRY_DELAY_MAX))
}

#[derive(Debug, Default)]
pub(crate) struct TimerStats {
    running: AtomicBool,
    delivered: AtomicU64,
    failed: AtomicU64,
    discarded: AtomicU64,
    poll_failures_in_a_row: AtomicU64,
}

impl TimerStats {
    pub fn figures(&self) -> TimerFigures {
        TimerFigures {
            running: self.running.load(Ordering::Relaxed),
            delivered: self.delivered.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            discarded: self.discarded.load(Ordering::Relaxed),
            poll_failures_in_a_row: self.poll_failures_in_a_row.load(Ordering::Relaxed),
        }
    }
}

pub(crate) type Kinds = Arc<RwLock<BTreeMap<&'static str, Arc<dyn KindHandle>>>>;

/// The running service; stops at its next poll once `stop` is set.
pub(crate) struct TimerService {
    pub db: Db,
    pub node_id: Arc<str>,
    pub kinds: Kinds,
    pub config: TimerConfig,
    pub stats: Arc<TimerStats>,
    pub stop: Arc<AtomicBool>,
    /// Where several nodes share the database: only the timers of the
    /// slots this node owns are claimed.
    pub ownership: Option<Arc<super::cluster::Ownership>>,
}

impl TimerService {
    /// Polls until stopped: at once, then after every poll that found less
    /// than a full batch, after the poll interval.
    pub async fn run(self) {
        self.stats.running.store(true, Ordering::Relaxed);
        let interval = Duration::from_millis(self.config.poll_interval_ms);
        while !self.stop.load(Ordering::SeqCst) {
            match self.poll_once().await {
                Ok(claimed) => {
                    self.stats
                        .poll_failures_in_a_row
                        .store(0, Ordering::Relaxed);
                    if claimed as i64 >= self.config.batch_max {
                        continue;
                    }
                }
                Err(error) => {
                    self.stats
                        .poll_failures_in_a_row
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%error, "timer poll failed");
                }
            }
            tokio::time::sleep(interval).await;
        }
        self.stats.running.store(false, Ordering::Relaxed);
    }

    fn kinds(&self) -> Vec<Arc<dyn KindHandle>> {
        let kinds = self
            .kinds
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kinds.values().cloned().collect()
    }

    /// Claims one batch of due timers and delivers them concurrently (each
    /// entity's actor serialises its own); answers how many were claimed.
    async fn poll_once(&self) -> RuntimeResult<usize> {
        let kinds = self.kinds();
        let names: Vec<String> = kinds.iter().map(|kind| kind.name().to_owned()).collect();
        let token = format!("{}/{}", self.node_id, uuid::Uuid::new_v4().simple());
        let now = utc_now();
        let lease_until = now + chrono_ms(self.config.claim_lease_ms);
        let batch = self.config.batch_max;
        let slots = self
            .ownership
            .as_ref()
            .map(|ownership| ownership.owned_slots());
        let claimed: RuntimeResult<Vec<TimerRow>> = write_tx!(self.db, |tx| {
            let slots = slots.as_deref();
            Ok(store::claim_due(tx, &names, slots, now, lease_until, &token, batch).await?)
        });
        let firings: Vec<TimerFiring> = claimed?
            .into_iter()
            .filter_map(TimerFiring::from_claimed)
            .collect();
        let count = firings.len();
        let deliveries = firings
            .into_iter()
            .map(|firing| self.deliver(&kinds, firing));
        futures_util::future::join_all(deliveries).await;
        Ok(count)
    }

    async fn deliver(&self, kinds: &[Arc<dyn KindHandle>], firing: TimerFiring) {
        let Some(kind) = kinds.iter().find(|kind| kind.name() == firing.kind) else {
            // Unreachable: only registered kinds are claimed.
            self.release(&firing).await;
            return;
        };
        match kind.deliver_timer(firing.clone()).await {
            Ok(()) => {
                // A no-op when the handler completed it in its transaction.
                self.complete(&firing).await;
                self.stats.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Err(error @ (RuntimeError::NotFound { .. } | RuntimeError::InvalidTimer { .. })) => {
                tracing::error!(timer = %firing.id, kind = %firing.kind, %error, "timer discarded");
                self.complete(&firing).await;
                self.stats.discarded.fetch_add(1, Ordering::Relaxed);
            }
            Err(RuntimeError::Elsewhere { .. }) => {
                // Its entity lives in a slot another node owns: a timer
                // written before slots existed (slot 0), or one whose slot
                // moved since the claim. Filed under its entity's slot and
                // due again at once, for that slot's owner.
                let slot = super::cluster::slot_for(&firing.kind, &firing.entity_id);
                let moved: RuntimeResult<bool> = write_tx!(self.db, |tx| Ok(store::reslot(
                    tx,
                    &firing.id,
                    &firing.claim_token,
                    slot
                )
                .await?));
                if let Err(error) = moved {
                    tracing::warn!(timer = %firing.id, %error, "could not refile a timer; its lease will expire");
                }
            }
            Err(RuntimeError::TimerClaimLost { .. }) => {
                // Another node holds the timer now and will fire it.
                tracing::info!(timer = %firing.id, "timer claim lost to another node");
            }
            Err(error) => {
                tracing::warn!(timer = %firing.id, kind = %firing.kind, %error, "timer delivery failed; released");
                self.release(&firing).await;
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    async fn complete(&self, firing: &TimerFiring) {
        let done: RuntimeResult<bool> = write_tx!(self.db, |tx| Ok(store::complete(
            tx,
            &firing.id,
            &firing.claim_token
        )
        .await?));
        if let Err(error) = done {
            // The lease expires and the timer fires again: at least once.
            tracing::warn!(timer = %firing.id, %error, "could not delete a handled timer");
        }
    }

    async fn release(&self, firing: &TimerFiring) {
        let delay_ms = retry_delay_ms(self.config.retry_delay_ms, firing.attempts);
        let retry_at = utc_now() + chrono_ms(delay_ms);
        let released: RuntimeResult<bool> = write_tx!(self.db, |tx| Ok(store::release(
            tx,
            &firing.id,
            &firing.claim_token,
            retry_at
        )
        .await?));
        if let Err(error) = released {
            tracing::warn!(timer = %firing.id, %error, "could not release a timer; its lease will expire");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_by_doubling_up_to_the_cap() {
        assert_eq!(retry_delay_ms(5_000, 1), 5_000);
        assert_eq!(retry_delay_ms(5_000, 2), 10_000);
        assert_eq!(retry_delay_ms(5_000, 4), 40_000);
        assert_eq!(retry_delay_ms(5_000, 40), millis(TIMER_RETRY_DELAY_MAX));
        assert_eq!(retry_delay_ms(5_000, 0), 5_000);
        assert_eq!(retry_delay_ms(5_000, -3), 5_000);
    }

    #[test]
    fn the_default_lease_outlasts_a_call() {
        let config = TimerConfig::default();
        assert!(config.claim_lease_ms > millis(super::super::registry::CALL_TIMEOUT_DEFAULT));
        assert!(config.batch_max > 0 && config.batch_max <= store::CLAIM_BATCH_MAX);
    }
}

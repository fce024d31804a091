//! Start recovery: after a crash or a deploy, every non-terminal entity is
//! back in memory and every due timer is delivered, so a `kill -9` at any
//! point loses nothing. Repeating nothing is the kinds' part: transitions
//! are version-guarded and timers are completed in the transition's
//! transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use actix::Arbiter;
use serde::Serialize;
use tern_schema::store::cluster::SLOTS;
use tern_schema::types::utc_now;

use super::cluster::{BeatOutcome, Ownership, SlotMove};
use super::error::{RuntimeError, RuntimeResult};
use super::registry::KindHandle;
use super::timers::TimerService;
use super::Runtime;

/// Connections of the heartbeat's own pool.
const HEARTBEAT_CONNECTIONS: usize = 1;

/// What [`Runtime::recover`] re-activated, per kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecoveryReport {
    pub activated: BTreeMap<String, usize>,
}

impl Runtime {
    /// Re-activates every non-terminal entity of every registered kind,
    /// starts supervision, then starts the timer service, whose first poll
    /// delivers the timers that fell due while no process ran. Call it once
    /// at start, inside the actix System; calling it again only re-activates.
    pub async fn recover(&self) -> RuntimeResult<RecoveryReport> {
        if Arbiter::try_current().is_none() {
            return Err(RuntimeError::Unavailable(
                "recovery needs an actix System".into(),
            ));
        }
        // A node of several first takes the slots it should own, and then
        // recovers only their entities.
        let mut beat_db = None;
        if let Some(ownership) = &self.ownership {
            let pinned = super::cluster::load_pinned_routes(&self.db).await?;
            if pinned > 0 {
                tracing::info!(pinned, "entities placed by pinned routes");
            }
            // Its own connection: a node whose pool is saturated with
            // requests still renews its lease instead of losing its slots.
            let db = self.db.dedicated(HEARTBEAT_CONNECTIONS).await?;
            join(ownership, &db).await?;
            beat_db = Some(db);
        }
        let mut report = RecoveryReport::default();
        for kind in self.handles() {
            kind.start_supervision()?;
            let activated = kind.recover().await?;
            tracing::info!(
                kind = kind.name(),
                activated,
                "recovered in-flight entities"
            );
            report.activated.insert(kind.name().to_owned(), activated);
        }
        self.recovered.store(true, Ordering::SeqCst);
        self.start_timers();
        if let Some(db) = beat_db {
            self.start_beats(db);
        }
        Ok(report)
    }

    /// Beats until the runtime stops: renews the lease, stops the actors
    /// of slots this node lost, recovers the entities of slots it won.
    fn start_beats(&self, db: tern_schema::Db) {
        let Some(ownership) = self.ownership.clone() else {
            return;
        };
        let Some(stop) = self
            .timer_stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        else {
            return;
        };
        let kinds = self.kinds.clone();
        let main_db = self.db.clone();
        let mut db = db;
        actix::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                tokio::time::sleep(ownership.beat_interval()).await;
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let handles: Vec<Arc<dyn KindHandle>> = kinds
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .values()
                    .cloned()
                    .collect();
                // A beat stuck on a half-open connection must not hold the
                // loop (nor a leave) past the lease.
                let beat =
                    match tokio::time::timeout(ownership.lease_ttl(), ownership.beat(&db)).await {
                        Ok(beat) => beat,
                        Err(_) => {
                            // Its connection may be dead without knowing it:
                            // the next beat gets a new one.
                            match main_db.dedicated(HEARTBEAT_CONNECTIONS).await {
                                Ok(fresh) => db = fresh,
                                Err(error) => {
                                    tracing::warn!(%error, "no new heartbeat connection yet")
                                }
                            }
                            Err(RuntimeError::Unavailable("the heartbeat timed out".into()))
                        }
                    };
                match beat {
                    // Off the beat loop: re-activating many entities must
                    // not delay the next heartbeat past the lease.
                    Ok(outcome) => {
                        let ownership = ownership.clone();
                        actix::spawn(async move { apply(&ownership, &handles, outcome).await });
                    }
                    Err(error) => {
                        tracing::warn!(%error, "cluster heartbeat failed");
                        // A beat that failed after giving slots up (before
                        // it could say so) left their actors running:
                        // fenced, but live for nothing.
                        let unowned: BTreeSet<i32> = (0..SLOTS)
                            .filter(|slot| ownership.fence(*slot).is_none())
                            .collect();
                        for kind in &handles {
                            kind.halt_slots(&unowned);
                        }
                        if ownership.lease_lapsed() {
                            // Others may own our slots by now: stop acting
                            // for them until the database answers again.
                            let lost = ownership.drop_all();
                            let outcome = BeatOutcome {
                                lost,
                                ..BeatOutcome::default()
                            };
                            apply(&ownership, &handles, outcome).await;
                        }
                    }
                }
            }
        });
    }

    fn start_timers(&self) {
        let mut running = self
            .timer_stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if running.is_some() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let service = TimerService {
            db: self.db.clone(),
            node_id: Arc::from(self.config.node_id.as_str()),
            kinds: self.kinds.clone(),
            config: self.config.timers.clone(),
            stats: self.timer_stats.clone(),
            stop: stop.clone(),
            ownership: self.ownership.clone(),
        };
        actix::spawn(service.run());
        *running = Some(stop);
    }
}

/// The first heartbeat. A process that died under the same node id a
/// moment ago still holds its lease: wait for it to pass (a process still
/// alive under the id keeps it, and this one does not start).
async fn join(ownership: &Ownership, db: &tern_schema::Db) -> RuntimeResult<()> {
    let deadline = std::time::Instant::now() + ownership.lease_ttl() * 2;
    loop {
        match ownership.beat(db).await {
            Ok(_) => return Ok(()),
            Err(error) if std::time::Instant::now() < deadline => {
                tracing::warn!(%error, "joining the cluster; retrying");
                tokio::time::sleep(ownership.beat_interval()).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Stops the lost slots' actors, then starts the won slots' entities.
async fn apply(ownership: &Ownership, handles: &[Arc<dyn KindHandle>], outcome: BeatOutcome) {
    let gone: BTreeSet<i32> = outcome
        .lost
        .iter()
        .chain(&outcome.released)
        .copied()
        .collect();
    if !gone.is_empty() {
        let halted: usize = handles.iter().map(|kind| kind.halt_slots(&gone)).sum();
        tracing::info!(slots = ?gone, halted, "slots left this node");
    }
    if !outcome.lost.is_empty() {
        tracing::warn!(slots = ?outcome.lost, "slots were taken by another node: this node was presumed dead");
        ownership.record(SlotMove {
            slots: outcome.lost.clone(),
            at: utc_now(),
            change: "lost",
            from: Vec::new(),
            entities: 0,
        });
    }
    if outcome.won.is_empty() {
        return;
    }
    let won: BTreeSet<i32> = outcome.won.iter().map(|(slot, _)| *slot).collect();
    let mut entities = 0;
    for kind in handles {
        match kind.recover_slots(&won).await {
            Ok(count) => entities += count,
            Err(error) => {
                tracing::warn!(slots = ?won, kind = kind.name(), %error, "recovering won slots failed")
            }
        }
    }
    let mut from: Vec<String> = outcome
        .won
        .into_iter()
        .filter_map(|(_, from)| from)
        .collect();
    from.sort();
    from.dedup();
    tracing::info!(slots = ?won, entities, ?from, "slots came to this node");
    ownership.record(SlotMove {
        slots: won.into_iter().collect(),
        at: utc_now(),
        change: "claimed",
        from,
        entities,
    });
}

/// Rows a kind's `list_in_flight` reads per query.
pub const RECOVERY_PAGE_ROWS: i64 = 500;

/// Up to `limit` rows, read page by page in key order: `fetch(after, n)`
/// answers at most `n` rows after the row `after` (from the start when
/// `None`). Lets every kind list its in-flight entities in bounded queries.
pub async fn paged<R>(
    limit: i64,
    mut fetch: impl AsyncFnMut(Option<&R>, i64) -> RuntimeResult<Vec<R>>,
) -> RuntimeResult<Vec<R>> {
    let mut rows: Vec<R> = Vec::new();
    loop {
        let left = limit - rows.len() as i64;
        if left <= 0 {
            break;
        }
        let page = RECOVERY_PAGE_ROWS.min(left);
        let found = fetch(rows.last(), page).await?;
        let full = found.len() as i64 == page;
        rows.extend(found);
        if !full {
            break;
        }
    }
    Ok(rows)
}

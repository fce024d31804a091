//! The actor runtime: one registry per entity kind, persisted timers, start
//! recovery, and the figures /health serves.
//!
//! How the edge uses it (inside the actix System, e.g. in `Application::build`):
//!
//! ```ignore
//! let runtime = Arc::new(Runtime::new(db.clone()));
//! let transfers = runtime.register::<Transfer>(RegistryConfig::default(), providers)?;
//! runtime.recover().await?;            // re-activate in-flight work, start timers
//! let reply = transfers.call(&id, TransferCommand::Confirm { .. }).await?;
//! let figures = runtime.figures();     // /health/actors; figures.healthy() for /health
//! ```
//!
//! Map [`RuntimeError`] with [`RuntimeError::retry_after`]: `Some` is a 503
//! with that Retry-After, `NotFound` 404, `Conflict` 409, the rest 500.

mod actor;
pub mod cluster;
mod error;
mod figures;
mod kind;
mod recovery;
mod registry;
pub mod step;
pub mod timers;
pub mod version;
mod wakes;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use tern_schema::Db;

pub use actor::{FAILURES_IN_A_ROW_MAX, RESUME_AFTER_FAILURE, RESUME_AFTER_FAILURE_MAX};
pub use error::{
    Persistence, RuntimeError, RuntimeResult, RETRY_AFTER_OVERLOAD, RETRY_AFTER_UNAVAILABLE,
};
pub use figures::{
    KindFigures, RuntimeFigures, StuckEntity, TimerFigures, STUCK_LISTED_MAX,
    TIMER_POLL_FAILURES_UNHEALTHY,
};
pub use kind::{EntityEnv, EntityKind, TimerFiring, Transition};
pub use recovery::{paged, RecoveryReport, RECOVERY_PAGE_ROWS};
pub use registry::{
    Registry, RegistryConfig, CALL_TIMEOUT_DEFAULT, IDLE_TIMEOUT_DEFAULT, LIVE_ACTORS_MAX_DEFAULT,
    MAILBOX_CAPACITY_DEFAULT, RECOVERY_CONCURRENCY_MAX, RESTART_BURST_MAX, RESTART_WINDOW,
    STUCK_AFTER_DEFAULT, SUPERVISE_INTERVAL_DEFAULT,
};
pub use step::{Step, StepError, VersionedRow};
pub use timers::{TimerConfig, TimerSpec};
pub use version::Versioned;
pub use wakes::WAKES_PENDING_MAX;

use registry::KindHandle;
use timers::{Kinds, TimerStats};

#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Names this process in timer claims (`<node_id>/<claim>`), so an
    /// operator can tell which node holds a timer.
    pub node_id: String,
    pub timers: TimerConfig,
    /// Several nodes on one PostgreSQL (see [`cluster`]); ignored on
    /// SQLite, where one process owns everything.
    pub cluster: Option<cluster::ClusterConfig>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            node_id: format!("node-{}", uuid::Uuid::new_v4().simple()),
            timers: TimerConfig::default(),
            cluster: None,
        }
    }
}

/// Every registry of this process, the timer service, and their figures.
/// Share it behind an `Arc`; it is not a `SystemService`.
pub struct Runtime {
    db: Db,
    config: RuntimeConfig,
    kinds: Kinds,
    timer_stats: Arc<TimerStats>,
    timer_stop: Mutex<Option<Arc<AtomicBool>>>,
    recovered: AtomicBool,
    ownership: Option<Arc<cluster::Ownership>>,
}

impl Runtime {
    pub fn new(db: Db) -> Runtime {
        Runtime::with_config(db, RuntimeConfig::default())
    }

    pub fn with_config(db: Db, config: RuntimeConfig) -> Runtime {
        assert!(
            config.timers.poll_interval_ms > 0,
            "a zero poll interval would spin"
        );
        assert!(
            config.timers.batch_max > 0,
            "a timer batch holds at least one timer"
        );
        let ownership = match (&config.cluster, db.backend()) {
            (Some(cluster), tern_schema::Backend::Postgres) => Some(Arc::new(
                cluster::Ownership::new(&config.node_id, cluster.clone()),
            )),
            _ => None,
        };
        Runtime {
            ownership,
            db,
            config,
            kinds: Arc::new(RwLock::new(BTreeMap::new())),
            timer_stats: Arc::new(TimerStats::default()),
            timer_stop: Mutex::new(None),
            recovered: AtomicBool::new(false),
        }
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    pub fn node_id(&self) -> &str {
        &self.config.node_id
    }

    /// This node's slots, where several nodes share the database.
    pub fn ownership(&self) -> Option<&Arc<cluster::Ownership>> {
        self.ownership.as_ref()
    }

    /// Another node asks this one to look at an entity again: taken at
    /// once when the entity is this node's, handled after.
    pub fn wake(&self, kind: &str, id: &str) -> RuntimeResult<()> {
        let handle = self
            .handles()
            .into_iter()
            .find(|handle| handle.name() == kind)
            .ok_or_else(|| RuntimeError::NotFound {
                kind: "kind",
                id: kind.to_owned(),
            })?;
        handle.take_wake(id)
    }

    /// Adds a kind and answers its registry. Register every kind before
    /// [`Runtime::recover`]; a kind registered later is supervised and gets
    /// timers, but its in-flight entities are not re-activated until asked.
    pub fn register<K: EntityKind>(
        &self,
        config: RegistryConfig,
        context: K::Context,
    ) -> RuntimeResult<Registry<K>> {
        cluster::register_route(K::NAME, K::route_key);
        let registry =
            Registry::<K>::placed(self.db.clone(), config, context, self.ownership.clone());
        {
            let mut kinds = self.kinds.write().unwrap_or_else(PoisonError::into_inner);
            if kinds.contains_key(K::NAME) {
                return Err(RuntimeError::Unavailable(format!(
                    "kind {} is registered twice",
                    K::NAME
                )));
            }
            kinds.insert(K::NAME, Arc::new(registry.clone()));
        }
        if self.recovered.load(Ordering::SeqCst) {
            registry.start_supervision()?;
        }
        Ok(registry)
    }

    fn handles(&self) -> Vec<Arc<dyn KindHandle>> {
        self.kinds
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// The figures of every kind and of the timer service, for /health.
    pub fn figures(&self) -> RuntimeFigures {
        let kinds = self
            .handles()
            .iter()
            .map(|kind| (kind.name().to_owned(), kind.figures()))
            .collect();
        RuntimeFigures {
            kinds,
            timers: self.timer_stats.figures(),
            cluster: self.ownership.as_ref().map(|ownership| ownership.figures()),
        }
    }

    /// Stops the timer service and every actor. Persisted state and timers
    /// stay; the next process recovers them.
    pub fn shutdown(&self) {
        if let Some(stop) = self
            .timer_stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            stop.store(true, Ordering::SeqCst);
        }
        for kind in self.handles() {
            kind.shutdown();
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shareable<T: Send + Sync + 'static>() {}

    /// The edge holds the runtime in `Arc` across worker threads and turns
    /// its errors into `anyhow::Error` at start.
    #[test]
    fn the_runtime_and_its_errors_cross_threads() {
        shareable::<Runtime>();
        shareable::<RuntimeError>();
        shareable::<RuntimeFigures>();
    }
}

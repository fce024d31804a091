//! Start recovery: after a crash or a deploy, every non-terminal entity is
//! back in memory and every due timer is delivered, so a `kill -9` at any
//! point loses nothing. Repeating nothing is the kinds' part: transitions
//! are version-guarded and timers are completed in the transition's
//! transaction.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use actix::Arbiter;
use serde::Serialize;

use super::error::{RuntimeError, RuntimeResult};
use super::timers::TimerService;
use super::Runtime;

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
        Ok(report)
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
        };
        actix::spawn(service.run());
        *running = Some(stop);
    }
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

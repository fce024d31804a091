//! Purging dead credentials: sessions that are revoked, past their absolute
//! lifetime or idle, and mailed tokens that are used or expired. Nothing
//! reads them again, and keeping them only grows the tables.
//!
//! Every node runs the purge: a delete of rows nobody can use is harmless
//! when two nodes race it. Each run deletes a bounded batch per table, so a
//! backlog (a first start after a long time) is worked off over several
//! runs without one long transaction.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tern_schema::store::sessions::PURGE_BATCH_MAX;
use tern_schema::store::{email_tokens, sessions};
use tern_schema::types::utc_now;
use tern_schema::{write_tx, StoreError};

use crate::auth::session::idle_cutoff;
use crate::state::AppState;

/// Time between runs; a run that filled a batch is followed by another at once.
pub const PURGE_INTERVAL: Duration = Duration::from_secs(600);
/// Runs in a row while batches come back full, before waiting again.
pub const PURGE_RUNS_IN_A_ROW_MAX: usize = 10;

/// What one run deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Purged {
    pub sessions: usize,
    pub tokens: usize,
}

/// One run: deletes up to a batch of dead sessions and one of dead tokens.
pub async fn purge_once(state: &AppState) -> Result<Purged, StoreError> {
    let now = utc_now();
    let cutoff = idle_cutoff(&state.config, now);
    write_tx!(state.db, |tx| {
        let sessions = sessions::purge_dead(tx, now, cutoff).await?;
        let tokens = email_tokens::purge_dead(tx, now, PURGE_BATCH_MAX).await?;
        Ok(Purged { sessions, tokens })
    })
}

/// Starts the periodic purge; it ends when the application state is gone.
pub fn start(state: &Arc<AppState>) {
    let state: Weak<AppState> = Arc::downgrade(state);
    actix_web::rt::spawn(async move {
        loop {
            tokio::time::sleep(PURGE_INTERVAL).await;
            let Some(state) = state.upgrade() else {
                return;
            };
            for _ in 0..PURGE_RUNS_IN_A_ROW_MAX {
                match purge_once(&state).await {
                    Ok(purged) => {
                        if purged != Purged::default() {
                            tracing::info!(
                                sessions = purged.sessions,
                                tokens = purged.tokens,
                                "purged dead credentials"
                            );
                        }
                        let batch = usize::try_from(PURGE_BATCH_MAX).unwrap_or(usize::MAX);
                        if purged.sessions < batch && purged.tokens < batch {
                            break;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "purging dead credentials failed");
                        break;
                    }
                }
            }
        }
    });
}

//! API key lookups without a database round trip per request.
//!
//! Entries live [`KEY_CACHE_TTL`]: a revocation or merchant status change
//! made by another process (or the operator CLI) is seen within that time,
//! well inside the one second the interface allows; changes made by this
//! process invalidate the entry at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::NaiveDateTime;
use tern_schema::store::api_keys;
use tern_schema::types::MerchantStatus;
use tern_schema::vocabulary::MerchantId;
use tern_schema::{Db, StoreResult};

use crate::auth::scopes::Scopes;

pub const KEY_CACHE_TTL: Duration = Duration::from_millis(500);
/// Bound on cached prefixes; past it, stale entries are swept, then all.
pub const KEY_CACHE_ENTRIES_MAX: usize = 100_000;
/// `last_used_at` is written at most this often per key, so authenticated
/// reads do not turn into writes.
pub const LAST_USED_RESOLUTION: Duration = Duration::from_secs(60);

#[derive(Clone, Debug)]
pub struct CachedKey {
    pub key_id: String,
    pub merchant_id: MerchantId,
    pub secret_sha256: String,
    pub scopes: Scopes,
    pub expires_at: Option<NaiveDateTime>,
    pub revoked: bool,
    pub merchant_status: MerchantStatus,
}

struct Entry {
    fetched_at: Instant,
    key: Option<CachedKey>,
    last_used_written: Option<Instant>,
}

pub struct KeyCache {
    db: Db,
    entries: Mutex<HashMap<String, Entry>>,
}

impl KeyCache {
    pub fn new(db: Db) -> KeyCache {
        KeyCache {
            db,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The key with this prefix, fresh within [`KEY_CACHE_TTL`].
    pub async fn lookup(&self, prefix: &str) -> StoreResult<Option<CachedKey>> {
        if let Some(key) = self.fresh(prefix) {
            return Ok(key);
        }
        let mut pooled = self.db.get().await?;
        let found = api_keys::find_by_prefix(&mut pooled.tx(), prefix).await?;
        let key = found.and_then(|(row, status)| {
            Some(CachedKey {
                merchant_status: MerchantStatus::parse(&status)?,
                scopes: Scopes::from_stored(&row.scopes),
                key_id: row.id,
                merchant_id: row.merchant_id,
                secret_sha256: row.secret_sha256,
                expires_at: row.expires_at,
                revoked: row.revoked_at.is_some(),
            })
        });
        self.store(prefix, key.clone());
        Ok(key)
    }

    fn fresh(&self, prefix: &str) -> Option<Option<CachedKey>> {
        let entries = self.entries.lock().ok()?;
        let entry = entries.get(prefix)?;
        (entry.fetched_at.elapsed() < KEY_CACHE_TTL).then(|| entry.key.clone())
    }

    fn store(&self, prefix: &str, key: Option<CachedKey>) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= KEY_CACHE_ENTRIES_MAX {
            entries.retain(|_, entry| entry.fetched_at.elapsed() < KEY_CACHE_TTL);
            if entries.len() >= KEY_CACHE_ENTRIES_MAX {
                entries.clear();
            }
        }
        let last_used_written = entries
            .get(prefix)
            .and_then(|entry| entry.last_used_written);
        entries.insert(
            prefix.to_owned(),
            Entry {
                fetched_at: Instant::now(),
                key,
                last_used_written,
            },
        );
    }

    /// Whether this use should be written to `last_used_at` now; marks it
    /// written so concurrent requests do not all write.
    pub fn claim_last_used_write(&self, prefix: &str) -> bool {
        let Ok(mut entries) = self.entries.lock() else {
            return false;
        };
        let Some(entry) = entries.get_mut(prefix) else {
            return false;
        };
        let due = entry
            .last_used_written
            .is_none_or(|at| at.elapsed() >= LAST_USED_RESOLUTION);
        if due {
            entry.last_used_written = Some(Instant::now());
        }
        due
    }

    pub fn invalidate(&self, prefix: &str) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(prefix);
        }
    }

    pub fn invalidate_merchant(&self, merchant_id: &MerchantId) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|_, entry| {
                entry
                    .key
                    .as_ref()
                    .is_none_or(|key| key.merchant_id != *merchant_id)
            });
        }
    }
}

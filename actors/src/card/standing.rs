//! Whether a card's owners may spend (decisions §1a): a suspended or
//! disabled merchant's cards are declined (`merchant_inactive`), and so are
//! a disabled user's (`user_disabled`).
//!
//! Card actors decide thousands of authorizations a second from memory, so
//! the owners' statuses come from a small process-wide cache rather than a
//! database round trip each. Entries live [`STANDING_TTL`]: an operator's
//! change (the CLI, or another node) is seen within that time, well inside
//! the one second the decisions allow. No path in a serving process changes
//! these statuses, so nothing here needs invalidating at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tern_schema::models::CardRow;
use tern_schema::store::users;
use tern_schema::types::MerchantStatus;
use tern_schema::vocabulary::{UserId, UserStatus};
use tern_schema::Db;

use super::machine::Decline;
use crate::runtime::RuntimeResult;

pub const STANDING_TTL: Duration = Duration::from_millis(500);
/// Bound on cached users; past it, stale entries are swept, then all.
pub const STANDING_ENTRIES_MAX: usize = 100_000;

/// What the owners' statuses say of an authorization: `Ok` lets the card's
/// own checks decide, `Err` declines before them.
pub type Verdict = Result<(), Decline>;

/// The verdict for a merchant status and a user status. A stored code
/// outside either enum is an error when read, so it lets no money out
/// either. The merchant's standing is checked first, so the reason does
/// not depend on the order the operator acted in.
pub fn screen(merchant_status: MerchantStatus, user_status: UserStatus) -> Verdict {
    if merchant_status != MerchantStatus::Active {
        return Err(Decline::MerchantInactive);
    }
    if user_status != UserStatus::Active {
        return Err(Decline::UserDisabled);
    }
    Ok(())
}

struct Entry {
    fetched_at: Instant,
    verdict: Verdict,
}

/// Verdicts per user (a user belongs to one merchant, so one read answers
/// both statuses), shared by every card actor of the process.
#[derive(Default)]
pub struct StandingCache {
    entries: Mutex<HashMap<UserId, Entry>>,
}

impl StandingCache {
    pub fn new() -> StandingCache {
        StandingCache::default()
    }

    /// The verdict for `card`'s owners, fresh within [`STANDING_TTL`].
    pub async fn verdict(&self, db: &Db, card: &CardRow) -> RuntimeResult<Verdict> {
        if let Some(verdict) = self.fresh(&card.user_id, Instant::now()) {
            return Ok(verdict);
        }
        let mut pooled = db.get().await?;
        let found = users::standing(&mut pooled.tx(), &card.user_id).await?;
        // A card always has its user (foreign key); without one, decline.
        let verdict = found.map_or(Err(Decline::UserDisabled), |(user, merchant)| {
            screen(merchant, user)
        });
        self.store(&card.user_id, verdict, Instant::now());
        Ok(verdict)
    }

    fn fresh(&self, user_id: &UserId, now: Instant) -> Option<Verdict> {
        let entries = self.entries.lock().ok()?;
        let entry = entries.get(user_id)?;
        (now.saturating_duration_since(entry.fetched_at) < STANDING_TTL).then_some(entry.verdict)
    }

    fn store(&self, user_id: &UserId, verdict: Verdict, now: Instant) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= STANDING_ENTRIES_MAX && !entries.contains_key(user_id) {
            entries
                .retain(|_, entry| now.saturating_duration_since(entry.fetched_at) < STANDING_TTL);
            if entries.len() >= STANDING_ENTRIES_MAX {
                entries.clear();
            }
        }
        entries.insert(
            user_id.clone(),
            Entry {
                fetched_at: now,
                verdict,
            },
        );
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map_or(0, |entries| entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_merchant_then_the_user_decides() {
        use MerchantStatus as M;
        use UserStatus as U;
        let table: [(M, U, Verdict); 6] = [
            (M::Active, U::Active, Ok(())),
            (M::Active, U::Disabled, Err(Decline::UserDisabled)),
            (M::Suspended, U::Active, Err(Decline::MerchantInactive)),
            (M::Disabled, U::Active, Err(Decline::MerchantInactive)),
            (M::Suspended, U::Disabled, Err(Decline::MerchantInactive)),
            (M::Disabled, U::Disabled, Err(Decline::MerchantInactive)),
        ];
        for (merchant, user, verdict) in table {
            assert_eq!(screen(merchant, user), verdict, "{merchant} {user}");
        }
        // A code that names no status cannot reach `screen`: it is refused
        // when read.
        assert_eq!(M::parse("Active"), None);
        assert_eq!(M::parse(""), None);
        assert_eq!(U::parse("unknown"), None);
        assert_eq!(Decline::MerchantInactive.as_str(), "merchant_inactive");
        assert_eq!(Decline::UserDisabled.as_str(), "user_disabled");
    }

    #[test]
    fn an_entry_is_fresh_for_the_ttl_only() {
        let cache = StandingCache::new();
        let start = Instant::now();
        assert_eq!(cache.fresh(&UserId::new("u1"), start), None);
        cache.store(&UserId::new("u1"), Err(Decline::MerchantInactive), start);
        assert_eq!(
            cache.fresh(
                &UserId::new("u1"),
                start + STANDING_TTL - Duration::from_millis(1)
            ),
            Some(Err(Decline::MerchantInactive))
        );
        assert_eq!(cache.fresh(&UserId::new("u1"), start + STANDING_TTL), None);
        // A newer read replaces the verdict.
        cache.store(&UserId::new("u1"), Ok(()), start + STANDING_TTL);
        assert_eq!(
            cache.fresh(&UserId::new("u1"), start + STANDING_TTL),
            Some(Ok(()))
        );
        assert_eq!(cache.fresh(&UserId::new("u2"), start), None);
    }

    #[test]
    fn the_cache_never_holds_more_than_its_cap() {
        let cache = StandingCache::new();
        let start = Instant::now();
        for n in 0..STANDING_ENTRIES_MAX {
            cache.store(&UserId::new(format!("stale{n}")), Ok(()), start);
        }
        assert_eq!(cache.len(), STANDING_ENTRIES_MAX);
        // Refreshing a present user at the cap keeps everything.
        cache.store(&UserId::new("stale0"), Ok(()), start);
        assert_eq!(cache.len(), STANDING_ENTRIES_MAX);
        // A new user past the TTL sweeps the stale entries.
        let later = start + STANDING_TTL;
        cache.store(&UserId::new("fresh"), Ok(()), later);
        assert_eq!(cache.len(), 1);
        // All fresh at the cap: everything goes, the newcomer stays.
        for n in 1..STANDING_ENTRIES_MAX {
            cache.store(&UserId::new(format!("fresh{n}")), Ok(()), later);
        }
        assert_eq!(cache.len(), STANDING_ENTRIES_MAX);
        cache.store(&UserId::new("newcomer"), Err(Decline::UserDisabled), later);
        assert_eq!(cache.len(), 1);
        assert_eq!(
            cache.fresh(&UserId::new("newcomer"), later),
            Some(Err(Decline::UserDisabled))
        );
    }
}

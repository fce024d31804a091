//! Wake-ups between nodes, coalesced per entity.
//!
//! A wake-up asks an entity's actor to look at the database again; it
//! carries no message. So while one is under way for an entity, another
//! adds nothing but the promise of one more look: the first delivery, once
//! done, delivers again. That bounds the work a burst of wake-ups (or a
//! replayed one) makes to one task per entity, [`WAKES_PENDING_MAX`] in
//! all, and loses no look at a change committed while the first was under
//! way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Entities with a wake-up under way, per direction (sending to other
/// nodes, or taken from them); past it a new one is dropped (logged), and
/// the entity's owner finds the work when it next activates it.
pub const WAKES_PENDING_MAX: usize = 10_000;

type Key = (&'static str, String);

/// Entities with a wake-up under way, and whether another was asked since.
#[derive(Default)]
pub(crate) struct Wakes {
    pending: Mutex<HashMap<Key, bool>>,
}

/// One entity's wake-up under way; dropping it (done, or its task gone)
/// ends it, so an entity is never left marked.
pub(crate) struct Pending {
    wakes: Arc<Wakes>,
    key: Key,
}

impl Wakes {
    /// A wake-up of the entity to deliver now; `None` when one is under
    /// way already (it delivers once more), or when too many are.
    pub(crate) fn start(self: &Arc<Self>, kind: &'static str, id: &str) -> Option<Pending> {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (kind, id.to_owned());
        if let Some(again) = pending.get_mut(&key) {
            *again = true;
            return None;
        }
        if pending.len() >= WAKES_PENDING_MAX {
            tracing::warn!(kind, %id, "too many wake-ups under way; this one is dropped");
            return None;
        }
        pending.insert(key.clone(), false);
        Some(Pending {
            wakes: self.clone(),
            key,
        })
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Pending {
    /// After a delivery: whether another wake-up was asked meanwhile, to
    /// deliver again (the flag is cleared).
    pub(crate) fn again(&self) -> bool {
        let mut pending = self
            .wakes
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        pending
            .get_mut(&self.key)
            .is_some_and(|again| std::mem::replace(again, false))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut pending = self
            .wakes
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        pending.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_asked_while_one_is_under_way_is_one_more_delivery() {
        let wakes = Arc::new(Wakes::default());
        let first = wakes.start("transfer", "t1").expect("the first starts");
        assert!(!first.again(), "nothing asked meanwhile");
        for _ in 0..5 {
            assert!(wakes.start("transfer", "t1").is_none(), "coalesced");
        }
        assert!(first.again(), "one more delivery for all five");
        assert!(!first.again());
        assert!(wakes.start("transfer", "t2").is_some(), "another entity");
        assert_eq!(wakes.len(), 1);
        drop(first);
        assert_eq!(wakes.len(), 0);
        assert!(
            wakes.start("transfer", "t1").is_some(),
            "ended when dropped"
        );
    }
}

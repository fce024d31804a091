//! Where an entity lives when several nodes share one database: its slot,
//! whether this node owns it (and under which epoch its actor writes), ids
//! minted for this node, and the actors stopped when slots leave it.

use std::collections::BTreeSet;
use std::sync::Arc;
use tracing::Instrument;

use tern_schema::{Db, Fence};

use super::super::cluster::{pinned_slot, slot_of, Peers, WakeRefused, WAKE_RETRY_DELAYS};
use super::super::error::{RuntimeError, RuntimeResult};
use super::super::kind::EntityKind;
use super::{lock, Admission, Entry, Halt, Registry};

impl<K: EntityKind> Registry<K> {
    /// The entity's slot.
    pub fn slot(&self, id: &str) -> i32 {
        pinned_slot(K::NAME, id).unwrap_or_else(|| slot_of(K::route_key(id)))
    }

    /// Where the entity lives: `Ok(None)` where this process owns every
    /// entity, `Ok(Some(fence))` when this node owns its slot, and
    /// [`RuntimeError::Elsewhere`] (with the owner's URL when known) when
    /// another node does or none does yet.
    pub fn placement(&self, id: &str) -> RuntimeResult<Option<Fence>> {
        let Some(ownership) = &self.shared.ownership else {
            return Ok(None);
        };
        let slot = self.slot(id);
        match ownership.fence(slot) {
            Some(fence) => Ok(Some(fence)),
            None => Err(RuntimeError::Elsewhere {
                kind: K::NAME,
                id: id.to_owned(),
                owner: ownership.owner_url(slot),
            }),
        }
    }

    /// The database handle for writing the entity from outside its actor
    /// (a handler creating it): fenced by its slot, or
    /// [`RuntimeError::Elsewhere`] when another node owns it.
    pub fn local_db(&self, id: &str) -> RuntimeResult<Db> {
        Ok(match self.placement(id)? {
            Some(fence) => self.shared.db.fenced(fence),
            None => self.shared.db.clone(),
        })
    }

    /// A fresh id from `make` for an entity to create on this node: one
    /// whose slot it owns. Unavailable while it owns none.
    pub fn mint(&self, mut make: impl FnMut() -> String) -> RuntimeResult<String> {
        let Some(ownership) = &self.shared.ownership else {
            return Ok(make());
        };
        ownership
            .mint(&mut make)
            .filter(|id| self.placement(id).is_ok())
            .ok_or_else(|| RuntimeError::Unavailable("this node owns no slot yet".into()))
    }

    /// Stops the actors of `slots`, which this node no longer owns; answers
    /// how many. Their work resumes on the slots' new owner from the
    /// database.
    pub fn halt_slots(&self, slots: &BTreeSet<i32>) -> usize {
        let halted: Vec<Entry<K>> = {
            let mut entries = lock(&self.shared.entries);
            let ids: Vec<Arc<str>> = entries
                .keys()
                .filter(|id| slots.contains(&self.slot(id)))
                .cloned()
                .collect();
            ids.iter().filter_map(|id| entries.remove(id)).collect()
        };
        for entry in &halted {
            entry.addr.do_send(Halt);
        }
        halted.len()
    }

    /// Asks the node owning the entity to look at it again, trying until
    /// one takes it ([`WAKE_RETRY_DELAYS`]): the owner named by each try's
    /// view, which follows the slot when it moves; this node itself once
    /// the slot came here. Coalesced per entity ([`super::super::wakes`]).
    pub(crate) fn wake_elsewhere(&self, id: &str) {
        let Some(ownership) = self.shared.ownership.clone() else {
            return;
        };
        let Some(peers) = ownership.peers().cloned() else {
            return;
        };
        let Some(pending) = ownership.sending.start(K::NAME, id) else {
            return;
        };
        let registry = self.clone();
        let span = wake_span::<K>(id);
        let id = id.to_owned();
        actix::spawn(async move {
            loop {
                if let Err(refused) = registry.deliver_wake(peers.as_ref(), &id).await {
                    tracing::warn!(
                        kind = K::NAME,
                        %id,
                        %refused,
                        "a wake-up was not delivered; the entity's owner finds the work when it next activates it"
                    );
                }
                if !pending.again() {
                    break;
                }
            }
        }.instrument(span));
    }

    /// One wake-up, tried until taken or refused for good.
    async fn deliver_wake(&self, peers: &dyn Peers, id: &str) -> Result<(), String> {
        let mut refused = String::from("no owner known");
        for delay in WAKE_RETRY_DELAYS {
            tokio::time::sleep(delay).await;
            match self.placement(id) {
                Ok(_) => return self.take_wake(id).map_err(|error| error.to_string()),
                Err(RuntimeError::Elsewhere {
                    owner: Some(url), ..
                }) => match peers.wake(&url, K::NAME, id).await {
                    Ok(()) => return Ok(()),
                    Err(WakeRefused::Retry(why)) => refused = why,
                    Err(WakeRefused::Final(why)) => return Err(why),
                },
                Err(_) => {}
            }
        }
        Err(refused)
    }

    /// Another node asked this one to look at the entity again: takes the
    /// request when the entity is this node's (answering
    /// [`RuntimeError::Elsewhere`] otherwise), then activates it and sends
    /// the kind's wake message without making the asking node wait.
    pub fn take_wake(&self, id: &str) -> RuntimeResult<()> {
        self.placement(id)?;
        let pending = match &self.shared.ownership {
            Some(ownership) => match ownership.taking.start(K::NAME, id) {
                Some(pending) => Some(pending),
                // One is under way: it looks once more.
                None => return Ok(()),
            },
            None => None,
        };
        let registry = self.clone();
        let span = wake_span::<K>(id);
        let id = id.to_owned();
        actix::spawn(
            async move {
                loop {
                    if let Err(error) = registry.wake(&id).await {
                        tracing::warn!(kind = K::NAME, %id, %error, "a wake-up was not handled");
                    }
                    if !pending.as_ref().is_some_and(|pending| pending.again()) {
                        break;
                    }
                }
            }
            .instrument(span),
        );
        Ok(())
    }

    /// Another node asked this one to look at the entity again: activates
    /// it, and sends the kind's wake message if it has one.
    pub async fn wake(&self, id: &str) -> RuntimeResult<()> {
        match K::wake_command() {
            Some(command) => self
                .send(id, command, Admission::Unbounded)
                .await
                .map(|_| ()),
            None => self.activate(id).await,
        }
    }
}

/// A wake-up's span: it continues the trace of whatever asked for it (on
/// the sending node the work that found the entity elsewhere, on the owner
/// the wake request, which carries the sender's trace context).
fn wake_span<K: EntityKind>(id: &str) -> tracing::Span {
    crate::trace::continuing(
        tracing::debug_span!(target: crate::trace::TARGET, parent: None, "actor.wake", kind = K::NAME, id = %id),
        &crate::trace::current(),
    )
}

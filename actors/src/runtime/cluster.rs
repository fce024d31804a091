//! Several nodes on one PostgreSQL: each entity's actor is live on the one
//! node that owns its slot.
//!
//! An entity's slot is a hash of its route key ([`EntityKind::route_key`]:
//! a transfer's legs route by the transfer, so a saga and its settlements
//! share a node). Every [`Ownership::beat`] the node renews its heartbeat
//! (one row, whatever it owns), reads who is alive and who owns what, and
//! moves toward the assignment every node computes alike: each slot to the
//! live node that scores highest for it (rendezvous hashing), so a node
//! joining or dying moves only its share. A node gives up a slot another
//! live node should own, and claims a slot it should own once the slot has
//! no owner or a dead one (its heartbeat older than the lease TTL). Claims
//! and releases raise the slot's epoch in the database; the node's actors
//! write through a handle fenced by that epoch ([`tern_schema::Db::fenced`]),
//! so a node paused past its lease writes nothing once its slot moved.
//!
//! The store's side is [`tern_schema::store::cluster`].
//!
//! [`EntityKind::route_key`]: super::EntityKind::route_key

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use chrono::NaiveDateTime;
use futures_util::future::BoxFuture;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tern_schema::store::cluster::{self as store, NodeRow, SlotRow, SLOTS};
use tern_schema::types::utc_now;
use tern_schema::{Db, Fence};

use super::error::{RuntimeError, RuntimeResult};
use super::wakes::Wakes;

/// Default `TERN_LEASE_TTL`.
pub const LEASE_TTL_DEFAULT: Duration = Duration::from_secs(5);
/// Heartbeats per lease TTL: a live node beats this often within one TTL,
/// so a few slow beats never make it look dead.
const BEATS_PER_TTL: u32 = 5;
/// Ownership changes kept for operators.
pub const MOVES_KEPT: usize = 64;
/// A node silent this long and owning nothing leaves the nodes table.
const FORGET_SILENT_AFTER: Duration = Duration::from_secs(3_600);

/// How this node asks another to wake one of its entities (an outbox
/// telling a merchant's endpoint that events wait). Answers once the owner
/// took the wake-up, or why not; the runtime retries
/// ([`WAKE_RETRY_DELAYS`]).
pub trait Peers: Send + Sync {
    fn wake(
        &self,
        url: &str,
        kind: &'static str,
        id: &str,
    ) -> BoxFuture<'static, Result<(), WakeRefused>>;
}

/// Why a wake-up was not taken.
#[derive(Debug)]
pub enum WakeRefused {
    /// Not reached, or not the owner any more: worth another try.
    Retry(String),
    /// Refused for good (a kind it does not know, a bad signature).
    Final(String),
}

/// Pauses before each try of a wake-up sent to another node: together
/// longer than several lease TTLs, so an owner that cannot be reached is
/// either back or presumed dead by then, and its slots' new owner recovers
/// the entity itself.
pub const WAKE_RETRY_DELAYS: [Duration; 7] = [
    Duration::ZERO,
    Duration::from_millis(250),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
    Duration::from_secs(15),
];

#[derive(Clone)]
pub struct ClusterConfig {
    /// How long a silent node keeps its slots.
    pub lease_ttl: Duration,
    /// This node's URL as the others reach it; `None`: nothing can be
    /// forwarded to it.
    pub advertise_url: Option<String>,
    pub peers: Option<Arc<dyn Peers>>,
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("lease_ttl", &self.lease_ttl)
            .field("advertise_url", &self.advertise_url)
            .finish()
    }
}

/// The slot an entity with this route key lives in.
pub fn slot_of(route_key: &str) -> i32 {
    let digest = Sha256::digest(route_key.as_bytes());
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(head) % SLOTS as u64) as i32
}

/// Each registered kind's route key ([`EntityKind::route_key`]), by kind
/// name, for what names an entity by kind and id only (a timer row).
static ROUTES: RwLock<BTreeMap<&'static str, Route>> = RwLock::new(BTreeMap::new());

/// An entity id to its route key.
type Route = fn(&str) -> &str;

/// Records how `kind` routes its entities (at registration).
pub(crate) fn register_route(kind: &'static str, route: Route) {
    ROUTES
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(kind, route);
}

/// The slot of the entity `entity_id` of `kind`: where its actor lives, and
/// what its timers carry, so that the node owning the entity claims them.
pub fn slot_for(kind: &str, entity_id: &str) -> i32 {
    if let Some(slot) = pinned_slot(kind, entity_id) {
        return slot;
    }
    let route = ROUTES
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(kind)
        .copied();
    slot_of(route.map_or(entity_id, |route| route(entity_id)))
}

/// Entities whose slot comes from a pinned route key instead of their
/// kind's route ([`pin_routes`]), by kind and entity id. Only grows, and
/// only from the database, so every node of a cluster agrees.
static PINNED: RwLock<BTreeMap<String, HashMap<String, i32>>> = RwLock::new(BTreeMap::new());

pub(crate) fn pinned_slot(kind: &str, entity_id: &str) -> Option<i32> {
    let pinned = PINNED.read().unwrap_or_else(PoisonError::into_inner);
    pinned.get(kind)?.get(entity_id).copied()
}

/// Pins entities of `kind` to the slot of another key than their id says
/// (`(entity id, route key)` pairs): an entity that must live beside
/// another but whose id does not name it. A pinned route never changes;
/// every node reads them all when it joins ([`load_pinned_routes`]).
/// Several nodes only: a no-op on SQLite.
pub async fn pin_routes(db: &Db, kind: &str, routes: &[(String, String)]) -> RuntimeResult<usize> {
    if db.backend() != tern_schema::Backend::Postgres || routes.is_empty() {
        return Ok(0);
    }
    let mut pooled = db.get().await?;
    let pinned = store::pin_routes(&mut pooled.tx(), kind, routes).await?;
    Ok(pinned)
}

/// Reads every pinned route into this process's placement.
pub async fn load_pinned_routes(db: &Db) -> RuntimeResult<usize> {
    let rows = {
        let mut pooled = db.get().await?;
        let rows = store::pinned_routes(&mut pooled.tx()).await?;
        rows
    };
    let count = rows.len();
    let mut pinned = PINNED.write().unwrap_or_else(PoisonError::into_inner);
    for row in rows {
        pinned
            .entry(row.kind)
            .or_default()
            .insert(row.entity_id, slot_of(&row.route_key));
    }
    Ok(count)
}

/// How much `node` wants `slot`: the highest-scoring live node owns it.
fn score(node: &str, slot: i32) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(node.as_bytes());
    hasher.update(slot.to_be_bytes());
    hasher.finalize().into()
}

/// The live node that should own `slot`.
fn assigned<'a>(live: &[&'a str], slot: i32) -> Option<&'a str> {
    live.iter()
        .copied()
        .max_by_key(|node| (score(node, slot), *node))
}

/// One ownership change this node saw, for operators.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SlotMove {
    pub slots: Vec<i32>,
    pub at: NaiveDateTime,
    /// `claimed` (this node took it), `released` (gave it to a node that
    /// joined) or `lost` (found another owner: this node was presumed dead).
    pub change: &'static str,
    /// The nodes that held them before a claim, when they were others.
    pub from: Vec<String>,
    /// In-flight entities re-activated after a claim.
    pub entities: usize,
}

/// What /health/actors shows of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClusterFigures {
    pub node_id: String,
    pub advertise_url: Option<String>,
    pub lease_ttl_ms: u64,
    pub slots: i32,
    pub slots_owned: usize,
    /// The slots this node owns, in order.
    pub owned_slots: Vec<i32>,
    /// Milliseconds since this node last renewed its heartbeat.
    pub heartbeat_age_ms: Option<u64>,
    pub nodes: Vec<NodeRow>,
    /// The latest ownership changes, newest last.
    pub recent_moves: Vec<SlotMove>,
}

/// What one beat decided, for the runtime to act on.
#[derive(Debug, Default)]
pub(crate) struct BeatOutcome {
    /// Slots another node took while this one believed it owned them
    /// (it was presumed dead): their actors must stop.
    pub lost: Vec<i32>,
    /// Slots this node gave to a node that joined: their actors must stop.
    pub released: Vec<i32>,
    /// Slots this node now owns: their in-flight entities start here.
    pub won: Vec<(i32, Option<String>)>,
}

#[derive(Default)]
struct View {
    nodes: Vec<NodeRow>,
    moves: VecDeque<SlotMove>,
    last_beat: Option<Instant>,
}

/// This node's slots, and what it last saw of the others.
pub struct Ownership {
    node_id: Arc<str>,
    /// This process, among any that might run under the same node id.
    instance: String,
    config: ClusterConfig,
    /// Per slot, the epoch this node holds it at; 0 when it does not.
    epochs: Vec<AtomicI64>,
    /// Per slot, the advertised URL of the node that owns it, as last seen.
    owners: RwLock<Vec<Option<String>>>,
    view: RwLock<View>,
    /// Wake-ups being sent to other nodes, and taken from them.
    pub(crate) sending: Arc<Wakes>,
    pub(crate) taking: Arc<Wakes>,
    /// Held through each beat, and set once the node left: a beat still
    /// running when the node leaves would write its row back, and its
    /// slots would wait out the lease.
    left: tokio::sync::Mutex<bool>,
}

impl Ownership {
    pub fn new(node_id: &str, config: ClusterConfig) -> Ownership {
        Ownership {
            node_id: Arc::from(node_id),
            instance: uuid::Uuid::new_v4().simple().to_string(),
            config,
            epochs: (0..SLOTS).map(|_| AtomicI64::new(0)).collect(),
            owners: RwLock::new(vec![None; SLOTS as usize]),
            view: RwLock::new(View::default()),
            sending: Arc::default(),
            taking: Arc::default(),
            left: tokio::sync::Mutex::new(false),
        }
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    pub fn lease_ttl(&self) -> Duration {
        self.config.lease_ttl
    }

    /// How often [`Ownership::beat`] runs.
    pub fn beat_interval(&self) -> Duration {
        (self.config.lease_ttl / BEATS_PER_TTL).max(Duration::from_millis(50))
    }

    /// The fence of `slot` while this node owns it.
    pub fn fence(&self, slot: i32) -> Option<Fence> {
        let epoch = self
            .epochs
            .get(usize::try_from(slot).ok()?)?
            .load(Ordering::SeqCst);
        (epoch > 0).then_some(Fence { slot, epoch })
    }

    /// The advertised URL of the node owning `slot`, as last seen.
    pub fn owner_url(&self, slot: i32) -> Option<String> {
        let owners = self.owners.read().unwrap_or_else(PoisonError::into_inner);
        owners.get(usize::try_from(slot).ok()?)?.clone()
    }

    pub fn owned_slots(&self) -> Vec<i32> {
        (0..SLOTS)
            .filter(|slot| self.fence(*slot).is_some())
            .collect()
    }

    /// A fresh id from `make` whose slot this node owns, so that the
    /// entity it names is created and served here; `None` when the node
    /// owns no slot (it joined a moment ago, or is leaving).
    pub fn mint(&self, mut make: impl FnMut() -> String) -> Option<String> {
        let owned = self.owned_slots().len();
        if owned == 0 {
            return None;
        }
        // Each try lands on an owned slot with probability owned/SLOTS.
        let tries = 16 * SLOTS as usize / owned;
        (0..tries)
            .map(|_| make())
            .find(|id| self.fence(slot_of(id)).is_some())
    }

    pub(crate) fn peers(&self) -> Option<&Arc<dyn Peers>> {
        self.config.peers.as_ref()
    }

    pub fn figures(&self) -> ClusterFigures {
        let view = self.view.read().unwrap_or_else(PoisonError::into_inner);
        ClusterFigures {
            node_id: self.node_id.to_string(),
            advertise_url: self.config.advertise_url.clone(),
            lease_ttl_ms: u64::try_from(self.config.lease_ttl.as_millis()).unwrap_or(u64::MAX),
            slots: SLOTS,
            slots_owned: self.owned_slots().len(),
            owned_slots: self.owned_slots(),
            heartbeat_age_ms: view
                .last_beat
                .map(|at| u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX)),
            nodes: view.nodes.clone(),
            recent_moves: view.moves.iter().cloned().collect(),
        }
    }

    pub(crate) fn record(&self, change: SlotMove) {
        let mut view = self.view.write().unwrap_or_else(PoisonError::into_inner);
        if view.moves.len() == MOVES_KEPT {
            view.moves.pop_front();
        }
        view.moves.push_back(change);
    }

    /// Drops every slot without asking the database: the heartbeat could
    /// not be renewed for a whole TTL, so other nodes may own them now.
    pub(crate) fn drop_all(&self) -> Vec<i32> {
        let lost: Vec<i32> = self.owned_slots();
        for slot in &lost {
            self.epochs[*slot as usize].store(0, Ordering::SeqCst);
        }
        lost
    }

    /// Whether the last renewed heartbeat is older than the lease TTL.
    pub(crate) fn lease_lapsed(&self) -> bool {
        let view = self.view.read().unwrap_or_else(PoisonError::into_inner);
        view.last_beat
            .is_some_and(|at| at.elapsed() >= self.config.lease_ttl)
    }

    /// One heartbeat: renew, read, release what a live node should own,
    /// claim what this node should own. Lost and released slots are
    /// dropped here before the database hears of a release, so no new
    /// message reaches their actors; the runtime stops those actors and
    /// starts the won slots' entities.
    pub(crate) async fn beat(&self, db: &Db) -> RuntimeResult<BeatOutcome> {
        let left = self.left.lock().await;
        if *left {
            return Err(RuntimeError::Unavailable(
                "this node left the cluster".into(),
            ));
        }
        let ttl_ms = i64::try_from(self.config.lease_ttl.as_millis()).unwrap_or(i64::MAX);
        let mut pooled = db.get().await?;
        let mut tx = pooled.tx();
        let renewed = store::heartbeat(
            &mut tx,
            &self.node_id,
            &self.instance,
            self.config.advertise_url.as_deref(),
            ttl_ms,
        )
        .await?;
        if !renewed {
            return Err(RuntimeError::Unavailable(format!(
                "another live process runs as node {}: give each node its own \
                 TERN_ADVERTISE_URL (or address)",
                self.node_id
            )));
        }
        let beat_at = Instant::now();
        let nodes = store::nodes(&mut tx).await?;
        let slots = store::slots(&mut tx).await?;
        let live: Vec<&str> = nodes
            .iter()
            .filter(|node| node.live)
            .map(|node| node.id.as_str())
            .collect();
        let mut outcome = BeatOutcome::default();
        let mut release = Vec::new();
        let mut claim = Vec::new();
        for SlotRow { slot, owner, epoch } in &slots {
            let held = self.fence(*slot).map(|fence| fence.epoch);
            let owned_here = owner.as_deref() == Some(&*self.node_id) && held == Some(*epoch);
            if held.is_some() && !owned_here {
                outcome.lost.push(*slot);
                continue;
            }
            let wanted = assigned(&live, *slot) == Some(&*self.node_id);
            if owned_here {
                if !wanted {
                    release.push((*slot, *epoch));
                }
                continue;
            }
            // Free: no owner, a dead one, or this node's own id from a run
            // that died (its slots come back without waiting for the TTL).
            let ours = owner.as_deref() == Some(&*self.node_id);
            let free = match owner.as_deref() {
                None => true,
                Some(owner) => ours || !live.contains(&owner),
            };
            if free && wanted {
                claim.push((*slot, *epoch, owner.clone()));
            } else if ours {
                // Ours in the database but not held here (a release or a
                // claim whose answer was lost) and meant for another node:
                // give it up, or no node would ever serve it.
                release.push((*slot, *epoch));
            }
        }
        for slot in &outcome.lost {
            self.epochs[*slot as usize].store(0, Ordering::SeqCst);
        }
        for (slot, _) in &release {
            self.epochs[*slot as usize].store(0, Ordering::SeqCst);
        }
        let released = store::release(&mut tx, &self.node_id, &release).await?;
        // Released or not (another node may have taken one meanwhile), none
        // of them is this node's any more.
        outcome.released = release.iter().map(|(slot, _)| *slot).collect();
        let seen: Vec<(i32, i64)> = claim
            .iter()
            .map(|(slot, epoch, _)| (*slot, *epoch))
            .collect();
        let won = store::claim(&mut tx, &self.node_id, &seen).await?;
        let won_slots: Vec<i32> = won.iter().map(|(slot, _)| *slot).collect();
        store::free_timer_claims(&mut tx, &won_slots).await?;
        for (slot, epoch) in &won {
            self.epochs[*slot as usize].store(*epoch, Ordering::SeqCst);
            let from = claim
                .iter()
                .find(|(s, _, _)| s == slot)
                .and_then(|(_, _, owner)| owner.clone())
                .filter(|owner| owner != &*self.node_id);
            outcome.won.push((*slot, from));
        }
        let silent_ms = i64::try_from(FORGET_SILENT_AFTER.as_millis()).unwrap_or(i64::MAX);
        store::forget_silent(&mut tx, silent_ms).await?;
        self.remember(nodes, &slots, &won_slots, &outcome.released, beat_at);
        let now = utc_now();
        if !released.is_empty() {
            self.record(SlotMove {
                slots: released,
                at: now,
                change: "released",
                from: Vec::new(),
                entities: 0,
            });
        }
        Ok(outcome)
    }

    /// Keeps what the beat read: the nodes, and each slot's owner URL.
    fn remember(
        &self,
        nodes: Vec<NodeRow>,
        slots: &[SlotRow],
        won: &[i32],
        released: &[i32],
        at: Instant,
    ) {
        let url_of = |id: &str| {
            nodes
                .iter()
                .find(|node| node.id == id && node.live)
                .and_then(|node| node.advertise_url.clone())
        };
        let won: BTreeSet<i32> = won.iter().copied().collect();
        {
            let mut owners = self.owners.write().unwrap_or_else(PoisonError::into_inner);
            for row in slots {
                owners[row.slot as usize] = if won.contains(&row.slot) {
                    self.config.advertise_url.clone()
                } else if released.contains(&row.slot) {
                    // Read before the release: its next owner is not known.
                    None
                } else {
                    row.owner
                        .as_deref()
                        .filter(|owner| *owner != &*self.node_id)
                        .and_then(url_of)
                };
            }
        }
        let mut view = self.view.write().unwrap_or_else(PoisonError::into_inner);
        view.nodes = nodes;
        view.last_beat = Some(at);
    }

    /// Leaves the cluster on purpose: every slot is released at once, so
    /// the other nodes take them at their next beat instead of after the
    /// lease TTL.
    pub async fn leave(&self, db: &Db) -> RuntimeResult<()> {
        let mut left = self.left.lock().await;
        *left = true;
        self.drop_all();
        let mut pooled = db.get().await?;
        let mut tx = pooled.tx();
        store::leave(&mut tx, &self.node_id).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_key_always_lands_in_the_same_slot_within_range() {
        for key in ["t_1", "m_1/k", "", "a much longer key with spaces"] {
            let slot = slot_of(key);
            assert!((0..SLOTS).contains(&slot));
            assert_eq!(slot, slot_of(key));
        }
    }

    #[test]
    fn slots_spread_over_nodes_and_a_death_moves_only_the_dead_nodes_share() {
        let three = ["a", "b", "c"];
        let two = ["a", "b"];
        let mut counts = [0; 3];
        for slot in 0..SLOTS {
            let owner = assigned(&three, slot).expect("owner");
            let index = three.iter().position(|n| *n == owner).expect("known");
            counts[index] += 1;
            let after = assigned(&two, slot).expect("owner");
            if owner != "c" {
                assert_eq!(after, owner, "slot {slot} moved though its owner lived");
            }
        }
        // 64 slots over 3 nodes: no node is left without a fair share.
        assert!(counts.iter().all(|count| *count >= 10), "{counts:?}");
    }

    #[test]
    fn no_live_node_owns_nothing_and_minting_needs_a_slot() {
        assert_eq!(assigned(&[], 3), None);
        let ownership = Ownership::new(
            "a",
            ClusterConfig {
                lease_ttl: LEASE_TTL_DEFAULT,
                advertise_url: None,
                peers: None,
            },
        );
        assert_eq!(ownership.mint(|| "x".into()), None);
        ownership.epochs[slot_of("x") as usize].store(3, Ordering::SeqCst);
        assert_eq!(ownership.mint(|| "x".into()).as_deref(), Some("x"));
        assert_eq!(
            ownership.fence(slot_of("x")),
            Some(Fence {
                slot: slot_of("x"),
                epoch: 3
            })
        );
    }
}

//! What an actor kind (transfer, settlement, card, webhook endpoint, ...)
//! tells the runtime: how to load an entity, how to apply one message, when an
//! entity is in flight, how to list the in-flight ones, and how to read a
//! persisted timer.
//!
//! The runtime owns the actor shell ([`super::actor`]): mailbox bounds,
//! serialisation, passivation, crash detection and figures are the same for
//! every kind, so a kind cannot get them wrong.

use std::future::Future;
use std::sync::Arc;

use chrono::NaiveDateTime;
use futures_util::future::LocalBoxFuture;
use tern_schema::store::timers::TimerRow;
use tern_schema::Db;

use super::error::RuntimeResult;

/// What a handler gets besides the state: the database, the entity's id,
/// and its kind's context (provider ports, policies) given at registration.
#[derive(Clone)]
pub struct EntityEnv<C> {
    pub db: Db,
    pub id: Arc<str>,
    pub ctx: C,
}

/// The result of one message: the state after it (already persisted by the
/// handler), the reply to the sender, and follow-up work.
pub struct Transition<K: EntityKind> {
    pub state: K::State,
    pub reply: K::Reply,
    /// Work that runs after the transition committed, outside the entity's
    /// serialisation (provider calls): each resolves to an optional message
    /// that is fed back to the same actor. The actor is not passivated while
    /// follow-ups are pending; if it stops anyway (crash, shutdown), the
    /// persisted state must let the kind resume the work on activation (see
    /// [`EntityKind::on_activate`]).
    pub follow_ups: Vec<LocalBoxFuture<'static, Option<K::Command>>>,
}

impl<K: EntityKind> Transition<K> {
    /// A transition with no follow-up work.
    pub fn new(state: K::State, reply: K::Reply) -> Self {
        Transition {
            state,
            reply,
            follow_ups: Vec::new(),
        }
    }

    pub fn with_follow_up(
        mut self,
        work: impl Future<Output = Option<K::Command>> + 'static,
    ) -> Self {
        self.follow_ups.push(Box::pin(work));
        self
    }
}

/// A persisted timer claimed by this node, on its way to the entity's actor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimerFiring {
    pub id: String,
    pub kind: String,
    pub entity_id: String,
    pub due_at: NaiveDateTime,
    pub payload: String,
    /// Proof of the claim: completing the timer with it fails once the lease
    /// has passed to another node.
    pub claim_token: String,
    pub attempts: i32,
}

impl TimerFiring {
    /// A firing from a row claimed by [`tern_schema::store::timers::claim_due`];
    /// `None` for a row without a claim.
    pub fn from_claimed(row: TimerRow) -> Option<TimerFiring> {
        let claim_token = row.claim_token?;
        Some(TimerFiring {
            id: row.id,
            kind: row.kind,
            entity_id: row.entity_id,
            due_at: row.due_at,
            payload: row.payload,
            claim_token,
            attempts: row.attempts,
        })
    }
}

/// One kind of entity actor.
///
/// Handlers receive an owned copy of the state and answer the next state,
/// so a handler that fails or panics never leaves half-applied state in
/// memory; on any error the actor reloads from the database.
pub trait EntityKind: Sized + 'static {
    /// Stable name: registry key, figures key and `actor_timers.kind`.
    const NAME: &'static str;
    type State: Clone + Send + Unpin + 'static;
    type Command: Send + 'static;
    type Reply: Send + 'static;
    /// What every handler of the kind needs beyond the database: provider
    /// ports, policies. Cloned into each activation; `()` when nothing.
    type Context: Clone + Send + Sync + Unpin + 'static;

    /// Loads the entity's persisted state; `Ok(None)` when it does not exist.
    fn load(
        env: EntityEnv<Self::Context>,
    ) -> impl Future<Output = RuntimeResult<Option<Self::State>>> + 'static;

    /// Applies one message: computes the transition, persists it in one
    /// transaction with a version check (see [`super::version`]), and answers
    /// the new state. Runs under `AtomicResponse`: no other message of this
    /// entity runs until it resolves.
    fn handle(
        env: EntityEnv<Self::Context>,
        state: Self::State,
        command: Self::Command,
    ) -> impl Future<Output = RuntimeResult<Transition<Self>>> + 'static;

    /// When the entity's current piece of work began, or `None` when it is
    /// terminal. Feeds the oldest-in-flight age and the stuck list.
    fn in_flight_since(state: &Self::State) -> Option<NaiveDateTime>;

    /// One page of the ids of non-terminal entities: at most `limit`, in
    /// id order, after the id `after` (from the first when `None`). What
    /// recovery re-activates, page by page, at start and when slots move.
    fn list_in_flight(
        db: Db,
        after: Option<String>,
        limit: i64,
    ) -> impl Future<Output = RuntimeResult<Vec<String>>> + 'static;

    /// Turns a claimed timer into a message. The message should carry the
    /// firing so the handler can complete the timer in the plan that writes
    /// its effect (`Plan::completes_timer`, or [`super::timers::complete`]
    /// when there is none): that makes the timer's effect and its deletion
    /// atomic, hence exactly once.
    fn timer_command(firing: TimerFiring) -> RuntimeResult<Self::Command>;

    /// A message to send to the actor each time it is activated (on demand,
    /// at recovery, after a restart), to resume work the persisted state says
    /// is pending, e.g. ask a provider about an unknown outcome.
    fn on_activate(state: &Self::State) -> Option<Self::Command> {
        let _ = state;
        None
    }

    /// A message that ends the entity's pending work when resuming it
    /// ([`EntityKind::on_activate`]) keeps failing for `reason`, a reason
    /// that will not pass by itself: fail what charged nothing, compensate
    /// what did. Asked once per streak of failures. `None` (the default), or
    /// a message that fails for good too, leaves the entity stuck: listed
    /// with the reason in the figures for an operator, and not resumed again
    /// until a message moves it or it is activated anew.
    fn on_permanent_failure(state: &Self::State, reason: &str) -> Option<Self::Command> {
        let _ = (state, reason);
        None
    }

    /// What places the entity on a node where several share one database:
    /// entities with the same route key live in the same slot, hence on
    /// the same node (a transfer's legs route by their transfer). The id
    /// by default.
    fn route_key(id: &str) -> &str {
        id
    }

    /// The message that tells a live actor to look at the database again,
    /// sent when another node wakes the entity ([`super::Registry::tell`]
    /// to an entity owned elsewhere carries no message across nodes).
    /// `None`: activating the actor is enough.
    fn wake_command() -> Option<Self::Command> {
        None
    }

    /// Whether the actor leaves memory as soon as its mailbox is empty after
    /// a message, instead of after the idle timeout. By default when the
    /// entity is terminal: nothing more will happen to it. A kind whose
    /// entities take traffic while not in flight (a card between
    /// authorizations) says no, so that a busy entity is not reloaded from
    /// the database between two of its messages.
    fn passivates_when_quiet(state: &Self::State) -> bool {
        Self::in_flight_since(state).is_none()
    }
}

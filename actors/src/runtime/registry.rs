//! A registry per actor kind: activates actors on demand from the database,
//! bounds their mailboxes, notices crashed ones and restarts them from the
//! database, and lets idle ones passivate.
//!
//! Admission (a caller taking a place in a mailbox) and passivation (an
//! actor leaving the map) both happen under the registry's lock, and an
//! actor only passivates with an empty mailbox; so a message is never sent
//! to an actor that has decided to stop.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use actix::dev::SendError;
use actix::{Actor, Addr, Arbiter, ArbiterHandle};
use futures_util::future::LocalBoxFuture;
use futures_util::StreamExt;
use tern_schema::types::utc_now;
use tern_schema::Db;
use tern_schema::TRACE_TARGET;
use tokio::sync::oneshot;
use tracing::Instrument;

use super::actor::{ActorCell, Deliver, EntityActor, Halt, Origin, Ticket};
use super::cluster::Ownership;
use super::error::{RuntimeError, RuntimeResult};
use super::figures::{summarize_in_flight, KindCounters, KindFigures, LiveEntity};
use super::kind::{EntityEnv, EntityKind, TimerFiring};
use super::recovery::RECOVERY_PAGE_ROWS;

mod placement;

/// Messages one actor may hold unhandled before requests get `MailboxFull`.
pub const MAILBOX_CAPACITY_DEFAULT: u64 = 64;
/// An actor with no message for this long leaves memory.
pub const IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(300);
/// Live actors per kind on one node; activation beyond it is `Saturated`.
pub const LIVE_ACTORS_MAX_DEFAULT: usize = 100_000;
/// How long a caller waits for an actor's reply.
pub const CALL_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// A live entity in flight for longer than this is reported stuck.
pub const STUCK_AFTER_DEFAULT: Duration = Duration::from_secs(15 * 60);
/// How often the registry looks for crashed actors to restart.
pub const SUPERVISE_INTERVAL_DEFAULT: Duration = Duration::from_secs(1);
/// Automatic restarts of one entity allowed within [`RESTART_WINDOW`]; past
/// it the entity is left down (crash loop) until a message activates it.
pub const RESTART_BURST_MAX: u32 = 5;
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);
/// Entities re-activated concurrently during recovery.
pub const RECOVERY_CONCURRENCY_MAX: usize = 8;
/// Attempts to find or start a live actor for one message.
const ADMISSION_ATTEMPTS_MAX: u32 = 3;
/// Attempts to hand one message to an actor that closed under us.
const SEND_ATTEMPTS_MAX: u32 = 2;
/// After a reply was dropped, how long to wait for the dead actor's mailbox
/// to report closed (the panicking arbiter tears it down concurrently).
const CRASH_SETTLE_CHECKS_MAX: u32 = 50;
const CRASH_SETTLE_CHECK_INTERVAL: Duration = Duration::from_millis(2);

#[derive(Clone)]
pub struct RegistryConfig {
    pub mailbox_capacity: u64,
    pub idle_timeout: Duration,
    pub live_actors_max: usize,
    pub call_timeout: Duration,
    pub stuck_after: Duration,
    pub supervise_interval: Duration,
    /// Arbiters to spread actors over, round robin; empty runs each actor
    /// on the arbiter of the caller that activates it.
    pub arbiters: Vec<ArbiterHandle>,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            mailbox_capacity: MAILBOX_CAPACITY_DEFAULT,
            idle_timeout: IDLE_TIMEOUT_DEFAULT,
            live_actors_max: LIVE_ACTORS_MAX_DEFAULT,
            call_timeout: CALL_TIMEOUT_DEFAULT,
            stuck_after: STUCK_AFTER_DEFAULT,
            supervise_interval: SUPERVISE_INTERVAL_DEFAULT,
            arbiters: Vec::new(),
        }
    }
}

impl std::fmt::Debug for RegistryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryConfig")
            .field("mailbox_capacity", &self.mailbox_capacity)
            .field("idle_timeout", &self.idle_timeout)
            .field("live_actors_max", &self.live_actors_max)
            .field("call_timeout", &self.call_timeout)
            .field("stuck_after", &self.stuck_after)
            .field("supervise_interval", &self.supervise_interval)
            .field("arbiters", &self.arbiters.len())
            .finish()
    }
}

struct Entry<K: EntityKind> {
    addr: Addr<EntityActor<K>>,
    cell: Arc<ActorCell>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Admission {
    /// Request paths: refuse when the mailbox is full.
    Bounded,
    /// Timers: bounded by the claim batch instead, and must not be refused.
    Unbounded,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cause {
    Demand,
    Restart,
}

enum Lookup<K: EntityKind> {
    Live(Addr<EntityActor<K>>, Ticket),
    Absent,
    Crashed,
}

/// State shared by the registry's handles and its actors.
pub(crate) struct Shared<K: EntityKind> {
    pub config: RegistryConfig,
    context: K::Context,
    pub counters: Arc<KindCounters>,
    db: Db,
    entries: Mutex<HashMap<Arc<str>, Entry<K>>>,
    recent_restarts: Mutex<HashMap<Arc<str>, (u32, Instant)>>,
    next_arbiter: AtomicUsize,
    closed: AtomicBool,
    supervising: AtomicBool,
    /// Which slots this node owns, where several nodes share the
    /// database; `None`: this process owns every entity.
    ownership: Option<Arc<Ownership>>,
}

/// No code panics while holding these locks, so a poisoned one still holds
/// consistent data.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<K: EntityKind> Shared<K> {
    fn admit(&self, id: &str, admission: Admission) -> RuntimeResult<Lookup<K>> {
        let mut entries = lock(&self.entries);
        let Some(entry) = entries.get(id) else {
            return Ok(Lookup::Absent);
        };
        if !entry.addr.connected() {
            // Passivated actors leave the map before stopping, so a closed
            // mailbox still in the map is an actor that panicked.
            entries.remove(id);
            KindCounters::bump(&self.counters.crashes);
            return Ok(Lookup::Crashed);
        }
        let queued = entry.cell.queued.load(Ordering::SeqCst);
        if admission == Admission::Bounded && queued >= self.config.mailbox_capacity {
            KindCounters::bump(&self.counters.mailbox_full);
            return Err(RuntimeError::MailboxFull {
                kind: K::NAME,
                id: id.to_owned(),
            });
        }
        Ok(Lookup::Live(
            entry.addr.clone(),
            Ticket::admit(&entry.cell, &self.counters),
        ))
    }

    /// Removes the actor if nothing is queued for it; answers whether it
    /// may stop.
    pub fn passivate_if_idle(&self, id: &str, cell: &Arc<ActorCell>) -> bool {
        let mut entries = lock(&self.entries);
        if cell.queued.load(Ordering::SeqCst) > 0 {
            return false;
        }
        if entries
            .get(id)
            .is_some_and(|entry| Arc::ptr_eq(&entry.cell, cell))
        {
            entries.remove(id);
        }
        KindCounters::bump(&self.counters.passivations);
        true
    }

    /// Removes the actor, which is stopping for a reason other than idleness.
    pub fn forget(&self, id: &str, cell: &Arc<ActorCell>) {
        let mut entries = lock(&self.entries);
        if entries
            .get(id)
            .is_some_and(|entry| Arc::ptr_eq(&entry.cell, cell))
        {
            entries.remove(id);
        }
    }

    /// Removes the entry if its actor is dead; answers whether it was.
    fn notice_crash(&self, id: &str) -> bool {
        let mut entries = lock(&self.entries);
        if entries.get(id).is_some_and(|entry| !entry.addr.connected()) {
            entries.remove(id);
            KindCounters::bump(&self.counters.crashes);
            return true;
        }
        false
    }

    /// Removes every dead entry and answers their ids.
    fn take_crashed(&self) -> Vec<Arc<str>> {
        let mut entries = lock(&self.entries);
        let dead: Vec<Arc<str>> = entries
            .iter()
            .filter(|(_, entry)| !entry.addr.connected())
            .map(|(id, _)| id.clone())
            .collect();
        for id in &dead {
            entries.remove(id);
            KindCounters::bump(&self.counters.crashes);
        }
        dead
    }

    /// Counts an automatic restart against the entity's budget.
    fn restart_allowed(&self, id: &Arc<str>) -> bool {
        let now = Instant::now();
        let mut recent = lock(&self.recent_restarts);
        recent.retain(|_, (_, first)| now.duration_since(*first) < RESTART_WINDOW);
        let (count, _) = recent.entry(id.clone()).or_insert((0, now));
        *count += 1;
        *count <= RESTART_BURST_MAX
    }

    fn spawn_actor(
        &self,
        this: &Arc<Self>,
        cell: Arc<ActorCell>,
        env: EntityEnv<K::Context>,
        state: K::State,
    ) -> RuntimeResult<Addr<EntityActor<K>>> {
        let capacity = usize::try_from(self.config.mailbox_capacity).unwrap_or(usize::MAX);
        let shared = this.clone();
        // Work the actor resumes by itself at its start continues the trace
        // of whatever started it (a request creating the entity).
        let cause = crate::trace::current();
        let build = move |ctx: &mut actix::Context<EntityActor<K>>| {
            ctx.set_mailbox_capacity(capacity);
            EntityActor::new(shared, cell, env, state, cause)
        };
        if self.config.arbiters.is_empty() {
            if Arbiter::try_current().is_none() {
                return Err(RuntimeError::Unavailable(
                    "actors need an actix System on this thread".into(),
                ));
            }
            return Ok(EntityActor::create(build));
        }
        let index = self.next_arbiter.fetch_add(1, Ordering::Relaxed) % self.config.arbiters.len();
        Ok(EntityActor::start_in_arbiter(
            &self.config.arbiters[index],
            build,
        ))
    }
}

/// The handle to one kind's actors. Cheap to clone; hold it where messages
/// are sent (the edge's state, other actors).
pub struct Registry<K: EntityKind> {
    shared: Arc<Shared<K>>,
}

impl<K: EntityKind> Clone for Registry<K> {
    fn clone(&self) -> Self {
        Registry {
            shared: self.shared.clone(),
        }
    }
}

impl<K: EntityKind> Registry<K> {
    pub fn new(db: Db, config: RegistryConfig, context: K::Context) -> Registry<K> {
        Registry::placed(db, config, context, None)
    }

    /// A registry whose actors live only in the slots `ownership` holds.
    pub(crate) fn placed(
        db: Db,
        config: RegistryConfig,
        context: K::Context,
        ownership: Option<Arc<Ownership>>,
    ) -> Registry<K> {
        assert!(
            config.mailbox_capacity > 0,
            "a mailbox holds at least one message"
        );
        assert!(
            config.live_actors_max > 0,
            "a registry holds at least one actor"
        );
        Registry {
            shared: Arc::new(Shared {
                config,
                context,
                counters: Arc::new(KindCounters::default()),
                db,
                entries: Mutex::new(HashMap::new()),
                recent_restarts: Mutex::new(HashMap::new()),
                next_arbiter: AtomicUsize::new(0),
                closed: AtomicBool::new(false),
                supervising: AtomicBool::new(false),
                ownership,
            }),
        }
    }

    pub fn name(&self) -> &'static str {
        K::NAME
    }

    pub fn config(&self) -> &RegistryConfig {
        &self.shared.config
    }

    /// Sends a request to the entity's actor, activating it from the
    /// database if needed, and awaits the reply. A full mailbox answers
    /// [`RuntimeError::MailboxFull`] at once instead of queueing.
    #[tracing::instrument(name = "actor.call", skip_all, fields(kind = K::NAME, id = %id))]
    pub async fn call(&self, id: &str, command: K::Command) -> RuntimeResult<K::Reply> {
        self.send(id, command, Admission::Bounded).await
    }

    /// Sends a message from inside the runtime (one entity to another)
    /// without waiting for its handling. Not bounded by the mailbox: such
    /// messages are bounded by in-flight work, and refusing one would lose
    /// it. A failure is logged; the receiver's recovery at its next
    /// activation must not depend on the message arriving.
    pub fn tell(&self, id: &str, command: K::Command) {
        if let Err(RuntimeError::Elsewhere { .. }) = self.placement(id) {
            // Another node owns the entity: the message stays here, the
            // owner is asked to look at the database.
            self.wake_elsewhere(id);
            return;
        }
        let registry = self.clone();
        let id = id.to_owned();
        // The task continues the sender's trace.
        let cause = crate::trace::continuing(
            tracing::debug_span!(target: TRACE_TARGET, parent: None, "actor.tell", kind = K::NAME, id = %id),
            &crate::trace::current(),
        );
        actix::spawn(
            async move {
                if let Err(error) = registry.send(&id, command, Admission::Unbounded).await {
                    tracing::warn!(kind = K::NAME, %id, %error, "an internal message was not handled");
                }
            }
            .instrument(cause),
        );
    }

    /// Activates the entity's actor unless it is live already.
    pub async fn activate(&self, id: &str) -> RuntimeResult<()> {
        if self.is_live(id) {
            return Ok(());
        }
        self.start(id, Cause::Demand).await
    }

    /// Activates the entity's actor with `state`, which the caller has
    /// just committed (so reading it back would only cost a query), unless
    /// the actor is live already.
    pub async fn activate_with(&self, id: &str, state: K::State) -> RuntimeResult<()> {
        if self.is_live(id) {
            return Ok(());
        }
        self.start_with(id, Cause::Demand, Some(state)).await
    }

    /// Whether an actor for the entity is in memory and running.
    pub fn is_live(&self, id: &str) -> bool {
        lock(&self.shared.entries)
            .get(id)
            .is_some_and(|entry| entry.addr.connected())
    }

    /// Re-activates every non-terminal entity the kind lists; answers how
    /// many actors were started or found live.
    pub async fn recover(&self) -> RuntimeResult<usize> {
        self.recover_slots(None).await
    }

    /// [`Registry::recover`] for the entities of `slots` only (`None`:
    /// every entity this node owns). Reads the in-flight ids page by page
    /// and keeps those placed here, so a takeover finds its slots'
    /// entities however many others are in flight; it stops at the live
    /// actor limit.
    pub async fn recover_slots(&self, slots: Option<&BTreeSet<i32>>) -> RuntimeResult<usize> {
        let limit = self.shared.config.live_actors_max;
        let mut after: Option<String> = None;
        let mut activated = 0;
        loop {
            let page =
                K::list_in_flight(self.shared.db.clone(), after.take(), RECOVERY_PAGE_ROWS).await?;
            let full = page.len() as i64 == RECOVERY_PAGE_ROWS;
            after = page.last().cloned();
            let ids = page.into_iter().filter(|id| {
                slots.is_none_or(|slots| slots.contains(&self.slot(id)))
                    && self.placement(id).is_ok()
            });
            let mut outcomes = futures_util::stream::iter(ids)
                .map(|id| async move { (self.activate(&id).await, id) })
                .buffer_unordered(RECOVERY_CONCURRENCY_MAX);
            while let Some((outcome, id)) = outcomes.next().await {
                match outcome {
                    Ok(()) => activated += 1,
                    // Finished or deleted since it was listed, or its slot
                    // moved on meanwhile.
                    Err(RuntimeError::NotFound { .. } | RuntimeError::Elsewhere { .. }) => {}
                    Err(RuntimeError::Saturated { .. }) => {
                        // The rest wait for their next activation.
                        tracing::warn!(kind = K::NAME, %id, "live actor limit reached during recovery");
                        return Ok(activated);
                    }
                    Err(error) => return Err(error),
                }
            }
            if !full || activated >= limit {
                return Ok(activated);
            }
        }
    }

    /// Starts the periodic search for crashed actors (needs an actix System).
    pub fn start_supervision(&self) -> RuntimeResult<()> {
        if Arbiter::try_current().is_none() {
            return Err(RuntimeError::Unavailable(
                "supervision needs an actix System".into(),
            ));
        }
        if self.shared.supervising.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let weak = Arc::downgrade(&self.shared);
        let interval = self.shared.config.supervise_interval;
        actix::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Some(shared) = weak.upgrade() else { break };
                if shared.closed.load(Ordering::SeqCst) {
                    break;
                }
                Registry { shared }.restart_crashed().await;
            }
        });
        Ok(())
    }

    /// Stops every actor and refuses new activations.
    pub fn shutdown(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        let drained: Vec<Entry<K>> = lock(&self.shared.entries)
            .drain()
            .map(|(_, entry)| entry)
            .collect();
        for entry in drained {
            entry.addr.do_send(Halt);
        }
    }

    pub fn figures(&self) -> KindFigures {
        let config = &self.shared.config;
        let (live, in_flight) = {
            let entries = lock(&self.shared.entries);
            let in_flight: Vec<LiveEntity> = entries
                .iter()
                .map(|(id, entry)| LiveEntity {
                    id: id.to_string(),
                    in_flight_since: entry.cell.in_flight_since(),
                    stopped: entry.cell.stopped(),
                })
                .filter(|entity| entity.in_flight_since.is_some() || entity.stopped.is_some())
                .collect();
            (entries.len() as u64, in_flight)
        };
        let stuck_after_ms = u64::try_from(config.stuck_after.as_millis()).unwrap_or(u64::MAX);
        let (oldest_in_flight_ms, stuck_count, stuck_entities) =
            summarize_in_flight(utc_now(), &in_flight, stuck_after_ms);
        let counters = &self.shared.counters;
        KindFigures {
            live_actors: live,
            mailbox_backlog: KindCounters::read(&counters.backlog),
            mailbox_capacity: config.mailbox_capacity,
            mailbox_full: KindCounters::read(&counters.mailbox_full),
            activations: KindCounters::read(&counters.activations),
            passivations: KindCounters::read(&counters.passivations),
            crashes: KindCounters::read(&counters.crashes),
            restarts: KindCounters::read(&counters.restarts),
            oldest_in_flight_ms,
            stuck_after_ms,
            stuck_count,
            stuck_entities,
        }
    }

    /// Delivers a claimed timer as a message and awaits its handling.
    pub async fn deliver_timer(&self, firing: TimerFiring) -> RuntimeResult<()> {
        let id = firing.entity_id.clone();
        let command = K::timer_command(firing)?;
        self.send(&id, command, Admission::Unbounded)
            .await
            .map(|_| ())
    }

    async fn send(
        &self,
        id: &str,
        command: K::Command,
        admission: Admission,
    ) -> RuntimeResult<K::Reply> {
        self.placement(id)?;
        let mut command = command;
        let span =
            tracing::debug_span!(target: TRACE_TARGET, "actor.message", kind = K::NAME, id = %id);
        for _ in 0..SEND_ATTEMPTS_MAX {
            let (addr, ticket) = self.admitted(id, admission).await?;
            let started = ticket.started_flag();
            let (reply, answer) = oneshot::channel();
            let message = Deliver::<K> {
                command,
                reply: Some(reply),
                ticket,
                origin: Origin::Sender,
                span: span.clone(),
            };
            let sent = match admission {
                Admission::Bounded => addr.try_send(message),
                Admission::Unbounded => {
                    addr.do_send(message);
                    Ok(())
                }
            };
            match sent {
                Ok(()) => return self.await_reply(id, answer, &started).await,
                Err(SendError::Full(_)) => {
                    KindCounters::bump(&self.shared.counters.mailbox_full);
                    return Err(RuntimeError::MailboxFull {
                        kind: K::NAME,
                        id: id.to_owned(),
                    });
                }
                // The actor died between lookup and send; the message came
                // back untouched, so it is safe to try the restarted actor.
                Err(SendError::Closed(message)) => {
                    command = message.command;
                    self.shared.notice_crash(id);
                }
            }
        }
        Err(RuntimeError::Unavailable(format!(
            "{} {id} kept stopping",
            K::NAME
        )))
    }

    async fn admitted(
        &self,
        id: &str,
        admission: Admission,
    ) -> RuntimeResult<(Addr<EntityActor<K>>, Ticket)> {
        for _ in 0..ADMISSION_ATTEMPTS_MAX {
            match self.shared.admit(id, admission)? {
                Lookup::Live(addr, ticket) => return Ok((addr, ticket)),
                Lookup::Absent => self.start(id, Cause::Demand).await?,
                Lookup::Crashed => self.start(id, Cause::Restart).await?,
            }
        }
        Err(RuntimeError::Unavailable(format!(
            "{} {id} could not be activated",
            K::NAME
        )))
    }

    async fn await_reply(
        &self,
        id: &str,
        answer: oneshot::Receiver<RuntimeResult<K::Reply>>,
        started: &AtomicBool,
    ) -> RuntimeResult<K::Reply> {
        let timeout = self.shared.config.call_timeout;
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => {
                // The actor dropped the message unanswered: it crashed.
                self.restart_after_crash(id).await;
                if started.load(Ordering::SeqCst) {
                    Err(RuntimeError::Crashed {
                        kind: K::NAME,
                        id: id.to_owned(),
                    })
                } else {
                    Err(RuntimeError::Unavailable(format!(
                        "{} {id} crashed before handling the message",
                        K::NAME
                    )))
                }
            }
            Err(_) => Err(RuntimeError::Timeout {
                kind: K::NAME,
                id: id.to_owned(),
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// Restarts the entity's actor from the database once its dead mailbox
    /// shows closed, so in-flight work resumes without waiting for a request.
    async fn restart_after_crash(&self, id: &str) {
        for _ in 0..CRASH_SETTLE_CHECKS_MAX {
            if self.shared.notice_crash(id) {
                self.restart(Arc::from(id)).await;
                return;
            }
            if !lock(&self.shared.entries).contains_key(id) {
                return;
            }
            tokio::time::sleep(CRASH_SETTLE_CHECK_INTERVAL).await;
        }
    }

    async fn restart_crashed(&self) {
        for id in self.shared.take_crashed() {
            self.restart(id).await;
        }
    }

    async fn restart(&self, id: Arc<str>) {
        if !self.shared.restart_allowed(&id) {
            tracing::error!(kind = K::NAME, %id, "crash loop: left down until its next message");
            return;
        }
        match self.start(&id, Cause::Restart).await {
            Ok(()) | Err(RuntimeError::NotFound { .. }) => {}
            Err(error) => {
                tracing::warn!(kind = K::NAME, %id, %error, "restart failed; next message retries")
            }
        }
    }

    /// Loads the entity and starts its actor; a no-op if another caller
    /// started it meanwhile.
    async fn start(&self, id: &str, cause: Cause) -> RuntimeResult<()> {
        self.start_with(id, cause, None).await
    }

    /// Starts the entity's actor with `known` state, or with the state
    /// loaded from the database.
    async fn start_with(
        &self,
        id: &str,
        cause: Cause,
        known: Option<K::State>,
    ) -> RuntimeResult<()> {
        let shared = &self.shared;
        if shared.closed.load(Ordering::SeqCst) {
            return Err(RuntimeError::Unavailable(
                "the actor runtime is shut down".into(),
            ));
        }
        let fence = self.placement(id)?;
        let db = match fence {
            Some(fence) => shared.db.fenced(fence),
            None => shared.db.clone(),
        };
        let env = EntityEnv {
            db,
            id: Arc::from(id),
            ctx: shared.context.clone(),
        };
        let state = match known {
            Some(state) => state,
            None => K::load(env.clone())
                .await?
                .ok_or_else(|| RuntimeError::NotFound {
                    kind: K::NAME,
                    id: id.to_owned(),
                })?,
        };
        let mut entries = lock(&shared.entries);
        // The slot may have left this node while the state loaded: its
        // actors were stopped then (under this lock), and this one must not
        // start with a fence that passed.
        if fence.is_some() && self.placement(id).ok().flatten() != fence {
            return Err(RuntimeError::Elsewhere {
                kind: K::NAME,
                id: id.to_owned(),
                owner: None,
            });
        }
        let mut cause = cause;
        match entries.get(id) {
            Some(entry) if entry.addr.connected() => return Ok(()),
            Some(_) => {
                entries.remove(id);
                KindCounters::bump(&shared.counters.crashes);
                cause = Cause::Restart;
            }
            None => {}
        }
        if entries.len() >= shared.config.live_actors_max {
            return Err(RuntimeError::Saturated { kind: K::NAME });
        }
        let cell = Arc::new(ActorCell::new(K::in_flight_since(&state)));
        let key = env.id.clone();
        let addr = shared.spawn_actor(shared, cell.clone(), env, state)?;
        entries.insert(key, Entry { addr, cell });
        KindCounters::bump(&shared.counters.activations);
        if cause == Cause::Restart {
            KindCounters::bump(&shared.counters.restarts);
        }
        Ok(())
    }
}

/// A registry with its kind erased, for the runtime and the timer service.
pub(crate) trait KindHandle: Send + Sync {
    fn name(&self) -> &'static str;
    fn figures(&self) -> KindFigures;
    fn recover(&self) -> LocalBoxFuture<'_, RuntimeResult<usize>>;
    fn deliver_timer(&self, firing: TimerFiring) -> LocalBoxFuture<'_, RuntimeResult<()>>;
    fn start_supervision(&self) -> RuntimeResult<()>;
    fn shutdown(&self);
    fn recover_slots<'a>(
        &'a self,
        slots: &'a BTreeSet<i32>,
    ) -> LocalBoxFuture<'a, RuntimeResult<usize>>;
    fn halt_slots(&self, slots: &BTreeSet<i32>) -> usize;
    fn take_wake(&self, id: &str) -> RuntimeResult<()>;
}

impl<K: EntityKind> KindHandle for Registry<K> {
    fn name(&self) -> &'static str {
        K::NAME
    }

    fn figures(&self) -> KindFigures {
        Registry::figures(self)
    }

    fn recover(&self) -> LocalBoxFuture<'_, RuntimeResult<usize>> {
        Box::pin(Registry::recover(self))
    }

    fn deliver_timer(&self, firing: TimerFiring) -> LocalBoxFuture<'_, RuntimeResult<()>> {
        Box::pin(Registry::deliver_timer(self, firing))
    }

    fn start_supervision(&self) -> RuntimeResult<()> {
        Registry::start_supervision(self)
    }

    fn shutdown(&self) {
        Registry::shutdown(self)
    }

    fn recover_slots<'a>(
        &'a self,
        slots: &'a BTreeSet<i32>,
    ) -> LocalBoxFuture<'a, RuntimeResult<usize>> {
        Box::pin(Registry::recover_slots(self, Some(slots)))
    }

    fn halt_slots(&self, slots: &BTreeSet<i32>) -> usize {
        Registry::halt_slots(self, slots)
    }

    fn take_wake(&self, id: &str) -> RuntimeResult<()> {
        Registry::take_wake(self, id)
    }
}

//! The actor shell every kind runs in: one actix actor per live entity.
//!
//! It serialises the entity's messages (`AtomicResponse`: the next message
//! waits until the current handler's future, database awaits included, has
//! resolved; `ResponseActFuture` would interleave them and lose updates),
//! reloads from the database after any failed handler, runs follow-up work,
//! and passivates itself when idle.
//!
//! After a failed message the actor resumes the work its reloaded state says
//! is pending, later and later while failures repeat. Work that keeps
//! failing for a reason that will not pass by itself is not retried for
//! ever: the kind is asked once for a message that ends it
//! ([`EntityKind::on_permanent_failure`]), and if there is none, or it fails
//! too, the work stops and the entity is listed stuck, with the reason, in
//! the figures.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use actix::prelude::*;
use chrono::NaiveDateTime;
use tern_schema::TRACE_TARGET;
use tokio::sync::oneshot;
use tracing::{Instrument, Span};

use crate::trace;

use super::error::{Persistence, RuntimeError, RuntimeResult};
use super::figures::{KindCounters, Stopped};
use super::kind::{EntityEnv, EntityKind, Transition};
use super::registry::Shared;

/// How many idle checks run per idle timeout: an idle actor stops between
/// one and 1.25 idle timeouts after its last message.
const IDLE_CHECKS_PER_TIMEOUT: u32 = 4;
/// The idle check never runs more often than this.
const IDLE_CHECK_INTERVAL_MIN: Duration = Duration::from_millis(5);
/// `in_flight_since_micros` value for a terminal entity.
const NOT_IN_FLIGHT: i64 = i64::MIN;
/// How long an actor waits, after a message failed, before it resumes the
/// work its reloaded state says is pending: short enough that a lost
/// provider answer is asked for again soon. It doubles with each failure in
/// a row, up to [`RESUME_AFTER_FAILURE_MAX`], so that a database outage does
/// not become a busy loop over every in-flight entity.
pub const RESUME_AFTER_FAILURE: Duration = Duration::from_secs(1);
pub const RESUME_AFTER_FAILURE_MAX: Duration = Duration::from_secs(60);
/// Failures in a row after which a failure that may or may not pass by
/// itself ([`Persistence::Unknown`]) is taken as one that will not: with
/// the doubling waits, a few minutes of failing.
pub const FAILURES_IN_A_ROW_MAX: u32 = 8;

/// The wait before resuming after `failures` failed messages in a row.
pub fn resume_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    RESUME_AFTER_FAILURE
        .saturating_mul(1 << doublings)
        .min(RESUME_AFTER_FAILURE_MAX)
}

/// What the registry and the actor share about one live actor.
#[derive(Debug)]
pub(crate) struct ActorCell {
    /// Messages admitted and not yet picked up; read under the registry lock
    /// to decide both admission (capacity) and passivation.
    pub queued: AtomicU64,
    /// `EntityKind::in_flight_since` of the current state, in µs since the
    /// epoch, or [`NOT_IN_FLIGHT`].
    in_flight_since_micros: AtomicI64,
    /// Set while the entity's pending work is stopped (see the module doc).
    stopped: Mutex<Option<Stopped>>,
}

impl ActorCell {
    pub fn new(in_flight_since: Option<NaiveDateTime>) -> Self {
        let cell = ActorCell {
            queued: AtomicU64::new(0),
            in_flight_since_micros: AtomicI64::new(NOT_IN_FLIGHT),
            stopped: Mutex::new(None),
        };
        cell.publish(in_flight_since);
        cell
    }

    fn publish(&self, since: Option<NaiveDateTime>) {
        let micros = since.map_or(NOT_IN_FLIGHT, |at| at.and_utc().timestamp_micros());
        self.in_flight_since_micros.store(micros, Ordering::Relaxed);
    }

    pub fn in_flight_since(&self) -> Option<NaiveDateTime> {
        let micros = self.in_flight_since_micros.load(Ordering::Relaxed);
        if micros == NOT_IN_FLIGHT {
            return None;
        }
        chrono::DateTime::from_timestamp_micros(micros).map(|at| at.naive_utc())
    }

    /// Why and since when the entity's work is stopped, if it is.
    pub fn stopped(&self) -> Option<Stopped> {
        self.stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_stopped(&self, stopped: Option<Stopped>) {
        *self.stopped.lock().unwrap_or_else(PoisonError::into_inner) = stopped;
    }
}

/// A message's place in the backlog: taken when its handler starts, given
/// back on drop if it never starts (the actor crashed with it queued), so
/// the backlog figure cannot drift.
pub(crate) struct Ticket {
    cell: Arc<ActorCell>,
    counters: Arc<KindCounters>,
    started: Arc<AtomicBool>,
    open: bool,
}

impl Ticket {
    /// Admits one message; call with the registry lock held.
    pub fn admit(cell: &Arc<ActorCell>, counters: &Arc<KindCounters>) -> Ticket {
        cell.queued.fetch_add(1, Ordering::SeqCst);
        KindCounters::bump(&counters.backlog);
        Ticket {
            cell: cell.clone(),
            counters: counters.clone(),
            started: Arc::new(AtomicBool::new(false)),
            open: true,
        }
    }

    /// Whether a handler picked the message up (so it may have taken effect).
    pub fn started_flag(&self) -> Arc<AtomicBool> {
        self.started.clone()
    }

    fn start(&mut self) {
        self.started.store(true, Ordering::SeqCst);
        self.close();
    }

    fn close(&mut self) {
        if self.open {
            self.open = false;
            let _ = self
                .cell
                .queued
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            KindCounters::drop_one(&self.counters.backlog);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.close();
    }
}

/// Who sent a message, which decides what its failure means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A caller, another entity, a timer: its failure goes back to it.
    Sender,
    /// The actor itself, resuming pending work or carrying a follow-up's
    /// result: the entity's own work, which must not fail for ever.
    Resume,
    /// The actor itself, ending work that failed for good.
    Ending,
}

/// One message for an entity; the reply, if anyone waits, goes back on `reply`.
pub(crate) struct Deliver<K: EntityKind> {
    pub command: K::Command,
    pub reply: Option<oneshot::Sender<RuntimeResult<K::Reply>>>,
    pub ticket: Ticket,
    pub origin: Origin,
    /// The message's span in a trace (disabled unless traces are
    /// exported): a child of the sender's, entered while it is handled.
    pub span: Span,
}

impl<K: EntityKind> Message for Deliver<K> {
    type Result = ();
}

/// A follow-up's result, back at its actor, with the follow-up's span.
pub(crate) struct FollowUpDone<K: EntityKind>(Option<K::Command>, Span);

impl<K: EntityKind> Message for FollowUpDone<K> {
    type Result = ();
}

/// Stops the actor without counting a crash (runtime shutdown).
pub(crate) struct Halt;

impl Message for Halt {
    type Result = ();
}

pub(crate) struct EntityActor<K: EntityKind> {
    shared: Arc<Shared<K>>,
    cell: Arc<ActorCell>,
    env: EntityEnv<K::Context>,
    state: K::State,
    /// A handler's future is in progress.
    busy: bool,
    follow_ups_pending: usize,
    last_active: Instant,
    /// Messages that failed since the last one that succeeded.
    failures_in_a_row: u32,
    /// Why the pending work failed for good, while the kind's message that
    /// ends it is under way.
    ending: Option<String>,
    /// What started the actor, in a trace; taken by the work it resumes.
    started_by: Span,
}

enum Handled<K: EntityKind> {
    Done(Transition<K>),
    /// The handler failed; the state as reloaded from the database.
    Failed(RuntimeError, RuntimeResult<Option<K::State>>),
}

impl<K: EntityKind> EntityActor<K> {
    pub fn new(
        shared: Arc<Shared<K>>,
        cell: Arc<ActorCell>,
        env: EntityEnv<K::Context>,
        state: K::State,
        started_by: Span,
    ) -> Self {
        EntityActor {
            shared,
            cell,
            env,
            state,
            busy: false,
            follow_ups_pending: 0,
            last_active: Instant::now(),
            failures_in_a_row: 0,
            ending: None,
            started_by,
        }
    }

    fn set_state(&mut self, state: K::State) {
        self.cell.publish(K::in_flight_since(&state));
        self.state = state;
    }

    /// Sends a message to itself, counted in the backlog like any other;
    /// in a trace, the message follows on from `cause`.
    fn enqueue_self(
        &mut self,
        command: K::Command,
        origin: Origin,
        cause: &Span,
        ctx: &mut Context<Self>,
    ) {
        let span = self.message_span(cause);
        self.deliver_self(command, origin, span, ctx);
    }

    /// A message's span, continuing `cause`'s trace.
    fn message_span(&self, cause: &Span) -> Span {
        trace::continuing(
            tracing::debug_span!(target: TRACE_TARGET, parent: None, "actor.message", kind = K::NAME, id = %self.env.id),
            cause,
        )
    }

    fn deliver_self(
        &mut self,
        command: K::Command,
        origin: Origin,
        span: Span,
        ctx: &mut Context<Self>,
    ) {
        let ticket = Ticket::admit(&self.cell, &self.shared.counters);
        ctx.notify(Deliver::<K> {
            command,
            reply: None,
            ticket,
            origin,
            span,
        });
    }

    /// Sends a message to itself after `delay`.
    fn enqueue_later(
        &mut self,
        command: K::Command,
        origin: Origin,
        delay: Duration,
        cause: &Span,
        ctx: &mut Context<Self>,
    ) {
        self.follow_ups_pending += 1;
        // Made now, so that the delay holds the new span, not the cause.
        let span = self.message_span(cause);
        ctx.run_later(delay, move |act, ctx| {
            act.follow_ups_pending -= 1;
            act.deliver_self(command, origin, span, ctx);
        });
    }

    /// A message succeeded: the entity moved on if its current work began
    /// anew or ended, which lifts a stop; an ending that moved nothing
    /// leaves the work stopped.
    fn succeeded(&mut self, state: K::State, origin: Origin) {
        let before = K::in_flight_since(&self.state);
        self.failures_in_a_row = 0;
        self.set_state(state);
        let after = K::in_flight_since(&self.state);
        if after.is_none() || after != before {
            self.ending = None;
            self.cell.set_stopped(None);
        } else if origin == Origin::Ending {
            if let Some(reason) = self.ending.take() {
                self.stop(reason);
            }
        }
    }

    fn stop(&mut self, reason: String) {
        tracing::error!(kind = K::NAME, id = %self.env.id, %reason, "pending work failed for good; stopped until an operator looks");
        self.cell.set_stopped(Some(Stopped {
            reason,
            at: tern_schema::types::utc_now(),
        }));
    }

    /// After a failed message, with the state reloaded: resume the pending
    /// work later, or, when the entity's own work failed for a reason that
    /// will not pass, end it through the kind or stop it.
    fn after_failure(
        &mut self,
        error: &RuntimeError,
        origin: Origin,
        cause: &Span,
        ctx: &mut Context<Self>,
    ) {
        // The failed message may have been the only carrier of pending work
        // (a provider's answer): resume from what the database says.
        let Some(resume) = K::on_activate(&self.state) else {
            return;
        };
        if self.cell.stopped().is_some() {
            // Stopped work waits for a message that moves the entity.
            return;
        }
        let for_good = match error.persistence() {
            Persistence::Permanent => true,
            Persistence::Unknown => self.failures_in_a_row >= FAILURES_IN_A_ROW_MAX,
            Persistence::Transient => false,
        };
        let delay = resume_delay(self.failures_in_a_row);
        if !for_good || origin == Origin::Sender {
            // Again later: the work, or its ending if one is under way.
            let next = match &self.ending {
                Some(reason) => {
                    K::on_permanent_failure(&self.state, reason).map(|end| (end, Origin::Ending))
                }
                None => Some((resume, Origin::Resume)),
            };
            match next {
                Some((command, origin)) => self.enqueue_later(command, origin, delay, cause, ctx),
                None => {
                    if let Some(reason) = self.ending.take() {
                        self.stop(reason);
                    }
                }
            }
            return;
        }
        let reason = error.to_string();
        if origin == Origin::Resume && self.ending.is_none() {
            if let Some(end) = K::on_permanent_failure(&self.state, &reason) {
                tracing::warn!(kind = K::NAME, id = %self.env.id, %reason, "pending work failed for good; ending it");
                self.ending = Some(reason);
                self.enqueue_later(end, Origin::Ending, RESUME_AFTER_FAILURE, cause, ctx);
                return;
            }
        }
        self.ending = None;
        self.stop(reason);
    }

    fn finish(
        &mut self,
        handled: Handled<K>,
        reply: Option<oneshot::Sender<RuntimeResult<K::Reply>>>,
        origin: Origin,
        span: &Span,
        ctx: &mut Context<Self>,
    ) {
        self.busy = false;
        self.last_active = Instant::now();
        match handled {
            Handled::Done(transition) => {
                self.succeeded(transition.state, origin);
                for work in transition.follow_ups {
                    self.follow_ups_pending += 1;
                    // A task of its own on the arbiter, not a future of the
                    // actor's context: the context polls its futures only
                    // while no handler is waiting, so a busy actor starved
                    // its own provider calls and deliveries.
                    let addr = ctx.address();
                    let follow_up = trace::continuing(
                        tracing::debug_span!(target: TRACE_TARGET, parent: None, "actor.follow_up", kind = K::NAME),
                        span,
                    );
                    let cause = follow_up.clone();
                    actix::spawn(
                        async move {
                            let command = work.await;
                            addr.do_send(FollowUpDone::<K>(command, cause));
                        }
                        .instrument(follow_up),
                    );
                }
                answer(reply, Ok(transition.reply));
            }
            Handled::Failed(error, reloaded) => {
                self.failures_in_a_row = self.failures_in_a_row.saturating_add(1);
                tracing::warn!(kind = K::NAME, id = %self.env.id, %error, failures_in_a_row = self.failures_in_a_row, "a message failed; state reloaded from the database");
                match reloaded {
                    Ok(Some(state)) => {
                        self.set_state(state);
                        self.after_failure(&error, origin, span, ctx);
                        answer(reply, Err(error));
                    }
                    Ok(None) => {
                        answer(reply, Err(error));
                        tracing::warn!(kind = K::NAME, id = %self.env.id, "entity vanished; stopping its actor");
                        self.shared.forget(&self.env.id, &self.cell);
                        ctx.stop();
                        return;
                    }
                    Err(reload) => {
                        answer(reply, Err(error));
                        // Unknown state in memory: stop, and let the next
                        // message activate the entity from the database.
                        tracing::warn!(kind = K::NAME, id = %self.env.id, error = %reload, "reload failed; stopping");
                        self.shared.forget(&self.env.id, &self.cell);
                        ctx.stop();
                        return;
                    }
                }
            }
        }
        if K::passivates_when_quiet(&self.state) {
            // Terminal: nothing more will happen; free the memory now.
            self.try_passivate(ctx);
        }
    }

    fn try_passivate(&mut self, ctx: &mut Context<Self>) {
        if self.busy || self.follow_ups_pending > 0 {
            return;
        }
        if self.shared.passivate_if_idle(&self.env.id, &self.cell) {
            ctx.stop();
        }
    }

    fn check_idle(&mut self, ctx: &mut Context<Self>) {
        // Stopped work stays in memory, where the figures show it.
        if self.cell.stopped().is_some() {
            return;
        }
        if self.last_active.elapsed() >= self.shared.config.idle_timeout {
            self.try_passivate(ctx);
        }
    }
}

fn answer<R>(reply: Option<oneshot::Sender<RuntimeResult<R>>>, result: RuntimeResult<R>) {
    if let Some(reply) = reply {
        // The caller may have timed out and gone: nothing to do then.
        let _ = reply.send(result);
    }
}

impl<K: EntityKind> Actor for EntityActor<K> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Taken now, kept by nothing after: a span stays open while held.
        let started_by = std::mem::replace(&mut self.started_by, Span::none());
        let every = (self.shared.config.idle_timeout / IDLE_CHECKS_PER_TIMEOUT)
            .max(IDLE_CHECK_INTERVAL_MIN);
        ctx.run_interval(every, Self::check_idle);
        if let Some(command) = K::on_activate(&self.state) {
            self.enqueue_self(command, Origin::Resume, &started_by, ctx);
        }
    }
}

impl<K: EntityKind> Handler<Deliver<K>> for EntityActor<K> {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, message: Deliver<K>, _ctx: &mut Context<Self>) -> Self::Result {
        let Deliver {
            command,
            reply,
            mut ticket,
            origin,
            span,
        } = message;
        let handled_in = span.clone();
        // The state is read when this message's turn comes, not here: actix
        // can call `handle` for a mailbox message and then for a message the
        // actor sent itself before the first one's future has run (the
        // second runs first), so a copy taken here may be stale.
        let work = actix::fut::ready(()).then(move |(), act: &mut Self, _ctx| {
            ticket.start();
            act.busy = true;
            act.last_active = Instant::now();
            let env = act.env.clone();
            let state = act.state.clone();
            async move {
                match K::handle(env.clone(), state, command).await {
                    Ok(transition) => Handled::Done(transition),
                    // Whatever the handler wrote or did not write, memory may
                    // now disagree with the database: take the database's word.
                    Err(error) => Handled::Failed(error, K::load(env).await),
                }
            }
            .instrument(handled_in)
            .into_actor(act)
        });
        AtomicResponse::new(Box::pin(work.map(move |handled, act, ctx| {
            act.finish(handled, reply, origin, &span, ctx)
        })))
    }
}

impl<K: EntityKind> Handler<FollowUpDone<K>> for EntityActor<K> {
    type Result = ();

    fn handle(&mut self, done: FollowUpDone<K>, ctx: &mut Context<Self>) {
        self.follow_ups_pending = self.follow_ups_pending.saturating_sub(1);
        if let Some(command) = done.0 {
            self.enqueue_self(command, Origin::Resume, &done.1, ctx);
        }
    }
}

impl<K: EntityKind> Handler<Halt> for EntityActor<K> {
    type Result = ();

    fn handle(&mut self, _: Halt, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resumption_backs_off_by_doubling_up_to_a_minute() {
        let delays: Vec<u64> = (1..=9).map(|n| resume_delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(resume_delay(u32::MAX), RESUME_AFTER_FAILURE_MAX);
        assert_eq!(
            resume_delay(0),
            RESUME_AFTER_FAILURE,
            "never below the first wait"
        );
    }
}

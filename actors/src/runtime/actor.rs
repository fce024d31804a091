//! The actor shell every kind runs in: one actix actor per live entity.
//!
//! It serialises the entity's messages (`AtomicResponse`: the next message
//! waits until the current handler's future, database awaits included, has
//! resolved; `ResponseActFuture` would interleave them and lose updates),
//! reloads from the database after any failed handler, runs follow-up work,
//! and passivates itself when idle.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use chrono::NaiveDateTime;
use tokio::sync::oneshot;

use super::error::{RuntimeError, RuntimeResult};
use super::figures::KindCounters;
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
}

impl ActorCell {
    pub fn new(in_flight_since: Option<NaiveDateTime>) -> Self {
        let cell = ActorCell {
            queued: AtomicU64::new(0),
            in_flight_since_micros: AtomicI64::new(NOT_IN_FLIGHT),
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

/// One message for an entity; the reply, if anyone waits, goes back on `reply`.
pub(crate) struct Deliver<K: EntityKind> {
    pub command: K::Command,
    pub reply: Option<oneshot::Sender<RuntimeResult<K::Reply>>>,
    pub ticket: Ticket,
}

impl<K: EntityKind> Message for Deliver<K> {
    type Result = ();
}

/// A follow-up's result, back at its actor.
pub(crate) struct FollowUpDone<K: EntityKind>(Option<K::Command>);

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
        }
    }

    fn set_state(&mut self, state: K::State) {
        self.cell.publish(K::in_flight_since(&state));
        self.state = state;
    }

    /// Sends a message to itself, counted in the backlog like any other.
    fn enqueue_self(&mut self, command: K::Command, ctx: &mut Context<Self>) {
        let ticket = Ticket::admit(&self.cell, &self.shared.counters);
        ctx.notify(Deliver::<K> {
            command,
            reply: None,
            ticket,
        });
    }

    fn finish(
        &mut self,
        handled: Handled<K>,
        reply: Option<oneshot::Sender<RuntimeResult<K::Reply>>>,
        ctx: &mut Context<Self>,
    ) {
        self.busy = false;
        self.last_active = Instant::now();
        match handled {
            Handled::Done(transition) => {
                self.failures_in_a_row = 0;
                self.set_state(transition.state);
                for work in transition.follow_ups {
                    self.follow_ups_pending += 1;
                    // A task of its own on the arbiter, not a future of the
                    // actor's context: the context polls its futures only
                    // while no handler is waiting, so a busy actor starved
                    // its own provider calls and deliveries.
                    let addr = ctx.address();
                    actix::spawn(async move {
                        let command = work.await;
                        addr.do_send(FollowUpDone::<K>(command));
                    });
                }
                answer(reply, Ok(transition.reply));
            }
            Handled::Failed(error, reloaded) => {
                self.failures_in_a_row = self.failures_in_a_row.saturating_add(1);
                tracing::warn!(kind = K::NAME, id = %self.env.id, %error, failures_in_a_row = self.failures_in_a_row, "a message failed; state reloaded from the database");
                answer(reply, Err(error));
                match reloaded {
                    Ok(Some(state)) => {
                        self.set_state(state);
                        // The failed message may have been the only carrier
                        // of pending work (a provider's answer): resume from
                        // what the database says, as on activation.
                        if let Some(command) = K::on_activate(&self.state) {
                            self.follow_ups_pending += 1;
                            let delay = resume_delay(self.failures_in_a_row);
                            ctx.run_later(delay, move |act, ctx| {
                                act.follow_ups_pending -= 1;
                                act.enqueue_self(command, ctx);
                            });
                        }
                    }
                    Ok(None) => {
                        tracing::warn!(kind = K::NAME, id = %self.env.id, "entity vanished; stopping its actor");
                        self.shared.forget(&self.env.id, &self.cell);
                        ctx.stop();
                        return;
                    }
                    Err(error) => {
                        // Unknown state in memory: stop, and let the next
                        // message activate the entity from the database.
                        tracing::warn!(kind = K::NAME, id = %self.env.id, %error, "reload failed; stopping");
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
        let every = (self.shared.config.idle_timeout / IDLE_CHECKS_PER_TIMEOUT)
            .max(IDLE_CHECK_INTERVAL_MIN);
        ctx.run_interval(every, Self::check_idle);
        if let Some(command) = K::on_activate(&self.state) {
            self.enqueue_self(command, ctx);
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
        } = message;
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
            .into_actor(act)
        });
        AtomicResponse::new(Box::pin(
            work.map(move |handled, act, ctx| act.finish(handled, reply, ctx)),
        ))
    }
}

impl<K: EntityKind> Handler<FollowUpDone<K>> for EntityActor<K> {
    type Result = ();

    fn handle(&mut self, done: FollowUpDone<K>, ctx: &mut Context<Self>) {
        self.follow_ups_pending = self.follow_ups_pending.saturating_sub(1);
        if let Some(command) = done.0 {
            self.enqueue_self(command, ctx);
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

//! Pending work that keeps failing is not retried for ever: a failure that
//! will not pass by itself ends the entity through its kind, or stops the
//! work and lists the entity stuck, with the reason, in the figures. The
//! "wedge" kind keeps its state in memory; its pending work fails as each
//! test tells it to.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::NaiveDateTime;
use tern_actors::runtime::{
    EntityEnv, EntityKind, KindFigures, Registry, RegistryConfig, RuntimeError, RuntimeResult,
    TimerFiring, Transition, RESUME_AFTER_FAILURE,
};
use tern_schema::testing::TestDatabase;
use tern_schema::types::utc_now;
use tern_schema::{migrate, Db, StoreError};

const WAIT_MAX: Duration = Duration::from_secs(10);
const WAIT_STEP: Duration = Duration::from_millis(10);
/// Longer than the first two resumption delays (1 s, then 2 s): a failure
/// that were retried would have been by then.
const RETRIES_WOULD_HAVE_RUN: Duration = Duration::from_millis(3_500);

#[derive(Clone)]
struct Wedged {
    ended: bool,
    since: NaiveDateTime,
}

enum WedgeCommand {
    /// The pending work: fails as the context says.
    Work,
    /// The kind's ending of work that failed for good.
    End,
}

#[derive(Default)]
struct Counts {
    work: AtomicU32,
    end: AtomicU32,
}

#[derive(Clone)]
struct Behaviour {
    counts: Arc<Counts>,
    since: NaiveDateTime,
    work_fails_with: fn() -> RuntimeError,
    /// `None`: the kind cannot end the work; `Some(None)`: the ending
    /// succeeds; `Some(Some(f))`: it fails with `f()`.
    ending: Option<Option<fn() -> RuntimeError>>,
}

struct Wedge;

impl EntityKind for Wedge {
    const NAME: &'static str = "wedge";
    type State = Wedged;
    type Command = WedgeCommand;
    type Reply = ();
    type Context = Behaviour;

    async fn load(env: EntityEnv<Behaviour>) -> RuntimeResult<Option<Wedged>> {
        Ok(Some(Wedged {
            ended: false,
            since: env.ctx.since,
        }))
    }

    async fn handle(
        env: EntityEnv<Behaviour>,
        state: Wedged,
        command: WedgeCommand,
    ) -> RuntimeResult<Transition<Self>> {
        match command {
            WedgeCommand::Work => {
                env.ctx.counts.work.fetch_add(1, Ordering::SeqCst);
                Err((env.ctx.work_fails_with)())
            }
            WedgeCommand::End => {
                env.ctx.counts.end.fetch_add(1, Ordering::SeqCst);
                match env.ctx.ending {
                    Some(Some(failure)) => Err(failure()),
                    _ => Ok(Transition::new(
                        Wedged {
                            ended: true,
                            ..state
                        },
                        (),
                    )),
                }
            }
        }
    }

    fn in_flight_since(state: &Wedged) -> Option<NaiveDateTime> {
        (!state.ended).then_some(state.since)
    }

    async fn list_in_flight(
        _db: Db,
        _after: Option<String>,
        _limit: i64,
    ) -> RuntimeResult<Vec<String>> {
        Ok(Vec::new())
    }

    fn timer_command(firing: TimerFiring) -> RuntimeResult<WedgeCommand> {
        Err(RuntimeError::InvalidTimer {
            id: firing.id,
            reason: "wedges have no timers".into(),
        })
    }

    fn on_activate(state: &Wedged) -> Option<WedgeCommand> {
        (!state.ended).then_some(WedgeCommand::Work)
    }
}

/// The same kind, but able to end its work (`Behaviour::ending`).
struct EndableWedge;

impl EntityKind for EndableWedge {
    const NAME: &'static str = "endable_wedge";
    type State = Wedged;
    type Command = WedgeCommand;
    type Reply = ();
    type Context = Behaviour;

    async fn load(env: EntityEnv<Behaviour>) -> RuntimeResult<Option<Wedged>> {
        Wedge::load(env).await
    }

    async fn handle(
        env: EntityEnv<Behaviour>,
        state: Wedged,
        command: WedgeCommand,
    ) -> RuntimeResult<Transition<Self>> {
        let done = Wedge::handle(env, state, command).await?;
        Ok(Transition::new(done.state, ()))
    }

    fn in_flight_since(state: &Wedged) -> Option<NaiveDateTime> {
        Wedge::in_flight_since(state)
    }

    async fn list_in_flight(
        db: Db,
        after: Option<String>,
        limit: i64,
    ) -> RuntimeResult<Vec<String>> {
        Wedge::list_in_flight(db, after, limit).await
    }

    fn timer_command(firing: TimerFiring) -> RuntimeResult<WedgeCommand> {
        Wedge::timer_command(firing)
    }

    fn on_activate(state: &Wedged) -> Option<WedgeCommand> {
        Wedge::on_activate(state)
    }

    fn on_permanent_failure(state: &Wedged, _reason: &str) -> Option<WedgeCommand> {
        (!state.ended).then_some(WedgeCommand::End)
    }
}

fn key_taken() -> RuntimeError {
    RuntimeError::Store(StoreError::UniqueViolation(
        "the leg's key is held by another settlement".into(),
    ))
}

fn refused() -> RuntimeError {
    RuntimeError::Refused("the ledger refused the ending".into())
}

fn database_down() -> RuntimeError {
    RuntimeError::Store(StoreError::Unavailable("no connection".into()))
}

fn behaviour(
    work_fails_with: fn() -> RuntimeError,
    ending: Option<Option<fn() -> RuntimeError>>,
) -> Behaviour {
    Behaviour {
        counts: Arc::new(Counts::default()),
        since: utc_now(),
        work_fails_with,
        ending,
    }
}

async fn database() -> (TestDatabase, Db) {
    let test_db = TestDatabase::create().await;
    migrate::run_pending(test_db.url())
        .await
        .expect("migrations apply");
    let db = Db::connect(test_db.url()).await.expect("database connects");
    (test_db, db)
}

fn config() -> RegistryConfig {
    RegistryConfig {
        idle_timeout: Duration::from_secs(30),
        supervise_interval: Duration::from_millis(20),
        ..RegistryConfig::default()
    }
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT_MAX;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(WAIT_STEP).await;
    }
}

fn counts(behaviour: &Behaviour) -> (u32, u32) {
    (
        behaviour.counts.work.load(Ordering::SeqCst),
        behaviour.counts.end.load(Ordering::SeqCst),
    )
}

fn assert_stuck_with(figures: &KindFigures, id: &str, reason: &str) {
    assert_eq!(figures.stuck_count, 1, "{figures:?}");
    let stuck = &figures.stuck_entities[0];
    assert_eq!(stuck.id, id, "{figures:?}");
    assert!(stuck.reason.contains(reason), "{figures:?}");
    assert!(
        stuck.age_ms < u64::try_from(WAIT_MAX.as_millis()).unwrap_or(u64::MAX),
        "since the work stopped, not since it began: {figures:?}"
    );
}

#[actix::test]
async fn work_that_fails_for_good_is_stopped_and_listed_stuck_with_its_reason() {
    let (_test_db, db) = database().await;
    let behaviour = behaviour(key_taken, None);
    let registry = Registry::<Wedge>::new(db, config(), behaviour.clone());
    registry.activate("w1").await.expect("activates");

    eventually("the wedge is listed stuck", || {
        registry.figures().stuck_count == 1
    })
    .await;
    assert_stuck_with(&registry.figures(), "w1", "held by another settlement");
    tokio::time::sleep(RETRIES_WOULD_HAVE_RUN).await;
    assert_eq!(counts(&behaviour), (1, 0), "tried once, never again");
    assert!(registry.is_live("w1"), "kept in memory, where it is shown");
    assert_stuck_with(&registry.figures(), "w1", "held by another settlement");
}

#[actix::test]
async fn the_kind_ends_work_that_fails_for_good() {
    let (_test_db, db) = database().await;
    let behaviour = behaviour(key_taken, Some(None));
    let registry = Registry::<EndableWedge>::new(db, config(), behaviour.clone());
    registry.activate("w1").await.expect("activates");

    eventually("the wedge is ended", || {
        counts(&behaviour).1 == 1 && !registry.is_live("w1")
    })
    .await;
    let figures = registry.figures();
    assert_eq!(figures.stuck_count, 0, "{figures:?}");
    tokio::time::sleep(RESUME_AFTER_FAILURE * 2).await;
    assert_eq!(
        counts(&behaviour),
        (1, 1),
        "ended once, the work never retried"
    );
}

#[actix::test]
async fn an_ending_that_fails_for_good_too_leaves_the_entity_stuck() {
    let (_test_db, db) = database().await;
    let behaviour = behaviour(key_taken, Some(Some(refused)));
    let registry = Registry::<EndableWedge>::new(db, config(), behaviour.clone());
    registry.activate("w1").await.expect("activates");

    eventually("the wedge is listed stuck", || {
        registry.figures().stuck_count == 1
    })
    .await;
    assert_stuck_with(&registry.figures(), "w1", "the ledger refused the ending");
    tokio::time::sleep(RETRIES_WOULD_HAVE_RUN).await;
    assert_eq!(counts(&behaviour), (1, 1), "neither is tried again");
}

#[actix::test]
async fn work_failing_for_a_reason_that_passes_keeps_being_resumed() {
    let (_test_db, db) = database().await;
    let behaviour = behaviour(database_down, Some(None));
    let registry = Registry::<EndableWedge>::new(db, config(), behaviour.clone());
    registry.activate("w1").await.expect("activates");

    eventually("the work is tried again", || counts(&behaviour).0 >= 2).await;
    let figures = registry.figures();
    assert_eq!(
        figures.stuck_count, 0,
        "an outage is no one's fault: {figures:?}"
    );
    assert_eq!(counts(&behaviour).1, 0, "nothing is ended over an outage");
}

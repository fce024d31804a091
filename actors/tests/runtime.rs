//! The actor runtime against a real database (SQLite by default, PostgreSQL
//! when TERN_TEST_DATABASE_URL is set), with a "probe" kind: a counter
//! entity whose table each test creates itself.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use std::time::{Duration, Instant};

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use tern_actors::runtime::version::expect_swapped;
use tern_actors::runtime::{
    EntityEnv, EntityKind, Registry, RegistryConfig, Runtime, RuntimeConfig, RuntimeError,
    RuntimeResult, TimerConfig, TimerFiring, TimerSpec, Transition, Versioned,
};
use tern_schema::store::timers as timer_store;
use tern_schema::testing::TestDatabase;
use tern_schema::types::utc_now;
use tern_schema::{dispatch, migrate, write_tx, Db};

diesel::table! {
    probes (id) {
        id -> Text,
        count -> BigInt,
        fired -> BigInt,
        status -> Text,
        version -> BigInt,
        opened_at -> Timestamp,
    }
}

const PROBES_DDL: &str = "CREATE TABLE probes (
    id TEXT PRIMARY KEY NOT NULL,
    count BIGINT NOT NULL,
    fired BIGINT NOT NULL,
    status TEXT NOT NULL,
    version BIGINT NOT NULL,
    opened_at TIMESTAMP NOT NULL
)";

/// Longest any test waits for an asynchronous effect before failing.
const WAIT_MAX: Duration = Duration::from_secs(10);
const WAIT_STEP: Duration = Duration::from_millis(10);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Probe {
    count: i64,
    fired: i64,
    closed: bool,
    opened_at: NaiveDateTime,
}

enum ProbeCommand {
    Increment,
    Get,
    Close,
    /// Sleeps inside the handler, holding the entity's serialisation; says
    /// when it has started.
    Slow(Duration, Option<tokio::sync::oneshot::Sender<()>>),
    /// Commits `count` to the database, then panics.
    Explode {
        count: i64,
    },
    Timer(TimerFiring),
    /// Answers at once and sends `then` to itself as follow-up work.
    Later(Box<ProbeCommand>),
}

#[derive(Debug, PartialEq, Eq)]
enum ProbeReply {
    Count(i64),
    Done,
}

struct ProbeKind;

async fn persist(
    db: &Db,
    id: &str,
    held: i64,
    next: &Versioned<Probe>,
    timer: Option<&TimerFiring>,
) -> RuntimeResult<()> {
    write_tx!(db, |tx| {
        let status = if next.value.closed { "closed" } else { "open" };
        let rows = dispatch!(tx, c => diesel::update(probes::table.filter(probes::id.eq(id)).filter(probes::version.eq(held)))
            .set((
                probes::count.eq(next.value.count),
                probes::fired.eq(next.value.fired),
                probes::status.eq(status),
                probes::version.eq(next.version),
            ))
            .execute(c)
            .await)?;
        expect_swapped(ProbeKind::NAME, id, rows)?;
        if let Some(firing) = timer {
            // The probe writes in its own transaction; a kind of Tern's
            // completes the timer with its plan (`Plan::completes_timer`).
            if !timer_store::complete(tx, &firing.id, &firing.claim_token).await? {
                return Err(RuntimeError::TimerClaimLost {
                    id: firing.id.clone(),
                });
            }
        }
        Ok::<(), RuntimeError>(())
    })
}

async fn load_probe(db: &Db, id: &str) -> RuntimeResult<Option<Versioned<Probe>>> {
    let mut pooled = db.get().await?;
    let tx = &mut pooled.tx();
    let row: Option<(i64, i64, String, i64, NaiveDateTime)> = dispatch!(tx, c => probes::table
        .find(id)
        .select((probes::count, probes::fired, probes::status, probes::version, probes::opened_at))
        .first(c)
        .await
        .optional())?;
    Ok(
        row.map(|(count, fired, status, version, opened_at)| Versioned {
            value: Probe {
                count,
                fired,
                closed: status == "closed",
                opened_at,
            },
            version,
        }),
    )
}

impl EntityKind for ProbeKind {
    const NAME: &'static str = "probe";
    type State = Versioned<Probe>;
    type Command = ProbeCommand;
    type Reply = ProbeReply;
    type Context = ();

    async fn load(env: EntityEnv<()>) -> RuntimeResult<Option<Self::State>> {
        load_probe(&env.db, &env.id).await
    }

    async fn handle(
        env: EntityEnv<()>,
        state: Self::State,
        command: ProbeCommand,
    ) -> RuntimeResult<Transition<Self>> {
        let mut value = state.value.clone();
        let mut timer = None;
        match command {
            ProbeCommand::Get => {
                return Ok(Transition::new(
                    state.clone(),
                    ProbeReply::Count(state.value.count),
                ))
            }
            ProbeCommand::Slow(duration, started) => {
                if let Some(started) = started {
                    let _ = started.send(());
                }
                tokio::time::sleep(duration).await;
                return Ok(Transition::new(state, ProbeReply::Done));
            }
            ProbeCommand::Explode { count } => {
                let next = state.successor(Probe { count, ..value });
                persist(&env.db, &env.id, state.version, &next, None).await?;
                panic!("probe {} exploded on purpose", env.id);
            }
            ProbeCommand::Later(then) => {
                let then = *then;
                return Ok(Transition::new(state, ProbeReply::Done)
                    .with_follow_up(async move { Some(then) }));
            }
            ProbeCommand::Increment => value.count += 1,
            ProbeCommand::Close => value.closed = true,
            ProbeCommand::Timer(firing) => {
                value.fired += 1;
                timer = Some(firing);
            }
        }
        let next = state.successor(value);
        persist(&env.db, &env.id, state.version, &next, timer.as_ref()).await?;
        let count = next.value.count;
        Ok(Transition::new(next, ProbeReply::Count(count)))
    }

    fn in_flight_since(state: &Self::State) -> Option<NaiveDateTime> {
        (!state.value.closed).then_some(state.value.opened_at)
    }

    async fn list_in_flight(
        db: Db,
        after: Option<String>,
        limit: i64,
    ) -> RuntimeResult<Vec<String>> {
        let mut pooled = db.get().await?;
        let tx = &mut pooled.tx();
        let after = after.unwrap_or_default();
        let ids = dispatch!(tx, c => probes::table
            .filter(probes::status.eq("open"))
            .filter(probes::id.gt(&after))
            .order(probes::id.asc())
            .limit(limit)
            .select(probes::id)
            .load::<String>(c)
            .await)?;
        Ok(ids)
    }

    /// A probe below zero has work pending: one increment per activation.
    fn on_activate(state: &Self::State) -> Option<ProbeCommand> {
        (state.value.count < 0).then_some(ProbeCommand::Increment)
    }

    fn timer_command(firing: TimerFiring) -> RuntimeResult<ProbeCommand> {
        if firing.payload != "fire" {
            return Err(RuntimeError::InvalidTimer {
                id: firing.id,
                reason: "unknown payload".into(),
            });
        }
        Ok(ProbeCommand::Timer(firing))
    }
}

// ---------------------------------------------------------------- helpers

async fn database() -> (TestDatabase, Db) {
    let test_db = TestDatabase::create().await;
    migrate::run_pending(test_db.url())
        .await
        .expect("migrations apply");
    let db = Db::connect(test_db.url()).await.expect("database connects");
    {
        let mut pooled = db.get().await.expect("a connection");
        let tx = &mut pooled.tx();
        dispatch!(tx, c => c.batch_execute(PROBES_DDL).await).expect("probe table");
    }
    (test_db, db)
}

async fn insert_probe(db: &Db, id: &str, count: i64, closed: bool, opened_at: NaiveDateTime) {
    let mut pooled = db.get().await.expect("a connection");
    let tx = &mut pooled.tx();
    dispatch!(tx, c => diesel::insert_into(probes::table)
        .values((
            probes::id.eq(id),
            probes::count.eq(count),
            probes::fired.eq(0_i64),
            probes::status.eq(if closed { "closed" } else { "open" }),
            probes::version.eq(1_i64),
            probes::opened_at.eq(opened_at),
        ))
        .execute(c)
        .await)
    .expect("insert probe");
}

/// (count, fired, version) as stored.
async fn stored(db: &Db, id: &str) -> (i64, i64, i64) {
    let probe = load_probe(db, id)
        .await
        .expect("load")
        .expect("probe exists");
    (probe.value.count, probe.value.fired, probe.version)
}

async fn overwrite_count(db: &Db, id: &str, count: i64) {
    let mut pooled = db.get().await.expect("a connection");
    let tx = &mut pooled.tx();
    dispatch!(tx, c => diesel::update(probes::table.find(id))
        .set((probes::count.eq(count), probes::version.eq(probes::version + 1)))
        .execute(c)
        .await)
    .expect("overwrite");
}

async fn schedule(db: &Db, timer_id: &str, entity_id: &str, due_at: NaiveDateTime) {
    let spec = TimerSpec {
        id: timer_id,
        kind: ProbeKind::NAME,
        entity_id,
        due_at,
        payload: "fire",
    };
    let row = spec.row();
    let scheduled: RuntimeResult<()> = write_tx!(db, |tx| Ok(timer_store::insert(tx, &row).await?));
    scheduled.expect("schedule a timer");
}

async fn timers_left(db: &Db) -> i64 {
    let mut pooled = db.get().await.expect("a connection");
    let mut tx = pooled.tx();
    timer_store::count_for_kind(&mut tx, ProbeKind::NAME)
        .await
        .expect("count timers")
}

/// Short limits so each test runs in well under a second or two.
fn fast_registry() -> RegistryConfig {
    RegistryConfig {
        idle_timeout: Duration::from_secs(30),
        supervise_interval: Duration::from_millis(20),
        call_timeout: Duration::from_secs(10),
        ..RegistryConfig::default()
    }
}

fn fast_runtime(db: &Db, node_id: &str) -> Runtime {
    let timers = TimerConfig {
        poll_interval_ms: 20,
        claim_lease_ms: 10_000,
        retry_delay_ms: 50,
        ..TimerConfig::default()
    };
    Runtime::with_config(
        db.clone(),
        RuntimeConfig {
            node_id: node_id.to_owned(),
            timers,
            cluster: None,
        },
    )
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + WAIT_MAX;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(WAIT_STEP).await;
    }
}

fn hour_ago() -> NaiveDateTime {
    utc_now() - chrono::Duration::hours(1)
}

// ------------------------------------------------------------------ tests

#[actix::test]
async fn an_actor_is_activated_on_demand_from_its_row() {
    let (_test_db, db) = database().await;
    insert_probe(&db, "p1", 7, false, utc_now()).await;
    let registry = Registry::<ProbeKind>::new(db.clone(), fast_registry(), ());
    assert!(!registry.is_live("p1"));

    let reply = registry
        .call("p1", ProbeCommand::Increment)
        .await
        .expect("increment");
    assert_eq!(reply, ProbeReply::Count(8));
    assert!(registry.is_live("p1"));
    assert_eq!(stored(&db, "p1").await, (8, 0, 2));

    let missing = registry.call("nobody", ProbeCommand::Increment).await;
    assert!(
        matches!(missing, Err(RuntimeError::NotFound { kind: "probe", .. })),
        "{missing:?}"
    );
    let figures = registry.figures();
    assert_eq!(
        (
            figures.live_actors,
            figures.activations,
            figures.mailbox_backlog
        ),
        (1, 1, 0)
    );
}

#[actix::test]
async fn concurrent_mutations_of_one_entity_are_serialised() {
    let (_test_db, db) = database().await;
    insert_probe(&db, "p1", 0, false, utc_now()).await;
    let registry = Registry::<ProbeKind>::new(db.clone(), fast_registry(), ());

    let calls = (0..50).map(|_| registry.call("p1", ProbeCommand::Increment));
    let replies = futures_util::future::join_all(calls).await;
    let mut counts: Vec<i64> = replies
        .into_iter()
        .map(|reply| match reply {
            Ok(ProbeReply::Count(count)) => count,
            other => panic!("unexpected reply {other:?}"),
        })
        .collect();
    counts.sort_unstable();
    assert_eq!(
        counts,
        (1..=50).collect::<Vec<_>>(),
        "every increment saw its own predecessor"
    );
    assert_eq!(stored(&db, "p1").await, (50, 0, 51));
    let figures = registry.figures();
    assert_eq!(
        (
            figures.activations,
            figures.mailbox_backlog,
            figures.live_actors
        ),
        (1, 0, 1)
    );
}

#[actix::test]
async fn an_idle_actor_passivates_and_comes_back_from_the_database() {
    let (_test_db, db) = database().await;
    insert_probe(&db, "p1", 0, false, utc_now()).await;
    let config = RegistryConfig {
        idle_timeout: Duration::from_millis(100),
        ..fast_registry()
    };
    let registry = Registry::<ProbeKind>::new(db.clone(), config, ());

    registry
        .call("p1", ProbeCommand::Increment)
        .await
        .expect("increment");
    assert!(registry.is_live("p1"));
    eventually("the idle actor passivates", async || {
        !registry.is_live("p1")
    })
    .await;
    let figures = registry.figures();
    assert_eq!((figures.live_actors, figures.passivations), (0, 1));

    // Changed behind its back while it slept: the next activation reads the row.
    overwrite_count(&db, "p1", 40).await;
    let reply = registry
        .call("p1", ProbeCommand::Increment)
        .await
        .expect("increment after passivation");
    assert_eq!(reply, ProbeReply::Count(41));
    assert_eq!(registry.figures().activations, 2);
}

#[actix::test]
async fn a_crashed_actor_restarts_from_the_database_not_from_memory() {
    let (_test_db, db) = database().await;
    insert_probe(&db, "p1", 5, false, utc_now()).await;
    let registry = Registry::<ProbeKind>::new(db.clone(), fast_registry(), ());
    registry.start_supervision().expect("supervision");

    assert_eq!(
        registry
            .call("p1", ProbeCommand::Increment)
            .await
            .expect("increment"),
        ProbeReply::Count(6)
    );
    let crashed = registry
        .call("p1", ProbeCommand::Explode { count: 1000 })
        .await;
    assert!(
        matches!(crashed, Err(RuntimeError::Crashed { kind: "probe", .. })),
        "{crashed:?}"
    );

    eventually("the crashed actor is restarted", async || {
        registry.is_live("p1")
    })
    .await;
    let figures = registry.figures();
    assert_eq!(
        (figures.crashes, figures.restarts, figures.activations),
        (1, 1, 2)
    );
    // The memory of the dead actor held 6; the database holds 1000.
    assert_eq!(
        registry.call("p1", ProbeCommand::Get).await.expect("get"),
        ProbeReply::Count(1000)
    );
    assert_eq!(
        registry
            .call("p1", ProbeCommand::Increment)
            .await
            .expect("increment"),
        ProbeReply::Count(1001)
    );
    assert_eq!(registry.figures().restarts, 1);
    assert_eq!(registry.figures().mailbox_backlog, 0);
}

#[actix::test]
async fn follow_ups_feed_back_and_supervision_restarts_an_actor_no_one_waits_on() {
    let (_test_db, db) = database().await;
    insert_probe(&db, "p1", 0, false, utc_now()).await;
    let registry = Registry::<ProbeKind>::new(db.clone(), fast_registry(), ());
    registry.start_supervision().expect("supervision");

    let later = ProbeCommand::Later(Box::new(ProbeCommand::Increment));
    assert_eq!(
        registry.call("p1", later).await.expect("later"),
        ProbeReply::Done
    );
    eventually("the follow-up increments", async || {
        stored(&db, "p1").await.0 == 1
    })
    .await;

    // The follow-up panics with no caller waiting: only supervision notices.
    let bomb = ProbeCommand::Later(Box::new(ProbeCommand::Explode { count: 500 }));
    assert_eq!(
        registry.call("p1", bomb).await.expect("later"),
        ProbeReply::Done
    );
    eventually("supervision restarts the actor", async || {
        registry.figures().restarts == 1
    })
    .await;
    assert!(registry.is_live("p1"));
    assert_eq!(registry.figures().crashes, 1);
    assert_eq!(
        registry.call("p1", ProbeCommand::Get).await.expect("get"),
        ProbeReply::Count(500)
    );
}

#[actix::test]
async fn messages_from_outside_and_from_follow_ups_each_see_the_state_before_them() {
    let (_test_db, db) = database().await;
    insert_probe(&db, "p1", 0, false, utc_now()).await;
    let registry = Registry::<ProbeKind>::new(db.clone(), fast_registry(), ());
    // Each message arrives by the mailbox and sends an increment to itself:
    // both paths interleave, and a handler working on a stale copy of the
    // state would lose an increment to a version conflict (it did, before
    // the actor read its state at each message's turn).
    const CALLS: i64 = 200;
    for _ in 0..CALLS {
        registry.tell("p1", ProbeCommand::Later(Box::new(ProbeCommand::Increment)));
    }
    eventually("every follow-up increments", async || {
        stored(&db, "p1").await.0 == CALLS
    })
    .await;
    assert_eq!(stored(&db, "p1").await.0, CALLS);
}

#[actix::test]
async fn a_version_conflict_fails_the_message_and_reloads_the_state() {
    let (_test_db, db) = database().await;
    insert_probe(&db, "p1", 0, false, utc_now()).await;
    let registry = Registry::<ProbeKind>::new(db.clone(), fast_registry(), ());
    registry
        .call("p1", ProbeCommand::Increment)
        .await
        .expect("increment");

    // Another node wins a write: this actor's version is now stale.
    overwrite_count(&db, "p1", 10).await;
    let lost = registry.call("p1", ProbeCommand::Increment).await;
    assert!(
        matches!(lost, Err(RuntimeError::Conflict { kind: "probe", .. })),
        "{lost:?}"
    );
    assert_eq!(
        stored(&db, "p1").await.0,
        10,
        "the losing write changed nothing"
    );
    let retried = registry
        .call("p1", ProbeCommand::Increment)
        .await
        .expect("retry after reload");
    assert_eq!(retried, ProbeReply::Count(11));
}

#[actix::test]
async fn a_failed_message_resumes_pending_work_from_the_database() {
    let (_test_db, db) = database().await;
    insert_probe(&db, "p1", -3, false, utc_now()).await;
    let registry = Registry::<ProbeKind>::new(db.clone(), fast_registry(), ());
    registry
        .call("p1", ProbeCommand::Get)
        .await
        .expect("activate");
    eventually("activation resumed the pending work", async || {
        stored(&db, "p1").await.0 == -2
    })
    .await;

    // The message fails (a lost write); the reloaded state still has work
    // pending, and the actor resumes it without anyone asking.
    overwrite_count(&db, "p1", -5).await;
    let lost = registry.call("p1", ProbeCommand::Get).await;
    assert!(lost.is_ok(), "a read does not write: {lost:?}");
    let lost = registry.call("p1", ProbeCommand::Close).await;
    assert!(
        matches!(lost, Err(RuntimeError::Conflict { .. })),
        "{lost:?}"
    );
    eventually("the failure resumed the pending work", async || {
        stored(&db, "p1").await.0 == -4
    })
    .await;
    assert_eq!(stored(&db, "p1").await.0, -4, "resumed exactly once");
}

#[actix::test]
async fn a_full_mailbox_refuses_with_mailbox_full() {
    let (_test_db, db) = database().await;
    insert_probe(&db, "p1", 0, false, utc_now()).await;
    let config = RegistryConfig {
        mailbox_capacity: 2,
        ..fast_registry()
    };
    let registry = Registry::<ProbeKind>::new(db.clone(), config, ());
    registry.activate("p1").await.expect("activate");

    let slow = Duration::from_millis(300);
    let spawn_slow = |started| {
        let registry = registry.clone();
        actix::spawn(async move { registry.call("p1", ProbeCommand::Slow(slow, started)).await })
    };
    let (started, in_handler) = tokio::sync::oneshot::channel();
    let mut busy = vec![spawn_slow(Some(started))];
    in_handler
        .await
        .expect("the first message reaches its handler");
    busy.push(spawn_slow(None));
    busy.push(spawn_slow(None));
    // One message in the handler, two waiting: the mailbox is at capacity.
    eventually("two messages wait", async || {
        registry.figures().mailbox_backlog == 2
    })
    .await;

    let refused = registry.call("p1", ProbeCommand::Increment).await;
    assert!(
        matches!(
            refused,
            Err(RuntimeError::MailboxFull { kind: "probe", .. })
        ),
        "{refused:?}"
    );
    assert!(
        refused
            .as_ref()
            .err()
            .and_then(RuntimeError::retry_after)
            .is_some(),
        "a 503 with Retry-After"
    );
    assert_eq!(registry.figures().mailbox_full, 1);

    for handle in busy {
        assert_eq!(
            handle.await.expect("task").expect("slow call"),
            ProbeReply::Done
        );
    }
    assert_eq!(
        registry
            .call("p1", ProbeCommand::Increment)
            .await
            .expect("drained"),
        ProbeReply::Count(1)
    );
    assert_eq!(
        stored(&db, "p1").await.0,
        1,
        "the refused increment never ran"
    );
}

#[actix::test]
async fn figures_report_stuck_entities_until_they_finish() {
    let (_test_db, db) = database().await;
    insert_probe(&db, "old", 0, false, hour_ago()).await;
    insert_probe(&db, "new", 0, false, utc_now()).await;
    let runtime = fast_runtime(&db, "node-figures");
    let config = RegistryConfig {
        stuck_after: Duration::from_secs(600),
        ..fast_registry()
    };
    let registry = runtime.register::<ProbeKind>(config, ()).expect("register");
    registry.activate("old").await.expect("activate old");
    registry.activate("new").await.expect("activate new");

    let figures = runtime.figures();
    let probe = &figures.kinds["probe"];
    assert_eq!((probe.live_actors, probe.stuck_count), (2, 1));
    assert_eq!(probe.stuck_entities[0].id, "old", "{probe:?}");
    assert!(probe.oldest_in_flight_ms >= 3_600_000, "{probe:?}");
    assert!(!figures.healthy());
    let json = serde_json::to_value(&figures).expect("figures serialise");
    assert_eq!(json["kinds"]["probe"]["stuck_entities"][0]["id"], "old");

    // A terminal entity leaves memory at once and is no longer stuck.
    registry
        .call("old", ProbeCommand::Close)
        .await
        .expect("close");
    eventually("the closed probe passivates", async || {
        !registry.is_live("old")
    })
    .await;
    let figures = runtime.figures();
    assert_eq!(
        (
            figures.kinds["probe"].live_actors,
            figures.kinds["probe"].stuck_count
        ),
        (1, 0)
    );
    assert!(figures.healthy());
}

#[actix::test]
async fn recovery_after_a_process_restart_reactivates_and_fires_due_timers_once() {
    let (test_db, db) = database().await;
    insert_probe(&db, "open-1", 0, false, hour_ago()).await;
    insert_probe(&db, "open-2", 0, false, utc_now()).await;
    insert_probe(&db, "closed", 0, true, hour_ago()).await;

    // The first process: does some work, schedules a timer, then dies
    // before the timer is due. Its System, actors and pool go with it.
    let url = test_db.url().to_owned();
    std::thread::spawn(move || {
        actix::System::new().block_on(async move {
            let db = Db::connect(&url).await.expect("first process connects");
            let runtime = fast_runtime(&db, "node-first");
            let registry = runtime
                .register::<ProbeKind>(fast_registry(), ())
                .expect("register");
            runtime.recover().await.expect("first recovery");
            registry
                .call("open-1", ProbeCommand::Increment)
                .await
                .expect("increment");
            schedule(
                &db,
                "open-2:fire",
                "open-2",
                utc_now() + chrono::Duration::milliseconds(300),
            )
            .await;
        });
    })
    .join()
    .expect("the first process ran");
    assert_eq!(
        stored(&db, "open-2").await.1,
        0,
        "the timer was not due while the first process lived"
    );

    // The second process on the same database.
    let runtime = fast_runtime(&db, "node-second");
    let registry = runtime
        .register::<ProbeKind>(fast_registry(), ())
        .expect("register");
    assert_eq!(runtime.figures().kinds["probe"].live_actors, 0);
    let report = runtime.recover().await.expect("recovery");
    assert_eq!(report.activated["probe"], 2);
    assert!(registry.is_live("open-1") && registry.is_live("open-2"));
    assert!(
        !registry.is_live("closed"),
        "terminal entities stay in the database"
    );
    assert_eq!(
        registry
            .call("open-1", ProbeCommand::Get)
            .await
            .expect("get"),
        ProbeReply::Count(1)
    );

    eventually("the persisted timer fires", async || {
        stored(&db, "open-2").await.1 == 1
    })
    .await;
    eventually("the fired timer is deleted", async || {
        timers_left(&db).await == 0
    })
    .await;
    // Several more polls: nothing fires twice.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(stored(&db, "open-2").await.1, 1);
    assert_eq!(runtime.figures().timers.delivered, 1);
    runtime.shutdown();
}

#[actix::test]
async fn two_runtimes_on_one_database_fire_each_timer_once() {
    let (_test_db, db) = database().await;
    let probes = 12;
    for n in 0..probes {
        let id = format!("p{n}");
        insert_probe(&db, &id, 0, false, utc_now()).await;
        for t in 0..3 {
            schedule(&db, &format!("{id}:fire:{t}"), &id, utc_now()).await;
        }
    }
    let first = fast_runtime(&db, "node-a");
    let second = fast_runtime(&db, "node-b");
    first
        .register::<ProbeKind>(fast_registry(), ())
        .expect("register a");
    second
        .register::<ProbeKind>(fast_registry(), ())
        .expect("register b");
    let (a, b) = futures_util::join!(first.recover(), second.recover());
    a.expect("recover a");
    b.expect("recover b");

    eventually("every timer is handled", async || {
        timers_left(&db).await == 0
    })
    .await;
    for n in 0..probes {
        assert_eq!(
            stored(&db, &format!("p{n}")).await.1,
            3,
            "p{n} fired each of its timers once"
        );
    }
    // Both nodes hold actors for the same probes: a stale one loses its
    // version check, its timer is released and delivered again later, but
    // each timer is handled exactly once in the end.
    let delivered = || first.figures().timers.delivered + second.figures().timers.delivered;
    eventually("both nodes have counted their deliveries", async || {
        delivered() >= 3 * probes
    })
    .await;
    assert_eq!(delivered(), 3 * probes);
}

#[actix::test]
async fn a_claim_is_exclusive_until_its_lease_expires() {
    let (_test_db, db) = database().await;
    let due = utc_now();
    for n in 0..30 {
        schedule(&db, &format!("t{n:02}"), "p", due).await;
    }
    let kinds = vec![ProbeKind::NAME.to_owned()];
    let now = utc_now();
    let lease_until = now + chrono::Duration::seconds(30);
    let claim = |token: &'static str, now: NaiveDateTime, lease_until: NaiveDateTime| {
        let db = db.clone();
        let kinds = kinds.clone();
        async move {
            let claimed: RuntimeResult<Vec<timer_store::TimerRow>> = write_tx!(db, |tx| {
                Ok(timer_store::claim_due(tx, &kinds, None, now, lease_until, token, 30).await?)
            });
            claimed
                .expect("claim")
                .into_iter()
                .map(|row| row.id)
                .collect::<Vec<_>>()
        }
    };

    let (a, b) = futures_util::join!(claim("a", now, lease_until), claim("b", now, lease_until));
    let mut all: Vec<String> = a.iter().chain(b.iter()).cloned().collect();
    all.sort_unstable();
    let before = all.len();
    all.dedup();
    assert_eq!(before, all.len(), "no timer was claimed by both nodes");
    assert_eq!(all.len(), 30);
    assert!(
        claim("c", now, lease_until).await.is_empty(),
        "leased timers are not claimable"
    );

    // The claimant dies; after its lease the timers move on.
    let later = lease_until + chrono::Duration::seconds(1);
    let taken_over = claim("d", later, later + chrono::Duration::seconds(30)).await;
    assert_eq!(taken_over.len(), 30);
    let first = &all[0];
    let owner = if a.contains(first) { "a" } else { "b" };
    let mut pooled = db.get().await.expect("a connection");
    let tx = &mut pooled.tx();
    assert!(
        !timer_store::complete(tx, first, owner)
            .await
            .expect("complete"),
        "an expired claim cannot complete"
    );
    assert!(timer_store::complete(tx, first, "d")
        .await
        .expect("complete"));
    assert_eq!(
        timer_store::count_for_kind(tx, ProbeKind::NAME)
            .await
            .expect("count"),
        29
    );
}

#[test]
fn both_migration_trees_hold_the_actor_runtime_migration() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    for backend in ["sqlite", "postgres"] {
        for file in ["up.sql", "down.sql"] {
            let path = root
                .join(backend)
                .join("2026-11-22-000002_actor_runtime")
                .join(file);
            assert!(path.is_file(), "{} is missing", path.display());
        }
    }
}

#[actix::test]
async fn recovery_reads_in_flight_entities_page_by_page_and_finds_them_all() {
    let (_test_db, db) = database().await;
    // More than two pages of in-flight entities, closed ones between them.
    let open = 2 * tern_actors::runtime::RECOVERY_PAGE_ROWS as usize + 7;
    for n in 0..open {
        insert_probe(&db, &format!("open-{n:05}"), 0, false, utc_now()).await;
        if n % 100 == 0 {
            insert_probe(&db, &format!("open-{n:05}-closed"), 0, true, utc_now()).await;
        }
    }
    let runtime = fast_runtime(&db, "node-pages");
    let registry = runtime
        .register::<ProbeKind>(fast_registry(), ())
        .expect("register");
    let report = runtime.recover().await.expect("recovery");
    assert_eq!(report.activated["probe"], open);
    assert!(registry.is_live("open-00000") && registry.is_live(&format!("open-{:05}", open - 1)));
    assert!(!registry.is_live("open-00100-closed"));
    runtime.shutdown();
}

//! Several nodes on one PostgreSQL, at the store: a slot is claimed from no
//! owner at the epoch it was seen at, every claim and release raises the
//! epoch, a plan fenced by an epoch that passed writes nothing, and a node
//! claims only the timers of its slots. PostgreSQL only.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use tern_schema::plan::{Plan, PlanError};
use tern_schema::schema::actor_timers;
use tern_schema::store::cluster;
use tern_schema::store::timers::{self, TimerRow};
use tern_schema::testing::TestDatabase;
use tern_schema::types::utc_now;
use tern_schema::{dispatch, write_tx, Db, Fence, StoreError};

mod common;
use common::migrated;

const SLOT: i32 = 5;

/// A timer of an entity in `slot`.
fn timer(id: &str, slot: i32) -> TimerRow {
    TimerRow {
        id: id.into(),
        kind: "settlement".into(),
        entity_id: "m/k".into(),
        due_at: utc_now(),
        payload: "due".into(),
        claim_token: None,
        claimed_until: None,
        attempts: 0,
        created_at: utc_now(),
        slot,
    }
}

fn timer_plan(id: &str, slot: i32) -> Plan {
    Plan {
        timers: vec![timer(id, slot)],
        ..Plan::default()
    }
}

async fn slot_of_timer(db: &Db, id: &str) -> Option<i32> {
    let id = id.to_owned();
    let found: Result<Option<i32>, StoreError> = write_tx!(db, |tx| {
        Ok(dispatch!(tx, conn => actor_timers::table
            .filter(actor_timers::id.eq(&id))
            .select(actor_timers::slot)
            .first(conn)
            .await
            .optional())?)
    });
    found.expect("read")
}

async fn postgres() -> Option<(TestDatabase, Db)> {
    let database = TestDatabase::create_postgres_if_configured().await?;
    let db = migrated(&database).await;
    Some((database, db))
}

#[tokio::test]
async fn a_plan_fenced_by_an_epoch_that_passed_writes_nothing() {
    let Some((_database, db)) = postgres().await else {
        eprintln!("skipped: needs TERN_TEST_DATABASE_URL");
        return;
    };
    let mut pooled = db.get().await.expect("connection");
    let mut tx = pooled.tx();
    // Node a claims the slot from no owner; a claim at a stale epoch loses.
    let won = cluster::claim(&mut tx, "a", &[(SLOT, 0)])
        .await
        .expect("claim");
    assert_eq!(won, [(SLOT, 1)]);
    assert_eq!(
        cluster::claim(&mut tx, "b", &[(SLOT, 0)])
            .await
            .expect("claim"),
        []
    );

    let a = db.fenced(Fence {
        slot: SLOT,
        epoch: 1,
    });
    a.commit(timer_plan("t_a1", SLOT))
        .await
        .expect("a owns the slot");
    assert_eq!(slot_of_timer(&db, "t_a1").await, Some(SLOT));

    // Node b takes the slot over (a is presumed dead): a writes nothing more.
    let won = cluster::claim(&mut tx, "b", &[(SLOT, 1)])
        .await
        .expect("claim");
    assert_eq!(won, [(SLOT, 2)]);
    match a.commit(timer_plan("t_a2", SLOT)).await {
        Err(PlanError::Fenced { slot, epoch }) => assert_eq!((slot, epoch), (SLOT, 1)),
        other => panic!("a former owner wrote: {other:?}"),
    }
    assert_eq!(slot_of_timer(&db, "t_a2").await, None);
    let b = db.fenced(Fence {
        slot: SLOT,
        epoch: 2,
    });
    b.commit(timer_plan("t_b1", SLOT))
        .await
        .expect("b owns the slot");

    // A release by a node that does not hold the slot changes nothing; the
    // owner's release raises the epoch, fencing its own late writes too.
    assert_eq!(
        cluster::release(&mut tx, "a", &[(SLOT, 2)])
            .await
            .expect("release"),
        Vec::<i32>::new()
    );
    assert_eq!(
        cluster::release(&mut tx, "b", &[(SLOT, 2)])
            .await
            .expect("release"),
        [SLOT]
    );
    assert!(matches!(
        b.commit(timer_plan("t_b2", SLOT)).await,
        Err(PlanError::Fenced { .. })
    ));
    let slots = cluster::slots(&mut tx).await.expect("slots");
    let row = slots.iter().find(|row| row.slot == SLOT).expect("slot");
    assert_eq!((row.owner.as_deref(), row.epoch), (None, 3));
}

#[tokio::test]
async fn a_node_claims_only_the_timers_of_its_slots_and_a_takeover_frees_them() {
    let Some((_database, db)) = postgres().await else {
        eprintln!("skipped: needs TERN_TEST_DATABASE_URL");
        return;
    };
    {
        let mut pooled = db.get().await.expect("connection");
        let mut tx = pooled.tx();
        cluster::claim(&mut tx, "a", &[(SLOT, 0), (SLOT + 1, 0)])
            .await
            .expect("claim");
    }
    db.fenced(Fence {
        slot: SLOT,
        epoch: 1,
    })
    .commit(timer_plan("t_5", SLOT))
    .await
    .expect("timer in slot 5");
    db.fenced(Fence {
        slot: SLOT + 1,
        epoch: 1,
    })
    .commit(timer_plan("t_6", SLOT + 1))
    .await
    .expect("timer in slot 6");
    let kinds = vec!["settlement".to_owned()];
    let now = utc_now();
    let lease = now + chrono::TimeDelta::seconds(120);
    let claimed: Result<Vec<TimerRow>, StoreError> = write_tx!(db, |tx| {
        timers::claim_due(tx, &kinds, Some(&[SLOT]), now, lease, "a/1", 10).await
    });
    let claimed = claimed.expect("claim");
    assert_eq!(
        claimed.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["t_5"]
    );
    // Node b takes slot 5 over: a's claim on its timer is freed at once,
    // not after the claim's two-minute lease.
    let mut pooled = db.get().await.expect("connection");
    let mut tx = pooled.tx();
    cluster::claim(&mut tx, "b", &[(SLOT, 1)])
        .await
        .expect("claim");
    assert_eq!(
        cluster::free_timer_claims(&mut tx, &[SLOT])
            .await
            .expect("free"),
        1
    );
    drop(tx);
    drop(pooled);
    let claimed: Result<Vec<TimerRow>, StoreError> = write_tx!(db, |tx| {
        timers::claim_due(tx, &kinds, Some(&[SLOT]), now, lease, "b/1", 10).await
    });
    assert_eq!(claimed.expect("claim").len(), 1);
    // Owning nothing, a node claims nothing.
    let claimed: Result<Vec<TimerRow>, StoreError> = write_tx!(db, |tx| {
        timers::claim_due(tx, &kinds, Some(&[]), now, lease, "c/1", 10).await
    });
    assert!(claimed.expect("claim").is_empty());
}

//! Settlement rows and idempotency records on a real database.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use tern_schema::idempotency::{self, KeyUse};
use tern_schema::models::{SettlementIntent, SettlementRow};
use tern_schema::money::MinorUnits;
use tern_schema::store::settlements;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{AccountId, MerchantId, SettlementKey, SettlementStatus};
use tern_schema::{migrate, write_tx, Db, Plan, PlanError, Refusal, StoreError};

mod common;

/// A migrated database and a merchant: (database, db, merchant id, its
/// USD funding account).
async fn setup() -> (
    tern_schema::testing::TestDatabase,
    Db,
    MerchantId,
    AccountId,
) {
    let (database, db) = common::setup().await;
    let (id, usd) = common::merchant(&db).await;
    (database, db, id, usd)
}

fn settlement(merchant_id: &MerchantId, source: &AccountId, key: &str) -> SettlementRow {
    SettlementRow::pending(
        SettlementIntent {
            merchant_id: merchant_id.clone(),
            idempotency_key: SettlementKey::new(key),
            method: tern_schema::vocabulary::SettlementMethod::CardPush,
            currency: "USD".into(),
            amount_minor: MinorUnits::new(1_000),
            asset: None,
            source: source.to_string(),
            destination: "tok_visa".into(),
            recipient_name: "Ada".into(),
            reference: None,
            request_id: "req".into(),
        },
        utc_now(),
    )
}

#[tokio::test]
async fn versioned_updates_refuse_stale_writers() {
    let (_database, db, merchant, usd) = setup().await;
    let row = settlement(&merchant, &usd, "k1");
    let inserted: Result<(), StoreError> = write_tx!(db, |tx| settlements::insert(tx, &row).await);
    inserted.expect("insert");

    let mut in_flight = row.clone();
    in_flight.status = SettlementStatus::InFlight;
    in_flight.attempt = 1;
    in_flight.version = 2;
    let first: Result<bool, StoreError> =
        write_tx!(db, |tx| settlements::update_if_version(tx, &in_flight, 1)
            .await);
    assert!(first.expect("update"));
    let mut stale = row.clone();
    stale.status = SettlementStatus::Failed;
    stale.version = 2;
    let second: Result<bool, StoreError> =
        write_tx!(db, |tx| settlements::update_if_version(tx, &stale, 1).await);
    assert!(!second.expect("update"), "a writer holding version 1 loses");

    let mut pooled = db.get().await.expect("conn");
    let stored = settlements::find(&mut pooled.tx(), &merchant, &SettlementKey::new("k1"))
        .await
        .expect("find")
        .expect("row");
    assert_eq!(
        (stored.status.as_str(), stored.version, stored.attempt),
        ("in_flight", 2, 1)
    );
    assert_eq!(
        settlements::find(
            &mut pooled.tx(),
            &MerchantId::new("other-merchant"),
            &SettlementKey::new("k1"),
        )
        .await
        .expect("find"),
        None
    );
}

#[tokio::test]
async fn lists_filter_by_status_newest_first_and_recovery_finds_work() {
    let (_database, db, merchant, usd) = setup().await;
    for (key, status) in [
        ("a", SettlementStatus::Succeeded),
        ("b", SettlementStatus::Retrying),
        ("c", SettlementStatus::Failed),
        ("d", SettlementStatus::Pending),
    ] {
        let mut row = settlement(&merchant, &usd, key);
        row.status = status;
        let inserted: Result<(), StoreError> =
            write_tx!(db, |tx| settlements::insert(tx, &row).await);
        inserted.expect("insert");
    }
    let mut pooled = db.get().await.expect("conn");
    let all = settlements::list(&mut pooled.tx(), &merchant, None, 10)
        .await
        .expect("list");
    let keys: Vec<&str> = all.iter().map(|r| r.idempotency_key.as_str()).collect();
    assert_eq!(keys, ["d", "c", "b", "a"]);
    let failed = settlements::list(
        &mut pooled.tx(),
        &merchant,
        Some(SettlementStatus::Failed),
        10,
    )
    .await
    .expect("list");
    assert_eq!(failed.len(), 1);
    let work = settlements::with_work_left(&mut pooled.tx(), ("", ""), 10)
        .await
        .expect("work");
    let keys: Vec<&str> = work.iter().map(|(_, k)| k.as_str()).collect();
    assert_eq!(keys, ["b", "d"]);
}

async fn recorded(db: &Db, merchant: &MerchantId, scope: &str, digest: &str) -> Option<KeyUse> {
    let mut pooled = db.get().await.expect("checkout");
    let tx = &mut pooled.tx();
    idempotency::recorded_use(tx, (merchant, scope, "key-1"), digest)
        .await
        .expect("read the key")
}

fn answering(merchant: &MerchantId, digest: &str) -> Plan {
    Plan {
        answer: Some(idempotency::answered(
            (merchant, "settlements", "key-1"),
            digest,
            201,
            "{\"id\":\"key-1\"}",
        )),
        ..Plan::default()
    }
}

#[tokio::test]
async fn a_key_replays_its_answer_and_refuses_a_different_request() {
    let (_database, db, merchant, _) = setup().await;
    let digest = idempotency::request_digest("{\"amount\":1}");
    assert_eq!(recorded(&db, &merchant, "settlements", &digest).await, None);
    db.commit(answering(&merchant, &digest))
        .await
        .expect("the key's answer");
    assert_eq!(
        recorded(&db, &merchant, "settlements", &digest).await,
        Some(KeyUse::Replay {
            status: 201,
            body: "{\"id\":\"key-1\"}".into()
        })
    );
    let other = idempotency::request_digest("{\"amount\":2}");
    assert_eq!(
        recorded(&db, &merchant, "settlements", &other).await,
        Some(KeyUse::Mismatch)
    );
    // Another scope has its own keys.
    assert_eq!(recorded(&db, &merchant, "transfers", &other).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_answers_of_one_key_yield_one_winner() {
    let (_database, db, merchant, _) = setup().await;
    let digest = idempotency::request_digest("{}");
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let plan = answering(&merchant, &digest);
            let db = db.clone();
            tokio::spawn(async move { db.commit(plan).await })
        })
        .collect();
    let mut winners = 0;
    for task in tasks {
        match task.await.expect("task") {
            Ok(_) => winners += 1,
            Err(PlanError::Store(
                StoreError::Refused(Refusal::KeyTaken) | StoreError::UniqueViolation(_),
            )) => {}
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!(winners, 1);
}

#[derive(diesel::QueryableByName)]
struct PlanLine {
    #[diesel(sql_type = diesel::sql_types::Text, column_name = "QUERY PLAN")]
    line: String,
}

/// On a fresh, never analyzed database, the plans PostgreSQL caches for a
/// settlement's lookup and version-checked update use the primary key (not
/// the listing index, which would walk every settlement of the merchant on
/// each step), and a listing reads the listing index in order, without
/// sorting the merchant's settlements (migration 000009).
#[tokio::test]
async fn fresh_database_plans_use_the_right_settlement_index() {
    use diesel_async::{AsyncConnection, RunQueryDsl, SimpleAsyncConnection};
    let database = tern_schema::testing::TestDatabase::create().await;
    if !database.is_postgres() {
        return;
    }
    migrate::run_pending(database.url())
        .await
        .expect("migrations");
    let mut conn = diesel_async::AsyncPgConnection::establish(database.url())
        .await
        .expect("connect");
    conn.batch_execute(
        "SET plan_cache_mode = force_generic_plan;
         PREPARE find(text, text) AS SELECT * FROM settlements
             WHERE merchant_id = $1 AND idempotency_key = $2 LIMIT 1;
         PREPARE step(text, text, bigint) AS UPDATE settlements SET status = 'failed'
             WHERE merchant_id = $1 AND idempotency_key = $2 AND version = $3;
         PREPARE list(text, text, bigint) AS SELECT * FROM settlements
             WHERE merchant_id = $1 AND created_at IS NOT NULL AND status = $2
             ORDER BY created_at DESC, idempotency_key DESC LIMIT $3;",
    )
    .await
    .expect("prepare");
    for (statement, index) in [
        ("find('m', 'k')", "settlements_pkey"),
        ("step('m', 'k', 1)", "settlements_pkey"),
        ("list('m', 'pending', 10)", "settlements_by_merchant"),
    ] {
        let plan: Vec<PlanLine> = diesel::sql_query(format!("EXPLAIN EXECUTE {statement}"))
            .load(&mut conn)
            .await
            .expect("explain");
        let plan: Vec<String> = plan.into_iter().map(|l| l.line).collect();
        assert!(
            plan.iter().any(|l| l.contains(&format!("using {index}"))),
            "{statement}: {plan:#?}"
        );
        assert!(
            !plan.iter().any(|l| l.contains("Sort")),
            "{statement}: {plan:#?}"
        );
    }
}

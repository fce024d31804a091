//! Plans' rows that move no money (cards, webhook endpoints, quotes): a row
//! write that loses a race its judge never saw fails its own plan alone,
//! and a webhook endpoint's removal is recorded only when there was one.

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use futures_util::future::join_all;
use serde_json::json;
use tern_schema::audit::{self, AuditActor, AuditRecord};
use tern_schema::models::{CardRow, QuoteRow, WebhookEndpointRow};
use tern_schema::money::MinorUnits;
use tern_schema::plan::{Plan, PlanError, RowWrite};
use tern_schema::schema::{audit_events, cards, quotes, webhook_endpoints};
use tern_schema::store::{cards as card_store, merchants, users};
use tern_schema::testing::TestDatabase;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{Asset, MerchantId, Network, QuoteId};
use tern_schema::{dispatch, write_tx, Db, StoreError};

mod common;
use common::{card_row, merchant_row, migrated, user_row};

const MERCHANT: &str = "m_rows";
const CARD: &str = "card_rows";

async fn open_merchant(db: &Db) -> CardRow {
    let merchant = merchant_row(&MerchantId::new(MERCHANT));
    let user = user_row("user_rows", &MerchantId::new(MERCHANT));
    let card = card_row(CARD, &MerchantId::new(MERCHANT), user.id.as_str());
    let stored = card.clone();
    let made: Result<(), StoreError> = write_tx!(db, |tx| {
        merchants::insert(tx, &merchant).await?;
        audit::open_chain(tx, &MerchantId::new(MERCHANT)).await?;
        users::insert(tx, &user).await?;
        card_store::insert(tx, &stored).await
    });
    made.expect("merchant, user and card");
    card
}

fn quote(i: usize) -> Plan {
    let now = utc_now();
    Plan {
        rows: vec![RowWrite::NewQuote(QuoteRow {
            id: QuoteId::new(format!("qt_rows_{i}")),
            merchant_id: MerchantId::new(MERCHANT),
            send_currency: "USD".into(),
            send_amount_minor: MinorUnits::new(1_000),
            receive_asset: Asset::Usdt,
            receive_network: Network::Tron,
            rate: "1".into(),
            platform_fee_minor: MinorUnits::new(10),
            network_fee_minor: MinorUnits::new(5),
            receive_amount_minor: MinorUnits::new(9_850_000),
            request_id: format!("req_{i}"),
            created_at: now,
            expires_at: now + chrono::TimeDelta::seconds(60),
        })],
        ..Plan::default()
    }
}

fn renamed(card: &CardRow, name: &str, expected_version: i64) -> Plan {
    let mut row = card.clone();
    row.display_name = Some(name.into());
    row.version = expected_version + 1;
    Plan {
        rows: vec![RowWrite::Card {
            row,
            expected_version,
        }],
        ..Plan::default()
    }
}

async fn count_quotes(db: &Db) -> i64 {
    let mut pooled = db.get().await.expect("checkout");
    let tx = &mut pooled.tx();
    dispatch!(tx, conn => quotes::table
        .filter(quotes::merchant_id.eq(MERCHANT))
        .count()
        .get_result::<i64>(conn)
        .await)
    .expect("count quotes")
}

/// The judge reads no card: a card written over a version another writer
/// moved fails the batch's statement. The batch is written again in
/// halves until that plan alone hears the conflict; every quote beside it
/// is written, and so is the card write that held the right version.
#[tokio::test]
async fn a_card_written_over_a_moved_version_fails_alone() {
    let database = TestDatabase::create().await;
    let db = migrated(&database).await;
    let card = open_merchant(&db).await;
    for round in 0..3_usize {
        let version = 1 + i64::try_from(round).expect("small");
        let mut plans: Vec<Plan> = (0..30).map(|i| quote(round * 100 + i)).collect();
        plans[11] = renamed(&card, "stale", version - 1);
        plans[23] = renamed(&card, &format!("round {round}"), version);
        let outcomes = join_all(plans.into_iter().map(|plan| db.commit(plan))).await;
        for (i, outcome) in outcomes.into_iter().enumerate() {
            match (i, outcome) {
                (11, Err(PlanError::Store(StoreError::Conflict(_)))) => {}
                (11, other) => panic!("round {round}: the stale write answered {other:?}"),
                (_, Ok(_)) => {}
                (_, Err(error)) => panic!("round {round}: plan {i} failed beside it: {error}"),
            }
        }
    }
    assert_eq!(count_quotes(&db).await, 3 * 28);
    let mut pooled = db.get().await.expect("checkout");
    let tx = &mut pooled.tx();
    let (name, version) = dispatch!(tx, conn => cards::table
        .find(CARD)
        .select((cards::display_name, cards::version))
        .get_result::<(Option<String>, i64)>(conn)
        .await)
    .expect("the card");
    assert_eq!((name.as_deref(), version), (Some("round 2"), 4));
}

fn removal() -> Plan {
    Plan {
        rows: vec![
            RowWrite::WebhookEndpointRemoved {
                merchant_id: MerchantId::new(MERCHANT),
                audit: AuditRecord {
                    merchant_id: MerchantId::new(MERCHANT),
                    actor: AuditActor::System,
                    action: "webhook_endpoint.deleted",
                    resource_type: "webhook_endpoint",
                    resource_id: MERCHANT.into(),
                    request_id: "req".into(),
                    data: json!({}),
                },
            },
            RowWrite::PendingEventsSkipped {
                merchant_id: MerchantId::new(MERCHANT),
                at: utc_now(),
            },
        ],
        ..Plan::default()
    }
}

async fn deletions_recorded(db: &Db) -> i64 {
    let mut pooled = db.get().await.expect("checkout");
    let tx = &mut pooled.tx();
    dispatch!(tx, conn => audit_events::table
        .filter(audit_events::merchant_id.eq(MERCHANT))
        .filter(audit_events::action.eq("webhook_endpoint.deleted"))
        .count()
        .get_result::<i64>(conn)
        .await)
    .expect("count audit events")
}

/// A removal is written whatever its writer last read (another node may
/// have stored an endpoint since), and audited only when it removed one.
#[tokio::test]
async fn a_webhook_endpoint_removal_is_audited_only_when_there_was_one() {
    let database = TestDatabase::create().await;
    let db = migrated(&database).await;
    open_merchant(&db).await;
    db.commit(removal()).await.expect("removing nothing");
    assert_eq!(deletions_recorded(&db).await, 0);

    let now = utc_now();
    let stored = Plan {
        rows: vec![RowWrite::WebhookEndpoint(WebhookEndpointRow {
            merchant_id: MerchantId::new(MERCHANT),
            url: "https://example.com/hooks".into(),
            secret: "whsec_0123456789abcdefghijklmnop".into(),
            created_at: now,
            updated_at: now,
        })],
        ..Plan::default()
    };
    db.commit(stored).await.expect("storing the endpoint");
    db.commit(removal()).await.expect("removing it");
    assert_eq!(deletions_recorded(&db).await, 1);
    let mut pooled = db.get().await.expect("checkout");
    let tx = &mut pooled.tx();
    let left = dispatch!(tx, conn => webhook_endpoints::table
        .count()
        .get_result::<i64>(conn)
        .await)
    .expect("count endpoints");
    assert_eq!(left, 0);
}

/// An endpoint whose signing secret is too short for the schema's CHECK.
fn refused_endpoint() -> Plan {
    let now = utc_now();
    Plan {
        rows: vec![RowWrite::WebhookEndpoint(WebhookEndpointRow {
            merchant_id: MerchantId::new(MERCHANT),
            url: "https://example.com/hooks".into(),
            secret: "short".into(),
            created_at: now,
            updated_at: now,
        })],
        ..Plan::default()
    }
}

/// The judge does not repeat the schema's constraints: a row the schema
/// refuses (here a signing secret too short for its CHECK) fails the
/// batch, which is written again in halves until that plan alone fails.
#[tokio::test]
async fn a_row_the_schema_refuses_fails_its_plan_alone() {
    let database = TestDatabase::create().await;
    let db = migrated(&database).await;
    open_merchant(&db).await;
    let mut plans: Vec<Plan> = (0..30).map(quote).collect();
    plans[7] = refused_endpoint();
    let outcomes = join_all(plans.into_iter().map(|plan| db.commit(plan))).await;
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match (i, outcome) {
            // Its own error, not "unavailable, retry": no retry mends it.
            (7, Err(PlanError::Store(StoreError::Query(_)))) => {}
            (7, other) => panic!("the refused row answered {other:?}"),
            (_, Ok(_)) => {}
            (_, Err(error)) => panic!("plan {i} failed beside it: {error}"),
        }
    }
    assert_eq!(count_quotes(&db).await, 29);
}

/// A failure every plan of a batch shares (as a constraint a migration got
/// wrong would be) is not split down to single plans, which would cost
/// twice as many transactions as the batch has plans: after a few splits
/// the plans left hear "unavailable".
#[tokio::test]
async fn a_failure_every_plan_shares_stops_splitting() {
    let database = TestDatabase::create().await;
    let db = migrated(&database).await;
    open_merchant(&db).await;
    // Plans sent at once share a batch unless the committer wakes between
    // them: a few rounds make a batch of many all but certain.
    let mut unavailable = 0;
    for _ in 0..3 {
        let outcomes = join_all((0..64).map(|_| db.commit(refused_endpoint()))).await;
        for outcome in outcomes {
            match outcome {
                Err(PlanError::Store(StoreError::Unavailable(_))) => unavailable += 1,
                Err(PlanError::Store(StoreError::Query(_))) => {}
                other => panic!("a refused endpoint answered {other:?}"),
            }
        }
    }
    assert!(unavailable > 0, "every plan was split down to itself");
}

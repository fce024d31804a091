//! The settlement actor against a real database (SQLite by default,
//! PostgreSQL when TERN_TEST_DATABASE_URL is set) and fake providers: the
//! on-session 3DS challenge of a transfer's card_charge leg, which no HTTP
//! path can create yet (only transfers make legs).

// Always true here (cargo builds integration tests with --test); it tells
// clippy that the helpers are test code, which clippy.toml lets panic.
#![cfg(test)]

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tern_actors::ports::{
    CardAcquirer, CardPush, ChargeOutcome, ChargeRequest, Custodian, Network, PayoutOutcome,
    PayoutRequest, ProviderError, PushOutcome, PushRequest, RefundOutcome, RefundRequest,
    ReversalOutcome, ReversalRequest, NEXT_ACTION_REDIRECT_TO_URL,
};
use tern_actors::runtime::{Registry, RegistryConfig, Runtime, RuntimeConfig, TimerConfig};
use tern_actors::settlement::machine::RetryPolicy;
use tern_actors::settlement::record::entity_id;
use tern_actors::settlement::{
    LegObserver, Parents, Providers, SettlementCommand, SettlementContext, SettlementKind,
};
use tern_schema::models::{MerchantRow, SettlementIntent, SettlementRow};
use tern_schema::money::MinorUnits;
use tern_schema::store::{ledger as ledger_store, merchants, settlements, timers};
use tern_schema::testing::TestDatabase;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{MerchantId, SettlementKey, SettlementStatus, TransferId};
use tern_schema::{audit, ledger, migrate, write_tx, Db, StoreError};

/// Longest any test waits for an asynchronous effect before failing.
const WAIT_MAX: Duration = Duration::from_secs(10);
const WAIT_STEP: Duration = Duration::from_millis(10);
const CLIENT_SECRET: &str = "ch_1_secret_abc";

/// What the payer did with the challenge, as the fake acquirer reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Payer {
    Away,
    Approved,
}

/// A card acquirer whose every charge needs a challenge, like the sandbox's
/// `pm_card_threeDSecureRequired`.
struct ChallengingAcquirer {
    payer: Mutex<Payer>,
    charges: Mutex<Vec<ChargeRequest>>,
}

impl ChallengingAcquirer {
    fn new() -> Arc<ChallengingAcquirer> {
        Arc::new(ChallengingAcquirer {
            payer: Mutex::new(Payer::Away),
            charges: Mutex::new(Vec::new()),
        })
    }

    fn outcome(&self) -> ChargeOutcome {
        match *self.payer.lock().unwrap_or_else(PoisonError::into_inner) {
            Payer::Away => ChargeOutcome::RequiresAction {
                charge_id: "ch_1".into(),
                client_secret: CLIENT_SECRET.into(),
                next_action_type: NEXT_ACTION_REDIRECT_TO_URL.into(),
                redirect_url: Some(format!("http://sandbox/3ds/{CLIENT_SECRET}")),
            },
            Payer::Approved => ChargeOutcome::Succeeded {
                charge_id: "ch_1".into(),
            },
        }
    }

    fn approve(&self) {
        *self.payer.lock().unwrap_or_else(PoisonError::into_inner) = Payer::Approved;
    }

    fn off_session_flags(&self) -> Vec<bool> {
        self.charges
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|charge| charge.off_session)
            .collect()
    }
}

fn not_here() -> ProviderError {
    ProviderError::Permanent {
        status: 400,
        code: "not_in_this_test".into(),
        message: "this fake serves charges only".into(),
    }
}

#[async_trait]
impl CardAcquirer for ChallengingAcquirer {
    async fn charge(&self, request: &ChargeRequest) -> Result<ChargeOutcome, ProviderError> {
        self.charges
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.clone());
        Ok(self.outcome())
    }

    async fn refund(&self, _: &RefundRequest) -> Result<RefundOutcome, ProviderError> {
        Err(not_here())
    }

    async fn lookup_charge(&self, _: &str) -> Result<Option<ChargeOutcome>, ProviderError> {
        Ok(Some(self.outcome()))
    }

    async fn lookup_refund(&self, _: &str) -> Result<Option<RefundOutcome>, ProviderError> {
        Err(not_here())
    }
}

struct NoPush;

#[async_trait]
impl CardPush for NoPush {
    async fn push(&self, _: &PushRequest) -> Result<PushOutcome, ProviderError> {
        Err(not_here())
    }
    async fn reverse(&self, _: &ReversalRequest) -> Result<ReversalOutcome, ProviderError> {
        Err(not_here())
    }
    async fn inquiry(&self, _: &str) -> Result<Option<PushOutcome>, ProviderError> {
        Err(not_here())
    }
    async fn reversal_inquiry(&self, _: &str) -> Result<Option<ReversalOutcome>, ProviderError> {
        Err(not_here())
    }
}

struct NoCustodian;

#[async_trait]
impl Custodian for NoCustodian {
    async fn payout(&self, _: &PayoutRequest) -> Result<PayoutOutcome, ProviderError> {
        Err(not_here())
    }
    async fn payout_status(
        &self,
        _: Network,
        _: &str,
    ) -> Result<Option<PayoutOutcome>, ProviderError> {
        Err(not_here())
    }
}

/// What the transfer sees of one move: (status, client_secret, next_action_type).
type Move = (String, Option<String>, Option<String>);

/// The transfer's view of its leg, one entry per move.
#[derive(Default)]
struct Moves(Mutex<Vec<Move>>);

impl LegObserver for Moves {
    fn leg_moved(&self, row: &SettlementRow) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push((
            row.status.to_string(),
            row.client_secret.clone(),
            row.next_action_type.clone(),
        ));
    }
}

impl Moves {
    fn seen(&self) -> Vec<Move> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The moves once `count` have arrived: a leg tells its parent after its
    /// row commits, without waiting, so a test that saw the row may run
    /// ahead of the telling.
    async fn at_least(&self, count: usize) -> Vec<Move> {
        let started = std::time::Instant::now();
        while self.seen().len() < count && started.elapsed() < std::time::Duration::from_secs(5) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        self.seen()
    }
}

struct World {
    _test_db: TestDatabase,
    db: Db,
    runtime: Runtime,
    registry: Registry<SettlementKind>,
    acquirer: Arc<ChallengingAcquirer>,
    moves: Arc<Moves>,
    merchant_id: MerchantId,
}

async fn world(challenge_ttl: chrono::Duration) -> World {
    let test_db = TestDatabase::create().await;
    migrate::run_pending(test_db.url())
        .await
        .expect("migrations apply");
    let db = Db::connect(test_db.url()).await.expect("database connects");
    let merchant_id = MerchantId::generate();
    let merchant = MerchantRow {
        id: merchant_id.clone(),
        organization_name: "Acme".into(),
        status: tern_schema::vocabulary::MerchantStatus::Active,
        created_at: utc_now(),
        updated_at: utc_now(),
    };
    let opened: Result<(), StoreError> = write_tx!(db, |tx| {
        merchants::insert(tx, &merchant).await?;
        audit::open_chain(tx, &merchant.id).await?;
        ledger::open_funding_accounts(tx, &merchant.id)
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        Ok(())
    });
    opened.expect("a merchant with funding accounts");
    let acquirer = ChallengingAcquirer::new();
    let moves = Arc::new(Moves::default());
    let parents = Parents::default();
    assert!(parents.set(moves.clone()));
    let context = SettlementContext {
        providers: Providers {
            acquirer: acquirer.clone(),
            card_push: Arc::new(NoPush),
            custodian: Arc::new(NoCustodian),
            pending_poll: chrono::Duration::seconds(1),
        },
        policy: RetryPolicy {
            delays: vec![chrono::Duration::milliseconds(50)],
            challenge_ttl,
        },
        parents,
    };
    let runtime = Runtime::with_config(
        db.clone(),
        RuntimeConfig {
            node_id: "settlement-test".into(),
            timers: TimerConfig {
                poll_interval_ms: 20,
                claim_lease_ms: 10_000,
                retry_delay_ms: 50,
                ..TimerConfig::default()
            },
            cluster: None,
        },
    );
    let registry = runtime
        .register::<SettlementKind>(RegistryConfig::default(), context)
        .expect("register settlements");
    runtime.recover().await.expect("timers run");
    World {
        _test_db: test_db,
        db,
        runtime,
        registry,
        acquirer,
        moves,
        merchant_id,
    }
}

impl World {
    /// A card_charge of 100 USD cents; a transfer's leg when `transfer_id`.
    async fn charge(&self, key: &str, transfer_id: Option<&str>) -> String {
        let mut pooled = self.db.get().await.expect("a connection");
        let accounts = ledger_store::merchant_accounts(&mut pooled.tx(), &self.merchant_id)
            .await
            .expect("accounts");
        drop(pooled);
        let source = accounts
            .iter()
            .find(|account| account.currency == "USD")
            .expect("a USD funding account")
            .id
            .clone();
        let mut row = SettlementRow::pending(
            SettlementIntent {
                merchant_id: self.merchant_id.clone(),
                idempotency_key: SettlementKey::new(key),
                method: tern_schema::vocabulary::SettlementMethod::CardCharge,
                currency: "USD".into(),
                amount_minor: MinorUnits::new(100),
                asset: None,
                source: source.into_inner(),
                destination: "pm_card_threeDSecureRequired".into(),
                recipient_name: "Ada Lovelace".into(),
                reference: None,
                request_id: "req_test".into(),
            },
            utc_now(),
        );
        row.transfer_id = transfer_id.map(TransferId::new);
        let inserted: Result<(), StoreError> =
            write_tx!(self.db, |tx| settlements::insert(tx, &row).await);
        inserted.expect("insert the settlement");
        let id = entity_id(&self.merchant_id, &SettlementKey::new(key));
        self.registry
            .call(&id, SettlementCommand::Start)
            .await
            .expect("start");
        id
    }

    async fn row(&self, key: &str) -> SettlementRow {
        let mut pooled = self.db.get().await.expect("a connection");
        let mut tx = pooled.tx();
        settlements::find(&mut tx, &self.merchant_id, &SettlementKey::new(key))
            .await
            .expect("read")
            .expect("the settlement exists")
    }

    async fn until(&self, key: &str, what: &str, check: impl Fn(&SettlementRow) -> bool) {
        let deadline = Instant::now() + WAIT_MAX;
        loop {
            let row = self.row(key).await;
            if check(&row) {
                return;
            }
            assert!(Instant::now() < deadline, "timed out until {what}: {row:?}");
            tokio::time::sleep(WAIT_STEP).await;
        }
    }

    async fn timers_left(&self) -> i64 {
        let mut pooled = self.db.get().await.expect("a connection");
        let mut tx = pooled.tx();
        timers::count_for_kind(&mut tx, "settlement")
            .await
            .expect("count timers")
    }
}

fn moved(status: &str, secret: bool, open: bool) -> Move {
    (
        status.to_owned(),
        secret.then(|| CLIENT_SECRET.to_owned()),
        open.then(|| NEXT_ACTION_REDIRECT_TO_URL.to_owned()),
    )
}

#[actix::test]
async fn an_unfinished_challenge_expires_and_fails_the_leg() {
    let world = world(chrono::Duration::milliseconds(300)).await;
    world.charge("leg1", Some("tr_1")).await;
    world
        .until("leg1", "the challenge opens", |row| {
            row.next_action_type.is_some()
        })
        .await;
    let open = world.row("leg1").await;
    assert_eq!(open.status, SettlementStatus::InFlight);
    assert_eq!(open.client_secret.as_deref(), Some(CLIENT_SECRET));
    assert!(open.next_attempt_at.is_some(), "the deadline is the timer");

    world
        .until("leg1", "the deadline fails it", |row| {
            row.status == SettlementStatus::Failed
        })
        .await;
    let failed = world.row("leg1").await;
    assert_eq!(failed.failure_reason.as_deref(), Some("challenge_expired"));
    assert_eq!(failed.client_secret.as_deref(), Some(CLIENT_SECRET));
    assert_eq!(failed.next_action_type, None);
    assert_eq!(failed.next_attempt_at, None);
    assert_eq!(
        world.acquirer.off_session_flags(),
        vec![false],
        "on-session, sent once"
    );
    assert_eq!(
        world.moves.at_least(3).await,
        vec![
            moved("in_flight", false, false),
            moved("in_flight", true, true),
            moved("failed", true, false),
        ]
    );
    // The deadline's timer was completed by the transition it caused.
    assert_eq!(world.timers_left().await, 0);
    world.runtime.shutdown();
}

#[actix::test]
async fn a_nudge_after_the_payer_approves_settles_the_leg() {
    let world = world(chrono::Duration::minutes(15)).await;
    let id = world.charge("leg1", Some("tr_1")).await;
    world
        .until("leg1", "the challenge opens", |row| {
            row.next_action_type.is_some()
        })
        .await;
    // A nudge before the payer finished changes nothing.
    world
        .registry
        .call(&id, SettlementCommand::Nudge)
        .await
        .expect("nudge");
    world.acquirer.approve();
    world
        .registry
        .call(&id, SettlementCommand::Nudge)
        .await
        .expect("nudge");
    world
        .until("leg1", "the charge succeeds", |row| {
            row.status == SettlementStatus::Succeeded
        })
        .await;
    let succeeded = world.row("leg1").await;
    assert_eq!(succeeded.provider_id.as_deref(), Some("ch_1"));
    assert_eq!(succeeded.client_secret.as_deref(), Some(CLIENT_SECRET));
    assert_eq!(succeeded.next_action_type, None);
    assert!(succeeded.ledger_transaction_id.is_some(), "funds credited");
    assert_eq!(
        world.moves.at_least(3).await,
        vec![
            moved("in_flight", false, false),
            moved("in_flight", true, true),
            moved("succeeded", true, false),
        ]
    );
    world.runtime.shutdown();
}

#[actix::test]
async fn a_direct_charge_is_off_session_and_needs_no_parent() {
    let world = world(chrono::Duration::minutes(15)).await;
    world.charge("direct", None).await;
    world
        .until("direct", "the charge fails", |row| {
            row.status == SettlementStatus::Failed
        })
        .await;
    let failed = world.row("direct").await;
    assert_eq!(
        failed.failure_reason.as_deref(),
        Some("authentication_required")
    );
    assert_eq!(failed.client_secret, None);
    assert_eq!(world.acquirer.off_session_flags(), vec![true]);
    assert!(world.moves.seen().is_empty(), "not a leg: no parent told");
    world.runtime.shutdown();
}

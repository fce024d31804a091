//! What the ledger tests share: a migrated database of their own, a
//! merchant with its funding accounts, and short ways to move and read money.

#![allow(dead_code, reason = "each test binary uses some of these")]

use tern_schema::ledger::{self, Direction, Entry, LedgerError, Line, Phase, SystemAccount};
use tern_schema::models::{CardRow, LedgerAccountRow, MerchantRow, UserRow};
use tern_schema::money::MinorUnits;
use tern_schema::store::{ledger as store, merchants};
use tern_schema::testing::TestDatabase;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{AccountId, CardId, MerchantId, UserId, UserStatus};
use tern_schema::{migrate, write_tx, Db};

pub async fn setup() -> (TestDatabase, Db) {
    let database = TestDatabase::create().await;
    let db = migrated(&database).await;
    (database, db)
}

/// `database` migrated, and a handle on it.
pub async fn migrated(database: &TestDatabase) -> Db {
    migrate::run_pending(database.url())
        .await
        .expect("migrations");
    Db::connect(database.url()).await.expect("connect")
}

/// A small deterministic generator, so that a failing random sequence can
/// be run again from its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A merchant with its funding accounts; answers (merchant id, USD account id).
pub async fn merchant(db: &Db) -> (MerchantId, AccountId) {
    let id = MerchantId::generate();
    let row = merchant_row(&id);
    let made: Result<(), LedgerError> = write_tx!(db, |tx| {
        merchants::insert(tx, &row).await?;
        ledger::open_funding_accounts(tx, &row.id).await
    });
    made.expect("merchant");
    let mut pooled = db.get().await.expect("conn");
    let accounts = store::merchant_accounts(&mut pooled.tx(), &id)
        .await
        .expect("accounts");
    assert_eq!(accounts.len(), 4, "one funding account per fiat currency");
    let usd = accounts
        .into_iter()
        .find(|a| a.currency == "USD")
        .expect("usd account");
    (id, usd.id)
}

/// A merchant with its audit chain opened; answers its id.
pub async fn merchant_with_chain(db: &Db) -> MerchantId {
    let row = merchant_row(&MerchantId::generate());
    let made: Result<(), tern_schema::StoreError> = write_tx!(db, |tx| {
        merchants::insert(tx, &row).await?;
        tern_schema::audit::open_chain(tx, &row.id).await
    });
    made.expect("merchant");
    row.id
}

/// An active merchant's row.
pub fn merchant_row(id: &MerchantId) -> MerchantRow {
    let now = utc_now();
    MerchantRow {
        id: id.clone(),
        organization_name: "M".into(),
        status: tern_schema::vocabulary::MerchantStatus::Active,
        created_at: now,
        updated_at: now,
    }
}

/// An active, verified-less user's row.
pub fn user_row(id: &str, merchant_id: &MerchantId) -> UserRow {
    let now = utc_now();
    UserRow {
        id: UserId::new(id),
        merchant_id: merchant_id.clone(),
        email: "ada@example.com".into(),
        name: "Ada".into(),
        password_hash: "x".into(),
        status: UserStatus::Active,
        email_verified_at: None,
        created_at: now,
        updated_at: now,
    }
}

/// An issued, active USD card's row at version 1, without limits.
pub fn card_row(id: &str, merchant_id: &MerchantId, user_id: &str) -> CardRow {
    let now = utc_now();
    CardRow {
        id: CardId::new(id),
        merchant_id: merchant_id.clone(),
        user_id: UserId::new(user_id),
        program_id: "prog".into(),
        card_type: tern_schema::vocabulary::CardType::Virtual,
        status: tern_schema::vocabulary::CardStatus::Active,
        network: tern_schema::vocabulary::CardNetwork::Visa,
        currency: "USD".into(),
        cardholder: "Ada".into(),
        display_name: None,
        card_art: "default".into(),
        theme: "dark".into(),
        provider_card_id: Some("pc_1".into()),
        last_four: Some("4242".into()),
        expiry_month: Some(12),
        expiry_year: Some(2030),
        wallet_status: tern_schema::vocabulary::WalletStatus::None,
        limits: tern_schema::models::CardLimits::OPEN,
        replaces_card_id: None,
        replaces_status: None,
        replaced_by_card_id: None,
        request_id: "req".into(),
        version: 1,
        created_at: now,
        updated_at: now,
        closed_at: None,
        limits_set: String::new(),
    }
}

pub fn lines(debit: &AccountId, credit: &AccountId, amount_minor: i64) -> Vec<Line> {
    vec![
        Line {
            account_id: debit.clone(),
            direction: Direction::Debit,
            amount_minor: MinorUnits::new(amount_minor),
            currency: "USD".into(),
        },
        Line {
            account_id: credit.clone(),
            direction: Direction::Credit,
            amount_minor: MinorUnits::new(amount_minor),
            currency: "USD".into(),
        },
    ]
}

pub async fn fund(db: &Db, merchant_id: &MerchantId, account: &AccountId, amount_minor: i64) {
    let acquirer = SystemAccount::CardAcquirer.account_id("USD");
    let entry = Entry {
        merchant_id: Some(merchant_id.clone()),
        settlement_key: None,
        description: "fund".into(),
        lines: lines(&acquirer, account, amount_minor),
    };
    ledger::record(db, entry, Phase::Posted)
        .await
        .expect("funded");
}

pub async fn check(db: &Db) -> ledger::CheckReport {
    let mut pooled = db.get().await.expect("conn");
    let mut tx = pooled.tx();
    ledger::check(&mut tx).await.expect("check runs")
}

pub async fn account(db: &Db, id: &AccountId) -> LedgerAccountRow {
    let mut pooled = db.get().await.expect("conn");
    let mut tx = pooled.tx();
    store::find_account(&mut tx, id)
        .await
        .expect("query")
        .expect("account")
}

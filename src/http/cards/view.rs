//! What the card endpoints answer: the interface's Card, Limits, Balance,
//! CardEvent, Transaction and CardArt shapes, built from stored rows.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use tern_actors::card::machine::Limits as CardLimits;
use tern_actors::card::program;
use tern_actors::ports::Wallet as WalletKind;
use tern_schema::models::{CardRow, CardTransactionRow, CardWalletTokenRow};
use tern_schema::money::MinorUnits;
use tern_schema::snapshot;
use tern_schema::store::cards as store;
use tern_schema::store::ledger as ledger_store;
use tern_schema::types::as_utc;
use tern_schema::vocabulary::{AccountKind, CardId, CardTransactionKind, UserId};
use tern_schema::{Db, StoreError, StoreResult, Tx};
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, Default, Serialize, ToSchema)]
pub struct CardBalances {
    /// Posted balance of the funding account the card spends from.
    pub balance_minor: i64,
    /// What the card can spend now: balance less every pending debit.
    pub available_minor: i64,
    /// Held by this card's open authorizations.
    pub hold_minor: i64,
    /// Other pending debits of the funding account (settlements, other cards).
    pub pending_minor: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WalletChannel {
    pub supported: bool,
    /// none, requested, provisioning, active, suspended, removed or failed.
    #[schema(example = "none")]
    pub status: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WalletChannels {
    pub apple_pay: WalletChannel,
    pub google_pay: WalletChannel,
}

/// Spend controls; amounts in minor units, `null` for no limit.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Limits {
    #[schema(example = 1000000)]
    pub daily_spend_minor: Option<i64>,
    #[schema(example = 5000000)]
    pub monthly_spend_minor: Option<i64>,
    #[schema(example = 500000)]
    pub per_transaction_minor: Option<i64>,
    #[schema(example = 50000)]
    pub atm_daily_minor: Option<i64>,
    pub online_enabled: bool,
    pub international_enabled: bool,
    pub atm_enabled: bool,
}

impl From<CardLimits> for Limits {
    fn from(limits: CardLimits) -> Self {
        Limits {
            daily_spend_minor: limits.daily_spend_minor.map(MinorUnits::get),
            monthly_spend_minor: limits.monthly_spend_minor.map(MinorUnits::get),
            per_transaction_minor: limits.per_transaction_minor.map(MinorUnits::get),
            atm_daily_minor: limits.atm_daily_minor.map(MinorUnits::get),
            online_enabled: limits.online_enabled,
            international_enabled: limits.international_enabled,
            atm_enabled: limits.atm_enabled,
        }
    }
}

/// A present JSON field, `null` included, is `Some`; an absent one `None`.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// Changes to a card's limits: fields left out keep their value; an amount
/// set to `null` removes that limit.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsPatch {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    pub daily_spend_minor: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    pub monthly_spend_minor: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    pub per_transaction_minor: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    pub atm_daily_minor: Option<Option<i64>>,
    pub online_enabled: Option<bool>,
    pub international_enabled: Option<bool>,
    pub atm_enabled: Option<bool>,
}

/// A limit as asked (absent: unchanged; null: no limit), in minor units.
fn minor_units(limit: Option<i64>) -> Option<MinorUnits> {
    limit.map(MinorUnits::new)
}

impl From<LimitsPatch> for tern_actors::card::LimitsPatch {
    fn from(patch: LimitsPatch) -> Self {
        tern_actors::card::LimitsPatch {
            per_transaction_minor: patch.per_transaction_minor.map(minor_units),
            daily_spend_minor: patch.daily_spend_minor.map(minor_units),
            monthly_spend_minor: patch.monthly_spend_minor.map(minor_units),
            atm_daily_minor: patch.atm_daily_minor.map(minor_units),
            online_enabled: patch.online_enabled,
            international_enabled: patch.international_enabled,
            atm_enabled: patch.atm_enabled,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Card {
    #[schema(value_type = String, example = "card_0192f0c1e2d37a4b8c9d0e1f2a3b4c5d")]
    pub id: CardId,
    #[schema(value_type = String)]
    pub user_id: UserId,
    #[schema(example = "SVC_VIRTUAL_USD")]
    pub program_id: String,
    /// `virtual` or `physical`.
    #[serde(rename = "type")]
    #[schema(example = "virtual")]
    pub card_type: String,
    /// active, frozen, blocked or closed.
    #[schema(example = "active")]
    pub status: String,
    /// `visa` or `mastercard`.
    #[schema(example = "visa")]
    pub network: String,
    #[schema(example = "4242")]
    pub last_four: String,
    pub display_name: Option<String>,
    /// `<network name> **** <last_four>`.
    #[schema(example = "Visa **** 4242")]
    pub display_label: String,
    pub product_name: String,
    pub brand: String,
    pub issuer_name: String,
    #[schema(example = "tern_virtual_usd")]
    pub card_art: String,
    /// `dark` or `light`.
    pub theme: String,
    pub cardholder: String,
    pub expiry_month: i32,
    pub expiry_year: i32,
    #[schema(example = "USD")]
    pub currency: String,
    #[schema(example = "$")]
    pub currency_symbol: String,
    #[schema(example = "none")]
    pub wallet_status: String,
    pub wallet: WalletChannels,
    #[serde(flatten)]
    pub balances: CardBalances,
    pub limits: Limits,
    /// *extension*: the card this one replaced, or that replaced it.
    #[schema(value_type = Option<String>)]
    pub replaces_card_id: Option<CardId>,
    #[schema(value_type = Option<String>)]
    pub replaced_by_card_id: Option<CardId>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CardList {
    /// The user's cards, newest first.
    pub data: Vec<Card>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Balance {
    #[schema(value_type = String)]
    pub card_id: CardId,
    #[schema(example = "USD")]
    pub currency: String,
    pub balance_minor: i64,
    pub available_minor: i64,
    pub hold_minor: i64,
    /// *extension*: other pending debits of the funding account.
    pub pending_minor: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CardArt {
    #[schema(example = "tern_virtual_usd")]
    pub id: String,
    pub title: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CardArtList {
    pub data: Vec<CardArt>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CardEvent {
    #[schema(example = "evt_0192f0c1e2d37a4b8c9d0e1f2a3b4c5d")]
    pub id: String,
    #[schema(value_type = String)]
    pub card_id: CardId,
    /// `authorization`, `clearing`, `refund`, `reversal` (the network
    /// released part or all of a hold) or `expiry` (nothing cleared the
    /// authorization within the hold's lifetime).
    #[serde(rename = "type")]
    #[schema(example = "authorization")]
    pub event_type: String,
    /// authorization: approved, declined, cleared, reversed or expired;
    /// clearing and refund: posted; reversal and expiry: released.
    #[schema(example = "approved")]
    pub status: String,
    pub currency: String,
    pub description: String,
    pub amount_minor: i64,
    pub occurred_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CardEventList {
    /// Newest first; empty until the provider reports activity.
    pub data: Vec<CardEvent>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Transaction {
    #[schema(example = "ctx_0192f0c1e2d37a4b8c9d0e1f2a3b4c5d")]
    pub id: String,
    #[schema(value_type = String)]
    pub card_id: CardId,
    /// authorization: approved (its hold open), declined, cleared, reversed
    /// (the network released all of it) or expired (nothing cleared it in
    /// time); clear and refund: posted.
    pub status: String,
    pub currency: String,
    pub merchant: String,
    pub mcc: String,
    /// `authorization`, `clear` or `refund`.
    pub kind: String,
    pub amount_minor: i64,
    /// *extension*: the provider's authorization this belongs to.
    pub authorization_id: String,
    /// *extension*: why a declined authorization was declined.
    pub decline_reason: Option<String>,
    /// *extension*: what an approved authorization still holds (its amount
    /// less what reversals released); 0 once it ended, and for other kinds.
    pub hold_minor: i64,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TransactionList {
    /// Newest first.
    pub data: Vec<Transaction>,
}

pub fn currency_symbol(currency: &str) -> &'static str {
    match currency {
        "USD" => "$",
        "EUR" => "€",
        "GBP" => "£",
        "JPY" => "¥",
        _ => "",
    }
}

/// [`balances`] read in one snapshot: the funding account and the card's
/// holds as of one moment, so a hold released between two reads never
/// shows as gone from the holds and still pending on the account. In a
/// task of its own, which a client hanging up cannot cut short (that would
/// pool a connection still inside the snapshot).
pub async fn balances_at_once(db: &Db, row: &CardRow) -> StoreResult<CardBalances> {
    let db = db.clone();
    let row = row.clone();
    actix_web::rt::spawn(async move {
        let mut pooled = db.get().await?;
        let mut tx = pooled.tx();
        snapshot::begin(&mut tx).await?;
        let read = balances(&mut tx, &row).await;
        snapshot::end(&mut tx, read).await
    })
    .await
    .map_err(|error| StoreError::Unavailable(format!("card balance read: {error}")))?
}

/// The balances of the funding account `row` spends from, and this card's holds.
pub async fn balances(tx: &mut Tx<'_>, row: &CardRow) -> StoreResult<CardBalances> {
    let account = ledger_store::merchant_accounts(tx, &row.merchant_id)
        .await?
        .into_iter()
        .find(|account| account.kind == AccountKind::Funding && account.currency == row.currency);
    let Some(account) = account else {
        return Ok(CardBalances::default());
    };
    let hold = store::held(tx, &row.id).await?;
    let pending = account.pending_debits_minor.saturating_sub(hold);
    Ok(CardBalances {
        balance_minor: account.balance_minor().get(),
        available_minor: account.available_minor().get(),
        hold_minor: hold.get(),
        pending_minor: pending.max(MinorUnits::ZERO).get(),
    })
}

fn channel(tokens: &[CardWalletTokenRow], wallet: WalletKind) -> WalletChannel {
    let mine: Vec<CardWalletTokenRow> = tokens
        .iter()
        .filter(|token| token.wallet == wallet)
        .cloned()
        .collect();
    WalletChannel {
        supported: true,
        status: tern_actors::card::wallet_status_of(&mine)
            .as_str()
            .to_owned(),
    }
}

/// The card as answered, reading its balances and wallet tokens.
pub async fn card(tx: &mut Tx<'_>, row: CardRow) -> StoreResult<Card> {
    let balances = balances(tx, &row).await?;
    let tokens = store::wallet_tokens(tx, &row.id).await?;
    Ok(render(row, balances, &tokens))
}

pub fn render(row: CardRow, balances: CardBalances, tokens: &[CardWalletTokenRow]) -> Card {
    let program = program::find(&row.program_id);
    let network = row.network;
    let last_four = row.last_four.clone().unwrap_or_default();
    Card {
        display_label: format!("{} **** {last_four}", network.display_name()),
        product_name: program.map_or("", |p| p.product_name).to_owned(),
        brand: program::BRAND.to_owned(),
        issuer_name: program::ISSUER_NAME.to_owned(),
        currency_symbol: currency_symbol(&row.currency).to_owned(),
        wallet: WalletChannels {
            apple_pay: channel(tokens, WalletKind::ApplePay),
            google_pay: channel(tokens, WalletKind::GooglePay),
        },
        limits: row.limits.into(),
        balances,
        last_four,
        expiry_month: row.expiry_month.unwrap_or_default(),
        expiry_year: row.expiry_year.unwrap_or_default(),
        created_at: as_utc(row.created_at),
        updated_at: as_utc(row.updated_at),
        id: row.id,
        user_id: row.user_id,
        program_id: row.program_id,
        card_type: row.card_type.as_str().to_owned(),
        status: row.status.as_str().to_owned(),
        network: row.network.as_str().to_owned(),
        display_name: row.display_name,
        card_art: row.card_art,
        theme: row.theme,
        cardholder: row.cardholder,
        currency: row.currency,
        // The actor derives the row's value from the same tokens; deriving it
        // here keeps it consistent with `wallet` when they were read apart.
        wallet_status: tern_actors::card::wallet_status_of(tokens)
            .as_str()
            .to_owned(),
        replaces_card_id: row.replaces_card_id,
        replaced_by_card_id: row.replaced_by_card_id,
    }
}

fn event_type(kind: CardTransactionKind) -> &'static str {
    match kind {
        CardTransactionKind::Clear => "clearing",
        CardTransactionKind::Refund => "refund",
        CardTransactionKind::Reversal => "reversal",
        CardTransactionKind::Expiry => "expiry",
        CardTransactionKind::Authorization => "authorization",
    }
}

pub fn event(row: &CardTransactionRow) -> CardEvent {
    let suffix = row.id.strip_prefix("ctx_").unwrap_or(&row.id);
    let description = match &row.decline_reason {
        Some(reason) => format!("{} (declined: {reason})", row.merchant_name),
        None => row.merchant_name.clone(),
    };
    CardEvent {
        id: format!("evt_{suffix}"),
        card_id: row.card_id.clone(),
        event_type: event_type(row.kind).to_owned(),
        status: row.status.as_str().to_owned(),
        currency: row.currency.clone(),
        description,
        amount_minor: row.amount_minor.get(),
        occurred_at: as_utc(row.created_at),
    }
}

pub fn transaction(row: CardTransactionRow) -> Transaction {
    Transaction {
        id: row.id,
        card_id: row.card_id,
        status: row.status.as_str().to_owned(),
        currency: row.currency,
        merchant: row.merchant_name,
        mcc: row.mcc,
        kind: row.kind.as_str().to_owned(),
        amount_minor: row.amount_minor.get(),
        authorization_id: row.authorization_id,
        decline_reason: row.decline_reason.map(|reason| reason.as_str().to_owned()),
        hold_minor: row.hold_minor.get(),
        created_at: as_utc(row.created_at),
    }
}

pub fn card_art() -> CardArtList {
    CardArtList {
        data: program::CARD_ART
            .iter()
            .map(|(id, title)| CardArt {
                id: (*id).to_owned(),
                title: (*title).to_owned(),
            })
            .collect(),
    }
}

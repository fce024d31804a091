//! The card actor: one per card, the only writer of the card's row, its
//! transactions and its wallet tokens. It asks the pure machine what an
//! operation or an authorization does, calls the issuer where the card's
//! status must follow, and writes each change in one transaction with its
//! ledger entries and audit record.

use std::sync::Arc;

use chrono::NaiveDateTime;
use serde_json::json;
use tern_schema::audit::{AuditActor, AuditRecord};
use tern_schema::ledger::{self, Direction, Entry, LedgerError, Line, Phase, SystemAccount};
use tern_schema::models::{CardRow, CardTransactionRow, CardWalletTokenRow};
use tern_schema::plan::{LedgerWrite, Plan, RowWrite};
use tern_schema::store::cards as store;
use tern_schema::store::ledger as ledger_store;
use tern_schema::types::utc_now;
use tern_schema::{Db, DieselError, PlanError, StoreError};

use super::holds::{self, Reversal};
use super::machine::{
    self, Accepted, Authorization, Channel, Decline, Limits, Operation, Refusal, Spend, Status,
};
use super::replay::{self, decision_of};
use super::standing::StandingCache;
use crate::ports::{
    CardIssuer, CardNetwork, IssueRequest, IssuedCard, IssuerStatus, ProviderError, Wallet,
    WalletOutcome, WalletRequest,
};
use crate::runtime::timers;
use crate::runtime::version::next_version;
use crate::runtime::{
    EntityEnv, EntityKind, RuntimeError, RuntimeResult, TimerFiring, TimerSpec, Transition,
};

/// Payload of the timer that resumes an issue whose outcome is unknown.
const TIMER_RESUME_ISSUE: &str = "resume_issue";
/// How long an issue with an unknown outcome waits before asking again.
pub const ISSUE_RESUME_DELAY: chrono::TimeDelta = chrono::TimeDelta::seconds(5);

#[derive(Clone)]
pub struct CardContext {
    pub issuer: Arc<dyn CardIssuer>,
    /// Whether each card's merchant and user may spend, shared by all cards.
    pub standing: Arc<StandingCache>,
    /// How long an uncleared authorization holds its funds (TERN_CARD_HOLD_TTL).
    pub hold_ttl: chrono::TimeDelta,
}

/// Who asked, for the audit record.
#[derive(Clone, Debug)]
pub struct Origin {
    pub actor: AuditActor,
    pub request_id: String,
}

impl Origin {
    fn system(row: &CardRow) -> Origin {
        Origin {
            actor: AuditActor::System,
            request_id: row.request_id.clone(),
        }
    }
}

/// The card as stored, plus what the actor keeps to decide quickly.
#[derive(Clone, Debug)]
pub struct CardState {
    pub row: CardRow,
    spend: Spend,
    /// The funding account the card spends from, found on first use.
    funding_account: Option<String>,
    /// The card was never issued and its intent is gone.
    gone: bool,
}

/// Changes to a card's limits; `None` leaves a field as it is, and
/// `Some(None)` removes an amount limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LimitsPatch {
    pub per_transaction_minor: Option<Option<i64>>,
    pub daily_spend_minor: Option<Option<i64>>,
    pub monthly_spend_minor: Option<Option<i64>>,
    pub atm_daily_minor: Option<Option<i64>>,
    pub online_enabled: Option<bool>,
    pub international_enabled: Option<bool>,
    pub atm_enabled: Option<bool>,
}

impl LimitsPatch {
    pub fn merged(&self, limits: Limits) -> Limits {
        Limits {
            per_transaction_minor: self
                .per_transaction_minor
                .unwrap_or(limits.per_transaction_minor),
            daily_spend_minor: self.daily_spend_minor.unwrap_or(limits.daily_spend_minor),
            monthly_spend_minor: self
                .monthly_spend_minor
                .unwrap_or(limits.monthly_spend_minor),
            atm_daily_minor: self.atm_daily_minor.unwrap_or(limits.atm_daily_minor),
            online_enabled: self.online_enabled.unwrap_or(limits.online_enabled),
            international_enabled: self
                .international_enabled
                .unwrap_or(limits.international_enabled),
            atm_enabled: self.atm_enabled.unwrap_or(limits.atm_enabled),
        }
    }
}

/// An `authorization.request` from the card provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizationRequest {
    pub event_id: String,
    pub authorization_id: String,
    pub amount_minor: i64,
    pub currency: String,
    pub merchant: String,
    pub mcc: String,
    pub channel: Channel,
    pub country: String,
}

/// A refund from the card provider: money back onto the card.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefundRequest {
    pub event_id: String,
    pub authorization_id: Option<String>,
    pub amount_minor: i64,
    pub currency: String,
    pub merchant: String,
    pub mcc: String,
}

pub enum CardCommand {
    /// The intent is written: issue the card (the POST that wrote it).
    Issue {
        origin: Origin,
    },
    /// Re-activated while issuing: finish or abandon the issue.
    Resume,
    /// Freeze, unfreeze or close.
    Change {
        operation: Operation,
        origin: Origin,
    },
    /// Block the card and issue a new one in its place.
    Replace {
        reason: Option<String>,
        new_card_id: String,
        origin: Origin,
    },
    Update {
        display_name: Option<Option<String>>,
        limits: LimitsPatch,
        origin: Origin,
    },
    ProvisionWallet {
        wallet: Wallet,
        device_id: Option<String>,
        token_id: String,
        origin: Origin,
    },
    /// The issuer's `wallet_token.updated`.
    WalletUpdated {
        token_id: String,
        status: String,
    },
    Authorize(AuthorizationRequest),
    /// The issuer's `authorization.clearing`.
    Clear {
        event_id: String,
        authorization_id: String,
        amount_minor: Option<i64>,
    },
    Refund(RefundRequest),
    /// The issuer's `authorization.reversal`.
    Reverse(Reversal),
    Timer(TimerFiring),
    /// An authorization's hold reached its lifetime.
    ExpireHold(TimerFiring),
}

/// The answer to an authorization request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub approved: bool,
    pub reason: Option<String>,
    /// The card transaction that records it; `None` for a request refused
    /// without a record (a reused authorization id).
    pub transaction_id: Option<String>,
    /// The event was decided before; this is that decision again.
    pub duplicate: bool,
}

#[derive(Debug)]
pub enum CardReply {
    Card(Box<CardRow>),
    Token(Box<CardWalletTokenRow>),
    Decision(Decision),
    /// A provider event was recorded, or had been (`duplicate`), or named
    /// nothing the card knows (`ignored`).
    Recorded {
        duplicate: bool,
        ignored: bool,
    },
}

/// Why the card did not do what was asked; each maps to one problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardFailure {
    Refused(Refusal),
    /// The user already has a live virtual card (409 ACTIVE_CARD_ALREADY_EXISTS).
    LiveCardExists,
    /// The issuer failed; nothing was changed (502).
    Issuer(String),
    /// The issuer cannot provision into that wallet (501).
    WalletNotSupported(String),
    /// Limits out of bounds or out of order (422), per field.
    InvalidLimits(Vec<(&'static str, String)>),
    /// The card holds its maximum of wallet tokens (409).
    WalletTokenLimit,
    /// The card does not exist (never issued, or its issue was abandoned).
    NotFound,
    /// The ledger refuses for good the entry an event's `field` asks for
    /// (an amount that would overflow a balance): 422, nothing recorded,
    /// so the provider stops re-sending it.
    EntryRefused {
        field: &'static str,
        reason: String,
    },
}

pub type CardResult = Result<CardReply, CardFailure>;

pub struct CardKind;

/// Errors inside a write: the store's, the ledger's, or a lost version race.
#[derive(Debug, thiserror::Error)]
pub(super) enum WriteError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl From<StoreError> for WriteError {
    fn from(error: StoreError) -> Self {
        WriteError::Runtime(error.into())
    }
}

impl From<DieselError> for WriteError {
    fn from(error: DieselError) -> Self {
        WriteError::Runtime(error.into())
    }
}

impl From<WriteError> for RuntimeError {
    fn from(error: WriteError) -> Self {
        match error {
            WriteError::Runtime(error) => error,
            WriteError::Ledger(LedgerError::Store(error)) => error.into(),
            // Never Unavailable: the same entry is refused again on every
            // retry, so a 503 would have the provider re-send it for ever.
            WriteError::Ledger(other) => {
                RuntimeError::Refused(format!("ledger refused a card entry: {other}"))
            }
        }
    }
}

impl From<PlanError> for WriteError {
    fn from(error: PlanError) -> Self {
        match error {
            PlanError::Ledger(refused) => WriteError::Ledger(refused),
            other => WriteError::Runtime(other.into()),
        }
    }
}

/// Writes one of the card's plans. An authorization moved meanwhile (on
/// another node) is the card's conflict: it reloads and the caller may
/// send the event again.
pub(super) async fn commit(db: &Db, card_id: &str, plan: Plan) -> Result<(), WriteError> {
    match db.commit(plan).await {
        Ok(_) => Ok(()),
        Err(PlanError::Store(StoreError::Conflict(_))) => {
            Err(WriteError::Runtime(RuntimeError::Conflict {
                kind: CardKind::NAME,
                id: card_id.to_owned(),
            }))
        }
        Err(error) => Err(error.into()),
    }
}

impl WriteError {
    pub(super) fn is_unique_violation(&self) -> bool {
        matches!(
            self,
            WriteError::Runtime(RuntimeError::Store(StoreError::UniqueViolation(_)))
                | WriteError::Ledger(LedgerError::Store(StoreError::UniqueViolation(_)))
        )
    }

    /// What a provider event is answered when the ledger refuses its entry
    /// because of the amount or currency it names; `None` for failures
    /// that are not the event's fault.
    pub(super) fn refused_entry(&self) -> Option<CardFailure> {
        match self {
            WriteError::Ledger(LedgerError::Overflow { .. }) => Some(CardFailure::EntryRefused {
                field: "amount_minor",
                reason: format!(
                    "would take a ledger balance past its limit of {} minor units",
                    i64::MAX
                ),
            }),
            WriteError::Ledger(LedgerError::CurrencyMismatch { .. }) => {
                Some(CardFailure::EntryRefused {
                    field: "currency",
                    reason: "is not the currency of the card's account".into(),
                })
            }
            _ => None,
        }
    }

    /// An authorization whose hold the ledger cannot take for good (a
    /// balance would overflow) is declined like one the funds cannot cover.
    fn is_unholdable(&self) -> bool {
        matches!(
            self,
            WriteError::Ledger(LedgerError::Overflow { .. } | LedgerError::CurrencyMismatch { .. })
        )
    }

    fn is_insufficient_funds(&self) -> bool {
        matches!(
            self,
            WriteError::Ledger(LedgerError::InsufficientFunds { .. })
        )
    }
}

pub(super) type Step = RuntimeResult<Transition<CardKind>>;

pub(super) fn answer(state: CardState, reply: CardResult) -> Step {
    Ok(Transition::new(state, reply))
}

impl EntityKind for CardKind {
    const NAME: &'static str = "card";
    type State = CardState;
    type Command = CardCommand;
    type Reply = CardResult;
    type Context = CardContext;

    async fn load(env: EntityEnv<CardContext>) -> RuntimeResult<Option<CardState>> {
        let mut pooled = env.db.get().await?;
        let tx = &mut pooled.tx();
        let Some(row) = store::find(tx, &env.id).await? else {
            return Ok(None);
        };
        let now = utc_now();
        let (day_start, month_start) = machine::window_starts(now);
        let spend = Spend {
            day: now.date(),
            day_minor: store::approved_since(tx, &row.id, day_start, None).await?,
            atm_day_minor: store::approved_since(tx, &row.id, day_start, Some("atm")).await?,
            month_minor: store::approved_since(tx, &row.id, month_start, None).await?,
        };
        Ok(Some(CardState {
            row,
            spend,
            funding_account: None,
            gone: false,
        }))
    }

    async fn handle(env: EntityEnv<CardContext>, state: CardState, command: CardCommand) -> Step {
        if state.gone {
            return answer(state, Err(CardFailure::NotFound));
        }
        match command {
            CardCommand::Issue { origin } => issue(&env, state, origin, None).await,
            CardCommand::Resume => {
                let origin = Origin::system(&state.row);
                issue(&env, state, origin, None).await
            }
            CardCommand::Timer(firing) => {
                let origin = Origin::system(&state.row);
                issue(&env, state, origin, Some(firing)).await
            }
            CardCommand::Change { operation, origin } => {
                change(&env, state, operation, origin).await
            }
            CardCommand::Replace {
                reason,
                new_card_id,
                origin,
            } => replace(&env, state, reason, new_card_id, origin).await,
            CardCommand::Update {
                display_name,
                limits,
                origin,
            } => update(&env, state, display_name, limits, origin).await,
            CardCommand::ProvisionWallet {
                wallet,
                device_id,
                token_id,
                origin,
            } => provision_wallet(&env, state, wallet, device_id, token_id, origin).await,
            CardCommand::WalletUpdated { token_id, status } => {
                wallet_updated(&env, state, token_id, status).await
            }
            CardCommand::Authorize(request) => authorize(&env, state, request).await,
            CardCommand::Clear {
                event_id,
                authorization_id,
                amount_minor,
            } => clear(&env, state, event_id, authorization_id, amount_minor).await,
            CardCommand::Refund(request) => refund(&env, state, request).await,
            CardCommand::Reverse(reversal) => holds::reverse(&env, state, reversal).await,
            CardCommand::ExpireHold(firing) => holds::expire(&env, state, firing).await,
        }
    }

    fn in_flight_since(state: &CardState) -> Option<NaiveDateTime> {
        (state.row.status == Status::Issuing.as_str() && !state.gone)
            .then_some(state.row.created_at)
    }

    async fn list_in_flight(
        db: Db,
        after: Option<String>,
        limit: i64,
    ) -> RuntimeResult<Vec<String>> {
        let mut pooled = db.get().await?;
        let after = after.as_deref().unwrap_or("");
        let ids = store::issuing_page(&mut pooled.tx(), after, limit).await?;
        Ok(ids)
    }

    fn timer_command(firing: TimerFiring) -> RuntimeResult<CardCommand> {
        if firing.payload == TIMER_RESUME_ISSUE {
            Ok(CardCommand::Timer(firing))
        } else if holds::expiring(&firing.payload).is_some() {
            Ok(CardCommand::ExpireHold(firing))
        } else {
            Err(RuntimeError::InvalidTimer {
                reason: format!("unknown payload `{}`", firing.payload),
                id: firing.id,
            })
        }
    }

    /// A live card is not in flight between authorizations, but it is not
    /// done either: it stays in memory until the idle timeout, or every
    /// authorization of a busy card would reload it (its spend windows are
    /// sums over the card's transactions).
    fn passivates_when_quiet(state: &CardState) -> bool {
        state.gone || state.row.status == Status::Closed.as_str()
    }

    fn on_activate(state: &CardState) -> Option<CardCommand> {
        (state.row.status == Status::Issuing.as_str()).then_some(CardCommand::Resume)
    }
}

pub fn status_of(row: &CardRow) -> Status {
    // The column's CHECK admits only these; an unknown one is treated as
    // closed, the status that accepts nothing.
    Status::parse(&row.status).unwrap_or(Status::Closed)
}

pub fn limits_of(row: &CardRow) -> Limits {
    Limits {
        per_transaction_minor: row.per_transaction_minor,
        daily_spend_minor: row.daily_spend_minor,
        monthly_spend_minor: row.monthly_spend_minor,
        atm_daily_minor: row.atm_daily_minor,
        online_enabled: row.online_enabled,
        international_enabled: row.international_enabled,
        atm_enabled: row.atm_enabled,
    }
}

fn with_limits(mut row: CardRow, limits: Limits) -> CardRow {
    row.per_transaction_minor = limits.per_transaction_minor;
    row.daily_spend_minor = limits.daily_spend_minor;
    row.monthly_spend_minor = limits.monthly_spend_minor;
    row.atm_daily_minor = limits.atm_daily_minor;
    row.online_enabled = limits.online_enabled;
    row.international_enabled = limits.international_enabled;
    row.atm_enabled = limits.atm_enabled;
    row
}

/// The row's successor: the same card at the next version.
fn successor(row: &CardRow, now: NaiveDateTime) -> CardRow {
    CardRow {
        version: next_version(row.version),
        updated_at: now,
        ..row.clone()
    }
}

/// The card written whole over the version it was read at.
fn moved(next: &CardRow, held: i64) -> RowWrite {
    RowWrite::Card {
        row: next.clone(),
        expected_version: held,
    }
}

fn record(
    row: &CardRow,
    origin: &Origin,
    action: &'static str,
    data: serde_json::Value,
) -> AuditRecord {
    AuditRecord {
        merchant_id: row.merchant_id.clone(),
        actor: origin.actor.clone(),
        action,
        resource_type: "card",
        resource_id: row.id.clone(),
        request_id: origin.request_id.clone(),
        data,
    }
}

/// What asking the issuer for a card came to.
enum IssueOutcome {
    Issued(IssuedCard),
    /// The issuer did not issue it; safe to abandon the intent.
    NotIssued(String),
    /// Nobody knows yet; ask again later under the same key.
    Unknown(String),
}

async fn ask_issuer(issuer: &dyn CardIssuer, row: &CardRow) -> IssueOutcome {
    let network = CardNetwork::parse(&row.network).unwrap_or(CardNetwork::Visa);
    let request = IssueRequest {
        idempotency_key: row.id.clone(),
        card_id: row.id.clone(),
        user_id: row.user_id.clone(),
        program_id: row.program_id.clone(),
        network,
        card_type: row.card_type.clone(),
        currency: row.currency.clone(),
        cardholder: row.cardholder.clone(),
    };
    let error = match issuer.issue(&request).await {
        Ok(issued) => return IssueOutcome::Issued(issued),
        Err(error) => error,
    };
    if !error.needs_inquiry() {
        return IssueOutcome::NotIssued(error.to_string());
    }
    match issuer.find_issued(&row.id).await {
        Ok(Some(issued)) => IssueOutcome::Issued(issued),
        Ok(None) => IssueOutcome::NotIssued(error.to_string()),
        Err(inquiry) => IssueOutcome::Unknown(format!("{error}; then {inquiry}")),
    }
}

/// Issues the card its intent describes, or abandons the intent when the
/// issuer did not issue it, putting back the card it was to replace.
async fn issue(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    origin: Origin,
    firing: Option<TimerFiring>,
) -> Step {
    if status_of(&state.row) != Status::Issuing {
        if let Some(firing) = firing {
            timers::complete(&env.db, firing).await?;
        }
        let row = state.row.clone();
        return answer(state, Ok(CardReply::Card(Box::new(row))));
    }
    match ask_issuer(env.ctx.issuer.as_ref(), &state.row).await {
        IssueOutcome::Issued(issued) => {
            let row = issued_row(&state.row, &issued, utc_now());
            let plan = Plan {
                completes_timer: firing.map(|firing| firing.claim()),
                audit: vec![issued_record(&row, &origin)],
                rows: vec![moved(&row, state.row.version)],
                ..Plan::default()
            };
            commit(&env.db, &row.id, plan).await?;
            if let Some(old) = row.replaces_card_id.clone() {
                block_replaced_at_issuer(env, &old).await;
            }
            state.row = row.clone();
            answer(state, Ok(CardReply::Card(Box::new(row))))
        }
        IssueOutcome::NotIssued(reason) => {
            tracing::warn!(card = %state.row.id, %reason, "issuer did not issue the card; intent abandoned");
            let (rows, _) = abandonment(&env.db, &state.row).await?;
            let plan = Plan {
                completes_timer: firing.map(|firing| firing.claim()),
                rows,
                ..Plan::default()
            };
            commit(&env.db, &state.row.id, plan).await?;
            state.gone = true;
            answer(state, Err(CardFailure::Issuer(reason)))
        }
        IssueOutcome::Unknown(reason) => {
            tracing::warn!(card = %state.row.id, %reason, "issue outcome unknown; asking again later");
            let plan = Plan {
                completes_timer: firing.map(|firing| firing.claim()),
                timers: vec![resume_timer(&state.row.id)],
                ..Plan::default()
            };
            commit(&env.db, &state.row.id, plan).await?;
            answer(state, Err(CardFailure::Issuer(reason)))
        }
    }
}

fn issued_record(row: &CardRow, origin: &Origin) -> AuditRecord {
    record(
        row,
        origin,
        "card.issued",
        json!({"program_id": row.program_id, "network": row.network,
               "last_four": row.last_four, "replaces": row.replaces_card_id}),
    )
}

/// Asks the card's actor to finish an issue whose outcome is unknown, later
/// and across restarts: the timer commits with the transition that wants it.
fn resume_timer(card_id: &str) -> tern_schema::store::timers::TimerRow {
    let timer_id = format!("{card_id}:resume:{}", uuid::Uuid::now_v7().simple());
    TimerSpec {
        id: &timer_id,
        kind: CardKind::NAME,
        entity_id: card_id,
        due_at: utc_now() + ISSUE_RESUME_DELAY,
        payload: TIMER_RESUME_ISSUE,
    }
    .row()
}

fn issued_row(intent: &CardRow, issued: &IssuedCard, now: NaiveDateTime) -> CardRow {
    CardRow {
        status: Status::Active.as_str().to_owned(),
        provider_card_id: Some(issued.provider_card_id.clone()),
        last_four: Some(issued.last_four.clone()),
        expiry_month: Some(issued.expiry_month),
        expiry_year: Some(issued.expiry_year),
        ..successor(intent, now)
    }
}

/// The writes that remove an intent the issuer never acted on and, for a
/// replacement, give the old card back its status (returned too).
async fn abandonment(
    db: &Db,
    intent: &CardRow,
) -> Result<(Vec<RowWrite>, Option<CardRow>), WriteError> {
    let mut rows = vec![RowWrite::IssuingCardDropped {
        card_id: intent.id.clone(),
    }];
    let (Some(old_id), Some(old_status)) = (&intent.replaces_card_id, &intent.replaces_status)
    else {
        return Ok((rows, None));
    };
    let old = {
        let mut pooled = db.get().await?;
        let found = store::find(&mut pooled.tx(), old_id).await?;
        found
    };
    let Some(old) = old else {
        return Ok((rows, None));
    };
    if old.replaced_by_card_id.as_deref() != Some(intent.id.as_str()) {
        return Ok((rows, None));
    }
    let restored = CardRow {
        status: old_status.clone(),
        replaced_by_card_id: None,
        ..successor(&old, utc_now())
    };
    rows.push(moved(&restored, old.version));
    Ok((rows, Some(restored)))
}

/// Tells the issuer a replaced card is blocked. Tern already declines it
/// (the card's status decides), so a failure here is logged, not fatal.
async fn block_replaced_at_issuer(env: &EntityEnv<CardContext>, old_id: &str) {
    let provider_card_id = match env.db.get().await {
        Ok(mut pooled) => match store::find(&mut pooled.tx(), old_id).await {
            Ok(row) => row.and_then(|row| row.provider_card_id),
            Err(error) => {
                tracing::warn!(card = %old_id, %error, "could not read the replaced card");
                None
            }
        },
        Err(error) => {
            tracing::warn!(card = %old_id, %error, "could not read the replaced card");
            None
        }
    };
    if let Some(provider_card_id) = provider_card_id {
        if let Err(error) = env
            .ctx
            .issuer
            .set_status(&provider_card_id, IssuerStatus::Blocked)
            .await
        {
            tracing::warn!(card = %old_id, %error, "issuer not told the replaced card is blocked");
        }
    }
}

fn issuer_status(status: Status) -> Option<IssuerStatus> {
    match status {
        Status::Active => Some(IssuerStatus::Active),
        Status::Frozen => Some(IssuerStatus::Frozen),
        Status::Blocked => Some(IssuerStatus::Blocked),
        Status::Closed => Some(IssuerStatus::Closed),
        Status::Issuing => None,
    }
}

fn refusal(state: CardState, refusal: Refusal) -> Step {
    answer(state, Err(CardFailure::Refused(refusal)))
}

async fn change(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    operation: Operation,
    origin: Origin,
) -> Step {
    let Accepted { next, changes } = match machine::apply(status_of(&state.row), operation) {
        Ok(accepted) => accepted,
        Err(refused) => return refusal(state, refused),
    };
    if !changes {
        let row = state.row.clone();
        return answer(state, Ok(CardReply::Card(Box::new(row))));
    }
    // The issuer follows first: if it cannot, nothing changes here either.
    if let (Some(provider_card_id), Some(status)) =
        (state.row.provider_card_id.clone(), issuer_status(next))
    {
        if let Err(error) = env.ctx.issuer.set_status(&provider_card_id, status).await {
            return answer(state, Err(issuer_failure(&error)));
        }
    }
    let now = utc_now();
    let mut row = successor(&state.row, now);
    row.status = next.as_str().to_owned();
    if next == Status::Closed {
        row.closed_at = Some(now);
    }
    let action = match operation {
        Operation::Freeze => "card.frozen",
        Operation::Unfreeze => "card.unfrozen",
        _ => "card.closed",
    };
    let audit = record(
        &row,
        &origin,
        action,
        json!({"from": state.row.status, "to": row.status}),
    );
    let plan = Plan {
        audit: vec![audit],
        rows: vec![moved(&row, state.row.version)],
        ..Plan::default()
    };
    commit(&env.db, &row.id, plan).await?;
    state.row = row.clone();
    answer(state, Ok(CardReply::Card(Box::new(row))))
}

fn issuer_failure(error: &ProviderError) -> CardFailure {
    CardFailure::Issuer(error.to_string())
}

async fn replace(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    reason: Option<String>,
    new_card_id: String,
    origin: Origin,
) -> Step {
    if let Err(refused) = machine::apply(status_of(&state.row), Operation::Replace) {
        return refusal(state, refused);
    }
    let now = utc_now();
    let old = state.row.clone();
    let mut blocked = successor(&old, now);
    blocked.status = Status::Blocked.as_str().to_owned();
    blocked.replaced_by_card_id = Some(new_card_id.clone());
    let intent = CardRow {
        id: new_card_id.clone(),
        status: Status::Issuing.as_str().to_owned(),
        provider_card_id: None,
        last_four: None,
        expiry_month: None,
        expiry_year: None,
        wallet_status: "none".to_owned(),
        replaces_card_id: Some(old.id.clone()),
        replaces_status: Some(old.status.clone()),
        replaced_by_card_id: None,
        request_id: origin.request_id.clone(),
        version: 1,
        created_at: now,
        updated_at: now,
        closed_at: None,
        ..old.clone()
    };
    let audit = record(
        &old,
        &origin,
        "card.replaced",
        json!({"new_card_id": new_card_id, "reason": reason, "from": old.status}),
    );
    let plan = Plan {
        audit: vec![audit],
        rows: vec![
            moved(&blocked, old.version),
            RowWrite::NewCard(intent.clone()),
        ],
        ..Plan::default()
    };
    match commit(&env.db, &old.id, plan).await {
        Ok(()) => {}
        Err(error) if error.is_unique_violation() => {
            return answer(state, Err(CardFailure::LiveCardExists));
        }
        Err(error) => return Err(error.into()),
    }
    state.row = blocked;
    match ask_issuer(env.ctx.issuer.as_ref(), &intent).await {
        IssueOutcome::Issued(issued) => {
            let row = issued_row(&intent, &issued, utc_now());
            let plan = Plan {
                audit: vec![issued_record(&row, &origin)],
                rows: vec![moved(&row, 1)],
                ..Plan::default()
            };
            commit(&env.db, &row.id, plan).await?;
            block_replaced_at_issuer(env, &old.id).await;
            answer(state, Ok(CardReply::Card(Box::new(row))))
        }
        IssueOutcome::NotIssued(reason) => {
            let (rows, restored) = abandonment(&env.db, &intent).await?;
            let plan = Plan {
                rows,
                ..Plan::default()
            };
            // The version it can lose is this card's.
            commit(&env.db, &old.id, plan).await?;
            if let Some(restored) = restored {
                state.row = restored;
            }
            answer(state, Err(CardFailure::Issuer(reason)))
        }
        IssueOutcome::Unknown(reason) => {
            // The new card's own actor finishes it (recovery, or the timer).
            let plan = Plan {
                timers: vec![resume_timer(&intent.id)],
                ..Plan::default()
            };
            commit(&env.db, &intent.id, plan).await?;
            answer(state, Err(CardFailure::Issuer(reason)))
        }
    }
}

async fn update(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    display_name: Option<Option<String>>,
    patch: LimitsPatch,
    origin: Origin,
) -> Step {
    if let Err(refused) = machine::apply(status_of(&state.row), Operation::Update) {
        return refusal(state, refused);
    }
    let (limits, limits_set) = match super::limits::patch_row(&state.row, &patch) {
        Ok(patched) => patched,
        Err(errors) => return answer(state, Err(CardFailure::InvalidLimits(errors))),
    };
    let mut row = with_limits(successor(&state.row, utc_now()), limits);
    row.limits_set = limits_set;
    if let Some(display_name) = display_name.clone() {
        row.display_name = display_name;
    }
    let limits_changed = limits != limits_of(&state.row) || row.limits_set != state.row.limits_set;
    let name_changed = row.display_name != state.row.display_name;
    if !limits_changed && !name_changed {
        let row = state.row.clone();
        return answer(state, Ok(CardReply::Card(Box::new(row))));
    }
    let mut audits = Vec::new();
    if name_changed {
        audits.push(record(
            &row,
            &origin,
            "card.updated",
            json!({"display_name": row.display_name}),
        ));
    }
    if limits_changed {
        audits.push(record(
            &row,
            &origin,
            "card.limits_updated",
            json!({
                "per_transaction_minor": row.per_transaction_minor,
                "daily_spend_minor": row.daily_spend_minor,
                "monthly_spend_minor": row.monthly_spend_minor,
                "atm_daily_minor": row.atm_daily_minor,
                "online_enabled": row.online_enabled,
                "international_enabled": row.international_enabled,
                "atm_enabled": row.atm_enabled,
            }),
        ));
    }
    let plan = Plan {
        audit: audits,
        rows: vec![moved(&row, state.row.version)],
        ..Plan::default()
    };
    commit(&env.db, &row.id, plan).await?;
    state.row = row.clone();
    answer(state, Ok(CardReply::Card(Box::new(row))))
}

/// The card's wallet status from its tokens: active when any token is,
/// otherwise the newest token's status, `none` without tokens.
pub fn wallet_status_of(tokens: &[CardWalletTokenRow]) -> String {
    if tokens.iter().any(|token| token.status == "active") {
        return "active".to_owned();
    }
    tokens
        .iter()
        .max_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)))
        .map_or_else(|| "none".to_owned(), |token| token.status.clone())
}

async fn provision_wallet(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    wallet: Wallet,
    device_id: Option<String>,
    token_id: String,
    origin: Origin,
) -> Step {
    if let Err(refused) = machine::apply(status_of(&state.row), Operation::ProvisionWallet) {
        return refusal(state, refused);
    }
    let tokens = {
        let mut pooled = env.db.get().await?;
        let mut tx = pooled.tx();
        store::wallet_tokens(&mut tx, &state.row.id).await?
    };
    if tokens.len() as i64 >= store::WALLET_TOKENS_PER_CARD_MAX {
        return answer(state, Err(CardFailure::WalletTokenLimit));
    }
    let Some(provider_card_id) = state.row.provider_card_id.clone() else {
        return refusal(state, Refusal::NotIssued);
    };
    let request = WalletRequest {
        idempotency_key: token_id.clone(),
        provider_card_id,
        card_id: state.row.id.clone(),
        wallet,
        device_id: device_id.clone(),
    };
    let provider_token_id = match env.ctx.issuer.provision_wallet(&request).await {
        Ok(WalletOutcome::Requested { provider_token_id }) => provider_token_id,
        Ok(WalletOutcome::NotSupported { reason }) => {
            return answer(state, Err(CardFailure::WalletNotSupported(reason)));
        }
        Err(error) => return answer(state, Err(issuer_failure(&error))),
    };
    let now = utc_now();
    let token = CardWalletTokenRow {
        id: token_id,
        card_id: state.row.id.clone(),
        merchant_id: state.row.merchant_id.clone(),
        wallet: wallet.as_str().to_owned(),
        status: "requested".to_owned(),
        device_id,
        provider_token_id: Some(provider_token_id),
        created_at: now,
        updated_at: now,
    };
    let mut all = tokens;
    all.push(token.clone());
    let mut row = successor(&state.row, now);
    row.wallet_status = wallet_status_of(&all);
    let audit = record(
        &row,
        &origin,
        "card.wallet_requested",
        json!({"token_id": token.id, "wallet": token.wallet, "device_id": token.device_id}),
    );
    let plan = Plan {
        audit: vec![audit],
        rows: vec![
            RowWrite::NewWalletToken(token.clone()),
            moved(&row, state.row.version),
        ],
        ..Plan::default()
    };
    commit(&env.db, &row.id, plan).await?;
    state.row = row;
    answer(state, Ok(CardReply::Token(Box::new(token))))
}

/// Wallet token statuses a provider may report.
pub const WALLET_TOKEN_STATUSES: [&str; 6] = [
    "requested",
    "provisioning",
    "active",
    "suspended",
    "removed",
    "failed",
];

async fn wallet_updated(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    token_id: String,
    status: String,
) -> Step {
    if !WALLET_TOKEN_STATUSES.contains(&status.as_str()) {
        return answer(
            state,
            Ok(CardReply::Recorded {
                duplicate: false,
                ignored: true,
            }),
        );
    }
    // Tokens are the card's: its version guards them, as a change to one
    // moves the card's wallet status.
    let mut tokens = {
        let mut pooled = env.db.get().await?;
        let tokens = store::wallet_tokens(&mut pooled.tx(), &state.row.id).await?;
        tokens
    };
    let Some(token) = tokens.iter_mut().find(|token| token.id == token_id) else {
        return answer(
            state,
            Ok(CardReply::Recorded {
                duplicate: false,
                ignored: true,
            }),
        );
    };
    let now = utc_now();
    token.status = status.clone();
    let mut row = successor(&state.row, now);
    row.wallet_status = wallet_status_of(&tokens);
    let audit = record(
        &row,
        &Origin::system(&state.row),
        "card.wallet_updated",
        json!({"token_id": token_id, "status": status}),
    );
    let plan = Plan {
        audit: vec![audit],
        rows: vec![
            RowWrite::WalletTokenStatus {
                card_id: row.id.clone(),
                token_id,
                status,
                at: now,
            },
            moved(&row, state.row.version),
        ],
        ..Plan::default()
    };
    commit(&env.db, &row.id, plan).await?;
    state.row = row;
    answer(
        state,
        Ok(CardReply::Recorded {
            duplicate: false,
            ignored: false,
        }),
    )
}

/// The merchant's funding account in the card's currency.
pub(super) async fn funding_account(
    env: &EntityEnv<CardContext>,
    state: &mut CardState,
) -> RuntimeResult<String> {
    if let Some(account) = &state.funding_account {
        return Ok(account.clone());
    }
    let mut pooled = env.db.get().await?;
    let account = ledger_store::merchant_accounts(&mut pooled.tx(), &state.row.merchant_id)
        .await?
        .into_iter()
        .find(|account| account.kind == ledger::FUNDING && account.currency == state.row.currency)
        .map(|account| account.id)
        .ok_or_else(|| {
            RuntimeError::Store(StoreError::Unavailable(format!(
                "merchant {} has no {} funding account",
                state.row.merchant_id, state.row.currency
            )))
        })?;
    state.funding_account = Some(account.clone());
    Ok(account)
}

pub(super) fn transaction_row(
    card: &CardRow,
    event_id: &str,
    authorization_id: &str,
    kind: &str,
    status: &str,
    amount_minor: i64,
    currency: &str,
) -> CardTransactionRow {
    let now = utc_now();
    CardTransactionRow {
        id: format!("ctx_{}", uuid::Uuid::now_v7().simple()),
        card_id: card.id.clone(),
        merchant_id: card.merchant_id.clone(),
        provider_event_id: event_id.to_owned(),
        authorization_id: authorization_id.to_owned(),
        kind: kind.to_owned(),
        status: status.to_owned(),
        amount_minor,
        currency: currency.to_owned(),
        merchant_name: String::new(),
        mcc: String::new(),
        channel: String::new(),
        country: String::new(),
        decline_reason: None,
        ledger_transaction_id: None,
        created_at: now,
        updated_at: now,
        hold_minor: 0,
        event_source: store::SOURCE_PROVIDER.to_owned(),
    }
}

pub(super) async fn replayed(db: &Db, event_id: &str) -> RuntimeResult<Option<CardTransactionRow>> {
    let mut pooled = db.get().await?;
    let mut tx = pooled.tx();
    Ok(store::transaction_by_event(&mut tx, event_id).await?)
}

fn card_line(account_id: &str, direction: Direction, amount_minor: i64, currency: &str) -> Line {
    Line {
        account_id: account_id.to_owned(),
        direction,
        amount_minor,
        currency: currency.to_owned(),
    }
}

/// Decides an authorization request: the machine for everything but the
/// funds, then the ledger's hold, refused in the same statement when the
/// funding account cannot cover it.
async fn authorize(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    request: AuthorizationRequest,
) -> Step {
    if let Some(decision) = replay::earlier_decision(&env.db, &state.row.id, &request).await? {
        return answer(state, Ok(CardReply::Decision(decision)));
    }
    let now = utc_now();
    let asked = Authorization {
        amount_minor: request.amount_minor,
        currency: request.currency.clone(),
        channel: request.channel,
        country: request.country.clone(),
        at: now,
    };
    let mut row = transaction_row(
        &state.row,
        &request.event_id,
        &request.authorization_id,
        store::KIND_AUTHORIZATION,
        store::TX_APPROVED,
        request.amount_minor,
        &request.currency,
    );
    row.merchant_name = request.merchant.clone();
    row.mcc = request.mcc.clone();
    row.channel = request.channel.as_str().to_owned();
    row.country = request.country.clone();

    let decided = machine::decide(
        status_of(&state.row),
        &state.row.currency,
        &limits_of(&state.row),
        state.spend,
        &asked,
    );
    let decided = super::standing::screened(env, &state.row, decided).await?;
    let unheld = if decided.is_ok() {
        let funding = funding_account(env, &mut state).await?;
        let entry = Entry {
            merchant_id: Some(state.row.merchant_id.clone()),
            settlement_key: None,
            description: format!(
                "card {} authorization {}",
                state.row.id, request.authorization_id
            ),
            lines: vec![
                card_line(
                    &funding,
                    Direction::Debit,
                    request.amount_minor,
                    &request.currency,
                ),
                card_line(
                    &SystemAccount::CardNetwork.account_id(&request.currency),
                    Direction::Credit,
                    request.amount_minor,
                    &request.currency,
                ),
            ],
        };
        let mut approved = row.clone();
        let hold_id = ledger::new_transaction_id();
        approved.ledger_transaction_id = Some(hold_id.clone());
        let expiry = holds::open(&mut approved, env.ctx.hold_ttl);
        let plan = Plan {
            ledger: vec![LedgerWrite::Record {
                id: hold_id,
                entry,
                phase: Phase::Pending,
            }],
            card_transactions: vec![approved.clone()],
            timers: vec![expiry],
            ..Plan::default()
        };
        let held = commit(&env.db, &state.row.id, plan)
            .await
            .map(|()| approved);
        match held {
            Ok(approved) => {
                state.spend = state.spend.add(now, request.amount_minor, request.channel);
                crate::metrics::card_decision(None);
                let decision = decision_of(&approved, false);
                return answer(state, Ok(CardReply::Decision(decision)));
            }
            Err(error) if error.is_unique_violation() => {
                return duplicate_decision(env, state, &request).await;
            }
            Err(error) if error.is_insufficient_funds() => Some(Decline::InsufficientFunds),
            Err(error) if error.is_unholdable() => {
                tracing::warn!(card = %state.row.id, authorization_id = %request.authorization_id, %error, "authorization the ledger cannot hold declined");
                Some(Decline::AmountTooLarge)
            }
            Err(error) => return Err(error.into()),
        }
    } else {
        None
    };
    let reason = match decided {
        Err(reason) => reason,
        Ok(_) => unheld.unwrap_or(Decline::InsufficientFunds),
    };
    row.status = store::TX_DECLINED.to_owned();
    row.decline_reason = Some(reason.as_str().to_owned());
    let plan = Plan {
        card_transactions: vec![row.clone()],
        ..Plan::default()
    };
    let written = commit(&env.db, &state.row.id, plan).await;
    match written {
        Ok(()) => {
            crate::metrics::card_decision(Some(reason.as_str()));
            answer(state, Ok(CardReply::Decision(decision_of(&row, false))))
        }
        Err(error) if error.is_unique_violation() => duplicate_decision(env, state, &request).await,
        Err(error) => Err(error.into()),
    }
}

/// A write that collided with a request decided meanwhile (on another
/// node): that decision, by event id or authorization id.
async fn duplicate_decision(
    env: &EntityEnv<CardContext>,
    state: CardState,
    request: &AuthorizationRequest,
) -> Step {
    match replay::earlier_decision(&env.db, &state.row.id, request).await? {
        Some(decision) => answer(state, Ok(CardReply::Decision(decision))),
        None => Err(RuntimeError::Store(StoreError::Unavailable(format!(
            "event {} collided but is not stored",
            request.event_id
        )))),
    }
}

pub(super) fn recorded(duplicate: bool, ignored: bool) -> CardResult {
    Ok(CardReply::Recorded { duplicate, ignored })
}

/// The answer to a provider event after its write: recorded, recorded
/// before (the event id's unique index), or refused for good by the ledger.
pub(super) fn settled(state: CardState, written: Result<(), WriteError>) -> Step {
    match written {
        Ok(()) => answer(state, recorded(false, false)),
        Err(error) if error.is_unique_violation() => answer(state, recorded(true, false)),
        Err(error) => match error.refused_entry() {
            Some(failure) => {
                tracing::warn!(card = %state.row.id, %error, "card entry refused by the ledger");
                answer(state, Err(failure))
            }
            None => Err(error.into()),
        },
    }
}

/// Posts an approved authorization's hold. A clearing for less than the
/// hold posts that amount and releases the rest; a clearing never takes
/// more than was held (the network settles any excess as a new
/// authorization).
async fn clear(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    event_id: String,
    authorization_id: String,
    amount_minor: Option<i64>,
) -> Step {
    if replayed(&env.db, &event_id).await?.is_some() {
        return answer(state, recorded(true, false));
    }
    let authorization = {
        let mut pooled = env.db.get().await?;
        let mut tx = pooled.tx();
        store::authorization(&mut tx, &state.row.id, &authorization_id).await?
    };
    let Some(authorization) = authorization else {
        tracing::warn!(card = %state.row.id, %authorization_id, "clearing for an unknown authorization ignored");
        return answer(state, recorded(false, true));
    };
    let Some(hold) = authorization
        .ledger_transaction_id
        .clone()
        .filter(|_| authorization.status == store::TX_APPROVED)
    else {
        tracing::info!(card = %state.row.id, %authorization_id, status = %authorization.status, "clearing for an authorization not open; ignored");
        return answer(state, recorded(false, true));
    };
    let held = authorization.hold_minor;
    let amount = amount_minor.unwrap_or(held).clamp(0, held);
    if amount_minor.is_some_and(|asked| asked > held) {
        tracing::warn!(card = %state.row.id, %authorization_id, asked = ?amount_minor, held, "clearing above the hold cleared at the hold");
    }
    let funding = funding_account(env, &mut state).await?;
    let mut clearing = transaction_row(
        &state.row,
        &event_id,
        &authorization_id,
        store::KIND_CLEAR,
        store::TX_POSTED,
        amount,
        &authorization.currency,
    );
    clearing.merchant_name = authorization.merchant_name.clone();
    clearing.mcc = authorization.mcc.clone();
    clearing.channel = authorization.channel.clone();
    clearing.country = authorization.country.clone();
    let mut plan = Plan::default();
    if amount == held {
        let id = ledger::new_transaction_id();
        plan.ledger.push(LedgerWrite::Post {
            hold_id: hold.clone(),
            id: id.clone(),
        });
        clearing.ledger_transaction_id = Some(id);
    } else {
        plan.ledger.push(LedgerWrite::Void {
            hold_id: hold.clone(),
            id: ledger::new_transaction_id(),
        });
        if amount > 0 {
            let currency = clearing.currency.clone();
            let entry = Entry {
                merchant_id: Some(state.row.merchant_id.clone()),
                settlement_key: None,
                description: format!("card {} clearing {authorization_id}", state.row.id),
                lines: vec![
                    card_line(&funding, Direction::Debit, amount, &currency),
                    card_line(
                        &SystemAccount::CardNetwork.account_id(&currency),
                        Direction::Credit,
                        amount,
                        &currency,
                    ),
                ],
            };
            let id = ledger::new_transaction_id();
            plan.ledger.push(LedgerWrite::Record {
                id: id.clone(),
                entry,
                phase: Phase::Posted,
            });
            clearing.ledger_transaction_id = Some(id);
        }
    }
    holds::end(
        &mut plan,
        &authorization,
        &hold,
        store::TX_CLEARED,
        clearing.created_at,
    );
    plan.card_transactions.push(clearing);
    let written = commit(&env.db, &state.row.id, plan).await;
    settled(state, written)
}

/// Credits a refund back to the funding account the card spends from.
async fn refund(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    request: RefundRequest,
) -> Step {
    if request.currency != state.row.currency || request.amount_minor <= 0 {
        tracing::warn!(card = %state.row.id, event_id = %request.event_id, "refund in another currency or of no amount ignored");
        return answer(state, recorded(false, true));
    }
    let funding = funding_account(env, &mut state).await?;
    let authorization_id = request
        .authorization_id
        .clone()
        .unwrap_or_else(|| request.event_id.clone());
    let mut row = transaction_row(
        &state.row,
        &request.event_id,
        &authorization_id,
        store::KIND_REFUND,
        store::TX_POSTED,
        request.amount_minor,
        &request.currency,
    );
    row.merchant_name = request.merchant.clone();
    row.mcc = request.mcc.clone();
    let entry = Entry {
        merchant_id: Some(state.row.merchant_id.clone()),
        settlement_key: None,
        description: format!("card {} refund {}", state.row.id, request.event_id),
        lines: vec![
            card_line(
                &SystemAccount::CardNetwork.account_id(&request.currency),
                Direction::Debit,
                request.amount_minor,
                &request.currency,
            ),
            card_line(
                &funding,
                Direction::Credit,
                request.amount_minor,
                &request.currency,
            ),
        ],
    };
    let id = ledger::new_transaction_id();
    row.ledger_transaction_id = Some(id.clone());
    let plan = Plan {
        ledger: vec![LedgerWrite::Record {
            id,
            entry,
            phase: Phase::Posted,
        }],
        card_transactions: vec![row],
        ..Plan::default()
    };
    let written = commit(&env.db, &state.row.id, plan).await;
    settled(state, written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(id: &str, status: &str, second: u32) -> CardWalletTokenRow {
        let at = chrono::NaiveDate::from_ymd_opt(2026, 11, 25)
            .and_then(|d| d.and_hms_opt(12, 0, second))
            .unwrap();
        CardWalletTokenRow {
            id: id.into(),
            card_id: "card_1".into(),
            merchant_id: "m".into(),
            wallet: "apple_pay".into(),
            status: status.into(),
            device_id: None,
            provider_token_id: None,
            created_at: at,
            updated_at: at,
        }
    }

    #[test]
    fn a_cards_wallet_status_follows_its_tokens() {
        assert_eq!(wallet_status_of(&[]), "none");
        assert_eq!(wallet_status_of(&[token("a", "requested", 1)]), "requested");
        assert_eq!(
            wallet_status_of(&[token("a", "active", 1), token("b", "failed", 2)]),
            "active"
        );
        assert_eq!(
            wallet_status_of(&[token("a", "failed", 1), token("b", "requested", 2)]),
            "requested"
        );
    }

    #[test]
    fn a_limits_patch_merges_field_by_field() {
        let limits = Limits {
            per_transaction_minor: Some(100),
            daily_spend_minor: Some(1_000),
            monthly_spend_minor: None,
            atm_daily_minor: Some(5),
            online_enabled: true,
            international_enabled: false,
            atm_enabled: false,
        };
        let patch = LimitsPatch {
            daily_spend_minor: Some(Some(2_000)),
            atm_daily_minor: Some(None),
            atm_enabled: Some(true),
            ..LimitsPatch::default()
        };
        assert_eq!(
            patch.merged(limits),
            Limits {
                daily_spend_minor: Some(2_000),
                atm_daily_minor: None,
                atm_enabled: true,
                ..limits
            }
        );
        assert_eq!(LimitsPatch::default().merged(limits), limits);
    }
}

//! A transition's writes, as data.
//!
//! An actor's step decides what it wants written and hands the store a
//! [`Plan`]: the entity rows it creates or moves (each move under the
//! version it expects), the ledger transactions it records, posts or
//! voids, its audit records, the webhook events it raises, the timers it
//! completes or sets, and the Idempotency-Key answer it records. The store
//! writes the plan atomically with other writers' plans (see
//! [`crate::commit`]) and answers [`Written`] or why it was refused
//! ([`PlanError`]). A batch's plans are read for, judged one by one in
//! memory (`judge`), and written together with set-based statements
//! (`batch`); how, and what each backend sends, is the store's business
//! alone: nothing in a plan names a transaction or a backend.
//!
//! Every id a plan writes is chosen when the plan is made, so the rows that
//! name each other (a settlement and its hold, a posting and the row that
//! shows it) are filled in before anything is written, and a plan can be
//! judged, compared and replayed as a value.

#[macro_use]
mod statements;
mod batch;
mod cards;
mod judge;
mod moves;
mod rows;

use crate::audit::AuditRecord;
use crate::ledger::{Entry, LedgerError, Phase};
use crate::models::{
    CardRow, CardTransactionRow, CardWalletTokenRow, IdempotencyRow, QuoteRow, SettlementRow,
    TransferRow, WebhookAttemptRow, WebhookEndpointRow, WebhookEventRow,
};
use crate::store::timers::TimerRow;
use crate::vocabulary::{AccountId, CardId, MerchantId, TransferId};
use crate::{Refusal, StoreError};

pub(crate) use batch::write;

/// One node's ownership of a cluster slot: the slot and the epoch its
/// claim raised it to (see [`crate::store::cluster`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fence {
    pub slot: i32,
    pub epoch: i64,
}

/// What one transition wants written; see the module documentation. Its
/// parts are judged in a fixed order, and the first refusal is its answer:
/// the funding check, the timer it completes, new settlements (key, then
/// hold), the answer's key, new transfers, card transactions, ledger
/// writes, moved rows, new timers. Its [`RowWrite`]s are not judged: they
/// are written last, in order.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// The ownership the writes need where several nodes share the
    /// database: the plan is refused ([`PlanError::Fenced`]) unless its
    /// entity's slot is still held under this epoch. Set by the handle the
    /// plan is committed through ([`crate::Db::fenced`]), never by the
    /// transition that makes the plan.
    pub fence: Option<Fence>,
    /// Refuse the plan unless this account is a funding account of this
    /// merchant in this currency (a settlement's source).
    pub funding_source: Option<FundingSource>,
    /// A fired timer the transition consumes: the plan is refused
    /// ([`PlanError::TimerLost`]) if its claim passed to another node.
    pub completes_timer: Option<TimerClaim>,
    /// Settlements created with their holds. A settlement's key is unique
    /// per merchant: a plan whose key is taken is refused alone.
    pub new_settlements: Vec<NewSettlement>,
    /// Transfers created. A quote binds one transfer: a plan whose quote is
    /// bound already is refused alone ([`StoreError::UniqueViolation`]), as
    /// is one whose (merchant, key) names a transfer already
    /// ([`Refusal::KeyTaken`]).
    pub new_transfers: Vec<TransferRow>,
    pub ledger: Vec<LedgerWrite>,
    /// Card transactions recorded. A provider event is recorded once (its
    /// source and id are unique) and an authorization once per card: a
    /// plan recording one again is refused alone
    /// ([`StoreError::UniqueViolation`]).
    pub card_transactions: Vec<CardTransactionRow>,
    pub moves: Vec<RowMove>,
    /// Timers deleted where they exist: an authorization's hold ended
    /// before its expiry.
    pub cancels_timers: Vec<String>,
    pub timers: Vec<TimerRow>,
    pub audit: Vec<AuditRecord>,
    /// Events for the merchant's webhook endpoint. The store decides
    /// whether each waits for delivery (the merchant has an endpoint) or
    /// is written already skipped, and says so in [`Written::events_wait`].
    pub events: Vec<WebhookEventRow>,
    /// The Idempotency-Key's answer, recorded with the plan's writes: a key
    /// already recorded refuses the plan ([`Refusal::KeyTaken`]).
    pub answer: Option<IdempotencyRow>,
    pub rows: Vec<RowWrite>,
}

#[derive(Clone, Debug)]
pub struct FundingSource {
    pub account_id: AccountId,
    pub merchant_id: MerchantId,
    pub currency: String,
}

#[derive(Clone, Debug)]
pub struct TimerClaim {
    pub timer_id: String,
    pub claim_token: String,
}

/// A settlement's row and the hold it places, recorded under the
/// transaction id its `funding_transaction_id` names.
#[derive(Clone, Debug)]
pub struct NewSettlement {
    pub row: SettlementRow,
    pub hold: Entry,
}

/// One ledger write, under an id chosen when the plan was made.
#[derive(Clone, Debug)]
pub enum LedgerWrite {
    /// A balanced entry, pending (a hold) or posted. A debit of a funding
    /// account must be covered by its available balance.
    Record {
        id: String,
        entry: Entry,
        phase: Phase,
    },
    /// Posts the pending transaction `hold_id` as transaction `id`.
    Post { hold_id: String, id: String },
    /// Voids the pending transaction `hold_id` as transaction `id`.
    Void { hold_id: String, id: String },
}

/// An entity row written over the version it was read at; another writer
/// having moved it refuses the plan with [`StoreError::Conflict`].
#[derive(Clone, Debug)]
pub enum RowMove {
    Settlement {
        row: SettlementRow,
        expected_version: i64,
    },
    Transfer {
        row: TransferRow,
        expected_version: i64,
    },
    /// The card written whole. Cards move no money, so nothing in the
    /// batch's judgement reads them: the move is written as one statement
    /// ([`RowWrite::Card`]), before the plan's other rows, and a card moved
    /// meanwhile fails it there.
    Card { row: CardRow, expected_version: i64 },
    /// An open authorization (approved, holding `hold_id`) whose hold
    /// ended or was renewed. Card transactions carry no version: the
    /// authorization's status and hold are what it is read at.
    Authorization(AuthorizationMove),
}

/// A row that moves no money: a card issued, changed or replaced, a wallet
/// token, a webhook endpoint, a quote. These are rare next to a batch's
/// money, so each is one statement, written after the batch's other
/// writes in plan order rather than set-based. A version, a key or a row
/// another writer took fails its batch, which is written again in halves
/// until only the plan that lost it hears [`StoreError::Conflict`] or
/// [`StoreError::UniqueViolation`].
#[derive(Clone, Debug)]
pub enum RowWrite {
    /// The card written whole over the version it was read at.
    Card {
        row: CardRow,
        expected_version: i64,
    },
    /// A card being issued; a second live card for the same replacement
    /// is a [`StoreError::UniqueViolation`].
    NewCard(CardRow),
    /// A card the issuer never issued, removed while it is still issuing.
    IssuingCardDropped {
        card_id: CardId,
    },
    NewWalletToken(CardWalletTokenRow),
    /// A wallet token of the card moved to `status`; a token the card does
    /// not have is a [`StoreError::Conflict`].
    WalletTokenStatus {
        card_id: CardId,
        token_id: crate::vocabulary::WalletTokenId,
        status: crate::vocabulary::WalletTokenStatus,
        at: chrono::NaiveDateTime,
    },
    /// The merchant's webhook endpoint, created or replaced.
    WebhookEndpoint(WebhookEndpointRow),
    /// The merchant's webhook endpoint removed, with `audit` recorded if
    /// there was one to remove.
    WebhookEndpointRemoved {
        merchant_id: MerchantId,
        audit: AuditRecord,
    },
    /// The merchant's events still waiting for delivery skipped, if it has
    /// no endpoint to deliver them to.
    PendingEventsSkipped {
        merchant_id: MerchantId,
        at: chrono::NaiveDateTime,
    },
    /// An attempted event's new delivery state and the attempt's record,
    /// written only if the event is still pending in the attempt's round
    /// (a replay or a removal in between wins), and then its retry timer.
    Attempt {
        next: WebhookEventRow,
        attempt: WebhookAttemptRow,
        retry: Option<TimerRow>,
    },
    /// The transfer's delivered and dead-lettered events re-armed for an
    /// attempt at `at`, in a new round; [`Written::rearmed`] says how many.
    EventsRearmed {
        merchant_id: MerchantId,
        transfer_id: TransferId,
        at: chrono::NaiveDateTime,
    },
    NewQuote(QuoteRow),
}

/// What becomes of an open authorization: `status`, holding `hold_minor`
/// under `ledger_transaction_id` (the hold it replaced `hold_id` with, or
/// `hold_id` itself when it ends).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizationMove {
    pub id: String,
    pub hold_id: String,
    pub status: crate::vocabulary::CardTransactionStatus,
    pub ledger_transaction_id: String,
    pub hold_minor: crate::money::MinorUnits,
    pub at: chrono::NaiveDateTime,
}

/// What a written plan tells its writer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Some of the plan's events wait for delivery: wake the merchant's
    /// endpoint.
    pub events_wait: bool,
    /// Events its [`RowWrite::EventsRearmed`] re-armed.
    pub rearmed: usize,
}

/// Why a plan was not written. Nothing of it was.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The ledger refused an entry: funds, overflow, currency, an account
    /// or a hold that is not there or not pending.
    #[error(transparent)]
    Ledger(LedgerError),
    /// The settlement's source is not a funding account of its merchant in
    /// its currency.
    #[error("{0}")]
    Source(String),
    /// The slot of the plan's entity passed to another node (or was
    /// released) since the writer took it: a former owner writes nothing.
    #[error("slot {slot} is no longer held under epoch {epoch}")]
    Fenced { slot: i32, epoch: i64 },
    /// The timer the plan completes was claimed by another node.
    #[error("timer {timer_id} was claimed by another node")]
    TimerLost { timer_id: String },
    /// A row moved under the plan ([`StoreError::Conflict`]), a key was
    /// taken ([`Refusal::KeyTaken`], [`StoreError::UniqueViolation`]), or
    /// the database failed.
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for PlanError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Refused(Refusal::InsufficientFunds { account_id }) => {
                PlanError::Ledger(LedgerError::InsufficientFunds { account_id })
            }
            other => PlanError::Store(other),
        }
    }
}

impl From<LedgerError> for PlanError {
    fn from(error: LedgerError) -> Self {
        match error {
            LedgerError::Store(store) => store.into(),
            refused => PlanError::Ledger(refused),
        }
    }
}

impl From<diesel::result::Error> for PlanError {
    fn from(error: diesel::result::Error) -> Self {
        StoreError::from(error).into()
    }
}

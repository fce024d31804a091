//! Spending with the card: authorizations decided by the machine and held
//! by the ledger, clearings that post (part of) a hold, and refunds back to
//! the funding account. Reversals and expiries of holds are in `holds`.

use tern_schema::ledger::{self, Direction, Entry, Line, Phase, SystemAccount};
use tern_schema::models::{CardRow, CardTransactionRow};
use tern_schema::money::MinorUnits;
use tern_schema::plan::{LedgerWrite, Plan};
use tern_schema::store::cards as store;
use tern_schema::store::ledger as ledger_store;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{
    AccountId, AccountKind, CardTransactionKind as Kind, CardTransactionStatus as TxStatus,
    EventSource,
};
use tern_schema::{Db, StoreError};

use super::holds::{self, Heard};
use super::kind::{CardContext, CardState};
use super::machine::{Authorization, Decline, Effect, Event};
use super::messages::{AuthorizationRequest, CardReply, RefundRequest};
use super::replay::{self, decision_of};
use super::write::{
    answer, commit, decided, is_insufficient_funds, is_unholdable, is_unique_violation, recorded,
    rejected, runtime_error, settled, unexpected, Step,
};
use crate::runtime::{EntityEnv, RuntimeError, RuntimeResult, StepError};

/// The merchant's funding account in the card's currency.
pub(super) async fn funding_account(
    env: &EntityEnv<CardContext>,
    state: &mut CardState,
) -> RuntimeResult<AccountId> {
    if let Some(account) = &state.funding_account {
        return Ok(account.clone());
    }
    let mut pooled = env.db.get().await?;
    let account = ledger_store::merchant_accounts(&mut pooled.tx(), &state.row.merchant_id)
        .await?
        .into_iter()
        .find(|account| {
            account.kind == AccountKind::Funding && account.currency == state.row.currency
        })
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
    kind: Kind,
    status: TxStatus,
    amount_minor: MinorUnits,
    currency: &str,
) -> CardTransactionRow {
    let now = utc_now();
    CardTransactionRow {
        id: format!("ctx_{}", uuid::Uuid::now_v7().simple()),
        card_id: card.id.clone(),
        merchant_id: card.merchant_id.clone(),
        provider_event_id: event_id.to_owned(),
        authorization_id: authorization_id.to_owned(),
        kind,
        status,
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
        hold_minor: MinorUnits::ZERO,
        event_source: EventSource::Provider,
    }
}

/// A transaction that follows an authorization (its clearing, or a
/// release of its hold), described like it.
pub(super) fn following(
    card: &CardRow,
    authorization: &CardTransactionRow,
    event_id: &str,
    kind: Kind,
    status: TxStatus,
    amount_minor: MinorUnits,
) -> CardTransactionRow {
    let mut row = transaction_row(
        card,
        event_id,
        &authorization.authorization_id,
        kind,
        status,
        amount_minor,
        &authorization.currency,
    );
    row.merchant_name = authorization.merchant_name.clone();
    row.mcc = authorization.mcc.clone();
    row.channel = authorization.channel.clone();
    row.country = authorization.country.clone();
    row
}

pub(super) async fn replayed(db: &Db, event_id: &str) -> RuntimeResult<Option<CardTransactionRow>> {
    let mut pooled = db.get().await?;
    let mut tx = pooled.tx();
    Ok(store::transaction_by_event(&mut tx, event_id).await?)
}

fn card_line(
    account_id: &AccountId,
    direction: Direction,
    amount_minor: MinorUnits,
    currency: &str,
) -> Line {
    Line {
        account_id: account_id.clone(),
        direction,
        amount_minor,
        currency: currency.to_owned(),
    }
}

/// Decides an authorization request: the machine for everything but the
/// funds, then the ledger's hold, refused in the same statement when the
/// funding account cannot cover it.
pub(super) async fn authorize(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    request: AuthorizationRequest,
) -> Step {
    if let Some(decision) = replay::earlier_decision(&env.db, &state.row.id, &request).await? {
        return answer(state, Ok(CardReply::Decision(decision)));
    }
    let asked = Authorization {
        amount_minor: request.amount_minor,
        currency: request.currency.clone(),
        channel: request.channel,
        country: request.country.clone(),
        at: utc_now(),
    };
    let mut row = transaction_row(
        &state.row,
        &request.event_id,
        &request.authorization_id,
        Kind::Authorization,
        TxStatus::Approved,
        request.amount_minor,
        &request.currency,
    );
    row.merchant_name = request.merchant.clone();
    row.mcc = request.mcc.clone();
    row.channel = request.channel.as_str().to_owned();
    row.country = request.country.clone();
    // Whether the card's merchant and user may spend at all: asked every
    // time, as it comes before the card's own reasons.
    let owners = env.ctx.standing.verdict(&env.db, &state.row).await?;
    let (next, effects) = match decided(
        &state,
        Event::Authorize {
            request: asked,
            owners,
        },
    ) {
        Ok(decided) => decided,
        Err(refused) => return rejected(state, refused),
    };
    let reason = match effects.as_slice() {
        [Effect::Hold { amount_minor }] => {
            match hold(env, &mut state, &row, &request, *amount_minor).await {
                Ok(approved) => {
                    state.spend = next.spend;
                    crate::metrics::card_decision(None);
                    let decision = decision_of(&approved, false);
                    return answer(state, Ok(CardReply::Decision(decision)));
                }
                Err(error) if is_unique_violation(&error) => {
                    return duplicate_decision(env, state, &request).await;
                }
                Err(error) if is_insufficient_funds(&error) => {
                    hold_refused(&state, Decline::InsufficientFunds)?
                }
                Err(error) if is_unholdable(&error) => {
                    tracing::warn!(card = %state.row.id, authorization_id = %request.authorization_id, %error, "authorization the ledger cannot hold declined");
                    hold_refused(&state, Decline::AmountTooLarge)?
                }
                Err(error) => return Err(runtime_error(error)),
            }
        }
        [Effect::Decline(reason)] => *reason,
        other => return Err(unexpected_all(other, "authorize")),
    };
    row.status = TxStatus::Declined;
    row.decline_reason = Some(reason);
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
        Err(error) if is_unique_violation(&error) => duplicate_decision(env, state, &request).await,
        Err(error) => Err(runtime_error(error)),
    }
}

/// The reason the machine declines an approved request the ledger could
/// not hold.
fn hold_refused(state: &CardState, refusal: Decline) -> RuntimeResult<Decline> {
    match decided(state, Event::HoldRefused(refusal)) {
        Ok((_, effects)) => match effects.as_slice() {
            [Effect::Decline(reason)] => Ok(*reason),
            other => Err(unexpected_all(other, "hold_refused")),
        },
        Err(rejected) => Err(RuntimeError::Refused(rejected.to_string())),
    }
}

fn unexpected_all(effects: &[Effect], command: &str) -> RuntimeError {
    match effects.first() {
        Some(effect) => unexpected(effect, command),
        None => RuntimeError::Refused(format!("card machine asked nothing in reply to {command}")),
    }
}

/// Holds an approved request's amount on the funding account, recording
/// the authorization and its expiry timer in the same plan.
async fn hold(
    env: &EntityEnv<CardContext>,
    state: &mut CardState,
    row: &CardTransactionRow,
    request: &AuthorizationRequest,
    amount_minor: MinorUnits,
) -> Result<CardTransactionRow, StepError> {
    let funding = funding_account(env, state).await?;
    let entry = Entry {
        merchant_id: Some(state.row.merchant_id.clone()),
        settlement_key: None,
        description: format!(
            "card {} authorization {}",
            state.row.id, request.authorization_id
        ),
        lines: vec![
            card_line(&funding, Direction::Debit, amount_minor, &request.currency),
            card_line(
                &SystemAccount::CardNetwork.account_id(&request.currency),
                Direction::Credit,
                amount_minor,
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
    commit(&env.db, &state.row.id, plan).await?;
    Ok(approved)
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

/// Posts an approved authorization's hold. A clearing for less than the
/// hold posts that amount and releases the rest; a clearing never takes
/// more than was held (the network settles any excess as a new
/// authorization).
pub(super) async fn clear(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    event_id: String,
    authorization_id: String,
    amount_minor: Option<MinorUnits>,
) -> Step {
    let asked_minor = amount_minor;
    let event = |held_minor| Event::Clear {
        held_minor,
        asked_minor,
    };
    let heard = holds::hear(env, &state, &event_id, &authorization_id, event).await?;
    let ((authorization, hold), effects) = match heard {
        Ok(Heard::Acts { open, effects }) => (open, effects),
        Ok(Heard::Repeated) => return answer(state, recorded(true, false)),
        Ok(Heard::Ignored { found: None, .. }) => {
            tracing::warn!(card = %state.row.id, %authorization_id, "clearing for an unknown authorization ignored");
            return answer(state, recorded(false, true));
        }
        Ok(Heard::Ignored {
            found: Some(authorization),
            ..
        }) => {
            tracing::info!(card = %state.row.id, %authorization_id, status = %authorization.status, "clearing for an authorization not open; ignored");
            return answer(state, recorded(false, true));
        }
        Err(refused) => return rejected(state, refused),
    };
    let held = authorization.hold_minor;
    if amount_minor.is_some_and(|asked| asked > held) {
        tracing::warn!(card = %state.row.id, %authorization_id, asked = ?amount_minor, %held, "clearing above the hold cleared at the hold");
    }
    let funding = funding_account(env, &mut state).await?;
    let mut plan = Plan::default();
    let mut cleared_minor = MinorUnits::ZERO;
    let mut ledger_transaction_id = None;
    for effect in effects {
        match effect {
            Effect::PostHold => {
                let id = ledger::new_transaction_id();
                plan.ledger.push(LedgerWrite::Post {
                    hold_id: hold.clone(),
                    id: id.clone(),
                });
                cleared_minor = held;
                ledger_transaction_id = Some(id);
            }
            Effect::VoidHold => plan.ledger.push(LedgerWrite::Void {
                hold_id: hold.clone(),
                id: ledger::new_transaction_id(),
            }),
            Effect::PostClearing { amount_minor } => {
                let currency = authorization.currency.clone();
                let entry = Entry {
                    merchant_id: Some(state.row.merchant_id.clone()),
                    settlement_key: None,
                    description: format!("card {} clearing {authorization_id}", state.row.id),
                    lines: vec![
                        card_line(&funding, Direction::Debit, amount_minor, &currency),
                        card_line(
                            &SystemAccount::CardNetwork.account_id(&currency),
                            Direction::Credit,
                            amount_minor,
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
                cleared_minor = amount_minor;
                ledger_transaction_id = Some(id);
            }
            other => return Err(unexpected(&other, "clear")),
        }
    }
    let mut clearing = following(
        &state.row,
        &authorization,
        &event_id,
        Kind::Clear,
        TxStatus::Posted,
        cleared_minor,
    );
    clearing.ledger_transaction_id = ledger_transaction_id;
    holds::end(
        &mut plan,
        &authorization,
        &hold,
        TxStatus::Cleared,
        clearing.created_at,
    );
    plan.card_transactions.push(clearing);
    let written = commit(&env.db, &state.row.id, plan).await;
    settled(state, written)
}

/// Credits a refund back to the funding account the card spends from.
pub(super) async fn refund(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    request: RefundRequest,
) -> Step {
    let event = Event::Refund {
        amount_minor: request.amount_minor,
        currency: request.currency.clone(),
    };
    let effects = match decided(&state, event) {
        Ok((_, effects)) => effects,
        Err(refused) => return rejected(state, refused),
    };
    let amount_minor = match effects.as_slice() {
        [Effect::CreditRefund { amount_minor }] => *amount_minor,
        [Effect::Ignore] => {
            tracing::warn!(card = %state.row.id, event_id = %request.event_id, "refund in another currency or of no amount ignored");
            return answer(state, recorded(false, true));
        }
        other => return Err(unexpected_all(other, "refund")),
    };
    let funding = funding_account(env, &mut state).await?;
    let authorization_id = request
        .authorization_id
        .clone()
        .unwrap_or_else(|| request.event_id.clone());
    let mut row = transaction_row(
        &state.row,
        &request.event_id,
        &authorization_id,
        Kind::Refund,
        TxStatus::Posted,
        amount_minor,
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
                amount_minor,
                &request.currency,
            ),
            card_line(&funding, Direction::Credit, amount_minor, &request.currency),
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

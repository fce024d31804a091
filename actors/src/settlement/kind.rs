//! The settlement actor: one per in-flight settlement. It feeds events to
//! the pure machine, writes each transition in one transaction (the row
//! under its version, the ledger entries, the due timer, the audit record),
//! then calls providers outside that transaction and feeds their answers
//! back as events.

use chrono::NaiveDateTime;
use serde_json::json;
use tern_schema::audit::{AuditActor, AuditRecord};
use tern_schema::ledger::{self, Direction, Entry, LedgerError, Line, Phase, SystemAccount};
use tern_schema::models::SettlementRow;
use tern_schema::plan::{LedgerWrite, Plan};
use tern_schema::store::settlements;
use tern_schema::vocabulary::{AccountId, MerchantId, SettlementKey};
use tern_schema::{Db, StoreError};

use super::machine::{self, Effect, Event, Method, Rejected, RetryPolicy, Reversal, Status};
use super::parent::Parents;
use super::providers::Providers;
use super::record::{apply_state, entity_id, split_entity_id, state_of};
use crate::runtime::timers;
use crate::runtime::{
    self, EntityEnv, EntityKind, RuntimeError, RuntimeResult, StepError, TimerFiring, TimerSpec,
    Transition,
};

/// Payload of a settlement's due timer (retry, or a pending operation's check).
const TIMER_DUE: &str = "due";

/// What every settlement actor needs: its providers, the retry policy, and
/// the transfers its legs report to.
#[derive(Clone)]
pub struct SettlementContext {
    pub providers: Providers,
    pub policy: RetryPolicy,
    pub parents: Parents,
}

pub enum SettlementCommand {
    /// The intent is durable: make the first attempt.
    Start,
    /// Re-activated with a provider call maybe under way: ask the provider.
    Resume,
    /// A provider's answer (or an inquiry's).
    Provider(Event),
    Timer(TimerFiring),
    /// The provider said something happened (an inbound webhook): ask it
    /// under the settlement's own key. The webhook's body is never trusted.
    Nudge,
    /// Reverse a succeeded settlement; answers when the provider has.
    Reverse {
        actor: AuditActor,
        request_id: String,
        reason: String,
    },
}

/// The answer to [`SettlementCommand::Reverse`].
#[derive(Debug)]
pub enum ReverseOutcome {
    Reversed(Box<SettlementRow>),
    /// Accepted by the provider, finishing later.
    Pending(Box<SettlementRow>),
    Declined {
        row: Box<SettlementRow>,
        detail: String,
    },
    /// The provider could not be reached; nothing happened.
    Unavailable(String),
    Refused(Rejected),
    /// A refund needs the merchant's available funds.
    InsufficientFunds,
}

pub enum SettlementReply {
    Ack,
    Reverse(ReverseOutcome),
}

pub struct SettlementKind;

/// Who caused a transition, for its audit record.
#[derive(Clone)]
struct Origin {
    actor: AuditActor,
    request_id: String,
}

impl Origin {
    fn system(row: &SettlementRow) -> Origin {
        Origin {
            actor: AuditActor::System,
            request_id: row.request_id.clone(),
        }
    }
}

/// A settlement's ledger refusal (other than a refund's shortfall, which
/// [`reverse`] answers) is not the caller's to fix: the edge answers 503.
fn runtime_error(error: StepError) -> RuntimeError {
    error.into_runtime(|other| {
        RuntimeError::Store(StoreError::Unavailable(format!(
            "ledger refused a settlement transition: {other}"
        )))
    })
}

enum Step {
    Moved {
        row: Box<SettlementRow>,
        effects: Vec<Effect>,
    },
    Rejected(Rejected),
}

impl EntityKind for SettlementKind {
    const NAME: &'static str = "settlement";
    type State = SettlementRow;
    type Command = SettlementCommand;
    type Reply = SettlementReply;
    type Context = SettlementContext;

    async fn load(env: EntityEnv<SettlementContext>) -> RuntimeResult<Option<SettlementRow>> {
        let Some((merchant_id, key)) = split_entity_id(&env.id) else {
            return Ok(None);
        };
        let mut pooled = env.db.get().await?;
        let mut tx = pooled.tx();
        let key = SettlementKey::new(key);
        Ok(settlements::find(&mut tx, &MerchantId::new(merchant_id), &key).await?)
    }

    async fn handle(
        env: EntityEnv<SettlementContext>,
        row: SettlementRow,
        command: SettlementCommand,
    ) -> RuntimeResult<Transition<Self>> {
        match command {
            SettlementCommand::Start => {
                let origin = Origin::system(&row);
                advance(env, row, Event::Start, None, origin).await
            }
            SettlementCommand::Provider(event) => {
                let origin = Origin::system(&row);
                advance(env, row, event, None, origin).await
            }
            SettlementCommand::Timer(firing) => {
                let origin = Origin::system(&row);
                advance(env, row, Event::RetryDue, Some(firing), origin).await
            }
            SettlementCommand::Resume => Ok(resume(env, row)),
            SettlementCommand::Nudge => Ok(nudge(env, row)),
            SettlementCommand::Reverse {
                actor,
                request_id,
                reason,
            } => reverse(env, row, Origin { actor, request_id }, reason).await,
        }
    }

    fn in_flight_since(row: &SettlementRow) -> Option<NaiveDateTime> {
        has_work_left(row).then_some(row.updated_at)
    }

    async fn list_in_flight(
        db: Db,
        after: Option<String>,
        limit: i64,
    ) -> RuntimeResult<Vec<String>> {
        let after = after
            .as_deref()
            .and_then(split_entity_id)
            .unwrap_or(("", ""));
        let mut pooled = db.get().await?;
        let keys = settlements::with_work_left(&mut pooled.tx(), after, limit).await?;
        Ok(keys.iter().map(|(m, k)| entity_id(m, k)).collect())
    }

    /// A transfer's leg lives with its transfer: the saga and its legs
    /// talk in memory, on one node.
    fn route_key(id: &str) -> &str {
        split_entity_id(id)
            .and_then(|(_, key)| crate::transfer::legs::parse_leg_key(key))
            .map_or(id, |(transfer_id, _)| transfer_id)
    }

    /// Woken by another node (a provider event reached it): ask the
    /// provider.
    fn wake_command() -> Option<SettlementCommand> {
        Some(SettlementCommand::Nudge)
    }

    fn timer_command(firing: TimerFiring) -> RuntimeResult<SettlementCommand> {
        if firing.payload == TIMER_DUE {
            Ok(SettlementCommand::Timer(firing))
        } else {
            Err(RuntimeError::InvalidTimer {
                reason: format!("unknown payload `{}`", firing.payload),
                id: firing.id,
            })
        }
    }

    fn on_activate(row: &SettlementRow) -> Option<SettlementCommand> {
        match (row.status, row.reversal) {
            (Status::Pending, _) => Some(SettlementCommand::Start),
            // A call may have left before the process stopped: ask first.
            (Status::InFlight, _) => Some(SettlementCommand::Resume),
            (Status::Succeeded, Reversal::InFlight) => Some(SettlementCommand::Resume),
            _ => None,
        }
    }
}

fn has_work_left(row: &SettlementRow) -> bool {
    Status::ACTIVE.contains(&row.status) || row.reversal != Reversal::None
}

/// Applies one event and schedules the provider work its effects ask for.
async fn advance(
    env: EntityEnv<SettlementContext>,
    row: SettlementRow,
    event: Event,
    firing: Option<TimerFiring>,
    origin: Origin,
) -> RuntimeResult<Transition<SettlementKind>> {
    let label = format!("{event:?}");
    match step(&env, &row, event, firing.as_ref(), &origin)
        .await
        .map_err(runtime_error)?
    {
        Step::Moved { row, effects } => Ok(follow_up(&env, *row, &effects)),
        Step::Rejected(rejected) => {
            // A late or repeated answer (a timer outliving its purpose, an
            // inquiry racing a result) changes nothing; its timer is done.
            tracing::debug!(settlement = %env.id, %rejected, event = %label, "event ignored");
            if let Some(firing) = firing {
                timers::complete(&env.db, firing).await?;
            }
            Ok(Transition::new(row, SettlementReply::Ack))
        }
    }
}

fn follow_up(
    env: &EntityEnv<SettlementContext>,
    row: SettlementRow,
    effects: &[Effect],
) -> Transition<SettlementKind> {
    let mut transition = Transition::new(row.clone(), SettlementReply::Ack);
    for effect in effects {
        let providers = env.ctx.providers.clone();
        let sent = row.clone();
        transition = match effect {
            Effect::Execute => transition.with_follow_up(async move {
                Some(SettlementCommand::Provider(providers.execute(&sent).await))
            }),
            Effect::Inquire => transition.with_follow_up(async move {
                Some(SettlementCommand::Provider(providers.inquire(&sent).await))
            }),
            Effect::ExecuteReversal => transition.with_follow_up(async move {
                Some(SettlementCommand::Provider(
                    providers.reverse(&sent).await.event,
                ))
            }),
            Effect::InquireReversal => transition.with_follow_up(async move {
                Some(SettlementCommand::Provider(
                    providers.inquire_reversal(&sent).await.event,
                ))
            }),
            _ => transition,
        };
    }
    transition
}

/// Re-activated mid-call: the persisted state cannot tell whether the call
/// left, so ask the provider under the same key before anything else.
fn resume(env: EntityEnv<SettlementContext>, row: SettlementRow) -> Transition<SettlementKind> {
    let providers = env.ctx.providers.clone();
    let sent = row.clone();
    let transition = Transition::new(row.clone(), SettlementReply::Ack);
    match (row.status, row.reversal) {
        (Status::InFlight, _) => transition.with_follow_up(async move {
            Some(SettlementCommand::Provider(providers.inquire(&sent).await))
        }),
        (Status::Succeeded, Reversal::InFlight) => transition.with_follow_up(async move {
            Some(SettlementCommand::Provider(
                providers.inquire_reversal(&sent).await.event,
            ))
        }),
        _ => transition,
    }
}

/// A webhook said the provider moved: ask under the key and let the answer
/// decide, as any other provider answer. A settlement with nothing under way
/// ignores it (a late or repeated webhook).
fn nudge(env: EntityEnv<SettlementContext>, row: SettlementRow) -> Transition<SettlementKind> {
    let providers = env.ctx.providers.clone();
    let sent = row.clone();
    let transition = Transition::new(row.clone(), SettlementReply::Ack);
    match (row.status, row.reversal) {
        (Status::InFlight, _) => transition.with_follow_up(async move {
            Some(SettlementCommand::Provider(providers.inquire(&sent).await))
        }),
        (_, Reversal::InFlight | Reversal::PendingAtProvider) => {
            transition.with_follow_up(async move {
                Some(SettlementCommand::Provider(
                    providers.inquire_reversal(&sent).await.event,
                ))
            })
        }
        _ => {
            tracing::debug!(settlement = %env.id, status = %row.status, "nudge ignored: nothing under way");
            transition
        }
    }
}

/// A reversal answers its caller with the provider's verdict, so the call
/// happens within the command; the actor serialises it with everything else.
async fn reverse(
    env: EntityEnv<SettlementContext>,
    row: SettlementRow,
    origin: Origin,
    reason: String,
) -> RuntimeResult<Transition<SettlementKind>> {
    let requested = step(&env, &row, Event::ReverseRequested, None, &origin).await;
    let reversing = match requested {
        Ok(Step::Moved { row, .. }) => *row,
        Ok(Step::Rejected(rejected)) => {
            let reply = SettlementReply::Reverse(ReverseOutcome::Refused(rejected));
            return Ok(Transition::new(row, reply));
        }
        Err(StepError::Ledger(LedgerError::InsufficientFunds { .. })) => {
            let reply = SettlementReply::Reverse(ReverseOutcome::InsufficientFunds);
            return Ok(Transition::new(row, reply));
        }
        Err(error) => return Err(runtime_error(error)),
    };
    tracing::info!(settlement = %env.id, %reason, "reversal requested");
    let answer = env.ctx.providers.reverse(&reversing).await;
    let event = answer.event.clone();
    let settled = match step(&env, &reversing, event.clone(), None, &origin)
        .await
        .map_err(runtime_error)?
    {
        Step::Moved { row, .. } => *row,
        Step::Rejected(rejected) => {
            return Err(RuntimeError::Unavailable(format!(
                "the reversal's answer did not apply: {rejected}"
            )))
        }
    };
    let outcome = match event {
        Event::ReversalSucceeded(_) => ReverseOutcome::Reversed(Box::new(settled.clone())),
        Event::ReversalPending { .. } => ReverseOutcome::Pending(Box::new(settled.clone())),
        Event::ReversalDeclined { .. } => ReverseOutcome::Declined {
            row: Box::new(settled.clone()),
            detail: answer.detail.unwrap_or_else(|| "declined".into()),
        },
        _ => ReverseOutcome::Unavailable(
            answer
                .detail
                .unwrap_or_else(|| "the provider is unavailable".into()),
        ),
    };
    Ok(Transition::new(settled, SettlementReply::Reverse(outcome)))
}

/// One transition in one transaction: the machine's verdict, the timer it
/// completes, its ledger entries and due time, the row under its version,
/// and the audit record of a status change.
async fn step(
    env: &EntityEnv<SettlementContext>,
    row: &SettlementRow,
    event: Event,
    firing: Option<&TimerFiring>,
    origin: &Origin,
) -> Result<Step, StepError> {
    let current = state_of(row).map_err(|e| RuntimeError::Unavailable(e.to_string()))?;
    let (next_state, effects) = match machine::transition(&current, event, &env.ctx.policy) {
        Ok(moved) => moved,
        Err(rejected) => return Ok(Step::Rejected(rejected)),
    };
    let mut planned = runtime::Step::begin(row, apply_state(row, &next_state), firing);
    for effect in &effects {
        book(&mut planned.plan, &mut planned.next, effect, &env.id);
    }
    let audit = audit_step(row, &planned.next, origin);
    let (next, _) = planned.commit(&env.db, audit).await?;
    if leg_moved(row, &next) {
        env.ctx.parents.notify(&next);
    }
    if next.status != row.status {
        crate::metrics::transition("settlement", row.status.as_str(), next.status.as_str());
        tracing::info!(
            settlement = %env.id,
            from = %row.status,
            to = %next.status,
            attempt = next.attempt,
            failure_reason = next.failure_reason.as_deref().unwrap_or(""),
            "settlement status changed"
        );
    }
    Ok(Step::Moved {
        row: Box::new(next),
        effects,
    })
}

/// Whether a transfer's leg changed in a way its transfer follows: status,
/// reversal, or the payer's challenge (the transfer shows it).
fn leg_moved(before: &SettlementRow, after: &SettlementRow) -> bool {
    after.transfer_id.is_some()
        && (before.status != after.status
            || before.reversal != after.reversal
            || before.client_secret != after.client_secret
            || before.next_action_type != after.next_action_type)
}

/// The bookkeeping of one effect: what it adds to the transition's plan,
/// and the ledger ids it shows on the row.
fn book(plan: &mut Plan, next: &mut SettlementRow, effect: &Effect, entity: &str) {
    let method = next.method;
    match effect {
        Effect::CreditFunding => {
            let id = match next.funding_transaction_id.clone() {
                Some(reserved) => post(plan, reserved),
                // Created before charges reserved their credit.
                None => record(
                    plan,
                    next,
                    SystemAccount::CardAcquirer,
                    Direction::Credit,
                    Phase::Posted,
                    "card charge collected",
                ),
            };
            next.ledger_transaction_id = Some(id);
        }
        Effect::PostHold => {
            if let Some(hold) = next.funding_transaction_id.clone() {
                next.ledger_transaction_id = Some(post(plan, hold));
            }
        }
        Effect::VoidHold => {
            if let Some(hold) = next.funding_transaction_id.clone() {
                void(plan, hold);
            }
        }
        Effect::HoldRefund => {
            let id = record(
                plan,
                next,
                SystemAccount::CardAcquirer,
                Direction::Debit,
                Phase::Pending,
                "refund reserved",
            );
            next.reversal_transaction_id = Some(id);
        }
        Effect::ReleaseRefund => {
            if let Some(hold) = next.reversal_transaction_id.take() {
                void(plan, hold);
            }
        }
        Effect::PostReversal => match method {
            Method::CardCharge => {
                if let Some(hold) = next.reversal_transaction_id.take() {
                    next.reversal_transaction_id = Some(post(plan, hold));
                }
            }
            _ => {
                let id = record(
                    plan,
                    next,
                    SystemAccount::CardPush,
                    Direction::Credit,
                    Phase::Posted,
                    "card push reversed",
                );
                next.reversal_transaction_id = Some(id);
            }
        },
        Effect::ScheduleRetry { at } => {
            let timer_id = format!("{entity}:due:{}", next.version);
            let spec = TimerSpec {
                id: &timer_id,
                kind: SettlementKind::NAME,
                entity_id: entity,
                due_at: at.naive_utc(),
                payload: TIMER_DUE,
            };
            plan.timers.push(spec.row());
        }
        Effect::Execute | Effect::Inquire | Effect::ExecuteReversal | Effect::InquireReversal => {}
    }
}

/// Plans the posting of `hold`; answers the posting's id.
fn post(plan: &mut Plan, hold_id: String) -> String {
    let id = ledger::new_transaction_id();
    plan.ledger.push(LedgerWrite::Post {
        hold_id,
        id: id.clone(),
    });
    id
}

/// Plans the void of `hold`.
fn void(plan: &mut Plan, hold_id: String) {
    let id = ledger::new_transaction_id();
    plan.ledger.push(LedgerWrite::Void { hold_id, id });
}

/// Plans a two-line entry between the settlement's source and a system
/// account; `source_side` is the source's direction. Answers its id.
fn record(
    plan: &mut Plan,
    row: &SettlementRow,
    counterparty: SystemAccount,
    source_side: Direction,
    phase: Phase,
    description: &str,
) -> String {
    let system = counterparty.account_id(&row.currency);
    let other_side = match source_side {
        Direction::Debit => Direction::Credit,
        Direction::Credit => Direction::Debit,
    };
    let entry = Entry {
        merchant_id: Some(row.merchant_id.clone()),
        settlement_key: Some(row.idempotency_key.clone()),
        description: description.to_owned(),
        lines: vec![
            Line {
                account_id: AccountId::new(row.source.as_str()),
                direction: source_side,
                amount_minor: row.amount_minor,
                currency: row.currency.clone(),
            },
            Line {
                account_id: system,
                direction: other_side,
                amount_minor: row.amount_minor,
                currency: row.currency.clone(),
            },
        ],
    };
    let id = ledger::new_transaction_id();
    plan.ledger.push(LedgerWrite::Record {
        id: id.clone(),
        entry,
        phase,
    });
    id
}

/// The audit records of a transition: a reversal requested, a status
/// changed, a settlement reversed.
fn audit_step(before: &SettlementRow, after: &SettlementRow, origin: &Origin) -> Vec<AuditRecord> {
    let record = |action: &'static str, data: serde_json::Value| AuditRecord {
        merchant_id: after.merchant_id.clone(),
        actor: origin.actor.clone(),
        action,
        resource_type: "settlement",
        resource_id: after.idempotency_key.to_string(),
        request_id: origin.request_id.clone(),
        data,
    };
    let mut records = Vec::new();
    if before.reversal == Reversal::None && after.reversal != Reversal::None {
        records.push(record(
            "settlement.reversal_requested",
            json!({"method": after.method}),
        ));
    }
    if before.status != after.status {
        let data = json!({
            "from": before.status,
            "to": after.status,
            "attempt": after.attempt,
            "failure_reason": after.failure_reason,
            "action_code": after.action_code,
        });
        records.push(record("settlement.status_changed", data));
        if after.status == Status::Reversed {
            let data = json!({"reversal_transaction_id": after.reversal_transaction_id});
            records.push(record("settlement.reversed", data));
        }
    }
    records
}

//! The transfer actor: one per in-flight transfer. It feeds what its legs
//! do to the pure saga, writes each move in one transaction (the row under
//! its version, the legs it creates, the conversion entries, the retry
//! timer, the audit records), then starts legs and asks for refunds outside
//! that transaction, feeding the answers back as events.

use chrono::{NaiveDateTime, Utc};
use serde_json::json;
use tern_schema::audit::{AuditActor, AuditRecord};
use tern_schema::ledger::SystemAccount;
use tern_schema::models::{SettlementIntent, SettlementRow, TransferRow};
use tern_schema::plan::Plan;
use tern_schema::store::{settlements, transfers};
use tern_schema::vocabulary::{MerchantId, SettlementKey, TransferId};
use tern_schema::Db;
use tracing::Instrument;

use super::machine::{self, Effect, Event, Moved, Observed, Policy, Refund, Rejected, Resume};
use super::postings;
use super::record::{apply_state, state_of};
use super::refusal;
use crate::runtime::timers;
use crate::runtime::{
    EntityEnv, EntityKind, Registry, RuntimeError, RuntimeResult, Step, StepError, TimerFiring,
    TimerSpec, Transition,
};
use crate::settlement::machine::{Method, Reversal, Status as SettlementStatus};
use crate::settlement::record::entity_id as settlement_entity_id;
use crate::settlement::submit::leg_plan;
use crate::settlement::{
    LegObserver, ReverseOutcome, SettlementCommand, SettlementKind, SettlementReply,
};
use crate::webhook::Outbox;

/// Payload of the refund retry timer.
const TIMER_REFUND: &str = "refund";
/// Why leg 1 is refunded, as its reversal records it.
const COMPENSATION_REASON: &str = "transfer compensation: the on-chain leg failed";

/// What every transfer actor needs: the settlements its legs are, and how
/// often to ask for a refund.
#[derive(Clone)]
pub struct TransferContext {
    pub settlements: Registry<SettlementKind>,
    pub policy: Policy,
    /// Where each status change's event is written, in the move's transaction.
    pub outbox: Outbox,
}

pub enum TransferCommand {
    /// The transfer is durable: start leg 1.
    Start,
    /// Re-activated: look at the legs, and ask for the refund again if the
    /// compensation was asking when the process stopped.
    Resume,
    /// A leg's settlement moved.
    LegMoved {
        settlement_key: SettlementKey,
        observed: Observed,
    },
    /// The answer to a request for leg 1's refund.
    Refund(Refund),
    Timer(TimerFiring),
    /// The transfer's pending work failed for good (see [`super::refusal`]).
    GiveUp {
        reason: String,
    },
}

pub enum TransferReply {
    Ack,
}

pub struct TransferKind;

/// A transfer's ledger refusal will not pass by itself.
fn runtime_error(error: StepError) -> RuntimeError {
    error.into_runtime(|other| RuntimeError::Refused(format!("a transfer transition: {other}")))
}

impl EntityKind for TransferKind {
    const NAME: &'static str = "transfer";
    type State = TransferRow;
    type Command = TransferCommand;
    type Reply = TransferReply;
    type Context = TransferContext;

    async fn load(env: EntityEnv<TransferContext>) -> RuntimeResult<Option<TransferRow>> {
        let mut pooled = env.db.get().await?;
        let mut tx = pooled.tx();
        Ok(transfers::find(&mut tx, &TransferId::new(&*env.id)).await?)
    }

    async fn handle(
        env: EntityEnv<TransferContext>,
        row: TransferRow,
        command: TransferCommand,
    ) -> RuntimeResult<Transition<Self>> {
        match command {
            TransferCommand::Start => advance(&env, row, Event::Start, None).await,
            TransferCommand::LegMoved {
                settlement_key,
                observed,
            } => match leg_event(&row, &settlement_key, observed) {
                Some(event) => advance(&env, row, event, None).await,
                None => Ok(Transition::new(row, TransferReply::Ack)),
            },
            TransferCommand::Refund(answer) => {
                advance(&env, row, Event::Refund(answer), None).await
            }
            TransferCommand::Timer(firing) => {
                advance(&env, row, Event::RetryDue, Some(firing)).await
            }
            TransferCommand::Resume => resume(&env, row).await,
            TransferCommand::GiveUp { reason } => refusal::give_up(&env, row, &reason).await,
        }
    }

    fn in_flight_since(row: &TransferRow) -> Option<NaiveDateTime> {
        let terminal = row.status.is_terminal();
        (!terminal).then_some(row.updated_at)
    }

    async fn list_in_flight(
        db: Db,
        after: Option<String>,
        limit: i64,
    ) -> RuntimeResult<Vec<String>> {
        let mut pooled = db.get().await?;
        let after = after.as_deref().unwrap_or("");
        let ids = transfers::with_work_left(&mut pooled.tx(), after, limit).await?;
        Ok(ids.into_iter().map(TransferId::into_inner).collect())
    }

    fn timer_command(firing: TimerFiring) -> RuntimeResult<TransferCommand> {
        if firing.payload == TIMER_REFUND {
            Ok(TransferCommand::Timer(firing))
        } else {
            Err(RuntimeError::InvalidTimer {
                reason: format!("unknown payload `{}`", firing.payload),
                id: firing.id,
            })
        }
    }

    fn on_activate(row: &TransferRow) -> Option<TransferCommand> {
        let state = state_of(row).ok()?;
        match machine::resumption(&state) {
            Resume::Nothing => None,
            Resume::Start => Some(TransferCommand::Start),
            Resume::Observe | Resume::ObserveAndRefund => Some(TransferCommand::Resume),
        }
    }

    fn on_permanent_failure(row: &TransferRow, reason: &str) -> Option<TransferCommand> {
        refusal::ending(row, reason)
    }

    /// Woken by another node (a leg moved there): look at the legs again.
    fn wake_command() -> Option<TransferCommand> {
        Some(TransferCommand::Resume)
    }
}

/// Which leg a settlement key is, as an event.
fn leg_event(
    row: &TransferRow,
    settlement_key: &SettlementKey,
    observed: Observed,
) -> Option<Event> {
    if *settlement_key == row.leg1_key {
        Some(Event::Leg1(observed))
    } else if *settlement_key == row.leg2_key {
        Some(Event::Leg2(observed))
    } else {
        None
    }
}

/// What a leg's settlement row shows, in the saga's terms.
pub fn observe(row: &SettlementRow) -> Observed {
    match row.status {
        SettlementStatus::Succeeded if row.reversal != Reversal::None => Observed::Reversing,
        SettlementStatus::Succeeded => Observed::Succeeded,
        SettlementStatus::Reversed => Observed::Reversed,
        SettlementStatus::Failed => Observed::Failed {
            reason: row
                .failure_reason
                .clone()
                .unwrap_or_else(|| "failed".to_owned()),
        },
        _ => match (&row.client_secret, &row.next_action_type) {
            (Some(client_secret), Some(next_action_type)) => Observed::AwaitingChallenge {
                client_secret: client_secret.clone(),
                next_action_type: next_action_type.clone(),
            },
            _ => Observed::InFlight,
        },
    }
}

/// Tells a leg's transfer that the leg moved: the settlement side's hook.
pub struct TransferLegs {
    pub transfers: Registry<TransferKind>,
}

impl LegObserver for TransferLegs {
    fn leg_moved(&self, row: &SettlementRow) {
        let Some(transfer_id) = &row.transfer_id else {
            return;
        };
        self.transfers.tell(
            transfer_id.as_str(),
            TransferCommand::LegMoved {
                settlement_key: row.idempotency_key.clone(),
                observed: observe(row),
            },
        );
    }
}

/// Re-activated: feed what the legs show now (a notice may have been lost
/// with the process), then ask for the refund again if it was being asked.
async fn resume(
    env: &EntityEnv<TransferContext>,
    row: TransferRow,
) -> RuntimeResult<Transition<TransferKind>> {
    let legs = {
        let mut pooled = env.db.get().await?;
        let mut tx = pooled.tx();
        let keys = [row.leg1_key.clone(), row.leg2_key.clone()];
        settlements::find_many(&mut tx, &row.merchant_id, &keys).await?
    };
    let mut row = row;
    let mut follow_ups = Vec::new();
    // A settlement under a leg's key that is not the leg (a legacy key a
    // merchant took) says nothing about the transfer.
    let transfer_id = row.id.clone();
    let own = legs
        .iter()
        .filter(|leg| leg.transfer_id.as_ref() == Some(&transfer_id));
    for leg in own {
        let observed = observe(leg);
        if observed == Observed::Succeeded && row.status == machine::Status::Compensating {
            // Leg 1 with no refund under way: the request below asks for
            // it at once, where the observation would wait a retry delay.
            continue;
        }
        let Some(event) = leg_event(&row, &leg.idempotency_key, observed) else {
            continue;
        };
        let transition = advance(env, row, event, None).await?;
        row = transition.state;
        follow_ups.extend(transition.follow_ups);
    }
    let state = state_of(&row).map_err(|e| RuntimeError::Refused(e.to_string()))?;
    let mut transition = Transition::new(row.clone(), TransferReply::Ack);
    transition.follow_ups = follow_ups;
    if machine::resumption(&state) == Resume::ObserveAndRefund {
        transition = with_refund_request(env, &row, transition);
    }
    Ok(transition)
}

/// Applies one event and schedules the work its effects ask for. A move
/// that fails because the leg it starts can never be created is replaced by
/// that leg's refusal (see [`super::refusal`]), which starts no leg.
pub(super) async fn advance(
    env: &EntityEnv<TransferContext>,
    row: TransferRow,
    event: Event,
    firing: Option<TimerFiring>,
) -> RuntimeResult<Transition<TransferKind>> {
    let state = state_of(&row).map_err(|e| RuntimeError::Refused(e.to_string()))?;
    let mut event = event;
    loop {
        let label = format!("{event:?}");
        let moved = match machine::transition(&state, event, &env.ctx.policy, Utc::now()) {
            Ok(moved) => moved,
            Err(rejected) => {
                if rejected != Rejected::Unchanged {
                    tracing::debug!(transfer = %env.id, %rejected, event = %label, "event ignored");
                }
                // A stale timer is done with all the same.
                if let Some(firing) = firing {
                    timers::complete(&env.db, firing).await?;
                }
                return Ok(Transition::new(row, TransferReply::Ack));
            }
        };
        let effects = moved.effects.clone();
        match step(env, &row, moved, firing.clone()).await {
            Ok((next, legs)) => {
                crate::metrics::transition("transfer", row.status.as_str(), next.status.as_str());
                return Ok(follow_up(env, next, &effects, legs));
            }
            Err(error) => match refusal::refused_leg(env, &row, &effects).await? {
                Some(refused) => event = refused,
                None => return Err(runtime_error(error)),
            },
        }
    }
}

fn follow_up(
    env: &EntityEnv<TransferContext>,
    row: TransferRow,
    effects: &[Effect],
    legs: Vec<SettlementRow>,
) -> Transition<TransferKind> {
    let mut transition = Transition::new(row.clone(), TransferReply::Ack);
    let leg = |key: &SettlementKey| legs.iter().find(|leg| leg.idempotency_key == *key).cloned();
    for effect in effects {
        match effect {
            Effect::StartLeg1 => {
                start_leg(env, &row.merchant_id, &row.leg1_key, leg(&row.leg1_key))
            }
            Effect::StartLeg2 => {
                start_leg(env, &row.merchant_id, &row.leg2_key, leg(&row.leg2_key))
            }
            Effect::RequestRefund => transition = with_refund_request(env, &row, transition),
            Effect::Convert | Effect::Unconvert | Effect::ScheduleRetry { .. } => {}
        }
    }
    transition
}

/// A leg's row is durable: its own actor executes it (recovery starts it
/// too, should this activation be lost). `created` is the row this
/// transition wrote, which spares the actor reading it back.
fn start_leg(
    env: &EntityEnv<TransferContext>,
    merchant_id: &MerchantId,
    key: &SettlementKey,
    created: Option<SettlementRow>,
) {
    let id = settlement_entity_id(merchant_id, key);
    let registry = env.ctx.settlements.clone();
    // In a trace, the leg continues the transfer's message.
    let cause = crate::trace::current();
    actix::spawn(
        async move {
            let started = match created {
                Some(row) => registry.activate_with(&id, row).await,
                None => registry.activate(&id).await,
            };
            match started {
                Ok(()) => {}
                // Its slot is another node's (a leg placed before its route was
                // pinned): that node is asked to look at it.
                Err(RuntimeError::Elsewhere { .. }) => registry.tell(&id, SettlementCommand::Nudge),
                Err(error) => {
                    tracing::warn!(settlement = %id, %error, "leg did not start; recovery will")
                }
            }
        }
        .instrument(cause),
    );
}

/// Asks leg 1's settlement for its refund; the answer comes back as an event.
fn with_refund_request(
    env: &EntityEnv<TransferContext>,
    row: &TransferRow,
    transition: Transition<TransferKind>,
) -> Transition<TransferKind> {
    let id = settlement_entity_id(&row.merchant_id, &row.leg1_key);
    let registry = env.ctx.settlements.clone();
    let request_id = row.request_id.clone();
    transition.with_follow_up(async move {
        let command = SettlementCommand::Reverse {
            actor: AuditActor::System,
            request_id,
            reason: COMPENSATION_REASON.to_owned(),
        };
        let answer = match registry.call(&id, command).await {
            Ok(SettlementReply::Reverse(outcome)) => refund_of(outcome),
            Ok(_) => not_made("the settlement answered off topic".to_owned()),
            Err(error) => not_made(error.to_string()),
        };
        Some(TransferCommand::Refund(answer))
    })
}

fn not_made(reason: String) -> Refund {
    Refund::NotMade { reason }
}

/// The settlement's answer to a reversal, in the saga's terms.
fn refund_of(outcome: ReverseOutcome) -> Refund {
    use crate::settlement::machine::Rejected as Refused;
    match outcome {
        ReverseOutcome::Reversed(_) => Refund::Completed,
        ReverseOutcome::Pending(_) => Refund::Pending,
        // Asked again after a restart: the first request is still going,
        // or already done. Neither makes a second refund.
        ReverseOutcome::Refused(Refused::ReversalUnderWay) => Refund::Pending,
        ReverseOutcome::Refused(Refused::NotReversibleInStatus { status: "reversed" }) => {
            Refund::Completed
        }
        ReverseOutcome::Refused(refused) => not_made(refused.to_string()),
        ReverseOutcome::Declined { detail, .. } => not_made(format!("declined: {detail}")),
        ReverseOutcome::Unavailable(detail) => not_made(format!("provider unavailable: {detail}")),
        ReverseOutcome::InsufficientFunds => not_made("insufficient funds".to_owned()),
    }
}

/// One move in one transaction: the timer it completes, the legs it
/// creates, its ledger entries and due time, the row under its version, and
/// an audit record per status passed through.
async fn step(
    env: &EntityEnv<TransferContext>,
    row: &TransferRow,
    moved: Moved,
    firing: Option<TimerFiring>,
) -> Result<(TransferRow, Vec<SettlementRow>), StepError> {
    let mut planned = Step::begin(row, apply_state(row, &moved.state), firing.as_ref());
    let Moved {
        effects, statuses, ..
    } = moved;
    planned.plan.events = env.ctx.outbox.events(&planned.next, &statuses);
    let mut legs = Vec::new();
    for effect in &effects {
        legs.extend(book(&mut planned.plan, &mut planned.next, effect));
    }
    let audit = audit_step(row, &planned.next, &statuses);
    let (next, written) = planned.commit(&env.db, audit).await?;
    let deliver = written.events_wait;
    if deliver {
        env.ctx.outbox.wake(&next.merchant_id);
    }
    if next.status != row.status {
        tracing::info!(
            transfer = %env.id,
            from = %row.status,
            to = %next.status,
            leg1 = %next.leg1_status,
            leg2 = %next.leg2_status,
            failure_reason = next.failure_reason.as_deref().unwrap_or(""),
            "transfer status changed"
        );
    }
    if next.alert.is_some() && row.alert.is_none() {
        tracing::error!(transfer = %env.id, alert = next.alert.as_deref().unwrap_or(""), "operator alert raised");
    }
    Ok((next, legs))
}

/// The leg settlements of a transfer: leg 1 charges the payer's card
/// on-session into transfer clearing; leg 2 pays the asset out of it.
fn leg_intent(row: &TransferRow, leg: u8) -> (SettlementIntent, Method) {
    let common =
        |key: &SettlementKey, method: Method, currency: &str, amount_minor, destination| {
            SettlementIntent {
                merchant_id: row.merchant_id.clone(),
                idempotency_key: key.clone(),
                method,
                currency: currency.to_owned(),
                amount_minor,
                asset: (method == Method::OnChain).then_some(row.receive_asset),
                source: SystemAccount::TransferClearing
                    .account_id(currency)
                    .into_inner(),
                destination,
                recipient_name: format!("transfer {}", row.id),
                reference: Some(row.id.to_string()),
                request_id: row.request_id.clone(),
            }
        };
    if leg == 1 {
        (
            common(
                &row.leg1_key,
                Method::CardCharge,
                &row.send_currency,
                row.send_amount_minor,
                row.card_pm.clone(),
            ),
            Method::CardCharge,
        )
    } else {
        (
            common(
                &row.leg2_key,
                Method::OnChain,
                row.receive_asset.as_str(),
                row.receive_amount_minor,
                format!("{}:{}", row.receive_network, row.wallet),
            ),
            Method::OnChain,
        )
    }
}

/// The bookkeeping of one effect: what it adds to the move's plan; the
/// leg it creates, if it starts one.
fn book(plan: &mut Plan, next: &mut TransferRow, effect: &Effect) -> Option<SettlementRow> {
    match effect {
        Effect::StartLeg1 | Effect::StartLeg2 => {
            let leg = if *effect == Effect::StartLeg1 { 1 } else { 2 };
            let (intent, method) = leg_intent(next, leg);
            let (created, leg_plan) = leg_plan(intent, method, &next.id);
            // Only the leg's row and hold: a leg has never had a
            // `settlement.created` record (its transfer's records say it).
            plan.new_settlements.extend(leg_plan.new_settlements);
            return Some(created);
        }
        Effect::Convert => {
            next.conversion_transaction_id = Some(postings::convert(plan, next));
        }
        Effect::Unconvert => {
            postings::unconvert(plan, next);
        }
        Effect::ScheduleRetry { at } => {
            let timer_id = format!("{}:refund:{}", next.id, next.version);
            let spec = TimerSpec {
                id: &timer_id,
                kind: TransferKind::NAME,
                entity_id: next.id.as_str(),
                due_at: at.naive_utc(),
                payload: TIMER_REFUND,
            };
            plan.timers.push(spec.row());
        }
        Effect::RequestRefund => {}
    }
    None
}

/// The audit records of a move: one per status passed through, and the
/// alert it raised.
fn audit_step(
    before: &TransferRow,
    after: &TransferRow,
    statuses: &[machine::Status],
) -> Vec<AuditRecord> {
    let record = |action: &'static str, data: serde_json::Value| AuditRecord {
        merchant_id: after.merchant_id.clone(),
        actor: AuditActor::System,
        action,
        resource_type: "transfer",
        resource_id: after.id.to_string(),
        request_id: after.request_id.clone(),
        data,
    };
    let mut records = Vec::new();
    let mut from = before.status;
    for status in statuses {
        let data = json!({
            "from": from,
            "to": status.as_str(),
            "leg1_status": after.leg1_status,
            "leg2_status": after.leg2_status,
            "failure_reason": after.failure_reason,
        });
        records.push(record("transfer.status_changed", data));
        from = *status;
    }
    if after.alert.is_some() && before.alert.is_none() {
        let data = json!({"alert": after.alert});
        records.push(record("transfer.alert_raised", data));
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_schema::vocabulary::Asset;

    mod settlement_rows {
        use tern_schema::models::{SettlementIntent, SettlementRow};
        use tern_schema::money::MinorUnits;
        use tern_schema::vocabulary::{MerchantId, SettlementKey};

        pub fn row() -> SettlementRow {
            SettlementRow::pending(
                SettlementIntent {
                    merchant_id: MerchantId::new("m"),
                    idempotency_key: SettlementKey::new("k"),
                    method: tern_schema::vocabulary::SettlementMethod::CardCharge,
                    currency: "EUR".into(),
                    amount_minor: MinorUnits::new(100),
                    asset: None,
                    source: "sys_transfer_clearing_eur".into(),
                    destination: "pm_card_visa".into(),
                    recipient_name: "transfer tr_1".into(),
                    reference: None,
                    request_id: "r".into(),
                },
                tern_schema::types::utc_now(),
            )
        }
    }

    #[test]
    fn a_leg_row_is_observed_by_its_status() {
        let mut row = settlement_rows::row();
        row.status = SettlementStatus::InFlight;
        assert_eq!(observe(&row), Observed::InFlight);
        row.client_secret = Some("cs".into());
        assert_eq!(observe(&row), Observed::InFlight, "no open action");
        row.next_action_type = Some("redirect_to_url".into());
        assert_eq!(
            observe(&row),
            Observed::AwaitingChallenge {
                client_secret: "cs".into(),
                next_action_type: "redirect_to_url".into()
            }
        );
        row.status = SettlementStatus::Succeeded;
        assert_eq!(observe(&row), Observed::Succeeded);
        row.reversal = Reversal::PendingAtProvider;
        assert_eq!(observe(&row), Observed::Reversing);
        row.reversal = Reversal::None;
        row.status = SettlementStatus::Failed;
        row.failure_reason = Some("challenge_expired".into());
        assert_eq!(
            observe(&row),
            Observed::Failed {
                reason: "challenge_expired".into()
            }
        );
        row.status = SettlementStatus::Reversed;
        assert_eq!(observe(&row), Observed::Reversed);
    }

    #[test]
    fn refund_answers_map_to_the_saga() {
        use crate::settlement::machine::Rejected as Refused;
        let row = Box::new(settlement_rows::row());
        assert_eq!(
            refund_of(ReverseOutcome::Reversed(row.clone())),
            Refund::Completed
        );
        assert_eq!(refund_of(ReverseOutcome::Pending(row)), Refund::Pending);
        assert_eq!(
            refund_of(ReverseOutcome::Refused(Refused::ReversalUnderWay)),
            Refund::Pending
        );
        assert_eq!(
            refund_of(ReverseOutcome::Refused(Refused::NotReversibleInStatus {
                status: "reversed"
            })),
            Refund::Completed
        );
        for outcome in [
            ReverseOutcome::Unavailable("down".into()),
            ReverseOutcome::InsufficientFunds,
            ReverseOutcome::Refused(Refused::NotReversibleInStatus { status: "failed" }),
        ] {
            assert!(matches!(refund_of(outcome), Refund::NotMade { .. }));
        }
    }

    #[test]
    fn legs_draw_on_transfer_clearing_in_their_currency() {
        let row = crate::transfer::record::tests::row();
        let (charge, method) = leg_intent(&row, 1);
        assert_eq!(method, Method::CardCharge);
        assert_eq!(charge.source, "sys_transfer_clearing_eur");
        assert_eq!(charge.amount_minor, row.send_amount_minor);
        assert_eq!(charge.destination, "pm_card_visa");
        let (payout, method) = leg_intent(&row, 2);
        assert_eq!(method, Method::OnChain);
        assert_eq!(payout.source, "sys_transfer_clearing_usdc");
        assert_eq!(payout.currency, "USDC");
        assert_eq!(payout.asset, Some(Asset::Usdc));
        assert_eq!(payout.amount_minor, row.receive_amount_minor);
        assert_eq!(payout.destination, format!("polygon:{}", row.wallet));
    }
}

//! A leg that cannot be started (decisions §7: a transfer never waits on a
//! key someone else holds).
//!
//! A move that starts a leg inserts the leg's settlement in the move's
//! transaction. If another settlement of the merchant already holds the
//! leg's key (a legacy UUID leg key a merchant took before it was reserved),
//! that insert fails every time: retrying would leave the transfer in
//! `leg1_in_flight` for ever with the payer charged. So the failed move is
//! replaced by [`Event::LegRefused`]: leg 1 refused fails the transfer with
//! nothing charged, leg 2 refused refunds leg 1.
//!
//! Any other failure of a leg's start that will not pass by itself reaches
//! the runtime, which asks [`TransferKind`]'s `on_permanent_failure` for a
//! [`TransferCommand::GiveUp`]: [`give_up`] refuses the leg the same way
//! when the legs show which one could not start, and otherwise leaves the
//! transfer stuck for an operator.

use tern_schema::models::{SettlementRow, TransferRow};
use tern_schema::store::settlements;
use tern_schema::vocabulary::SettlementKey;

use super::kind::{observe, TransferCommand, TransferContext, TransferKind, TransferReply};
use super::machine::{Effect, Event, Leg, Observed, Status};
use crate::runtime::{EntityEnv, RuntimeResult, Transition};

/// `failure_reason` of a transfer whose leg's key another settlement holds.
pub const LEG_KEY_TAKEN: &str = "leg_key_taken";
/// `failure_reason` of a transfer whose leg's start failed for good for
/// another reason (the operator finds it in the logs).
pub const LEG_NOT_STARTABLE: &str = "leg_not_startable";

/// The leg a move starts, if it starts one.
pub fn started_leg(effects: &[Effect]) -> Option<Leg> {
    effects.iter().find_map(|effect| match effect {
        Effect::StartLeg1 => Some(Leg::One),
        Effect::StartLeg2 => Some(Leg::Two),
        _ => None,
    })
}

fn key_of(row: &TransferRow, leg: Leg) -> &SettlementKey {
    match leg {
        Leg::One => &row.leg1_key,
        Leg::Two => &row.leg2_key,
    }
}

fn is_own(row: &TransferRow, settlement: &SettlementRow) -> bool {
    settlement.transfer_id.as_ref() == Some(&row.id)
}

/// After a move with `effects` failed: the event that replaces it when the
/// leg it starts can never be created because a settlement that is not
/// this transfer's holds the leg's key.
pub async fn refused_leg(
    env: &EntityEnv<TransferContext>,
    row: &TransferRow,
    effects: &[Effect],
) -> RuntimeResult<Option<Event>> {
    let Some(leg) = started_leg(effects) else {
        return Ok(None);
    };
    let holder = {
        let mut pooled = env.db.get().await?;
        let mut tx = pooled.tx();
        settlements::find(&mut tx, &row.merchant_id, key_of(row, leg)).await?
    };
    match holder {
        Some(holder) if !is_own(row, &holder) => {
            tracing::error!(transfer = %row.id, leg = leg.index(), key = %holder.idempotency_key, "another settlement holds the leg's key; the leg is refused");
            Ok(Some(Event::LegRefused {
                leg,
                reason: LEG_KEY_TAKEN.to_owned(),
            }))
        }
        _ => Ok(None),
    }
}

/// The runtime's question: can this transfer's pending work be ended? Only
/// where starting a leg is what failed: at `pending`, or at
/// `leg1_in_flight` once leg 1 has succeeded.
pub fn ending(row: &TransferRow, reason: &str) -> Option<TransferCommand> {
    matches!(row.status, Status::Pending | Status::Leg1InFlight).then(|| TransferCommand::GiveUp {
        reason: reason.to_owned(),
    })
}

/// Ends the transfer whose pending work failed for good (`reason`): refuses
/// the leg that could not start if the legs show which one it is. Answers
/// the row unchanged when they do not, which leaves the transfer stuck.
pub async fn give_up(
    env: &EntityEnv<TransferContext>,
    row: TransferRow,
    reason: &str,
) -> RuntimeResult<Transition<TransferKind>> {
    let refused = match row.status {
        Status::Pending => Some(Leg::One),
        Status::Leg1InFlight => {
            let legs = {
                let mut pooled = env.db.get().await?;
                let mut tx = pooled.tx();
                let keys = [row.leg1_key.clone(), row.leg2_key.clone()];
                settlements::find_many(&mut tx, &row.merchant_id, &keys).await?
            };
            let own = |key: &SettlementKey| {
                legs.iter()
                    .find(|leg| leg.idempotency_key == *key && is_own(&row, leg))
            };
            // Leg 1 charged and leg 2 never written: starting leg 2 is what
            // kept failing.
            let charged = own(&row.leg1_key).is_some_and(|leg| observe(leg) == Observed::Succeeded);
            (charged && own(&row.leg2_key).is_none()).then_some(Leg::Two)
        }
        _ => None,
    };
    let Some(leg) = refused else {
        tracing::error!(transfer = %row.id, status = %row.status, %reason, "the transfer's work failed for good and cannot be ended here");
        return Ok(Transition::new(row, TransferReply::Ack));
    };
    tracing::error!(transfer = %row.id, leg = leg.index(), %reason, "a leg's start failed for good; the leg is refused");
    let event = Event::LegRefused {
        leg,
        reason: LEG_NOT_STARTABLE.to_owned(),
    };
    super::kind::advance(env, row, event, None).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::record::tests::row;

    #[test]
    fn the_leg_a_move_starts() {
        assert_eq!(started_leg(&[Effect::StartLeg1]), Some(Leg::One));
        assert_eq!(
            started_leg(&[Effect::Convert, Effect::StartLeg2]),
            Some(Leg::Two)
        );
        assert_eq!(
            started_leg(&[Effect::Unconvert, Effect::RequestRefund]),
            None
        );
    }

    #[test]
    fn only_a_transfer_that_starts_legs_can_be_ended() {
        let mut transfer = row();
        for (status, ends) in [
            ("pending", true),
            ("leg1_in_flight", true),
            ("leg2_in_flight", false),
            ("compensating", false),
            ("succeeded", false),
            ("failed", false),
        ] {
            transfer.status = status.parse().expect("a transfer status");
            assert_eq!(ending(&transfer, "why").is_some(), ends, "{status}");
        }
    }
}

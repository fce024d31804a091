//! The transactional outbox: a transfer's move plans one event per status
//! it passed, written with the move, so that no event is lost and none
//! exists without its change (decisions §8). After the commit the
//! merchant's endpoint actor is woken; if that message is lost, its recovery
//! at the next activation finds the pending rows.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tern_schema::models::{TransferRow, WebhookEventRow};
use tern_schema::store::webhooks as store;
use tern_schema::types::{as_utc, utc_now};
use tern_schema::vocabulary::{EventId, MerchantId};

use super::kind::{EndpointCommand, WebhookEndpointKind};
use crate::runtime::Registry;
use crate::transfer::machine::Status;

/// The transfer as the API shows it (the edge owns that shape).
pub type RenderTransfer = Arc<dyn Fn(&TransferRow) -> serde_json::Value + Send + Sync>;

/// The body of every delivery.
#[derive(Serialize)]
struct Body<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    event_type: &'a str,
    created_at: DateTime<Utc>,
    data: serde_json::Value,
}

#[derive(Clone)]
pub struct Outbox {
    render: RenderTransfer,
    endpoints: Registry<WebhookEndpointKind>,
}

impl Outbox {
    pub fn new(render: RenderTransfer, endpoints: Registry<WebhookEndpointKind>) -> Outbox {
        Outbox { render, endpoints }
    }

    /// The events of `after`'s move through `statuses`, in the order
    /// passed, rendered outside any transaction (rendering is the costly
    /// part, and transactions queue for one committer).
    pub fn events(&self, after: &TransferRow, statuses: &[Status]) -> Vec<WebhookEventRow> {
        let now = utc_now();
        statuses
            .iter()
            .map(|status| {
                let mut shown = after.clone();
                shown.status = *status;
                let id = EventId::generate();
                let event_type = format!("transfer.{}", status.as_str());
                let body = Body {
                    id: id.as_str(),
                    event_type: &event_type,
                    created_at: as_utc(now),
                    data: (self.render)(&shown),
                };
                // A Value and plain fields always serialise.
                let payload = serde_json::to_string(&body).unwrap_or_default();
                WebhookEventRow {
                    id,
                    merchant_id: after.merchant_id.clone(),
                    transfer_id: after.id.clone(),
                    seq: rank(*status),
                    event_type,
                    payload,
                    request_id: after.request_id.clone(),
                    status: store::PENDING.to_owned(),
                    attempts: 0,
                    round: 0,
                    next_attempt_at: Some(now),
                    last_attempt_at: None,
                    last_status_code: None,
                    last_error: None,
                    delivered_at: None,
                    created_at: now,
                    updated_at: now,
                }
            })
            .collect()
    }

    /// Tells the merchant's endpoint actor that events wait.
    pub fn wake(&self, merchant_id: &MerchantId) {
        self.endpoints
            .tell(merchant_id.as_str(), EndpointCommand::Wake);
    }
}

/// A status's place in the saga: every path through it visits statuses in
/// increasing rank, each at most once, so the rank orders a transfer's
/// events and identifies them.
pub fn rank(status: Status) -> i32 {
    match status {
        Status::Pending => 0,
        Status::Leg1InFlight => 1,
        Status::Leg1Succeeded => 2,
        Status::Leg2InFlight => 3,
        Status::Compensating => 4,
        Status::Succeeded => 5,
        Status::Failed => 6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_distinct_and_follow_the_saga() {
        let mut ranks: Vec<i32> = Status::ALL.iter().map(|s| rank(*s)).collect();
        ranks.sort_unstable();
        ranks.dedup();
        assert_eq!(ranks.len(), Status::ALL.len());
        // Every documented move goes up.
        for (from, to) in [
            (Status::Pending, Status::Leg1InFlight),
            (Status::Leg1InFlight, Status::Leg1Succeeded),
            (Status::Leg1InFlight, Status::Failed),
            (Status::Leg1Succeeded, Status::Leg2InFlight),
            (Status::Leg2InFlight, Status::Succeeded),
            (Status::Leg2InFlight, Status::Compensating),
            (Status::Compensating, Status::Failed),
        ] {
            assert!(rank(from) < rank(to), "{from:?} -> {to:?}");
        }
    }
}

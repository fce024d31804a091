//! Push delivery: after a dispatch and its delivery rows commit, each
//! targeted device gets one message through the [`PushGateway`], off the
//! request path. Sends are bounded process-wide, transient failures are
//! retried with backoff under the same idempotency key, and every device's
//! outcome is written to its delivery row. Deliveries still pending at
//! start (a crash, a stop mid-retry) are sent again by [`PushDelivery::resume`];
//! the key makes that resend safe.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tern_schema::models::{DeviceRow, PushDeliveryRow, PushDispatchRow};
use tern_schema::store::push::{self as store, DeliveryOutcome};
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{DispatchId, PushStatus};
use tern_schema::{write_tx, Db, StoreResult};
use tokio::sync::Semaphore;

use crate::ports::{message_key, PushGateway, PushMessage};

/// Messages in flight to the gateway at once, across all dispatches.
pub const SENDS_IN_FLIGHT_MAX: usize = 16;
/// Waits before the 2nd, 3rd and 4th attempt; then the delivery fails.
pub const RETRY_DELAYS_DEFAULT: [Duration; 3] = [
    Duration::from_millis(250),
    Duration::from_secs(1),
    Duration::from_secs(4),
];
/// Longest gateway error kept in `last_error`.
pub const ERROR_CHARS_MAX: usize = 500;

/// Sends dispatches' messages and records their outcomes.
#[derive(Clone)]
pub struct PushDelivery {
    db: Db,
    gateway: Arc<dyn PushGateway>,
    permits: Arc<Semaphore>,
    retry_delays: Arc<[Duration]>,
}

impl PushDelivery {
    pub fn new(db: Db, gateway: Arc<dyn PushGateway>) -> PushDelivery {
        PushDelivery::with_retry_delays(db, gateway, RETRY_DELAYS_DEFAULT.to_vec())
    }

    pub fn with_retry_delays(
        db: Db,
        gateway: Arc<dyn PushGateway>,
        retry_delays: Vec<Duration>,
    ) -> PushDelivery {
        PushDelivery {
            db,
            gateway,
            permits: Arc::new(Semaphore::new(SENDS_IN_FLIGHT_MAX)),
            retry_delays: retry_delays.into(),
        }
    }

    /// Delivers the dispatch's pending messages in the background. Call it
    /// after the dispatch committed.
    pub fn spawn(&self, dispatch_id: DispatchId) {
        let delivery = self.clone();
        actix::spawn(async move {
            if let Err(error) = delivery.deliver(&dispatch_id).await {
                // The rows stay pending; the next start sends them.
                tracing::error!(%error, %dispatch_id, "push delivery stopped");
            }
        });
    }

    /// Starts delivery of every dispatch left with pending deliveries;
    /// answers how many dispatches it picked up.
    pub async fn resume(&self) -> StoreResult<usize> {
        let mut after: Option<DispatchId> = None;
        let mut resumed = 0;
        loop {
            let page = {
                let mut pooled = self.db.get().await?;
                let mut tx = pooled.tx();
                store::pending_dispatch_ids(&mut tx, after.as_ref(), store::PENDING_DISPATCHES_PAGE)
                    .await?
            };
            let Some(last) = page.last().cloned() else {
                break;
            };
            resumed += page.len();
            for dispatch_id in page {
                self.spawn(dispatch_id);
            }
            after = Some(last);
        }
        if resumed > 0 {
            tracing::info!(dispatches = resumed, "resuming pending push deliveries");
        }
        Ok(resumed)
    }

    async fn deliver(&self, dispatch_id: &DispatchId) -> StoreResult<()> {
        let (dispatch, pending) = {
            let mut pooled = self.db.get().await?;
            let mut tx = pooled.tx();
            let Some(dispatch) = store::find_dispatch(&mut tx, dispatch_id).await? else {
                return Ok(());
            };
            let pending = store::pending_deliveries(&mut tx, dispatch_id).await?;
            (dispatch, pending)
        };
        let data = dispatch
            .data
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok());
        let dispatch = &dispatch;
        let data = &data;
        // The semaphore bounds the sends; this bounds the futures parked on it.
        let mut sends = futures_util::stream::iter(pending)
            .map(|(delivery, device)| self.deliver_one(dispatch, data, delivery, device))
            .buffer_unordered(SENDS_IN_FLIGHT_MAX);
        let mut first_error = None;
        while let Some(outcome) = sends.next().await {
            if let Err(error) = outcome {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Sends one device's message until it is delivered, refused, or out of
    /// attempts, and records the outcome.
    async fn deliver_one(
        &self,
        dispatch: &PushDispatchRow,
        data: &Option<serde_json::Value>,
        delivery: PushDeliveryRow,
        device: DeviceRow,
    ) -> StoreResult<()> {
        let message = PushMessage {
            idempotency_key: message_key(&dispatch.id, &device.id),
            platform: device.platform,
            token: device.token,
            user_id: dispatch.user_id.clone(),
            title: dispatch.title.clone(),
            body: dispatch.body.clone(),
            data: data.clone(),
        };
        let mut attempts = delivery.attempts;
        let mut retry = 0;
        loop {
            attempts += 1;
            let sent = {
                // Closed only if the semaphore is dropped, which it never is.
                let _permit = self.permits.acquire().await.ok();
                self.gateway.send(&message).await
            };
            let error = match sent {
                Ok(receipt) => {
                    let id = Some(receipt.message_id.as_str());
                    return self
                        .record(&delivery, PushStatus::Delivered, attempts, None, id)
                        .await;
                }
                Err(error) => error,
            };
            let text: String = error.to_string().chars().take(ERROR_CHARS_MAX).collect();
            let delay = self.retry_delays.get(retry).copied();
            // Unknown outcomes (a timeout, a dropped connection) are resent
            // too, without an inquiry: the gateway sends a key only once.
            match (error.is_retryable(), delay) {
                (true, Some(delay)) => {
                    tracing::warn!(key = %message.idempotency_key, attempts, error = %text, "push send failed; retrying");
                    self.record(&delivery, PushStatus::Pending, attempts, Some(&text), None)
                        .await?;
                    actix::clock::sleep(delay).await;
                    retry += 1;
                }
                _ => {
                    tracing::warn!(key = %message.idempotency_key, attempts, error = %text, "push delivery failed");
                    return self
                        .record(&delivery, PushStatus::Failed, attempts, Some(&text), None)
                        .await;
                }
            }
        }
    }

    async fn record(
        &self,
        delivery: &PushDeliveryRow,
        status: PushStatus,
        attempts: i32,
        last_error: Option<&str>,
        provider_message_id: Option<&str>,
    ) -> StoreResult<()> {
        let outcome = DeliveryOutcome {
            status,
            attempts,
            last_error,
            provider_message_id,
            at: utc_now(),
        };
        write_tx!(self.db, |tx| {
            store::record(tx, &delivery.dispatch_id, &delivery.device_id, &outcome).await
        })
    }
}

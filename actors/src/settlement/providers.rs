//! The settlement's provider calls, and how each answer becomes a machine
//! event. This is the only place that knows which port serves which method.

use std::sync::Arc;

use chrono::{Duration, Utc};
use tern_schema::models::SettlementRow;
use tern_schema::money::MinorUnits;
use tern_schema::money::{Currency, CurrencyKind};

use super::machine::{Event, Execution, Method};
use super::record::{provider_key, reversal_key};
use crate::ports::{
    Asset, CardAcquirer, CardPush, ChargeOutcome, ChargeRequest, Custodian, Network, PayoutOutcome,
    PayoutRequest, ProviderError, PushOutcome, PushRequest, RefundOutcome, RefundRequest,
    RequestKeys, ReversalOutcome, ReversalRequest,
};

/// USD cents to stablecoin micro-units: on_chain pays a USD stablecoin 1:1.
const STABLECOIN_UNITS_PER_CENT: i64 = 10_000;
/// Most USD cents a direct on_chain settlement may pay: its payout in
/// micro-units must fit int64 (decisions §2), so larger amounts are refused
/// at creation.
pub const ON_CHAIN_USD_MAX_MINOR: MinorUnits =
    MinorUnits::new(i64::MAX / STABLECOIN_UNITS_PER_CENT);

/// The providers a settlement reaches, behind their ports.
#[derive(Clone)]
pub struct Providers {
    pub acquirer: Arc<dyn CardAcquirer>,
    pub card_push: Arc<dyn CardPush>,
    pub custodian: Arc<dyn Custodian>,
    /// How long to wait before asking again about an operation the provider
    /// reported pending.
    pub pending_poll: Duration,
}

/// What the answer to a reversal said, for the caller of the reversal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReversalAnswer {
    pub event: Event,
    /// The provider's words on a decline.
    pub detail: Option<String>,
}

impl Providers {
    /// Sends the settlement's operation under its provider key.
    pub async fn execute(&self, row: &SettlementRow) -> Event {
        let keys = RequestKeys {
            idempotency_key: provider_key(row),
            settlement_key: row.idempotency_key.to_string(),
        };
        match row.method {
            Method::CardCharge => {
                let request = ChargeRequest {
                    keys,
                    amount_minor: row.amount_minor,
                    currency: row.currency.clone(),
                    payment_method: row.destination.clone(),
                    // Direct settlements are off-session; a transfer's leg
                    // has its payer there for a challenge (decisions §5).
                    off_session: !row.on_session(),
                };
                self.charge_event(self.acquirer.charge(&request).await, row.on_session())
            }
            Method::CardPush => {
                let request = PushRequest {
                    keys,
                    amount_minor: row.amount_minor,
                    currency: row.currency.clone(),
                    destination: row.destination.clone(),
                    recipient_name: row.recipient_name.clone(),
                };
                self.push_event(self.card_push.push(&request).await)
            }
            Method::OnChain => {
                let Some((network, wallet)) = on_chain_destination(&row.destination) else {
                    return declined("invalid_destination");
                };
                let (asset, amount_minor) =
                    match payout_amount(&row.currency, row.amount_minor, row.asset) {
                        Ok(payout) => payout,
                        Err(reason) => return declined(reason),
                    };
                let request = PayoutRequest {
                    keys,
                    network,
                    wallet: wallet.to_owned(),
                    asset,
                    amount_minor,
                };
                self.payout_event(self.custodian.payout(&request).await)
            }
        }
    }

    /// Asks what became of the operation sent under the provider key.
    pub async fn inquire(&self, row: &SettlementRow) -> Event {
        let key = provider_key(row);
        match row.method {
            Method::CardCharge => match self.acquirer.lookup_charge(&key).await {
                Ok(None) => Event::InquiryFoundNothing,
                Ok(Some(outcome)) => self.charge_event(Ok(outcome), row.on_session()),
                Err(error) => self.error_event(error),
            },
            Method::CardPush => match self.card_push.inquiry(&key).await {
                Ok(None) => Event::InquiryFoundNothing,
                Ok(Some(outcome)) => self.push_event(Ok(outcome)),
                Err(error) => self.error_event(error),
            },
            Method::OnChain => {
                let Some((network, _)) = on_chain_destination(&row.destination) else {
                    return declined("invalid_destination");
                };
                match self.custodian.payout_status(network, &key).await {
                    Ok(None) => Event::InquiryFoundNothing,
                    Ok(Some(outcome)) => self.payout_event(Ok(outcome)),
                    Err(error) => self.error_event(error),
                }
            }
        }
    }

    /// Sends the reversal (a refund of a charge, a reversal of a push).
    pub async fn reverse(&self, row: &SettlementRow) -> ReversalAnswer {
        let keys = RequestKeys {
            idempotency_key: reversal_key(row),
            settlement_key: row.idempotency_key.to_string(),
        };
        match row.method {
            Method::CardCharge => {
                let request = RefundRequest {
                    keys,
                    charge_id: row.provider_id.clone().unwrap_or_default(),
                    amount_minor: row.amount_minor,
                    currency: row.currency.clone(),
                };
                self.refund_answer(self.acquirer.refund(&request).await)
            }
            Method::CardPush => {
                let request = ReversalRequest {
                    keys,
                    original_transaction_identifier: row
                        .transaction_identifier
                        .clone()
                        .unwrap_or_default(),
                    amount_minor: row.amount_minor,
                    currency: row.currency.clone(),
                };
                self.push_reversal_answer(self.card_push.reverse(&request).await)
            }
            _ => ReversalAnswer {
                event: Event::ReversalDeclined { action_code: None },
                detail: Some("this method cannot be reversed".into()),
            },
        }
    }

    /// Asks what became of the reversal sent under its key.
    pub async fn inquire_reversal(&self, row: &SettlementRow) -> ReversalAnswer {
        let key = reversal_key(row);
        match row.method {
            Method::CardCharge => match self.acquirer.lookup_refund(&key).await {
                Ok(None) => nothing_found(),
                Ok(Some(outcome)) => self.refund_answer(Ok(outcome)),
                Err(error) => self.reversal_unsettled(error),
            },
            Method::CardPush => match self.card_push.reversal_inquiry(&key).await {
                Ok(None) => nothing_found(),
                Ok(Some(outcome)) => self.push_reversal_answer(Ok(outcome)),
                Err(error) => self.reversal_unsettled(error),
            },
            _ => nothing_found(),
        }
    }

    /// `on_session`: whether the payer is there to finish a challenge. A
    /// payer's decline on the challenge page comes back as a declined charge
    /// (`authentication_failed`), kept as the failure reason.
    fn charge_event(
        &self,
        answer: Result<ChargeOutcome, ProviderError>,
        on_session: bool,
    ) -> Event {
        match answer {
            Ok(ChargeOutcome::Succeeded { charge_id }) => Event::Succeeded(Execution {
                provider_id: Some(charge_id),
                ..Execution::default()
            }),
            Ok(ChargeOutcome::RequiresAction {
                client_secret,
                next_action_type,
                ..
            }) if on_session => Event::ActionRequired {
                client_secret,
                next_action_type,
                now: Utc::now(),
            },
            // Off-session charges cannot be challenged (the acquirer should
            // have declined them itself; never leave one waiting).
            Ok(ChargeOutcome::RequiresAction { charge_id, .. }) => Event::Declined {
                reason: "authentication_required".into(),
                execution: Execution {
                    provider_id: Some(charge_id),
                    ..Execution::default()
                },
            },
            Ok(ChargeOutcome::Declined { code, .. }) => declined(&code),
            Err(error) => self.error_event(error),
        }
    }

    fn push_event(&self, answer: Result<PushOutcome, ProviderError>) -> Event {
        match answer {
            Ok(PushOutcome::Approved(approval)) => Event::Succeeded(Execution {
                provider_id: Some(approval.transaction_identifier.clone()),
                stan: Some(approval.stan),
                retrieval_reference_number: Some(approval.retrieval_reference_number),
                transaction_identifier: Some(approval.transaction_identifier),
                approval_code: Some(approval.approval_code),
                action_code: Some(approval.action_code),
            }),
            Ok(PushOutcome::Declined {
                action_code,
                reason,
            }) => Event::Declined {
                reason,
                execution: Execution {
                    action_code: Some(action_code),
                    ..Execution::default()
                },
            },
            Err(error) => self.error_event(error),
        }
    }

    fn payout_event(&self, answer: Result<PayoutOutcome, ProviderError>) -> Event {
        match answer {
            Ok(PayoutOutcome::Confirmed { payout_id, tx_hash }) => Event::Succeeded(Execution {
                provider_id: Some(payout_id),
                transaction_identifier: Some(tx_hash),
                ..Execution::default()
            }),
            Ok(PayoutOutcome::Pending { .. }) => Event::ProviderPending {
                at: Utc::now() + self.pending_poll,
            },
            Ok(PayoutOutcome::Rejected { reason }) => declined(&reason),
            Err(error) => self.error_event(error),
        }
    }

    fn error_event(&self, error: ProviderError) -> Event {
        let now = Utc::now();
        match error {
            ProviderError::Transient { reason } => {
                tracing::warn!(%reason, "provider call failed; retrying later");
                Event::Transient { now }
            }
            ProviderError::Unknown { reason, .. } => {
                tracing::warn!(%reason, "provider outcome unknown; inquiring later");
                Event::Unknown { now }
            }
            ProviderError::Permanent { code, message, .. } => {
                tracing::warn!(%code, %message, "provider refused the request");
                declined("provider_rejected")
            }
        }
    }

    fn refund_answer(&self, answer: Result<RefundOutcome, ProviderError>) -> ReversalAnswer {
        match answer {
            Ok(RefundOutcome::Succeeded { .. }) => {
                settled(Event::ReversalSucceeded(Execution::default()))
            }
            Ok(RefundOutcome::Pending { .. }) => settled(Event::ReversalPending {
                at: Utc::now() + self.pending_poll,
            }),
            Ok(RefundOutcome::Declined { code, reason }) => ReversalAnswer {
                event: Event::ReversalDeclined { action_code: None },
                detail: Some(format!("{code}: {reason}")),
            },
            Err(error) => self.reversal_error(error),
        }
    }

    fn push_reversal_answer(
        &self,
        answer: Result<ReversalOutcome, ProviderError>,
    ) -> ReversalAnswer {
        match answer {
            Ok(ReversalOutcome::Approved {
                action_code,
                approval_code,
            }) => settled(Event::ReversalSucceeded(Execution {
                action_code: Some(action_code),
                approval_code: Some(approval_code),
                ..Execution::default()
            })),
            Ok(ReversalOutcome::Pending) => settled(Event::ReversalPending {
                at: Utc::now() + self.pending_poll,
            }),
            Ok(ReversalOutcome::Declined {
                action_code,
                reason,
            }) => ReversalAnswer {
                detail: Some(format!("action code {action_code}: {reason}")),
                event: Event::ReversalDeclined {
                    action_code: Some(action_code),
                },
            },
            Err(error) => self.reversal_error(error),
        }
    }

    fn reversal_error(&self, error: ProviderError) -> ReversalAnswer {
        match error {
            ProviderError::Transient { reason } => ReversalAnswer {
                event: Event::ReversalTransient,
                detail: Some(reason),
            },
            // It may have happened: never forget it, ask again later.
            ProviderError::Unknown { .. } => self.reversal_unsettled(error),
            ProviderError::Permanent { code, message, .. } => ReversalAnswer {
                event: Event::ReversalDeclined { action_code: None },
                detail: Some(format!("{code}: {message}")),
            },
        }
    }

    fn reversal_unsettled(&self, error: ProviderError) -> ReversalAnswer {
        tracing::warn!(%error, "reversal outcome unknown; asking again later");
        ReversalAnswer {
            event: Event::ReversalPending {
                at: Utc::now() + self.pending_poll,
            },
            detail: None,
        }
    }
}

fn declined(reason: &str) -> Event {
    Event::Declined {
        reason: reason.to_owned(),
        execution: Execution::default(),
    }
}

fn settled(event: Event) -> ReversalAnswer {
    ReversalAnswer {
        event,
        detail: None,
    }
}

fn nothing_found() -> ReversalAnswer {
    settled(Event::ReversalFoundNothing)
}

/// The asset and micro-units the custodian pays for an on_chain row. A
/// transfer's leg is denominated in the asset itself (`USDT`, `USDC`, six
/// decimals) and is paid as is; a direct settlement is in USD cents, paid
/// 1:1 in the row's asset (USDC by default, as before assets had rows of
/// their own). Refused, with the failure reason: an asset currency the
/// custodian port cannot name, or more cents than
/// [`ON_CHAIN_USD_MAX_MINOR`] (refused at creation, so never sent).
pub fn payout_amount(
    currency: &str,
    amount_minor: MinorUnits,
    asset: Option<Asset>,
) -> Result<(Asset, MinorUnits), &'static str> {
    match Currency::find(currency) {
        Some(found) if found.kind == CurrencyKind::Asset => Asset::parse(found.code)
            .map(|asset| (asset, amount_minor))
            .ok_or("unsupported_asset"),
        _ => {
            let asset = asset.unwrap_or(Asset::Usdc);
            amount_minor
                .get()
                .checked_mul(STABLECOIN_UNITS_PER_CENT)
                .map(|micro| (asset, MinorUnits::new(micro)))
                .ok_or("amount_too_large")
        }
    }
}

/// `<network>:<wallet>`, as validated at creation.
pub fn on_chain_destination(destination: &str) -> Option<(Network, &str)> {
    let (network, wallet) = destination.split_once(':')?;
    Some((Network::parse(network)?, wallet))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asset_rows_are_paid_as_is_and_cents_are_converted() {
        assert_eq!(
            payout_amount("USDT", MinorUnits::new(12_345_678), None),
            Ok((Asset::Usdt, MinorUnits::new(12_345_678)))
        );
        // The row's currency names the asset; a stray asset column does not.
        assert_eq!(
            payout_amount("USDC", MinorUnits::new(1_000_000), Some(Asset::Usdt)),
            Ok((Asset::Usdc, MinorUnits::new(1_000_000)))
        );
        assert_eq!(
            payout_amount("USD", MinorUnits::new(1_050), Some(Asset::Usdt)),
            Ok((Asset::Usdt, MinorUnits::new(10_500_000)))
        );
        assert_eq!(
            payout_amount("USD", MinorUnits::new(1_050), None),
            Ok((Asset::Usdc, MinorUnits::new(10_500_000)))
        );
        assert_eq!(
            payout_amount("USD", ON_CHAIN_USD_MAX_MINOR, None),
            Ok((
                Asset::Usdc,
                MinorUnits::new(ON_CHAIN_USD_MAX_MINOR.get() * STABLECOIN_UNITS_PER_CENT)
            ))
        );
        assert_eq!(
            payout_amount(
                "USD",
                MinorUnits::new(ON_CHAIN_USD_MAX_MINOR.get() + 1),
                None
            ),
            Err("amount_too_large"),
            "never saturated into a wrong payout"
        );
    }
}

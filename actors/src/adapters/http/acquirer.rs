//! [`CardAcquirer`] over HTTP.

use async_trait::async_trait;

use super::wire::{self, ChargeStatus, RefundStatus};
use super::{AdapterConfigError, HttpProviderConfig, ProviderClient};
use crate::ports::{
    CardAcquirer, ChargeOutcome, ChargeRequest, ProviderError, RefundOutcome, RefundRequest,
};

#[derive(Debug, Clone)]
pub struct HttpCardAcquirer {
    client: ProviderClient,
}

impl HttpCardAcquirer {
    pub fn new(config: &HttpProviderConfig) -> Result<HttpCardAcquirer, AdapterConfigError> {
        Ok(HttpCardAcquirer {
            client: ProviderClient::new("acquirer", config)?,
        })
    }
}

fn metadata(settlement_key: &str) -> wire::Metadata {
    wire::Metadata {
        settlement_key: settlement_key.to_owned(),
    }
}

fn unknown_shape(what: &str) -> ProviderError {
    ProviderError::Unknown {
        timed_out: false,
        reason: format!("provider answer lacks {what}"),
    }
}

fn charge_outcome(charge: wire::Charge) -> Result<ChargeOutcome, ProviderError> {
    Ok(match charge.status {
        ChargeStatus::Succeeded => ChargeOutcome::Succeeded {
            charge_id: charge.id,
        },
        ChargeStatus::RequiresAction => {
            let next = charge
                .next_action
                .ok_or_else(|| unknown_shape("next_action"))?;
            ChargeOutcome::RequiresAction {
                charge_id: charge.id,
                client_secret: charge
                    .client_secret
                    .ok_or_else(|| unknown_shape("client_secret"))?,
                next_action_type: next.kind,
                redirect_url: Some(next.redirect_url),
            }
        }
        ChargeStatus::Declined => ChargeOutcome::Declined {
            code: charge
                .decline_code
                .unwrap_or_else(|| "card_declined".into()),
            reason: charge.failure_message.unwrap_or_default(),
        },
    })
}

fn refund_outcome(refund: wire::Refund) -> RefundOutcome {
    match refund.status {
        RefundStatus::Succeeded => RefundOutcome::Succeeded {
            refund_id: refund.id,
        },
        RefundStatus::Pending => RefundOutcome::Pending {
            refund_id: refund.id,
        },
        RefundStatus::Declined => RefundOutcome::Declined {
            code: refund
                .decline_code
                .unwrap_or_else(|| "refund_declined".into()),
            reason: refund.failure_message.unwrap_or_default(),
        },
    }
}

#[async_trait]
impl CardAcquirer for HttpCardAcquirer {
    #[tracing::instrument(skip_all, fields(key = %request.keys.idempotency_key, settlement_key = %request.keys.settlement_key))]
    async fn charge(&self, request: &ChargeRequest) -> Result<ChargeOutcome, ProviderError> {
        let body = wire::ChargeRequest {
            amount_minor: request.amount_minor.get(),
            currency: request.currency.clone(),
            payment_method: request.payment_method.clone(),
            off_session: request.off_session,
            metadata: metadata(&request.keys.settlement_key),
        };
        let charge: wire::Charge = self
            .client
            .execute(wire::PATH_CHARGES, &request.keys.idempotency_key, &body)
            .await?;
        charge_outcome(charge)
    }

    #[tracing::instrument(skip_all, fields(key = %request.keys.idempotency_key, settlement_key = %request.keys.settlement_key))]
    async fn refund(&self, request: &RefundRequest) -> Result<RefundOutcome, ProviderError> {
        let body = wire::RefundRequest {
            charge_id: request.charge_id.clone(),
            amount_minor: request.amount_minor.get(),
            currency: request.currency.clone(),
            metadata: metadata(&request.keys.settlement_key),
        };
        let refund: wire::Refund = self
            .client
            .execute(wire::PATH_REFUNDS, &request.keys.idempotency_key, &body)
            .await?;
        Ok(refund_outcome(refund))
    }

    async fn lookup_charge(
        &self,
        idempotency_key: &str,
    ) -> Result<Option<ChargeOutcome>, ProviderError> {
        let charge: Option<wire::Charge> = self
            .client
            .lookup(wire::PATH_CHARGE_LOOKUP, idempotency_key)
            .await?;
        charge.map(charge_outcome).transpose()
    }

    async fn lookup_refund(
        &self,
        idempotency_key: &str,
    ) -> Result<Option<RefundOutcome>, ProviderError> {
        let refund: Option<wire::Refund> = self
            .client
            .lookup(wire::PATH_REFUND_LOOKUP, idempotency_key)
            .await?;
        Ok(refund.map(refund_outcome))
    }
}

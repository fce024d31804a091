//! [`CardPush`] over HTTP.

use async_trait::async_trait;

use super::wire::{self, ReversalStatus};
use super::{AdapterConfigError, HttpProviderConfig, ProviderClient};
use crate::ports::{
    CardPush, ProviderError, PushApproval, PushOutcome, PushRequest, ReversalOutcome,
    ReversalRequest, ACTION_CODE_APPROVED, ACTION_CODE_RETRY,
};

#[derive(Debug, Clone)]
pub struct HttpCardPush {
    client: ProviderClient,
}

impl HttpCardPush {
    pub fn new(config: &HttpProviderConfig) -> Result<HttpCardPush, AdapterConfigError> {
        Ok(HttpCardPush {
            client: ProviderClient::new("card_push", config)?,
        })
    }
}

fn missing(what: &str) -> ProviderError {
    ProviderError::Unknown {
        timed_out: false,
        reason: format!("approved push lacks {what}"),
    }
}

/// Action code 91 is the network's "try again": nothing was executed.
fn retry_code(action_code: &str, reason: Option<&str>) -> Result<(), ProviderError> {
    if action_code == ACTION_CODE_RETRY {
        return Err(ProviderError::Transient {
            reason: format!(
                "action code {ACTION_CODE_RETRY}: {}",
                reason.unwrap_or("issuer or switch inoperative")
            ),
        });
    }
    Ok(())
}

fn push_outcome(push: wire::Push) -> Result<PushOutcome, ProviderError> {
    retry_code(&push.action_code, push.reason.as_deref())?;
    if push.action_code != ACTION_CODE_APPROVED {
        return Ok(PushOutcome::Declined {
            action_code: push.action_code,
            reason: push.reason.unwrap_or_default(),
        });
    }
    Ok(PushOutcome::Approved(PushApproval {
        stan: push.stan.ok_or_else(|| missing("stan"))?,
        retrieval_reference_number: push
            .retrieval_reference_number
            .ok_or_else(|| missing("retrieval_reference_number"))?,
        transaction_identifier: push
            .transaction_identifier
            .ok_or_else(|| missing("transaction_identifier"))?,
        approval_code: push.approval_code.ok_or_else(|| missing("approval_code"))?,
        action_code: push.action_code,
    }))
}

fn reversal_outcome(reversal: wire::Reversal) -> Result<ReversalOutcome, ProviderError> {
    if let Some(code) = &reversal.action_code {
        retry_code(code, reversal.reason.as_deref())?;
    }
    Ok(match reversal.status {
        ReversalStatus::Approved => ReversalOutcome::Approved {
            action_code: reversal
                .action_code
                .unwrap_or_else(|| ACTION_CODE_APPROVED.into()),
            approval_code: reversal
                .approval_code
                .ok_or_else(|| missing("approval_code"))?,
        },
        ReversalStatus::Pending => ReversalOutcome::Pending,
        ReversalStatus::Declined => ReversalOutcome::Declined {
            action_code: reversal.action_code.unwrap_or_else(|| "05".into()),
            reason: reversal.reason.unwrap_or_default(),
        },
    })
}

#[async_trait]
impl CardPush for HttpCardPush {
    #[tracing::instrument(skip_all, fields(key = %request.keys.idempotency_key, settlement_key = %request.keys.settlement_key))]
    async fn push(&self, request: &PushRequest) -> Result<PushOutcome, ProviderError> {
        let body = wire::PushRequest {
            amount_minor: request.amount_minor.get(),
            currency: request.currency.clone(),
            destination: request.destination.clone(),
            recipient_name: request.recipient_name.clone(),
            metadata: wire::Metadata {
                settlement_key: request.keys.settlement_key.clone(),
            },
        };
        let push: wire::Push = self
            .client
            .execute(wire::PATH_PUSHES, &request.keys.idempotency_key, &body)
            .await?;
        push_outcome(push)
    }

    #[tracing::instrument(skip_all, fields(key = %request.keys.idempotency_key, settlement_key = %request.keys.settlement_key))]
    async fn reverse(&self, request: &ReversalRequest) -> Result<ReversalOutcome, ProviderError> {
        let body = wire::ReversalRequest {
            original_transaction_identifier: request.original_transaction_identifier.clone(),
            amount_minor: request.amount_minor.get(),
            currency: request.currency.clone(),
            metadata: wire::Metadata {
                settlement_key: request.keys.settlement_key.clone(),
            },
        };
        let reversal: wire::Reversal = self
            .client
            .execute(wire::PATH_REVERSALS, &request.keys.idempotency_key, &body)
            .await?;
        reversal_outcome(reversal)
    }

    async fn inquiry(&self, idempotency_key: &str) -> Result<Option<PushOutcome>, ProviderError> {
        let push: Option<wire::Push> = self
            .client
            .lookup(wire::PATH_PUSH_INQUIRY, idempotency_key)
            .await?;
        push.map(push_outcome).transpose()
    }

    async fn reversal_inquiry(
        &self,
        idempotency_key: &str,
    ) -> Result<Option<ReversalOutcome>, ProviderError> {
        let reversal: Option<wire::Reversal> = self
            .client
            .lookup(wire::PATH_REVERSAL_INQUIRY, idempotency_key)
            .await?;
        reversal.map(reversal_outcome).transpose()
    }
}

//! [`Custodian`] over HTTP: one payout endpoint per network.

use async_trait::async_trait;

use super::wire::{self, PayoutStatus};
use super::{AdapterConfigError, HttpProviderConfig, ProviderClient};
use crate::ports::{Custodian, Network, PayoutOutcome, PayoutRequest, ProviderError};

#[derive(Debug, Clone)]
pub struct HttpCustodian {
    client: ProviderClient,
}

impl HttpCustodian {
    pub fn new(config: &HttpProviderConfig) -> Result<HttpCustodian, AdapterConfigError> {
        Ok(HttpCustodian {
            client: ProviderClient::new("custodian", config)?,
        })
    }
}

fn payout_outcome(payout: wire::Payout) -> Result<PayoutOutcome, ProviderError> {
    Ok(match payout.status {
        PayoutStatus::Confirmed => PayoutOutcome::Confirmed {
            tx_hash: payout.tx_hash.ok_or_else(|| ProviderError::Unknown {
                timed_out: false,
                reason: "confirmed payout lacks tx_hash".into(),
            })?,
            payout_id: payout.id,
        },
        PayoutStatus::Pending => PayoutOutcome::Pending {
            payout_id: payout.id,
        },
        PayoutStatus::Rejected => PayoutOutcome::Rejected {
            reason: payout.reason.unwrap_or_default(),
        },
    })
}

#[async_trait]
impl Custodian for HttpCustodian {
    #[tracing::instrument(skip_all, fields(key = %request.keys.idempotency_key, settlement_key = %request.keys.settlement_key, network = request.network.as_str()))]
    async fn payout(&self, request: &PayoutRequest) -> Result<PayoutOutcome, ProviderError> {
        let body = wire::PayoutRequest {
            wallet: request.wallet.clone(),
            asset: request.asset.as_str().to_owned(),
            amount_minor: request.amount_minor.get(),
            metadata: wire::Metadata {
                settlement_key: request.keys.settlement_key.clone(),
            },
        };
        let path = wire::path_payouts(request.network.as_str());
        let payout: wire::Payout = self
            .client
            .execute(&path, &request.keys.idempotency_key, &body)
            .await?;
        payout_outcome(payout)
    }

    async fn payout_status(
        &self,
        network: Network,
        idempotency_key: &str,
    ) -> Result<Option<PayoutOutcome>, ProviderError> {
        let path = wire::path_payout_status(network.as_str());
        let payout: Option<wire::Payout> = self.client.lookup(&path, idempotency_key).await?;
        payout.map(payout_outcome).transpose()
    }
}

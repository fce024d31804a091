//! A client for the simulator's control API (faults, the execution log and
//! played card-network events). Only tests and operators' tooling use it;
//! no business code does.

use reqwest::StatusCode;

use super::wire::{self, ExecutionList, FaultSpec};
use super::{send, AdapterConfigError, HttpProviderConfig, ProviderClient};
use crate::ports::ProviderError;

#[derive(Debug, Clone)]
pub struct SandboxControl {
    client: ProviderClient,
}

/// Filters of [`SandboxControl::executions`]; `None` means any.
#[derive(Debug, Clone, Default)]
pub struct ExecutionFilter<'a> {
    pub key: Option<&'a str>,
    pub settlement_key: Option<&'a str>,
}

impl SandboxControl {
    pub fn new(config: &HttpProviderConfig) -> Result<SandboxControl, AdapterConfigError> {
        Ok(SandboxControl {
            client: ProviderClient::new("control", config)?,
        })
    }

    /// Arms a fault; the simulator answers 201.
    pub async fn arm_fault(&self, fault: &FaultSpec) -> Result<(), ProviderError> {
        let url = self.client.endpoint(wire::PATH_FAULTS)?;
        let response = send(self.client.client().post(url).json(fault)).await?;
        expect_status(response.status(), StatusCode::CREATED)
    }

    /// Clears every armed fault.
    pub async fn clear_faults(&self) -> Result<(), ProviderError> {
        let url = self.client.endpoint(wire::PATH_FAULTS)?;
        let response = send(self.client.client().delete(url)).await?;
        expect_status(response.status(), StatusCode::NO_CONTENT)
    }

    pub async fn executions(
        &self,
        filter: ExecutionFilter<'_>,
    ) -> Result<Vec<wire::Execution>, ProviderError> {
        let mut url = self.client.endpoint(wire::PATH_EXECUTIONS)?;
        {
            let mut query = url.query_pairs_mut();
            if let Some(key) = filter.key {
                query.append_pair("key", key);
            }
            if let Some(settlement_key) = filter.settlement_key {
                query.append_pair("settlement_key", settlement_key);
            }
        }
        let response = send(self.client.client().get(url)).await?;
        expect_status(response.status(), StatusCode::OK)?;
        let list: ExecutionList = response.json().await.map_err(|e| ProviderError::Unknown {
            timed_out: e.is_timeout(),
            reason: e.to_string(),
        })?;
        Ok(list.data)
    }

    /// Plays a card swipe: the simulator sends Tern a signed
    /// `authorization.request` and answers with Tern's status and decision.
    pub async fn authorize(
        &self,
        swipe: &wire::AuthorizationControl,
    ) -> Result<wire::CardEventSent, ProviderError> {
        self.client
            .post(wire::PATH_CONTROL_AUTHORIZATIONS, swipe)
            .await
    }

    /// Plays the clearing of an authorization (`authorization.clearing`).
    pub async fn clear(
        &self,
        clearing: &wire::ClearingControl,
    ) -> Result<wire::CardEventSent, ProviderError> {
        self.client
            .post(wire::PATH_CONTROL_CLEARINGS, clearing)
            .await
    }

    /// Plays the network's reversal of an authorization
    /// (`authorization.reversal`).
    pub async fn reverse(
        &self,
        reversal: &wire::ReversalControl,
    ) -> Result<wire::CardEventSent, ProviderError> {
        self.client
            .post(wire::PATH_CONTROL_REVERSALS, reversal)
            .await
    }

    /// Plays a merchant refund to a card (`refund.succeeded` with `card_id`).
    pub async fn refund_to_card(
        &self,
        refund: &wire::CardRefundControl,
    ) -> Result<wire::CardEventSent, ProviderError> {
        self.client.post(wire::PATH_CONTROL_REFUNDS, refund).await
    }
}

fn expect_status(actual: StatusCode, expected: StatusCode) -> Result<(), ProviderError> {
    if actual == expected {
        return Ok(());
    }
    Err(ProviderError::Permanent {
        status: actual.as_u16(),
        code: "unexpected_status".into(),
        message: format!("expected {expected}"),
    })
}

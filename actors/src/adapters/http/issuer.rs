//! [`CardIssuer`] over HTTP. Issuing and wallet provisioning carry the
//! caller's idempotency key; a status change needs none (setting the status
//! a card has succeeds). A refusal with code `wallet_not_supported` is the
//! issuer saying it does not offer that wallet, not a failure.

use async_trait::async_trait;

use super::wire;
use super::{AdapterConfigError, HttpProviderConfig, ProviderClient};
use crate::ports::{
    CardIssuer, CardSecrets, EmbedRequest, IssueRequest, IssuedCard, IssuerStatus, ProviderError,
    WalletOutcome, WalletRequest,
};

#[derive(Debug, Clone)]
pub struct HttpCardIssuer {
    client: ProviderClient,
}

impl HttpCardIssuer {
    pub fn new(config: &HttpProviderConfig) -> Result<HttpCardIssuer, AdapterConfigError> {
        Ok(HttpCardIssuer {
            client: ProviderClient::new("issuer", config)?,
        })
    }
}

/// `value` as one path segment: everything but RFC 3986's unreserved
/// characters percent-encoded. `.` and `..` would be read as path steps
/// however encoded, so they are refused before anything is sent.
fn segment(value: &str) -> Result<String, ProviderError> {
    if matches!(value, "" | "." | "..") {
        return Err(ProviderError::Permanent {
            status: 0,
            code: "client_error".into(),
            message: format!("`{value}` cannot name a provider record"),
        });
    }
    Ok(value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect())
}

fn card_path(provider_card_id: &str, action: &str) -> Result<String, ProviderError> {
    Ok(wire::path_issuer_card(&segment(provider_card_id)?, action))
}

fn issued_card(card: wire::IssuedCard) -> IssuedCard {
    IssuedCard {
        provider_card_id: card.id,
        last_four: card.last_four,
        expiry_month: card.expiry_month,
        expiry_year: card.expiry_year,
    }
}

#[async_trait]
impl CardIssuer for HttpCardIssuer {
    // The cardholder's name stays out of the span: it is the user's.
    #[tracing::instrument(skip_all, fields(key = %request.idempotency_key, card_id = %request.card_id, network = request.network.as_str()))]
    async fn issue(&self, request: &IssueRequest) -> Result<IssuedCard, ProviderError> {
        let body = wire::IssueCardRequest {
            card_id: request.card_id.to_string(),
            user_id: request.user_id.to_string(),
            program_id: request.program_id.clone(),
            network: request.network.as_str().to_owned(),
            card_type: request.card_type.as_str().to_owned(),
            currency: request.currency.clone(),
            cardholder: request.cardholder.clone(),
        };
        let card: wire::IssuedCard = self
            .client
            .execute(wire::PATH_ISSUER_CARDS, &request.idempotency_key, &body)
            .await?;
        Ok(issued_card(card))
    }

    async fn find_issued(
        &self,
        idempotency_key: &str,
    ) -> Result<Option<IssuedCard>, ProviderError> {
        let path = wire::path_issued_by_key(&segment(idempotency_key)?);
        let card: Option<wire::IssuedCard> = self.client.get(&path).await?;
        Ok(card.map(issued_card))
    }

    #[tracing::instrument(skip_all, fields(provider_card_id = %provider_card_id, status = status.as_str()))]
    async fn set_status(
        &self,
        provider_card_id: &str,
        status: IssuerStatus,
    ) -> Result<(), ProviderError> {
        let body = wire::CardStatusRequest {
            status: status.as_str().to_owned(),
        };
        let path = card_path(provider_card_id, "status")?;
        let _: wire::CardStatus = self.client.post(&path, &body).await?;
        Ok(())
    }

    async fn secrets(&self, provider_card_id: &str) -> Result<CardSecrets, ProviderError> {
        let path = card_path(provider_card_id, "secrets")?;
        let secrets: wire::CardSecrets =
            self.client
                .get(&path)
                .await?
                .ok_or_else(|| ProviderError::Permanent {
                    status: 404,
                    code: wire::CODE_NOT_FOUND.into(),
                    message: "the issuer has no such card".into(),
                })?;
        Ok(CardSecrets {
            pan: secrets.pan,
            cvv: secrets.cvv,
            expiry_month: secrets.expiry_month,
            expiry_year: secrets.expiry_year,
        })
    }

    async fn embed_url(&self, request: &EmbedRequest) -> Result<String, ProviderError> {
        let body = wire::EmbedUrlRequest {
            target_origin: request.target_origin.clone(),
            expires_at: request.expires_at.and_utc().timestamp(),
        };
        let path = card_path(&request.provider_card_id, "embed")?;
        let embed: wire::EmbedUrl = self.client.post(&path, &body).await?;
        Ok(embed.url)
    }

    #[tracing::instrument(skip_all, fields(key = %request.idempotency_key, card_id = %request.card_id, wallet = request.wallet.as_str()))]
    async fn provision_wallet(
        &self,
        request: &WalletRequest,
    ) -> Result<WalletOutcome, ProviderError> {
        let body = wire::WalletTokenRequest {
            card_id: request.card_id.to_string(),
            wallet: request.wallet.as_str().to_owned(),
            device_id: request.device_id.clone(),
        };
        let path = card_path(&request.provider_card_id, "wallets")?;
        let answer = self
            .client
            .execute::<_, wire::WalletToken>(&path, &request.idempotency_key, &body)
            .await;
        match answer {
            Ok(token) => Ok(WalletOutcome::Requested {
                provider_token_id: token.provider_token_id,
            }),
            Err(ProviderError::Permanent { code, message, .. })
                if code == wire::CODE_WALLET_NOT_SUPPORTED =>
            {
                Ok(WalletOutcome::NotSupported { reason: message })
            }
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_percent_encoded_and_dot_segments_refused() {
        assert_eq!(segment("card_01J-x.y~z").expect("plain"), "card_01J-x.y~z");
        assert_eq!(
            segment("a/b c?d#e%").expect("encoded"),
            "a%2Fb%20c%3Fd%23e%25"
        );
        assert_eq!(segment("é").expect("utf-8"), "%C3%A9");
        for bad in ["", ".", ".."] {
            assert!(
                matches!(segment(bad), Err(ProviderError::Permanent { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(
            card_path("ic_1", "status").expect("path"),
            "/issuer/cards/ic_1/status"
        );
    }
}

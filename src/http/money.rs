//! Money on the wire (interface: Money): an exact decimal string in major
//! units and an ISO 4217 code. Parsed into int64 minor units, never floats.

use serde::{Deserialize, Serialize};
use tern_schema::money::{Currency, CurrencyKind, MinorUnits};
use utoipa::ToSchema;

use crate::http::problem::FieldErrors;

#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Money {
    /// Major-unit decimal string with at most the currency's decimals.
    #[schema(example = "25.00")]
    pub amount: String,
    /// ISO 4217 alpha-3.
    #[schema(example = "USD", pattern = "^[A-Z]{3}$")]
    pub currency: String,
}

/// The amount of a settlement as answered. The on-chain leg of a transfer
/// is a settlement in the transfer's asset (decisions §7), so its code is
/// `USDT` or `USDC` (six decimals), which [`Money`]'s ISO 4217 pattern,
/// kept for requests, does not admit.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SettlementAmount {
    /// Major-unit decimal string with exactly the currency's decimals.
    #[schema(example = "25.00")]
    pub amount: String,
    /// ISO 4217 alpha-3, or the asset of a transfer's on-chain leg.
    #[schema(example = "USD", pattern = "^([A-Z]{3}|USDT|USDC)$")]
    pub currency: String,
}

/// A stored amount in its canonical form; an unknown code (never written
/// by this build) shows the raw minor units rather than failing the read.
pub fn canonical_amount(code: &str, minor: MinorUnits) -> String {
    match Currency::find(code) {
        Some(currency) => currency.format(minor.get()),
        None => minor.to_string(),
    }
}

impl Money {
    /// The canonical form: exactly the currency's exponent in digits.
    pub fn of(currency: Currency, minor: MinorUnits) -> Money {
        Money {
            amount: currency.format(minor.get()),
            currency: currency.code.to_owned(),
        }
    }

    /// Minor units in a fiat currency Tern supports; errors go under
    /// `field.currency` / `field.amount`.
    pub fn parse_fiat(
        &self,
        field: &str,
        errors: &mut FieldErrors,
    ) -> Option<(Currency, MinorUnits)> {
        let currency = match Currency::find(&self.currency) {
            Some(currency) if currency.kind == CurrencyKind::Fiat => currency,
            _ => {
                let supported: Vec<&str> = Currency::fiat().map(|c| c.code).collect();
                errors.insert(
                    format!("{field}.currency"),
                    format!("must be one of {}", supported.join(", ")),
                );
                return None;
            }
        };
        match currency.parse(&self.amount) {
            Ok(minor) => Some((currency, MinorUnits::new(minor))),
            Err(error) => {
                errors.insert(format!("{field}.amount"), error.to_string());
                None
            }
        }
    }
}

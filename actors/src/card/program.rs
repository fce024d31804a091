//! Card programs (decisions §1): what a card is issued as when the request
//! leaves it open, and the card art a program's cards wear.

use super::machine::Limits;
use crate::ports::{CardNetwork, CardType};
use tern_schema::money::MinorUnits;

/// The program of a request that names none.
pub const DEFAULT_PROGRAM: &str = "SVC_VIRTUAL_USD";
/// The legacy name of the default program.
pub const LEGACY_DEFAULT_ALIAS: &str = "SVC_VIRTUAL";
pub const DEFAULT_CARD_TYPE: CardType = CardType::Virtual;
pub const DEFAULT_THEME: &str = "dark";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Program {
    pub id: &'static str,
    pub network: CardNetwork,
    /// The one currency the program issues in, or `None` for any fiat
    /// currency Tern supports (USD when the request names none).
    pub currency: Option<&'static str>,
    pub product_name: &'static str,
    pub card_art: &'static str,
}

pub const PROGRAMS: [Program; 4] = [
    Program {
        id: "SVC_VIRTUAL_USD",
        network: CardNetwork::Visa,
        currency: Some("USD"),
        product_name: "Tern Virtual USD",
        card_art: "tern_virtual_usd",
    },
    Program {
        id: "SVC_VIRTUAL_EUR",
        network: CardNetwork::Mastercard,
        currency: Some("EUR"),
        product_name: "Tern Virtual EUR",
        card_art: "tern_virtual_eur",
    },
    Program {
        id: "SVC_PREPAID",
        network: CardNetwork::Visa,
        currency: None,
        product_name: "Tern Prepaid",
        card_art: "tern_prepaid",
    },
    Program {
        id: "SVC_BUSINESS",
        network: CardNetwork::Mastercard,
        currency: None,
        product_name: "Tern Business",
        card_art: "tern_business",
    },
];

/// Card art designs: (id, title). Every program's `card_art` is one of them.
pub const CARD_ART: [(&str, &str); 4] = [
    ("tern_virtual_usd", "Tern Virtual (USD)"),
    ("tern_virtual_eur", "Tern Virtual (EUR)"),
    ("tern_prepaid", "Tern Prepaid"),
    ("tern_business", "Tern Business"),
];

pub const BRAND: &str = "Tern";
pub const ISSUER_NAME: &str = "Tern Sandbox Issuing";

/// The program a request names, the legacy alias included; `None` for an
/// unknown name.
pub fn find(id: &str) -> Option<&'static Program> {
    let id = if id == LEGACY_DEFAULT_ALIAS {
        DEFAULT_PROGRAM
    } else {
        id
    };
    PROGRAMS.iter().find(|program| program.id == id)
}

/// Controls a new card starts with: spend caps a person would expect of a
/// consumer card, online and international on, ATM only for physical cards
/// (a virtual card cannot be put into an ATM).
pub fn default_limits(card_type: CardType) -> Limits {
    Limits {
        per_transaction_minor: Some(MinorUnits::new(500_000)),
        daily_spend_minor: Some(MinorUnits::new(1_000_000)),
        monthly_spend_minor: Some(MinorUnits::new(5_000_000)),
        atm_daily_minor: Some(MinorUnits::new(50_000)),
        online_enabled: true,
        international_enabled: true,
        atm_enabled: card_type == CardType::Physical,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::machine::check_limits;

    #[test]
    fn programs_map_to_the_decided_networks_and_the_alias_to_the_default() {
        let network = |id: &str| find(id).map(|p| p.network);
        assert_eq!(network("SVC_VIRTUAL_USD"), Some(CardNetwork::Visa));
        assert_eq!(network("SVC_VIRTUAL_EUR"), Some(CardNetwork::Mastercard));
        assert_eq!(network("SVC_PREPAID"), Some(CardNetwork::Visa));
        assert_eq!(network("SVC_BUSINESS"), Some(CardNetwork::Mastercard));
        assert_eq!(find("SVC_VIRTUAL").map(|p| p.id), Some(DEFAULT_PROGRAM));
        assert!(find("svc_virtual_usd").is_none());
        assert!(find("").is_none());
    }

    #[test]
    fn every_program_wears_listed_art_and_starts_with_valid_limits() {
        for program in PROGRAMS {
            assert!(CARD_ART.iter().any(|(id, _)| *id == program.card_art));
        }
        for card_type in CardType::ALL {
            assert!(check_limits(&default_limits(card_type)).is_empty());
        }
        assert!(!default_limits(CardType::Virtual).atm_enabled);
        assert!(default_limits(CardType::Physical).atm_enabled);
    }
}

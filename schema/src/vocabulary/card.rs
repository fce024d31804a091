//! A card's standing and the network it is issued on.

crate::text_enum! {
    /// Where a card stands. `Issuing` is the intent written before the
    /// issuer answered; `Issuing`, `Active` and `Frozen` are live (one live
    /// virtual card per user); `Blocked` is a replaced card, `Closed` the
    /// end, accepting nothing.
    pub enum CardStatus {
        Issuing = "issuing",
        Active = "active",
        Frozen = "frozen",
        Blocked = "blocked",
        Closed = "closed",
    }
}

crate::text_enum! {
    /// Card networks a program issues on (decisions §1).
    pub enum CardNetwork {
        Visa = "visa",
        Mastercard = "mastercard",
    }
}

impl CardNetwork {
    /// The name shown to people: `Visa **** 4242`.
    pub fn display_name(self) -> &'static str {
        match self {
            CardNetwork::Visa => "Visa",
            CardNetwork::Mastercard => "Mastercard",
        }
    }
}

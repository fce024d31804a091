//! A card's standing.

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

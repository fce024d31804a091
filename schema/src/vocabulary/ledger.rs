//! The ledger's accounts and transactions (see [`crate::ledger`]).

crate::text_enum! {
    /// What an account is for: a merchant's spendable funds, or one of the
    /// system's counterparties (named by [`crate::ledger::SystemAccount`]).
    pub enum AccountKind {
        Funding = "funding",
        CardAcquirer = "card_acquirer",
        CardPush = "card_push",
        Custodian = "custodian",
        TransferClearing = "transfer_clearing",
        PlatformFees = "platform_fees",
        NetworkFees = "network_fees",
        Conversion = "conversion",
        CardNetwork = "card_network",
    }
}

crate::text_enum! {
    /// A hold stays `Pending`; its resolution is a new transaction,
    /// `Posted` or `Voided`, and a direct posting is `Posted` at once.
    pub enum LedgerStatus {
        Pending = "pending",
        Posted = "posted",
        Voided = "voided",
    }
}

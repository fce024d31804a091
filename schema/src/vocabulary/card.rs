//! A card's standing, the network it is issued on, its transactions and
//! its wallet tokens.

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

crate::text_enum! {
    /// A card's form: one live virtual card per user.
    pub enum CardType {
        Virtual = "virtual",
        Physical = "physical",
    }
}

crate::text_enum! {
    /// Mobile wallets a token can be provisioned into (decisions §1).
    pub enum Wallet {
        ApplePay = "apple_pay",
        GooglePay = "google_pay",
    }
}

crate::text_enum! {
    /// A wallet token's status, as the issuer reports it.
    pub enum WalletTokenStatus {
        Requested = "requested",
        Provisioning = "provisioning",
        Active = "active",
        Suspended = "suspended",
        Removed = "removed",
        Failed = "failed",
    }
}

crate::text_enum! {
    /// A card's wallet status, which follows its tokens: a token's status,
    /// or `None` while it has none.
    pub enum WalletStatus {
        None = "none",
        Requested = "requested",
        Provisioning = "provisioning",
        Active = "active",
        Suspended = "suspended",
        Removed = "removed",
        Failed = "failed",
    }
}

impl From<WalletTokenStatus> for WalletStatus {
    fn from(status: WalletTokenStatus) -> WalletStatus {
        match status {
            WalletTokenStatus::Requested => WalletStatus::Requested,
            WalletTokenStatus::Provisioning => WalletStatus::Provisioning,
            WalletTokenStatus::Active => WalletStatus::Active,
            WalletTokenStatus::Suspended => WalletStatus::Suspended,
            WalletTokenStatus::Removed => WalletStatus::Removed,
            WalletTokenStatus::Failed => WalletStatus::Failed,
        }
    }
}

crate::text_enum! {
    /// What a card transaction records: one per provider event, or per
    /// hold expiry Tern makes.
    pub enum CardTransactionKind {
        Authorization = "authorization",
        Clear = "clear",
        Refund = "refund",
        /// The network released part or all of an authorization's hold.
        Reversal = "reversal",
        /// Nothing cleared an authorization within the hold's lifetime:
        /// Tern released it.
        Expiry = "expiry",
    }
}

crate::text_enum! {
    /// authorization: `Approved` (hold open), `Declined`, `Cleared`,
    /// `Reversed` or `Expired`; clear and refund: `Posted`; reversal and
    /// expiry: `Released`.
    pub enum CardTransactionStatus {
        Approved = "approved",
        Declined = "declined",
        Cleared = "cleared",
        Voided = "voided",
        Posted = "posted",
        /// An authorization the network reversed in full.
        Reversed = "reversed",
        /// An authorization whose hold expired.
        Expired = "expired",
        /// A reversal or expiry: the amount went back to the funding account.
        Released = "released",
    }
}

crate::text_enum! {
    /// Whose id a card transaction's event id is: an inbound webhook's, or
    /// one Tern made (a hold's expiry). Ids are unique per source.
    pub enum EventSource {
        Provider = "provider",
        Tern = "tern",
    }
}

crate::text_enum! {
    /// Where a card is used.
    pub enum Channel {
        Online = "online",
        Pos = "pos",
        Atm = "atm",
    }
}

crate::text_enum! {
    /// Why an authorization is declined: the `reason` answered to the
    /// provider and stored on the transaction.
    pub enum Decline {
        CardFrozen = "card_frozen",
        CardBlocked = "card_blocked",
        CardClosed = "card_closed",
        CardNotIssued = "card_not_issued",
        CurrencyMismatch = "currency_mismatch",
        InvalidAmount = "invalid_amount",
        OnlineDisabled = "online_disabled",
        InternationalDisabled = "international_disabled",
        AtmDisabled = "atm_disabled",
        PerTransactionLimit = "per_transaction_limit_exceeded",
        DailyLimit = "daily_limit_exceeded",
        MonthlyLimit = "monthly_limit_exceeded",
        AtmDailyLimit = "atm_daily_limit_exceeded",
        InsufficientFunds = "insufficient_funds",
        /// The card's merchant is suspended or disabled (decisions §1a).
        MerchantInactive = "merchant_inactive",
        /// The card's user is disabled (decisions §1a).
        UserDisabled = "user_disabled",
        /// The ledger cannot hold the amount: a balance would pass int64.
        AmountTooLarge = "amount_too_large",
        /// The card already decided another request under this
        /// authorization id, for another amount or currency.
        DuplicateAuthorization = "duplicate_authorization",
    }
}

//! What an on-chain payout pays in, and on which network.

crate::text_enum! {
    /// The networks a payout goes out on.
    pub enum Network {
        Tron = "tron",
        Ethereum = "ethereum",
        Polygon = "polygon",
        Bsc = "bsc",
    }
}

impl Network {
    /// Tron addresses are base58check `T...`; the others are EVM `0x` + hex.
    pub fn is_evm(self) -> bool {
        !matches!(self, Network::Tron)
    }
}

crate::text_enum! {
    /// The stablecoins a payout pays in.
    pub enum Asset {
        Usdt = "USDT",
        Usdc = "USDC",
    }
}

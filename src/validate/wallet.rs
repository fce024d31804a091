//! On-chain payout destinations: `<network>:<wallet_address>`, with the
//! wallet checked for its network (decisions §7): EVM addresses are `0x` + 40
//! hex digits, EIP-55 checksummed when mixed case; tron addresses are
//! base58check `T...` of 34 characters.

use sha2::{Digest, Sha256};
use sha3::Keccak256;
use tern_actors::ports::Network;

/// Longest destination looked at; anything longer is refused before decoding.
pub const DESTINATION_LENGTH_MAX: usize = 128;
const TRON_ADDRESS_CHARS: usize = 34;
const TRON_ADDRESS_BYTES: usize = 25;
const TRON_VERSION_BYTE: u8 = 0x41;
const EVM_HEX_DIGITS: usize = 40;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WalletError {
    #[error("must be <network>:<wallet_address>")]
    NotADestination,
    #[error("network must be one of tron, ethereum, polygon, bsc")]
    UnknownNetwork,
    #[error("is not a valid {0} address")]
    Malformed(&'static str),
    #[error("has an invalid EIP-55 checksum")]
    BadEip55Checksum,
    #[error("has an invalid tron checksum")]
    BadTronChecksum,
}

/// Splits and checks `<network>:<wallet_address>`.
pub fn on_chain_destination(text: &str) -> Result<(Network, String), WalletError> {
    if text.len() > DESTINATION_LENGTH_MAX {
        return Err(WalletError::NotADestination);
    }
    let (network, address) = text.split_once(':').ok_or(WalletError::NotADestination)?;
    if network.is_empty() || address.is_empty() || address.contains(':') {
        return Err(WalletError::NotADestination);
    }
    let network = Network::parse(network).ok_or(WalletError::UnknownNetwork)?;
    wallet(network, address)?;
    Ok((network, address.to_owned()))
}

/// Checks a wallet address for its network.
pub fn wallet(network: Network, address: &str) -> Result<(), WalletError> {
    match network {
        Network::Tron => tron(address),
        Network::Ethereum | Network::Polygon | Network::Bsc => evm(network, address),
    }
}

fn evm(network: Network, address: &str) -> Result<(), WalletError> {
    let malformed = WalletError::Malformed(network.as_str());
    let hex_part = address.strip_prefix("0x").ok_or(malformed.clone())?;
    if hex_part.len() != EVM_HEX_DIGITS || !hex_part.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(malformed);
    }
    let has_lower = hex_part.bytes().any(|b| b.is_ascii_lowercase());
    let has_upper = hex_part.bytes().any(|b| b.is_ascii_uppercase());
    if !(has_lower && has_upper) {
        // Single-case addresses carry no checksum (EIP-55).
        return Ok(());
    }
    let hash = Keccak256::digest(hex_part.to_ascii_lowercase().as_bytes());
    let checksummed = hex_part.bytes().enumerate().all(|(index, byte)| {
        let nibble = (hash[index / 2] >> (if index % 2 == 0 { 4 } else { 0 })) & 0x0f;
        !byte.is_ascii_alphabetic() || byte.is_ascii_uppercase() == (nibble >= 8)
    });
    if checksummed {
        Ok(())
    } else {
        Err(WalletError::BadEip55Checksum)
    }
}

fn tron(address: &str) -> Result<(), WalletError> {
    let malformed = WalletError::Malformed("tron");
    if address.len() != TRON_ADDRESS_CHARS || !address.starts_with('T') {
        return Err(malformed);
    }
    let bytes = bs58::decode(address)
        .into_vec()
        .map_err(|_| malformed.clone())?;
    if bytes.len() != TRON_ADDRESS_BYTES || bytes[0] != TRON_VERSION_BYTE {
        return Err(malformed);
    }
    let (payload, checksum) = bytes.split_at(TRON_ADDRESS_BYTES - 4);
    let digest = Sha256::digest(Sha256::digest(payload));
    if &digest[..4] == checksum {
        Ok(())
    } else {
        Err(WalletError::BadTronChecksum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vectors of EIP-55 itself.
    const EIP55: [&str; 4] = [
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
        "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
    ];
    /// The USDT TRC-20 contract.
    const TRON_USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";

    #[test]
    fn eip55_vectors_pass_and_a_flipped_case_fails() {
        for address in EIP55 {
            for network in [Network::Ethereum, Network::Polygon, Network::Bsc] {
                assert_eq!(wallet(network, address), Ok(()), "{address}");
            }
            assert_eq!(
                wallet(Network::Ethereum, &address.to_ascii_lowercase()),
                Ok(()),
                "lower case has no checksum"
            );
            let flip = address
                .char_indices()
                .skip(2)
                .find(|(_, c)| c.is_ascii_alphabetic())
                .map(|(i, _)| i)
                .expect("letter");
            let mut flipped: Vec<char> = address.chars().collect();
            flipped[flip] = if flipped[flip].is_ascii_uppercase() {
                flipped[flip].to_ascii_lowercase()
            } else {
                flipped[flip].to_ascii_uppercase()
            };
            let flipped: String = flipped.into_iter().collect();
            assert_eq!(
                wallet(Network::Ethereum, &flipped),
                Err(WalletError::BadEip55Checksum),
                "{flipped}"
            );
        }
    }

    #[test]
    fn malformed_evm_addresses_fail() {
        let valid = EIP55[0];
        for bad in [
            &valid[2..],
            &valid[..41],
            &format!("{valid}0"),
            "0xZZZZb6053F3E94C9b9A09f33669435E7Ef1BeAed",
            "",
            "0x",
            " 0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
        ] {
            assert!(
                matches!(
                    wallet(Network::Ethereum, bad),
                    Err(WalletError::Malformed(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn tron_base58check() {
        assert_eq!(wallet(Network::Tron, TRON_USDT), Ok(()));
        let changed = TRON_USDT.replace("8q8", "8q9");
        assert_eq!(
            wallet(Network::Tron, &changed),
            Err(WalletError::BadTronChecksum)
        );
        for bad in [
            &TRON_USDT[..33],
            "AR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t",
            "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj60",
            EIP55[0],
        ] {
            assert!(
                matches!(wallet(Network::Tron, bad), Err(WalletError::Malformed(_))),
                "{bad}"
            );
        }
        assert!(wallet(Network::Ethereum, TRON_USDT).is_err());
    }

    #[test]
    fn destinations() {
        assert_eq!(
            on_chain_destination(&format!("tron:{TRON_USDT}")),
            Ok((Network::Tron, TRON_USDT.to_owned()))
        );
        assert_eq!(
            on_chain_destination(&format!("polygon:{}", EIP55[1])).map(|(n, _)| n),
            Ok(Network::Polygon)
        );
        assert_eq!(
            on_chain_destination(TRON_USDT),
            Err(WalletError::NotADestination)
        );
        assert_eq!(
            on_chain_destination(&format!("solana:{TRON_USDT}")),
            Err(WalletError::UnknownNetwork)
        );
        assert_eq!(
            on_chain_destination(&format!("TRON:{TRON_USDT}")),
            Err(WalletError::UnknownNetwork)
        );
        assert_eq!(
            on_chain_destination("tron:"),
            Err(WalletError::NotADestination)
        );
        assert_eq!(
            on_chain_destination(&format!(":{TRON_USDT}")),
            Err(WalletError::NotADestination)
        );
        assert_eq!(
            on_chain_destination(&format!("tron:{TRON_USDT}:x")),
            Err(WalletError::NotADestination)
        );
        assert_eq!(
            on_chain_destination(&"x".repeat(200)),
            Err(WalletError::NotADestination)
        );
        assert!(matches!(
            on_chain_destination(&format!("bsc:{}", &EIP55[0][..20])),
            Err(WalletError::Malformed("bsc"))
        ));
    }
}

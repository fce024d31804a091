//! The API key format `svc_<prefix>_<secret>`: the prefix finds the key, the
//! SHA-256 digest of the secret proves it. 32 random bytes of secret make a
//! slow KDF unnecessary, so verifying a key costs one hash.

use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub const KEY_PREFIX: &str = "svc_";
/// Random bytes in the lookup prefix (shown in listings).
pub const PREFIX_BYTES: usize = 6;
/// Random bytes in the secret.
pub const SECRET_BYTES: usize = 32;

/// A freshly generated key; `plaintext` is shown to the caller once.
pub struct GeneratedKey {
    pub plaintext: String,
    pub prefix: String,
    pub secret_sha256: String,
}

pub fn generate() -> GeneratedKey {
    let mut rng = rand::rng();
    let mut prefix = [0u8; PREFIX_BYTES];
    let mut secret = [0u8; SECRET_BYTES];
    rng.fill_bytes(&mut prefix);
    rng.fill_bytes(&mut secret);
    let prefix = hex::encode(prefix);
    let secret = hex::encode(secret);
    GeneratedKey {
        plaintext: format!("{KEY_PREFIX}{prefix}_{secret}"),
        secret_sha256: digest(&secret),
        prefix,
    }
}

/// Splits a presented key into prefix and secret; `None` when it is not of
/// the key's form at all.
pub fn split(presented: &str) -> Option<(&str, &str)> {
    let rest = presented.strip_prefix(KEY_PREFIX)?;
    let (prefix, secret) = rest.split_once('_')?;
    let hex_of = |text: &str, bytes: usize| {
        text.len() == bytes * 2 && text.bytes().all(|b| b.is_ascii_hexdigit())
    };
    (hex_of(prefix, PREFIX_BYTES) && hex_of(secret, SECRET_BYTES)).then_some((prefix, secret))
}

pub fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Compares a presented secret with a stored digest in constant time.
pub fn secret_matches(secret: &str, stored_sha256: &str) -> bool {
    digest(secret)
        .as_bytes()
        .ct_eq(stored_sha256.as_bytes())
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_split_and_verify() {
        let key = generate();
        let (prefix, secret) = split(&key.plaintext).expect("own format");
        assert_eq!(prefix, key.prefix);
        assert!(secret_matches(secret, &key.secret_sha256));
        assert!(!secret_matches(&"0".repeat(64), &key.secret_sha256));
        assert_ne!(generate().plaintext, key.plaintext);
    }

    #[test]
    fn malformed_keys_do_not_split() {
        for bad in [
            "",
            "svc_",
            "svc_abc",
            "sk_live_x",
            "svc_0123456789ab_short",
            "svc_0123456789ab_",
            "svc__",
        ] {
            assert_eq!(split(bad), None, "{bad}");
        }
        let secret = "a".repeat(64);
        assert!(split(&format!("svc_0123456789ab_{secret}")).is_some());
        assert!(split(&format!("svc_0123456789aZ_{secret}")).is_none());
    }
}

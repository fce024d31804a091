//! Standard Webhooks signatures (decisions §8): `v1,` + base64 of
//! HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}`. A `whsec_`
//! secret is the base64 of the key, so the official verification libraries
//! work with it as given; any other secret is the key's UTF-8 bytes.

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

const WHSEC_PREFIX: &str = "whsec_";
/// Secrets are decoded with or without `=` padding, as the Standard
/// Webhooks libraries do.
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The HMAC key a secret stands for; `None` for a `whsec_` secret whose
/// remainder is not base64 (refused when the endpoint is stored).
pub fn signing_key(secret: &str) -> Option<Vec<u8>> {
    match secret.strip_prefix(WHSEC_PREFIX) {
        Some(encoded) => LENIENT.decode(encoded).ok().filter(|key| !key.is_empty()),
        None => Some(secret.as_bytes().to_vec()),
    }
}

/// The `webhook-signature` header value.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => return String::new(),
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// A preview of the secret that tells secrets apart without revealing
/// enough to matter: the `whsec_` prefix when there is one, and the last
/// four characters.
pub fn mask(secret: &str) -> String {
    let prefix = if secret.starts_with(WHSEC_PREFIX) {
        WHSEC_PREFIX
    } else {
        ""
    };
    let tail: String = {
        let chars: Vec<char> = secret.chars().collect();
        chars[chars.len().saturating_sub(4)..].iter().collect()
    };
    format!("{prefix}****{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_webhooks_test_vector() {
        // The example of the Standard Webhooks specification.
        let key = signing_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap_or_default();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn other_secrets_are_their_utf8_bytes() {
        assert_eq!(
            signing_key("a plain secret of enough length"),
            Some(b"a plain secret of enough length".to_vec())
        );
        assert_eq!(signing_key("whsec_not base64!"), None);
        // Unpadded base64 is the same key.
        assert_eq!(signing_key("whsec_AAE"), signing_key("whsec_AAE="));
        assert_eq!(signing_key("whsec_AAE"), Some(vec![0, 1]));
        assert_eq!(signing_key("whsec_"), None);
    }

    #[test]
    fn masks_show_the_prefix_and_the_last_four_only() {
        assert_eq!(
            mask("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            "whsec_****LaSw"
        );
        assert_eq!(mask("0123456789abcdefghijklmn"), "****klmn");
    }
}

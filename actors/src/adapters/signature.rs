//! The `t=..,v1=..` signature scheme, both sides. Two headers carry it:
//! `X-Sandbox-Signature` on provider webhooks (decisions §15; the simulator
//! signs, Tern checks) and `X-Svc-Signature` on push dispatch requests
//! (decisions §11; Tern checks). Either is checked over the raw body before
//! anything is parsed or stored.
//!
//! Header: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "{t}.{body}")>`.

use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The header of the card provider's (the simulator's) webhooks.
pub const SANDBOX_SIGNATURE_HEADER: &str = "X-Sandbox-Signature";
/// The header of push dispatch requests, keyed by TERN_DISPATCH_SECRET.
pub const DISPATCH_SIGNATURE_HEADER: &str = "X-Svc-Signature";
/// How far a signature's timestamp may be from now, either way, before it is
/// refused as a replay.
pub const SIGNATURE_TOLERANCE_DEFAULT: Duration = Duration::from_secs(300);
/// A header longer than this is not a signature: refuse before parsing.
pub const SIGNATURE_HEADER_BYTES_MAX: usize = 1_024;

type HmacSha256 = Hmac<Sha256>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("signature header is malformed")]
    Malformed,
    #[error("signature timestamp is outside the tolerance")]
    Stale,
    #[error("signature does not match")]
    Mismatch,
}

fn mac(secret: &[u8], timestamp: i64, body: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length, so this cannot fail; an empty secret
    // still yields a (useless but well-defined) MAC.
    let mut mac = match HmacSha256::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC-SHA256 takes keys of any length"),
    };
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The header value for `body` signed at `timestamp` (unix seconds).
pub fn sign_payload(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let digest = mac(secret, timestamp, body).finalize().into_bytes();
    format!("t={timestamp},v1={}", hex::encode(digest))
}

/// The timestamp a well-formed header signs, as the MAC covers it.
pub fn signed_timestamp(header: &str) -> Option<i64> {
    header
        .split(',')
        .find_map(|part| match part.trim().split_once('=') {
            Some(("t", value)) => value.parse::<i64>().ok(),
            _ => None,
        })
}

/// What identifies a signed request for replay detection: the SHA-256 of
/// exactly what its MAC covers, `"{t}.{body}"`, hex. Not the header text:
/// the same signature can be written many ways (whitespace, a leading zero
/// in `t`, an extra `v1` entry) and each would pass for a new request.
pub fn replay_digest(timestamp: i64, body: &[u8]) -> String {
    use sha2::Digest as _;
    let mut digest = Sha256::new();
    digest.update(timestamp.to_string().as_bytes());
    digest.update(b".");
    digest.update(body);
    hex::encode(digest.finalize())
}

/// Checks `header` against `body`: well formed, timestamp within
/// `tolerance` of `now` (unix seconds), and one `v1` MAC matching in
/// constant time. Several `v1` entries are allowed so a sender can sign with
/// an old and a new secret during rotation.
pub fn verify_signature(
    secret: &[u8],
    header: &str,
    body: &[u8],
    now: i64,
    tolerance: Duration,
) -> Result<(), SignatureError> {
    if header.len() > SIGNATURE_HEADER_BYTES_MAX {
        return Err(SignatureError::Malformed);
    }
    let mut timestamp = None;
    let mut candidates = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => {
                let parsed = value
                    .parse::<i64>()
                    .map_err(|_| SignatureError::Malformed)?;
                if timestamp.replace(parsed).is_some() {
                    return Err(SignatureError::Malformed);
                }
            }
            Some(("v1", value)) => {
                candidates.push(hex::decode(value).map_err(|_| SignatureError::Malformed)?)
            }
            // Unknown schemes are ignored so a sender can add v2 later.
            Some(_) => {}
            None => return Err(SignatureError::Malformed),
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
    if candidates.is_empty() {
        return Err(SignatureError::Malformed);
    }
    if now.abs_diff(timestamp) > tolerance.as_secs() {
        return Err(SignatureError::Stale);
    }
    let matched = candidates
        .iter()
        .any(|candidate| mac(secret, timestamp, body).verify_slice(candidate).is_ok());
    if matched {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec_test_secret";
    const NOW: i64 = 1_790_000_000;
    const BODY: &[u8] = br#"{"id":"evt_1","type":"payment.succeeded","data":{}}"#;

    fn verify(header: &str, body: &[u8], now: i64) -> Result<(), SignatureError> {
        verify_signature(SECRET, header, body, now, SIGNATURE_TOLERANCE_DEFAULT)
    }

    #[test]
    fn a_signed_body_verifies() {
        let header = sign_payload(SECRET, NOW, BODY);
        assert!(header.starts_with(&format!("t={NOW},v1=")));
        assert_eq!(header.len(), format!("t={NOW},v1=").len() + 64);
        assert_eq!(verify(&header, BODY, NOW), Ok(()));
        assert_eq!(verify(&header, BODY, NOW + 299), Ok(()));
    }

    #[test]
    fn the_mac_is_hmac_sha256_of_timestamp_dot_body() {
        // Independent of the helper: the documented construction.
        let mut mac = HmacSha256::new_from_slice(SECRET).expect("key");
        mac.update(format!("{NOW}.").as_bytes());
        mac.update(BODY);
        let expected = hex::encode(mac.finalize().into_bytes());
        assert_eq!(
            sign_payload(SECRET, NOW, BODY),
            format!("t={NOW},v1={expected}")
        );
    }

    #[test]
    fn a_tampered_body_or_wrong_secret_is_a_mismatch() {
        let header = sign_payload(SECRET, NOW, BODY);
        let tampered = br#"{"id":"evt_1","type":"payment.failed","data":{}}"#;
        assert_eq!(
            verify(&header, tampered, NOW),
            Err(SignatureError::Mismatch)
        );
        let other = sign_payload(b"another secret", NOW, BODY);
        assert_eq!(verify(&other, BODY, NOW), Err(SignatureError::Mismatch));
        // A timestamp moved without re-signing breaks the MAC too.
        let moved = header.replace(&format!("t={NOW}"), &format!("t={}", NOW + 1));
        assert_eq!(verify(&moved, BODY, NOW), Err(SignatureError::Mismatch));
    }

    #[test]
    fn a_stale_or_future_timestamp_is_refused() {
        let header = sign_payload(SECRET, NOW, BODY);
        assert_eq!(verify(&header, BODY, NOW + 301), Err(SignatureError::Stale));
        assert_eq!(verify(&header, BODY, NOW - 301), Err(SignatureError::Stale));
    }

    #[test]
    fn malformed_headers_are_refused() {
        for header in [
            "",
            "t=abc,v1=00",
            "v1=00",
            &format!("t={NOW}"),
            &format!("t={NOW},v1=zz"),
            &format!("t={NOW},t={NOW},v1=00"),
            "garbage",
        ] {
            assert_eq!(
                verify(header, BODY, NOW),
                Err(SignatureError::Malformed),
                "{header}"
            );
        }
        let long = format!("t={NOW},v1={}", "0".repeat(SIGNATURE_HEADER_BYTES_MAX));
        assert_eq!(verify(&long, BODY, NOW), Err(SignatureError::Malformed));
    }

    #[test]
    fn any_matching_v1_passes_during_rotation() {
        let good = sign_payload(SECRET, NOW, BODY);
        let mac = good.split_once("v1=").expect("v1").1;
        let header = format!("t={NOW},v1={},v1={mac}", "ab".repeat(32));
        assert_eq!(verify(&header, BODY, NOW), Ok(()));
    }
}

//! Who may use the console: a stateless cookie signed with a key derived
//! from TERN_OPERATOR_TOKEN, and a CSRF token derived from that cookie.
//!
//! The cookie is `<expiry>.<hex HMAC-SHA256(key, "tern-console.<expiry>")>`
//! with the expiry in unix seconds: it never holds the token, any node
//! sharing the token accepts it, and changing the token signs everyone out.
//! A state-changing form carries `csrf`, the HMAC of the cookie value under
//! another label, which a cross-site page cannot read; and an Origin, when
//! sent, must be this site's.

use actix_web::cookie::{time, Cookie, SameSite};
use actix_web::http::header::{AUTHORIZATION, HOST, ORIGIN};
use actix_web::{HttpMessage, HttpRequest};
use chrono::Utc;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::ConsoleError;
use crate::config::Config;
use crate::http::forward::ForwardedBy;

type HmacSha256 = Hmac<Sha256>;

pub const COOKIE_NAME: &str = "tern_console";
/// The cookie's path: the browser sends it to the console only.
pub const COOKIE_PATH: &str = "/console";
/// How long a sign-in lasts.
pub const SIGN_IN_TTL_S: i64 = 12 * 3_600;
/// Longest cookie value read; a real one is about 75 characters.
const COOKIE_CHARS_MAX: usize = 128;
const KEY_LABEL: &str = "tern-console.key";
const COOKIE_LABEL: &str = "tern-console.";
const CSRF_LABEL: &str = "tern-console.csrf.";

/// A verified sign-in: the cookie's value, from which the CSRF token is
/// derived.
#[derive(Clone, Debug)]
pub struct Operator {
    cookie: Option<String>,
    key: [u8; 32],
}

impl Operator {
    /// The CSRF token of this sign-in's forms; empty for a bearer caller,
    /// who posts no forms.
    pub fn csrf(&self) -> String {
        self.cookie
            .as_deref()
            .map(|cookie| hex::encode(mac(&self.key, CSRF_LABEL, cookie)))
            .unwrap_or_default()
    }

    /// Accepts a posted CSRF token of this sign-in only.
    pub fn check_csrf(&self, presented: Option<&str>) -> Result<(), ConsoleError> {
        let (Some(cookie), Some(presented)) = (&self.cookie, presented) else {
            return Err(ConsoleError::Forbidden("the form's CSRF token is missing"));
        };
        let expected = hex::encode(mac(&self.key, CSRF_LABEL, cookie));
        if equal(presented.as_bytes(), expected.as_bytes()) {
            Ok(())
        } else {
            Err(ConsoleError::Forbidden(
                "the form's CSRF token is not valid",
            ))
        }
    }
}

/// The key every console MAC uses: derived, so the token itself never
/// signs anything a browser holds.
fn key(token: &str) -> [u8; 32] {
    mac(token.as_bytes(), KEY_LABEL, "")
}

fn mac(key: &[u8], label: &str, value: &str) -> [u8; 32] {
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC-SHA256 takes keys of any length"),
    };
    mac.update(label.as_bytes());
    mac.update(value.as_bytes());
    mac.finalize().into_bytes().into()
}

/// Compares digests, so neither time nor length tells how much matched.
fn equal(a: &[u8], b: &[u8]) -> bool {
    Sha256::digest(a).ct_eq(&Sha256::digest(b)).into()
}

/// Whether `presented` is the operator token.
pub fn token_matches(presented: &str, token: &str) -> bool {
    equal(presented.as_bytes(), token.as_bytes())
}

/// The cookie value of a sign-in that ends at `expiry` (unix seconds).
pub fn cookie_value(token: &str, expiry: i64) -> String {
    let expiry = expiry.to_string();
    let signature = hex::encode(mac(&key(token), COOKIE_LABEL, &expiry));
    format!("{expiry}.{signature}")
}

/// Whether `value` is a cookie this token signed that has not expired.
pub fn cookie_valid(token: &str, value: &str, now: i64) -> bool {
    if value.len() > COOKIE_CHARS_MAX {
        return false;
    }
    let Some((expiry, _)) = value.split_once('.') else {
        return false;
    };
    let Ok(expiry) = expiry.parse::<i64>() else {
        return false;
    };
    // Signed by us, so never further ahead than one lifetime; the check
    // only matters against a token that leaked with its key.
    let fresh = expiry > now && expiry <= now.saturating_add(SIGN_IN_TTL_S);
    fresh && equal(value.as_bytes(), cookie_value(token, expiry).as_bytes())
}

fn base_cookie(config: &Config, value: String) -> Cookie<'static> {
    Cookie::build(COOKIE_NAME, value)
        .http_only(true)
        .same_site(SameSite::Strict)
        .path(COOKIE_PATH)
        .secure(config.cookie_secure)
        .finish()
}

/// The cookie of a new sign-in, lasting [`SIGN_IN_TTL_S`].
pub fn sign_in_cookie(config: &Config, token: &str) -> Cookie<'static> {
    let expiry = Utc::now().timestamp().saturating_add(SIGN_IN_TTL_S);
    let mut cookie = base_cookie(config, cookie_value(token, expiry));
    cookie.set_max_age(time::Duration::seconds(SIGN_IN_TTL_S));
    cookie
}

/// The cookie that tells the browser to forget the sign-in.
pub fn cleared_cookie(config: &Config) -> Cookie<'static> {
    let mut cookie = base_cookie(config, String::new());
    cookie.make_removal();
    cookie
}

/// The signed-in operator of `req`: a valid console cookie, or (for
/// scripts, on reads) `Authorization: Bearer <token>`. `None` when neither.
pub fn operator(req: &HttpRequest, token: &str, bearer_allowed: bool) -> Option<Operator> {
    let key = key(token);
    if let Some(cookie) = req.cookie(COOKIE_NAME) {
        if cookie_valid(token, cookie.value(), Utc::now().timestamp()) {
            return Some(Operator {
                cookie: Some(cookie.value().to_owned()),
                key,
            });
        }
    }
    let bearer = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim);
    match bearer {
        Some(presented) if bearer_allowed && token_matches(presented, token) => {
            Some(Operator { cookie: None, key })
        }
        _ => None,
    }
}

/// A state-changing request must come from this site: an Origin, when
/// present, names the host the request was sent to (or the public URL's). A request another node forwarded was checked
/// there, and its Host is this node's, so it is not checked again.
pub fn check_origin(req: &HttpRequest, config: &Config) -> Result<(), ConsoleError> {
    if req.extensions().contains::<ForwardedBy>() {
        return Ok(());
    }
    let Some(origin) = req.headers().get(ORIGIN) else {
        return Ok(());
    };
    let Ok(origin) = origin.to_str() else {
        return Err(ConsoleError::Forbidden(
            "the request's Origin is not this site",
        ));
    };
    let host = req
        .headers()
        .get(HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let same_host = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|origin_host| !host.is_empty() && origin_host.eq_ignore_ascii_case(host));
    // TERN_ALLOWED_ORIGINS names merchants' dashboards, which have no
    // business posting to the operator's console.
    let allowed = same_host || config.public_origin().as_deref() == Some(origin);
    if allowed {
        Ok(())
    } else {
        Err(ConsoleError::Forbidden(
            "the request's Origin is not this site",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "operator-token-of-24-chars!";

    #[test]
    fn a_cookie_is_valid_until_it_expires_and_only_under_its_token() {
        let now = 1_700_000_000;
        let value = cookie_value(TOKEN, now + 60);
        assert!(!value.contains(TOKEN));
        assert!(cookie_valid(TOKEN, &value, now));
        assert!(!cookie_valid(TOKEN, &value, now + 60), "expired");
        assert!(!cookie_valid("another-operator-token-0000", &value, now));
        let (expiry, signature) = value.split_once('.').expect("two parts");
        let later = format!("{}.{signature}", expiry.parse::<i64>().expect("n") + 1);
        assert!(!cookie_valid(TOKEN, &later, now), "expiry is signed");
        let far = cookie_value(TOKEN, now + SIGN_IN_TTL_S + 60);
        assert!(!cookie_valid(TOKEN, &far, now), "never beyond one lifetime");
        for forged in ["", ".", "abc", "1.2", &"9".repeat(300)] {
            assert!(!cookie_valid(TOKEN, forged, now), "{forged}");
        }
    }

    #[test]
    fn the_csrf_token_belongs_to_one_sign_in() {
        let operator = |expiry: i64| Operator {
            cookie: Some(cookie_value(TOKEN, expiry)),
            key: key(TOKEN),
        };
        let one = operator(1);
        let csrf = one.csrf();
        assert!(one.check_csrf(Some(&csrf)).is_ok());
        assert!(operator(2).check_csrf(Some(&csrf)).is_err());
        assert!(one.check_csrf(None).is_err());
        let bearer = Operator {
            cookie: None,
            key: key(TOKEN),
        };
        assert!(bearer.check_csrf(Some("")).is_err());
    }
}

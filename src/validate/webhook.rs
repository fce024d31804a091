//! A webhook endpoint's URL and secret (decisions §8).

use tern_actors::webhook::{guard, signing};

/// Longest endpoint URL.
pub const URL_LENGTH_MAX: usize = 2_048;
/// Shortest secret: enough entropy to be worth an HMAC key.
pub const SECRET_LENGTH_MIN: usize = 24;
/// Longest secret kept.
pub const SECRET_LENGTH_MAX: usize = 512;

/// The endpoint URL as stored, or why it cannot be one. Names are resolved
/// and checked at every delivery; an internal IP literal is refused here
/// already, unless the operator allows private targets.
pub fn url(value: &str, allow_private: bool) -> Result<String, String> {
    if value.is_empty() {
        return Err("is required".into());
    }
    if value.len() > URL_LENGTH_MAX {
        return Err(format!("must be at most {URL_LENGTH_MAX} characters"));
    }
    let parsed = url::Url::parse(value).map_err(|error| format!("is not a URL: {error}"))?;
    if parsed.scheme() != "https" {
        return Err("must use https".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("must not carry credentials (user:password@)".into());
    }
    let Some(host) = parsed.host() else {
        return Err("must name a host".into());
    };
    if parsed.fragment().is_some() {
        return Err("must not have a fragment".into());
    }
    guard::check_host(&host, allow_private).map_err(|refused| refused.to_string())?;
    Ok(parsed.to_string())
}

pub fn secret(value: &str) -> Result<(), String> {
    let length = value.chars().count();
    if length < SECRET_LENGTH_MIN {
        return Err(format!("must be at least {SECRET_LENGTH_MIN} characters"));
    }
    if length > SECRET_LENGTH_MAX {
        return Err(format!("must be at most {SECRET_LENGTH_MAX} characters"));
    }
    if value.chars().any(char::is_control) {
        return Err("must not contain control characters".into());
    }
    if signing::signing_key(value).is_none() {
        return Err("a whsec_ secret must be base64 after the prefix".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            url("https://example.com/hooks", false).as_deref(),
            Ok("https://example.com/hooks")
        );
        for (bad, why) in [
            ("http://example.com/hooks", "must use https"),
            ("https://user:pw@example.com/", "must not carry credentials"),
            ("https://user@example.com/", "must not carry credentials"),
            ("not a url", "is not a URL"),
            ("", "is required"),
            ("https://127.0.0.1/hook", guard::REFUSED_TEXT),
            ("https://169.254.169.254/latest", guard::REFUSED_TEXT),
            ("https://[::1]/", guard::REFUSED_TEXT),
            ("https://10.1.2.3/", guard::REFUSED_TEXT),
            ("https://[2002:7f00:1::1]/", guard::REFUSED_TEXT),
            (
                "https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",
                guard::REFUSED_TEXT,
            ),
            ("https://example.com/#x", "must not have a fragment"),
        ] {
            let got = url(bad, false).err().unwrap_or_default();
            assert!(got.starts_with(why), "{bad}: {got}");
        }
        let long = format!("https://example.com/{}", "a".repeat(URL_LENGTH_MAX));
        assert!(url(&long, false).is_err());
        assert!(url("https://127.0.0.1:8443/hook", true).is_ok());
    }

    #[test]
    fn secrets() {
        assert!(secret("0123456789abcdef01234567").is_ok());
        assert!(secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_ok());
        assert!(secret("0123456789abcdef0123456").is_err());
        assert!(secret("whsec_this is not base64 at all!!").is_err());
        assert!(secret(&"x".repeat(SECRET_LENGTH_MAX + 1)).is_err());
    }
}

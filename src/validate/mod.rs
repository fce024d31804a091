//! Field checks shared by handlers. Each answers a message for `errors`.

pub mod device;
pub mod wallet;
pub mod webhook;

/// Longest email address (RFC 5321 path limit).
pub const EMAIL_LENGTH_MAX: usize = 254;
pub const NAME_LENGTH_MAX: usize = 200;

/// A plausible email address: one `@`, a non-empty local part, a dotted
/// domain, no spaces or control characters. Deliverability is the mailer's
/// business; this catches typos and junk.
pub fn email(value: &str) -> Result<String, &'static str> {
    let value = value.trim();
    if value.is_empty() {
        return Err("is required");
    }
    if value.len() > EMAIL_LENGTH_MAX {
        return Err("is too long");
    }
    let Some((local, domain)) = value.split_once('@') else {
        return Err("is not a valid email address");
    };
    let domain_ok = domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains("..")
        && domain
            .chars()
            .all(|c| c.is_alphanumeric() || c == '.' || c == '-');
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && !local
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '@');
    if domain_ok && local_ok {
        Ok(value.to_owned())
    } else {
        Err("is not a valid email address")
    }
}

/// A display name: trimmed, non-empty, bounded, no control characters.
pub fn name(value: &str) -> Result<String, &'static str> {
    let value = value.trim();
    if value.is_empty() {
        return Err("must not be empty");
    }
    if value.chars().count() > NAME_LENGTH_MAX {
        return Err("is too long (at most 200 characters)");
    }
    if value.chars().any(char::is_control) {
        return Err("must not contain control characters");
    }
    Ok(value.to_owned())
}

/// Requested scope names: at least one, all known.
pub fn scopes(requested: &[String]) -> Result<crate::auth::Scopes, String> {
    if requested.is_empty() {
        return Err("must name at least one scope".to_owned());
    }
    crate::auth::Scopes::parse(requested)
        .map_err(|unknown| format!("unknown scopes: {}", unknown.join(", ")))
}

/// A list's page size: `default` when absent, else it must be 1 to `max`;
/// a bad one is recorded under `limit` in `errors`.
pub fn list_limit(
    limit: Option<i64>,
    default: i64,
    max: i64,
    errors: &mut crate::http::problem::FieldErrors,
) -> i64 {
    let limit = limit.unwrap_or(default);
    if !(1..=max).contains(&limit) {
        errors.insert("limit".into(), format!("must be 1 to {max}"));
    }
    limit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails() {
        assert_eq!(email("  Ops@Example.com "), Ok("Ops@Example.com".into()));
        for bad in [
            "",
            "x",
            "@example.com",
            "a@",
            "a@b",
            "a@.com",
            "a@com.",
            "a b@c.com",
            "a@b..com",
            "a@b@c.com",
        ] {
            assert!(email(bad).is_err(), "{bad}");
        }
        assert!(email(&format!("{}@example.com", "a".repeat(250))).is_err());
    }

    #[test]
    fn scope_lists() {
        assert!(scopes(&["quotes:read".into()]).is_ok());
        assert_eq!(
            scopes(&[]).err().as_deref(),
            Some("must name at least one scope")
        );
        assert_eq!(
            scopes(&["root".into()]).err().as_deref(),
            Some("unknown scopes: root")
        );
    }

    #[test]
    fn names() {
        assert_eq!(name(" Acme "), Ok("Acme".into()));
        assert!(name("   ").is_err());
        assert!(name("a\u{0}b").is_err());
        assert!(name(&"x".repeat(201)).is_err());
    }
}

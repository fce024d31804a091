//! Device registrations and push dispatches (decisions §11).

use tern_actors::ports::Platform;

/// Longest push token kept. APNs tokens are 64 hex digits and FCM tokens a
/// few hundred characters; this leaves room without storing arbitrary blobs.
pub const TOKEN_CHARS_MAX: usize = 4_096;
/// Longest user id looked up; longer ones cannot be a user's (a UUID).
pub const USER_ID_CHARS_MAX: usize = 64;
/// Longest notification title, in characters.
pub const TITLE_CHARS_MAX: usize = 256;
/// Longest notification body, in characters; push services cap a whole
/// payload at about 4 KiB.
pub const BODY_CHARS_MAX: usize = 4_096;
/// Largest `data` object, as compact JSON.
pub const DATA_BYTES_MAX: usize = 4_096;

pub fn platform(value: &str) -> Result<Platform, String> {
    Platform::parse(value).ok_or_else(|| "must be ios or android".to_owned())
}

/// A push token: 1 to 4,096 printable ASCII characters without spaces,
/// which every push service's tokens are.
pub fn token(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if value.len() > TOKEN_CHARS_MAX {
        return Err(format!("must be at most {TOKEN_CHARS_MAX} characters"));
    }
    if !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("must be printable ASCII without spaces".into());
    }
    Ok(())
}

/// A user id as given: present and of a plausible length. Whether the user
/// exists (for the caller's merchant) is the store's answer.
pub fn user_id(value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err("must not be empty".into());
    }
    if value.len() > USER_ID_CHARS_MAX {
        return Err(format!("must be at most {USER_ID_CHARS_MAX} characters"));
    }
    Ok(())
}

/// Trimmed, non-empty, bounded text; line breaks and tabs are allowed only
/// where `multiline`.
pub fn text(value: &str, chars_max: usize, multiline: bool) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if value.chars().count() > chars_max {
        return Err(format!("must be at most {chars_max} characters"));
    }
    let allowed = |c: char| multiline && (c == '\n' || c == '\t' || c == '\r');
    if value.chars().any(|c| c.is_control() && !allowed(c)) {
        return Err("must not contain control characters".into());
    }
    Ok(value.to_owned())
}

/// `data`: a JSON object of bounded size, stored as compact text.
pub fn data(value: &serde_json::Value) -> Result<String, String> {
    if !value.is_object() {
        return Err("must be a JSON object".into());
    }
    let text = value.to_string();
    if text.len() > DATA_BYTES_MAX {
        return Err(format!("must be at most {DATA_BYTES_MAX} bytes as JSON"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn platforms() {
        assert_eq!(platform("ios"), Ok(Platform::Ios));
        assert_eq!(platform("android"), Ok(Platform::Android));
        for bad in ["", "IOS", "web", "windows"] {
            assert!(platform(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens() {
        assert!(token(&"ab12".repeat(16)).is_ok());
        assert!(token("fcm:APA91b-x_y").is_ok());
        assert!(token(&"a".repeat(TOKEN_CHARS_MAX)).is_ok());
        for bad in ["", "a b", "a\nb", "tök"] {
            assert!(token(bad).is_err(), "{bad:?}");
        }
        assert!(token(&"a".repeat(TOKEN_CHARS_MAX + 1)).is_err());
    }

    #[test]
    fn texts() {
        assert_eq!(text(" Hi ", 10, false), Ok("Hi".into()));
        assert!(text("   ", 10, false).is_err());
        assert!(text("a\nb", 10, false).is_err());
        assert_eq!(text("a\nb", 10, true), Ok("a\nb".into()));
        assert!(text("a\u{7}b", 10, true).is_err());
        assert!(text(&"x".repeat(11), 10, true).is_err());
    }

    #[test]
    fn data_objects() {
        assert_eq!(data(&json!({"a": 1})), Ok("{\"a\":1}".into()));
        assert!(data(&json!([1])).is_err());
        assert!(data(&json!("x")).is_err());
        assert!(data(&json!({"a": "x".repeat(DATA_BYTES_MAX)})).is_err());
    }

    #[test]
    fn user_ids() {
        assert!(user_id("7d9f0c1e-0000-4000-8000-000000000000").is_ok());
        assert!(user_id(" ").is_err());
        assert!(user_id(&"u".repeat(USER_ID_CHARS_MAX + 1)).is_err());
    }
}

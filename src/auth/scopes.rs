//! RBAC scopes carried by API keys and sessions (interface + decisions §1).

use std::collections::BTreeSet;

/// Every scope name, in the order they are listed to clients.
pub const ALL_SCOPES: [&str; 16] = [
    "transfers:read",
    "transfers:write",
    "quotes:read",
    "quotes:write",
    "settlements:read",
    "settlements:write",
    "settlements:reverse",
    "audit:read",
    "webhooks:read",
    "webhooks:write",
    "devices:read",
    "devices:write",
    "cards:read",
    "cards:write",
    "api_keys:read",
    "api_keys:write",
];

/// A set of known scopes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scopes(BTreeSet<&'static str>);

impl Scopes {
    /// A self-service key's default: every scope there is.
    pub fn all() -> Scopes {
        Scopes(ALL_SCOPES.into_iter().collect())
    }

    /// Parses requested scope names; answers the unknown ones on failure.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Scopes, Vec<String>> {
        let mut known = BTreeSet::new();
        let mut unknown = Vec::new();
        for name in names {
            match ALL_SCOPES.iter().find(|scope| **scope == name.as_ref()) {
                Some(scope) => {
                    known.insert(*scope);
                }
                None => unknown.push(name.as_ref().to_owned()),
            }
        }
        if unknown.is_empty() {
            Ok(Scopes(known))
        } else {
            Err(unknown)
        }
    }

    /// Reads the stored, space-separated form, skipping names this build
    /// does not know (a scope removed from the catalogue grants nothing).
    pub fn from_stored(stored: &str) -> Scopes {
        Scopes(
            stored
                .split_whitespace()
                .filter_map(|name| ALL_SCOPES.iter().find(|scope| **scope == name).copied())
                .collect(),
        )
    }

    pub fn to_stored(&self) -> String {
        self.names().join(" ")
    }

    /// Names in catalogue order.
    pub fn names(&self) -> Vec<String> {
        ALL_SCOPES
            .iter()
            .filter(|scope| self.0.contains(*scope))
            .map(|scope| (*scope).to_owned())
            .collect()
    }

    pub fn contains(&self, scope: &str) -> bool {
        self.0.contains(scope)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Scopes of `self` that `other` lacks.
    pub fn missing_from(&self, other: &Scopes) -> Vec<String> {
        self.names()
            .into_iter()
            .filter(|scope| !other.contains(scope))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_form_round_trips_in_catalogue_order() {
        let scopes = Scopes::parse(&["settlements:write", "audit:read"]).expect("known");
        assert_eq!(scopes.to_stored(), "settlements:write audit:read");
        assert_eq!(Scopes::from_stored(&scopes.to_stored()), scopes);
    }

    #[test]
    fn unknown_scopes_are_named() {
        assert_eq!(
            Scopes::parse(&["quotes:read", "root", "admin"]),
            Err(vec!["root".into(), "admin".into()])
        );
    }

    #[test]
    fn subset_check_names_what_is_missing() {
        let mine = Scopes::parse(&["quotes:read"]).expect("known");
        let wanted = Scopes::parse(&["quotes:read", "quotes:write"]).expect("known");
        assert_eq!(wanted.missing_from(&mine), vec!["quotes:write".to_owned()]);
        assert!(mine.missing_from(&wanted).is_empty());
    }
}

//! [`text_id!`]: an id stored as text, its own type per kind.

/// Declares an id: a newtype over `String` stored as Text on both backends
/// (`AsExpression`/`FromSqlRow`, `ToSql`/`FromSql<Text>`), serialized as the
/// bare string (so bodies, audit data and webhook payloads read as before),
/// shown by `Display` as itself. It gets `as_str`, `into_inner` and
/// `From<Id> for String`, `AsRef<str>` and `Borrow<str>` (so a map keyed by
/// ids can be searched with a `&str`), but no `From<String>` nor `Deref`:
/// text becomes an id only through `new`, the one explicit step a handler
/// takes with a path or a principal, and an id is text again only where
/// code asks for it. Usable from any crate: it names diesel, serde and
/// uuid through this crate. `struct Name = "pre_" + uuid_v7;` declares an
/// id Tern mints itself, with `PREFIX` and `generate`.
#[macro_export]
macro_rules! text_id {
    // Minted by Tern: `PREFIX` and a UUID v7, so ids of the kind sort by
    // creation time; `generate` makes one.
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident = $prefix:literal + uuid_v7;
    ) => {
        $crate::text_id! {
            $(#[$meta])*
            $vis struct $name;
        }

        impl $name {
            /// What every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// The longest text taken for one: the prefix and a UUID's 32
            /// hex digits, with room to spare.
            pub const LENGTH_MAX: usize = 64;

            /// A new id: the prefix and a UUID v7.
            pub fn generate() -> $name {
                $name(::std::format!(
                    "{}{}",
                    Self::PREFIX,
                    $crate::__private::uuid::Uuid::now_v7().simple()
                ))
            }

            /// The id `text` may name, or `None` when it cannot name one of
            /// this kind at all (another prefix, or too long): checked
            /// before a lookup, so text of another kind is never looked up.
            pub fn from_text(text: &str) -> ::core::option::Option<$name> {
                (text.starts_with(Self::PREFIX) && text.len() <= Self::LENGTH_MAX)
                    .then(|| $name(text.to_owned()))
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident;
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        $vis struct $name(::std::string::String);

        impl $name {
            /// The id this text names. Nothing is checked: an id that
            /// names no row is found missing where it is looked up.
            pub fn new(id: impl ::core::convert::Into<::std::string::String>) -> $name {
                $name(id.into())
            }

            /// The id as stored and as on the wire.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_inner(self) -> ::std::string::String {
                self.0
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl ::core::convert::From<$name> for ::std::string::String {
            fn from(id: $name) -> ::std::string::String {
                id.0
            }
        }

        impl ::core::convert::AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl ::core::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S: $crate::__private::serde::Serializer>(
                &self,
                serializer: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::core::result::Result<$name, D::Error> {
                <::std::string::String as $crate::__private::serde::Deserialize>::deserialize(deserializer)
                    .map($name)
            }
        }

        $crate::__text_diesel!($name, |id: ::std::string::String| {
            ::core::result::Result::<$name, ::core::convert::Infallible>::Ok($name(id))
        });
    };
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    text_id! {
        /// A probe.
        struct ProbeId;
    }

    #[test]
    fn serde_is_the_bare_string() -> Result<(), serde_json::Error> {
        let id = ProbeId::new("p_1");
        assert_eq!(serde_json::to_string(&id)?, "\"p_1\"");
        assert_eq!(serde_json::from_str::<ProbeId>("\"p_1\"")?, id);
        let body = serde_json::json!({ "id": id, "ids": [ProbeId::new("p_2")] });
        assert_eq!(body.to_string(), r#"{"id":"p_1","ids":["p_2"]}"#);
        assert!(serde_json::from_str::<ProbeId>("7").is_err());
        Ok(())
    }

    text_id! {
        /// A minted probe.
        struct MintedId = "mp_" + uuid_v7;
    }

    #[test]
    fn minted_ids_carry_their_prefix_and_sort_by_creation() {
        let ids: Vec<MintedId> = (0..100).map(|_| MintedId::generate()).collect();
        assert!(ids
            .iter()
            .all(|id| id.as_str().starts_with(MintedId::PREFIX)));
        assert!(ids.iter().all(|id| id.as_str().len() == "mp_".len() + 32));
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ids);
        assert_eq!(MintedId::new(ids[0].clone().into_inner()), ids[0]);
    }

    #[test]
    fn text_of_another_kind_or_too_long_names_no_minted_id() {
        let minted = MintedId::generate();
        assert_eq!(MintedId::from_text(minted.as_str()), Some(minted));
        let long = format!("mp_{}", "0".repeat(MintedId::LENGTH_MAX));
        for text in ["", "mp", "tr_0190", "MP_0190", " mp_0190", long.as_str()] {
            assert_eq!(MintedId::from_text(text), None, "{text:?}");
        }
        let longest = format!("mp_{}", "0".repeat(MintedId::LENGTH_MAX - 3));
        assert!(MintedId::from_text(&longest).is_some());
    }

    #[test]
    fn text_forms_agree() {
        let id = ProbeId::new(String::from("p_1"));
        assert_eq!(id.as_str(), "p_1");
        assert_eq!(id.to_string(), "p_1");
        assert_eq!(String::from(id.clone()), "p_1");
        assert_eq!(id.into_inner(), "p_1");
        let by_id = HashMap::from([(ProbeId::new("p_1"), 1)]);
        assert_eq!(by_id.get("p_1"), Some(&1));
        assert!(ProbeId::new("a") < ProbeId::new("b"));
    }
}

//! Tern's vocabulary: the closed sets of values stored as text (statuses,
//! methods, networks). Each is declared once with [`text_enum!`], which
//! gives it its wire code, its diesel mapping on both backends and its
//! serde form, so a value that is not one of its codes can be neither
//! written nor read back. Ids are text too, each kind its own type
//! declared with [`text_id!`] (in `ids`), so one kind cannot be passed
//! where another is expected.
//!
//! Why a `macro_rules!` and not a crate: diesel-derive-enum maps to native
//! PostgreSQL enums (Tern's schema stores enums as text on both backends,
//! with explicit codes), and strum would still leave the diesel half to
//! write by hand.

mod card;
mod chain;
mod id;
mod identity;
mod ids;
mod ledger;
mod merchant;
mod settlement;
mod transfer;
mod webhook;

pub use card::{
    CardNetwork, CardStatus, CardTransactionKind, CardTransactionStatus, CardType, Channel,
    Decline, EventSource, Wallet, WalletStatus, WalletTokenStatus,
};
pub use chain::{Asset, Network};
pub use identity::{DeviceStatus, Platform, Purpose, PushStatus, UserStatus};
pub use ids::{
    AccountId, CardId, DeviceId, DispatchId, EventId, MerchantId, QuoteId, SettlementKey,
    TransferId, UserId, WalletTokenId,
};
pub use ledger::{AccountKind, LedgerStatus};
pub use merchant::MerchantStatus;
pub use settlement::{Reversal, SettlementMethod, SettlementStatus};
pub use transfer::{LegStatus, TransferStatus};
pub use webhook::DeliveryStatus;

/// A code that names no value of the enum it was read as.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code:?} is not a {kind} code")]
pub struct UnknownCode {
    /// The enum's name.
    pub kind: &'static str,
    pub code: String,
}

/// Declares an enum stored as text: `Variant = "code"` per value. The enum
/// gets `ALL`, `as_str`, `parse` (and `FromStr`, `Display`), serde as its
/// code, and `ToSql`/`FromSql<Text>` on SQLite and PostgreSQL with
/// `AsExpression`/`FromSqlRow`, so a row field of the enum's type stores its
/// code and reading any other text is an error. Usable from any crate: it
/// names diesel and serde through this crate.
#[macro_export]
macro_rules! text_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $code:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$variant_meta])* $variant ),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: [$name; [$($code),+].len()] = [$($name::$variant),+];

            /// The value's code, as stored and as on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $code ),+
                }
            }

            /// The value a code names, if any.
            pub fn parse(code: &str) -> ::core::option::Option<$name> {
                match code {
                    $( $code => ::core::option::Option::Some($name::$variant), )+
                    _ => ::core::option::Option::None,
                }
            }
        }

        impl ::core::str::FromStr for $name {
            type Err = $crate::vocabulary::UnknownCode;

            fn from_str(code: &str) -> ::core::result::Result<$name, Self::Err> {
                $name::parse(code).ok_or_else(|| $crate::vocabulary::UnknownCode {
                    kind: stringify!($name),
                    code: code.to_owned(),
                })
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S: $crate::__private::serde::Serializer>(
                &self,
                serializer: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::core::result::Result<$name, D::Error> {
                let code = <::std::string::String as $crate::__private::serde::Deserialize>::deserialize(deserializer)?;
                code.parse().map_err(<D::Error as $crate::__private::serde::de::Error>::custom)
            }
        }

        $crate::__text_diesel!($name, |code: ::std::string::String| code.parse::<$name>());
    };
}

/// The diesel half of [`text_enum!`] and [`text_id!`]: what
/// `#[derive(AsExpression, FromSqlRow)]` with `sql_type = Text` expands to,
/// written against this crate's diesel so that crates without a diesel
/// dependency can declare stored values, plus `ToSql` through `as_str` and
/// `FromSql` through `$from`, a `String -> Result<Self, impl Error>`.
#[doc(hidden)]
#[macro_export]
macro_rules! __text_diesel {
    ($name:ident, $from:expr) => {
        const _: () = {
            use diesel::backend::Backend;
            use diesel::deserialize::{self, FromSql, Queryable};
            use diesel::expression::AsExpression;
            use diesel::internal::derives::as_expression::Bound;
            use diesel::serialize::{self, Output, ToSql};
            use diesel::sql_types::{Nullable, SingleValue, Text};
            use $crate::__private::diesel;

            impl AsExpression<Text> for $name {
                type Expression = Bound<Text, Self>;
                fn as_expression(self) -> Self::Expression {
                    Bound::new(self)
                }
            }

            impl AsExpression<Nullable<Text>> for $name {
                type Expression = Bound<Nullable<Text>, Self>;
                fn as_expression(self) -> Self::Expression {
                    Bound::new(self)
                }
            }

            impl<'expr> AsExpression<Text> for &'expr $name {
                type Expression = Bound<Text, Self>;
                fn as_expression(self) -> Self::Expression {
                    Bound::new(self)
                }
            }

            impl<'expr> AsExpression<Nullable<Text>> for &'expr $name {
                type Expression = Bound<Nullable<Text>, Self>;
                fn as_expression(self) -> Self::Expression {
                    Bound::new(self)
                }
            }

            impl<DB> ToSql<Text, DB> for $name
            where
                DB: Backend,
                str: ToSql<Text, DB>,
            {
                fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, DB>) -> serialize::Result {
                    <str as ToSql<Text, DB>>::to_sql(self.as_str(), out)
                }
            }

            impl<DB> ToSql<Nullable<Text>, DB> for $name
            where
                DB: Backend,
                str: ToSql<Text, DB>,
            {
                fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, DB>) -> serialize::Result {
                    <str as ToSql<Text, DB>>::to_sql(self.as_str(), out)
                }
            }

            impl<DB> FromSql<Text, DB> for $name
            where
                DB: Backend,
                ::std::string::String: FromSql<Text, DB>,
            {
                fn from_sql(bytes: DB::RawValue<'_>) -> deserialize::Result<Self> {
                    let code = <::std::string::String as FromSql<Text, DB>>::from_sql(bytes)?;
                    Ok(($from)(code)?)
                }
            }

            impl<DB, ST> Queryable<ST, DB> for $name
            where
                DB: Backend,
                ST: SingleValue,
                Self: FromSql<ST, DB>,
            {
                type Row = Self;
                fn build(row: Self) -> deserialize::Result<Self> {
                    Ok(row)
                }
            }
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    text_enum! {
        /// A probe.
        enum Probe {
            One = "one",
            TwoWords = "two_words",
        }
    }

    #[test]
    fn codes_round_trip_and_others_are_refused() {
        for probe in Probe::ALL {
            assert_eq!(Probe::parse(probe.as_str()), Some(probe));
            assert_eq!(probe.as_str().parse::<Probe>(), Ok(probe));
            assert_eq!(probe.to_string(), probe.as_str());
        }
        assert_eq!(Probe::ALL.len(), 2);
        assert_eq!(Probe::parse("One"), None);
        let refused = "three".parse::<Probe>();
        assert_eq!(
            refused,
            Err(UnknownCode {
                kind: "Probe",
                code: "three".into()
            })
        );
    }

    #[test]
    fn serde_speaks_the_code() -> Result<(), serde_json::Error> {
        assert_eq!(serde_json::to_string(&Probe::TwoWords)?, "\"two_words\"");
        assert_eq!(serde_json::from_str::<Probe>("\"one\"")?, Probe::One);
        assert!(serde_json::from_str::<Probe>("\"One\"").is_err());
        Ok(())
    }
}

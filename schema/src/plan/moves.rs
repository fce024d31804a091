//! Moved settlement and transfer rows as one PostgreSQL statement per
//! table: `UPDATE settlements AS s SET ... FROM (VALUES (...), ...) AS u
//! (...) WHERE` each row's key and the version its plan read. Its
//! changed-row count is the number of rows whose version still matched.

use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{BigInt, Bool, Integer, Nullable, Text, Timestamp};
use diesel::QueryResult;

use crate::models::{SettlementRow, TransferRow};

/// Rows to write, each with the version its plan expects; at most one per
/// key (PostgreSQL updates a row once per statement).
pub(crate) struct SettlementMoves<'r>(pub &'r [(SettlementRow, i64)]);

impl QueryId for SettlementMoves<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

/// Transfer rows to write, each with the version its plan expects; at
/// most one per id.
pub(crate) struct TransferMoves<'r>(pub &'r [(TransferRow, i64)]);

impl QueryId for TransferMoves<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

/// Calls `$m!` with every column a transfer's move writes, and its SQL
/// type.
macro_rules! transfer_columns {
    ($m:ident, $($args:tt)*) => {
        $m!($($args)*;
            merchant_id: Text, idempotency_key: Text, flow: Text, quote_id: Text,
            card_pm: Text, wallet: Text, send_currency: Text, send_amount_minor: BigInt,
            receive_asset: Text, receive_network: Text, receive_amount_minor: BigInt,
            rate: Text, platform_fee_minor: BigInt, network_fee_minor: BigInt,
            status: Text, leg1_key: Text, leg1_status: Text,
            leg1_client_secret: Nullable<Text>, leg1_next_action_type: Nullable<Text>,
            leg2_key: Text, leg2_status: Text, failure_reason: Nullable<Text>,
            conversion_transaction_id: Nullable<Text>, compensation_attempt: Integer,
            next_attempt_at: Nullable<Timestamp>, alert: Nullable<Text>,
            alert_acknowledged_at: Nullable<Timestamp>, request_id: Text, version: BigInt,
            created_at: Timestamp, updated_at: Timestamp)
    };
}

/// Calls `$m!` with every column a settlement's move writes, and its SQL
/// type.
macro_rules! moved_columns {
    ($m:ident, $($args:tt)*) => {
        $m!($($args)*;
            method: Text, currency: Text, amount_minor: BigInt, asset: Nullable<Text>,
            source: Text, destination: Text, recipient_name: Text,
            reference: Nullable<Text>, status: Text, attempt: Integer,
            outcome_unknown: Bool, reversal: Text, next_attempt_at: Nullable<Timestamp>,
            provider_id: Nullable<Text>, stan: Nullable<Text>,
            retrieval_reference_number: Nullable<Text>,
            transaction_identifier: Nullable<Text>, approval_code: Nullable<Text>,
            action_code: Nullable<Text>, failure_reason: Nullable<Text>,
            client_secret: Nullable<Text>, next_action_type: Nullable<Text>,
            funding_transaction_id: Nullable<Text>, ledger_transaction_id: Nullable<Text>,
            request_id: Text, reversal_transaction_id: Nullable<Text>, version: BigInt,
            created_at: Timestamp, updated_at: Timestamp, transfer_id: Nullable<Text>)
    };
}

macro_rules! set_list {
    ($out:ident; $($column:ident: $sql_type:ty),* $(,)?) => {{
        let assignments: &[&str] = &[$(concat!(stringify!($column), " = u.", stringify!($column))),*];
        $out.push_sql(&assignments.join(", "));
    }};
}

macro_rules! names {
    ($out:ident; $($column:ident: $sql_type:ty),* $(,)?) => {{
        $( $out.push_sql(concat!(", ", stringify!($column))); )*
    }};
}

macro_rules! binds {
    ($out:ident, $row:ident; $($column:ident: $sql_type:ty),* $(,)?) => {{
        $(
            $out.push_sql(", ");
            $out.push_bind_param::<$sql_type, _>(&$row.$column)?;
        )*
    }};
}

impl QueryFragment<Pg> for SettlementMoves<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.unsafe_to_cache_prepared();
        out.push_sql("UPDATE settlements AS s SET ");
        moved_columns!(set_list, out);
        out.push_sql(" FROM (VALUES ");
        for (index, (row, expected)) in self.0.iter().enumerate() {
            out.push_sql(if index == 0 { "(" } else { ", (" });
            out.push_bind_param::<Text, _>(&row.merchant_id)?;
            out.push_sql(", ");
            out.push_bind_param::<Text, _>(&row.idempotency_key)?;
            out.push_sql(", ");
            out.push_bind_param::<BigInt, _>(expected)?;
            moved_columns!(binds, out, row);
            out.push_sql(")");
        }
        out.push_sql(") AS u (merchant_id, idempotency_key, expected_version");
        moved_columns!(names, out);
        out.push_sql(
            ") WHERE s.merchant_id = u.merchant_id AND s.idempotency_key = u.idempotency_key \
             AND s.version = u.expected_version",
        );
        Ok(())
    }
}

impl QueryFragment<Pg> for TransferMoves<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.unsafe_to_cache_prepared();
        out.push_sql("UPDATE transfers AS t SET ");
        transfer_columns!(set_list, out);
        out.push_sql(" FROM (VALUES ");
        for (index, (row, expected)) in self.0.iter().enumerate() {
            out.push_sql(if index == 0 { "(" } else { ", (" });
            out.push_bind_param::<Text, _>(&row.id)?;
            out.push_sql(", ");
            out.push_bind_param::<BigInt, _>(expected)?;
            transfer_columns!(binds, out, row);
            out.push_sql(")");
        }
        out.push_sql(") AS u (id, expected_version");
        transfer_columns!(names, out);
        out.push_sql(") WHERE t.id = u.id AND t.version = u.expected_version");
        Ok(())
    }
}

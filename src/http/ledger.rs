//! The merchant's ledger accounts and their entries (decisions §6, extension).

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tern_schema::models::LedgerAccountRow;
use tern_schema::store::ledger as store;
use tern_schema::types::as_utc;
use tern_schema::vocabulary::{AccountId, MerchantId};
use utoipa::{IntoParams, ToSchema};

use crate::auth::{Caller, MerchantOwned};
use crate::http::extract::Query;
use crate::http::problem::{ApiError, FieldErrors, Problem};
use crate::state::AppState;
use crate::validate;

pub const LIST_LIMIT_DEFAULT: i64 = 50;
pub const LIST_LIMIT_MAX: i64 = 200;

#[derive(Debug, Serialize, ToSchema)]
pub struct LedgerAccount {
    #[schema(value_type = String, example = "acct_0193f0c1a2b37c5d9e8f00112233aabb")]
    pub id: AccountId,
    /// Always `funding` for a merchant's own accounts.
    pub kind: String,
    #[schema(example = "USD")]
    pub currency: String,
    /// Posted credits - posted debits.
    pub balance_minor: i64,
    /// Amounts held by settlements in flight (pending debits).
    pub pending_minor: i64,
    /// Balance - pending: what new settlements may use.
    pub available_minor: i64,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LedgerAccountList {
    pub data: Vec<LedgerAccount>,
}

/// One line of a journal entry. The ledger is append-only: a hold's lines
/// stay `pending`, and its posting or its void is a journal entry of its
/// own, listed with its own `transaction_id` and status, that repeats the
/// hold's lines and names the hold in `pending_transaction_id`. So the
/// balance is the `posted` credits minus the `posted` debits, and what is
/// still held is the `pending` lines minus those that a posting or a void
/// names. Entries resolved before the ledger became append-only show the
/// hold's own lines as `posted` or `voided`, without a separate resolution.
#[derive(Debug, Serialize, ToSchema)]
pub struct LedgerEntry {
    pub id: String,
    pub transaction_id: String,
    /// `debit` or `credit`.
    pub direction: String,
    pub amount_minor: i64,
    /// `pending` (a hold), `posted` or `voided`: the state of its journal
    /// entry.
    pub status: String,
    pub settlement_key: Option<String>,
    /// *Extension*: the hold (its `transaction_id`) that this posting or
    /// void resolves; `null` for a hold and for an entry posted at once.
    #[schema(example = "ltx_0193f0c1a2b37c5d9e8f00112233aabb")]
    pub pending_transaction_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LedgerEntryList {
    pub data: Vec<LedgerEntry>,
    /// More entries exist before the last one; pass its id as `starting_after`.
    pub has_more: bool,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EntriesQuery {
    /// 1 to 200, default 50.
    pub limit: Option<i64>,
    /// An entry id from an earlier page: list the entries older than it.
    pub starting_after: Option<String>,
}

impl MerchantOwned for LedgerAccountRow {
    fn merchant_id(&self) -> Option<&MerchantId> {
        self.merchant_id.as_ref()
    }
}

fn view(row: LedgerAccountRow) -> LedgerAccount {
    LedgerAccount {
        balance_minor: row.balance_minor().get(),
        available_minor: row.available_minor().get(),
        pending_minor: row.pending_debits_minor.get(),
        created_at: as_utc(row.created_at),
        id: row.id,
        kind: row.kind.as_str().to_owned(),
        currency: row.currency,
    }
}

/// List the merchant's funding accounts with their balances.
#[utoipa::path(get, path = "/v1/ledger/accounts", tag = "ledger", security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = LedgerAccountList),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope settlements:read", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn accounts(
    caller: Caller,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require("settlements:read")?;
    let mut pooled = state.db.get().await?;
    let rows = store::merchant_accounts(&mut pooled.tx(), &caller.merchant_id).await?;
    Ok(HttpResponse::Ok().json(LedgerAccountList {
        data: rows.into_iter().map(view).collect(),
    }))
}

/// List an account's entries, newest first.
#[utoipa::path(get, path = "/v1/ledger/accounts/{id}/entries", tag = "ledger", params(("id" = String, Path, description = "The account id"), EntriesQuery),
    security(("bearer" = []), ("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = LedgerEntryList),
        (status = 401, description = "Missing, unknown, revoked or expired key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Missing scope settlements:read", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such account for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid limit or cursor", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn entries(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
    Query(query): Query<EntriesQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require("settlements:read")?;
    let mut errors = FieldErrors::new();
    let limit = validate::list_limit(query.limit, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut pooled = state.db.get().await?;
    let tx = &mut pooled.tx();
    let account = caller.own(
        store::find_account(tx, &AccountId::new(path.into_inner())).await?,
        "ledger account",
    )?;
    let cursor = match &query.starting_after {
        None => None,
        Some(id) => Some(
            store::find_entry(tx, id)
                .await?
                .filter(|entry| entry.account_id == account.id)
                .ok_or_else(|| {
                    ApiError::field("starting_after", "is not an entry of this account")
                })?,
        ),
    };
    let mut rows = store::account_entries(tx, &account.id, cursor.as_ref(), limit + 1).await?;
    let has_more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let data = rows
        .into_iter()
        .map(
            |(entry, status, settlement_key, pending_transaction_id)| LedgerEntry {
                id: entry.id,
                transaction_id: entry.transaction_id,
                direction: entry.direction.to_string(),
                amount_minor: entry.amount_minor.get(),
                status: status.as_str().to_owned(),
                settlement_key,
                pending_transaction_id,
                created_at: as_utc(entry.created_at),
            },
        )
        .collect();
    Ok(HttpResponse::Ok().json(LedgerEntryList { data, has_more }))
}

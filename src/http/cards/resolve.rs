//! What a request for a card resolves to: its program, type, currency and
//! texts checked, defaults applied, before its user is known.

use tern_actors::card::program::{self, DEFAULT_CARD_TYPE, DEFAULT_PROGRAM};
use tern_actors::ports::CardType;
use tern_schema::money::{Currency, CurrencyKind};

use super::{
    check_text, CreateCardRequest, CARDHOLDER_CHARS_MAX, DISPLAY_NAME_CHARS_MAX,
    KYC_REFERENCE_CHARS_MAX,
};
use crate::auth::Caller;
use crate::http::problem::ApiError;

/// What a create request resolves to, before its user is known.
pub(super) struct Resolved {
    pub program: &'static program::Program,
    pub card_type: CardType,
    pub currency: String,
    pub display_name: Option<String>,
}

/// The request checked field by field (422 with every field at fault).
pub(super) fn resolve(request: &CreateCardRequest, caller: &Caller) -> Result<Resolved, ApiError> {
    let mut errors = crate::http::problem::FieldErrors::new();
    let program = program::find(request.program_id.as_deref().unwrap_or(DEFAULT_PROGRAM));
    if program.is_none() {
        errors.insert(
            "program_id".into(),
            "must be SVC_VIRTUAL_USD, SVC_VIRTUAL_EUR, SVC_PREPAID or SVC_BUSINESS".into(),
        );
    }
    let card_type = match request.card_type.as_deref() {
        None => Some(DEFAULT_CARD_TYPE),
        Some(asked) => CardType::parse(asked),
    };
    if card_type.is_none() {
        errors.insert("type".into(), "must be virtual or physical".into());
    }
    let currency = match (program, request.currency.as_deref()) {
        (Some(program), requested) => match (program.currency, requested) {
            (Some(fixed), None) => Some(fixed.to_owned()),
            (Some(fixed), Some(asked)) if asked == fixed => Some(fixed.to_owned()),
            (Some(fixed), Some(_)) => {
                errors.insert(
                    "currency".into(),
                    format!("program {} issues in {fixed} only", program.id),
                );
                None
            }
            (None, asked) => {
                let asked = asked.unwrap_or("USD");
                match Currency::find(asked) {
                    Some(currency) if currency.kind == CurrencyKind::Fiat => Some(asked.to_owned()),
                    _ => {
                        errors.insert(
                            "currency".into(),
                            "must be a supported fiat currency (USD, EUR, GBP, JPY)".into(),
                        );
                        None
                    }
                }
            }
        },
        (None, _) => None,
    };
    check_text(
        &mut errors,
        "display_name",
        request.display_name.as_deref(),
        DISPLAY_NAME_CHARS_MAX,
    );
    check_text(
        &mut errors,
        "kyc_reference",
        request.kyc_reference.as_deref(),
        KYC_REFERENCE_CHARS_MAX,
    );
    check_text(
        &mut errors,
        "cardholder",
        request.cardholder.as_deref(),
        CARDHOLDER_CHARS_MAX,
    );
    if caller.user_id().is_some() {
        if request.user_id.is_some() {
            errors.insert(
                "user_id".into(),
                "must be omitted by session callers".into(),
            );
        }
        if request.cardholder.is_some() {
            errors.insert(
                "cardholder".into(),
                "must be omitted by session callers; it comes from the profile".into(),
            );
        }
    } else if request.user_id.is_none() {
        errors.insert("user_id".into(), "is required for API-key callers".into());
    }
    match (program, card_type, currency) {
        (Some(program), Some(card_type), Some(currency)) if errors.is_empty() => Ok(Resolved {
            program,
            card_type,
            currency,
            display_name: request
                .display_name
                .as_ref()
                .map(|name| name.trim().to_owned()),
        }),
        _ => Err(ApiError::Validation(errors)),
    }
}

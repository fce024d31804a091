//! The operator's bearer token (decisions §12, TERN_OPERATOR_TOKEN): it
//! shows the details of /health and /health/actors (entity and merchant
//! ids, database and provider error text) that strangers must not read.

use actix_web::http::header::AUTHORIZATION;
use actix_web::{HttpMessage, HttpRequest};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::http::problem::ApiError;

/// Who reads an operational endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Viewer {
    /// Presented the operator token: sees every detail.
    Operator,
    /// Presented nothing: sees aggregate figures only.
    Stranger,
}

/// Set on a request whose caller proved who it is (an API key, a session,
/// the operator token), for the parts of the response only they may see.
#[derive(Clone, Copy, Debug)]
pub struct Authenticated;

/// Who `req` is. No Authorization header is a stranger; a header that is
/// not the operator token (or any, when no token is configured) is 401, so
/// an operator with a wrong token learns it instead of reading a redacted
/// page as the truth.
pub fn viewer(req: &HttpRequest, token: Option<&str>) -> Result<Viewer, ApiError> {
    let Some(header) = req.headers().get(AUTHORIZATION) else {
        return Ok(Viewer::Stranger);
    };
    let presented = header
        .to_str()
        .ok()
        .and_then(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
        })
        .map(str::trim);
    match (presented, token) {
        (Some(presented), Some(token)) if matches(presented, token) => {
            req.extensions_mut().insert(Authenticated);
            Ok(Viewer::Operator)
        }
        (_, None) => Err(ApiError::Unauthorized(
            "operator details are off: TERN_OPERATOR_TOKEN is not set",
        )),
        _ => Err(ApiError::Unauthorized("the operator token is not valid")),
    }
}

/// Compares digests, so neither the time taken nor a length difference
/// tells how much of the token was right.
fn matches(presented: &str, token: &str) -> bool {
    Sha256::digest(presented.as_bytes())
        .ct_eq(&Sha256::digest(token.as_bytes()))
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    const TOKEN: &str = "operator-token-of-24-chars!";

    #[test]
    fn the_token_shows_details_and_nothing_else_does() {
        let stranger = TestRequest::default().to_http_request();
        assert_eq!(viewer(&stranger, Some(TOKEN)).ok(), Some(Viewer::Stranger));
        let operator = TestRequest::default()
            .insert_header((AUTHORIZATION, format!("Bearer {TOKEN}")))
            .to_http_request();
        assert_eq!(viewer(&operator, Some(TOKEN)).ok(), Some(Viewer::Operator));
        assert!(operator.extensions().contains::<Authenticated>());
        for wrong in [
            format!("Bearer {TOKEN}x"),
            "Bearer ".to_owned(),
            format!("Basic {TOKEN}"),
        ] {
            let request = TestRequest::default()
                .insert_header((AUTHORIZATION, wrong.clone()))
                .to_http_request();
            assert!(
                matches!(
                    viewer(&request, Some(TOKEN)),
                    Err(ApiError::Unauthorized(_))
                ),
                "{wrong}"
            );
        }
        assert!(matches!(
            viewer(&operator, None),
            Err(ApiError::Unauthorized(_))
        ));
    }
}

//! Request extractors with Tern's error rules: JSON bodies (415 wrong type,
//! 413 over 64 KiB, 400 not JSON, 422 wrong shape with field errors), query
//! strings (422) and request ids.

use actix_web::dev::Payload;
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::{FromRequest, HttpMessage, HttpRequest};
use futures_util::future::{ready, LocalBoxFuture, Ready};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;

use crate::http::middleware::RequestId;
use crate::http::problem::{ApiError, FieldErrors};

/// Largest request body Tern reads.
pub const BODY_BYTES_MAX: usize = 64 * 1024;

/// A JSON request body, parsed strictly.
///
/// Behind a credential extractor, take it as `Result<JsonBody<T>, ApiError>`
/// and unwrap it in the handler: actix resolves a handler's extractors
/// together, and a bad body would otherwise answer before a missing
/// credential's 401.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for JsonBody<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let checked = check_json_headers(req);
        let mut payload = payload.take();
        Box::pin(async move {
            checked?;
            let body = read_body(&mut payload).await?;
            parse_json(&body).map(JsonBody)
        })
    }
}

/// Like [`JsonBody`], for operations whose body may be omitted: no body (or
/// an empty one) is `None`.
#[derive(Debug)]
pub struct OptionalJsonBody<T>(pub Option<T>);

impl<T: DeserializeOwned + 'static> FromRequest for OptionalJsonBody<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let has_content_type = req.headers().contains_key(CONTENT_TYPE);
        let checked = if has_content_type {
            check_json_headers(req)
        } else {
            Ok(())
        };
        let mut payload = payload.take();
        Box::pin(async move {
            let body = read_body(&mut payload).await?;
            if body.iter().all(u8::is_ascii_whitespace) {
                return Ok(OptionalJsonBody(None));
            }
            if !has_content_type {
                return Err(ApiError::UnsupportedMediaType);
            }
            checked?;
            parse_json(&body).map(|value| OptionalJsonBody(Some(value)))
        })
    }
}

/// 413 when the declared length is over the bound, 415 unless the body is
/// declared JSON.
pub(crate) fn check_json_headers(req: &HttpRequest) -> Result<(), ApiError> {
    let declared_length = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if declared_length.is_some_and(|length| length > BODY_BYTES_MAX) {
        return Err(ApiError::PayloadTooLarge(BODY_BYTES_MAX));
    }
    let is_json = req.mime_type().ok().flatten().is_some_and(|mime| {
        mime.type_() == mime::APPLICATION
            && (mime.subtype() == mime::JSON || mime.suffix() == Some(mime::JSON))
    });
    if is_json {
        Ok(())
    } else {
        Err(ApiError::UnsupportedMediaType)
    }
}

/// Reads at most [`BODY_BYTES_MAX`] bytes, whatever Content-Length claimed.
async fn read_body(payload: &mut Payload) -> Result<Vec<u8>, ApiError> {
    let mut body = Vec::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk
            .map_err(|error| ApiError::BadRequest(format!("could not read the body: {error}")))?;
        if body.len() + chunk.len() > BODY_BYTES_MAX {
            return Err(ApiError::PayloadTooLarge(BODY_BYTES_MAX));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Whether a JSON text holds a NUL character in a string: a `\u0000`
/// escape whose backslash is not itself escaped (JSON cannot carry a raw
/// NUL inside a string).
fn holds_nul(body: &[u8]) -> bool {
    let escaped = |at: usize| {
        let backslashes = body.iter().take(at).rev();
        backslashes.take_while(|byte| **byte == b'\\').count() % 2 == 1
    };
    body.windows(6)
        .enumerate()
        .any(|(at, window)| window == b"\\u0000" && !escaped(at))
}

/// Parses JSON: text that is not JSON at all is 400; JSON of the wrong shape
/// (types, missing or unknown fields) is 422 naming the field.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let deserializer = &mut serde_json::Deserializer::from_slice(body);
    match serde_path_to_error::deserialize::<_, T>(deserializer) {
        // PostgreSQL cannot store a NUL in text, and no field means one.
        Ok(_) if holds_nul(body) => Err(ApiError::field(
            "body",
            "text must not contain the NUL character (\\u0000)",
        )),
        Ok(value) => Ok(value),
        Err(error) => {
            let path = error.path().to_string();
            let inner = error.into_inner();
            // serde may meet a wrong type before the text turns out not to
            // be JSON at all; syntax is checked first, on this error path only.
            let well_formed = serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok();
            let is_object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
            if well_formed && !is_object {
                return Err(ApiError::field("body", "must be a JSON object"));
            }
            if inner.is_data() && well_formed {
                let (field, message) = describe_data_error(&path, &inner.to_string(), "body");
                Err(ApiError::Validation(FieldErrors::from([(field, message)])))
            } else {
                Err(ApiError::MalformedJson(format!(
                    "the body is not valid JSON: {inner}"
                )))
            }
        }
    }
}

/// Turns serde's message into a field name and a message without position
/// noise. Missing, unknown and repeated fields are reported under their own
/// name; an error of the whole input under `whole` (`body`, `query`).
fn describe_data_error(path: &str, message: &str, whole: &str) -> (String, String) {
    let message = message
        .split(" at line ")
        .next()
        .unwrap_or(message)
        .to_owned();
    let named = |marker: &str| {
        message
            .strip_prefix(marker)
            .and_then(|rest| rest.split('`').next())
            .map(str::to_owned)
    };
    let join = |parent: &str, name: String| match parent {
        "" | "." => name,
        parent => format!("{parent}.{name}"),
    };
    if let Some(name) = named("missing field `") {
        return (join(path, name), "is required".to_owned());
    }
    // serde_path_to_error puts an unknown key in the path, but not a
    // repeated one, whose path is its parent's.
    if let Some(name) = named("unknown field `") {
        let field = if path.ends_with(&name) {
            path.to_owned()
        } else {
            join(path, name)
        };
        return (field, "is not a known field".to_owned());
    }
    if let Some(name) = named("duplicate field `") {
        return (join(path, name), "is given more than once".to_owned());
    }
    let field = if path.is_empty() || path == "." {
        whole.to_owned()
    } else {
        path.to_owned()
    };
    (field, message)
}

/// A query string parsed into `T`; a bad parameter is 422 naming it.
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<T: DeserializeOwned> FromRequest for Query<T> {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let deserializer = serde_urlencoded::Deserializer::new(form_urlencoded::parse(
            req.query_string().as_bytes(),
        ));
        let parsed = serde_path_to_error::deserialize::<_, T>(deserializer).map_err(|error| {
            let path = error.path().to_string();
            let (field, message) =
                describe_data_error(&path, &error.into_inner().to_string(), "query");
            ApiError::Validation(FieldErrors::from([(field, message)]))
        });
        ready(parsed.map(Query))
    }
}

/// The request's correlation id (set by the middleware).
pub fn request_id(req: &HttpRequest) -> String {
    req.extensions()
        .get::<RequestId>()
        .map(|id| id.0.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[test]
    fn a_nul_escape_is_found_unless_its_backslash_is_escaped() {
        let table: [(&[u8], bool); 8] = [
            (br#"{"a": "x\u0000y"}"#, true),
            (br#"{"a": "\u0000"}"#, true),
            (br#"{"a": "x\\u0000y"}"#, false),
            (br#"{"a": "x\\\u0000y"}"#, true),
            (br#"{"a": "\u00001"}"#, true),
            (br#"{"a": "\u0001"}"#, false),
            (br#"{"a": "u0000"}"#, false),
            (b"", false),
        ];
        for (body, nul) in table {
            assert_eq!(holds_nul(body), nul, "{}", String::from_utf8_lossy(body));
        }
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(
        dead_code,
        reason = "deserialized to test deny_unknown_fields, never read"
    )]
    struct Body {
        name: String,
        count: Option<u32>,
        inner: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(
        dead_code,
        reason = "deserialized to test deny_unknown_fields, never read"
    )]
    struct Inner {
        flag: bool,
    }

    fn field_errors(body: &str) -> FieldErrors {
        match parse_json::<Body>(body.as_bytes()) {
            Err(ApiError::Validation(errors)) => errors,
            other => panic!("expected a validation error for {body}, got {other:?}"),
        }
    }

    #[test]
    fn not_json_is_malformed() {
        for body in ["", "{", "nope", "{\"name\": }", "[1,"] {
            assert!(
                matches!(
                    parse_json::<Body>(body.as_bytes()),
                    Err(ApiError::MalformedJson(_))
                ),
                "{body}"
            );
        }
    }

    #[test]
    fn wrong_shapes_name_the_field() {
        assert_eq!(
            field_errors("{}").get("name").map(String::as_str),
            Some("is required")
        );
        assert!(field_errors("{\"name\":\"a\",\"extra\":1}").contains_key("extra"));
        assert!(field_errors("{\"name\":1}").contains_key("name"));
        assert!(field_errors("{\"name\":\"a\",\"count\":-1}").contains_key("count"));
        assert!(
            field_errors("{\"name\":\"a\",\"inner\":{\"flag\":\"x\"}}").contains_key("inner.flag")
        );
        assert!(field_errors("{\"name\":\"a\",\"inner\":{}}").contains_key("inner.flag"));
        assert!(field_errors("[]").contains_key("body"));
    }
}

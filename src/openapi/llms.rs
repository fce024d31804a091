//! /llms.txt: the aggregated document as plain text an agent can act on.

use std::fmt::Write;

use serde_json::Value;

const PREAMBLE: &str = "\
# Tern API

> Tern is a payment settlement engine: card charges in, USDT/USDC out on tron,
> ethereum, polygon or bsc, with a double-entry ledger and exactly-once
> provider effects. REST + JSON, described by OpenAPI 3.0 at /openapi.json.

## Conventions
- Authenticate with a merchant API key: `Authorization: Bearer svc_<prefix>_<secret>`
  or `X-API-Key: svc_<prefix>_<secret>`. Get one from POST /v1/auth/m2m/register
  (shown once). Humans use the `svc_session` cookie.
- A key without an operation's scope gets 403 naming the scope; a missing,
  unknown, revoked or expired key gets 401.
- Errors are RFC 7807 `application/problem+json` documents: type, title, status,
  detail, instance, request_id, `errors` (field -> message, for 422) and `code`
  (named conditions). GET the `type` URL for an explanation.
- Send `Idempotency-Key: <UUID v4>` on settlement and transfer creation; a
  repeat returns the original result with `Idempotent-Replayed: true`.
- `X-Request-ID` is echoed (or generated) on every response.
- Bodies: JSON, at most 64 KiB, unknown fields rejected. Money amounts are
  decimal strings in major units; fields named *_minor are integer minor units.
- 429 and 503 carry Retry-After in seconds.

## Operations
";

pub fn render(doc: &Value) -> String {
    let mut text = String::from(PREAMBLE);
    let Some(paths) = doc.get("paths").and_then(Value::as_object) else {
        return text;
    };
    for (path, item) in paths {
        let Some(operations) = item.as_object() else {
            continue;
        };
        for (method, operation) in operations {
            if !["get", "put", "post", "delete", "patch"].contains(&method.as_str()) {
                continue;
            }
            let _ = writeln!(text, "\n### {} {}", method.to_uppercase(), path);
            if let Some(summary) = operation.get("summary").and_then(Value::as_str) {
                let _ = writeln!(text, "{summary}");
            }
            if let Some(description) = operation.get("description").and_then(Value::as_str) {
                let _ = writeln!(text, "{description}");
            }
            let auth = match operation.get("security").and_then(Value::as_array) {
                Some(schemes) if !schemes.is_empty() => "API key (Bearer or X-API-Key)",
                _ => "none",
            };
            let _ = writeln!(text, "- auth: {auth}");
            if let Some(schema) = request_schema(operation) {
                let _ = writeln!(text, "- request body: {schema}");
            }
            if let Some(responses) = operation.get("responses").and_then(Value::as_object) {
                let listed: Vec<String> = responses
                    .iter()
                    .map(|(status, response)| {
                        let description = response
                            .get("description")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        format!("{status} {description}").trim().to_owned()
                    })
                    .collect();
                let _ = writeln!(text, "- responses: {}", listed.join("; "));
            }
        }
    }
    text
}

fn request_schema(operation: &Value) -> Option<String> {
    let schema = operation.pointer("/requestBody/content/application~1json/schema")?;
    let reference = schema
        .get("$ref")
        .or_else(|| schema.pointer("/allOf/0/$ref"))
        .and_then(Value::as_str)?;
    reference.rsplit('/').next().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #[test]
    fn lists_every_operation() {
        let docs = crate::openapi::documents("http://tern.test");
        let text = String::from_utf8_lossy(docs.llms_txt()).into_owned();
        assert!(text.contains("### POST /v1/auth/m2m/register"), "{text}");
        assert!(text.contains("- request body: RegisterRequest"), "{text}");
        assert!(text.contains("### DELETE /v1/api-keys/{id}"));
        assert!(text.contains("application/problem+json"));
    }
}

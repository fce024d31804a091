//! The served API description: the aggregated OpenAPI 3.0 document, one per
//! context, the interactive pages and /llms.txt, all built once at start
//! from the handlers' utoipa annotations (`crate::http::docs`).

pub mod downgrade;
pub mod llms;

use std::sync::Arc;

use actix_web::http::header::{CONTENT_TYPE, LOCATION};
use actix_web::web::{self, Bytes};
use actix_web::HttpResponse;
use serde_json::{json, Value};
use utoipa::openapi::{InfoBuilder, OpenApi, Server};
use utoipa::OpenApi as _;
use utoipa_swagger_ui::{Config, SwaggerUi};

use crate::http::docs;

pub const API_TITLE: &str = "Tern API";
pub const API_VERSION: &str = "1.0.0";
const API_DESCRIPTION: &str = "Tern moves money between cards and blockchains with a double-entry \
ledger and exactly-once effects toward providers. Errors are application/problem+json; \
mutations take an Idempotency-Key (UUID v4); every response echoes X-Request-ID.";

/// A context's served document: its name, its path, its JSON.
pub struct ContextDocument {
    pub name: &'static str,
    pub path: &'static str,
    pub json: Bytes,
}

/// A path template of the API and the methods it takes.
struct Route {
    segments: Vec<Option<String>>,
    methods: Vec<String>,
}

pub struct Documents {
    aggregated: Bytes,
    contexts: Vec<ContextDocument>,
    llms: Bytes,
    routes: Vec<Route>,
}

/// The contexts and where their documents are served (the interface's paths).
fn contexts() -> Vec<(&'static str, &'static str, OpenApi)> {
    vec![
        ("auth", "/v1/auth/openapi.json", docs::AuthApi::openapi()),
        (
            "auth-m2m",
            "/v1/auth/m2m/openapi.json",
            docs::AuthM2mApi::openapi(),
        ),
        (
            "settlements",
            "/v1/settlements/openapi.json",
            docs::SettlementsApi::openapi(),
        ),
        (
            "quotes",
            "/v1/quotes/openapi.json",
            docs::QuotesApi::openapi(),
        ),
        (
            "transfers",
            "/v1/transfers/openapi.json",
            docs::TransfersApi::openapi(),
        ),
        (
            "webhooks",
            "/v1/webhooks/openapi.json",
            docs::WebhooksApi::openapi(),
        ),
        ("cards", "/v1/cards/openapi.json", docs::CardsApi::openapi()),
    ]
}

/// Builds every document for a deployment reachable at `public_url`.
pub fn documents(public_url: &str) -> Documents {
    let mut aggregated = with_info(docs::OpsApi::openapi(), public_url);
    // Contexts without a document of their own in the interface.
    aggregated.merge(docs::LedgerApi::openapi());
    aggregated.merge(docs::AuditApi::openapi());
    aggregated.merge(docs::DevicesApi::openapi());
    aggregated.merge(docs::NotificationsApi::openapi());
    let mut contexts_out = Vec::new();
    for (name, path, doc) in contexts() {
        aggregated.merge(doc.clone());
        let value = downgrade::downgrade_to_3_0(to_value(with_info(doc, public_url)));
        contexts_out.push(ContextDocument {
            name,
            path,
            json: to_bytes(&value),
        });
    }
    let aggregated = downgrade::downgrade_to_3_0(to_value(aggregated));
    let routes = route_table(&aggregated);
    Documents {
        llms: Bytes::from(llms::render(&aggregated)),
        aggregated: to_bytes(&aggregated),
        contexts: contexts_out,
        routes,
    }
}

fn with_info(mut doc: OpenApi, public_url: &str) -> OpenApi {
    doc.info = InfoBuilder::new()
        .title(API_TITLE)
        .version(API_VERSION)
        .description(Some(API_DESCRIPTION))
        .build();
    doc.servers = Some(vec![Server::new(public_url)]);
    doc
}

fn to_value(doc: OpenApi) -> Value {
    serde_json::to_value(&doc).unwrap_or_else(|_| json!({}))
}

fn to_bytes(value: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec_pretty(value).unwrap_or_default())
}

fn route_table(doc: &Value) -> Vec<Route> {
    let Some(paths) = doc.get("paths").and_then(Value::as_object) else {
        return Vec::new();
    };
    paths
        .iter()
        .map(|(template, item)| Route {
            segments: template
                .split('/')
                .map(|segment| (!segment.starts_with('{')).then(|| segment.to_owned()))
                .collect(),
            methods: item
                .as_object()
                .map(|ops| {
                    ["get", "put", "post", "delete", "patch"]
                        .iter()
                        .filter(|method| ops.contains_key(**method))
                        .map(|method| method.to_uppercase())
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

impl Documents {
    pub fn aggregated_json(&self) -> String {
        String::from_utf8_lossy(&self.aggregated).into_owned()
    }

    pub fn llms_txt(&self) -> &Bytes {
        &self.llms
    }

    /// Every served document as (file name, JSON): `openapi.json` and
    /// `<context>.json`.
    pub fn files(&self) -> Vec<(String, Bytes)> {
        let mut files = vec![("openapi.json".to_owned(), self.aggregated.clone())];
        files.extend(
            self.contexts
                .iter()
                .map(|doc| (format!("{}.json", doc.name), doc.json.clone())),
        );
        files
    }

    /// The methods a known path takes, or `None` for an unknown path. A
    /// literal segment beats a template parameter.
    pub fn allowed_methods(&self, path: &str) -> Option<Vec<String>> {
        let segments: Vec<&str> = path.split('/').collect();
        self.routes
            .iter()
            .filter(|route| {
                route.segments.len() == segments.len()
                    && route.segments.iter().zip(&segments).all(
                        |(pattern, segment)| match pattern {
                            Some(literal) => literal == segment,
                            None => !segment.is_empty(),
                        },
                    )
            })
            .max_by_key(|route| route.segments.iter().filter(|s| s.is_some()).count())
            .map(|route| route.methods.clone())
    }
}

/// Registers the documents, /llms.txt and the interactive pages. Assets are
/// embedded in the binary, so the pages work without internet.
pub fn configure_docs(cfg: &mut web::ServiceConfig, docs: Arc<Documents>) {
    let json = |bytes: Bytes| {
        move || {
            let bytes = bytes.clone();
            async move {
                HttpResponse::Ok()
                    .insert_header((CONTENT_TYPE, "application/json"))
                    .body(bytes)
            }
        }
    };
    cfg.route(
        "/openapi.json",
        web::get().to(json(docs.aggregated.clone())),
    );
    for doc in &docs.contexts {
        cfg.route(doc.path, web::get().to(json(doc.json.clone())));
    }
    let llms = docs.llms.clone();
    cfg.route(
        "/llms.txt",
        web::get().to(move || {
            let llms = llms.clone();
            async move {
                HttpResponse::Ok()
                    .insert_header((CONTENT_TYPE, "text/plain; charset=utf-8"))
                    .body(llms)
            }
        }),
    );
    for (page, document) in [
        ("/docs", "/openapi.json"),
        ("/v1/quotes/docs", "/v1/quotes/openapi.json"),
        ("/v1/transfers/docs", "/v1/transfers/openapi.json"),
    ] {
        // Relative asset links need the trailing slash.
        let target = format!("{page}/");
        cfg.route(
            page,
            web::get().to(move || {
                let target = target.clone();
                async move {
                    HttpResponse::MovedPermanently()
                        .insert_header((LOCATION, target))
                        .finish()
                }
            }),
        );
        cfg.service(SwaggerUi::new(format!("{page}/{{_:.*}}")).config(Config::new([document])));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_is_3_0_with_the_interface_version() {
        let docs = documents("http://tern.test");
        for (name, bytes) in docs.files() {
            let doc: Value = serde_json::from_slice(&bytes).expect("json");
            assert_eq!(doc["openapi"], "3.0.3", "{name}");
            assert_eq!(doc["info"]["version"], API_VERSION, "{name}");
            assert_eq!(doc["servers"][0]["url"], "http://tern.test", "{name}");
            let mut leftovers = Vec::new();
            downgrade::leftovers_3_1(&doc, "", &mut leftovers);
            assert!(leftovers.is_empty(), "{name}: {leftovers:?}");
        }
    }

    #[test]
    fn the_aggregate_holds_every_route_with_security_schemes() {
        let docs = documents("http://tern.test");
        let doc: Value = serde_json::from_str(&docs.aggregated_json()).expect("json");
        for path in [
            "/",
            "/ready",
            "/v1/auth/m2m/register",
            "/v1/auth/register",
            "/v1/auth/login",
            "/v1/auth/logout",
            "/v1/auth/sessions",
            "/v1/auth/sessions/{id}",
            "/v1/auth/me",
            "/v1/profile",
            "/v1/auth/verify-email",
            "/v1/auth/verify-email/resend",
            "/v1/auth/password-reset/request",
            "/v1/auth/password-reset/confirm",
            "/v1/api-keys",
            "/v1/api-keys/{id}",
            "/v1/devices",
            "/v1/devices/{id}",
            "/v1/cards/{id}/secure-details",
            "/v1/cards/{id}/wallet/apple_pay",
            "/v1/cards/{id}/wallet/google_pay",
            "/v1/cards/{id}/wallet/status",
            "/v1/notifications/dispatch",
        ] {
            assert!(doc["paths"][path].is_object(), "{path}");
        }
        for scheme in ["bearer", "api_key", "session", "service_signature"] {
            assert!(
                doc["components"]["securitySchemes"][scheme].is_object(),
                "{scheme}"
            );
        }
        assert!(doc["components"]["schemas"]["Problem"].is_object());
    }

    /// Client generators name methods after operation ids: two alike would
    /// collide (and the 3.0 validator refuses the document).
    #[test]
    fn operation_ids_are_unique() {
        let docs = documents("http://tern.test");
        let doc: Value = serde_json::from_str(&docs.aggregated_json()).expect("json");
        let mut seen = std::collections::BTreeMap::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for (method, operation) in item.as_object().expect("item") {
                let Some(id) = operation["operationId"].as_str() else {
                    continue;
                };
                let label = format!("{method} {path}");
                if let Some(first) = seen.insert(id.to_owned(), label.clone()) {
                    panic!("operationId {id} names both {first} and {label}");
                }
            }
        }
    }

    /// Every business operation documents its credential and its failures,
    /// so a client generated from the document handles them.
    #[test]
    fn business_operations_document_security_and_errors() {
        let docs = documents("http://tern.test");
        let doc: Value = serde_json::from_str(&docs.aggregated_json()).expect("json");
        let public = [
            "/v1/auth/m2m/register",
            "/v1/auth/register",
            "/v1/auth/login",
            "/v1/auth/verify-email",
            "/v1/auth/password-reset/request",
            "/v1/auth/password-reset/confirm",
        ];
        // Static catalogues: nothing to refuse.
        let catalogues = ["/v1/card-art"];
        for (path, item) in doc["paths"].as_object().expect("paths") {
            if !path.starts_with("/v1/") || catalogues.contains(&path.as_str()) {
                continue;
            }
            for (method, operation) in item.as_object().expect("item") {
                let label = format!("{method} {path}");
                let responses = operation["responses"].as_object().expect("responses");
                assert!(
                    responses.keys().any(|code| code.starts_with('4')),
                    "{label} documents no 4xx"
                );
                for (code, response) in responses.iter().filter(|(code, _)| code.starts_with('4')) {
                    let problem = &response["content"]["application/problem+json"]["schema"];
                    assert!(
                        !problem.is_null(),
                        "{label} {code} is not a problem document"
                    );
                }
                if public.contains(&path.as_str()) {
                    continue;
                }
                let security = operation["security"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                assert!(!security.is_empty(), "{label} has no security");
                let by_key = security
                    .iter()
                    .any(|s| s.get("bearer").is_some() || s.get("api_key").is_some());
                if by_key {
                    assert!(responses.contains_key("401"), "{label} documents no 401");
                }
            }
        }
    }

    /// The JSON body and query extractors (`crate::http::extract`) answer
    /// these before a handler runs, so every operation that takes a JSON body
    /// or a query string can answer them; a client generated from the
    /// document must know them (schemathesis' status_code_conformance).
    #[test]
    fn operations_document_their_extractors_rejections() {
        let docs = documents("http://tern.test");
        let doc: Value = serde_json::from_str(&docs.aggregated_json()).expect("json");
        // A provider signs raw bytes whatever their Content-Type; its
        // handler verifies them first and answers any bad body 400.
        let raw_signed = ["/v1/webhooks/{provider}"];
        let mut missing = Vec::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for (method, operation) in item.as_object().expect("item") {
                let responses = operation["responses"].as_object().expect("responses");
                let mut expected = Vec::new();
                let json_body = !operation["requestBody"]["content"]["application/json"].is_null();
                if json_body && !raw_signed.contains(&path.as_str()) {
                    expected.extend(["400", "413", "415", "422"]);
                }
                let has_query = operation["parameters"]
                    .as_array()
                    .is_some_and(|params| params.iter().any(|p| p["in"] == "query"));
                if has_query {
                    expected.push("422");
                }
                for code in expected {
                    if !responses.contains_key(code) {
                        missing.push(format!("{method} {path} {code}"));
                    }
                }
            }
        }
        missing.dedup();
        assert!(missing.is_empty(), "undocumented: {missing:#?}");
    }

    #[test]
    fn allowed_methods_match_templates() {
        let docs = documents("http://tern.test");
        assert_eq!(
            docs.allowed_methods("/v1/api-keys"),
            Some(vec!["GET".into(), "POST".into()])
        );
        assert_eq!(
            docs.allowed_methods("/v1/api-keys/abc"),
            Some(vec!["DELETE".into()])
        );
        assert_eq!(docs.allowed_methods("/v1/api-keys/"), None);
        assert_eq!(docs.allowed_methods("/v1/nothing"), None);
    }
}

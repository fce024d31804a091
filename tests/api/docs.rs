//! The served API description: documents, interactive pages, llms.txt.

use serde_json::Value;

use crate::helpers::{RequestExt, TestApp};

#[actix_web::test]
async fn every_document_is_served_as_3_0() {
    let app = TestApp::spawn().await;
    for path in [
        "/openapi.json",
        "/v1/auth/openapi.json",
        "/v1/auth/m2m/openapi.json",
        "/v1/settlements/openapi.json",
        "/v1/quotes/openapi.json",
        "/v1/transfers/openapi.json",
        "/v1/webhooks/openapi.json",
        "/v1/cards/openapi.json",
    ] {
        let response = app.get(path).send().await.expect("req");
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            response.headers()["content-type"],
            "application/json",
            "{path}"
        );
        let doc: Value = response.json().await.expect("json");
        assert_eq!(doc["openapi"], "3.0.3", "{path}");
        assert_eq!(doc["info"]["version"], "1.0.0", "{path}");
    }
    let doc: Value = app.get("/openapi.json").read_json().await;
    let register = &doc["paths"]["/v1/auth/m2m/register"]["post"];
    for status in ["201", "400", "422", "429", "503"] {
        assert!(
            register["responses"][status].is_object(),
            "register documents {status}"
        );
    }
    assert!(doc["paths"]["/v1/api-keys"]["get"]["security"].is_array());
}

#[actix_web::test]
async fn interactive_pages_work_offline() {
    let app = TestApp::spawn().await;
    let no_redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    for (page, document) in [
        ("/docs", "/openapi.json"),
        ("/v1/quotes/docs", "/v1/quotes/openapi.json"),
        ("/v1/transfers/docs", "/v1/transfers/openapi.json"),
    ] {
        let redirect = no_redirect.get(app.url(page)).send().await.expect("req");
        assert_eq!(redirect.status(), 301, "{page}");
        assert_eq!(redirect.headers()["location"], format!("{page}/").as_str());

        let html = app.get(&format!("{page}/")).send().await.expect("req");
        assert_eq!(html.status(), 200, "{page}/");
        assert!(
            html.text()
                .await
                .expect("text")
                .to_lowercase()
                .contains("swagger"),
            "{page}/"
        );
        let init = app
            .get(&format!("{page}/swagger-initializer.js"))
            .send()
            .await
            .expect("req");
        assert_eq!(init.status(), 200);
        assert!(
            init.text().await.expect("text").contains(document),
            "{page} loads {document}"
        );
        let asset = app
            .get(&format!("{page}/swagger-ui-bundle.js"))
            .send()
            .await
            .expect("req");
        assert_eq!(asset.status(), 200, "assets are served by Tern itself");
    }
}

#[actix_web::test]
async fn llms_txt_describes_every_operation() {
    let app = TestApp::spawn().await;
    let response = app.get("/llms.txt").send().await.expect("req");
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .expect("ascii")
        .starts_with("text/plain"));
    let text = response.text().await.expect("text");
    for line in [
        "### POST /v1/auth/m2m/register",
        "### GET /v1/api-keys",
        "### DELETE /v1/api-keys/{id}",
        "### GET /ready",
    ] {
        assert!(text.contains(line), "{line}");
    }
}

/// Follows `$ref` (and a one-member `allOf`, as the 3.0 downgrade writes a
/// described reference) to the schema it names.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/components/schemas/");
        return resolve(doc, &doc["components"]["schemas"][name]);
    }
    match schema["allOf"].as_array().map(Vec::as_slice) {
        Some([only]) => resolve(doc, only),
        _ => schema,
    }
}

/// A transfer's on-chain leg is a settlement in the quote's asset (USDC):
/// its amount must match the pattern the served document gives a
/// settlement's currency (schemathesis' response_schema_conformance found
/// GET /v1/settlements answering "USDC" against `^[A-Z]{3}$`).
#[actix_web::test]
async fn an_on_chain_leg_matches_the_documented_settlement_amount() {
    use crate::helpers::transfers;
    let app = transfers::app().await;
    let merchant = app.merchant().await;
    let created = transfers::create(&app, &merchant, "pm_card_visa").await;
    let done = transfers::finished(&app, &merchant, &transfers::id(&created)).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let leg =
        crate::helpers::settlements::settlement(&app, &merchant, &transfers::leg_key(&created, 2))
            .await;
    assert_eq!(leg["amount"]["currency"], "USDC", "{leg}");

    let doc: Value = app.get("/openapi.json").read_json().await;
    let settlement = resolve(&doc, &doc["components"]["schemas"]["Settlement"]);
    let amount = resolve(&doc, &settlement["properties"]["amount"]);
    let pattern = amount["properties"]["currency"]["pattern"]
        .as_str()
        .expect("a currency pattern");
    let pattern = regex::Regex::new(pattern).expect("pattern");
    let listed: Value = app
        .get("/v1/settlements")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    let items = listed["items"].as_array().expect("items");
    assert_eq!(items.len(), 2, "{listed}");
    for settlement in items.iter().chain([&leg]) {
        let currency = settlement["amount"]["currency"].as_str().expect("currency");
        assert!(
            pattern.is_match(currency),
            "{currency} does not match {pattern}"
        );
    }
    // Requests still take only ISO 4217 codes.
    let money = resolve(&doc, &doc["components"]["schemas"]["Money"]);
    assert_eq!(money["properties"]["currency"]["pattern"], "^[A-Z]{3}$");
}

//! The served API description: documents, interactive pages, llms.txt.

use serde_json::Value;

use crate::helpers::TestApp;

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
    let doc: Value = app
        .get("/openapi.json")
        .send()
        .await
        .expect("req")
        .json()
        .await
        .expect("json");
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

//! Every bad request answers a problem document with the right status.

use serde_json::{json, Value};

use crate::helpers::{assert_problem, header, TestApp};

const REGISTER: &str = "/v1/auth/m2m/register";

#[actix_web::test]
async fn unknown_route_is_404() {
    let app = TestApp::spawn().await;
    let body = assert_problem(
        app.get("/v1/nothing-here").send().await.expect("req"),
        404,
        "not-found",
    )
    .await;
    assert_eq!(body["instance"], "/v1/nothing-here");
}

#[actix_web::test]
async fn wrong_method_is_405_with_allow() {
    let app = TestApp::spawn().await;
    let response = app
        .client
        .put(app.url("/v1/api-keys"))
        .send()
        .await
        .expect("req");
    let allow = header(&response, "allow");
    assert!(
        allow.contains("GET") && allow.contains("POST"),
        "allow: {allow}"
    );
    assert_problem(response, 405, "method-not-allowed").await;

    let response = app.get(REGISTER).send().await.expect("req");
    let allow = header(&response, "allow");
    assert_eq!(allow, "POST");
    assert_problem(response, 405, "method-not-allowed").await;
}

#[actix_web::test]
async fn malformed_json_is_400() {
    let app = TestApp::spawn().await;
    for body in ["{", "not json", "{\"organization_name\": }", ""] {
        let response = app
            .post(REGISTER)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .expect("req");
        assert_problem(response, 400, "malformed-json").await;
    }
}

#[actix_web::test]
async fn wrong_shapes_are_422_with_field_errors() {
    let app = TestApp::spawn().await;
    let cases = [
        (
            json!({"organization_name": "A", "email": "a@b.co", "surprise": 1}),
            "surprise",
        ),
        (
            json!({"organization_name": 42, "email": "a@b.co"}),
            "organization_name",
        ),
        (json!({"email": "a@b.co"}), "organization_name"),
        (
            json!({"organization_name": "A", "email": "a@b.co", "scopes": "quotes:read"}),
            "scopes",
        ),
        (json!([1, 2]), "body"),
    ];
    for (body, field) in cases {
        let problem = assert_problem(
            app.post(REGISTER).json(&body).send().await.expect("req"),
            422,
            "validation-error",
        )
        .await;
        assert!(problem["errors"][field].is_string(), "{field} in {problem}");
    }
}

#[actix_web::test]
async fn bodies_over_64_kib_are_413() {
    let app = TestApp::spawn().await;
    let huge = json!({"organization_name": "x".repeat(70 * 1024), "email": "a@b.co"});
    assert_problem(
        app.post(REGISTER).json(&huge).send().await.expect("req"),
        413,
        "payload-too-large",
    )
    .await;

    // A chunked body without Content-Length is cut off just the same.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..80).map(|_| Ok(vec![b' '; 1024])).collect();
    let stream = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
    let response = app
        .post(REGISTER)
        .header("content-type", "application/json")
        .body(stream)
        .send()
        .await
        .expect("req");
    assert_problem(response, 413, "payload-too-large").await;
}

#[actix_web::test]
async fn wrong_content_type_is_415() {
    let app = TestApp::spawn().await;
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/xml",
    ] {
        let response = app
            .post(REGISTER)
            .header("content-type", content_type)
            .body("{\"organization_name\":\"A\",\"email\":\"a@b.co\"}")
            .send()
            .await
            .expect("req");
        assert_problem(response, 415, "unsupported-media-type").await;
    }
    let missing = app.post(REGISTER).body("{}").send().await.expect("req");
    assert_problem(missing, 415, "unsupported-media-type").await;
}

#[actix_web::test]
async fn a_panicking_handler_is_500_without_internals() {
    let app = TestApp::spawn().await;
    let response = app.get("/__fault/panic").send().await.expect("req");
    let text = format!("{:?}", response.headers());
    let body = assert_problem(response, 500, "internal-error").await;
    let rendered = body.to_string();
    assert!(
        !rendered.contains("sk_live") && !text.contains("sk_live"),
        "{rendered}"
    );
    assert_eq!(body["detail"], "an internal error occurred");
    // The worker survives and keeps serving.
    assert_eq!(app.get("/live").send().await.expect("req").status(), 200);
}

#[actix_web::test]
async fn problem_types_have_human_pages() {
    let app = TestApp::spawn().await;
    let page = app
        .get("/problems/validation-error")
        .send()
        .await
        .expect("req");
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-type"]
        .to_str()
        .expect("ascii")
        .starts_with("text/html"));
    assert!(page
        .text()
        .await
        .expect("text")
        .contains("Validation failed"));
    assert_problem(
        app.get("/problems/no-such-thing")
            .send()
            .await
            .expect("req"),
        404,
        "not-found",
    )
    .await;
}

#[actix_web::test]
async fn bad_requests_store_nothing() {
    let app = TestApp::spawn().await;
    let bad_bodies: [Value; 3] = [
        json!({"organization_name": "", "email": "a@b.co"}),
        json!({"organization_name": "A", "email": "nope"}),
        json!({"organization_name": "A", "email": "a@b.co", "scopes": ["root"]}),
    ];
    for body in bad_bodies {
        assert_eq!(app.register(body).await.status(), 422);
    }
    let mut pooled = app.state.db.get().await.expect("connection");
    assert_eq!(
        tern_schema::store::merchants::count(&mut pooled.tx())
            .await
            .expect("count"),
        0
    );
}

/// PostgreSQL cannot store a NUL in text: a NUL in a path id, a query or a
/// JSON string is refused at the edge, on both backends, and changes nothing.
#[actix_web::test]
async fn nul_characters_are_refused_before_any_query() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    for path in [
        "/v1/cards/%00",
        "/v1/settlements/%00",
        "/v1/transfers/tr%00x",
    ] {
        assert_problem(app.get_as(&merchant, path).await, 404, "not-found").await;
    }
    let problem = assert_problem(
        app.get_as(&merchant, "/v1/settlements?cursor=%00").await,
        422,
        "validation-error",
    )
    .await;
    assert!(problem["errors"]["query"].is_string(), "{problem}");
    let nul = json!({"organization_name": "A\u{0}B", "email": "nul@example.com"});
    let errors = field_errors(app.post(REGISTER).json(&nul).send().await.expect("req")).await;
    assert!(errors["body"].is_string(), "{errors}");
}

/// A field given twice is 422 naming it, in a query string and in a body,
/// not an error of the whole input.
#[actix_web::test]
async fn a_repeated_field_is_422_naming_it() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let query = "/v1/transfers?status=succeeded&status=failed";
    let errors = field_errors(app.get_as(&merchant, query).await).await;
    assert!(errors["status"].is_string(), "{errors}");
    let twice =
        r#"{"organization_name": "A", "organization_name": "B", "email": "twice@example.com"}"#;
    let request = app
        .post(REGISTER)
        .header("content-type", "application/json");
    let errors = field_errors(request.body(twice).send().await.expect("req")).await;
    assert!(errors["organization_name"].is_string(), "{errors}");
    // Inside an object, the repeated key is named under its parent.
    let nested = r#"{"method": "card_push", "amount": {"amount": "1.00", "amount": "2.00", "currency": "USD"}}"#;
    let response = app
        .post("/v1/settlements")
        .bearer_auth(&merchant.api_key)
        .header("content-type", "application/json")
        .header("idempotency-key", uuid::Uuid::new_v4().to_string())
        .body(nested)
        .send()
        .await
        .expect("req");
    let errors = field_errors(response).await;
    assert!(errors["amount.amount"].is_string(), "{errors}");
}

/// The field errors of a 422 validation problem.
async fn field_errors(response: reqwest::Response) -> Value {
    assert_problem(response, 422, "validation-error").await["errors"].clone()
}

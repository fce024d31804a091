//! GET /v1/audit/events and /v1/audit/verify, and tampering.

use serde_json::Value;

use crate::helpers::{assert_problem, RequestExt, TestApp};

#[actix_web::test]
async fn credential_changes_are_audited_with_request_ids() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let created: Value = app
        .post("/v1/api-keys")
        .bearer_auth(&merchant.api_key)
        .header("X-Request-ID", "create-1")
        .json(&serde_json::json!({"name": "ci"}))
        .read_json()
        .await;
    let id = created["api_key_id"].as_str().expect("id");
    let revoked = app
        .delete(&format!("/v1/api-keys/{id}"))
        .bearer_auth(&merchant.api_key)
        .header("X-Request-ID", "revoke-1")
        .send()
        .await
        .expect("req");
    assert_eq!(revoked.status(), 204);

    let events: Value = app
        .get("/v1/audit/events")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    let data = events["data"].as_array().expect("data");
    let actions: Vec<&str> = data.iter().filter_map(|e| e["action"].as_str()).collect();
    assert_eq!(
        actions,
        [
            "api_key.revoked",
            "api_key.created",
            "api_key.created",
            "merchant.registered"
        ]
    );
    assert_eq!(data[0]["request_id"], "revoke-1");
    assert_eq!(data[1]["request_id"], "create-1");
    assert_eq!(data[0]["resource_id"], id);
    assert_eq!(data[0]["actor_type"], "api_key");
    assert_eq!(data[0]["prev_hash"], data[1]["hash"], "linked");
    assert!(
        !events
            .to_string()
            .contains(created["api_key"].as_str().expect("key")),
        "no secret in the audit trail"
    );

    let page: Value = app
        .get("/v1/audit/events?limit=2&before_seq=3")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    let seqs: Vec<i64> = page["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|e| e["seq"].as_i64())
        .collect();
    assert_eq!(
        (seqs, page["has_more"].as_bool()),
        (vec![2, 1], Some(false))
    );

    let verified: Value = app
        .get("/v1/audit/verify")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    assert_eq!(verified["valid"], true, "{verified}");
    assert_eq!(verified["checked"], 4);
    assert_eq!(verified["head_hash"], data[0]["hash"]);
    assert!(verified["first_invalid_seq"].is_null());
}

#[actix_web::test]
async fn an_edited_row_makes_verify_false() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    // The edit is the test: verify must report it.
    app.allow_broken_audit_chain(&merchant);
    let other = app.merchant().await;
    let sql = format!(
        "UPDATE audit_events SET action = 'merchant.forgotten' WHERE merchant_id = '{}' AND seq = 1",
        merchant.merchant_id
    );
    app.sql(&sql).await.expect("tamper");
    let verified: Value = app
        .get("/v1/audit/verify")
        .bearer_auth(&merchant.api_key)
        .read_json()
        .await;
    assert_eq!(verified["valid"], false);
    assert_eq!(verified["first_invalid_seq"], 1);
    let untouched: Value = app
        .get("/v1/audit/verify")
        .bearer_auth(&other.api_key)
        .read_json()
        .await;
    assert_eq!(untouched["valid"], true, "chains are per merchant");
}

#[actix_web::test]
async fn audit_needs_its_scope_and_valid_queries() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    for (query, field) in [
        ("limit=0", "limit"),
        ("before_seq=0", "before_seq"),
        ("before_seq=x", "before_seq"),
    ] {
        let response = app
            .get(&format!("/v1/audit/events?{query}"))
            .bearer_auth(&merchant.api_key)
            .send()
            .await
            .expect("req");
        let problem = assert_problem(response, 422, "validation-error").await;
        assert!(problem["errors"][field].is_string(), "{query}");
    }
    let narrow = &app.key_with_scopes(&merchant, &["quotes:read"]).await;
    assert_problem(
        app.get("/v1/audit/verify")
            .bearer_auth(narrow)
            .send()
            .await
            .expect("req"),
        403,
        "insufficient-scope",
    )
    .await;
}

//! A person with a session acts on their own cards; naming anyone else is
//! refused, and another person's card is not found.

use serde_json::json;

use crate::helpers::cards::{json_of, with_cookie};
use crate::helpers::{assert_problem, TestApp};

#[actix_web::test]
async fn a_session_issues_and_manages_its_own_card() {
    let app = TestApp::spawn().await;
    let ada = app.human().await;
    let card = json_of(
        with_cookie(&app, &ada.cookie, "POST", "/v1/cards", None).await,
        201,
    )
    .await;
    assert_eq!(card["user_id"], ada.user_id.as_str());
    // The name on the card comes from the profile.
    assert_eq!(card["cardholder"], "Ada Lovelace");
    let id = card["id"].as_str().expect("id");
    let listed = json_of(
        with_cookie(&app, &ada.cookie, "GET", "/v1/cards", None).await,
        200,
    )
    .await;
    assert_eq!(listed["data"][0]["id"], id);
    let own = format!("/v1/cards?user_id={}", ada.user_id);
    assert_eq!(
        with_cookie(&app, &ada.cookie, "GET", &own, None)
            .await
            .status(),
        200
    );
    assert_eq!(
        json_of(
            with_cookie(
                &app,
                &ada.cookie,
                "POST",
                &format!("/v1/cards/{id}/freeze"),
                None
            )
            .await,
            200
        )
        .await["status"],
        "frozen"
    );
    let renamed = json_of(
        with_cookie(
            &app,
            &ada.cookie,
            "PATCH",
            &format!("/v1/cards/{id}"),
            Some(json!({"display_name": "Daily"})),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(renamed["display_name"], "Daily");
    // Leaving the field out keeps it.
    let kept = json_of(
        with_cookie(
            &app,
            &ada.cookie,
            "PATCH",
            &format!("/v1/cards/{id}"),
            Some(json!({})),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(kept["display_name"], "Daily");

    // A session may not name a user or a cardholder.
    let named = with_cookie(
        &app,
        &ada.cookie,
        "POST",
        "/v1/cards",
        Some(json!({"user_id": ada.user_id, "cardholder": "Someone"})),
    )
    .await;
    let problem = assert_problem(named, 422, "validation-error").await;
    assert!(
        problem["errors"].get("user_id").is_some() && problem["errors"].get("cardholder").is_some(),
        "{problem}"
    );

    // Another person neither sees nor touches Ada's card.
    let bob = app.human().await;
    for (method, path) in [
        ("GET", format!("/v1/cards/{id}")),
        ("POST", format!("/v1/cards/{id}/unfreeze")),
        ("GET", format!("/v1/cards/{id}/events")),
    ] {
        assert_problem(
            with_cookie(&app, &bob.cookie, method, &path, None).await,
            404,
            "not-found",
        )
        .await;
    }
    let peek = with_cookie(&app, &bob.cookie, "GET", &own, None).await;
    assert_problem(peek, 403, "forbidden").await;
    let bobs = json_of(
        with_cookie(&app, &bob.cookie, "GET", "/v1/cards", None).await,
        200,
    )
    .await;
    assert_eq!(bobs["data"], json!([]));
    // Events are empty until the provider reports activity.
    let events = json_of(
        with_cookie(
            &app,
            &ada.cookie,
            "GET",
            &format!("/v1/cards/{id}/events"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(events["data"], json!([]));
    // Without a session at all: 401.
    assert_problem(
        app.get("/v1/cards").send().await.expect("request"),
        401,
        "unauthorized",
    )
    .await;
}

#[actix_web::test]
async fn a_cross_site_card_change_is_refused_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let ada = app.human().await;
    let card = json_of(
        with_cookie(&app, &ada.cookie, "POST", "/v1/cards", None).await,
        201,
    )
    .await;
    let id = card["id"].as_str().expect("id");
    let forged = app
        .post(&format!("/v1/cards/{id}/freeze"))
        .header("cookie", &ada.cookie)
        .header("origin", "https://evil.example")
        .send()
        .await
        .expect("request");
    assert_problem(forged, 403, "csrf-rejected").await;
    let after = json_of(
        with_cookie(&app, &ada.cookie, "GET", &format!("/v1/cards/{id}"), None).await,
        200,
    )
    .await;
    assert_eq!(after["status"], "active");
}

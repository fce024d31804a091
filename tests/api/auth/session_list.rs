//! A person's sessions (decisions §9): listing, revoking one or every
//! other, the idle timeout, and the purge of dead sessions and tokens.

use std::time::Duration;

use serde_json::Value;

use crate::helpers::humans::{session_cookie, PASSWORD};
use crate::helpers::{assert_problem, RequestExt, TestApp};

async fn listed(app: &TestApp, cookie: &str) -> Vec<Value> {
    let body = app
        .get("/v1/auth/sessions")
        .header("cookie", cookie)
        .json_at(200)
        .await;
    body["data"].as_array().expect("data").clone()
}

fn current_id(sessions: &[Value]) -> String {
    let current: Vec<&Value> = sessions.iter().filter(|s| s["current"] == true).collect();
    assert_eq!(current.len(), 1, "{sessions:?}");
    current[0]["id"].as_str().expect("id").to_owned()
}

async fn delete(app: &TestApp, cookie: &str, path: &str) -> reqwest::Response {
    app.delete(path)
        .header("cookie", cookie)
        .send()
        .await
        .expect("request")
}

#[actix_web::test]
async fn sessions_are_listed_and_revoked_one_or_all_others() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let second = session_cookie(&app.login(&human.email, PASSWORD).await).expect("cookie");
    let third = session_cookie(&app.login(&human.email, PASSWORD).await).expect("cookie");

    let sessions = listed(&app, &human.cookie).await;
    assert_eq!(sessions.len(), 3, "{sessions:?}");
    let first_id = current_id(&sessions);
    let second_id = current_id(&listed(&app, &second).await);
    let third_id = current_id(&listed(&app, &third).await);
    let text = serde_json::to_string(&sessions).expect("json");
    for (cookie, id) in [(&human.cookie, &first_id), (&second, &second_id)] {
        assert!(id.starts_with("ses_"), "{id}");
        let token = cookie.trim_start_matches("svc_session=");
        assert!(!text.contains(token), "a token is listed: {text}");
    }
    for session in &sessions {
        for field in ["created_at", "last_seen_at", "expires_at"] {
            assert!(session[field].is_string(), "{session}");
        }
    }

    // Another person cannot see or revoke these sessions.
    let stranger = app.human().await;
    assert_eq!(listed(&app, &stranger.cookie).await.len(), 1);
    let foreign = delete(
        &app,
        &stranger.cookie,
        &format!("/v1/auth/sessions/{second_id}"),
    )
    .await;
    assert_problem(foreign, 404, "not-found").await;
    assert_eq!(app.me(&second).await.status(), 200);

    let revoked = delete(
        &app,
        &human.cookie,
        &format!("/v1/auth/sessions/{second_id}"),
    )
    .await;
    assert_eq!(revoked.status(), 204);
    assert_problem(app.me(&second).await, 401, "unauthorized").await;
    let again = delete(
        &app,
        &human.cookie,
        &format!("/v1/auth/sessions/{second_id}"),
    )
    .await;
    assert_eq!(again.status(), 204, "revoking twice is still 204");
    let unknown = delete(&app, &human.cookie, "/v1/auth/sessions/ses_nope").await;
    assert_problem(unknown, 404, "not-found").await;

    let without = delete(&app, &human.cookie, "/v1/auth/sessions").await;
    assert_problem(without, 422, "validation-error").await;
    assert_eq!(app.me(&third).await.status(), 200);
    let others = delete(&app, &human.cookie, "/v1/auth/sessions?others=true").await;
    assert_eq!(others.status(), 204);
    assert_problem(app.me(&third).await, 401, "unauthorized").await;
    assert_eq!(app.me(&human.cookie).await.status(), 200);
    let left = listed(&app, &human.cookie).await;
    assert_eq!(left.len(), 1);
    assert_eq!(current_id(&left), first_id);
    assert_eq!(listed(&app, &stranger.cookie).await.len(), 1);
    let _ = third_id;

    let actions: Vec<Value> = app
        .audit_events(&human.cookie)
        .await
        .into_iter()
        .map(|e| e["action"].clone())
        .collect();
    assert!(
        actions.contains(&"user.session_revoked".into()),
        "{actions:?}"
    );
    assert!(
        actions.contains(&"user.sessions_revoked".into()),
        "{actions:?}"
    );
}

#[actix_web::test]
async fn a_cross_site_revocation_is_refused() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let second = session_cookie(&app.login(&human.email, PASSWORD).await).expect("cookie");
    let forged = app
        .delete("/v1/auth/sessions?others=true")
        .header("cookie", &human.cookie)
        .header("origin", "https://evil.example")
        .send()
        .await
        .expect("request");
    assert_eq!(forged.status(), 403);
    assert_eq!(app.me(&second).await.status(), 200);
}

/// Moves the session's recorded last use an hour back.
async fn idle_for_an_hour(app: &TestApp, cookie: &str) {
    let id = current_id(&listed(app, cookie).await);
    let past = tern_schema::types::utc_now() - chrono::Duration::hours(1);
    let moved: Result<(), tern_schema::StoreError> = tern_schema::write_tx!(app.state.db, |tx| {
        tern_schema::store::sessions::set_last_seen(tx, &id, past).await
    });
    moved.expect("moved");
}

#[actix_web::test]
async fn an_idle_session_ends_and_a_used_one_does_not() {
    let app = TestApp::spawn_with(|config| config.session_idle_ttl = Duration::from_secs(2)).await;
    let human = app.human().await;
    let used = session_cookie(&app.login(&human.email, PASSWORD).await).expect("cookie");
    // Used every 200 ms for three idle periods: it stays.
    for _ in 0..30 {
        assert_eq!(app.me(&used).await.status(), 200);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Left alone well past the idle timeout and its resolution: it ends.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_problem(app.me(&used).await, 401, "unauthorized").await;
    assert_problem(app.me(&human.cookie).await, 401, "unauthorized").await;
}

#[actix_web::test]
async fn the_default_idle_timeout_ends_a_session_unused_for_an_hour() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let other = session_cookie(&app.login(&human.email, PASSWORD).await).expect("cookie");
    idle_for_an_hour(&app, &other).await;
    assert_problem(app.me(&other).await, 401, "unauthorized").await;
    assert_eq!(listed(&app, &human.cookie).await.len(), 1);
    assert_eq!(app.me(&human.cookie).await.status(), 200);
}

#[actix_web::test]
async fn dead_sessions_and_tokens_are_purged() {
    let app = TestApp::spawn().await;
    let human = app.human().await;
    let idle = session_cookie(&app.login(&human.email, PASSWORD).await).expect("cookie");
    let revoked = session_cookie(&app.login(&human.email, PASSWORD).await).expect("cookie");
    idle_for_an_hour(&app, &idle).await;
    let logout = app
        .post("/v1/auth/logout")
        .header("cookie", &revoked)
        .send()
        .await
        .expect("request");
    assert_eq!(logout.status(), 204);
    // The verification token of the registration, expired.
    app.expire_tokens(&human.user_id).await;

    let purged = tern::auth::purge::purge_once(&app.state)
        .await
        .expect("purged");
    assert!(purged.sessions >= 2, "{purged:?}");
    assert!(purged.tokens >= 1, "{purged:?}");
    let mut pooled = app.state.db.get().await.expect("connection");
    for cookie in [&idle, &revoked] {
        let digest = tern::auth::session::token_digest(cookie.trim_start_matches("svc_session="));
        let found = tern_schema::store::sessions::find_by_token(&mut pooled.tx(), &digest)
            .await
            .expect("query");
        assert!(found.is_none(), "a dead session is left");
    }
    drop(pooled);
    // The live session stays, and purging again finds nothing of it.
    assert_eq!(app.me(&human.cookie).await.status(), 200);
    let again = tern::auth::purge::purge_once(&app.state)
        .await
        .expect("purged");
    assert_eq!(again.sessions, 0, "{again:?}");
}

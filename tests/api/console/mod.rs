//! The operator console over HTTP (decisions §12): off without an operator
//! token, the sign-in and its cookie, refusals of forged cookies and of
//! cross-site or token-less forms; in `pages`, escaping of stored text, the
//! stylesheet, and a replay through the console that a receiver gets. A
//! real browser drives it in `console_browser`.

mod pages;

use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use reqwest::redirect::Policy;
use reqwest::{Client, Response};
use tern::config::RateLimits;
use tern::http::console::auth::{cookie_value, COOKIE_NAME};

use crate::helpers::transfers::{self, id};
use crate::helpers::{TestApp, OPERATOR_TOKEN};

/// The sections every signed-in page shows.
pub(crate) const SECTIONS: [&str; 5] = [
    "id=\"node\"",
    "id=\"actors\"",
    "id=\"stuck\"",
    "id=\"dead-letters\"",
    "id=\"provider-failures\"",
];

/// A client that shows redirects instead of following them.
pub(crate) fn client() -> Client {
    Client::builder()
        .redirect(Policy::none())
        .build()
        .expect("client")
}

pub(crate) fn content_type(response: &Response) -> String {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

pub(crate) async fn get(app: &TestApp, path: &str, cookie: Option<&str>) -> Response {
    let mut request = client().get(app.url(path));
    if let Some(cookie) = cookie {
        request = request.header(COOKIE, format!("{COOKIE_NAME}={cookie}"));
    }
    request.send().await.expect("request")
}

/// POSTs a form; `cookie` is the console cookie's value.
pub(crate) async fn post_form(
    app: &TestApp,
    path: &str,
    cookie: Option<&str>,
    origin: Option<&str>,
    fields: &[(&str, &str)],
) -> Response {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    let mut request = client()
        .post(app.url(path))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body);
    if let Some(cookie) = cookie {
        request = request.header(COOKIE, format!("{COOKIE_NAME}={cookie}"));
    }
    if let Some(origin) = origin {
        request = request.header(ORIGIN, origin);
    }
    request.send().await.expect("request")
}

/// Signs in; answers the cookie's value.
pub(crate) async fn sign_in(app: &TestApp) -> String {
    let response = post_form(
        app,
        "/console/sign-in",
        None,
        None,
        &[("token", OPERATOR_TOKEN)],
    )
    .await;
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()[LOCATION], "/console");
    let set_cookie = response.headers()[SET_COOKIE]
        .to_str()
        .expect("ascii")
        .to_owned();
    for attribute in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/console",
        "Secure",
        "Max-Age=43200",
    ] {
        assert!(
            set_cookie.contains(attribute),
            "{attribute} in {set_cookie}"
        );
    }
    assert!(!set_cookie.contains(OPERATOR_TOKEN), "{set_cookie}");
    let value = set_cookie
        .strip_prefix(&format!("{COOKIE_NAME}="))
        .and_then(|rest| rest.split(';').next())
        .expect("the console cookie")
        .to_owned();
    assert!(!value.is_empty());
    value
}

/// The signed-in page's HTML.
pub(crate) async fn page(app: &TestApp, cookie: &str) -> String {
    let response = get(app, "/console", Some(cookie)).await;
    assert_eq!(response.status(), 200);
    response.text().await.expect("html")
}

/// The CSRF token of the page's forms.
pub(crate) fn csrf_of(html: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker).expect("a form with a CSRF token") + marker.len();
    let end = html[start..].find('"').expect("end of the value");
    html[start..start + end].to_owned()
}

fn is_sign_in_form(html: &str) -> bool {
    html.contains("action=\"/console/sign-in\"") && !SECTIONS.iter().any(|s| html.contains(s))
}

#[actix_web::test]
async fn the_console_is_off_without_an_operator_token() {
    let app = TestApp::spawn_with(|config| config.operator_token = None).await;
    for response in [
        get(&app, "/console", None).await,
        post_form(
            &app,
            "/console/sign-in",
            None,
            None,
            &[("token", OPERATOR_TOKEN)],
        )
        .await,
    ] {
        assert_eq!(response.status(), 503);
        assert_eq!(content_type(&response), "text/html; charset=utf-8");
        let html = response.text().await.expect("html");
        assert!(html.contains("TERN_OPERATOR_TOKEN"), "{html}");
        assert!(!html.contains("<form"), "{html}");
    }
}

#[actix_web::test]
async fn signing_in_sets_a_cookie_without_the_token_and_shows_the_sections() {
    let app = TestApp::spawn().await;
    let response = get(&app, "/console", None).await;
    assert_eq!(response.status(), 200);
    assert_eq!(content_type(&response), "text/html; charset=utf-8");
    let html = response.text().await.expect("html");
    assert!(is_sign_in_form(&html), "{html}");
    assert!(
        !html.contains("http-equiv=\"refresh\""),
        "no refresh on the sign-in page"
    );

    let wrong = post_form(
        &app,
        "/console/sign-in",
        None,
        None,
        &[("token", "not-the-token")],
    )
    .await;
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().get(SET_COOKIE).is_none());
    assert_eq!(content_type(&wrong), "text/html; charset=utf-8");
    let html = wrong.text().await.expect("html");
    assert!(
        is_sign_in_form(&html) && html.contains("not the operator token"),
        "{html}"
    );

    let cookie = sign_in(&app).await;
    let html = page(&app, &cookie).await;
    for section in SECTIONS {
        assert!(html.contains(section), "{section} in {html}");
    }
    assert!(html.contains("http-equiv=\"refresh\""));
    assert!(html.contains("webhook_endpoint"), "the actor kinds: {html}");
    // The nodes table is PostgreSQL's; this node is in it.
    let postgres = app.state.db.backend() == tern_schema::Backend::Postgres;
    assert_eq!(html.contains("<tr class=\"node\">"), postgres, "{html}");
    assert!(
        !html.contains("href=\"http") && !html.contains("src="),
        "nothing loaded from elsewhere: {html}"
    );

    // Scripts may read it with the token; a wrong one is told so.
    let bearer = client()
        .get(app.url("/console"))
        .bearer_auth(OPERATOR_TOKEN)
        .send()
        .await
        .expect("request");
    assert_eq!(bearer.status(), 200);
    assert!(bearer.text().await.expect("html").contains("id=\"actors\""));
    let wrong = client()
        .get(app.url("/console"))
        .bearer_auth("wrong-token")
        .send()
        .await
        .expect("request");
    assert_eq!(wrong.status(), 401);

    // Signing out needs the form's CSRF token, and clears the cookie.
    let refused = post_form(&app, "/console/sign-out", Some(&cookie), None, &[]).await;
    assert_eq!(refused.status(), 403);
    let out = post_form(
        &app,
        "/console/sign-out",
        Some(&cookie),
        None,
        &[("csrf", &csrf_of(&html))],
    )
    .await;
    assert_eq!(out.status(), 303);
    let cleared = out.headers()[SET_COOKIE]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        cleared.starts_with(&format!("{COOKIE_NAME}=;")) && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
}

#[actix_web::test]
async fn forged_expired_and_foreign_cookies_are_refused() {
    let app = TestApp::spawn().await;
    let now = chrono::Utc::now().timestamp();
    let valid = cookie_value(OPERATOR_TOKEN, now + 60);
    let (expiry, signature) = valid.split_once('.').expect("two parts");
    for forged in [
        "1.abc".to_owned(),
        cookie_value(OPERATOR_TOKEN, now - 1),
        cookie_value("another-operator-token-000000", now + 60),
        format!("{}.{signature}", expiry.parse::<i64>().expect("n") + 100),
        OPERATOR_TOKEN.to_owned(),
    ] {
        let response = get(&app, "/console", Some(&forged)).await;
        assert_eq!(response.status(), 200);
        assert!(
            is_sign_in_form(&response.text().await.expect("html")),
            "{forged}"
        );
        let replay = post_form(
            &app,
            "/console/replay",
            Some(&forged),
            None,
            &[("csrf", "x")],
        )
        .await;
        assert_eq!(replay.status(), 403, "{forged}");
    }
    assert!(page(&app, &valid).await.contains("id=\"actors\""));
}

#[actix_web::test]
async fn a_replay_needs_the_cookie_the_csrf_token_and_this_sites_origin() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let transfer = transfers::create(&app, &merchant, "pm_card_visa").await;
    let transfer_id = id(&transfer);
    let cookie = sign_in(&app).await;
    let csrf = csrf_of(&page(&app, &cookie).await);
    let fields = [
        ("csrf", csrf.as_str()),
        ("merchant_id", merchant.merchant_id.as_str()),
        ("transfer_id", transfer_id.as_str()),
    ];
    let without_csrf = &fields[1..];
    let with_other_csrf = [("csrf", "00"), fields[1], fields[2]];
    for (cookie, origin, fields) in [
        (Some(cookie.as_str()), None, without_csrf),
        (Some(cookie.as_str()), None, &with_other_csrf[..]),
        (
            Some(cookie.as_str()),
            Some("https://evil.example"),
            &fields[..],
        ),
        (None, None, &fields[..]),
    ] {
        let response = post_form(&app, "/console/replay", cookie, origin, fields).await;
        assert_eq!(response.status(), 403, "{cookie:?} {origin:?} {fields:?}");
        assert_eq!(content_type(&response), "text/html; charset=utf-8");
    }
    // This site's own origin, by the Host it was sent to: accepted. The
    // merchant has no endpoint, and the page says so.
    let host = app.address.trim_start_matches("http://");
    let origin = format!("http://{host}");
    let response = post_form(
        &app,
        "/console/replay",
        Some(&cookie),
        Some(&origin),
        &fields,
    )
    .await;
    assert_eq!(response.status(), 303);
    let location = response.headers()[LOCATION]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        location.starts_with("/console?notice=no_endpoint"),
        "{location}"
    );
    let html = page(&app, &cookie).await;
    assert!(
        !html.contains("no webhook endpoint"),
        "the notice shows once"
    );
    let shown = get(&app, &location, Some(&cookie))
        .await
        .text()
        .await
        .expect("html");
    assert!(
        shown.contains(&format!(
            "transfer {transfer_id}: its merchant has no webhook endpoint"
        )),
        "{shown}"
    );
}

#[actix_web::test]
async fn sign_in_attempts_count_against_the_login_limit() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limits = RateLimits::parse("login=2/1m").expect("valid limits");
    })
    .await;
    for _ in 0..2 {
        let wrong = post_form(&app, "/console/sign-in", None, None, &[("token", "wrong")]).await;
        assert_eq!(wrong.status(), 401);
    }
    let limited = post_form(
        &app,
        "/console/sign-in",
        None,
        None,
        &[("token", OPERATOR_TOKEN)],
    )
    .await;
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().contains_key("retry-after"));
    assert!(limited.headers().get(SET_COOKIE).is_none());
    assert_eq!(content_type(&limited), "text/html; charset=utf-8");
    let html = limited.text().await.expect("html");
    assert!(html.contains("Too many sign-in attempts"), "{html}");
    // Guessing with a bearer instead draws on the same bucket.
    let bearer = client()
        .get(app.url("/console"))
        .bearer_auth("wrong-token")
        .send()
        .await
        .expect("request");
    assert_eq!(bearer.status(), 429);
}

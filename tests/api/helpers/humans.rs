//! Human users: registration and sign-in through the API, session cookies,
//! and the comparisons the auth tests share.

use std::time::{Duration, Instant};

use reqwest::Response;
use serde_json::{json, Value};
use tern_schema::models::UserRow;
use tern_schema::vocabulary::{MerchantId, UserId};

use crate::helpers::{RequestExt, TestApp};

pub const PASSWORD: &str = "correct horse battery";

/// A registered person and their session.
pub struct Human {
    pub user_id: String,
    pub merchant_id: MerchantId,
    pub email: String,
    /// `svc_session=<token>`, ready for a Cookie header.
    pub cookie: String,
}

pub fn unique_email() -> String {
    format!("u{}@example.com", uuid::Uuid::new_v4().simple())
}

impl TestApp {
    pub async fn register_human(&self, body: Value) -> Response {
        self.post("/v1/auth/register")
            .json(&body)
            .send()
            .await
            .expect("request")
    }

    /// Registers a fresh person named Ada Lovelace with [`PASSWORD`].
    pub async fn human(&self) -> Human {
        let email = unique_email();
        let response = self
            .register_human(json!({"name": "Ada Lovelace", "email": email, "password": PASSWORD}))
            .await;
        assert_eq!(response.status(), 201);
        let cookie = session_cookie(&response).expect("session cookie");
        let body: Value = response.json().await.expect("json");
        Human {
            user_id: body["user_id"].as_str().expect("user_id").to_owned(),
            merchant_id: MerchantId::new(body["merchant_id"].as_str().expect("merchant_id")),
            email,
            cookie,
        }
    }

    pub async fn login(&self, email: &str, password: &str) -> Response {
        self.post("/v1/auth/login")
            .json(&json!({"email": email, "password": password}))
            .send()
            .await
            .expect("request")
    }

    pub async fn me(&self, cookie: &str) -> Response {
        self.get("/v1/auth/me")
            .header("cookie", cookie)
            .send()
            .await
            .expect("request")
    }

    /// The audit events the session's merchant sees, newest page first.
    pub async fn audit_events(&self, cookie: &str) -> Vec<Value> {
        let body: Value = self
            .get("/v1/audit/events")
            .header("cookie", cookie)
            .read_json()
            .await;
        body["data"].as_array().expect("data").clone()
    }

    /// The stored user with this email, straight from the database.
    pub async fn stored_user(&self, email: &str) -> Option<UserRow> {
        let mut pooled = self.state.db.get().await.expect("connection");
        let mut tx = pooled.tx();
        tern_schema::store::users::find_by_email(&mut tx, email)
            .await
            .expect("query")
    }

    /// The texts of the mails in the outbox addressed to `to`, waiting until
    /// there are at least `count`.
    pub async fn outbox_mails(&self, to: &str, count: usize) -> Vec<String> {
        let dir = self.state.config.data_dir.join("outbox");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut mails: Vec<(String, String)> = std::fs::read_dir(&dir)
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .filter(|e| e.path().extension().is_some_and(|x| x == "eml"))
                        .filter_map(|e| {
                            let raw = std::fs::read_to_string(e.path()).ok()?;
                            Some((e.file_name().to_string_lossy().into_owned(), raw))
                        })
                        .collect()
                })
                .unwrap_or_default();
            mails.sort();
            let texts: Vec<String> = mails
                .into_iter()
                .filter(|(_, raw)| {
                    crate::smtp_sink::header_in(raw, "To").is_some_and(|h| h.contains(to))
                })
                .map(|(_, raw)| crate::smtp_sink::eml_text(&raw))
                .collect();
            if texts.len() >= count || Instant::now() > deadline {
                return texts;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The token of the `nth` (from 1) mail to `to`.
    pub async fn mailed_token(&self, to: &str, nth: usize) -> String {
        let mails = self.outbox_mails(to, nth).await;
        let text = mails.get(nth - 1).expect("the mail arrived");
        crate::smtp_sink::token_in(text).expect("a token in the mail")
    }

    /// Moves every mailed token of the user into the past.
    pub async fn expire_tokens(&self, user_id: &str) {
        let past = tern_schema::types::utc_now() - chrono::Duration::seconds(1);
        let done: Result<usize, tern_schema::StoreError> =
            tern_schema::write_tx!(self.state.db, |tx| {
                tern_schema::store::email_tokens::expire_all_for_user(
                    tx,
                    &UserId::new(user_id),
                    past,
                )
                .await
            });
        assert!(done.expect("tokens expired") > 0);
    }
}

/// Signs up a person through the Tern at `base` (a real process): their
/// session cookie and user id.
pub async fn sign_up_at(client: &reqwest::Client, base: &str) -> (String, String) {
    let registered = client
        .post(format!("{base}/v1/auth/register"))
        .json(&json!({"name": "Ada Lovelace", "email": unique_email(), "password": PASSWORD}))
        .send()
        .await
        .expect("register");
    assert_eq!(registered.status(), 201);
    let cookie = session_cookie(&registered).expect("session cookie");
    let user: Value = registered.json().await.expect("json");
    let user_id = user["user_id"].as_str().expect("user_id").to_owned();
    (cookie, user_id)
}

/// `svc_session=<value>` from the response's Set-Cookie, when it sets one.
pub fn session_cookie(response: &Response) -> Option<String> {
    set_cookie(response)
        .and_then(|header| header.split(';').next().map(str::to_owned))
        .filter(|pair| pair.starts_with("svc_session=") && pair.len() > "svc_session=".len())
}

/// The whole Set-Cookie header for svc_session.
pub fn set_cookie(response: &Response) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("svc_session="))
        .map(str::to_owned)
}

/// The cookie's attributes, lowercased: `httponly`, `samesite=lax`...
pub fn attributes(set_cookie: &str) -> Vec<String> {
    set_cookie
        .split(';')
        .skip(1)
        .map(|a| a.trim().to_lowercase())
        .collect()
}

/// A problem body without what differs per request.
pub fn comparable(mut problem: Value) -> Value {
    if let Some(object) = problem.as_object_mut() {
        object.remove("request_id");
        object.remove("instance");
    }
    problem
}

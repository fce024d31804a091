//! A suspended or disabled merchant's cards move no money and reveal
//! nothing (decisions §1a): issue, unfreeze, limits, replace, secure
//! details and wallet provisioning answer 403, freeze and close stay open,
//! and authorizations are declined with `merchant_inactive`; a disabled
//! user's are declined with `user_disabled`. No decline holds funds. The
//! statuses are written to the database as the CLI or another node writes
//! them, so each change must show within a second through the caches.

use std::time::Instant;

use reqwest::Response;
use serde_json::{json, Value};
use tern_schema::store::users;
use tern_schema::types::{utc_now, MerchantStatus};
use tern_schema::vocabulary::{UserId, UserStatus};
use tern_schema::{write_tx, StoreError};

use crate::helpers::cards::{authorize, get_card, json_of, operate, send};
use crate::helpers::cards::{balance, funded_card};
use crate::helpers::{Merchant, TestApp};
use crate::merchant_status::{assert_inactive, set_status, TAKES_EFFECT_WITHIN};

/// What a balance shows: (balance, available, hold).
fn figures(balance: &Value) -> (Option<i64>, Option<i64>, Option<i64>) {
    (
        balance["balance_minor"].as_i64(),
        balance["available_minor"].as_i64(),
        balance["hold_minor"].as_i64(),
    )
}

/// Authorizes `amount_minor` until the decision is `want` (`None`
/// approved, or declined with that reason), within a second of `since`;
/// only the other answer may come first. Answers the decision and the
/// total approved before it.
async fn authorize_until(
    app: &TestApp,
    card: &str,
    amount_minor: i64,
    want: Option<&str>,
    since: Instant,
) -> (Value, i64) {
    let mut held_minor = 0;
    loop {
        let decision = authorize(app, card, amount_minor).await;
        let got = match decision["approved"].as_bool() {
            Some(true) => None,
            _ => decision["reason"].as_str(),
        };
        if got == want {
            return (decision, held_minor);
        }
        assert!(
            since.elapsed() < TAKES_EFFECT_WITHIN,
            "still {decision} after {:?}",
            since.elapsed()
        );
        match want {
            // Approvals until the decline shows; they hold funds.
            Some(_) => {
                assert_eq!(decision["approved"], true, "{decision}");
                held_minor += amount_minor;
            }
            None => assert_eq!(decision["approved"], false, "{decision}"),
        }
        actix_web::rt::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Every operation that could move money or reveal the card, in order;
/// each must answer the 403 naming `status`. The card must be frozen, so
/// that an unfreeze refused for any other reason would be a 200.
async fn assert_card_operations_closed(
    app: &TestApp,
    merchant: &Merchant,
    card: &str,
    user: &str,
    status: MerchantStatus,
) {
    let key = &merchant.api_key;
    let issue = json!({"user_id": user, "program_id": "SVC_VIRTUAL_EUR", "type": "physical"});
    let refused: [(&str, String, Option<Value>); 7] = [
        ("POST", "/v1/cards".to_owned(), Some(issue)),
        ("POST", format!("/v1/cards/{card}/unfreeze"), None),
        (
            "PATCH",
            format!("/v1/cards/{card}/limits"),
            Some(json!({"daily_spend_minor": 50000, "monthly_spend_minor": 500000})),
        ),
        (
            "POST",
            format!("/v1/cards/{card}/replace"),
            Some(json!({"reason": "lost"})),
        ),
        ("POST", format!("/v1/cards/{card}/secure-details"), None),
        ("POST", format!("/v1/cards/{card}/wallet/apple_pay"), None),
        ("POST", format!("/v1/cards/{card}/wallet/google_pay"), None),
    ];
    for (method, path, body) in refused {
        assert_inactive(send(app, key, method, &path, body).await, status).await;
    }
    for path in [
        format!("/v1/cards/{card}"),
        format!("/v1/cards/{card}/balance"),
        format!("/v1/cards/{card}/limits"),
        format!("/v1/cards/{card}/transactions"),
        format!("/v1/cards/{card}/events"),
        format!("/v1/cards/{card}/wallet/status"),
        format!("/v1/cards?user_id={user}"),
    ] {
        let read = send(app, key, "GET", &path, None).await;
        assert_eq!(read.status(), 200, "{path} stays readable");
    }
}

/// Polls `attempt` until it answers `want`, within a second of `since`.
async fn answers<F, Fut>(want: u16, since: Instant, mut attempt: F) -> Response
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    loop {
        let response = attempt().await;
        if response.status() == want {
            return response;
        }
        assert!(
            since.elapsed() < TAKES_EFFECT_WITHIN,
            "still {} after {:?}",
            response.status(),
            since.elapsed()
        );
        actix_web::rt::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Waits, within a second of `since`, for the merchant's key to be refused
/// with the 403 naming `status`. The probe is an issue for a user that does
/// not exist: refused while inactive, 404 while active, so it changes
/// nothing either way.
async fn until_refused(app: &TestApp, merchant: &Merchant, status: MerchantStatus, since: Instant) {
    let probe = json!({"user_id": uuid::Uuid::new_v4().to_string()});
    let refused = answers(403, since, || {
        send(
            app,
            &merchant.api_key,
            "POST",
            "/v1/cards",
            Some(probe.clone()),
        )
    })
    .await;
    assert_inactive(refused, status).await;
}

#[actix_web::test]
async fn a_suspended_merchants_cards_are_declined_and_locked_until_it_is_activated() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "100.00").await;
    let user = get_card(&app, &merchant, &card).await["user_id"]
        .as_str()
        .expect("user_id")
        .to_owned();
    // An approval first, so the owners' standing is cached as active.
    assert_eq!(authorize(&app, &card, 1_000).await["approved"], true);

    let suspended = MerchantStatus::Suspended;
    set_status(&app, &merchant, suspended).await;
    let since = Instant::now();
    // Small amounts: the approvals of the last cached half second must not
    // run the balance down to another decline.
    let (decision, approved_meanwhile) =
        authorize_until(&app, &card, 100, Some("merchant_inactive"), since).await;
    assert_eq!(decision["approved"], false, "{decision}");
    let held = 1_000 + approved_meanwhile;
    let before = balance(&app, &merchant, &card).await;
    assert_eq!(
        figures(&before),
        (Some(10_000), Some(10_000 - held), Some(held)),
        "the decline held nothing: {before}"
    );
    let again = authorize(&app, &card, 2_500).await;
    assert_eq!(again["approved"], false);
    assert_eq!(again["reason"], "merchant_inactive");
    assert_eq!(
        figures(&balance(&app, &merchant, &card).await),
        figures(&before)
    );
    let recorded = send(
        &app,
        &merchant.api_key,
        "GET",
        &format!("/v1/cards/{card}/transactions"),
        None,
    )
    .await;
    let recorded = json_of(recorded, 200).await;
    assert_eq!(recorded["data"][0]["status"], "declined", "{recorded}");
    assert_eq!(recorded["data"][0]["kind"], "authorization");

    // The key cache catches up within the second too; freezing stays open.
    until_refused(&app, &merchant, suspended, since).await;
    let frozen = operate(&app, &merchant, &card, "freeze").await;
    assert_eq!(json_of(frozen, 200).await["status"], "frozen");
    assert_card_operations_closed(&app, &merchant, &card, &user, suspended).await;
    assert_eq!(get_card(&app, &merchant, &card).await["status"], "frozen");

    set_status(&app, &merchant, MerchantStatus::Active).await;
    let since = Instant::now();
    let unfrozen = answers(200, since, || operate(&app, &merchant, &card, "unfreeze")).await;
    assert_eq!(json_of(unfrozen, 200).await["status"], "active");
    let (approved, _) = authorize_until(&app, &card, 2_500, None, since).await;
    assert_eq!(approved["reason"], Value::Null);
    assert_eq!(
        balance(&app, &merchant, &card).await["hold_minor"],
        held + 2_500
    );
}

#[actix_web::test]
async fn a_disabled_merchant_may_still_freeze_and_close_its_cards() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "100.00").await;
    let user = get_card(&app, &merchant, &card).await["user_id"]
        .as_str()
        .expect("user_id")
        .to_owned();
    let disabled = MerchantStatus::Disabled;
    set_status(&app, &merchant, disabled).await;
    until_refused(&app, &merchant, disabled, Instant::now()).await;
    let decision = authorize(&app, &card, 2_500).await;
    assert_eq!(decision["approved"], false, "{decision}");
    assert_eq!(decision["reason"], "merchant_inactive");
    assert_eq!(
        figures(&balance(&app, &merchant, &card).await),
        (Some(10_000), Some(10_000), Some(0))
    );

    let frozen = operate(&app, &merchant, &card, "freeze").await;
    assert_eq!(json_of(frozen, 200).await["status"], "frozen");
    assert_card_operations_closed(&app, &merchant, &card, &user, disabled).await;
    let closed = operate(&app, &merchant, &card, "close").await;
    assert_eq!(json_of(closed, 200).await["status"], "closed");
}

/// Writes the user's status as `tern user disable|enable` does.
async fn set_user_status(app: &TestApp, user_id: &str, status: UserStatus) {
    let email = {
        let mut pooled = app.state.db.get().await.expect("connection");
        let found = users::find(&mut pooled.tx(), &UserId::new(user_id)).await;
        found.expect("read").expect("the user").email
    };
    let changed: Result<_, StoreError> = write_tx!(app.state.db, |tx| {
        users::set_status_by_email(tx, &email, status, utc_now()).await
    });
    assert!(changed.expect("status change").is_some());
}

#[actix_web::test]
async fn a_disabled_users_cards_are_declined_until_the_user_is_enabled() {
    let app = TestApp::spawn().await;
    let (merchant, card) = funded_card(&app, "100.00").await;
    let user = get_card(&app, &merchant, &card).await["user_id"]
        .as_str()
        .expect("user_id")
        .to_owned();
    set_user_status(&app, &user, UserStatus::Disabled).await;
    let decision = authorize(&app, &card, 2_500).await;
    assert_eq!(decision["approved"], false, "{decision}");
    assert_eq!(decision["reason"], "user_disabled");
    assert_eq!(
        figures(&balance(&app, &merchant, &card).await),
        (Some(10_000), Some(10_000), Some(0)),
        "no hold"
    );

    set_user_status(&app, &user, UserStatus::Active).await;
    let since = Instant::now();
    let (approved, _) = authorize_until(&app, &card, 2_500, None, since).await;
    assert_eq!(approved["approved"], true);
    assert_eq!(balance(&app, &merchant, &card).await["hold_minor"], 2_500);
}

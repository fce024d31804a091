//! The teardown guard itself (helpers::invariants): a ledger or audit
//! chain broken behind the store's back is found, named, and fails the
//! test that left it, unless that test opted out of exactly that check.

use std::panic::{catch_unwind, AssertUnwindSafe};

use tern_actors::runtime::{KindFigures, RuntimeFigures, StuckEntity};
use tern_schema::vocabulary::MerchantId;

use crate::helpers::invariants::{check_stuck, Broken};
use crate::helpers::{Merchant, TestApp};

/// Raises the merchant's USD funding account's posted debits behind the
/// store: the account goes below zero and USD no longer sums to zero.
async fn overdraw(app: &TestApp, merchant_id: &MerchantId) {
    app.sql(&format!(
        "UPDATE ledger_accounts SET posted_debits_minor = 500 \
         WHERE merchant_id = '{merchant_id}' AND currency = 'USD'"
    ))
    .await
    .expect("tamper");
}

/// Edits the merchant's first audit event behind the store: its chain no
/// longer verifies from seq 1.
async fn tamper_audit(app: &TestApp, merchant_id: &MerchantId) {
    app.sql(&format!(
        "UPDATE audit_events SET action = 'merchant.forgotten' \
         WHERE merchant_id = '{merchant_id}' AND seq = 1"
    ))
    .await
    .expect("tamper");
}

/// What the guard reports for a chain [`tamper_audit`] broke.
fn tampered_chain(merchant: &Merchant) -> Broken {
    Broken::AuditChain {
        merchant_id: merchant.merchant_id.clone(),
        first_invalid_seq: Some(1),
    }
}

#[actix_web::test]
async fn a_balance_corrupted_in_the_database_is_found() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    assert_eq!(
        app.broken_invariants(),
        Vec::new(),
        "a new merchant is sound"
    );
    overdraw(&app, &merchant.merchant_id).await;

    let broken = app.broken_invariants();
    assert!(
        broken
            .iter()
            .any(|b| matches!(b, Broken::NegativeFunding(v) if v.contains("below zero"))),
        "{broken:?}"
    );
    assert!(
        broken
            .iter()
            .any(|b| matches!(b, Broken::LedgerZeroSum(v) if v.starts_with("USD: posted balances sum to -500"))),
        "{broken:?}"
    );
    assert!(
        !broken
            .iter()
            .any(|b| matches!(b, Broken::AuditChain { .. })),
        "only the ledger broke: {broken:?}"
    );
    // Broken on purpose above; teardown would fail the test otherwise.
    app.allow_broken_ledger();
    assert_eq!(app.broken_invariants(), Vec::new());
}

/// An edited chain is found and named. The opt-out names a merchant: a
/// chain broken beside the one a test breaks on purpose is still reported,
/// and still fails teardown.
#[actix_web::test]
async fn an_audit_event_edited_in_the_database_is_found() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    let other = app.merchant().await;
    tamper_audit(&app, &merchant.merchant_id).await;

    assert_eq!(
        app.broken_invariants(),
        vec![tampered_chain(&merchant)],
        "only the edited chain, not {}'s",
        other.merchant_id
    );
    // Broken on purpose above; teardown would fail the test otherwise.
    app.allow_broken_audit_chain(&merchant);
    assert_eq!(app.broken_invariants(), Vec::new());

    tamper_audit(&app, &other.merchant_id).await;
    assert_eq!(
        app.broken_invariants(),
        vec![tampered_chain(&other)],
        "the allowed chain stays quiet, the other is reported"
    );
    let dropped = catch_unwind(AssertUnwindSafe(move || drop(app)));
    let panic = dropped.expect_err("teardown must fail");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains(&format!("audit chain of merchant {}", other.merchant_id))
            && !message.contains(merchant.merchant_id.as_str()),
        "{message}"
    );
}

/// Teardown is where the guard bites: dropping the app panics, naming
/// the invariant, though the test never asked.
#[actix_web::test]
async fn teardown_fails_the_test_that_broke_the_ledger() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    overdraw(&app, &merchant.merchant_id).await;

    let dropped = catch_unwind(AssertUnwindSafe(move || drop(app)));
    let panic = dropped.expect_err("teardown must fail");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("no funding account below zero")
            && message.contains("per-currency zero-sum"),
        "{message}"
    );
}

#[test]
fn a_stuck_entity_is_named_with_its_kind_and_reason() {
    let mut figures = RuntimeFigures::default();
    figures
        .kinds
        .insert("transfer".into(), KindFigures::default());
    figures.kinds.insert(
        "settlement".into(),
        KindFigures {
            stuck_count: 1,
            stuck_entities: vec![StuckEntity {
                id: "stl_1".into(),
                reason: "the provider refused for good".into(),
                age_ms: 10,
            }],
            ..KindFigures::default()
        },
    );
    let broken = check_stuck(&figures);
    assert_eq!(broken.len(), 1, "in flight is not stuck: {broken:?}");
    assert!(
        broken[0]
            .to_string()
            .contains("1 stuck settlement entit(y/ies): stl_1 (the provider refused for good)"),
        "{}",
        broken[0]
    );
}

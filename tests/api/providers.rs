//! The sandbox provider simulator, driven only through Tern's HTTP provider
//! adapters (and the control client), on its own port-0 listener. No
//! database: these tests exercise the protocol both sides speak.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use tern::sandbox::{serve, SandboxConfig};
use tern_actors::adapters::http::control::ExecutionFilter;
use tern_actors::adapters::http::wire::FaultSpec;
use tern_actors::adapters::http::{
    HttpCardAcquirer, HttpCardPush, HttpCustodian, HttpProviderConfig, SandboxControl,
};
use tern_actors::adapters::{install_crypto_provider, verify_signature};
use tern_actors::ports::{
    Asset, CardAcquirer, CardPush, ChargeOutcome, ChargeRequest, Custodian, Network, PayoutOutcome,
    PayoutRequest, ProviderError, PushOutcome, PushRequest, RefundOutcome, RefundRequest,
    RequestKeys, ReversalOutcome, ReversalRequest,
};

use crate::helpers::sandbox_signature;
use tern_schema::money::MinorUnits;

/// The adapters' request timeout in these tests; the simulator's
/// `timeout_after_success` hangs longer than this.
const ADAPTER_TIMEOUT: Duration = Duration::from_millis(800);
const HANG: Duration = Duration::from_secs(3);
const SLOW: Duration = Duration::from_millis(300);
const PENDING: Duration = Duration::from_millis(300);
const WEBHOOK_SECRET: &str = "sandbox-test-webhook-secret";
const TRON_WALLET: &str = "TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLSE";
const EVM_WALLET: &str = "0x52908400098527886E0F7030069857D2E4169EE7";

struct Sim {
    base: String,
    acquirer: HttpCardAcquirer,
    push: HttpCardPush,
    custodian: HttpCustodian,
    control: SandboxControl,
}

/// Deliveries as (signature header, body).
type Deliveries = Arc<Mutex<Vec<(String, String)>>>;

/// Records what Tern's webhook endpoint would receive.
#[derive(Clone, Default)]
struct Receiver {
    seen: Deliveries,
}

impl Receiver {
    /// Starts on port 0; answers the base URL.
    fn start(&self) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind receiver");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = web::Data::new(self.seen.clone());
        let server = HttpServer::new(move || {
            App::new().app_data(seen.clone()).route(
                "/v1/webhooks/sandbox",
                web::post().to(
                    |seen: web::Data<Deliveries>, request: HttpRequest, body: String| async move {
                        let signature = sandbox_signature(&request);
                        seen.lock().expect("lock").push((signature, body));
                        HttpResponse::Ok().finish()
                    },
                ),
            )
        })
        .workers(1)
        .disable_signals()
        .listen(listener)
        .expect("listen")
        .run();
        actix_web::rt::spawn(server);
        base
    }

    /// Waits for the first webhook of `kind`; answers its body.
    async fn wait_for(&self, kind: &str) -> serde_json::Value {
        let started = Instant::now();
        loop {
            let found = self
                .seen
                .lock()
                .expect("lock")
                .iter()
                .find_map(|(sig, body)| {
                    let value: serde_json::Value = serde_json::from_str(body).expect("json");
                    (value["type"] == kind).then(|| (sig.clone(), body.clone(), value))
                });
            if let Some((signature, body, value)) = found {
                let now = chrono::Utc::now().timestamp();
                verify_signature(
                    WEBHOOK_SECRET.as_bytes(),
                    &signature,
                    body.as_bytes(),
                    now,
                    Duration::from_secs(300),
                )
                .expect("a valid signature");
                return value;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "no {kind} webhook"
            );
            actix_web::rt::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn start(callback: Option<String>) -> Sim {
    install_crypto_provider();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind sandbox");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let mut config = SandboxConfig::new(callback, WEBHOOK_SECRET.into());
    config.timeout_hang = HANG;
    config.slow_delay = SLOW;
    config.pending_delay = PENDING;
    config.webhook_retry_schedule = vec![Duration::from_millis(100)];
    actix_web::rt::spawn(serve(listener, config).expect("sandbox starts"));
    let adapter = HttpProviderConfig::new(&base).with_request_timeout(ADAPTER_TIMEOUT);
    Sim {
        acquirer: HttpCardAcquirer::new(&adapter).expect("acquirer"),
        push: HttpCardPush::new(&adapter).expect("push"),
        custodian: HttpCustodian::new(&adapter).expect("custodian"),
        control: SandboxControl::new(&adapter).expect("control"),
        base,
    }
}

fn keys() -> RequestKeys {
    RequestKeys {
        idempotency_key: format!("prov_{}", uuid::Uuid::new_v4()),
        settlement_key: uuid::Uuid::new_v4().to_string(),
    }
}

fn charge(payment_method: &str, off_session: bool) -> ChargeRequest {
    ChargeRequest {
        keys: keys(),
        amount_minor: MinorUnits::new(1_000),
        currency: "USD".into(),
        payment_method: payment_method.into(),
        off_session,
    }
}

fn push(destination: &str) -> PushRequest {
    PushRequest {
        keys: keys(),
        amount_minor: MinorUnits::new(2_500),
        currency: "USD".into(),
        destination: destination.into(),
        recipient_name: "Ada Lovelace".into(),
    }
}

fn payout(network: Network, wallet: &str) -> PayoutRequest {
    PayoutRequest {
        keys: keys(),
        network,
        wallet: wallet.into(),
        asset: Asset::Usdt,
        amount_minor: MinorUnits::new(9_081_245),
    }
}

fn fault(target: &str, field: &str, value: &str, mode: &str, count: Option<u32>) -> FaultSpec {
    FaultSpec {
        target: target.into(),
        matches: [(field.to_owned(), value.to_owned())].into_iter().collect(),
        mode: mode.into(),
        count,
    }
}

impl Sim {
    async fn arm(&self, target: &str, field: &str, value: &str, mode: &str, count: Option<u32>) {
        self.control
            .arm_fault(&fault(target, field, value, mode, count))
            .await
            .expect("arm");
    }

    async fn executions_of(&self, key: &str) -> usize {
        self.control
            .executions(ExecutionFilter {
                key: Some(key),
                settlement_key: None,
            })
            .await
            .expect("executions")
            .len()
    }
}

fn is_unknown_timeout(result: &ProviderError) -> bool {
    matches!(
        result,
        ProviderError::Unknown {
            timed_out: true,
            ..
        }
    )
}

#[actix_web::test]
async fn every_payment_method_token_has_its_outcome() {
    let sim = start(None).await;
    let cases: [(&str, bool, Option<&str>); 8] = [
        ("pm_card_visa", true, None),
        ("pm_card_mastercard", false, None),
        (
            "pm_card_threeDSecureRequired",
            true,
            Some("authentication_required"),
        ),
        ("pm_card_threeDSecureRequired", false, Some("challenge")),
        ("pm_card_chargeDeclined", true, Some("card_declined")),
        (
            "pm_card_chargeDeclinedInsufficientFunds",
            true,
            Some("insufficient_funds"),
        ),
        ("pm_card_amex", true, Some("invalid_payment_method")),
        ("tok_visa", false, Some("invalid_payment_method")),
    ];
    for (token, off_session, expected) in cases {
        let request = charge(token, off_session);
        let outcome = sim.acquirer.charge(&request).await.expect("charge");
        match (expected, &outcome) {
            (None, ChargeOutcome::Succeeded { charge_id }) => assert!(charge_id.starts_with("ch_")),
            (
                Some("challenge"),
                ChargeOutcome::RequiresAction {
                    client_secret,
                    next_action_type,
                    redirect_url,
                    ..
                },
            ) => {
                assert_eq!(next_action_type, "redirect_to_url");
                assert!(!client_secret.is_empty());
                assert!(redirect_url
                    .as_deref()
                    .is_some_and(|u| u.ends_with(client_secret.as_str())));
            }
            (Some(code), ChargeOutcome::Declined { code: got, .. }) => {
                assert_eq!(got, code, "{token}")
            }
            (expected, outcome) => {
                panic!("{token} off_session={off_session}: expected {expected:?}, got {outcome:?}")
            }
        }
        // Every answer is one execution, found again by lookup.
        let key = &request.keys.idempotency_key;
        assert_eq!(sim.executions_of(key).await, 1);
        assert_eq!(
            sim.acquirer.lookup_charge(key).await.expect("lookup"),
            Some(outcome)
        );
    }
    assert_eq!(
        sim.acquirer
            .lookup_charge("never-sent")
            .await
            .expect("lookup"),
        None
    );
}

#[actix_web::test]
async fn a_repeated_key_replays_and_a_conflicting_reuse_is_refused() {
    let sim = start(None).await;
    let request = charge("pm_card_visa", true);
    let first = sim.acquirer.charge(&request).await.expect("first");
    let second = sim.acquirer.charge(&request).await.expect("replay");
    assert_eq!(first, second);
    assert_eq!(sim.executions_of(&request.keys.idempotency_key).await, 1);

    let mut changed = request.clone();
    changed.amount_minor = MinorUnits::new(changed.amount_minor.get() + 1);
    match sim.acquirer.charge(&changed).await {
        Err(ProviderError::Permanent {
            status: 409, code, ..
        }) => {
            assert_eq!(code, "idempotency_key_reused")
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let mut elsewhere = push("tok_a");
    sim.push.push(&elsewhere).await.expect("push");
    elsewhere.destination = "tok_b".into();
    assert!(matches!(
        sim.push.push(&elsewhere).await,
        Err(ProviderError::Permanent { status: 409, .. })
    ));
    assert_eq!(sim.executions_of(&request.keys.idempotency_key).await, 1);
    assert_eq!(sim.executions_of(&elsewhere.keys.idempotency_key).await, 1);
}

#[actix_web::test]
async fn a_3ds_challenge_is_served_and_its_outcome_arrives_by_signed_webhook() {
    let receiver = Receiver::default();
    let sim = start(Some(receiver.start())).await;
    let request = charge("pm_card_threeDSecureRequired", false);
    let ChargeOutcome::RequiresAction {
        charge_id,
        redirect_url,
        client_secret,
        ..
    } = sim.acquirer.charge(&request).await.expect("charge")
    else {
        panic!("expected a challenge");
    };
    let client = reqwest::Client::new();
    let page = client
        .get(redirect_url.expect("redirect url"))
        .send()
        .await
        .expect("page");
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-type"]
        .to_str()
        .expect("ct")
        .starts_with("text/html"));
    let html = page.text().await.expect("html");
    for needle in [
        "Approve",
        "Decline",
        &format!("/3ds/{client_secret}/approve"),
        &format!("/3ds/{client_secret}/decline"),
    ] {
        assert!(html.contains(needle), "page lacks {needle}");
    }
    let approved = client
        .post(format!("{}/3ds/{client_secret}/approve", sim.base))
        .send()
        .await
        .expect("approve");
    assert_eq!(approved.status(), 200);
    let event = receiver.wait_for("payment.succeeded").await;
    assert!(event["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("evt_")));
    assert_eq!(event["data"]["charge_id"], charge_id.as_str());
    assert_eq!(
        event["data"]["settlement_key"],
        request.keys.settlement_key.as_str()
    );
    assert_eq!(
        event["data"]["idempotency_key"],
        request.keys.idempotency_key.as_str()
    );
    assert_eq!(
        sim.acquirer
            .lookup_charge(&request.keys.idempotency_key)
            .await
            .expect("lookup"),
        Some(ChargeOutcome::Succeeded { charge_id })
    );
    // The opposite decision afterwards is refused.
    let late = client
        .post(format!("{}/3ds/{client_secret}/decline", sim.base))
        .send()
        .await
        .expect("decline");
    assert_eq!(late.status(), 409);

    let request = charge("pm_card_threeDSecureRequired", false);
    let ChargeOutcome::RequiresAction { client_secret, .. } =
        sim.acquirer.charge(&request).await.expect("charge")
    else {
        panic!("expected a challenge");
    };
    let declined = client
        .post(format!("{}/3ds/{client_secret}/decline", sim.base))
        .send()
        .await
        .expect("decline");
    assert_eq!(declined.status(), 200);
    let event = receiver.wait_for("payment.failed").await;
    assert_eq!(event["data"]["decline_code"], "authentication_failed");
    assert!(matches!(
        sim.acquirer.lookup_charge(&request.keys.idempotency_key).await.expect("lookup"),
        Some(ChargeOutcome::Declined { code, .. }) if code == "authentication_failed"
    ));
    let missing = client
        .get(format!("{}/3ds/nope", sim.base))
        .send()
        .await
        .expect("get");
    assert_eq!(missing.status(), 404);
}

#[actix_web::test]
async fn refunds_succeed_decline_and_complete_later_when_pending() {
    let receiver = Receiver::default();
    let sim = start(Some(receiver.start())).await;
    let paid = charge("pm_card_visa", true);
    let ChargeOutcome::Succeeded { charge_id } = sim.acquirer.charge(&paid).await.expect("charge")
    else {
        panic!("expected success");
    };
    let refund = |amount_minor| RefundRequest {
        keys: keys(),
        charge_id: charge_id.clone(),
        amount_minor,
        currency: "USD".into(),
    };
    let first = refund(MinorUnits::new(400));
    let outcome = sim.acquirer.refund(&first).await.expect("refund");
    assert!(
        matches!(&outcome, RefundOutcome::Succeeded { refund_id } if refund_id.starts_with("re_"))
    );
    assert_eq!(
        sim.acquirer
            .lookup_refund(&first.keys.idempotency_key)
            .await
            .expect("lookup"),
        Some(outcome)
    );
    assert!(matches!(
        sim.acquirer.refund(&refund(MinorUnits::new(601))).await.expect("refund"),
        RefundOutcome::Declined { code, .. } if code == "amount_too_large"
    ));

    sim.arm(
        "acquirer",
        "payment_method",
        "pm_card_visa",
        "reversal_pending",
        Some(1),
    )
    .await;
    let pending = refund(MinorUnits::new(600));
    assert!(matches!(
        sim.acquirer.refund(&pending).await.expect("refund"),
        RefundOutcome::Pending { .. }
    ));
    let event = receiver.wait_for("refund.succeeded").await;
    assert_eq!(
        event["data"]["idempotency_key"],
        pending.keys.idempotency_key.as_str()
    );
    assert!(matches!(
        sim.acquirer
            .lookup_refund(&pending.keys.idempotency_key)
            .await
            .expect("lookup"),
        Some(RefundOutcome::Succeeded { .. })
    ));
    let mut unknown_charge = refund(MinorUnits::new(1));
    unknown_charge.charge_id = "ch_missing".into();
    assert!(matches!(
        sim.acquirer.refund(&unknown_charge).await.expect("refund"),
        RefundOutcome::Declined { code, .. } if code == "charge_not_found"
    ));
}

#[actix_web::test]
async fn timeout_after_success_is_unknown_and_inquiry_finds_the_one_execution() {
    let sim = start(None).await;
    for target in ["acquirer", "card_push", "custodian"] {
        sim.control
            .arm_fault(&FaultSpec {
                target: target.into(),
                matches: Default::default(),
                mode: "timeout_after_success".into(),
                count: Some(1),
            })
            .await
            .expect("arm");
    }
    let (charged, pushed, paid) = (
        charge("pm_card_visa", true),
        push("tok_timeout"),
        payout(Network::Polygon, EVM_WALLET),
    );
    let started = Instant::now();
    let (a, b, c) = futures_util::join!(
        sim.acquirer.charge(&charged),
        sim.push.push(&pushed),
        sim.custodian.payout(&paid)
    );
    assert!(
        started.elapsed() < HANG,
        "the adapters gave up at their timeout"
    );
    for err in [
        a.expect_err("charge"),
        b.expect_err("push"),
        c.expect_err("payout"),
    ] {
        assert!(is_unknown_timeout(&err) && err.needs_inquiry(), "{err:?}");
    }
    assert!(matches!(
        sim.acquirer
            .lookup_charge(&charged.keys.idempotency_key)
            .await
            .expect("lookup"),
        Some(ChargeOutcome::Succeeded { .. })
    ));
    assert!(matches!(
        sim.push
            .inquiry(&pushed.keys.idempotency_key)
            .await
            .expect("inquiry"),
        Some(PushOutcome::Approved(_))
    ));
    assert!(matches!(
        sim.custodian
            .payout_status(Network::Polygon, &paid.keys.idempotency_key)
            .await
            .expect("status"),
        Some(PayoutOutcome::Confirmed { .. })
    ));
    // Resending under the same key answers the stored result, executing nothing.
    assert!(matches!(
        sim.acquirer.charge(&charged).await.expect("resend"),
        ChargeOutcome::Succeeded { .. }
    ));
    assert!(matches!(
        sim.push.push(&pushed).await.expect("resend"),
        PushOutcome::Approved(_)
    ));
    for key in [
        &charged.keys.idempotency_key,
        &pushed.keys.idempotency_key,
        &paid.keys.idempotency_key,
    ] {
        assert_eq!(sim.executions_of(key).await, 1, "{key}");
    }
}

#[actix_web::test]
async fn transient_executes_nothing_and_a_retry_with_the_same_key_executes_once() {
    let sim = start(None).await;
    let charged = charge("pm_card_mastercard", true);
    let pushed = push("tok_transient");
    let paid = payout(Network::Tron, TRON_WALLET);
    sim.arm(
        "acquirer",
        "payment_method",
        "pm_card_mastercard",
        "transient",
        Some(1),
    )
    .await;
    sim.arm(
        "card_push",
        "destination",
        "tok_transient",
        "transient",
        Some(1),
    )
    .await;
    sim.arm("custodian", "wallet", TRON_WALLET, "transient", Some(1))
        .await;

    let err = sim.acquirer.charge(&charged).await.expect_err("503");
    assert!(
        matches!(err, ProviderError::Transient { .. }) && !err.needs_inquiry(),
        "{err:?}"
    );
    let err = sim.push.push(&pushed).await.expect_err("91");
    assert!(
        matches!(&err, ProviderError::Transient { reason } if reason.contains("91")),
        "{err:?}"
    );
    let err = sim.custodian.payout(&paid).await.expect_err("503");
    assert!(matches!(err, ProviderError::Transient { .. }), "{err:?}");
    assert_eq!(
        sim.acquirer
            .lookup_charge(&charged.keys.idempotency_key)
            .await
            .expect("lookup"),
        None
    );
    assert_eq!(
        sim.push
            .inquiry(&pushed.keys.idempotency_key)
            .await
            .expect("inquiry"),
        None
    );
    assert_eq!(
        sim.custodian
            .payout_status(Network::Tron, &paid.keys.idempotency_key)
            .await
            .expect("status"),
        None
    );
    for key in [
        &charged.keys.idempotency_key,
        &pushed.keys.idempotency_key,
        &paid.keys.idempotency_key,
    ] {
        assert_eq!(sim.executions_of(key).await, 0);
    }
    // The count is spent: the retry executes, once.
    assert!(matches!(
        sim.acquirer.charge(&charged).await.expect("retry"),
        ChargeOutcome::Succeeded { .. }
    ));
    assert!(matches!(
        sim.push.push(&pushed).await.expect("retry"),
        PushOutcome::Approved(_)
    ));
    assert!(matches!(
        sim.custodian.payout(&paid).await.expect("retry"),
        PayoutOutcome::Confirmed { .. }
    ));
    for key in [
        &charged.keys.idempotency_key,
        &pushed.keys.idempotency_key,
        &paid.keys.idempotency_key,
    ] {
        assert_eq!(sim.executions_of(key).await, 1);
    }
}

#[actix_web::test]
async fn decline_fail_and_slow_faults() {
    let sim = start(None).await;
    sim.arm(
        "acquirer",
        "payment_method",
        "pm_card_visa",
        "decline",
        Some(1),
    )
    .await;
    sim.arm("card_push", "destination", "tok_declined", "decline", None)
        .await;
    sim.arm("custodian", "wallet", EVM_WALLET, "decline", Some(1))
        .await;
    assert!(
        matches!(sim.acquirer.charge(&charge("pm_card_visa", true)).await.expect("charge"), ChargeOutcome::Declined { code, .. } if code == "card_declined")
    );
    assert!(
        matches!(sim.push.push(&push("tok_declined")).await.expect("push"), PushOutcome::Declined { action_code, .. } if action_code == "05")
    );
    assert!(matches!(
        sim.custodian
            .payout(&payout(Network::Bsc, EVM_WALLET))
            .await
            .expect("payout"),
        PayoutOutcome::Rejected { .. }
    ));
    sim.control.clear_faults().await.expect("clear");
    assert!(matches!(
        sim.push.push(&push("tok_declined")).await.expect("push"),
        PushOutcome::Approved(_)
    ));

    sim.arm(
        "acquirer",
        "payment_method",
        "pm_card_visa",
        "fail",
        Some(1),
    )
    .await;
    let failed = charge("pm_card_visa", true);
    let err = sim.acquirer.charge(&failed).await.expect_err("fail");
    assert!(
        matches!(&err, ProviderError::Permanent { status: 422, .. }) && !err.is_retryable(),
        "{err:?}"
    );
    assert_eq!(sim.executions_of(&failed.keys.idempotency_key).await, 0);

    sim.arm("card_push", "destination", "tok_slow", "slow", Some(1))
        .await;
    let started = Instant::now();
    assert!(matches!(
        sim.push.push(&push("tok_slow")).await.expect("slow push"),
        PushOutcome::Approved(_)
    ));
    assert!(started.elapsed() >= SLOW);

    let bad = sim
        .control
        .arm_fault(&fault("acquirer", "colour", "red", "decline", None))
        .await;
    assert!(
        matches!(bad, Err(ProviderError::Permanent { status: 422, .. })),
        "{bad:?}"
    );
}

#[actix_web::test]
async fn executions_filter_by_key_and_settlement_key() {
    let sim = start(None).await;
    let first = charge("pm_card_visa", true);
    let mut second = push("tok_filter");
    second.keys.settlement_key = first.keys.settlement_key.clone();
    let other = charge("pm_card_visa", true);
    sim.acquirer.charge(&first).await.expect("charge");
    sim.push.push(&second).await.expect("push");
    sim.acquirer.charge(&other).await.expect("charge");

    let by_settlement = sim
        .control
        .executions(ExecutionFilter {
            key: None,
            settlement_key: Some(&first.keys.settlement_key),
        })
        .await
        .expect("list");
    let seen: Vec<(&str, &str, &str)> = by_settlement
        .iter()
        .map(|e| (e.key.as_str(), e.target.as_str(), e.operation.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (first.keys.idempotency_key.as_str(), "acquirer", "charge"),
            (second.keys.idempotency_key.as_str(), "card_push", "push")
        ]
    );
    let by_key = sim
        .control
        .executions(ExecutionFilter {
            key: Some(&other.keys.idempotency_key),
            settlement_key: None,
        })
        .await
        .expect("list");
    assert_eq!(by_key.len(), 1);
    assert_eq!(by_key[0].settlement_key, other.keys.settlement_key);
    let both = sim
        .control
        .executions(ExecutionFilter {
            key: Some(&other.keys.idempotency_key),
            settlement_key: Some(&first.keys.settlement_key),
        })
        .await
        .expect("list");
    assert!(both.is_empty());
    assert_eq!(
        sim.control
            .executions(ExecutionFilter::default())
            .await
            .expect("all")
            .len(),
        3
    );
}

#[actix_web::test]
async fn card_push_fields_reversals_and_inquiry() {
    let sim = start(None).await;
    let request = push("tok_4242");
    let PushOutcome::Approved(approval) = sim.push.push(&request).await.expect("push") else {
        panic!("expected an approval");
    };
    let digits = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_digit());
    assert!(digits(&approval.stan, 6), "{approval:?}");
    assert!(
        digits(&approval.retrieval_reference_number, 12),
        "{approval:?}"
    );
    assert!(digits(&approval.transaction_identifier, 15), "{approval:?}");
    assert!(
        approval.approval_code.len() == 6
            && approval
                .approval_code
                .bytes()
                .all(|b| b.is_ascii_alphanumeric())
    );
    assert_eq!(approval.action_code, "00");
    assert_eq!(
        sim.push
            .inquiry(&request.keys.idempotency_key)
            .await
            .expect("inquiry"),
        Some(PushOutcome::Approved(approval.clone()))
    );
    assert!(
        matches!(sim.push.push(&push("card_4242")).await.expect("push"), PushOutcome::Declined { action_code, .. } if action_code == "14")
    );

    let reversal = |id: &str, amount_minor| ReversalRequest {
        keys: keys(),
        original_transaction_identifier: id.into(),
        amount_minor,
        currency: "USD".into(),
    };
    let first = reversal(&approval.transaction_identifier, MinorUnits::new(2_500));
    let approved = sim.push.reverse(&first).await.expect("reverse");
    assert!(
        matches!(&approved, ReversalOutcome::Approved { action_code, approval_code } if action_code == "00" && approval_code.len() == 6)
    );
    assert_eq!(
        sim.push
            .reversal_inquiry(&first.keys.idempotency_key)
            .await
            .expect("inquiry"),
        Some(approved)
    );
    assert!(
        matches!(sim.push.reverse(&reversal(&approval.transaction_identifier, MinorUnits::new(2_500))).await.expect("again"), ReversalOutcome::Declined { action_code, .. } if action_code == "94")
    );
    assert!(
        matches!(sim.push.reverse(&reversal("000000000000000", MinorUnits::new(1))).await.expect("unknown"), ReversalOutcome::Declined { action_code, .. } if action_code == "25")
    );

    let PushOutcome::Approved(second) = sim.push.push(&push("tok_pending")).await.expect("push")
    else {
        panic!("expected an approval");
    };
    sim.arm(
        "card_push",
        "destination",
        "tok_pending",
        "reversal_pending",
        Some(1),
    )
    .await;
    let pending = reversal(&second.transaction_identifier, MinorUnits::new(2_500));
    assert_eq!(
        sim.push.reverse(&pending).await.expect("reverse"),
        ReversalOutcome::Pending
    );
    actix_web::rt::time::sleep(PENDING + Duration::from_millis(200)).await;
    assert!(matches!(
        sim.push
            .reversal_inquiry(&pending.keys.idempotency_key)
            .await
            .expect("inquiry"),
        Some(ReversalOutcome::Approved { .. })
    ));
    assert_eq!(sim.push.inquiry("never-sent").await.expect("inquiry"), None);
}

#[actix_web::test]
async fn custodian_pays_out_per_network() {
    let sim = start(None).await;
    for network in Network::ALL {
        let wallet = if network.is_evm() {
            EVM_WALLET
        } else {
            TRON_WALLET
        };
        let request = payout(network, wallet);
        let outcome = sim.custodian.payout(&request).await.expect("payout");
        let PayoutOutcome::Confirmed { payout_id, tx_hash } = &outcome else {
            panic!("{network:?}: {outcome:?}");
        };
        assert!(payout_id.starts_with("po_"));
        let hex = if network.is_evm() {
            tx_hash.strip_prefix("0x").expect("0x")
        } else {
            tx_hash.as_str()
        };
        assert!(
            hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
            "{tx_hash}"
        );
        let key = &request.keys.idempotency_key;
        assert_eq!(
            sim.custodian
                .payout_status(network, key)
                .await
                .expect("status"),
            Some(outcome)
        );
        // The key belongs to this network's custodian only.
        let elsewhere = Network::ALL
            .into_iter()
            .find(|n| *n != network)
            .expect("another");
        assert_eq!(
            sim.custodian
                .payout_status(elsewhere, key)
                .await
                .expect("status"),
            None
        );
        // A wallet of the wrong shape for the network is rejected.
        let wrong = if network.is_evm() {
            TRON_WALLET
        } else {
            EVM_WALLET
        };
        assert!(
            matches!(sim.custodian.payout(&payout(network, wrong)).await.expect("payout"), PayoutOutcome::Rejected { reason } if reason.contains("invalid_wallet"))
        );
    }
    sim.arm(
        "custodian",
        "destination",
        &format!("ethereum:{EVM_WALLET}"),
        "reversal_pending",
        Some(1),
    )
    .await;
    let pending = payout(Network::Ethereum, EVM_WALLET);
    assert!(matches!(
        sim.custodian.payout(&pending).await.expect("payout"),
        PayoutOutcome::Pending { .. }
    ));
    actix_web::rt::time::sleep(PENDING + Duration::from_millis(200)).await;
    assert!(matches!(
        sim.custodian
            .payout_status(Network::Ethereum, &pending.keys.idempotency_key)
            .await
            .expect("status"),
        Some(PayoutOutcome::Confirmed { .. })
    ));
}

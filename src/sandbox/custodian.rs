//! The simulated custodian: stablecoin payouts per network, and their status
//! by idempotency key. Payouts confirm at once unless a `reversal_pending`
//! fault holds them pending for a while.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use tern_actors::adapters::http::wire::{self, PayoutStatus};
use tern_actors::ports::{Asset, Network};

use super::store::{FaultMode, Operation, Record, RecordKey, Stored, Target};
use super::{
    admit, answer_after, error, idempotency_key, not_found, simulated_failure, unavailable,
    Admission, KeyQuery, Sandbox, SandboxError,
};

/// Length of a tron address: `T` and 33 base58 characters.
const TRON_ADDRESS_CHARS: usize = 34;
/// Length of an EVM address: `0x` and 40 hex digits.
const EVM_ADDRESS_CHARS: usize = 42;

pub(super) fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/custodian/{network}/payouts", web::post().to(payout))
        .route("/custodian/{network}/payouts/status", web::get().to(status));
}

/// Each network keeps its own key space, like separate custodial wallets.
fn at(network: Network, key: &str) -> RecordKey {
    RecordKey {
        target: Target::Custodian,
        operation: Operation::Payout,
        scope: network.as_str(),
        key: key.to_owned(),
    }
}

fn network(path: &str) -> Result<Network, SandboxError> {
    Network::parse(path).ok_or_else(|| {
        SandboxError::new(StatusCode::NOT_FOUND, "unknown_network", "no such network")
    })
}

/// The shape check a custodian does before broadcasting (no checksum: the
/// sandbox has no chain to lose funds on).
fn wallet_valid(network: Network, wallet: &str) -> bool {
    const BASE58: &str = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    if network.is_evm() {
        wallet.len() == EVM_ADDRESS_CHARS
            && wallet
                .strip_prefix("0x")
                .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
    } else {
        wallet.len() == TRON_ADDRESS_CHARS
            && wallet.starts_with('T')
            && wallet.chars().all(|c| BASE58.contains(c))
    }
}

fn stored_answer(record: &Record) -> HttpResponse {
    match &record.stored {
        Stored::Payout(payout) => HttpResponse::Ok().json(payout),
        _ => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "record of another kind",
        ),
    }
}

fn tx_hash(sandbox: &Sandbox, network: Network, key: &str) -> String {
    let hash = sandbox
        .ids
        .hex64("tx_hash", &format!("{}:{key}", network.as_str()));
    if network.is_evm() {
        format!("0x{hash}")
    } else {
        hash
    }
}

#[tracing::instrument(skip_all, fields(key))]
async fn payout(
    sandbox: web::Data<Sandbox>,
    request: HttpRequest,
    path: web::Path<String>,
    body: web::Json<wire::PayoutRequest>,
) -> Result<HttpResponse, SandboxError> {
    let network = network(&path)?;
    let key = idempotency_key(&request)?;
    tracing::Span::current().record("key", key.as_str());
    let body = body.into_inner();
    if body.amount_minor <= 0 || Asset::parse(&body.asset).is_none() {
        return Err(SandboxError::new(
            StatusCode::BAD_REQUEST,
            "invalid_payout",
            "amount_minor must be positive and asset USDT or USDC",
        ));
    }
    let outcome = execute_payout(&sandbox, network, &key, body);
    Ok(answer_after(&sandbox.config, outcome).await)
}

/// Runs under the lock with no await, so checking the key, executing and
/// storing the result are one atomic step.
fn execute_payout(
    sandbox: &web::Data<Sandbox>,
    network: Network,
    key: &str,
    body: wire::PayoutRequest,
) -> (HttpResponse, Option<FaultMode>) {
    let record_at = at(network, key);
    let mut store = sandbox.lock();
    let fingerprint = match admit(&mut store, &record_at, &body, stored_answer) {
        Admission::New(fingerprint) => fingerprint,
        Admission::Answer(response) => return (response, None),
    };
    let destination = format!("{}:{}", network.as_str(), body.wallet);
    let fields = [
        ("wallet", body.wallet.as_str()),
        ("destination", destination.as_str()),
        ("settlement_key", body.metadata.settlement_key.as_str()),
    ];
    let fault = store.take_fault(Target::Custodian, Operation::Payout, &fields);
    match fault {
        Some(FaultMode::Transient) => return (unavailable("simulated transient failure"), None),
        Some(FaultMode::Fail) => return (simulated_failure(), None),
        _ => {}
    }
    let mut payout = wire::Payout {
        id: sandbox.ids.id("po_", network.as_str(), key),
        status: PayoutStatus::Confirmed,
        network: network.as_str().into(),
        asset: body.asset.clone(),
        amount_minor: body.amount_minor,
        tx_hash: None,
        reason: None,
    };
    if fault == Some(FaultMode::Decline) {
        payout.status = PayoutStatus::Rejected;
        payout.reason = Some("rejected by the custodian's compliance checks".into());
    } else if !wallet_valid(network, &body.wallet) {
        payout.status = PayoutStatus::Rejected;
        payout.reason = Some(format!("invalid_wallet for {}", network.as_str()));
    } else if fault == Some(FaultMode::ReversalPending) {
        payout.status = PayoutStatus::Pending;
        confirm_later(sandbox.clone(), network, record_at.clone());
    } else {
        payout.tx_hash = Some(tx_hash(sandbox, network, key));
    }
    let response = HttpResponse::Ok().json(&payout);
    let record = Record {
        fingerprint,
        settlement_key: body.metadata.settlement_key,
        stored: Stored::Payout(payout),
    };
    store.insert(record_at, record, chrono::Utc::now());
    (response, fault)
}

/// A pending payout confirms after the configured delay; the caller learns
/// it by status query.
fn confirm_later(sandbox: web::Data<Sandbox>, network: Network, record_at: RecordKey) {
    actix_web::rt::spawn(async move {
        actix_web::rt::time::sleep(sandbox.config.pending_delay).await;
        let hash = tx_hash(&sandbox, network, &record_at.key);
        let mut store = sandbox.lock();
        if let Some(Record {
            stored: Stored::Payout(payout),
            ..
        }) = store.get_mut(&record_at)
        {
            payout.status = PayoutStatus::Confirmed;
            payout.tx_hash = Some(hash);
        }
    });
}

async fn status(
    sandbox: web::Data<Sandbox>,
    path: web::Path<String>,
    query: web::Query<KeyQuery>,
) -> Result<HttpResponse, SandboxError> {
    let network = network(&path)?;
    let store = sandbox.lock();
    Ok(match store.get(&at(network, &query.idempotency_key)) {
        Some(record) => stored_answer(record),
        None => not_found(),
    })
}

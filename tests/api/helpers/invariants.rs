//! What must hold whenever a test's Tern stops, whatever the test did:
//! checked on teardown (see `TestApp`'s and the process harnesses' `Drop`),
//! so that a test which forgets to check the ledger still guards the money.
//!
//! - the ledger: every per-currency sum of balances is zero and no funding
//!   account is below zero (decisions §6), with the rest of what
//!   `tern ledger check` verifies;
//! - every merchant's audit chain verifies from its first event
//!   (`tern audit verify`);
//! - no entity is stuck, in the runtime's own sense (work stopped on a
//!   failure that will not pass, or in flight past `stuck_after`): work
//!   merely in flight when the test ends is fine.
//!
//! Rust has no async `Drop`: the database checks run on a thread of their
//! own, with a runtime and a connection pool of their own, and the caller
//! panics with what they found.

use std::time::Duration;

use tern_actors::runtime::RuntimeFigures;
use tern_schema::vocabulary::MerchantId;
use tern_schema::{audit, ledger, Db};

/// Longest a node's /health/actors may take to answer on teardown.
const FIGURES_WAIT_MAX: Duration = Duration::from_secs(5);

/// The invariants a test may break on purpose, each with a comment at the
/// call that says why. Everything else is still checked.
#[derive(Clone, Debug, Default)]
pub struct Exemptions {
    /// The merchants whose audit events the test edits or deletes to see
    /// them detected; every other chain is still verified.
    pub broken_audit_chains: Vec<MerchantId>,
    /// The test writes ledger rows or balances by hand to see them refused
    /// or detected.
    pub broken_ledger: bool,
}

/// One broken invariant, named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Broken {
    /// A per-currency sum of balances is not zero.
    LedgerZeroSum(String),
    /// A funding account is below zero.
    NegativeFunding(String),
    /// Anything else `tern ledger check` reports: an unbalanced entry, a
    /// resolution unlike its hold, stored balances unlike their lines.
    Ledger(String),
    AuditChain {
        merchant_id: MerchantId,
        first_invalid_seq: Option<i64>,
    },
    Stuck {
        kind: String,
        count: u64,
        listed: String,
    },
    /// The check itself could not run.
    Unchecked(String),
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Broken::LedgerZeroSum(violation) => {
                write!(f, "per-currency zero-sum of the ledger: {violation}")
            }
            Broken::NegativeFunding(violation) => {
                write!(f, "no funding account below zero: {violation}")
            }
            Broken::Ledger(violation) => write!(f, "ledger consistency: {violation}"),
            Broken::AuditChain {
                merchant_id,
                first_invalid_seq,
            } => write!(
                f,
                "audit chain of merchant {merchant_id} broken at seq {first_invalid_seq:?}"
            ),
            Broken::Stuck {
                kind,
                count,
                listed,
            } => write!(f, "{count} stuck {kind} entit(y/ies): {listed}"),
            Broken::Unchecked(why) => write!(f, "invariants could not be checked: {why}"),
        }
    }
}

/// The ledger and audit invariants of the database at `database_url`, read
/// through a fresh pool; empty when all hold.
pub async fn check_database(database_url: &str, exempt: Exemptions) -> Vec<Broken> {
    let db = match Db::connect(database_url).await {
        Ok(db) => db,
        Err(error) => return vec![Broken::Unchecked(format!("connecting: {error}"))],
    };
    let mut broken = Vec::new();
    if !exempt.broken_ledger {
        broken.extend(check_ledger(&db).await);
    }
    broken.extend(check_audit_chains(&db, &exempt.broken_audit_chains).await);
    db.close();
    broken
}

async fn check_ledger(db: &Db) -> Vec<Broken> {
    let checked = async {
        let mut pooled = db.get().await?;
        let report = ledger::check(&mut pooled.tx()).await?;
        Ok::<_, Box<dyn std::error::Error>>(report)
    };
    match checked.await {
        Ok(report) => report.violations.into_iter().map(classify).collect(),
        Err(error) => vec![Broken::Unchecked(format!("ledger check: {error}"))],
    }
}

/// Sorts a `tern ledger check` violation under the invariant it breaks,
/// by the wording of `schema/src/ledger/check.rs`.
fn classify(violation: String) -> Broken {
    if violation.contains(": posted balances sum to ")
        || violation.contains(" differ from pending credits ")
    {
        Broken::LedgerZeroSum(violation)
    } else if violation.starts_with("funding account") {
        Broken::NegativeFunding(violation)
    } else {
        Broken::Ledger(violation)
    }
}

/// Every chain but the `exempt` merchants', verified as `tern audit verify`
/// does.
async fn check_audit_chains(db: &Db, exempt: &[MerchantId]) -> Vec<Broken> {
    let checked = async {
        let mut pooled = db.get().await?;
        let tx = &mut pooled.tx();
        let mut merchants = audit::all_chains(tx).await?;
        merchants.retain(|merchant_id| !exempt.contains(merchant_id));
        audit::broken_chains(tx, &merchants).await
    };
    match checked.await {
        Ok(broken) => broken
            .into_iter()
            .map(|(merchant_id, verification)| Broken::AuditChain {
                merchant_id,
                first_invalid_seq: verification.first_invalid_seq,
            })
            .collect(),
        Err(error) => vec![Broken::Unchecked(format!("audit verify: {error}"))],
    }
}

/// The stuck entities of a runtime's figures, one per kind that has any.
pub fn check_stuck(figures: &RuntimeFigures) -> Vec<Broken> {
    figures
        .kinds
        .iter()
        .filter(|(_, kind)| kind.stuck_count > 0)
        .map(|(name, kind)| Broken::Stuck {
            kind: name.clone(),
            count: kind.stuck_count,
            listed: kind
                .stuck_entities
                .iter()
                .map(|entity| format!("{} ({})", entity.id, entity.reason))
                .collect::<Vec<_>>()
                .join(", "),
        })
        .collect()
}

/// The stuck counts a running node reports at `base`/health/actors. A node
/// that does not answer (killed, paused) has no runtime to judge: nothing.
async fn check_stuck_over_http(client: &reqwest::Client, base: &str) -> Vec<Broken> {
    let answered = client
        .get(format!("{base}/health/actors"))
        .timeout(FIGURES_WAIT_MAX)
        .send()
        .await;
    let Ok(response) = answered else {
        return Vec::new();
    };
    let Ok(figures) = response.json::<serde_json::Value>().await else {
        return Vec::new();
    };
    let kinds = figures["kinds"].as_object().cloned().unwrap_or_default();
    kinds
        .into_iter()
        .filter_map(|(kind, figures)| {
            let count = figures["stuck_count"].as_u64().filter(|count| *count > 0)?;
            Some(Broken::Stuck {
                kind,
                count,
                listed: format!("see {base}/health/actors with the operator token"),
            })
        })
        .collect()
}

/// Runs `check` on a thread with a runtime of its own (a `Drop` may run
/// inside a runtime, which cannot be blocked on) and answers what it found.
pub fn run_apart<F, Fut>(check: F) -> Vec<Broken>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Vec<Broken>>,
{
    let joined = std::thread::spawn(move || {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(check()),
            Err(error) => vec![Broken::Unchecked(format!("a runtime: {error}"))],
        }
    })
    .join();
    joined.unwrap_or_else(|_| vec![Broken::Unchecked("the check panicked".into())])
}

/// The database checks and, for each running process at `bases`, its stuck
/// entities: what the real-process harnesses check when dropped.
pub fn check_processes(database_url: &str, bases: Vec<String>, exempt: Exemptions) -> Vec<Broken> {
    let url = database_url.to_owned();
    run_apart(move || async move {
        let client = reqwest::Client::new();
        let mut broken = Vec::new();
        for base in &bases {
            broken.extend(check_stuck_over_http(&client, base).await);
        }
        broken.extend(check_database(&url, exempt).await);
        broken
    })
}

/// Panics, naming every broken invariant, unless the thread is already
/// panicking (a second panic would abort and hide the test's own failure).
pub fn assert_held(what: &str, broken: &[Broken]) {
    if broken.is_empty() || std::thread::panicking() {
        return;
    }
    let listed: Vec<String> = broken.iter().map(|b| format!("  - {b}")).collect();
    panic!(
        "an invariant broke by the end of the test ({what}):\n{}",
        listed.join("\n")
    );
}

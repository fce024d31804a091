//! The `tern` command line.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tern_schema::audit::{self, AuditActor, AuditRecord};
use tern_schema::store::{merchants, transfers, users};
use tern_schema::types::utc_now;
use tern_schema::types::MerchantStatus;
use tern_schema::vocabulary::{MerchantId, TransferId, UserStatus};
use tern_schema::{ledger, migrate, write_tx, Db, StoreError};

use crate::config::Config;
use crate::startup::Application;

#[derive(Parser)]
#[command(name = "tern", version, about = "Tern: a payment settlement engine")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API (the default), with the sandbox simulator unless TERN_SANDBOX_BIND=off.
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Print the aggregated OpenAPI 3.0 document, or write every served document to a folder.
    Openapi {
        /// Write `openapi.json` and `<context>.json` here instead of printing.
        #[arg(long)]
        out_dir: Option<std::path::PathBuf>,
    },
    /// Change a merchant's status (operators' tool; takes effect within one second).
    Merchant {
        #[command(subcommand)]
        action: MerchantAction,
    },
    /// Disable or re-enable a human user's account (operators' tool).
    User {
        #[command(subcommand)]
        action: UserAction,
    },
    /// Run the sandbox provider simulator alone on TERN_SANDBOX_BIND.
    Sandbox,
    /// Ledger tools.
    Ledger {
        #[command(subcommand)]
        action: LedgerAction,
    },
    /// Audit chain tools.
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// Operator alerts (a transfer whose refund could not be made): list, acknowledge.
    Alerts {
        #[command(subcommand)]
        action: AlertsAction,
    },
    /// The nodes sharing this PostgreSQL: id, advertised URL, last heartbeat, slots owned.
    Nodes,
    /// Operators' summary: work in flight, alerts, dead letters and nodes from the
    /// database; health and actor figures from a running node.
    Status {
        /// A running node (read with TERN_OPERATOR_TOKEN when set).
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
    },
    /// Load tools that measure a running server.
    Bench {
        // Boxed: its flags outweigh every other command's.
        #[command(subcommand)]
        action: Box<BenchAction>,
    },
}

#[derive(Subcommand)]
enum BenchAction {
    /// Drive card_push settlements over HTTP and wait for every one to finish.
    /// The server should run with TERN_RATE_LIMITS=off (submission is limited per key).
    Settlements {
        /// Base URL of the running server; several, comma-separated, are taken in turn.
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
        /// Settlements to create.
        #[arg(short = 'n', long, default_value_t = 20_000)]
        count: u64,
        /// Requests in flight at once.
        #[arg(short = 'c', long, default_value_t = 64)]
        concurrency: usize,
        /// Creates per second (paced); unpaced when omitted.
        #[arg(long)]
        rate: Option<f64>,
        /// Amount of each push, in USD.
        #[arg(long, default_value = "1.00")]
        amount: String,
        /// Seconds to wait for every settlement to become terminal.
        #[arg(long, default_value_t = 600)]
        wait_s: u64,
        /// Skip the closing ledger check on TERN_DATABASE_URL.
        #[arg(long)]
        no_check: bool,
    },
    /// Drive transfers (a quote, then a transfer on it) over HTTP and wait
    /// for every one to be succeeded or failed. Run the server with
    /// TERN_RATE_LIMITS=off.
    Transfers {
        #[command(flatten)]
        run: TransferRun,
        #[arg(long, default_value_t = 600)]
        wait_s: u64,
    },
    /// Write a CA and a certificate for 127.0.0.1 and localhost signed by it
    /// into DIR (unless there already), for the receiver of `bench webhooks`,
    /// and print the environment that makes the server trust it.
    WebhookTls {
        /// Folder of ca.pem, cert.pem and key.pem.
        dir: std::path::PathBuf,
    },
    /// Drive transfers as `bench transfers` does for a merchant whose webhook
    /// endpoint is an HTTPS receiver run here, and measure deliveries/s and
    /// delivery lag. Run the server with TERN_RATE_LIMITS=off and the
    /// environment `bench webhook-tls` prints.
    Webhooks {
        #[command(flatten)]
        run: TransferRun,
        /// Folder of the receiver's certificates (made when missing).
        #[arg(long, default_value = "data/bench-tls")]
        tls_dir: std::path::PathBuf,
        /// The receiver's address; the certificate names 127.0.0.1 and localhost.
        #[arg(long, default_value = "127.0.0.1:0")]
        receiver_bind: String,
        /// Then replay every transfer's events and measure the re-deliveries.
        #[arg(long)]
        replay: bool,
        /// Seconds to wait for the transfers, and then for their deliveries.
        #[arg(long = "wait", default_value_t = 600)]
        wait_s: u64,
    },
    /// Log a few registered people in from C loops for a while (logins/s is
    /// bounded by argon2 on the hashing pool), while sequential readers time
    /// GET /v1/auth/me with a session, idle first and then under the logins.
    /// Run the server with TERN_RATE_LIMITS=login=1000000/1s,register=1000000/1s.
    Logins {
        /// Base URL of the running server; several, comma-separated, are taken in turn.
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
        /// People registered first (each registration costs a hash).
        #[arg(long, default_value_t = 8)]
        users: usize,
        /// Login loops at once.
        #[arg(short = 'c', long, default_value_t = 16)]
        concurrency: usize,
        /// Sequential GET /v1/auth/me loops, idle and during the logins.
        #[arg(long, default_value_t = 2)]
        readers: usize,
        /// How long the logins run: 500ms, 10s, 2m.
        #[arg(long, default_value = "10s", value_parser = crate::config::parse_duration)]
        duration: std::time::Duration,
        /// How long the readers run alone first.
        #[arg(long, default_value = "2s", value_parser = crate::config::parse_duration)]
        baseline: std::time::Duration,
    },
    /// Card authorization decisions: register K people (a merchant each),
    /// fund them, issue each a card without amount limits, then post N
    /// signed `authorization.request` webhooks at concurrency C round-robin
    /// over the cards; prints decisions/s, approvals, declines, latency,
    /// and checks every card's holds. Run the server with
    /// TERN_RATE_LIMITS=register=1000000/1s,login=1000000/1s (or `off`) and
    /// the same TERN_CARD_PROVIDER_WEBHOOK_SECRET.
    Authorizations {
        /// Base URL of the running server; several, comma-separated, are taken in turn.
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
        /// Authorization requests to send.
        #[arg(short = 'n', long, default_value_t = 100_000)]
        count: u64,
        /// Requests in flight at once.
        #[arg(short = 'c', long, default_value_t = 64)]
        concurrency: usize,
        /// Cards (each a registered person: one password hash each).
        #[arg(long, default_value_t = 16)]
        cards: usize,
        /// Amount of each authorization, in USD minor units.
        #[arg(long, default_value_t = 1)]
        amount_minor: i64,
        /// The server's card-provider webhook secret.
        #[arg(
            long,
            env = "TERN_CARD_PROVIDER_WEBHOOK_SECRET",
            hide_env_values = true
        )]
        webhook_secret: String,
        /// Then send an `authorization.clearing` for every approval.
        #[arg(long)]
        clear: bool,
        /// Skip the closing ledger check on TERN_DATABASE_URL.
        #[arg(long)]
        no_check: bool,
    },
}

/// The transfers a bench drives, shared by `bench transfers` and
/// `bench webhooks`.
#[derive(Args)]
struct TransferRun {
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Transfers to create.
    #[arg(short = 'n', long, default_value_t = 10_000)]
    count: u64,
    /// Transfers being created at once.
    #[arg(short = 'c', long, default_value_t = 64)]
    concurrency: usize,
    /// Transfers started per second (paced); unpaced when omitted.
    #[arg(long)]
    rate: Option<f64>,
    #[arg(long, default_value = "USD")]
    send_currency: String,
    #[arg(long, default_value = "10.00")]
    send_amount: String,
    #[arg(long, default_value = "USDC")]
    asset: String,
    #[arg(long, default_value = "polygon")]
    network: String,
    /// The payer's card: `pm_card_visa` succeeds, `pm_card_chargeDeclined` fails.
    #[arg(long, default_value = "pm_card_visa")]
    card_pm: String,
    /// Skip the closing ledger check on TERN_DATABASE_URL.
    #[arg(long)]
    no_check: bool,
}

impl TransferRun {
    fn options(self, wait_s: u64, config: &Config) -> crate::bench::transfers::Options {
        crate::bench::transfers::Options {
            url: self.url,
            count: self.count,
            concurrency: self.concurrency,
            rate_per_s: self.rate,
            send_currency: self.send_currency,
            send_amount: self.send_amount,
            asset: self.asset,
            network: self.network,
            card_pm: self.card_pm,
            wait: std::time::Duration::from_secs(wait_s),
            database_url: (!self.no_check).then(|| config.database_url.clone()),
        }
    }
}

#[derive(Subcommand)]
enum AlertsAction {
    /// The open alerts, oldest first.
    List,
    /// Mark a transfer's alert as seen: it leaves /health.
    Ack { transfer_id: String },
}

#[derive(Subcommand)]
enum LedgerAction {
    /// Verify the whole ledger; exits non-zero on a violation.
    Check,
}

#[derive(Subcommand)]
enum AuditAction {
    /// Verify every merchant's audit chain (or one) in full, from its first
    /// event, trusting no checkpoint; exits non-zero when any is broken.
    Verify {
        #[arg(long)]
        merchant: Option<String>,
    },
}

#[derive(Subcommand)]
enum MerchantAction {
    /// Let the merchant operate again.
    Activate { merchant_id: String },
    /// Stop settlement operations (403) until activated again.
    Suspend { merchant_id: String },
    /// Stop settlement operations (403) for good.
    Disable { merchant_id: String },
}

#[derive(Subcommand)]
enum UserAction {
    /// Refuse the user's logins and sessions until enabled again.
    Disable { email: String },
    /// Let a disabled user sign in again.
    Enable { email: String },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    tern_actors::adapters::install_crypto_provider();
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("tern: configuration error: {error}");
            return ExitCode::from(2);
        }
    };
    let command = cli.command.unwrap_or(Command::Serve);
    // The standalone simulator plays the providers in a trace.
    let service = match command {
        Command::Sandbox => "tern-sandbox",
        _ => "tern",
    };
    // Kept to the end of main: dropping it sends the buffered spans.
    let _telemetry =
        crate::telemetry::init(&config.log, config.otlp_traces_url.as_deref(), service);
    let outcome = match command {
        Command::Openapi { out_dir } => write_openapi(&config, out_dir.as_deref()),
        command => actix_web::rt::System::new().block_on(run(command, config)),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("tern: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, config: Config) -> anyhow::Result<()> {
    match command {
        Command::Serve => serve(config).await,
        Command::Migrate => {
            let applied = migrate::run_pending(&config.database_url).await?;
            println!(
                "applied {} migration(s){}",
                applied.len(),
                if applied.is_empty() {
                    String::new()
                } else {
                    format!(": {}", applied.join(", "))
                }
            );
            Ok(())
        }
        Command::Merchant { action } => set_merchant_status(&config, action).await,
        Command::User { action } => set_user_status(&config, action).await,
        Command::Ledger {
            action: LedgerAction::Check,
        } => ledger_check(&config).await,
        Command::Audit {
            action: AuditAction::Verify { merchant },
        } => audit_verify(&config, merchant).await,
        Command::Alerts { action } => alerts(&config, action).await,
        Command::Nodes => nodes(&config).await,
        Command::Status { url } => crate::status::print(&config, &url).await,
        Command::Bench { action } => bench(*action, &config).await,
        Command::Sandbox => {
            let bind = config
                .sandbox_bind
                .as_deref()
                .context("TERN_SANDBOX_BIND is off")?;
            let listener =
                std::net::TcpListener::bind(bind).with_context(|| format!("binding {bind}"))?;
            tracing::info!(bind, "sandbox simulator listening");
            let secret = config
                .card_provider_webhook_secret
                .clone()
                .context("TERN_CARD_PROVIDER_WEBHOOK_SECRET is required: Tern verifies the simulator's webhooks with it")?;
            let sandbox =
                crate::sandbox::SandboxConfig::new(Some(config.public_url.clone()), secret);
            crate::sandbox::serve(listener, sandbox)?.await?;
            Ok(())
        }
        Command::Openapi { out_dir } => write_openapi(&config, out_dir.as_deref()),
    }
}

/// The load tools; each prints its figures and ends with the ledger check
/// unless told not to.
async fn bench(action: BenchAction, config: &Config) -> anyhow::Result<()> {
    match action {
        BenchAction::Settlements {
            url,
            count,
            concurrency,
            rate,
            amount,
            wait_s,
            no_check,
        } => {
            let usd = tern_schema::money::Currency::find("USD").context("USD is supported")?;
            let amount_minor = usd
                .parse(&amount)
                .map_err(|error| anyhow::anyhow!("--amount {amount}: {error}"))?;
            let options = crate::bench::Options {
                url,
                count,
                concurrency,
                rate_per_s: rate,
                amount_minor,
                wait: std::time::Duration::from_secs(wait_s),
                database_url: (!no_check).then(|| config.database_url.clone()),
            };
            let report = crate::bench::settlements(&options).await?;
            crate::bench::print(&options, &report);
            if let Some(database_url) = &options.database_url {
                crate::bench::check_ledger(database_url).await?;
            }
            Ok(())
        }
        BenchAction::Transfers { run, wait_s } => {
            let options = run.options(wait_s, config);
            let report = crate::bench::transfers::run(&options).await?;
            crate::bench::transfers::print(&options, &report);
            if let Some(database_url) = &options.database_url {
                crate::bench::check_ledger(database_url).await?;
            }
            Ok(())
        }
        BenchAction::WebhookTls { dir } => {
            let (files, made) = crate::bench::tls::ensure(&dir)?;
            let verb = if made { "wrote" } else { "kept" };
            for path in [&files.ca, &files.cert, &files.key] {
                println!("{verb} {}", path.display());
            }
            println!("start the server with: {}", files.server_env());
            Ok(())
        }
        BenchAction::Webhooks {
            run,
            tls_dir,
            receiver_bind,
            replay,
            wait_s,
        } => {
            let options = crate::bench::webhooks::Options {
                transfers: run.options(wait_s, config),
                tls_dir,
                receiver_bind,
                replay,
            };
            let report = crate::bench::webhooks::run(&options).await?;
            crate::bench::webhooks::print(&options, &report);
            if let Some(shortfall) = &report.shortfall {
                anyhow::bail!("incomplete: {shortfall}");
            }
            if let Some(database_url) = &options.transfers.database_url {
                crate::bench::check_ledger(database_url).await?;
            }
            Ok(())
        }
        BenchAction::Logins {
            url,
            users,
            concurrency,
            readers,
            duration,
            baseline,
        } => {
            // The server's pool is not visible over HTTP: say what this
            // environment sets, which is the server's when it shares it.
            let hashers = match std::env::var("TERN_PASSWORD_HASHERS") {
                Ok(_) => format!("{} (TERN_PASSWORD_HASHERS here)", config.password_hashers),
                Err(_) => format!(
                    "{} (the default, cores - 1, for a server on this machine without TERN_PASSWORD_HASHERS)",
                    config.password_hashers
                ),
            };
            let options = crate::bench::logins::Options {
                url,
                users,
                concurrency,
                readers,
                duration,
                baseline,
                hashers,
            };
            let report = crate::bench::logins::run(&options).await?;
            crate::bench::logins::print(&options, &report)
        }
        BenchAction::Authorizations {
            url,
            count,
            concurrency,
            cards,
            amount_minor,
            webhook_secret,
            clear,
            no_check,
        } => {
            let options = crate::bench::authorizations::Options {
                url,
                cards,
                count,
                concurrency,
                amount_minor,
                webhook_secret,
                clear,
                database_url: (!no_check).then(|| config.database_url.clone()),
            };
            let report = crate::bench::authorizations::run(&options).await?;
            crate::bench::authorizations::print(&options, &report)?;
            if let Some(database_url) = &options.database_url {
                crate::bench::check_ledger(database_url).await?;
            }
            Ok(())
        }
    }
}

fn write_openapi(config: &Config, out_dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    let documents = crate::openapi::documents(&config.public_url);
    let Some(dir) = out_dir else {
        println!("{}", documents.aggregated_json());
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, json) in documents.files() {
        let path = dir.join(name);
        std::fs::write(&path, &json).with_context(|| format!("writing {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let bind = config.bind.clone();
    let sandbox = config.sandbox_bind.clone();
    let app = Application::build(config).await?;
    tracing::info!(bind = %bind, sandbox = ?sandbox, port = app.port(), "tern listening");
    app.run_until_stopped().await?;
    Ok(())
}

async fn set_merchant_status(config: &Config, action: MerchantAction) -> anyhow::Result<()> {
    let (merchant_id, status) = match action {
        MerchantAction::Activate { merchant_id } => (merchant_id, MerchantStatus::Active),
        MerchantAction::Suspend { merchant_id } => (merchant_id, MerchantStatus::Suspended),
        MerchantAction::Disable { merchant_id } => (merchant_id, MerchantStatus::Disabled),
    };
    let merchant_id = MerchantId::new(merchant_id);
    migrate::run_pending(&config.database_url).await?;
    let db = Db::connect(&config.database_url).await?;
    let request_id = format!("cli-{}", uuid::Uuid::new_v4());
    let before: Result<_, StoreError> = write_tx!(db, |tx| {
        let Some(before) = merchants::set_status(tx, &merchant_id, status).await? else {
            return Ok(None);
        };
        let changed = AuditRecord {
            merchant_id: merchant_id.clone(),
            actor: AuditActor::Operator,
            action: "merchant.status_changed",
            resource_type: "merchant",
            resource_id: merchant_id.to_string(),
            request_id: request_id.clone(),
            data: serde_json::json!({"from": before.status, "to": status.as_str()}),
        };
        audit::append(tx, changed).await?;
        Ok(Some(before))
    });
    let before = before?.with_context(|| format!("no merchant {merchant_id}"))?;
    println!(
        "merchant {merchant_id}: {} -> {}",
        before.status,
        status.as_str()
    );
    Ok(())
}

async fn set_user_status(config: &Config, action: UserAction) -> anyhow::Result<()> {
    let (email, status, audit_action) = match action {
        UserAction::Disable { email } => (email, UserStatus::Disabled, "user.disabled"),
        UserAction::Enable { email } => (email, UserStatus::Active, "user.enabled"),
    };
    // Stored emails are trimmed and lowercased (decisions §9).
    let email = email.trim().to_lowercase();
    migrate::run_pending(&config.database_url).await?;
    let db = Db::connect(&config.database_url).await?;
    let request_id = format!("cli-{}", uuid::Uuid::new_v4());
    let before: Result<_, StoreError> = write_tx!(db, |tx| {
        let Some(before) = users::set_status_by_email(tx, &email, status, utc_now()).await? else {
            return Ok(None);
        };
        let changed = AuditRecord {
            merchant_id: before.merchant_id.clone(),
            actor: AuditActor::Operator,
            action: audit_action,
            resource_type: "user",
            resource_id: before.id.to_string(),
            request_id: request_id.clone(),
            data: serde_json::json!({"from": before.status, "to": status}),
        };
        audit::append(tx, changed).await?;
        Ok(Some(before))
    });
    let before = before?.with_context(|| format!("no user with email {email}"))?;
    println!(
        "user {email} ({}): {} -> {status}",
        before.id, before.status
    );
    Ok(())
}

/// Most open alerts listed.
const ALERTS_LISTED_MAX: i64 = 1_000;

async fn alerts(config: &Config, action: AlertsAction) -> anyhow::Result<()> {
    migrate::run_pending(&config.database_url).await?;
    let db = Db::connect(&config.database_url).await?;
    match action {
        AlertsAction::List => {
            let mut pooled = db.get().await?;
            let open = transfers::open_alerts(&mut pooled.tx(), ALERTS_LISTED_MAX).await?;
            for (transfer_id, merchant_id, alert) in &open {
                println!("{transfer_id} merchant {merchant_id}: {alert}");
            }
            println!("{} open alert(s)", open.len());
            Ok(())
        }
        AlertsAction::Ack { transfer_id } => {
            let transfer_id = TransferId::new(transfer_id);
            let request_id = format!("cli-{}", uuid::Uuid::new_v4());
            let acknowledged: Result<bool, StoreError> = write_tx!(db, |tx| {
                let Some(row) = transfers::find(tx, &transfer_id).await? else {
                    return Ok(false);
                };
                if !transfers::acknowledge_alert(tx, &transfer_id, utc_now()).await? {
                    return Ok(false);
                }
                let seen = AuditRecord {
                    merchant_id: row.merchant_id.clone(),
                    actor: AuditActor::Operator,
                    action: "transfer.alert_acknowledged",
                    resource_type: "transfer",
                    resource_id: transfer_id.to_string(),
                    request_id: request_id.clone(),
                    data: serde_json::json!({"alert": row.alert}),
                };
                audit::append(tx, seen).await?;
                Ok(true)
            });
            if !acknowledged? {
                anyhow::bail!("transfer {transfer_id} has no open alert");
            }
            println!("transfer {transfer_id}: alert acknowledged");
            Ok(())
        }
    }
}

async fn ledger_check(config: &Config) -> anyhow::Result<()> {
    let db = Db::connect(&config.database_url).await?;
    let mut pooled = db.get().await?;
    let report = ledger::check(&mut pooled.tx()).await?;
    println!(
        "checked {} accounts and {} entries ({} holds, {} of them posted or voided)",
        report.accounts, report.entries, report.holds, report.resolutions
    );
    for (currency, totals) in &report.currencies {
        println!(
            "{currency}: posted balances sum to {}, pending debits {}, pending credits {}",
            totals.posted_sum_minor, totals.pending_debits_minor, totals.pending_credits_minor
        );
    }
    if report.is_ok() {
        println!("ledger ok");
        return Ok(());
    }
    for violation in &report.violations {
        println!("VIOLATION {violation}");
    }
    anyhow::bail!("{} ledger violation(s)", report.violations.len())
}

async fn nodes(config: &Config) -> anyhow::Result<()> {
    let db = Db::connect(&config.database_url).await?;
    if db.backend() != tern_schema::Backend::Postgres {
        println!("SQLite: one process owns everything; several nodes need PostgreSQL");
        return Ok(());
    }
    let mut pooled = db.get().await?;
    let nodes = tern_schema::store::cluster::nodes(&mut pooled.tx()).await?;
    println!(
        "{:<32} {:<5} {:>5}  {:<26} advertised URL",
        "node", "live", "slots", "last heartbeat (UTC)"
    );
    for node in &nodes {
        println!(
            "{:<32} {:<5} {:>5}  {:<26} {}",
            node.id,
            if node.live { "yes" } else { "no" },
            node.slots,
            node.heartbeat_at.format("%Y-%m-%d %H:%M:%S%.3f"),
            node.advertise_url.as_deref().unwrap_or("-")
        );
    }
    let owned: i64 = nodes.iter().map(|node| node.slots).sum();
    println!(
        "{} node(s), {} live; {owned} of {} slots owned",
        nodes.len(),
        nodes.iter().filter(|node| node.live).count(),
        tern_schema::store::cluster::SLOTS
    );
    Ok(())
}

async fn audit_verify(config: &Config, merchant: Option<String>) -> anyhow::Result<()> {
    let db = Db::connect(&config.database_url).await?;
    let mut pooled = db.get().await?;
    let tx = &mut pooled.tx();
    let merchants = match merchant {
        Some(id) => vec![MerchantId::new(id)],
        None => audit::all_chains(tx).await?,
    };
    let broken = audit::broken_chains(tx, &merchants).await?;
    for (merchant_id, result) in &broken {
        println!(
            "BROKEN {merchant_id}: first invalid seq {:?} ({} checked)",
            result.first_invalid_seq, result.checked
        );
    }
    println!(
        "verified {} chain(s), {} broken",
        merchants.len(),
        broken.len()
    );
    if !broken.is_empty() {
        anyhow::bail!("{} broken audit chain(s)", broken.len());
    }
    Ok(())
}

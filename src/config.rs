//! Configuration from the environment (decisions §14), validated at start: a
//! bad value stops the process with a message naming the variable.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tern_actors::adapters::static_rates::RateTable;
use tern_actors::quote::Pricing;

use crate::cluster::ClusterSettings;
use tern_schema::money::MinorUnits;

tern_schema::text_enum! {
    pub enum Environment {
        Development = "development",
        Sandbox = "sandbox",
        Production = "production",
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecureDetailsMode {
    Disabled,
    Demo,
    Embed,
}

/// One rate limit: `burst` requests per `period`, refilled evenly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    pub burst: u32,
    pub period: Duration,
}

/// The named limits of decisions §13. `None` means limiting is off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimits {
    pub limits: Option<BTreeMap<String, RateLimit>>,
}

/// The limit names TERN_RATE_LIMITS accepts, with their defaults. A limit
/// protecting a shared resource (the database, a provider) counts per
/// merchant, so minting API keys does not multiply it; settlement submission
/// stays per key (decisions §13).
pub const RATE_LIMIT_DEFAULTS: [(&str, u32, Duration); 25] = [
    ("login", 10, Duration::from_secs(60)),
    ("register", 10, Duration::from_secs(60)),
    ("m2m_register", 5, Duration::from_secs(3_600)),
    ("settlement_submit", 100, Duration::from_secs(1)),
    // Reads and lists per merchant; reversals per merchant (each one calls
    // a provider).
    ("settlement_read", 1_000, Duration::from_secs(1)),
    ("settlement_reverse", 20, Duration::from_secs(1)),
    // Per merchant: each quote is a stored row, so creation is bounded like
    // submission, at the pace a transfer load needs.
    ("quote_create", 1_000, Duration::from_secs(1)),
    ("quote_read", 1_000, Duration::from_secs(1)),
    // Per merchant, like quotes: a transfer load creates one per quote.
    ("transfer_create", 1_000, Duration::from_secs(1)),
    ("transfer_read", 1_000, Duration::from_secs(1)),
    // Per merchant: endpoint changes and replays (each replay sends
    // deliveries).
    ("webhook_write", 100, Duration::from_secs(1)),
    ("webhook_read", 1_000, Duration::from_secs(1)),
    // Per merchant: registrations and revocations, and device lists.
    ("device_write", 100, Duration::from_secs(1)),
    ("device_read", 1_000, Duration::from_secs(1)),
    // Per client address: the dispatch has no key, and each one fans out
    // to up to 100 devices.
    ("push_dispatch", 1_000, Duration::from_secs(1)),
    ("resend", 3, Duration::from_secs(3_600)),
    // Per client address, beside the per-user one: each resend sends a mail.
    ("resend_ip", 20, Duration::from_secs(3_600)),
    // Per submitted (valid) email, whether or not it is registered: each
    // request for a registered one sends a mail.
    ("password_reset", 5, Duration::from_secs(3_600)),
    // Per client address, for requests and confirmations: one address
    // cannot walk through many emails or guess tokens.
    ("password_reset_ip", 20, Duration::from_secs(3_600)),
    // Per client address: each verification attempt is a write transaction.
    ("verify_email_ip", 20, Duration::from_secs(3_600)),
    // Per session user: each step-up (the password asked again before card
    // details are revealed) is a password guess, so it is bounded like login.
    ("step_up", 10, Duration::from_secs(60)),
    // Per merchant, not per key (minting keys must not multiply it): each
    // verification hashes up to a few thousand events again.
    ("audit_verify", 10, Duration::from_secs(60)),
    // Per merchant: card issue and replace each call the issuer and make a
    // card; secure details call the issuer and reveal a PAN; wallet
    // provisioning calls the issuer.
    ("card_issue", 30, Duration::from_secs(60)),
    ("card_secure", 30, Duration::from_secs(60)),
    ("wallet_provision", 30, Duration::from_secs(60)),
];

impl RateLimits {
    pub fn get(&self, name: &str) -> Option<RateLimit> {
        self.limits
            .as_ref()
            .and_then(|limits| limits.get(name).copied())
    }

    pub fn off() -> RateLimits {
        RateLimits { limits: None }
    }

    /// Parses `off` or `name=N/period,...`; names left out keep their default.
    pub fn parse(spec: &str) -> Result<RateLimits, String> {
        let spec = spec.trim();
        if spec == "off" {
            return Ok(RateLimits::off());
        }
        let mut limits: BTreeMap<String, RateLimit> = RATE_LIMIT_DEFAULTS
            .iter()
            .map(|(name, burst, period)| {
                (
                    (*name).to_owned(),
                    RateLimit {
                        burst: *burst,
                        period: *period,
                    },
                )
            })
            .collect();
        for item in spec
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}` is not name=N/period"))?;
            if !limits.contains_key(name) {
                let known: Vec<&str> = RATE_LIMIT_DEFAULTS
                    .iter()
                    .map(|(name, _, _)| *name)
                    .collect();
                return Err(format!(
                    "unknown limit `{name}` (known: {})",
                    known.join(", ")
                ));
            }
            let (count, period) = value
                .split_once('/')
                .ok_or_else(|| format!("`{value}` is not N/period"))?;
            let burst: u32 = count
                .parse()
                .ok()
                .filter(|burst| *burst > 0)
                .ok_or_else(|| format!("`{count}` is not a positive count"))?;
            let period = parse_duration(period)?;
            limits.insert(name.to_owned(), RateLimit { burst, period });
        }
        Ok(RateLimits {
            limits: Some(limits),
        })
    }
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits::parse("").unwrap_or_else(|_| RateLimits::off())
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub database_url: String,
    pub bind: String,
    pub public_url: String,
    pub environment: Environment,
    pub data_dir: PathBuf,
    /// `None` when TERN_SANDBOX_BIND is `off`.
    pub sandbox_bind: Option<String>,
    /// *extension* TERN_PROVIDER_URL: base URL of the card acquirer, card
    /// push and custodian APIs; unset means the in-process sandbox.
    pub provider_url: Option<String>,
    /// *extension* TERN_PROVIDER_TIMEOUT: how long one provider request may
    /// take before its outcome counts as unknown (then inquired).
    pub provider_timeout: Duration,
    pub quote_ttl: Duration,
    /// *extension* TERN_QUOTE_RATES: the rate table, decisions §3 defaults
    /// with `CUR/ASSET=RATE,...` applied over them.
    pub quote_rates: RateTable,
    /// Fees and bounds of decisions §3 (not read from the environment).
    pub quote_pricing: Pricing,
    pub settlement_retry_schedule: Vec<Duration>,
    pub challenge_ttl: Duration,
    pub webhook_retry_schedule: Vec<Duration>,
    pub webhook_allow_private: bool,
    pub webhook_ca_file: Option<PathBuf>,
    pub smtp_url: Option<String>,
    /// *extension* TERN_MAIL_FROM: the From of every mail.
    pub mail_from: String,
    pub cookie_secure: bool,
    pub session_ttl: Duration,
    /// A session unused this long ends (TERN_SESSION_IDLE_TTL, decisions §9).
    pub session_idle_ttl: Duration,
    /// How long an uncleared card authorization holds its funds before it
    /// is voided (TERN_CARD_HOLD_TTL, decisions §10).
    pub card_hold_ttl: Duration,
    /// Origins besides TERN_PUBLIC_URL's own that a cookie-authenticated
    /// unsafe request may come from (CSRF, decisions §9):
    /// TERN_ALLOWED_ORIGINS.
    pub allowed_origins: Vec<String>,
    /// Concurrent argon2 computations (TERN_PASSWORD_HASHERS; default one
    /// per core but one, at least one).
    pub password_hashers: usize,
    pub secure_details_mode: SecureDetailsMode,
    pub dispatch_secret: Option<String>,
    /// TERN_OPERATOR_TOKEN: the bearer token that shows operators the
    /// details of /health and /health/actors; `None`: details are off.
    pub operator_token: Option<String>,
    pub card_provider_webhook_secret: Option<String>,
    pub rate_limits: RateLimits,
    /// TERN_TRUSTED_PROXIES: peers whose `X-Forwarded-For` / `Forwarded`
    /// name the client (see `http::client_address`); empty trusts none.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    pub log: String,
    /// TERN_OTLP_ENDPOINT, resolved to the URL traces are posted to
    /// (`<endpoint>/v1/traces`); `None`: no trace is exported.
    pub otlp_traces_url: Option<String>,
    pub self_service_registration: bool,
    /// Largest amount of one settlement, in minor units
    /// ([`SETTLEMENT_AMOUNT_MAX_MINOR`]). Never read from the environment:
    /// tests raise it to reach the ledger's int64 guard.
    pub settlement_amount_max_minor: MinorUnits,
    /// Test-only routes that exercise failure paths (a handler that panics).
    /// Never read from the environment.
    pub fault_routes: bool,
    /// Several nodes on one PostgreSQL (TERN_LEASE_TTL,
    /// TERN_CLUSTER_SECRET, TERN_ADVERTISE_URL).
    pub cluster: ClusterSettings,
}

/// Longest card hold: networks keep an authorization open for days to
/// weeks (hotels, car rentals), never this long.
pub const CARD_HOLD_TTL_MAX: Duration = Duration::from_secs(365 * 86_400);

/// Largest amount of one settlement, in minor units (10^12: ten billion
/// dollars, euros or pounds). Far beyond any real card or payout, it keeps
/// the ledger's shared system accounts, whose side totals only grow, from
/// being filled to the int64 limit by a few settlements of one merchant:
/// that would refuse every merchant's next entry in the currency.
pub const SETTLEMENT_AMOUNT_MAX_MINOR: MinorUnits = MinorUnits::new(1_000_000_000_000);

/// Shortest operator token: it guards ids and error text of every
/// merchant, so it must be worth an HMAC key.
pub const OPERATOR_TOKEN_LENGTH_MIN: usize = 24;

/// A configuration error names the variable and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub message: String,
}

impl Config {
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads every variable through `lookup`, so tests need not touch the
    /// process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let get = |name: &'static str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let parsed =
            |name: &'static str, default: &str| get(name).unwrap_or_else(|| default.to_owned());

        let environment = parsed("TERN_ENVIRONMENT", "development");
        let Some(environment) = Environment::parse(&environment) else {
            return Err(error(
                "TERN_ENVIRONMENT",
                format!("`{environment}` is not development, sandbox or production"),
            ));
        };
        let data_dir = PathBuf::from(parsed("TERN_DATA_DIR", "data"));
        let default_db = format!("sqlite://{}", data_dir.join("tern.db").display());
        let database_url = parsed("TERN_DATABASE_URL", &default_db);
        tern_schema::db::DatabaseUrl::parse(&database_url)
            .map_err(|e| error("TERN_DATABASE_URL", e.to_string()))?;

        let bind = parsed("TERN_BIND", "127.0.0.1:8080");
        check_socket_addr("TERN_BIND", &bind)?;
        let public_url = parsed("TERN_PUBLIC_URL", "http://127.0.0.1:8080")
            .trim_end_matches('/')
            .to_owned();
        if !(public_url.starts_with("http://") || public_url.starts_with("https://")) {
            return Err(error(
                "TERN_PUBLIC_URL",
                "must start with http:// or https://".into(),
            ));
        }
        let sandbox_bind = match parsed("TERN_SANDBOX_BIND", "127.0.0.1:8081").as_str() {
            "off" => None,
            addr => {
                check_socket_addr("TERN_SANDBOX_BIND", addr)?;
                Some(addr.to_owned())
            }
        };
        let provider_url = get("TERN_PROVIDER_URL");
        if let Some(url) = &provider_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(error(
                    "TERN_PROVIDER_URL",
                    "must start with http:// or https://".into(),
                ));
            }
        }
        if environment == Environment::Production && sandbox_bind.is_some() {
            return Err(error(
                "TERN_SANDBOX_BIND",
                "production refuses the sandbox: set it to `off`".into(),
            ));
        }

        let duration = |name: &'static str, default: &str| {
            parse_duration(&parsed(name, default)).map_err(|m| error(name, m))
        };
        let schedule = |name: &'static str, default: &str| {
            parse_schedule(&parsed(name, default)).map_err(|m| error(name, m))
        };
        let boolean = |name: &'static str, default: bool| match get(name).as_deref() {
            None => Ok(default),
            Some("true" | "1" | "yes") => Ok(true),
            Some("false" | "0" | "no") => Ok(false),
            Some(other) => Err(error(name, format!("`{other}` is not true or false"))),
        };

        let cookie_secure = boolean("TERN_COOKIE_SECURE", true)?;
        if environment == Environment::Production && !cookie_secure {
            return Err(error(
                "TERN_COOKIE_SECURE",
                "production refuses insecure cookies".into(),
            ));
        }
        let webhook_allow_private = boolean("TERN_WEBHOOK_ALLOW_PRIVATE", false)?;
        if environment == Environment::Production && webhook_allow_private {
            return Err(error(
                "TERN_WEBHOOK_ALLOW_PRIVATE",
                "production refuses private webhook targets".into(),
            ));
        }
        let default_mode = if environment == Environment::Production {
            "disabled"
        } else {
            "demo"
        };
        let secure_details_mode = match parsed("TERN_SECURE_DETAILS_MODE", default_mode).as_str() {
            "disabled" => SecureDetailsMode::Disabled,
            "demo" if environment != Environment::Production => SecureDetailsMode::Demo,
            "demo" => {
                return Err(error(
                    "TERN_SECURE_DETAILS_MODE",
                    "production refuses demo mode".into(),
                ))
            }
            "embed" => SecureDetailsMode::Embed,
            other => {
                return Err(error(
                    "TERN_SECURE_DETAILS_MODE",
                    format!("`{other}` is not disabled, demo or embed"),
                ))
            }
        };
        let smtp_url = get("TERN_SMTP_URL");
        if let Some(url) = &smtp_url {
            if !(url.starts_with("smtp://") || url.starts_with("smtps://")) {
                return Err(error(
                    "TERN_SMTP_URL",
                    "must be smtp://host:port or smtps://host:port".into(),
                ));
            }
        }
        if origin_of(&public_url).is_none() {
            return Err(error("TERN_PUBLIC_URL", "is not a valid URL".into()));
        }
        let mut allowed_origins = Vec::new();
        for extra in parsed("TERN_ALLOWED_ORIGINS", "").split(',') {
            let extra = extra.trim().trim_end_matches('/');
            if extra.is_empty() {
                continue;
            }
            match origin_of(extra) {
                Some(origin) if origin == extra => allowed_origins.push(origin),
                _ => {
                    return Err(error(
                        "TERN_ALLOWED_ORIGINS",
                        format!("`{extra}` is not an origin (scheme://host[:port], no path)"),
                    ))
                }
            }
        }
        let password_hashers = match get("TERN_PASSWORD_HASHERS") {
            None => crate::auth::password::Passwords::threads_default(),
            Some(text) => match text.parse::<usize>() {
                Ok(n) if (1..=64).contains(&n) => n,
                _ => {
                    return Err(error(
                        "TERN_PASSWORD_HASHERS",
                        format!("`{text}` is not a whole number from 1 to 64"),
                    ))
                }
            },
        };
        let mail_from = parsed(
            "TERN_MAIL_FROM",
            tern_actors::adapters::mail::MAIL_FROM_DEFAULT,
        );
        tern_actors::adapters::mail::check_from(&mail_from)
            .map_err(|e| error("TERN_MAIL_FROM", e.to_string()))?;
        let rate_limits = RateLimits::parse(&parsed("TERN_RATE_LIMITS", ""))
            .map_err(|m| error("TERN_RATE_LIMITS", m))?;
        let trusted_proxies = parse_trusted_proxies(&parsed("TERN_TRUSTED_PROXIES", ""))
            .map_err(|m| error("TERN_TRUSTED_PROXIES", m))?;
        let quote_rates = RateTable::with_overrides(&parsed("TERN_QUOTE_RATES", ""))
            .map_err(|m| error("TERN_QUOTE_RATES", m))?;
        let card_hold_ttl = duration("TERN_CARD_HOLD_TTL", "7d")?;
        if card_hold_ttl > CARD_HOLD_TTL_MAX {
            return Err(error(
                "TERN_CARD_HOLD_TTL",
                format!("at most {} days", CARD_HOLD_TTL_MAX.as_secs() / 86_400),
            ));
        }
        let operator_token = get("TERN_OPERATOR_TOKEN");
        if let Some(token) = &operator_token {
            if token.chars().count() < OPERATOR_TOKEN_LENGTH_MIN
                || token.chars().any(|c| c.is_control() || c.is_whitespace())
            {
                return Err(error(
                    "TERN_OPERATOR_TOKEN",
                    format!(
                        "must be at least {OPERATOR_TOKEN_LENGTH_MIN} characters, without spaces"
                    ),
                ));
            }
        }
        let cluster = ClusterSettings::parse(
            duration("TERN_LEASE_TTL", "5s")?,
            get("TERN_CLUSTER_SECRET"),
            get("TERN_ADVERTISE_URL"),
        )?;
        let log = parsed("TERN_LOG", "info");
        tracing_subscriber::EnvFilter::try_new(&log)
            .map_err(|e| error("TERN_LOG", e.to_string()))?;
        let otlp_traces_url = get("TERN_OTLP_ENDPOINT")
            .map(|endpoint| otlp_traces_url(&endpoint))
            .transpose()
            .map_err(|message| error("TERN_OTLP_ENDPOINT", message))?;

        Ok(Config {
            database_url,
            bind,
            public_url,
            environment,
            data_dir,
            sandbox_bind,
            provider_url,
            provider_timeout: duration("TERN_PROVIDER_TIMEOUT", "10s")?,
            quote_ttl: duration("TERN_QUOTE_TTL", "60s")?,
            quote_rates,
            quote_pricing: Pricing::default(),
            settlement_retry_schedule: schedule(
                "TERN_SETTLEMENT_RETRY_SCHEDULE",
                "1s,4s,16s,64s,256s",
            )?,
            challenge_ttl: duration("TERN_CHALLENGE_TTL", "15m")?,
            webhook_retry_schedule: schedule(
                "TERN_WEBHOOK_RETRY_SCHEDULE",
                "5s,5m,30m,2h,5h,10h,10h",
            )?,
            webhook_allow_private,
            webhook_ca_file: get("TERN_WEBHOOK_CA_FILE").map(PathBuf::from),
            smtp_url,
            mail_from,
            cookie_secure,
            session_ttl: duration("TERN_SESSION_TTL", "24h")?,
            session_idle_ttl: duration("TERN_SESSION_IDLE_TTL", "30m")?,
            card_hold_ttl,
            allowed_origins,
            password_hashers,
            secure_details_mode,
            dispatch_secret: get("TERN_DISPATCH_SECRET"),
            operator_token,
            card_provider_webhook_secret: get("TERN_CARD_PROVIDER_WEBHOOK_SECRET"),
            rate_limits,
            trusted_proxies,
            log,
            otlp_traces_url,
            self_service_registration: boolean("TERN_SELF_SERVICE_REGISTRATION", true)?,
            settlement_amount_max_minor: SETTLEMENT_AMOUNT_MAX_MINOR,
            fault_routes: false,
            cluster,
        })
    }
}

impl Config {
    /// The origin of TERN_PUBLIC_URL, as browsers send it in Origin.
    pub fn public_origin(&self) -> Option<String> {
        origin_of(&self.public_url)
    }
}

/// The traces URL of an OTLP/HTTP endpoint, named as collectors document
/// it (`http://collector:4318`, like OTEL_EXPORTER_OTLP_ENDPOINT) or
/// already ending in `/v1/traces`.
/// The value is never echoed: it may hold a collector's credentials.
fn otlp_traces_url(endpoint: &str) -> Result<String, String> {
    let parsed = url::Url::parse(endpoint).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
        return Err("not an http(s) URL".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("credentials do not go in the URL: set OTEL_EXPORTER_OTLP_HEADERS".into());
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err("a query or fragment is not allowed".into());
    }
    let base = endpoint.trim_end_matches('/');
    Ok(if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    })
}

/// `scheme://host[:port]` of an http(s) URL, as browsers send it in Origin.
fn origin_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let origin = parsed.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

/// Parses a comma-separated list of CIDRs (`10.0.0.0/8, ::1/128`); a bare
/// address stands for itself alone.
pub fn parse_trusted_proxies(spec: &str) -> Result<Vec<ipnet::IpNet>, String> {
    spec.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            item.parse::<ipnet::IpNet>()
                .or_else(|_| item.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map(|net| net.trunc())
                .map_err(|_| format!("`{item}` is not a CIDR such as 10.0.0.0/8 or an address"))
        })
        .collect()
}

fn error(variable: &'static str, message: String) -> ConfigError {
    ConfigError { variable, message }
}

fn check_socket_addr(variable: &'static str, value: &str) -> Result<(), ConfigError> {
    value.parse::<SocketAddr>().map(|_| ()).map_err(|_| {
        error(
            variable,
            format!("`{value}` is not host:port with an IP address"),
        )
    })
}

/// Parses `500ms`, `5s`, `5m`, `2h`, `7d`: a positive whole number and one unit.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 500ms, 5s, 5m, 2h or 7d"))?;
    let millis_per_unit = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "`{text}` is not a duration like 500ms, 5s, 5m, 2h or 7d"
            ))
        }
    };
    if value == 0 {
        return Err(format!("`{text}` must be longer than zero"));
    }
    value
        .checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("`{text}` is too long"))
}

fn parse_schedule(text: &str) -> Result<Vec<Duration>, String> {
    let steps: Vec<Duration> = text
        .split(',')
        .map(parse_duration)
        .collect::<Result<_, _>>()?;
    if steps.len() > 32 {
        return Err("at most 32 steps".into());
    }
    Ok(steps)
}

#[cfg(test)]
mod tests;

//! The edge's part of several nodes on one PostgreSQL: this node's name,
//! and the signed channel between nodes (TERN_CLUSTER_SECRET) that carries
//! forwarded requests (`http::forward`) and wake-ups.
//!
//! A signature covers a timestamp and everything the receiving node acts
//! on, so a request cannot be altered on the way or replayed after
//! [`SIGNATURE_TOLERANCE_S`].

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tern_actors::runtime::cluster::{ClusterConfig, Peers, WakeRefused};

use crate::config::{Config, ConfigError};

type HmacSha256 = Hmac<Sha256>;

/// How this node works with others on one PostgreSQL.
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    /// How long a silent node keeps its entities.
    pub lease_ttl: Duration,
    /// Signs node-to-node forwarding; `None`: this node neither forwards
    /// nor accepts forwarded requests.
    pub secret: Option<String>,
    /// This node's URL as the other nodes reach it.
    pub advertise_url: Option<String>,
}

/// Shortest cluster secret: like the operator token, an HMAC key.
pub const CLUSTER_SECRET_LENGTH_MIN: usize = 24;

impl ClusterSettings {
    /// The settings from TERN_LEASE_TTL, TERN_CLUSTER_SECRET and
    /// TERN_ADVERTISE_URL, checked.
    pub fn parse(
        lease_ttl: Duration,
        secret: Option<String>,
        advertise_url: Option<String>,
    ) -> Result<ClusterSettings, ConfigError> {
        let refuse = |variable: &'static str, message: String| ConfigError { variable, message };
        if lease_ttl < Duration::from_millis(500) {
            return Err(refuse("TERN_LEASE_TTL", "at least 500ms".into()));
        }
        if secret
            .as_ref()
            .is_some_and(|secret| secret.chars().count() < CLUSTER_SECRET_LENGTH_MIN)
        {
            return Err(refuse(
                "TERN_CLUSTER_SECRET",
                format!("must be at least {CLUSTER_SECRET_LENGTH_MIN} characters"),
            ));
        }
        let advertise_url = advertise_url.map(|url| url.trim_end_matches('/').to_owned());
        if let Some(url) = &advertise_url {
            if !(url.starts_with("http://") || url.starts_with("https://"))
                || reqwest::Url::parse(url).is_err()
            {
                return Err(refuse(
                    "TERN_ADVERTISE_URL",
                    "an http:// or https:// URL".into(),
                ));
            }
        }
        Ok(ClusterSettings {
            lease_ttl,
            secret,
            advertise_url,
        })
    }
}

/// A forwarded request's signature: `t=<unix s>,v1=<hex>`.
pub const FORWARDED_HEADER: &str = "x-tern-forwarded";
/// The client's address as the entry node saw it, on a forwarded request.
pub const CLIENT_HEADER: &str = "x-tern-client-ip";
/// A wake-up's signature, same form.
pub const WAKE_HEADER: &str = "x-tern-cluster-signature";
/// How old a signature may be: node clocks agree within this.
pub const SIGNATURE_TOLERANCE_S: i64 = 60;
/// How long a node waits for another to answer a forwarded request: the
/// owner's own call timeout (30 s) plus a margin.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(35);
const WAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// This node's name: stable across restarts on the same address, so a
/// node that crashed takes its slots back without waiting for its lease.
pub fn node_id(config: &Config, port: u16) -> String {
    if let Some(url) = &config.cluster.advertise_url {
        return url
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .to_owned();
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{port}")
}

/// The runtime's cluster settings.
pub fn runtime_config(config: &Config, link: Option<Arc<Link>>) -> ClusterConfig {
    ClusterConfig {
        lease_ttl: config.cluster.lease_ttl,
        advertise_url: config.cluster.advertise_url.clone(),
        peers: link.map(|link| link as Arc<dyn Peers>),
    }
}

/// The signed channel to the other nodes; exists when TERN_CLUSTER_SECRET
/// is set.
pub struct Link {
    secret: String,
    pub client: reqwest::Client,
    replays: Mutex<Replays>,
}

/// Forwarded requests this node accepted with signatures not yet expired,
/// by their nonce: a request seen on the node network cannot be sent again
/// within the tolerance. Two generations, each [`REPLAY_GENERATION_S`]
/// long, so a nonce is remembered at least that long: longer than a
/// signature stays valid after it is first seen (its timestamp is at most
/// [`FORWARD_CLOCK_AHEAD_S`] ahead of this node's clock). Memory holds two
/// generations of forwards at most.
struct Replays {
    current: HashSet<u128>,
    previous: HashSet<u128>,
    rotated_at: i64,
    /// When this process started remembering.
    started_at: i64,
}

/// How far ahead of this node's clock a signature's timestamp may be (the
/// sender's clock runs ahead): node clocks agree within this.
pub const FORWARD_CLOCK_AHEAD_S: i64 = SIGNATURE_TOLERANCE_S;
/// A nonce first taken at `f` has a timestamp of at least
/// `f - FORWARD_CLOCK_AHEAD_S`, so its signature verifies until at most
/// `f + FORWARD_CLOCK_AHEAD_S + SIGNATURE_TOLERANCE_S`; a generation this
/// long keeps it past then.
const REPLAY_GENERATION_S: i64 = SIGNATURE_TOLERANCE_S + FORWARD_CLOCK_AHEAD_S + 1;

/// Most nonces one generation remembers: past it, forwarded requests are
/// answered 503 until the generation rotates. Only a validly signed
/// request adds one, so only the nodes themselves can fill it: over
/// 8,000 forwards a second for a whole generation, about 34 MiB a
/// generation.
pub const FORWARD_NONCES_MAX: usize = 1_000_000;

/// Why a forwarded request is not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum ForwardRefused {
    /// Not signed by a node for this node, altered, too old, or seen before.
    Invalid,
    /// Not now: too many forwards within one generation to remember them
    /// all, or signed before this process started.
    Busy,
}

impl Replays {
    /// Records `nonce`, refusing it when it was seen or the generation is
    /// full.
    fn first_use(&mut self, nonce: u128, now: i64) -> Result<(), ForwardRefused> {
        if now - self.rotated_at >= REPLAY_GENERATION_S {
            self.previous = std::mem::take(&mut self.current);
            self.rotated_at = now;
        }
        if self.previous.contains(&nonce) || self.current.contains(&nonce) {
            return Err(ForwardRefused::Invalid);
        }
        if self.current.len() >= FORWARD_NONCES_MAX {
            return Err(ForwardRefused::Busy);
        }
        self.current.insert(nonce);
        Ok(())
    }
}

/// The request headers a forwarded request's signature covers: those the
/// owner acts on (who calls, under which key, in which format).
pub const SIGNED_HEADERS: [&str; 4] =
    ["authorization", "cookie", "idempotency-key", "content-type"];

/// What a forwarded request's signature covers.
pub struct Forwarded<'a> {
    /// The node it is sent to, by its advertised URL: a forward taken off
    /// the node network cannot be sent to another node.
    pub to: &'a str,
    pub method: &'a str,
    pub path_and_query: &'a str,
    pub request_id: &'a str,
    pub client: Option<IpAddr>,
    /// The values of [`SIGNED_HEADERS`], in that order, each joined with
    /// commas when repeated and empty when absent.
    pub headers: Vec<String>,
    pub body: &'a [u8],
}

/// The values of [`SIGNED_HEADERS`] in `headers`.
pub fn signed_header_values(headers: &actix_web::http::header::HeaderMap) -> Vec<String> {
    SIGNED_HEADERS
        .iter()
        .map(|name| {
            headers
                .get_all(*name)
                .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect()
}

/// A nonce as [`Link::sign_forwarded`] makes them: 128 random bits.
const NONCE_HEX_DIGITS: usize = 32;

impl Forwarded<'_> {
    fn message(&self, timestamp: i64, nonce: &str) -> Vec<u8> {
        let client = self.client.map(|ip| ip.to_string()).unwrap_or_default();
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|value| hex::encode(Sha256::digest(value.as_bytes())))
            .collect();
        format!(
            "{timestamp}\n{nonce}\n{}\n{}\n{}\n{}\n{client}\n{}\n{}",
            self.to,
            self.method,
            self.path_and_query,
            self.request_id,
            headers.join(","),
            hex::encode(Sha256::digest(self.body))
        )
        .into_bytes()
    }
}

#[derive(Deserialize, Serialize)]
pub struct Wake {
    pub kind: String,
    pub id: String,
}

impl Link {
    pub fn new(secret: &str) -> anyhow::Result<Link> {
        let client = reqwest::Client::builder()
            .timeout(FORWARD_TIMEOUT)
            .connect_timeout(Duration::from_secs(2))
            // Node to node: the advertised URL is where the owner is,
            // whatever a proxy setting in the environment says.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Link {
            secret: secret.to_owned(),
            client,
            replays: Mutex::new(Replays {
                current: HashSet::new(),
                previous: HashSet::new(),
                rotated_at: chrono::Utc::now().timestamp(),
                started_at: chrono::Utc::now().timestamp(),
            }),
        })
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes a key of any length.
        HmacSha256::new_from_slice(self.secret.as_bytes()).unwrap_or_else(|_| unreachable!())
    }

    fn sign(&self, timestamp: i64, message: &[u8]) -> String {
        let mut mac = self.mac();
        mac.update(message);
        format!(
            "t={timestamp},v1={}",
            hex::encode(mac.finalize().into_bytes())
        )
    }

    /// Whether `header` (`t=<unix s>[,n=<nonce>],v1=<hex>`) signs the
    /// message `message(timestamp, nonce)` within the tolerance.
    fn verify(
        &self,
        header: &str,
        now: i64,
        mut message: impl FnMut(i64, &str) -> Vec<u8>,
    ) -> bool {
        let mut timestamp = None;
        let mut nonce = "";
        let mut signature = None;
        for part in header.split(',') {
            match part.split_once('=') {
                Some(("t", value)) => timestamp = value.parse::<i64>().ok(),
                Some(("n", value)) => nonce = value,
                Some(("v1", value)) => signature = hex::decode(value).ok(),
                _ => {}
            }
        }
        let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
            return false;
        };
        let age = now - timestamp;
        if !(-FORWARD_CLOCK_AHEAD_S..=SIGNATURE_TOLERANCE_S).contains(&age) {
            return false;
        }
        let mut mac = self.mac();
        mac.update(&message(timestamp, nonce));
        mac.verify_slice(&signature).is_ok()
    }

    /// The signature header of a request forwarded now: a fresh nonce, so
    /// that the owner takes it once.
    pub fn sign_forwarded(&self, request: &Forwarded<'_>) -> String {
        let timestamp = chrono::Utc::now().timestamp();
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let signed = self.sign(timestamp, &request.message(timestamp, &nonce));
        signed.replacen(',', &format!(",n={nonce},"), 1)
    }

    /// Whether the request is a forward signed by a node for this node,
    /// unaltered, and not seen before.
    pub fn verify_forwarded(
        &self,
        header: &str,
        request: &Forwarded<'_>,
    ) -> Result<(), ForwardRefused> {
        // One reading of the clock for the signature's age and the nonce's
        // generation: the nonce is remembered as long as the age verifies.
        let now = chrono::Utc::now().timestamp();
        let mut used = None;
        let signed = self.verify(header, now, |timestamp, nonce| {
            used = Some((timestamp, nonce.to_owned()));
            request.message(timestamp, nonce)
        });
        let (timestamp, nonce) = used
            .filter(|(_, nonce)| signed && nonce.len() == NONCE_HEX_DIGITS)
            .and_then(|(timestamp, nonce)| {
                Some((timestamp, u128::from_str_radix(&nonce, 16).ok()?))
            })
            .ok_or(ForwardRefused::Invalid)?;
        let mut replays = self.replays.lock().unwrap_or_else(PoisonError::into_inner);
        // Signed before this process started: it cannot know whether an
        // earlier process took it. The sender's client may try again.
        if timestamp < replays.started_at {
            return Err(ForwardRefused::Busy);
        }
        replays.first_use(nonce, now)
    }

    /// A wake-up may come twice: waking an entity twice only looks twice.
    pub fn verify_wake(&self, header: &str, body: &[u8]) -> bool {
        let now = chrono::Utc::now().timestamp();
        self.verify(header, now, |timestamp, _| wake_message(timestamp, body))
    }
}

fn wake_message(timestamp: i64, body: &[u8]) -> Vec<u8> {
    let mut message = format!("{timestamp}.").into_bytes();
    message.extend_from_slice(body);
    message
}

impl Peers for Link {
    fn wake(
        &self,
        url: &str,
        kind: &'static str,
        id: &str,
    ) -> BoxFuture<'static, Result<(), WakeRefused>> {
        let body = match serde_json::to_vec(&Wake {
            kind: kind.to_owned(),
            id: id.to_owned(),
        }) {
            Ok(body) => body,
            Err(error) => {
                return Box::pin(std::future::ready(Err(WakeRefused::Final(
                    error.to_string(),
                ))))
            }
        };
        let timestamp = chrono::Utc::now().timestamp();
        let signature = self.sign(timestamp, &wake_message(timestamp, &body));
        let request = self
            .client
            .post(format!("{url}/internal/cluster/wake"))
            .header(WAKE_HEADER, signature)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .timeout(WAKE_TIMEOUT)
            .body(body);
        // The owner continues the trace of the work that asked.
        let request = tern_actors::trace::with_context(request, &tracing::Span::current());
        Box::pin(async move {
            match request.send().await {
                Ok(response) if response.status().is_success() => Ok(()),
                // Not the owner (any more), or not able to take it now.
                Ok(response) if response.status().is_server_error() => Err(WakeRefused::Retry(
                    format!("answered {}", response.status()),
                )),
                Ok(response) => Err(WakeRefused::Final(format!(
                    "answered {}",
                    response.status()
                ))),
                Err(error) => Err(WakeRefused::Retry(error.to_string())),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linked(secret: &str) -> Link {
        tern_actors::adapters::install_crypto_provider();
        Link::new(secret).expect("link")
    }

    const NODE_B: &str = "http://10.0.0.2:8080";

    fn request(body: &[u8]) -> Forwarded<'_> {
        Forwarded {
            to: NODE_B,
            method: "POST",
            path_and_query: "/v1/transfers",
            request_id: "r-1",
            client: "10.0.0.7".parse().ok(),
            headers: vec![
                "Bearer svc_a".into(),
                String::new(),
                "k-1".into(),
                "application/json".into(),
            ],
            body,
        }
    }

    #[test]
    fn a_forwarded_request_verifies_once_only_unaltered_and_with_the_same_secret() {
        let link = linked("a-cluster-secret-of-enough-length");
        let header = link.sign_forwarded(&request(b"{}"));
        let refused = |header: &str, request: &Forwarded<'_>| {
            link.verify_forwarded(header, request) == Err(ForwardRefused::Invalid)
        };
        // Altered copies are refused before the nonce is spent.
        assert!(refused(&header, &request(b"{ }")));
        let mut moved = request(b"{}");
        moved.path_and_query = "/v1/transfers/other";
        assert!(refused(&header, &moved));
        let mut rekeyed = request(b"{}");
        rekeyed.headers[2] = "k-2".into();
        assert!(refused(&header, &rekeyed));
        let mut elsewhere = request(b"{}");
        elsewhere.to = "http://10.0.0.3:8080";
        assert!(refused(&header, &elsewhere), "bound to its node");
        let stranger = linked("another-secret-of-enough-length!!");
        assert!(stranger.verify_forwarded(&header, &request(b"{}")).is_err());
        assert!(refused("t=1,v1=00", &request(b"{}")));
        assert!(refused("garbage", &request(b"{}")));
        let nonce = header
            .split(',')
            .find_map(|part| part.strip_prefix("n="))
            .expect("a nonce");
        let renonced = header.replace(nonce, &"f".repeat(NONCE_HEX_DIGITS));
        assert!(refused(&renonced, &request(b"{}")), "the nonce is signed");

        assert_eq!(link.verify_forwarded(&header, &request(b"{}")), Ok(()));
        assert!(refused(&header, &request(b"{}")), "a forward is taken once");
        let again = link.sign_forwarded(&request(b"{}"));
        assert_ne!(again, header, "each forward has its own nonce");
        assert_eq!(link.verify_forwarded(&again, &request(b"{}")), Ok(()));
    }

    #[test]
    fn a_nonce_is_remembered_as_long_as_its_signature_is_valid() {
        let mut replays = Replays {
            current: HashSet::new(),
            previous: HashSet::new(),
            rotated_at: 0,
            started_at: 0,
        };
        assert_eq!(replays.first_use(7, 1), Ok(()));
        for now in [2, REPLAY_GENERATION_S, 2 * REPLAY_GENERATION_S - 1] {
            assert_eq!(
                replays.first_use(7, now),
                Err(ForwardRefused::Invalid),
                "at {now}"
            );
        }
    }

    #[test]
    fn cluster_settings_are_checked_at_start() {
        let ttl = Duration::from_secs(5);
        let secret = Some("a-cluster-secret-of-enough-length".to_owned());
        let parsed =
            ClusterSettings::parse(ttl, secret.clone(), Some("http://10.0.0.1:8080/".into()))
                .expect("valid");
        assert_eq!(
            parsed.advertise_url.as_deref(),
            Some("http://10.0.0.1:8080")
        );
        let refused = |ttl, secret: Option<&str>, url: Option<&str>| {
            ClusterSettings::parse(ttl, secret.map(str::to_owned), url.map(str::to_owned))
                .expect_err("refused")
                .variable
        };
        assert_eq!(
            refused(Duration::from_millis(100), None, None),
            "TERN_LEASE_TTL"
        );
        assert_eq!(refused(ttl, Some("short"), None), "TERN_CLUSTER_SECRET");
        assert_eq!(
            refused(ttl, None, Some("10.0.0.1:8080")),
            "TERN_ADVERTISE_URL"
        );
        assert_eq!(refused(ttl, None, Some("ftp://x")), "TERN_ADVERTISE_URL");
    }

    #[test]
    fn an_old_signature_is_refused() {
        let link = linked("a-cluster-secret-of-enough-length");
        let old = chrono::Utc::now().timestamp() - SIGNATURE_TOLERANCE_S - 5;
        let nonce = "0".repeat(32);
        let header = link
            .sign(old, &request(b"{}").message(old, &nonce))
            .replacen(',', &format!(",n={nonce},"), 1);
        assert!(link.verify_forwarded(&header, &request(b"{}")).is_err());
        let ahead = chrono::Utc::now().timestamp() + FORWARD_CLOCK_AHEAD_S + 5;
        let header = link
            .sign(ahead, &request(b"{}").message(ahead, &nonce))
            .replacen(',', &format!(",n={nonce},"), 1);
        assert!(
            link.verify_forwarded(&header, &request(b"{}")).is_err(),
            "from too far ahead"
        );
    }
}

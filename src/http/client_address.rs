//! The client's address: the one function per-IP limits and the request log
//! use. Forwarding headers are believed only from TERN_TRUSTED_PROXIES, and
//! per-IP limits group IPv6 by /64 (one subscriber's allocation), so neither
//! a spoofed header nor a /64 of addresses buys more buckets.

use std::net::{IpAddr, Ipv6Addr};

use actix_web::http::header::HeaderMap;
use actix_web::{web, HttpRequest};
use ipnet::IpNet;

use crate::state::AppState;

/// Forwarding entries read at most, so a huge header costs little to walk.
pub const FORWARDED_HOPS_MAX: usize = 32;

/// Leading 16-bit groups of an IPv6 address that one per-IP bucket covers.
const IPV6_BUCKET_GROUPS: usize = 4;

/// The client address of `req`, or `None` when actix has no peer address.
pub fn client_ip(req: &HttpRequest) -> Option<IpAddr> {
    let trusted = req
        .app_data::<web::Data<AppState>>()
        .map(|state| state.config.trusted_proxies.as_slice())
        .unwrap_or_default();
    // A request another node forwarded, signed: the client it named.
    if let Some(forwarded) = actix_web::HttpMessage::extensions(req)
        .get::<crate::http::forward::ForwardedBy>()
        .copied()
    {
        if let Some(client) = forwarded.client {
            return Some(client);
        }
    }
    let peer = req.peer_addr()?.ip();
    Some(resolve(peer, req.headers(), trusted))
}

/// The client address as a per-IP rate-limit key.
pub fn client_ip_key(req: &HttpRequest) -> String {
    client_ip(req).map(limit_key).unwrap_or_default()
}

/// The bucket of an address: IPv4 as is, IPv6 by its /64.
pub fn limit_key(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let mut segments = v6.segments();
            segments[IPV6_BUCKET_GROUPS..].fill(0);
            format!("{}/64", Ipv6Addr::from(segments))
        }
    }
}

/// The client behind `peer`. Only a trusted peer's forwarding headers count;
/// they are walked from the right (the entry the nearest proxy appended)
/// past trusted proxies to the first address that is not one. Entries left
/// of it were written by the client and are never read.
///
/// `X-Forwarded-For` wins over `Forwarded` when both are present: it is what
/// load balancers append to. A proxy that writes `Forwarded` must drop a
/// client's `X-Forwarded-For` (README, deployments behind a load balancer).
pub fn resolve(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let peer = peer.to_canonical();
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let hops = forwarded_for(headers);
    let mut client = peer;
    for hop in hops.iter().rev().take(FORWARDED_HOPS_MAX) {
        // An entry a trusted proxy wrote that is not an address (`unknown`,
        // an obfuscated name): the nearest trusted hop is all that is known.
        let Some(ip) = hop else {
            return client;
        };
        client = ip.to_canonical();
        if !is_trusted(&client) {
            return client;
        }
    }
    client
}

/// The forwarding chain, left to right: every `X-Forwarded-For` line in
/// order, or else every `for=` of `Forwarded`. `None` marks an entry that is
/// not an address.
fn forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let items = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .flat_map(|value| {
                // A header that is not visible ASCII counts as one bad entry.
                let text = value.to_str().unwrap_or("\u{0}");
                text.split(',').map(|item| item.trim().to_owned())
            })
            .collect()
    };
    let x_forwarded_for = items("x-forwarded-for");
    if !x_forwarded_for.is_empty() {
        return x_forwarded_for
            .iter()
            .map(|item| parse_node(item))
            .collect();
    }
    items("forwarded")
        .iter()
        .map(|element| {
            let node = element.split(';').find_map(|pair| {
                let (name, value) = pair.split_once('=')?;
                name.trim()
                    .eq_ignore_ascii_case("for")
                    .then(|| value.trim().trim_matches('"'))
            });
            node.and_then(parse_node)
        })
        .collect()
}

/// An address as proxies write it: `192.0.2.1`, `192.0.2.1:4711`,
/// `2001:db8::1`, `[2001:db8::1]` or `[2001:db8::1]:4711`.
fn parse_node(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, _port) = rest.split_once(']')?;
        return inside.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    let (host, port) = text.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::{HeaderName, HeaderValue};

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    fn nets(spec: &str) -> Vec<IpNet> {
        crate::config::parse_trusted_proxies(spec).expect("valid")
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_static(name),
                HeaderValue::from_str(value).expect("header"),
            );
        }
        map
    }

    #[test]
    fn ipv6_in_one_64_share_a_bucket() {
        let a = limit_key(ip("2001:db8:1:2::1"));
        let b = limit_key(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"));
        assert_eq!(a, b);
        assert_eq!(a, "2001:db8:1:2::/64");
        assert_ne!(a, limit_key(ip("2001:db8:1:3::1")));
        assert_eq!(limit_key(ip("192.0.2.7")), "192.0.2.7");
        assert_ne!(limit_key(ip("192.0.2.7")), limit_key(ip("192.0.2.8")));
        // A v4 peer on a dual-stack socket is the v4 address.
        assert_eq!(limit_key(ip("::ffff:192.0.2.7")), "192.0.2.7");
    }

    #[test]
    fn headers_from_an_untrusted_peer_are_ignored() {
        let spoofed = headers(&[
            ("x-forwarded-for", "198.51.100.1"),
            ("forwarded", "for=198.51.100.2"),
        ]);
        assert_eq!(resolve(ip("203.0.113.9"), &spoofed, &[]), ip("203.0.113.9"));
        let other_proxy = nets("10.0.0.0/8");
        assert_eq!(
            resolve(ip("203.0.113.9"), &spoofed, &other_proxy),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn a_trusted_chain_is_walked_from_the_right() {
        let trusted = nets("10.0.0.0/8");
        // The client wrote 1.1.1.1 itself; the edge proxy appended the real
        // client, the inner proxy appended the edge proxy.
        let chain = headers(&[("x-forwarded-for", "1.1.1.1, 198.51.100.7, 10.0.0.5")]);
        assert_eq!(
            resolve(ip("10.0.0.6"), &chain, &trusted),
            ip("198.51.100.7")
        );
        let split = headers(&[
            ("x-forwarded-for", "1.1.1.1"),
            ("x-forwarded-for", "198.51.100.7:5123"),
        ]);
        assert_eq!(
            resolve(ip("10.0.0.6"), &split, &trusted),
            ip("198.51.100.7")
        );
        let garbage = headers(&[("x-forwarded-for", "1.1.1.1, unknown, 10.0.0.5")]);
        assert_eq!(resolve(ip("10.0.0.6"), &garbage, &trusted), ip("10.0.0.5"));
        let none = HeaderMap::new();
        assert_eq!(resolve(ip("10.0.0.6"), &none, &trusted), ip("10.0.0.6"));
    }

    #[test]
    fn forwarded_is_read_when_there_is_no_x_forwarded_for() {
        let trusted = nets("10.0.0.0/8");
        let forwarded = headers(&[(
            "forwarded",
            "for=1.1.1.1, for=\"[2001:db8:cafe::17]:4711\";proto=https, for=10.0.0.5",
        )]);
        assert_eq!(
            resolve(ip("10.0.0.6"), &forwarded, &trusted),
            ip("2001:db8:cafe::17")
        );
        let both = headers(&[
            ("forwarded", "for=1.1.1.1"),
            ("x-forwarded-for", "198.51.100.7"),
        ]);
        assert_eq!(resolve(ip("10.0.0.6"), &both, &trusted), ip("198.51.100.7"));
    }

    #[test]
    fn a_long_chain_of_trusted_hops_stops_at_the_bound() {
        let trusted = nets("10.0.0.0/8");
        let long: Vec<String> = (0..1_000)
            .map(|n| format!("10.0.{}.{}", n / 250, n % 250))
            .collect();
        let chain = format!("1.1.1.1, {}", long.join(", "));
        let resolved = resolve(
            ip("10.0.0.6"),
            &headers(&[("x-forwarded-for", chain.as_str())]),
            &trusted,
        );
        assert!(trusted[0].contains(&resolved), "{resolved}");
    }
}

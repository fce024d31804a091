//! The SSRF guard (decisions §8): a webhook is never delivered to loopback,
//! private, link-local, unique-local, multicast or cloud-metadata addresses
//! unless the operator allows private targets. Names are checked where they
//! are resolved, inside the HTTP client's connector, so the address checked
//! is the address connected to (no re-resolution in between).

use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why an address may not be a webhook target; `None` when it may.
pub fn refusal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => refusal_v6(v6),
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() || a == 0 => "unspecified",
        // 169.254.169.254 and friends: the cloud metadata services.
        _ if ip.is_link_local() => "link-local (cloud metadata)",
        _ if ip.is_private() => "private",
        // Shared address space, where 100.100.100.200 is a metadata service.
        (100, 64..=127, _) => "shared (carrier-grade NAT)",
        (192, 0, 0) => "IETF protocol assignment",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (192, 88, 99) => "6to4 relay anycast",
        (198, 18..=19, _) => "benchmarking",
        _ if ip.is_multicast() => "multicast",
        _ if ip.is_broadcast() || a >= 240 => "reserved",
        _ => return None,
    })
}

fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(carried) = embedded_v4(ip) {
        // A relay or the host's own tunnel sends such a packet to the IPv4
        // address it carries, so that address is what is judged. Teredo
        // carries two (its server's and, inverted, its client's): both are.
        return carried.into_iter().flatten().find_map(refusal_v4);
    }
    let segments = ip.segments();
    Some(match segments[0] {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() => "unspecified",
        // fc00::/7, where fd00:ec2::254 is a metadata service.
        first if first & 0xfe00 == 0xfc00 => "unique-local",
        first if first & 0xffc0 == 0xfe80 => "link-local",
        // fec0::/10, deprecated site-local, still routed inside some sites.
        first if first & 0xffc0 == 0xfec0 => "site-local",
        first if first & 0xff00 == 0xff00 => "multicast",
        // 100::/64, the discard prefix.
        0x0100 if segments[1..4] == [0, 0, 0] => "discard",
        // 2001:db8::/32, documentation; 2001:2::/48, benchmarking;
        // 2001:10::/28 and 2001:20::/28, ORCHID identifiers.
        0x2001 if segments[1] == 0x0db8 => "documentation",
        0x2001 if segments[1] == 0x0002 && segments[2] == 0 => "benchmarking",
        0x2001 if segments[1] & 0xfff0 == 0x0010 || segments[1] & 0xfff0 == 0x0020 => "ORCHID",
        // 64:ff9b:1::/48, local-use NAT64 (RFC 8215): where it puts the IPv4
        // address depends on a prefix length only its site knows.
        0x0064 if segments[1] == 0xff9b && segments[2] == 1 => "local-use NAT64",
        _ => return None,
    })
}

/// The IPv4 addresses an IPv6 address carries and hands to IPv4 on the way:
/// IPv4-mapped and IPv4-compatible (::/96), IPv4-translated
/// (::ffff:0:0/96), NAT64 (64:ff9b::/96), 6to4 (2002::/16), Teredo
/// (2001::/32: server, and client with its bits inverted) and ISATAP
/// (an interface id of `0:5efe` or `200:5efe`).
fn embedded_v4(ip: Ipv6Addr) -> Option<[Option<Ipv4Addr>; 2]> {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    let one = |addr: Ipv4Addr| Some([Some(addr), None]);
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return one(mapped);
    }
    match s {
        // ::1 and :: are judged as themselves, not as 0.0.0.1 and 0.0.0.0.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, hi, lo] => one(v4(hi, lo)),
        [0, 0, 0, 0, 0xffff, 0, hi, lo] => one(v4(hi, lo)),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => one(v4(hi, lo)),
        [0x2002, hi, lo, ..] => one(v4(hi, lo)),
        [0x2001, 0, server_hi, server_lo, _, _, client_hi, client_lo] => Some([
            Some(v4(server_hi, server_lo)),
            Some(v4(!client_hi, !client_lo)),
        ]),
        [_, _, _, _, 0 | 0x0200, 0x5efe, hi, lo] => one(v4(hi, lo)),
        _ => None,
    }
}

/// The text a refused delivery or endpoint URL records.
pub const REFUSED_TEXT: &str = "refused: private or reserved address";

/// A target refused by the guard.
#[derive(Debug)]
pub struct Refused {
    pub host: String,
    pub ip: IpAddr,
    pub reason: &'static str,
}

/// What a merchant reads: nothing of which address a name resolved to, or
/// why it is internal, since that would map the network behind Tern.
impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REFUSED_TEXT)
    }
}

impl Refused {
    /// What an operator reads in the log: the name, the address it
    /// resolved to, and why that address is refused.
    pub fn detail(&self) -> String {
        format!(
            "{} resolved to {}, a {} address",
            self.host, self.ip, self.reason
        )
    }
}

impl StdError for Refused {}

/// Checks an IP-literal host, which the client connects to without
/// resolving; names pass here and are checked by [`GuardedResolver`].
pub fn check_host(host: &url::Host<&str>, allow_private: bool) -> Result<(), Refused> {
    let ip = match host {
        url::Host::Ipv4(ip) => IpAddr::V4(*ip),
        url::Host::Ipv6(ip) => IpAddr::V6(*ip),
        url::Host::Domain(_) => return Ok(()),
    };
    match refusal(ip) {
        Some(reason) if !allow_private => Err(Refused {
            host: ip.to_string(),
            ip,
            reason,
        }),
        _ => Ok(()),
    }
}

/// The webhook client's resolver: the system's, with every answer checked.
/// A name with any refused address is refused as a whole, so that a name
/// cannot mix a public address with an internal one.
#[derive(Clone, Debug)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !allow_private {
                if let Some((ip, reason)) = found
                    .iter()
                    .find_map(|addr| refusal(addr.ip()).map(|reason| (addr.ip(), reason)))
                {
                    return Err(Box::new(Refused { host, ip, reason }) as Box<_>);
                }
            }
            Ok(Box::new(found.into_iter()) as Addrs)
        })
    }
}

/// The guard's refusal in an error's chain of sources, if that is what it is.
pub fn refused_in(error: &(dyn StdError + 'static)) -> Option<String> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(refused) = error.downcast_ref::<Refused>() {
            tracing::warn!(detail = %refused.detail(), "webhook target refused");
            return Some(refused.to_string());
        }
        current = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> bool {
        text.parse::<IpAddr>()
            .map(|ip| refusal(ip).is_some())
            .unwrap_or(false)
    }

    #[test]
    fn internal_addresses_are_refused() {
        for ip in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "192.0.0.170",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "fd00:ec2::254",
            "fc00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2002:a00:1::",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            "2001:0:a00:1:8000:63bf:f7f7:f7f7",
            "2001:4860::5efe:a00:1",
            "2001:4860::200:5efe:c0a8:101",
            "::a00:1",
            "::2",
            "::ffff:0:a00:1",
            "fec0::1",
            "100::1",
            "2001:db8::1",
            "192.0.2.1",
        ] {
            assert!(refused(ip), "{ip} must be refused");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:93.184.216.34",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
            "2001:4860::5efe:808:808",
            "::808:808",
        ] {
            assert!(!refused(ip), "{ip} must pass");
        }
    }

    #[test]
    fn literal_hosts_are_checked_and_names_left_to_the_resolver() {
        let url = url::Url::parse("https://127.0.0.1:8443/hook").ok();
        let host = url.as_ref().and_then(|url| url.host());
        let host = host.unwrap_or(url::Host::Domain("x"));
        let refused = check_host(&host, false).err().map(|e| e.to_string());
        assert_eq!(refused.as_deref(), Some(REFUSED_TEXT));
        assert!(check_host(&host, true).is_ok());
        assert!(check_host(&url::Host::Domain("localhost"), false).is_ok());
    }

    #[actix_rt::test]
    async fn the_resolver_refuses_names_of_internal_addresses() {
        let resolver = GuardedResolver {
            allow_private: false,
        };
        let name: Name = match "localhost".parse() {
            Ok(name) => name,
            Err(_) => panic!("localhost is a name"),
        };
        let error = match resolver.resolve(name).await {
            Ok(_) => panic!("localhost must be refused"),
            Err(error) => error,
        };
        let text = refused_in(error.as_ref()).unwrap_or_default();
        assert_eq!(
            text, REFUSED_TEXT,
            "no resolved address in what merchants read"
        );
        let allowed = GuardedResolver {
            allow_private: true,
        };
        let name: Name = match "localhost".parse() {
            Ok(name) => name,
            Err(_) => panic!("localhost is a name"),
        };
        assert!(allowed.resolve(name).await.is_ok());
    }
}

//! The network policy as data: which mode, which hosts, which address overrides; the
//! allow-list matcher and the address classifier. Pure: no sockets, no lookups, unit-tested.
//!
//! # Rules (README.md, "Network", says the same for users)
//!
//! - An entry is `HOST[:PORT]`: `example.org` (that name only), `*.example.org` (any name
//!   strictly below it, not `example.org` itself), an IPv4 literal `192.0.2.7`, or an IPv6
//!   literal in brackets `[2001:db8::1]`. Without a port an entry admits ports 80 and 443.
//! - Names are compared case-insensitively, without a trailing dot.
//! - A request for a name is admitted when an entry matches the name and the port. The proxy
//!   then resolves the name itself (an `--net-resolve NAME=IP` override first; `localhost` is
//!   always 127.0.0.1 and ::1 and never looked up) and refuses every address that is loopback,
//!   link-local, private (RFC 1918, ULA), CGNAT, a cloud metadata address, unspecified,
//!   multicast, broadcast or reserved — unless an IP-literal entry names that very address
//!   (with a matching port), or the entry that admitted the name is `localhost` (which admits
//!   loopback addresses only). Overrides are a resolver, like `curl --resolve`: they grant
//!   nothing by themselves.
//! - A request for an IP literal is admitted only when an IP-literal entry names it; such an
//!   entry may then be anything, loopback included: the caller wrote it down.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Ports an entry without a port admits.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];
/// Longest allow-list accepted (entries), and longest host name (RFC 1035: 253).
pub const MAX_ENTRIES: usize = 256;
pub const MAX_NAME_LEN: usize = 253;

/// How the sandbox reaches the network.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Network {
    /// Its own network namespace with only `lo`: nothing outside is reachable.
    #[default]
    None,
    /// Its own network namespace with only `lo`, plus cordon's filtering HTTP(S) proxy.
    Allow(AllowList),
    /// The host's network namespace, unfiltered.
    Host,
}

impl Network {
    /// The mode's name, as the result reports it.
    pub fn mode(&self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Allow(_) => "allow",
            Network::Host => "host",
        }
    }
}

/// What `allow=` admits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllowList {
    pub entries: Vec<Entry>,
    /// `--net-resolve NAME=IP`: the proxy's answers for these names (no lookup).
    pub overrides: Vec<(String, IpAddr)>,
    /// Log every admitted and refused connection on cordon's stderr (`--net-log`).
    pub log: bool,
}

/// One allow-list entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub host: HostPattern,
    /// `None`: [`DEFAULT_PORTS`].
    pub port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// One name, lower case, no trailing dot.
    Exact(String),
    /// `*.suffix`: names strictly below `suffix` (stored lower case, without `*.`).
    Below(String),
    /// An address literal.
    Ip(IpAddr),
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Exact(n) => write!(f, "{n}")?,
            HostPattern::Below(s) => write!(f, "*.{s}")?,
            HostPattern::Ip(IpAddr::V4(a)) => write!(f, "{a}")?,
            HostPattern::Ip(IpAddr::V6(a)) => write!(f, "[{a}]")?,
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

/// Why a policy string is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag} {value:?}: {reason}")]
pub struct PolicyError {
    /// The option the value was given to (`--net`, `--net-resolve`).
    pub flag: &'static str,
    pub value: String,
    pub reason: String,
}

fn perr(value: &str, reason: impl Into<String>) -> PolicyError {
    PolicyError {
        flag: "--net",
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Parses `none`, `host` or `allow=HOST[:PORT][,...]`.
pub fn parse_network(s: &str) -> Result<Network, PolicyError> {
    match s {
        "none" => Ok(Network::None),
        "host" => Ok(Network::Host),
        _ => match s.strip_prefix("allow=") {
            Some(list) => Ok(Network::Allow(AllowList {
                entries: parse_allow_list(list)?,
                ..AllowList::default()
            })),
            None => Err(perr(
                s,
                "give `none`, `host`, or `allow=HOST[:PORT][,HOST...]` (e.g. allow=pypi.org,*.example.org:8443)",
            )),
        },
    }
}

/// Parses a comma-separated allow-list (at least one entry).
pub fn parse_allow_list(list: &str) -> Result<Vec<Entry>, PolicyError> {
    let entries: Vec<Entry> = list
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(parse_entry)
        .collect::<Result<_, _>>()?;
    if entries.is_empty() {
        return Err(perr(
            list,
            "the allow-list is empty; name at least one host",
        ));
    }
    if entries.len() > MAX_ENTRIES {
        return Err(perr(list, format!("more than {MAX_ENTRIES} entries")));
    }
    Ok(entries)
}

/// Parses one `HOST[:PORT]` entry.
pub fn parse_entry(e: &str) -> Result<Entry, PolicyError> {
    // A URL (`https://pypi.org/simple`) instead of a host: say so, not "bad port".
    if let Some((_, rest)) = e.split_once("://") {
        let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        return Err(perr(
            e,
            format!(
                "give a host name, not a URL: `{host}` (ports 80 and 443 are allowed by default; add `:PORT` for another)"
            ),
        ));
    }
    let (host, port) = if let Some(rest) = e.strip_prefix('[') {
        let (addr, after) = rest
            .split_once(']')
            .ok_or_else(|| perr(e, "an IPv6 literal needs its closing `]`"))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| perr(e, "expected `:PORT` after `]`"))?,
            ),
        };
        let ip: Ipv6Addr = addr
            .parse()
            .map_err(|_| perr(e, "not an IPv6 address inside `[...]`"))?;
        (HostPattern::Ip(IpAddr::V6(ip)), port)
    } else {
        let (h, p) = match e.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            Some(_) => {
                return Err(perr(
                    e,
                    "write an IPv6 literal in brackets: [2001:db8::1]:443",
                ));
            }
            None => (e, None),
        };
        let host = if let Ok(ip) = h.parse::<Ipv4Addr>() {
            HostPattern::Ip(IpAddr::V4(ip))
        } else if let Some(suffix) = h.strip_prefix("*.") {
            HostPattern::Below(check_name(suffix).map_err(|r| perr(e, r))?)
        } else {
            HostPattern::Exact(check_name(h).map_err(|r| perr(e, r))?)
        };
        (host, p)
    };
    let port = match port {
        None => None,
        Some(p) => Some(
            p.parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| perr(e, "the port must be a number from 1 to 65535"))?,
        ),
    };
    Ok(Entry { host, port })
}

/// Checks a host name (letters, digits, `-`, `_`, dots between labels) and normalises it to
/// lower case without a trailing dot.
pub fn check_name(name: &str) -> Result<String, String> {
    let n = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if n.is_empty() || n.len() > MAX_NAME_LEN {
        return Err("a host name must have 1 to 253 characters".into());
    }
    for label in n.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err("each label of a host name must have 1 to 63 characters".into());
        }
        if !label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err("a host name may only hold letters, digits, `-`, `_` and dots (wildcards only as a leading `*.`)".into());
        }
    }
    // Dotted quads, and the forms glibc's resolver also reads as IPv4 (`2130706433`,
    // `0x7f.1`, `127.1`, `0177.0.0.1`, with or without a trailing dot): no host name is all
    // digits, or hex, so such a "name" is refused rather than handed to getaddrinfo.
    if looks_numeric(&n) {
        return Err("a numeric host is not a name (write an IPv4 address as a dotted quad)".into());
    }
    Ok(n)
}

/// Parses `NAME=IP` (`--net-resolve`).
pub fn parse_override(s: &str) -> Result<(String, IpAddr), PolicyError> {
    resolver_override(s).map_err(|e| PolicyError {
        flag: "--net-resolve",
        ..e
    })
}

fn resolver_override(s: &str) -> Result<(String, IpAddr), PolicyError> {
    let (name, ip) = s
        .split_once('=')
        .ok_or_else(|| perr(s, "write a resolver override as NAME=IP"))?;
    let name = check_name(name).map_err(|r| perr(s, r))?;
    let ip = ip
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .map_err(|_| perr(s, "not an IP address after `=`"))?;
    Ok((name, ip))
}

/// What a request names: a host name or an address literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Name(String),
    Ip(IpAddr),
}

/// Parses the host part of a request (`CONNECT host:port` or an absolute URI's authority).
pub fn parse_target(host: &str) -> Result<Target, String> {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner
            .parse::<Ipv6Addr>()
            .map(|a| Target::Ip(IpAddr::V6(a)))
            .map_err(|_| "not an IPv6 address".into());
    }
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(Target::Ip(IpAddr::V4(ip)));
    }
    // Forms glibc would read as IPv4 (`2130706433`, `0x7f.1`, `127.1`, also with a trailing
    // dot) are refused outright rather than guessed at (see `check_name`).
    if looks_numeric(host.strip_suffix('.').unwrap_or(host)) {
        return Err("a numeric host that is not a dotted-quad IPv4 address".into());
    }
    check_name(host).map(Target::Name)
}

/// Whether every label is decimal digits or `0x` hex: what inet_aton would read as IPv4.
fn looks_numeric(host: &str) -> bool {
    host.split('.').all(|l| {
        let l = l.to_ascii_lowercase();
        !l.is_empty()
            && (l.chars().all(|c| c.is_ascii_digit())
                || l.strip_prefix("0x")
                    .is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit())))
    })
}

/// The allow-list's verdict on a request, before any lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// A name matched an entry. `loopback_ok`: the entry was `localhost`.
    Name { loopback_ok: bool },
    /// An IP literal matched an IP-literal entry.
    Ip,
}

fn port_ok(entry: &Entry, port: u16) -> bool {
    match entry.port {
        Some(p) => p == port,
        None => DEFAULT_PORTS.contains(&port),
    }
}

impl AllowList {
    /// Whether the allow-list admits `target:port` (no lookup happens here, so a refused name
    /// is never resolved: lookups cannot carry data out).
    pub fn admit(&self, target: &Target, port: u16) -> Result<Admission, String> {
        match target {
            Target::Ip(ip) => {
                if self.ip_listed(*ip, port) {
                    Ok(Admission::Ip)
                } else {
                    Err(format!(
                        "direct IP address {ip} is not in the allow-list (name the host, or list the address explicitly)"
                    ))
                }
            }
            Target::Name(name) => {
                let mut name_matched = false;
                for e in &self.entries {
                    let m = match &e.host {
                        HostPattern::Exact(n) => n == name,
                        HostPattern::Below(s) => {
                            name.len() > s.len() + 1
                                && name.ends_with(s.as_str())
                                && name.as_bytes()[name.len() - s.len() - 1] == b'.'
                        }
                        HostPattern::Ip(_) => false,
                    };
                    if m {
                        name_matched = true;
                        if port_ok(e, port) {
                            return Ok(Admission::Name {
                                loopback_ok: matches!(&e.host, HostPattern::Exact(n) if n == "localhost"),
                            });
                        }
                    }
                }
                if name_matched {
                    Err(format!("port {port} is not allowed for {name}"))
                } else {
                    Err(format!("{name} is not in the allow-list"))
                }
            }
        }
    }

    /// Whether an IP-literal entry names `ip` with a port admitting `port`. Only the
    /// IPv4-mapped form (`::ffff:a.b.c.d`, the same socket destination) counts as the listed
    /// IPv4 address: a 6to4, NAT64 or IPv4-compatible address merely carrying it is another
    /// destination (a relay, a translator, a whole /48 of hosts) that nobody listed.
    pub fn ip_listed(&self, ip: IpAddr, port: u16) -> bool {
        let ip = ip.to_canonical();
        self.entries.iter().any(|e| {
            matches!(e.host, HostPattern::Ip(a) if a.to_canonical() == ip) && port_ok(e, port)
        })
    }

    /// Checks one resolved address of an admitted name: `Ok` to connect, or the reason not to.
    pub fn check_address(
        &self,
        ip: IpAddr,
        port: u16,
        admission: &Admission,
    ) -> Result<(), String> {
        if matches!(admission, Admission::Ip) || self.ip_listed(ip, port) {
            return Ok(());
        }
        match classify(ip) {
            None => Ok(()),
            Some(AddrClass::Loopback)
                if matches!(admission, Admission::Name { loopback_ok: true }) =>
            {
                Ok(())
            }
            Some(class) => Err(format!(
                "resolves to {ip}, a {} address; list that address explicitly to allow it",
                class.as_str()
            )),
        }
    }

    /// Checks that a resolved address is not one of this host's own (`local`, its interfaces'
    /// addresses): a public address of the host reaches every service listening on all
    /// interfaces, which is the host's loopback by another name. Allowed only when listed
    /// explicitly, when the request was for that very literal, or for loopback under a
    /// `localhost` entry.
    pub fn check_not_local(
        &self,
        ip: IpAddr,
        port: u16,
        admission: &Admission,
        local: &[IpAddr],
    ) -> Result<(), String> {
        let c = ip.to_canonical();
        if matches!(admission, Admission::Ip)
            || self.ip_listed(ip, port)
            || !local.iter().any(|l| l.to_canonical() == c)
            || (c.is_loopback() && matches!(admission, Admission::Name { loopback_ok: true }))
        {
            return Ok(());
        }
        Err(format!(
            "resolves to {ip}, an address of this host; list that address explicitly to allow it"
        ))
    }

    /// The override for `name`, if any.
    pub fn override_for(&self, name: &str) -> Option<IpAddr> {
        self.overrides
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, ip)| *ip)
    }
}

/// Kinds of addresses a name may not resolve to unless allowed explicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrClass {
    Unspecified,
    Loopback,
    LinkLocal,
    Private,
    Cgnat,
    Metadata,
    Multicast,
    Broadcast,
    Reserved,
}

impl AddrClass {
    pub fn as_str(self) -> &'static str {
        match self {
            AddrClass::Unspecified => "unspecified",
            AddrClass::Loopback => "loopback",
            AddrClass::LinkLocal => "link-local",
            AddrClass::Private => "private",
            AddrClass::Cgnat => "carrier-grade NAT",
            AddrClass::Metadata => "cloud metadata",
            AddrClass::Multicast => "multicast",
            AddrClass::Broadcast => "broadcast",
            AddrClass::Reserved => "reserved",
        }
    }
}

/// An IPv6 address that carries an IPv4 one (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`,
/// NAT64 `64:ff9b::/96`, 6to4 `2002:AABB:CCDD::/48`) reduced to that IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => embedded_v4(a).map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

fn embedded_v4(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = a.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if let Some(v4) = a.to_ipv4_mapped() {
        return Some(v4);
    }
    // IPv4-compatible (deprecated), but not :: and ::1 themselves.
    if s[..6] == [0; 6] && (s[6] != 0 || s[7] > 1) {
        return Some(tail);
    }
    // IPv4-translated (SIIT) `::ffff:0:a.b.c.d`, and well-known-prefix NAT64.
    if s[..6] == [0, 0, 0, 0, 0xffff, 0] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

/// Classifies an address: `None` for an ordinary public unicast address.
pub fn classify(ip: IpAddr) -> Option<AddrClass> {
    match canonical(ip) {
        IpAddr::V4(a) => {
            let o = a.octets();
            // AWS/GCP/Azure IMDS, Alibaba's, and Azure's WireServer (168.63.129.16: a public
            // address, which the guest agent firewalls to root, and the proxy may run as root).
            if a == Ipv4Addr::new(169, 254, 169, 254)
                || a == Ipv4Addr::new(100, 100, 100, 200)
                || a == Ipv4Addr::new(168, 63, 129, 16)
            {
                Some(AddrClass::Metadata)
            } else if o[0] == 0 {
                Some(AddrClass::Unspecified)
            } else if o[0] == 127 {
                Some(AddrClass::Loopback)
            } else if o[0] == 169 && o[1] == 254 {
                Some(AddrClass::LinkLocal)
            } else if o[0] == 10
                || (o[0] == 172 && (16..32).contains(&o[1]))
                || (o[0] == 192 && o[1] == 168)
            {
                Some(AddrClass::Private)
            } else if o[0] == 100 && (64..128).contains(&o[1]) {
                Some(AddrClass::Cgnat)
            } else if a.is_broadcast() {
                Some(AddrClass::Broadcast)
            } else if a.is_multicast() {
                Some(AddrClass::Multicast)
            } else if o[0] >= 240
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (o[1] == 18 || o[1] == 19))
            {
                // 240/4 reserved, 192.0.0/24 IETF protocol assignments, 198.18/15 benchmarking.
                Some(AddrClass::Reserved)
            } else {
                None
            }
        }
        IpAddr::V6(a) => {
            let s = a.segments();
            if a == "fd00:ec2::254"
                .parse::<Ipv6Addr>()
                .unwrap_or(Ipv6Addr::UNSPECIFIED)
            {
                Some(AddrClass::Metadata)
            } else if a.is_unspecified() {
                Some(AddrClass::Unspecified)
            } else if a.is_loopback() {
                Some(AddrClass::Loopback)
            } else if s[0] & 0xffc0 == 0xfe80 {
                Some(AddrClass::LinkLocal)
            } else if s[0] & 0xfe00 == 0xfc00
                || s[0] & 0xffc0 == 0xfec0
                || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1)
            {
                // ULA fc00::/7, the deprecated site-local fec0::/10, and local-use NAT64
                // 64:ff9b:1::/48 (RFC 8215: it translates into the site's own IPv4 space).
                Some(AddrClass::Private)
            } else if a.is_multicast() {
                Some(AddrClass::Multicast)
            } else if s[0] == 0x100 && s[1..4] == [0, 0, 0] {
                // 100::/64 discard-only.
                Some(AddrClass::Reserved)
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> AllowList {
        AllowList {
            entries: parse_allow_list(s).unwrap(),
            ..AllowList::default()
        }
    }
    fn name(n: &str) -> Target {
        Target::Name(n.into())
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn parses_modes_and_entries() {
        assert_eq!(parse_network("none").unwrap(), Network::None);
        assert_eq!(parse_network("host").unwrap(), Network::Host);
        let Network::Allow(a) =
            parse_network("allow=PyPI.org.,*.example.org:8443,[::1]:80,10.0.0.1").unwrap()
        else {
            panic!()
        };
        assert_eq!(a.entries[0].host, HostPattern::Exact("pypi.org".into()));
        assert_eq!(a.entries[0].port, None);
        assert_eq!(a.entries[1].host, HostPattern::Below("example.org".into()));
        assert_eq!(a.entries[1].port, Some(8443));
        assert_eq!(a.entries[2].host, HostPattern::Ip(ip("::1")));
        assert_eq!(a.entries[3].host, HostPattern::Ip(ip("10.0.0.1")));
        assert_eq!(a.entries[1].to_string(), "*.example.org:8443");
        for bad in [
            "allow=",
            "allow=,",
            "allow=a:0",
            "allow=a:70000",
            "allow=a:b",
            "allow=::1",
            "allow=[::1",
            "allow=a*.b",
            "allow=*",
            "allow=a b",
            "allow=a..b",
            "allow=x/y",
            "open",
            "allow",
        ] {
            assert!(parse_network(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_override("Test.Local=127.0.0.1").unwrap(),
            ("test.local".into(), ip("127.0.0.1"))
        );
        assert!(parse_override("x").is_err());
        assert!(parse_override("x=nope").is_err());
        // A URL is named as one, with the host to give instead.
        for (url, host) in [
            ("allow=https://pypi.org/simple/", "`pypi.org`"),
            ("allow=http://example.org:8080", "`example.org:8080`"),
        ] {
            let e = parse_network(url).unwrap_err().to_string();
            assert!(e.contains("not a URL") && e.contains(host), "{e}");
        }
    }

    #[test]
    fn matcher_exact_wildcard_ports() {
        let a = list("pypi.org,*.example.org:8443,files.pythonhosted.org:443");
        assert!(a.admit(&name("pypi.org"), 443).is_ok());
        assert!(a.admit(&name("pypi.org"), 80).is_ok());
        let e = a.admit(&name("pypi.org"), 8080).unwrap_err();
        assert!(e.contains("port 8080"), "{e}");
        assert!(a.admit(&name("evil-pypi.org"), 443).is_err());
        assert!(a.admit(&name("pypi.org.evil.com"), 443).is_err());
        assert!(a.admit(&name("sub.pypi.org"), 443).is_err());
        assert!(a.admit(&name("a.example.org"), 8443).is_ok());
        assert!(a.admit(&name("a.b.example.org"), 8443).is_ok());
        assert!(a.admit(&name("example.org"), 8443).is_err());
        assert!(a.admit(&name("badexample.org"), 8443).is_err());
        assert!(a.admit(&name("a.example.org"), 443).is_err());
        assert!(a.admit(&name("files.pythonhosted.org"), 80).is_err());
        // IP literals: only when listed.
        let e = a.admit(&Target::Ip(ip("1.1.1.1")), 443).unwrap_err();
        assert!(e.contains("direct IP"), "{e}");
        let b = list("1.1.1.1:443,[2001:db8::1]");
        assert_eq!(b.admit(&Target::Ip(ip("1.1.1.1")), 443), Ok(Admission::Ip));
        assert!(b.admit(&Target::Ip(ip("1.1.1.1")), 80).is_err());
        assert!(b.admit(&Target::Ip(ip("::ffff:1.1.1.1")), 443).is_ok());
        assert!(b.admit(&Target::Ip(ip("2001:db8::1")), 80).is_ok());
        // Listing an IPv4 address admits its mapped form only, not the other IPv6 addresses
        // that embed it (6to4 /48s, NAT64, IPv4-compatible): other destinations.
        let c = list("127.0.0.1:9000");
        assert!(c.admit(&Target::Ip(ip("::ffff:127.0.0.1")), 9000).is_ok());
        for other in [
            "2002:7f00:1::5",
            "2002:7f00:1::",
            "64:ff9b::7f00:1",
            "::7f00:1",
        ] {
            assert!(c.admit(&Target::Ip(ip(other)), 9000).is_err(), "{other}");
            let adm = Admission::Name { loopback_ok: false };
            assert!(c.check_address(ip(other), 9000, &adm).is_err(), "{other}");
        }
    }

    #[test]
    fn resolved_addresses_are_checked() {
        let a = list("pypi.org,localhost:8080,127.0.0.1:9000,evil.test:9000");
        let adm = a.admit(&name("pypi.org"), 443).unwrap();
        assert!(a.check_address(ip("151.101.0.223"), 443, &adm).is_ok());
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            "224.0.0.1",
            "255.255.255.255",
        ] {
            let e = a.check_address(ip(bad), 443, &adm).unwrap_err();
            assert!(e.contains("resolves to"), "{bad}: {e}");
        }
        // `localhost` admits loopback, and only loopback.
        let adm = a.admit(&name("localhost"), 8080).unwrap();
        assert_eq!(adm, Admission::Name { loopback_ok: true });
        assert!(a.check_address(ip("127.0.0.1"), 8080, &adm).is_ok());
        assert!(a.check_address(ip("::1"), 8080, &adm).is_ok());
        assert!(a.check_address(ip("10.0.0.1"), 8080, &adm).is_err());
        // A name resolving to an explicitly listed address (and port) is admitted.
        let adm = a.admit(&name("evil.test"), 9000).unwrap();
        assert!(a.check_address(ip("127.0.0.1"), 9000, &adm).is_ok());
        assert!(a.check_address(ip("127.0.0.2"), 9000, &adm).is_err());
    }

    #[test]
    fn the_hosts_own_addresses_are_refused() {
        let a = list("example.org,localhost:8080,198.51.100.7:8443");
        let local = [ip("198.51.100.7"), ip("2001:db8::7"), ip("127.0.0.1")];
        let adm = a.admit(&name("example.org"), 443).unwrap();
        assert!(
            a.check_not_local(ip("203.0.113.1"), 443, &adm, &local)
                .is_ok()
        );
        for own in ["198.51.100.7", "::ffff:198.51.100.7", "2001:db8::7"] {
            let e = a.check_not_local(ip(own), 443, &adm, &local).unwrap_err();
            assert!(e.contains("an address of this host"), "{own}: {e}");
        }
        // Listed (address and port), or asked for as that literal: the caller wrote it down.
        let adm8443 = Admission::Name { loopback_ok: false };
        assert!(
            a.check_not_local(ip("198.51.100.7"), 8443, &adm8443, &local)
                .is_ok()
        );
        assert!(
            a.check_not_local(ip("2001:db8::7"), 443, &Admission::Ip, &local)
                .is_ok()
        );
        // `localhost` reaches loopback, not the host's other addresses.
        let lh = a.admit(&name("localhost"), 8080).unwrap();
        assert!(
            a.check_not_local(ip("127.0.0.1"), 8080, &lh, &local)
                .is_ok()
        );
        assert!(
            a.check_not_local(ip("198.51.100.7"), 8080, &lh, &local)
                .is_err()
        );
    }

    #[test]
    fn classifier() {
        assert_eq!(classify(ip("8.8.8.8")), None);
        assert_eq!(classify(ip("2606:4700::1111")), None);
        assert_eq!(classify(ip("172.32.0.1")), None);
        assert_eq!(classify(ip("100.128.0.1")), None);
        assert_eq!(classify(ip("127.5.5.5")), Some(AddrClass::Loopback));
        assert_eq!(classify(ip("172.31.255.255")), Some(AddrClass::Private));
        assert_eq!(classify(ip("169.254.169.254")), Some(AddrClass::Metadata));
        assert_eq!(classify(ip("168.63.129.16")), Some(AddrClass::Metadata));
        assert_eq!(
            classify(ip("::ffff:168.63.129.16")),
            Some(AddrClass::Metadata)
        );
        assert_eq!(classify(ip("168.63.129.17")), None);
        assert_eq!(classify(ip("fd00:ec2::254")), Some(AddrClass::Metadata));
        assert_eq!(
            classify(ip("::ffff:169.254.169.254")),
            Some(AddrClass::Metadata)
        );
        assert_eq!(classify(ip("fc12::1")), Some(AddrClass::Private));
        assert_eq!(classify(ip("febf::1")), Some(AddrClass::LinkLocal));
        assert_eq!(classify(ip("0.1.2.3")), Some(AddrClass::Unspecified));
        assert_eq!(classify(ip("::7f00:1")), Some(AddrClass::Loopback));
        assert_eq!(classify(ip("::ffff:0:7f00:1")), Some(AddrClass::Loopback));
        assert_eq!(
            classify(ip("::ffff:0:a9fe:a9fe")),
            Some(AddrClass::Metadata)
        );
        assert_eq!(classify(ip("64:ff9b:1::8.8.8.8")), Some(AddrClass::Private));
    }

    #[test]
    fn targets() {
        assert_eq!(parse_target("Example.ORG").unwrap(), name("example.org"));
        assert_eq!(parse_target("[::1]").unwrap(), Target::Ip(ip("::1")));
        assert_eq!(parse_target("1.2.3.4").unwrap(), Target::Ip(ip("1.2.3.4")));
        for bad in [
            "2130706433",
            "0x7f.1",
            "127.1",
            "a b",
            "",
            "::1",
            // Trailing dots and other spellings of 127.0.0.1 getaddrinfo would accept.
            "127.0.0.1.",
            "2130706433.",
            "127.1.",
            "0x7f000001",
            "0X7F000001",
            "0x7f.0.0.1.",
            "0177.0.0.1",
            "[fe80::1%lo]",
            "[::1%25lo]",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
        // Names that merely start with digits or `0x` are names.
        assert_eq!(
            parse_target("0xdead.example").unwrap(),
            name("0xdead.example")
        );
        assert_eq!(parse_target("1e100.net").unwrap(), name("1e100.net"));
        // An allow-list entry cannot be a numeric "name" either.
        for bad in [
            "allow=2130706433",
            "allow=127.1",
            "allow=127.1.:80",
            "allow=0x7f.1",
        ] {
            assert!(parse_network(bad).is_err(), "{bad}");
        }
    }
}

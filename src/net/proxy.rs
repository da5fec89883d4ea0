//! The filtering HTTP proxy: `CONNECT host:port` tunnels (HTTPS and anything else over TCP)
//! and absolute-URI `http://` requests, admitted by the [`AllowList`] only.
//!
//! It runs in a helper process cordon forks after the sandbox exists (the launcher itself must
//! stay single-threaded; this process may start threads), on the host's network, accepting on
//! a listening socket that the sandbox's init created inside the sandbox's network namespace
//! and handed over. One thread per connection (two while tunnelling), bounded by
//! [`MAX_CONNECTIONS`]; every read has a timeout. The helper never blocks cordon's supervisor:
//! it is a separate process that cordon stops (and, if need be, kills) when the run ends.
//!
//! Order of checks for each request, fail-closed at every step:
//! 1. the request head must arrive within [`HEAD_TIMEOUT`] and fit in [`MAX_HEAD`] bytes;
//! 2. the target must parse (a name, a dotted-quad IPv4 or a bracketed IPv6 literal);
//! 3. the allow-list must admit it — before any lookup, so a refused name is never resolved;
//! 4. the name is resolved by the proxy (overrides, `localhost`, then the host's resolver) and
//!    EVERY address must pass [`AllowList::check_address`] (a mixed answer is refused whole);
//! 5. the connection goes to those checked addresses, never to a fresh lookup.

use super::policy::{AllowList, Target, parse_target};
use super::{AllowedReport, NetworkReport, RefusedReport};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Largest request head (request line plus headers).
pub const MAX_HEAD: usize = 16 * 1024;
/// How long a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to an allowed host may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A tunnel with no byte in either direction for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Connections handled at once; more are refused with 503.
pub const MAX_CONNECTIONS: usize = 32;
/// Connection records kept for the result (beyond it, only counted).
pub const MAX_RECORDS: usize = 4096;
/// Longest host and refusal reason kept for the result and the log (longer ones are clipped).
const MAX_SHOWN_HOST: usize = 260;
const MAX_SHOWN_REASON: usize = 400;

/// `s`, cut to at most `max` bytes at a character boundary, with `...` when cut.
fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// How often blocked reads wake up to check the idle clock and the stop flag.
const TICK: Duration = Duration::from_millis(500);

/// One admitted connection, updated while it runs.
struct Record {
    host: String,
    port: u16,
    up: AtomicU64,
    down: AtomicU64,
}

#[derive(Default)]
struct Shared {
    allowed: Mutex<Vec<Arc<Record>>>,
    refused: Mutex<Vec<RefusedReport>>,
    /// Sockets of live connections, shut down when the run ends.
    live: Mutex<Vec<(u64, TcpStream)>>,
    next_id: AtomicU64,
    active: AtomicUsize,
    stopping: AtomicBool,
    dropped_records: AtomicU64,
}

struct Ctx {
    policy: AllowList,
    shared: Shared,
}

impl Ctx {
    fn log(&self, line: impl FnOnce() -> String) {
        if self.policy.log {
            eprintln!("cordon: net: {}", line());
        }
    }

    fn refuse(&self, client: &mut TcpStream, host: &str, port: u16, code: u16, reason: String) {
        // What the program wrote is clipped before it is kept, logged or reported: a 16 KiB
        // "host" refused 4096 times would otherwise hold 64 MiB in this process (outside the
        // sandbox's memory limit) and in the result.
        let host = clip(host, MAX_SHOWN_HOST);
        let reason = clip(&reason, MAX_SHOWN_REASON);
        self.log(|| format!("refused {host}:{port}: {reason}"));
        {
            let mut r = self
                .shared
                .refused
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            // Counted where they are kept: repeats of one refusal cost nothing.
            if let Some(a) = r
                .iter_mut()
                .find(|a| a.host == host && a.port == port && a.reason == reason)
            {
                a.count = a.count.saturating_add(1);
            } else if r.len() < MAX_RECORDS {
                r.push(RefusedReport {
                    host: host.clone(),
                    port,
                    reason: reason.clone(),
                    count: 1,
                });
            } else {
                self.shared.dropped_records.fetch_add(1, Ordering::Relaxed);
            }
        }
        let text = match code {
            403 => "Forbidden",
            400 => "Bad Request",
            502 => "Bad Gateway",
            503 => "Service Unavailable",
            _ => "Error",
        };
        let body = format!("cordon: {reason}\n");
        let _ = client.write_all(
            format!(
                "HTTP/1.1 {code} {text}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
    }

    fn register(&self, s: &TcpStream) -> Option<u64> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let clone = s.try_clone().ok()?;
        self.shared
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, clone));
        Some(id)
    }

    fn unregister(&self, id: Option<u64>) {
        if let Some(id) = id {
            self.shared
                .live
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|(i, _)| *i != id);
        }
    }
}

/// Serves on `listener` until `stop` becomes readable (cordon closed its end), then shuts every
/// live connection down and returns the counters.
pub fn serve(listener: TcpListener, policy: AllowList, stop: OwnedFd) -> NetworkReport {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let ctx = Arc::new(Ctx {
        policy,
        shared: Shared::default(),
    });
    let _ = listener.set_nonblocking(true);
    loop {
        let mut fds = [
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(stop.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::from(1000u16)) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            break;
        }
        loop {
            match listener.accept() {
                Ok((mut client, _)) => {
                    let _ = client.set_nonblocking(false);
                    if ctx.shared.active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                        ctx.refuse(
                            &mut client,
                            "-",
                            0,
                            503,
                            format!("more than {MAX_CONNECTIONS} connections at once"),
                        );
                        continue;
                    }
                    ctx.shared.active.fetch_add(1, Ordering::SeqCst);
                    let c = Arc::clone(&ctx);
                    let spawned =
                        std::thread::Builder::new()
                            .stack_size(256 << 10)
                            .spawn(move || {
                                handle(&c, client);
                                c.shared.active.fetch_sub(1, Ordering::SeqCst);
                            });
                    if spawned.is_err() {
                        ctx.shared.active.fetch_sub(1, Ordering::SeqCst);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }
    // The run is over: nothing inside can use a tunnel any more.
    ctx.shared.stopping.store(true, Ordering::SeqCst);
    for (_, s) in ctx
        .shared
        .live
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        let _ = s.shutdown(Shutdown::Both);
    }
    let until = Instant::now() + Duration::from_secs(1);
    while ctx.shared.active.load(Ordering::SeqCst) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    report(&ctx)
}

/// Aggregates the records by (host, port[, reason]).
fn report(ctx: &Ctx) -> NetworkReport {
    let mut allowed: Vec<AllowedReport> = Vec::new();
    for r in ctx
        .shared
        .allowed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        let (up, down) = (r.up.load(Ordering::SeqCst), r.down.load(Ordering::SeqCst));
        match allowed
            .iter_mut()
            .find(|a| a.host == r.host && a.port == r.port)
        {
            Some(a) => {
                a.connections += 1;
                a.bytes_up += up;
                a.bytes_down += down;
            }
            None => allowed.push(AllowedReport {
                host: r.host.clone(),
                port: r.port,
                connections: 1,
                bytes_up: up,
                bytes_down: down,
            }),
        }
    }
    let mut refused: Vec<RefusedReport> = Vec::new();
    for r in ctx
        .shared
        .refused
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        match refused
            .iter_mut()
            .find(|a| a.host == r.host && a.port == r.port && a.reason == r.reason)
        {
            Some(a) => a.count = a.count.saturating_add(r.count),
            None => refused.push(r.clone()),
        }
    }
    NetworkReport {
        mode: "allow".into(),
        allow_list: ctx.policy.entries.iter().map(|e| e.to_string()).collect(),
        allowed,
        refused,
        records_dropped: ctx.shared.dropped_records.load(Ordering::Relaxed),
        error: None,
    }
}

/// The peer's address when the connection never left this host: its source address is its
/// destination, as the kernel picks it for a locally delivered connection.
fn delivered_locally(upstream: &TcpStream) -> Option<IpAddr> {
    let (local, peer) = (upstream.local_addr().ok()?, upstream.peer_addr().ok()?);
    let ip = peer.ip().to_canonical();
    (local.ip().to_canonical() == ip).then_some(ip)
}

/// Reads until the end of the request head; returns (head, bytes read past it).
fn read_head(client: &mut TcpStream) -> Result<(String, Vec<u8>), String> {
    let _ = client.set_read_timeout(Some(TICK));
    let started = Instant::now();
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            // The bound holds for the head itself, whatever one read brought with it.
            if end + 4 > MAX_HEAD {
                return Err(format!("request head larger than {MAX_HEAD} bytes"));
            }
            let rest = buf.split_off(end + 4);
            let head =
                String::from_utf8(buf).map_err(|_| "request head is not UTF-8".to_string())?;
            return Ok((head, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(format!("request head larger than {MAX_HEAD} bytes"));
        }
        if started.elapsed() > HEAD_TIMEOUT {
            return Err("request head not received in time".into());
        }
        match client.read(&mut chunk) {
            Ok(0) => return Err("connection closed before a request".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(format!("reading the request: {e}")),
        }
    }
}

/// Splits `host:port` (IPv6 in brackets); `default` when the port is absent.
fn split_authority(auth: &str, default: Option<u16>) -> Result<(String, u16), String> {
    let (host, port) = if auth.starts_with('[') {
        match auth.find(']') {
            Some(i) => match &auth[i + 1..] {
                "" => (&auth[..=i], None),
                after => (
                    &auth[..=i],
                    Some(after.strip_prefix(':').ok_or_else(|| {
                        format!("unexpected {after:?} after the IPv6 literal in {auth:?}")
                    })?),
                ),
            },
            None => return Err("unterminated IPv6 literal".into()),
        }
    } else {
        match auth.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (auth, None),
        }
    };
    let port = match (port, default) {
        // Digits only: `parse` would also take `+8080`, which a server may read otherwise.
        (Some(p), _) => Some(p)
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("bad port in {auth:?}"))?,
        (None, Some(d)) => d,
        (None, None) => return Err(format!("CONNECT needs host:port, got {auth:?}")),
    };
    if host.is_empty() {
        return Err("empty host".into());
    }
    Ok((host.to_string(), port))
}

/// A parsed proxy request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `CONNECT host:port` (a tunnel) rather than an absolute-URI HTTP request.
    pub connect: bool,
    /// The host as the client wrote it (a name, a dotted quad, or `[IPv6]`).
    pub host: String,
    pub port: u16,
    /// For plain HTTP: the head to send upstream (origin-form, `Host` from the URI, `Proxy-*`
    /// and hop-by-hop headers removed, `Connection: close`).
    pub upstream_head: String,
    /// For plain HTTP: the body's length (`Content-Length`, 0 without one). Exactly that many
    /// bytes follow the head upstream; whatever the client sends after them (a pipelined
    /// second request, with a Host of its choosing) never reaches the upstream. `None` for a
    /// CONNECT tunnel.
    pub body_len: Option<u64>,
}

/// A header field name is an RFC 9110 token.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses a request head (up to and including the blank line).
pub fn parse_request(head: &str) -> Result<Request, String> {
    // A bare CR or LF could make an upstream server see headers this parser did not.
    if head.replace("\r\n", "").contains(['\r', '\n']) {
        return Err("bare CR or LF in the request head".into());
    }
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or("");
    // Control characters (a tab an upstream would split on, NUL, escape sequences for the
    // log) and raw non-ASCII have no place in a request line.
    if line.bytes().any(|b| !(0x20..0x7f).contains(&b)) {
        return Err("control or non-ASCII characters in the request line".into());
    }
    let mut parts = line.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) if v.starts_with("HTTP/1.") => (m, t, v),
        _ => return Err("not an HTTP/1.x proxy request".into()),
    };
    if method == "CONNECT" {
        let (host, port) = split_authority(target, None)?;
        return Ok(Request {
            connect: true,
            host,
            port,
            upstream_head: String::new(),
            body_len: None,
        });
    }
    if !method.bytes().all(|b| b.is_ascii_uppercase()) || method.is_empty() {
        return Err("bad method".into());
    }
    let rest = target.strip_prefix("http://").ok_or_else(|| {
        "only CONNECT and absolute http:// requests go through this proxy (for https, the client must use CONNECT)".to_string()
    })?;
    let (auth, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if auth.contains('@') {
        return Err("credentials in the URL are not passed on".into());
    }
    let (host, port) = split_authority(auth, Some(80))?;
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    // The Host header is the URI's authority, whatever the client wrote: the upstream is
    // chosen by the URI, and its virtual host must be the same name.
    let mut out = format!("{method} {path} {version}\r\nHost: {auth}\r\n");
    let mut body_len: Option<u64> = None;
    for h in lines {
        if h.is_empty() {
            continue;
        }
        // Strict header syntax, so the upstream cannot read a header this proxy did not
        // (RFC 9112 §5: no obs-fold, no blank before the colon).
        if h.starts_with([' ', '\t']) {
            return Err("folded header line (obs-fold) in the request".into());
        }
        let (raw_name, value) = h
            .split_once(':')
            .ok_or_else(|| format!("header line without a colon: {h:?}"))?;
        if !is_token(raw_name) {
            return Err(format!("invalid header name {raw_name:?}"));
        }
        if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(format!("control characters in the {raw_name} header"));
        }
        let name = raw_name.to_ascii_lowercase();
        // The body is forwarded by its Content-Length only: a chunked body, or two lengths
        // the upstream might choose between, could hide a second request inside the first.
        if name == "transfer-encoding" {
            return Err(
                "Transfer-Encoding in a plain http:// request (send a Content-Length, or use CONNECT)"
                    .into(),
            );
        }
        if name == "content-length" {
            let v = value.trim();
            let n = v
                .parse::<u64>()
                .ok()
                .filter(|_| v.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| format!("invalid Content-Length {v:?}"))?;
            if body_len.is_some_and(|m| m != n) {
                return Err("conflicting Content-Length headers".into());
            }
            body_len = Some(n);
        }
        if name.starts_with("proxy-")
            || name == "connection"
            || name == "keep-alive"
            || name == "host"
        {
            continue;
        }
        out.push_str(h);
        out.push_str("\r\n");
    }
    // One request per upstream connection: the proxy does not parse responses.
    out.push_str("Connection: close\r\n\r\n");
    Ok(Request {
        connect: false,
        host,
        port,
        upstream_head: out,
        body_len: Some(body_len.unwrap_or(0)),
    })
}

/// The proxy's own resolver: overrides, then `localhost`, then the host's (getaddrinfo).
fn resolve(policy: &AllowList, name: &str, port: u16) -> Result<Vec<IpAddr>, String> {
    if let Some(ip) = policy.override_for(name) {
        return Ok(vec![ip]);
    }
    if name == "localhost" || name.ends_with(".localhost") {
        return Ok(vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ]);
    }
    use std::net::ToSocketAddrs;
    let addrs: Vec<IpAddr> = (name, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {name}: {e}"))?
        .map(|a| a.ip())
        .collect();
    if addrs.is_empty() {
        return Err(format!("{name} has no address"));
    }
    Ok(addrs)
}

/// The addresses of this host's interfaces, read at each request (they may change during a
/// run). Unreadable, the request is refused (fail closed).
/// Whether the host delivers `ip` to itself: the kernel's route to it (RTM_GETROUTE, what
/// `ip route get` asks) is of type `local`. That covers the interfaces' addresses and also
/// ranges a `local` route (AnyIP) gives the host without any interface holding them, IPv4 or
/// IPv6. An address with no route is not (a connection to it fails anyway).
pub(crate) fn routed_to_this_host(ip: IpAddr) -> Result<bool, String> {
    use nix::sys::socket::{
        AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType, recv, send, socket,
    };
    const RTM_GETROUTE: u16 = 26;
    const NLMSG_ERROR: u16 = 2;
    const RTA_DST: u16 = 1;
    const RTN_LOCAL: u8 = 2;
    let (family, addr): (u8, Vec<u8>) = match ip.to_canonical() {
        IpAddr::V4(v4) => (libc::AF_INET as u8, v4.octets().to_vec()),
        IpAddr::V6(v6) => (libc::AF_INET6 as u8, v6.octets().to_vec()),
    };
    let why = |what: &str, e: &dyn std::fmt::Display| {
        format!("cannot ask the kernel how it routes {ip} ({what}: {e}), so the request is refused")
    };
    // nlmsghdr, rtmsg (family, dst_len, then zeros), RTA_DST.
    let len = 16 + 12 + 4 + addr.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
    m.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[family, (addr.len() * 8) as u8, 0, 0, 0, 0, 0, 0]);
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&((4 + addr.len()) as u16).to_ne_bytes());
    m.extend_from_slice(&RTA_DST.to_ne_bytes());
    m.extend_from_slice(&addr);
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(|e| why("a NETLINK_ROUTE socket", &e))?;
    nix::sys::socket::setsockopt(
        &fd,
        nix::sys::socket::sockopt::ReceiveTimeout,
        &nix::sys::time::TimeVal::new(1, 0),
    )
    .map_err(|e| why("its receive timeout", &e))?;
    send(std::os::fd::AsRawFd::as_raw_fd(&fd), &m, MsgFlags::empty())
        .map_err(|e| why("send", &e))?;
    let mut buf = vec![0u8; 8192];
    let n = recv(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &mut buf,
        MsgFlags::empty(),
    )
    .map_err(|e| why("receive", &e))?;
    let buf = &buf[..n];
    if buf.len() < 16 {
        return Err(why("answer", &"too short"));
    }
    let kind = u16::from_ne_bytes([buf[4], buf[5]]);
    if kind == NLMSG_ERROR {
        let errno = buf
            .get(16..20)
            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .unwrap_or(0);
        // No route (unreachable, prohibited): not delivered here. Anything else is not an
        // answer to go by.
        return match -errno {
            libc::ENETUNREACH | libc::EHOSTUNREACH | libc::EACCES => Ok(false),
            e => Err(why("answer", &nix::errno::Errno::from_raw(e))),
        };
    }
    match buf.get(16 + 7) {
        Some(&rtm_type) => Ok(rtm_type == RTN_LOCAL),
        None => Err(why("answer", &"too short")),
    }
}

pub(crate) fn local_addresses() -> Result<Vec<IpAddr>, String> {
    let mut out = vec![
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
    ];
    let ifs = nix::ifaddrs::getifaddrs().map_err(|e| {
        format!(
            "cannot read this host's own addresses (getifaddrs: {e}), so the request is refused"
        )
    })?;
    for i in ifs {
        let Some(a) = i.address else { continue };
        if let Some(v4) = a.as_sockaddr_in() {
            out.push(IpAddr::V4(v4.ip()));
        } else if let Some(v6) = a.as_sockaddr_in6() {
            out.push(IpAddr::V6(v6.ip()));
        }
    }
    Ok(out)
}

fn handle(ctx: &Ctx, mut client: TcpStream) {
    let client_id = ctx.register(&client);
    handle_inner(ctx, &mut client);
    ctx.unregister(client_id);
}

fn handle_inner(ctx: &Ctx, client: &mut TcpStream) {
    let (head, rest) = match read_head(client) {
        Ok(h) => h,
        Err(reason) => {
            ctx.refuse(client, "-", 0, 400, reason);
            return;
        }
    };
    let req = match parse_request(&head) {
        Ok(r) => r,
        Err(reason) => {
            ctx.refuse(client, "-", 0, 400, reason);
            return;
        }
    };
    let shown = req.host.to_ascii_lowercase();
    let target = match parse_target(&shown) {
        Ok(t) => t,
        Err(reason) => {
            ctx.refuse(
                client,
                &shown,
                req.port,
                403,
                format!("invalid host: {reason}"),
            );
            return;
        }
    };
    let admission = match ctx.policy.admit(&target, req.port) {
        Ok(a) => a,
        Err(reason) => {
            ctx.refuse(client, &shown, req.port, 403, reason);
            return;
        }
    };
    let addrs = match &target {
        Target::Ip(ip) => vec![*ip],
        Target::Name(n) => match resolve(&ctx.policy, n, req.port) {
            Ok(a) => a,
            Err(reason) => {
                ctx.refuse(client, &shown, req.port, 502, reason);
                return;
            }
        },
    };
    let mut local = match local_addresses() {
        Ok(l) => l,
        Err(reason) => {
            ctx.refuse(client, &shown, req.port, 502, reason);
            return;
        }
    };
    // Addresses no interface holds that the host answers on all the same (a `local` route,
    // "AnyIP", IPv4 or IPv6) are its own too.
    for ip in &addrs {
        match routed_to_this_host(*ip) {
            Ok(true) => local.push(*ip),
            Ok(false) => {}
            Err(reason) => {
                ctx.refuse(client, &shown, req.port, 502, reason);
                return;
            }
        }
    }
    for ip in &addrs {
        let verdict = ctx
            .policy
            .check_address(*ip, req.port, &admission)
            .and_then(|()| {
                ctx.policy
                    .check_not_local(*ip, req.port, &admission, &local)
            });
        if let Err(reason) = verdict {
            ctx.refuse(client, &shown, req.port, 403, reason);
            return;
        }
    }
    // Connect to the addresses just checked, in order; never look the name up again.
    let mut upstream = None;
    let mut last_err = String::new();
    for ip in &addrs {
        match TcpStream::connect_timeout(&SocketAddr::new(*ip, req.port), CONNECT_TIMEOUT) {
            Ok(s) => {
                upstream = Some(s);
                break;
            }
            Err(e) => last_err = format!("{ip}: {e}"),
        }
    }
    let Some(mut upstream) = upstream else {
        ctx.refuse(
            client,
            &shown,
            req.port,
            502,
            format!("cannot connect: {last_err}"),
        );
        return;
    };
    // The interfaces' addresses are not all the host answers on: a `local` route (AnyIP)
    // delivers a whole range to the host's own services. Such a connection has the
    // destination as its source too; it is held to the same rule as the host's addresses,
    // and closed before a byte passes.
    if let Some(reason) = delivered_locally(&upstream).and_then(|ip| {
        ctx.policy
            .check_not_local(ip, req.port, &admission, &[ip])
            .err()
    }) {
        drop(upstream);
        ctx.refuse(
            client,
            &shown,
            req.port,
            403,
            format!("{reason} (the host delivers it to itself: a local route)"),
        );
        return;
    }
    let record = Arc::new(Record {
        host: shown.clone(),
        port: req.port,
        up: AtomicU64::new(0),
        down: AtomicU64::new(0),
    });
    {
        let mut a = ctx.shared.allowed.lock().unwrap_or_else(|e| e.into_inner());
        if a.len() < MAX_RECORDS {
            a.push(Arc::clone(&record));
        } else {
            ctx.shared.dropped_records.fetch_add(1, Ordering::Relaxed);
        }
    }
    ctx.log(|| {
        format!(
            "allowed {} {shown}:{} -> {}",
            if req.connect { "CONNECT" } else { "HTTP" },
            req.port,
            upstream
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_default()
        )
    });
    let up_id = ctx.register(&upstream);
    // A plain request's body: what already arrived with the head, up to its length.
    let (early, up_limit) = match req.body_len {
        None => (&rest[..], None),
        Some(len) => {
            let n = rest.len().min(usize::try_from(len).unwrap_or(usize::MAX));
            (&rest[..n], Some(len - n as u64))
        }
    };
    let started = if req.connect {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .and_then(|()| upstream.write_all(early))
    } else {
        upstream
            .write_all(req.upstream_head.as_bytes())
            .and_then(|()| upstream.write_all(early))
    };
    if started.is_ok() {
        let sent = if req.connect {
            early.len()
        } else {
            req.upstream_head.len() + early.len()
        };
        record.up.fetch_add(sent as u64, Ordering::SeqCst);
        tunnel(ctx, client, &upstream, &record, up_limit);
    }
    ctx.unregister(up_id);
}

/// Copies both ways until both sides are done, the tunnel is idle for [`IDLE_TIMEOUT`], or the
/// run ends. `up_limit`: at most this many more bytes go from the client upstream (the rest of
/// a plain request's body); `None` for a tunnel.
fn tunnel(
    ctx: &Ctx,
    client: &TcpStream,
    upstream: &TcpStream,
    record: &Arc<Record>,
    up_limit: Option<u64>,
) {
    let last = Arc::new(AtomicU64::new(0));
    let epoch = Instant::now();
    let (Ok(c2), Ok(u2)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let rec = Arc::clone(record);
    let last2 = Arc::clone(&last);
    let stopping = || ctx.shared.stopping.load(Ordering::SeqCst);
    std::thread::scope(|s| {
        s.spawn(move || {
            pump(c2, u2, &rec.up, &last2, epoch, &stopping, up_limit);
        });
        let (c3, u3) = (client.try_clone(), upstream.try_clone());
        if let (Ok(c3), Ok(u3)) = (c3, u3) {
            pump(u3, c3, &record.down, &last, epoch, &stopping, None);
        }
    });
}

fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    counter: &AtomicU64,
    last: &AtomicU64,
    epoch: Instant,
    stopping: &dyn Fn() -> bool,
    mut limit: Option<u64>,
) {
    let _ = from.set_read_timeout(Some(TICK));
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let want = match limit {
            // The body is complete: nothing more from this side is forwarded, and the
            // upstream's write side stays open (some servers take a half-close for an abort).
            Some(0) => return,
            Some(l) => buf.len().min(usize::try_from(l).unwrap_or(usize::MAX)),
            None => buf.len(),
        };
        match from.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
                if let Some(l) = limit.as_mut() {
                    *l -= n as u64;
                }
                counter.fetch_add(n as u64, Ordering::SeqCst);
                last.store(epoch.elapsed().as_millis() as u64, Ordering::SeqCst);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                // The other direction may have stored a later time than this thread's
                // clock reading: saturate, or the subtraction would wrap (or panic).
                let idle = idle_ms(
                    epoch.elapsed().as_millis() as u64,
                    last.load(Ordering::SeqCst),
                );
                if stopping() || idle > IDLE_TIMEOUT.as_millis() as u64 {
                    let _ = from.shutdown(Shutdown::Both);
                    let _ = to.shutdown(Shutdown::Both);
                    return;
                }
            }
            Err(_) => break,
        }
    }
    // Half-close: the other direction may still be sending.
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

/// Milliseconds since the last transfer (0 when that was "later" than `now`).
fn idle_ms(now: u64, last: u64) -> u64 {
    now.saturating_sub(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse() {
        let r =
            parse_request("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n").unwrap();
        assert!(r.connect);
        assert_eq!((r.host.as_str(), r.port), ("pypi.org", 443));
        let r = parse_request("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((r.host.as_str(), r.port), ("[::1]", 8443));
        assert!(parse_request("CONNECT pypi.org HTTP/1.1\r\n\r\n").is_err());
        // A port is digits only (`+443` would be forwarded as written).
        for port in ["+443", "-443", " 443", "0443x", "", "0"] {
            let req = format!("CONNECT pypi.org:{port} HTTP/1.1\r\n\r\n");
            assert!(parse_request(&req).is_err(), "{req:?}");
            let req = format!("GET http://pypi.org:{port}/ HTTP/1.1\r\n\r\n");
            assert!(parse_request(&req).is_err(), "{req:?}");
        }
        assert_eq!(
            parse_request("CONNECT pypi.org:0443 HTTP/1.1\r\n\r\n")
                .unwrap()
                .port,
            443
        );
        let r = parse_request(
            "GET http://example.org:8080/a?b HTTP/1.1\r\nHost: internal.corp\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: x\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert!(!r.connect);
        assert_eq!((r.host.as_str(), r.port), ("example.org", 8080));
        assert!(
            r.upstream_head
                .starts_with("GET /a?b HTTP/1.1\r\nHost: example.org:8080\r\n"),
            "{}",
            r.upstream_head
        );
        assert!(!r.upstream_head.to_ascii_lowercase().contains("proxy-"));
        assert!(!r.upstream_head.contains("internal.corp"));
        assert!(r.upstream_head.ends_with("Connection: close\r\n\r\n"));
        let r = parse_request("GET http://example.org HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(r.port, 80);
        assert!(r.upstream_head.contains("Host: example.org\r\n"));
        for bad in [
            "GET / HTTP/1.1\r\n\r\n",
            "GET https://example.org/ HTTP/1.1\r\n\r\n",
            "GET http://u:p@example.org/ HTTP/1.1\r\n\r\n",
            "garbage\r\n\r\n",
            "GET http://example.org/ HTTP/2\r\n\r\n",
            "GET http://example.org/ HTTP/1.1\r\nA: b\nHost: evil\r\n\r\n",
        ] {
            assert!(parse_request(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn plain_requests_are_strict() {
        let ok = |h: &str| parse_request(h).unwrap_or_else(|e| panic!("{h:?}: {e}"));
        let r = ok("GET http://example.org/ HTTP/1.1\r\nAccept: */*\r\n\r\n");
        assert_eq!(r.body_len, Some(0));
        let r = ok(
            "POST http://example.org/ HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n",
        );
        assert_eq!(r.body_len, Some(5));
        assert_eq!(
            ok("CONNECT example.org:443 HTTP/1.1\r\n\r\n").body_len,
            None
        );
        assert_eq!(ok("GET http://[2001:db8::1]/ HTTP/1.1\r\n\r\n").port, 80);
        assert_eq!(ok("GET http://[2001:db8::1]:81/ HTTP/1.1\r\n\r\n").port, 81);
        for bad in [
            // Framing an upstream could read differently from this proxy.
            "POST http://example.org/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST http://example.org/ HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST http://example.org/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            "POST http://example.org/ HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
            "POST http://example.org/ HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
            // obs-fold, and a blank before the colon ("Host : evil" is a Host to some).
            "GET http://example.org/ HTTP/1.1\r\nX-A: b\r\n Host: evil\r\n\r\n",
            "GET http://example.org/ HTTP/1.1\r\nX-A: b\r\n\tTransfer-Encoding: chunked\r\n\r\n",
            "GET http://example.org/ HTTP/1.1\r\nHost : evil\r\n\r\n",
            "GET http://example.org/ HTTP/1.1\r\nTransfer-Encoding\t: chunked\r\n\r\n",
            "GET http://example.org/ HTTP/1.1\r\nno colon\r\n\r\n",
            "GET http://example.org/ HTTP/1.1\r\nX-A: a\0b\r\n\r\n",
            // Control characters in the request line: a tab upstreams split on, escapes.
            "GET http://example.org/a\tb HTTP/1.1\r\n\r\n",
            "CONNECT \x1b[31mevil:443 HTTP/1.1\r\n\r\n",
            // Anything between `]` and the port (the Host header would carry it upstream).
            "GET http://[2001:db8::1]evil.example/ HTTP/1.1\r\n\r\n",
            "GET http://[2001:db8::1]x:8080/ HTTP/1.1\r\n\r\n",
            "CONNECT [2001:db8::1]x:443 HTTP/1.1\r\n\r\n",
            "GET http://example.org/\u{e9} HTTP/1.1\r\n\r\n",
        ] {
            assert!(parse_request(bad).is_err(), "{bad:?}");
        }
    }

    /// Starts a proxy on loopback with `allow`; returns its port, the stop pipe's write end
    /// and the thread that returns its report.
    fn proxy(allow: &str) -> (u16, OwnedFd, std::thread::JoinHandle<NetworkReport>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let policy = AllowList {
            entries: super::super::policy::parse_allow_list(allow).unwrap(),
            ..AllowList::default()
        };
        let (stop_r, stop_w) = nix::unistd::pipe().unwrap();
        (
            port,
            stop_w,
            std::thread::spawn(move || serve(listener, policy, stop_r)),
        )
    }

    fn ask(port: u16, request: &str) -> String {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = c.read_to_string(&mut answer);
        answer
    }

    #[test]
    fn refusals_are_clipped_and_counted_where_kept() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc...");
        assert_eq!(clip("é", 1), "...");
        let (port, stop, server) = proxy("example.org");
        let long = "a".repeat(12_000);
        for _ in 0..3 {
            let answer = ask(port, &format!("CONNECT {long}:443 HTTP/1.1\r\n\r\n"));
            assert!(answer.starts_with("HTTP/1.1 403"), "{answer:?}");
        }
        let answer = ask(port, "CONNECT other.example:443 HTTP/1.1\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer:?}");
        drop(stop);
        let report = server.join().unwrap();
        assert_eq!(report.refused.len(), 2, "{report:?}");
        let r = &report.refused[0];
        assert!(r.host.len() <= MAX_SHOWN_HOST + 3, "{}", r.host.len());
        assert!(r.host.starts_with("aaaa") && r.host.ends_with("..."));
        assert_eq!(r.count, 3);
        assert_eq!(report.refused[1].host, "other.example");
        assert_eq!(report.records_dropped, 0);
    }

    /// The kernel's answer for loopback, the interfaces' addresses and a documentation
    /// address nothing routes to this host.
    #[test]
    fn routes_to_this_host_are_told() {
        assert_eq!(
            routed_to_this_host(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            Ok(true)
        );
        assert_eq!(
            routed_to_this_host(IpAddr::V4(Ipv4Addr::new(127, 9, 9, 9))),
            Ok(true)
        );
        assert_eq!(
            routed_to_this_host("::ffff:127.0.0.1".parse().unwrap()),
            Ok(true)
        );
        if std::path::Path::new("/proc/net/if_inet6").exists() {
            assert_eq!(
                routed_to_this_host(IpAddr::V6(Ipv6Addr::LOCALHOST)),
                Ok(true)
            );
        }
        for ip in local_addresses().unwrap() {
            if let IpAddr::V6(v6) = ip
                && v6.segments()[0] & 0xffc0 == 0xfe80
            {
                continue; // link-local: routed per interface, needs a scope
            }
            assert_eq!(routed_to_this_host(ip), Ok(true), "{ip}");
        }
        assert_eq!(
            routed_to_this_host("203.0.113.9".parse().unwrap()),
            Ok(false)
        );
    }

    #[test]
    fn local_addresses_are_read() {
        let local = local_addresses().unwrap();
        assert!(local.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)));
        // Every address getifaddrs lists is there (`ip -o addr` says the same).
        let out = std::process::Command::new("ip")
            .args(["-o", "addr"])
            .output();
        if let Ok(out) = out {
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let mut w = line.split_whitespace();
                if let Some(addr) = w.find(|x| *x == "inet" || *x == "inet6").and(w.next()) {
                    let ip: IpAddr = addr.split('/').next().unwrap().parse().unwrap();
                    assert!(local.contains(&ip), "{ip} missing from {local:?}");
                }
            }
        }
    }

    /// The bound holds for the head itself, however the bytes arrive: one byte over is
    /// refused even when the whole head comes in one read; a head at the bound is taken.
    #[test]
    fn the_head_bound_is_exact() {
        let head_of = |len: usize| {
            let mut h = b"GET http://a.test/ HTTP/1.1\r\nX: ".to_vec();
            h.resize(len - 4, b'x');
            h.extend_from_slice(b"\r\n\r\n");
            h
        };
        for (len, ok) in [
            (MAX_HEAD, true),
            (MAX_HEAD + 1, false),
            (MAX_HEAD + 3000, false),
        ] {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let mut c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (mut server, _) = listener.accept().unwrap();
            c.write_all(&head_of(len)).unwrap();
            let r = read_head(&mut server);
            assert_eq!(r.is_ok(), ok, "{len}: {:?}", r.map(|(h, _)| h.len()));
            if let Ok((h, rest)) = r {
                assert_eq!(h.len(), len);
                assert!(rest.is_empty());
            }
        }
    }

    #[test]
    fn idle_time_saturates() {
        assert_eq!(idle_ms(1000, 400), 600);
        // The other direction stored a time after this thread read the clock.
        assert_eq!(idle_ms(400, 1000), 0);
    }

    /// One plain request through a real proxy to a loopback upstream: the upstream gets that
    /// request and its body, and nothing the client sent after them.
    #[test]
    fn a_pipelined_second_request_never_reaches_the_upstream() {
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let up_port = upstream.local_addr().unwrap().port();
        let seen = std::thread::spawn(move || {
            let (mut s, _) = upstream.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_millis(1500)))
                .unwrap();
            let mut got = Vec::new();
            let mut chunk = [0u8; 4096];
            // Read all the proxy forwards (until it stops for 1.5 s), then answer.
            while let Ok(n) = s.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&chunk[..n]);
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            String::from_utf8_lossy(&got).into_owned()
        });
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy_port = listener.local_addr().unwrap().port();
        let policy = AllowList {
            entries: super::super::policy::parse_allow_list(&format!("127.0.0.1:{up_port}"))
                .unwrap(),
            ..AllowList::default()
        };
        let (stop_r, stop_w) = nix::unistd::pipe().unwrap();
        let server = std::thread::spawn(move || serve(listener, policy, stop_r));

        let mut c = TcpStream::connect(("127.0.0.1", proxy_port)).unwrap();
        let smuggled = "GET http://127.0.0.1/admin HTTP/1.1\r\nHost: internal.example\r\n\r\n";
        c.write_all(
            format!(
                "POST http://127.0.0.1:{up_port}/form HTTP/1.1\r\nContent-Length: 4\r\n\r\nbodyGET /second HTTP/1.1\r\nHost: internal.example\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        c.write_all(smuggled.as_bytes()).unwrap();
        let seen = seen.join().unwrap();
        let mut answer = String::new();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = c.read_to_string(&mut answer);
        drop(stop_w);
        let report = server.join().unwrap();

        assert!(seen.starts_with("POST /form HTTP/1.1\r\n"), "{seen:?}");
        assert!(seen.ends_with("\r\n\r\nbody"), "{seen:?}");
        assert!(!seen.contains("internal.example"), "{seen:?}");
        assert!(
            !seen.contains("second") && !seen.contains("admin"),
            "{seen:?}"
        );
        assert!(answer.ends_with("ok"), "{answer:?}");
        assert_eq!(report.allowed.len(), 1, "{report:?}");
        assert_eq!(report.allowed[0].bytes_up, seen.len() as u64);
    }

    #[test]
    fn localhost_and_overrides_resolve_without_lookup() {
        let mut p = AllowList::default();
        p.overrides
            .push(("test.internal".into(), "192.0.2.9".parse().unwrap()));
        assert_eq!(
            resolve(&p, "test.internal", 80).unwrap(),
            vec!["192.0.2.9".parse::<IpAddr>().unwrap()]
        );
        assert!(
            resolve(&p, "localhost", 80)
                .unwrap()
                .iter()
                .all(|a| a.is_loopback())
        );
    }
}

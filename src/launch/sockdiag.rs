//! The memory the sandbox's sockets hold in the kernel, for the memory watch (see
//! `launch::memwatch`): data queued on a socket lives in socket buffers, in no process's
//! `smaps`. Without a cgroup nothing else bounds it: a few hundred unix socket pairs per
//! process, each with 200 KiB queued, held 650 MiB under a 128 MiB limit.
//!
//! The kernel's sock_diag interface (`NETLINK_SOCK_DIAG`, what `ss -m` reads) lists every
//! socket of one network namespace with its memory: init opens the netlink socket inside the
//! sandbox's own namespace and hands it over with its /proc, and each sample dumps the unix,
//! TCP and UDP sockets through it (a socket in flight over SCM_RIGHTS, which no descriptor
//! shows, is listed too). Other families and protocols are unavailable under the watch (see
//! `profiles/seccomp/memory-watch.toml`), so these dumps see every socket the sandbox can make.

use nix::errno::Errno;
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
    setsockopt, socket, sockopt,
};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x01;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDRLEN: usize = 16;
/// Set on a dump's message when the table changed while it was read.
const NLM_F_DUMP_INTR: u16 = 0x10;

/// `UDIAG_SHOW_MEMINFO`, `_RQLEN` and `_PEER`, and the attributes that answer them.
const UDIAG_SHOW_MEMINFO: u32 = 0x20;
const UDIAG_SHOW_RQLEN: u32 = 0x10;
const UDIAG_SHOW_PEER: u32 = 0x04;
const UDIAG_SHOW_NAME: u32 = 0x01;
const UDIAG_SHOW_ICONS: u32 = 0x08;
const UNIX_DIAG_ICONS: u16 = 3;
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_SHUTDOWN: u16 = 6;
const UNIX_DIAG_MEMINFO: u16 = 5;
const UNIX_DIAG_RQLEN: u16 = 4;
const UNIX_DIAG_PEER: u16 = 2;
/// `INET_DIAG_SKMEMINFO`, requested by its bit in `idiag_ext` (1 << (7 - 1)).
const INET_DIAG_SKMEMINFO: u16 = 7;
/// The fixed headers the attributes follow: `struct unix_diag_msg`, `struct inet_diag_msg`.
const UNIX_DIAG_MSG_LEN: usize = 16;
const INET_DIAG_MSG_LEN: usize = 72;

/// The `SK_MEMINFO_*` fields a socket's memory is the sum of: its receive queue
/// (`RMEM_ALLOC`), what it sent that is still queued somewhere (`WMEM_ALLOC`: on a unix
/// socket every queued byte is charged to its sender), TCP's unsent and unacknowledged data
/// (`WMEM_QUEUED`), memory reserved ahead (`FWD_ALLOC`), options (`OPTMEM`) and the backlog.
const COUNTED: [usize; 6] = [0, 2, 4, 5, 6, 7];

/// One dump: which family (and protocol), and what it is called in messages.
struct Query {
    family: u8,
    protocol: u8,
    name: &'static str,
}

const fn query(family: i32, protocol: i32, name: &'static str) -> Query {
    Query {
        family: family as u8,
        protocol: protocol as u8,
        name,
    }
}

const QUERIES: [Query; 5] = [
    query(libc::AF_UNIX, 0, "unix"),
    query(libc::AF_INET, libc::IPPROTO_TCP, "TCP over IPv4"),
    query(libc::AF_INET6, libc::IPPROTO_TCP, "TCP over IPv6"),
    query(libc::AF_INET, libc::IPPROTO_UDP, "UDP over IPv4"),
    query(libc::AF_INET6, libc::IPPROTO_UDP, "UDP over IPv6"),
];

/// In init, inside the sandbox's network namespace: the netlink socket the watch dumps that
/// namespace's sockets through. A dump that waits longer than a second for the kernel fails
/// (the supervisor must not hang on it).
pub fn open() -> Result<OwnedFd, String> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )
    .map_err(|e| {
        format!("create a NETLINK_SOCK_DIAG socket in the sandbox's network namespace: {e}")
    })?;
    setsockopt(
        &fd,
        sockopt::ReceiveTimeout,
        &nix::sys::time::TimeVal::new(1, 0),
    )
    .map_err(|e| format!("set the sock_diag socket's receive timeout: {e}"))?;
    Ok(fd)
}

/// What a unix queue no listed socket's memory shows is counted at (see [`charge`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allowance {
    /// What one sender may have queued: its send buffer, and one more message, which may
    /// pass it.
    pub orphan: u64,
    /// One message (a datagram or seqpacket message as large as a send buffer is allocated
    /// with its head rounded up to a power of two: measured 332,032 bytes for 212,960).
    pub datagram: u64,
}

/// The [`Allowance`] on this host. Under the watch no socket's send buffer grows past
/// `net.core.wmem_default` (`SO_SNDBUF` is refused: see profiles/seccomp/memory-watch.toml),
/// read from the host once.
pub fn allowance() -> Allowance {
    let wmem_default = std::fs::read_to_string("/proc/sys/net/core/wmem_default")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0)
        .max(212_992);
    let datagram = 2 * wmem_default + 4096;
    Allowance {
        orphan: wmem_default + datagram,
        datagram,
    }
}

/// `net.unix.max_dgram_qlen` of a new network namespace (the sandbox cannot change its own:
/// that needs CAP_NET_ADMIN): an unconnected datagram socket queues one more than this.
const UNIX_DGRAM_QLEN: u64 = 10 + 1;

/// Which of the namespace's TCP and UDP tables hold a socket now, in [`QUERIES`]' order after
/// unix: read from its `/proc/net/sockstat` and `sockstat6`, whose `inuse` counts are the
/// namespace's own. A TCP or UDP socket holds data only once it is in its table (bound,
/// listening, connecting or connected: what the dumps list), so an empty table need not be
/// dumped, and a TCP dump is costly: it walks the kernel's whole, host-wide hash of TCP
/// connections, whatever the namespace (0.6 ms for each family on this kind of VM, against
/// microseconds for these counts). None when a count is missing: then every table is dumped.
pub fn tables_in_use(sockstat: &str, sockstat6: &str) -> Option<[bool; 4]> {
    let inuse = |text: &str, proto: &str| {
        text.lines().find_map(|l| {
            let mut f = l.split_ascii_whitespace();
            (f.next()? == proto && f.next()? == "inuse")
                .then(|| f.next()?.parse::<u64>().ok())
                .flatten()
        })
    };
    Some([
        inuse(sockstat, "TCP:")? > 0,
        inuse(sockstat6, "TCP6:")? > 0,
        inuse(sockstat, "UDP:")? > 0,
        inuse(sockstat6, "UDP6:")? > 0,
    ])
}

/// The bytes every unix, TCP and UDP socket of the namespace `diag` was opened in holds in
/// the kernel (with `allow` for what no listed socket shows: see [`charge`]). `in_use`: the
/// TCP and UDP tables to dump (see [`tables_in_use`]; None: all). Err: a dump failed (why,
/// and what to do), and the watch cannot count them.
pub fn socket_bytes(
    diag: BorrowedFd<'_>,
    seq: &mut u32,
    allow: Allowance,
    in_use: Option<[bool; 4]>,
) -> Result<u64, String> {
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    for (i, q) in QUERIES.iter().enumerate() {
        if let (Some(used), Some(i)) = (in_use, i.checked_sub(1))
            && !used[i]
        {
            continue;
        }
        let socks = dump(diag, seq, q, &mut buf)?;
        total = total.saturating_add(charge(&socks, allow, q.family == libc::AF_UNIX as u8));
    }
    Ok(total)
}

/// One dump of the unix sockets of the namespace `diag` was opened in: whether the kernel
/// answers at all (the sandbox's init, before the program starts). Only unix: a TCP dump
/// walks the kernel's whole, host-wide table of TCP connections whatever the namespace (0.7 ms
/// each for IPv4 and IPv6 here), which every sandbox's start would pay; a kernel without
/// `tcp_diag` or `udp_diag` is found at the first sample instead (and by `cordon doctor`).
pub fn probe(diag: BorrowedFd<'_>) -> Result<(), String> {
    dump(diag, &mut 0, &QUERIES[0], &mut vec![0u8; 64 << 10]).map(drop)
}

/// One dump of `q`'s sockets. A dump the kernel marks inconsistent (its table changed while
/// it was read; no sock_diag handler sets the flag today) is an error, not a partial count.
fn dump(
    diag: BorrowedFd<'_>,
    seq: &mut u32,
    q: &Query,
    buf: &mut [u8],
) -> Result<Vec<Sock>, String> {
    *seq = seq.wrapping_add(1);
    let req = request(q, *seq);
    sendto(
        diag.as_raw_fd(),
        &req,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )
    .map_err(|e| dump_error(q, e))?;
    let mut socks = Vec::new();
    let mut interrupted = false;
    loop {
        let n = recv(diag.as_raw_fd(), buf, MsgFlags::empty()).map_err(|e| dump_error(q, e))?;
        match parse(&buf[..n], *seq, q.family == libc::AF_UNIX as u8, &mut socks) {
            Parsed::More { interrupted: i } => interrupted |= i,
            Parsed::Done { interrupted: i } if !(interrupted || i) => return Ok(socks),
            Parsed::Done { .. } => {
                return Err(format!(
                    "cannot read the memory of the sandbox's {} sockets: the kernel marked its sock_diag dump inconsistent (NLM_F_DUMP_INTR); the memory limit cannot be enforced on socket buffers",
                    q.name
                ));
            }
            Parsed::Failed(errno) => return Err(dump_error(q, errno)),
            Parsed::Malformed(why) => {
                return Err(format!(
                    "cannot read the memory of the sandbox's {} sockets: the kernel's sock_diag answer is malformed ({why}); the memory limit cannot be enforced on socket buffers",
                    q.name
                ));
            }
        }
    }
}

/// One socket of a dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Sock {
    ino: u32,
    /// `SOCK_STREAM`, `SOCK_DGRAM`, `SOCK_SEQPACKET` (unix sockets).
    ty: u8,
    state: u8,
    /// The inode of a unix socket's peer (0: none).
    peer: u32,
    /// A unix socket's receive queue (`UNIX_DIAG_RQLEN`): bytes on a stream socket, the first
    /// datagram's length on a datagram socket, pending connections on a listening one.
    rqueue: u32,
    /// A unix socket has an address (anyone may have sent to it).
    bound: bool,
    /// A unix socket's `sk_shutdown` (both bits set once its connected peer closed).
    shutdown: u8,
    /// A listening unix socket's pending connections, and those whose client closed.
    pending: u32,
    orphaned: u32,
    /// The counted `SK_MEMINFO_*` fields.
    mem: u64,
}

const TCP_ESTABLISHED: u8 = 1;

/// What a socket object costs besides its buffers (a unix socket about 2.2 KiB of slab, a
/// pending connection's own socket about as much again).
const SOCKET_BYTES: u64 = 2048;

/// What a dump's sockets hold: each socket's own memory and object, and for unix sockets
/// (`unix`) what their queues may hold that no listed socket's memory shows. A unix
/// socket's queued buffers are charged to the socket that sent them; a sender that closed
/// leaves the table (and the dump) while its buffers stay queued, and a connection not yet
/// accepted is never listed. How much such a queue holds cannot be read (its length in bytes
/// says nothing of a queue of empty messages), so it counts at the most its senders could
/// have queued (`allow`):
/// - a connected stream socket with data queued, or a connected seqpacket or datagram
///   socket, whose peer is gone: one sender's worth (`orphan`);
/// - each pending connection of a listening socket: its own socket, and `orphan` when its
///   client closed (the listener's `UNIX_DIAG_ICONS`, read under its queue's lock, shows the
///   client as 0; a live client is listed, and its queued data with it);
/// - a datagram socket with an address, which anyone may have sent to (and which may since
///   have connected): the [`UNIX_DGRAM_QLEN`] messages its queue takes, and one sender's
///   worth more once its peer is gone.
fn charge(socks: &[Sock], allow: Allowance, unix: bool) -> u64 {
    let objects = (socks.len() as u64).saturating_mul(SOCKET_BYTES);
    let mem = socks
        .iter()
        .map(|s| s.mem)
        .fold(objects, u64::saturating_add);
    if !unix {
        return mem;
    }
    let listed: std::collections::HashSet<u32> = socks.iter().map(|s| s.ino).collect();
    let (stream, seqpacket, dgram) = (
        libc::SOCK_STREAM as u8,
        libc::SOCK_SEQPACKET as u8,
        libc::SOCK_DGRAM as u8,
    );
    let peer_gone = |s: &Sock| s.state == TCP_ESTABLISHED && !listed.contains(&s.peer);
    let orphan = allow.orphan;
    let queues = socks.iter().map(|s| {
        let pending = u64::from(s.pending)
            .saturating_mul(SOCKET_BYTES)
            .saturating_add(u64::from(s.orphaned).saturating_mul(orphan));
        let queue = match s.ty {
            t if t == dgram && s.bound => UNIX_DGRAM_QLEN
                .saturating_mul(allow.datagram)
                .saturating_add(if peer_gone(s) { orphan } else { 0 }),
            t if t == dgram && peer_gone(s) => orphan,
            t if t == seqpacket && peer_gone(s) && s.shutdown != 0 => orphan,
            t if t == stream && peer_gone(s) && s.shutdown != 0 && s.rqueue > 0 => orphan,
            _ => 0,
        };
        pending.saturating_add(queue)
    });
    queues.fold(mem, u64::saturating_add)
}

fn dump_error(q: &Query, e: Errno) -> String {
    let hint = match e {
        Errno::ENOENT => format!(
            " (the kernel has no sock_diag handler for {} sockets: load it, `modprobe {}`)",
            q.name,
            match q.family as i32 {
                libc::AF_UNIX => "unix_diag",
                _ if q.protocol == libc::IPPROTO_TCP as u8 => "tcp_diag",
                _ => "udp_diag",
            }
        ),
        Errno::EAGAIN => " (no answer within a second)".to_string(),
        _ => String::new(),
    };
    format!(
        "cannot read the memory of the sandbox's {} sockets (sock_diag: {e}{hint}); the memory limit cannot be enforced on socket buffers",
        q.name
    )
}

/// The TCP states a dump asks for: all but `TIME_WAIT` (6) and `NEW_SYN_RECV` (12), whose
/// entries are not full sockets (they hold no buffers and come without memory).
const INET_STATES: u32 = !((1 << 6) | (1 << 12));

/// A dump request for `q`: a netlink header and `struct unix_diag_req` or
/// `struct inet_diag_req_v2`, with the sockets' memory (and a unix socket's peer and queue).
fn request(q: &Query, seq: u32) -> Vec<u8> {
    let mut body = vec![q.family, q.protocol, 0, 0];
    if q.family == libc::AF_UNIX as u8 {
        // udiag_states, udiag_ino, udiag_show, udiag_cookie[2]
        body.extend_from_slice(&u32::MAX.to_ne_bytes());
        body.extend_from_slice(&0u32.to_ne_bytes());
        body.extend_from_slice(
            &(UDIAG_SHOW_MEMINFO
                | UDIAG_SHOW_RQLEN
                | UDIAG_SHOW_PEER
                | UDIAG_SHOW_NAME
                | UDIAG_SHOW_ICONS)
                .to_ne_bytes(),
        );
        body.extend_from_slice(&[0; 8]);
    } else {
        // idiag_ext (byte 2), then idiag_states and a zero `struct inet_diag_sockid`.
        body[2] = 1 << (INET_DIAG_SKMEMINFO - 1);
        body.extend_from_slice(&INET_STATES.to_ne_bytes());
        body.extend_from_slice(&[0; 48]);
    }
    let mut msg = Vec::with_capacity(NLMSG_HDRLEN + body.len());
    msg.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    msg.extend_from_slice(&seq.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&body);
    msg
}

/// What one datagram of a dump held (its sockets go into the caller's list).
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// The dump goes on; `interrupted`: the kernel marked a part inconsistent.
    More {
        interrupted: bool,
    },
    /// The last part.
    Done {
        interrupted: bool,
    },
    Failed(Errno),
    Malformed(String),
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_ne_bytes([s[0], s[1]]))
}

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Reads the sockets of one datagram of a dump with sequence number `seq` into `socks`
/// (messages of another sequence, left from a dump that failed half-way, are skipped).
fn parse(buf: &[u8], seq: u32, unix: bool, socks: &mut Vec<Sock>) -> Parsed {
    let header = if unix {
        UNIX_DIAG_MSG_LEN
    } else {
        INET_DIAG_MSG_LEN
    };
    let mut interrupted = false;
    let mut at = 0;
    while at + NLMSG_HDRLEN <= buf.len() {
        let (Some(len), Some(kind), Some(flags), Some(mseq)) = (
            u32_at(buf, at),
            u16_at(buf, at + 4),
            u16_at(buf, at + 6),
            u32_at(buf, at + 8),
        ) else {
            unreachable!("checked length")
        };
        let len = len as usize;
        if len < NLMSG_HDRLEN || at + len > buf.len() {
            return Parsed::Malformed(format!("a message of {len} bytes at {at} of {}", buf.len()));
        }
        let body = &buf[at + NLMSG_HDRLEN..at + len];
        at += align4(len);
        if mseq != seq {
            continue;
        }
        interrupted |= flags & NLM_F_DUMP_INTR != 0;
        // NLMSG_DONE carries the dump's own result: a negative errno when it failed part-way.
        let code = || u32_at(body, 0).map_or(0, |c| c as i32);
        match kind {
            NLMSG_DONE if code() < 0 => return Parsed::Failed(Errno::from_raw(-code())),
            NLMSG_DONE => return Parsed::Done { interrupted },
            NLMSG_ERROR => return Parsed::Failed(Errno::from_raw(-code())),
            SOCK_DIAG_BY_FAMILY => match sock(body, header, unix) {
                Some(s) => socks.push(s),
                None => {
                    return Parsed::Malformed(
                        "a socket without its memory, or cut short".to_string(),
                    );
                }
            },
            other => return Parsed::Malformed(format!("a message of type {other}")),
        }
    }
    Parsed::More { interrupted }
}

/// One socket's message (`body`: its fixed header of `header` bytes, then attributes), or
/// None when it has no memory attribute or is cut short.
fn sock(body: &[u8], header: usize, unix: bool) -> Option<Sock> {
    if body.len() < header {
        return None;
    }
    // unix_diag_msg: family, type, state, pad, ino; inet_diag_msg: family, state, ...
    let mut s = match unix {
        true => Sock {
            ty: body[1],
            state: body[2],
            ino: u32_at(body, 4)?,
            ..Sock::default()
        },
        false => Sock {
            state: body[1],
            ..Sock::default()
        },
    };
    let meminfo_attr = if unix {
        UNIX_DIAG_MEMINFO
    } else {
        INET_DIAG_SKMEMINFO
    };
    let mut mem = None;
    let mut at = header;
    while at + 4 <= body.len() {
        let len = usize::from(u16_at(body, at)?);
        let kind = u16_at(body, at + 2)?;
        if len < 4 || at + len > body.len() {
            return None;
        }
        let data = &body[at + 4..at + len];
        match kind {
            k if k == meminfo_attr => {
                mem = Some(
                    COUNTED
                        .iter()
                        .map(|&i| u64::from(u32_at(data, i * 4).unwrap_or(0)))
                        .sum(),
                );
            }
            UNIX_DIAG_PEER if unix => s.peer = u32_at(data, 0)?,
            UNIX_DIAG_NAME if unix => s.bound = true,
            UNIX_DIAG_SHUTDOWN if unix => s.shutdown = *data.first()?,
            // One client inode per pending connection, 0 for a client that closed.
            UNIX_DIAG_ICONS if unix => {
                let icons = data
                    .chunks_exact(4)
                    .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
                s.pending = icons.clone().count() as u32;
                s.orphaned = icons.filter(|i| *i == 0).count() as u32;
            }
            UNIX_DIAG_RQLEN if unix => s.rqueue = u32_at(data, 0)?,
            _ => {}
        }
        at += align4(len);
    }
    s.mem = match mem {
        Some(m) => m,
        // Entries that are not full sockets come without memory, and hold no buffers (each
        // still counts its SOCKET_BYTES): a TCP connection in TIME_WAIT is a minisock, which
        // the dump lists in its substate (FIN_WAIT2, 5, passes the state filter) with
        // idiag_timer 3; a connection still in its handshake is a request sock, listed as
        // SYN_RECV (3) with timer 1 (SYN-ACK retransmits). Neither has an inode. A full
        // socket (a Fast Open one in SYN_RECV included) always comes with its memory.
        None if !unix && minisock(s.state, body[2]) && u32_at(body, 68)? == 0 => 0,
        None => return None,
    };
    Some(s)
}

/// Whether an inet entry's state and timer are those of a TIME_WAIT minisock or a pending
/// connection's request sock (see [`sock`]).
fn minisock(state: u8, timer: u8) -> bool {
    matches!((state, timer), (5 | 6, 3) | (3, 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn message(kind: u16, flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&flags.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(body);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    fn attr(b: &mut Vec<u8>, kind: u16, data: &[u8]) {
        b.extend_from_slice(&(4 + data.len() as u16).to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(data);
    }

    fn unix_socket(ino: u32, peer: u32, rqueue: u32, mem: [u32; 9]) -> Vec<u8> {
        let mut b = vec![1, libc::SOCK_STREAM as u8, 1, 0];
        b.extend_from_slice(&ino.to_ne_bytes());
        b.extend_from_slice(&[0; 8]);
        attr(
            &mut b,
            UNIX_DIAG_RQLEN,
            &[rqueue.to_ne_bytes(), 0u32.to_ne_bytes()].concat(),
        );
        attr(&mut b, UNIX_DIAG_PEER, &peer.to_ne_bytes());
        let mem: Vec<u8> = mem.iter().flat_map(|v| v.to_ne_bytes()).collect();
        attr(&mut b, UNIX_DIAG_MEMINFO, &mem);
        b
    }

    #[test]
    fn only_the_tables_sockstat_counts_a_socket_in_are_dumped() {
        let v4 = "sockets: used 12\nTCP: inuse 1 orphan 0 tw 0 alloc 1 mem 251\nUDP: inuse 0 mem 52\nUDPLITE: inuse 0\nRAW: inuse 0\nFRAG: inuse 0 memory 0\n";
        let v6 = "TCP6: inuse 0\nUDP6: inuse 2\nUDPLITE6: inuse 0\nRAW6: inuse 0\nFRAG6: inuse 0 memory 0\n";
        assert_eq!(tables_in_use(v4, v6), Some([true, false, false, true]));
        // UDPLITE's count is not UDP's, nor TCP6's TCP's.
        assert_eq!(
            tables_in_use(&v4.replace("UDP: inuse 0", "UDP: inuse 3"), v6),
            Some([true, false, true, true])
        );
        // A count that is missing or does not parse: every table is dumped.
        assert_eq!(tables_in_use(v4, ""), None);
        assert_eq!(
            tables_in_use(&v4.replace("TCP: inuse 1", "TCP: inuse x"), v6),
            None
        );
        assert_eq!(tables_in_use(&v4.replace("TCP:", "TCP4:"), v6), None);
    }

    /// The real counts of a namespace follow its sockets: in a fresh network namespace (this
    /// test's thread's own, so root only), nothing; a bound UDP socket, then a TCP listener.
    #[test]
    fn sockstat_counts_a_bound_udp_socket_and_a_tcp_listener() {
        if !nix::unistd::geteuid().is_root() {
            println!("SKIP: a network namespace of the test's own needs root");
            return;
        }
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
            let read = |p: &str| std::fs::read_to_string(p).expect("read sockstat");
            let now = || {
                tables_in_use(
                    &read("/proc/thread-self/net/sockstat"),
                    &read("/proc/thread-self/net/sockstat6"),
                )
                .expect("this kernel's sockstat has the inuse counts")
            };
            assert_eq!(now(), [false; 4], "a fresh namespace");
            let udp = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
            assert_eq!(now(), [false, false, true, false], "a bound UDP socket");
            let tcp = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
            assert_eq!(now(), [true, false, true, false], "and a TCP listener");
            drop((udp, tcp));
            assert_eq!(now(), [false; 4], "both closed");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_dump_reads_each_socket_s_queued_reserved_and_backlogged_bytes() {
        // rmem 100, rcvbuf 212992 (a size, not used), wmem 2000, sndbuf (size), fwd 7,
        // queued 30, optmem 4, backlog 5, drops (a count).
        let mem = [100, 212992, 2000, 212992, 7, 30, 4, 5, 9];
        let mut dgram = message(SOCK_DIAG_BY_FAMILY, 0, 7, &unix_socket(11, 12, 0, mem));
        dgram.extend(message(
            SOCK_DIAG_BY_FAMILY,
            0,
            7,
            &unix_socket(12, 11, 3, mem),
        ));
        let mut socks = Vec::new();
        assert_eq!(
            parse(&dgram, 7, true, &mut socks),
            Parsed::More { interrupted: false }
        );
        assert_eq!(socks.len(), 2);
        assert_eq!(
            (socks[1].ino, socks[1].peer, socks[1].rqueue, socks[1].mem),
            (12, 11, 3, 2146)
        );
        dgram.extend(message(NLMSG_DONE, 0, 7, &0i32.to_ne_bytes()));
        assert_eq!(
            parse(&dgram, 7, true, &mut Vec::new()),
            Parsed::Done { interrupted: false }
        );
        // Another dump's leftovers are skipped; a part marked inconsistent says so.
        let mut none = Vec::new();
        assert_eq!(
            parse(&dgram, 8, true, &mut none),
            Parsed::More { interrupted: false }
        );
        assert!(none.is_empty());
        let intr = message(
            SOCK_DIAG_BY_FAMILY,
            NLM_F_DUMP_INTR,
            9,
            &unix_socket(1, 0, 0, mem),
        );
        assert_eq!(
            parse(&intr, 9, true, &mut Vec::new()),
            Parsed::More { interrupted: true }
        );
    }

    #[test]
    fn an_error_a_failed_dump_or_a_socket_without_memory_is_not_zero() {
        let err = message(NLMSG_ERROR, 0, 3, &(-libc::ENOENT).to_ne_bytes());
        assert_eq!(
            parse(&err, 3, false, &mut Vec::new()),
            Parsed::Failed(Errno::ENOENT)
        );
        // A dump that fails part-way ends with NLMSG_DONE carrying the error.
        let done = message(NLMSG_DONE, 0, 3, &(-libc::EINTR).to_ne_bytes());
        assert_eq!(
            parse(&done, 3, true, &mut Vec::new()),
            Parsed::Failed(Errno::EINTR)
        );
        let bare = message(SOCK_DIAG_BY_FAMILY, 0, 3, &[0u8; INET_DIAG_MSG_LEN]);
        assert!(matches!(
            parse(&bare, 3, false, &mut Vec::new()),
            Parsed::Malformed(_)
        ));
        let mut cut = message(SOCK_DIAG_BY_FAMILY, 0, 3, &unix_socket(1, 0, 0, [1; 9]));
        cut.truncate(cut.len() - 8);
        assert!(matches!(
            parse(&cut, 3, true, &mut Vec::new()),
            Parsed::Malformed(_)
        ));
    }

    #[test]
    fn queues_whose_sender_is_gone_count_at_a_whole_send_buffer() {
        let (stream, seqpacket, dgram) =
            (libc::SOCK_STREAM, libc::SOCK_SEQPACKET, libc::SOCK_DGRAM);
        let sock = |ino, ty: i32, state, peer, rqueue, shutdown| Sock {
            ino,
            ty: ty as u8,
            state,
            peer,
            rqueue,
            shutdown,
            mem: 1,
            ..Sock::default()
        };
        let (est, closed, listen) = (TCP_ESTABLISHED, 7, 10);
        let allow = Allowance {
            orphan: 1000,
            datagram: 100,
        };
        // What a dump costs besides its sockets' own memory and objects.
        let c =
            |socks: &[Sock]| charge(socks, allow, true) - socks.len() as u64 * (SOCKET_BYTES + 1);
        // A connected pair: the queued data is in the sender's memory; nothing more.
        assert_eq!(
            c(&[
                sock(1, stream, est, 2, 0, 0),
                sock(2, stream, est, 1, 300, 0)
            ]),
            0
        );
        // The sender closed (the survivor is shut down, its peer no longer listed).
        assert_eq!(c(&[sock(2, stream, est, 0, 300, 3)]), 1000);
        assert_eq!(c(&[sock(2, stream, est, 9, 300, 3)]), 1000);
        // ...an empty stream holds nothing; a seqpacket or datagram queue of empty messages
        // shows no length, so it counts whatever its length.
        assert_eq!(c(&[sock(2, stream, est, 0, 0, 3)]), 0);
        assert_eq!(c(&[sock(2, seqpacket, est, 0, 0, 3)]), 1000);
        assert_eq!(c(&[sock(2, dgram, est, 0, 0, 0)]), 1000);
        // A socket never connected holds nothing.
        assert_eq!(
            c(&[
                sock(2, dgram, closed, 0, 0, 0),
                sock(3, stream, closed, 0, 0, 0)
            ]),
            0
        );
        // Three connections pending, which no dump lists: each its own socket, and one whose
        // client closed (its icon 0) a sender's worth.
        let listener = Sock {
            pending: 3,
            orphaned: 1,
            ..sock(4, stream, listen, 0, 3, 0)
        };
        assert_eq!(c(&[listener]), 3 * SOCKET_BYTES + 1000);
        // A datagram socket with an address: anyone may have queued to it, whatever its
        // queue and peer now show; once its peer is gone, that peer's worth more.
        let bound = Sock {
            bound: true,
            ..sock(6, dgram, est, 5, 0, 0)
        };
        assert_eq!(
            c(&[bound, sock(5, dgram, est, 6, 0, 0)]),
            UNIX_DGRAM_QLEN * 100
        );
        assert_eq!(c(&[bound]), UNIX_DGRAM_QLEN * 100 + 1000);
        // TCP and UDP sockets count their own memory and objects only.
        let inet = [sock(0, stream, est, 0, 0, 3), sock(0, dgram, est, 0, 0, 0)];
        assert_eq!(charge(&inet, allow, false), 2 * (SOCKET_BYTES + 1));
    }

    /// Waits (5 s at most) until this thread's /proc/net/tcp lists an entry in state `st` with
    /// timer `timer` (both as the file prints them, in hex).
    fn wait_for_tcp_entry(st: &str, timer: &str, what: &str) {
        let listed = || {
            let tcp = std::fs::read_to_string("/proc/thread-self/net/tcp").unwrap();
            tcp.lines().skip(1).any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.get(3) == Some(&st)
                    && f.get(5).is_some_and(|t| t.split(':').next() == Some(timer))
            })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !listed() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// A TCP connection whose side closed first while the other still holds it open becomes
    /// a TIME_WAIT minisock in substate FIN_WAIT2, which the dump lists without memory: it
    /// is counted as nothing, not taken for a malformed answer (which killed the sandbox of
    /// a `pip install` talking to a local index). Root only: a network namespace of its own.
    #[test]
    fn a_closed_tcp_connection_in_time_wait_is_not_malformed() {
        if !nix::unistd::geteuid().is_root() {
            println!("SKIP: a network namespace of the test's own needs root");
            return;
        }
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
            let lo = std::process::Command::new("ip")
                .args(["link", "set", "lo", "up"])
                .status();
            assert!(lo.is_ok_and(|s| s.success()), "ip link set lo up");
            let diag = open().expect("NETLINK_SOCK_DIAG socket");
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (server, _) = listener.accept().unwrap();
            drop(client);
            // st 05 (FIN_WAIT2) with timer 3 (TIME_WAIT): the minisock.
            wait_for_tcp_entry("05", "03", "no FIN_WAIT2 minisock");
            let mut seq = 0;
            let mut buf = vec![0u8; 64 << 10];
            let socks = dump(diag.as_fd(), &mut seq, &QUERIES[1], &mut buf)
                .expect("a dump with a TIME_WAIT minisock");
            // The listener and the server's side (CLOSE_WAIT) with their memory, and the
            // minisock with none.
            let states: Vec<(u8, bool)> = socks.iter().map(|s| (s.state, s.mem > 0)).collect();
            assert!(states.contains(&(5, false)), "{states:?}");
            assert!(states.contains(&(8, true)), "{states:?}");
            drop(server);

            // A connection whose handshake the listener holds back (TCP_DEFER_ACCEPT: no
            // data yet) stays a request sock in SYN_RECV. (Made by python3, a child of this
            // thread, so in its network namespace: nix has no TCP_DEFER_ACCEPT.)
            let mut py = std::process::Command::new("python3")
                .args(["-c", "import socket,sys\nl=socket.socket()\nl.setsockopt(socket.IPPROTO_TCP,socket.TCP_DEFER_ACCEPT,5)\nl.bind(('127.0.0.1',0))\nl.listen()\nc=socket.create_connection(l.getsockname())\nprint('ready',flush=True)\nsys.stdin.read()"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("python3");
            let mut line = String::new();
            std::io::BufRead::read_line(
                &mut std::io::BufReader::new(py.stdout.take().unwrap()),
                &mut line,
            )
            .unwrap();
            assert_eq!(line, "ready\n");
            // st 03 (SYN_RECV) with timer 1 (SYN-ACK retransmits): the request sock.
            wait_for_tcp_entry("03", "01", "no SYN_RECV request sock");
            let socks = dump(diag.as_fd(), &mut seq, &QUERIES[1], &mut buf)
                .expect("a dump with a pending handshake");
            let states: Vec<(u8, bool)> = socks.iter().map(|s| (s.state, s.mem > 0)).collect();
            assert!(states.contains(&(3, false)), "{states:?}");
            drop(py.stdin.take());
            py.wait().unwrap();
        })
        .join()
        .unwrap();
    }

    #[test]
    fn queued_data_of_a_real_socket_pair_is_counted_even_after_its_sender_closed() {
        use nix::sys::socket::{send, socketpair};
        // In a network namespace of its own (a thread may unshare one), the dump sees only
        // this test's sockets.
        let r: Result<_, Errno> = std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)?;
            let diag = open().expect("NETLINK_SOCK_DIAG socket");
            let mut seq = 0;
            let allow = allowance();
            let orphan = allow.orphan;
            let mut count = || socket_bytes(diag.as_fd(), &mut seq, allow, None).expect("dump");
            let empty = count();
            let (a, b) = socketpair(
                AddressFamily::Unix,
                SockType::Stream,
                None,
                SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            )
            .unwrap();
            let mut sent = 0u64;
            while let Ok(n) = send(a.as_raw_fd(), &[7u8; 4096], MsgFlags::empty()) {
                sent += n as u64;
            }
            let full = count();
            // Another test thread forking meanwhile gives its child a copy of these sockets
            // until it execs or exits: the counts after each close may lag, so they are read
            // until they settle on the value wanted (or a second has passed).
            let mut settled = |want: u64| {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
                loop {
                    let n = count();
                    if n == want || std::time::Instant::now() > deadline {
                        return n;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            };
            drop(a);
            let orphaned = settled(orphan + SOCKET_BYTES);
            drop(b);
            let closed = settled(0);
            Ok((empty, sent, full, orphaned, closed, orphan))
        })
        .join()
        .unwrap();
        let (empty, sent, full, orphaned, closed, orphan) = match r {
            Ok(v) => v,
            Err(e) => {
                println!(
                    "SKIP: queued_data_of_a_real_socket_pair_is_counted: unshare(CLONE_NEWNET): {e} (run the tests as root)"
                );
                return;
            }
        };
        assert_eq!(empty, 0);
        assert!(sent >= 64 << 10, "sent {sent}");
        // Each queued buffer is charged with its overhead: at least what was sent (and the
        // two sockets' objects).
        assert!(
            full >= sent + 2 * SOCKET_BYTES && full < 4 * sent,
            "{sent} bytes queued, counted {full}"
        );
        assert!(
            orphan > full,
            "one sender's worth {orphan} holds what was queued {full}"
        );
        assert_eq!(
            orphaned,
            orphan + SOCKET_BYTES,
            "the sender closed, its data still queued"
        );
        assert_eq!(closed, 0);
    }
}

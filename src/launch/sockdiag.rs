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

/// `UDIAG_SHOW_MEMINFO`, and the attribute that answers it (`UNIX_DIAG_MEMINFO`).
const UDIAG_SHOW_MEMINFO: u32 = 0x20;
const UNIX_DIAG_MEMINFO: u16 = 5;
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

const QUERIES: [Query; 5] = [
    Query {
        family: libc::AF_UNIX as u8,
        protocol: 0,
        name: "unix",
    },
    Query {
        family: libc::AF_INET as u8,
        protocol: libc::IPPROTO_TCP as u8,
        name: "TCP over IPv4",
    },
    Query {
        family: libc::AF_INET6 as u8,
        protocol: libc::IPPROTO_TCP as u8,
        name: "TCP over IPv6",
    },
    Query {
        family: libc::AF_INET as u8,
        protocol: libc::IPPROTO_UDP as u8,
        name: "UDP over IPv4",
    },
    Query {
        family: libc::AF_INET6 as u8,
        protocol: libc::IPPROTO_UDP as u8,
        name: "UDP over IPv6",
    },
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

/// The bytes every unix, TCP and UDP socket of the namespace `diag` was opened in holds in
/// the kernel. Err: a dump failed (why, and what to do), and the watch cannot count them.
pub fn socket_bytes(diag: BorrowedFd<'_>, seq: &mut u32) -> Result<u64, String> {
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    for q in &QUERIES {
        *seq = seq.wrapping_add(1);
        let req = request(q, *seq);
        sendto(
            diag.as_raw_fd(),
            &req,
            &NetlinkAddr::new(0, 0),
            MsgFlags::empty(),
        )
        .map_err(|e| dump_error(q, e))?;
        loop {
            let n = recv(diag.as_raw_fd(), &mut buf, MsgFlags::empty())
                .map_err(|e| dump_error(q, e))?;
            match parse(&buf[..n], *seq, q.family == libc::AF_UNIX as u8) {
                Parsed::More(bytes) => total = total.saturating_add(bytes),
                Parsed::Done(bytes) => {
                    total = total.saturating_add(bytes);
                    break;
                }
                Parsed::Failed(errno) => return Err(dump_error(q, errno)),
                Parsed::Malformed(why) => {
                    return Err(format!(
                        "cannot read the memory of the sandbox's {} sockets: the kernel's sock_diag answer is malformed ({why})",
                        q.name
                    ));
                }
            }
        }
    }
    Ok(total)
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

/// A dump request for `q`: a netlink header and `struct unix_diag_req` or
/// `struct inet_diag_req_v2`, every state, with the sockets' memory.
fn request(q: &Query, seq: u32) -> Vec<u8> {
    let mut body = vec![q.family, q.protocol, 0, 0];
    if q.family == libc::AF_UNIX as u8 {
        // udiag_states, udiag_ino, udiag_show, udiag_cookie[2]
        body.extend_from_slice(&u32::MAX.to_ne_bytes());
        body.extend_from_slice(&0u32.to_ne_bytes());
        body.extend_from_slice(&UDIAG_SHOW_MEMINFO.to_ne_bytes());
        body.extend_from_slice(&[0; 8]);
    } else {
        // idiag_ext (byte 2), then idiag_states and a zero `struct inet_diag_sockid`.
        body[2] = 1 << (INET_DIAG_SKMEMINFO - 1);
        body.extend_from_slice(&u32::MAX.to_ne_bytes());
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

/// What one datagram of a dump held.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// Sockets (their bytes); the dump goes on.
    More(u64),
    /// The last part (its sockets' bytes).
    Done(u64),
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

/// Adds up the sockets' memory in one datagram of a dump with sequence number `seq`
/// (messages of another sequence, left from a dump that failed half-way, are skipped).
fn parse(buf: &[u8], seq: u32, unix: bool) -> Parsed {
    let (header, attr) = if unix {
        (UNIX_DIAG_MSG_LEN, UNIX_DIAG_MEMINFO)
    } else {
        (INET_DIAG_MSG_LEN, INET_DIAG_SKMEMINFO)
    };
    let mut total = 0u64;
    let mut at = 0;
    while at + NLMSG_HDRLEN <= buf.len() {
        let (Some(len), Some(kind), Some(mseq)) =
            (u32_at(buf, at), u16_at(buf, at + 4), u32_at(buf, at + 8))
        else {
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
        match kind {
            NLMSG_DONE => return Parsed::Done(total),
            NLMSG_ERROR => {
                let code = u32_at(body, 0).map_or(0, |c| c as i32);
                return Parsed::Failed(Errno::from_raw(-code));
            }
            SOCK_DIAG_BY_FAMILY => match meminfo(body, header, attr) {
                Some(bytes) => total = total.saturating_add(bytes),
                None => {
                    return Parsed::Malformed(format!(
                        "a socket without its memory (attribute {attr})"
                    ));
                }
            },
            other => return Parsed::Malformed(format!("a message of type {other}")),
        }
    }
    Parsed::More(total)
}

/// The counted `SK_MEMINFO_*` fields of one socket's message (`body`: its fixed header of
/// `header` bytes, then attributes), or None when it has no `attr`.
fn meminfo(body: &[u8], header: usize, attr: u16) -> Option<u64> {
    let mut at = header;
    while at + 4 <= body.len() {
        let len = usize::from(u16_at(body, at)?);
        let kind = u16_at(body, at + 2)?;
        if len < 4 || at + len > body.len() {
            return None;
        }
        if kind == attr {
            let fields = &body[at + 4..at + len];
            return Some(
                COUNTED
                    .iter()
                    .map(|&i| u64::from(u32_at(fields, i * 4).unwrap_or(0)))
                    .sum(),
            );
        }
        at += align4(len);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn message(kind: u16, seq: u32, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(body);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    fn unix_socket(mem: [u32; 9]) -> Vec<u8> {
        let mut b = vec![0u8; UNIX_DIAG_MSG_LEN];
        // An RQLEN attribute first, which is skipped.
        b.extend_from_slice(&12u16.to_ne_bytes());
        b.extend_from_slice(&4u16.to_ne_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&(4 + 36u16).to_ne_bytes());
        b.extend_from_slice(&UNIX_DIAG_MEMINFO.to_ne_bytes());
        for v in mem {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b
    }

    #[test]
    fn a_dump_adds_up_queued_reserved_and_backlogged_bytes_not_buffer_sizes() {
        // rmem 100, rcvbuf 212992 (a size, not used), wmem 2000, sndbuf (size), fwd 7,
        // queued 30, optmem 4, backlog 5, drops (a count).
        let one = unix_socket([100, 212992, 2000, 212992, 7, 30, 4, 5, 9]);
        let mut dgram = message(SOCK_DIAG_BY_FAMILY, 7, &one);
        dgram.extend(message(SOCK_DIAG_BY_FAMILY, 7, &one));
        assert_eq!(parse(&dgram, 7, true), Parsed::More(2 * 2146));
        dgram.extend(message(NLMSG_DONE, 7, &[0; 4]));
        assert_eq!(parse(&dgram, 7, true), Parsed::Done(2 * 2146));
        // Another dump's leftovers are skipped.
        assert_eq!(parse(&dgram, 8, true), Parsed::More(0));
    }

    #[test]
    fn an_error_or_a_socket_without_memory_is_not_zero() {
        let err = message(NLMSG_ERROR, 3, &(-libc::ENOENT).to_ne_bytes());
        assert_eq!(parse(&err, 3, false), Parsed::Failed(Errno::ENOENT));
        let bare = message(SOCK_DIAG_BY_FAMILY, 3, &[0u8; INET_DIAG_MSG_LEN]);
        assert!(matches!(parse(&bare, 3, false), Parsed::Malformed(_)));
        let mut cut = message(SOCK_DIAG_BY_FAMILY, 3, &unix_socket([1; 9]));
        cut.truncate(cut.len() - 8);
        assert!(matches!(parse(&cut, 3, true), Parsed::Malformed(_)));
    }

    #[test]
    fn queued_data_of_a_real_socket_pair_is_counted() {
        use nix::sys::socket::{send, socketpair};
        // In a network namespace of its own (a thread may unshare one), the dump sees only
        // this test's sockets.
        let r: Result<_, Errno> = std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)?;
            let diag = open().expect("NETLINK_SOCK_DIAG socket");
            let mut seq = 0;
            let empty = socket_bytes(diag.as_fd(), &mut seq).expect("dump");
            let (a, b) = socketpair(
                AddressFamily::Unix,
                SockType::Stream,
                None,
                SockFlag::SOCK_NONBLOCK,
            )
            .unwrap();
            let mut sent = 0u64;
            while let Ok(n) = send(a.as_raw_fd(), &[7u8; 4096], MsgFlags::empty()) {
                sent += n as u64;
            }
            let full = socket_bytes(diag.as_fd(), &mut seq).expect("dump");
            drop((a, b));
            let closed = socket_bytes(diag.as_fd(), &mut seq).expect("dump");
            Ok((empty, sent, full, closed))
        })
        .join()
        .unwrap();
        let (empty, sent, full, closed) = match r {
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
        // Each queued buffer is charged with its overhead: at least what was sent.
        assert!(
            full >= sent && full < 4 * sent,
            "{sent} bytes queued, counted {full}"
        );
        assert_eq!(closed, 0);
    }
}

//! The sandbox's network namespace, made beside init instead of by the launcher's clone.
//!
//! A new network namespace is the costliest part of that clone: about 0.5 ms of the 0.7 ms
//! the seven namespaces take here, nearly all of it the kernel registering the namespace's
//! IPv4, IPv6 and netfilter sysctl tables. init needs the namespace only once it has built
//! the root, about 1 ms later, and cordon mostly waits meanwhile. So the clone makes the
//! other namespaces, and cordon, after the first go, forks a helper ([`spawn`]) that joins the
//! sandbox's new user namespace, makes the network namespace there (owned by that user
//! namespace, as the clone's was), brings its `lo` up and sends it to init. init enters it
//! ([`enter`]) as soon as the root is built, before anything that uses the network: the
//! proxy's socket under `--net allow=`, the memory watch's sock_diag socket, the payload.
//! Until then init runs cordon's own code only, in the host's network namespace, and opens
//! no socket there.
//!
//! The owner of a user namespace holds every capability in it, so the helper (cordon's
//! child, with cordon's credentials) may join it and create namespaces there, root caller
//! or not. A failure reaches init as the step and its errno, and init reports it as its own.

use super::channel;
use crate::sys::{self, CloneResult};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sched::{CloneFlags, setns, unshare};
use nix::unistd::Pid;
use std::os::fd::{AsRawFd, OwnedFd};

/// Why the kernel may refuse a network namespace, and what to do.
pub const NETNS_HINT: &str = "; the kernel refused a new network namespace while every other namespace could be made (user.max_net_namespaces reached or 0, or a security module or seccomp filter on this host): raise it with `sysctl -w user.max_net_namespaces=10000` as root and check with `cordon doctor`; `--net host` runs without one, sharing the host's network";

/// The helper's steps, in order: what each does, and the hint for its failure. Sent to init
/// as the index.
const STEPS: &[(&str, &str)] = &[
    (
        "join the sandbox's user namespace to make its network namespace (setns)",
        "; cordon owns that namespace and holds every capability in it: a security module on this host may refuse the join; `--net host` runs without a network namespace",
    ),
    (
        "create the sandbox's network namespace (unshare CLONE_NEWNET)",
        NETNS_HINT,
    ),
    (
        "open a socket in the sandbox's network namespace",
        "; EMFILE/ENFILE: raise the open-file limit (`ulimit -n`); `--net host` skips this step",
    ),
    (
        "read the sandbox's loopback interface's flags (SIOCGIFFLAGS)",
        "; the helper holds CAP_NET_ADMIN in the namespace it made: a security module may refuse it (run `cordon doctor`), or use `--net host`",
    ),
    (
        "bring up the sandbox's loopback interface (SIOCSIFFLAGS)",
        "; the helper holds CAP_NET_ADMIN in the namespace it made: a security module may refuse it (run `cordon doctor`), or use `--net host`",
    ),
    (
        "open the sandbox's network namespace (/proc/thread-self/ns/net)",
        "; cordon needs /proc mounted",
    ),
];

/// The indices of the steps in [`STEPS`].
const JOIN: u8 = 0;
const CREATE: u8 = 1;
const SOCKET: u8 = 2;
const LO_FLAGS: u8 = 3;
const LO_UP: u8 = 4;
const OPEN: u8 = 5;

/// The hint for a network namespace the kernel could not make for want of memory or
/// processes (EAGAIN, ENOMEM), not because a limit or policy refused it.
const SHORTAGE_HINT: &str =
    "; a shortage of memory or processes on this host, likely passing: try again";
/// The hint for any other failure to make it (EINVAL: a kernel without network namespaces).
const OTHER_HINT: &str = "; run `cordon doctor`, which checks that this kernel can make network namespaces, or use `--net host`";

/// The first byte of a failure message; a success is [`channel::send_fds`]'s, whose first
/// byte is the number of descriptors (1).
const FAILED: u8 = 0;

/// Forks the helper: it joins `userns` (the sandbox's user namespace), makes the network
/// namespace, brings `lo` up and sends the namespace on `to_init`, or the step that failed
/// and its errno, then exits. The caller reaps it (it never waits for init).
pub fn spawn(userns: &OwnedFd, to_init: &OwnedFd) -> Result<Pid, Errno> {
    match sys::fork()? {
        CloneResult::Child => {
            // Nothing of cordon's but these two, not even its stdio: the helper must not hold
            // the ends of cordon's pipes (init notices cordon's death by their end-of-file,
            // cordon's caller its end by its output's).
            if sys::close_fds_except(&[userns.as_raw_fd(), to_init.as_raw_fd()]).is_err() {
                sys::exit_now(1);
            }
            for fd in 0..=2 {
                let _ = nix::unistd::close(fd);
            }
            let sent = match make(userns) {
                Ok(ns) => channel::send_fds(to_init, &[ns]),
                Err((step, errno)) => {
                    let mut msg = [FAILED; 6];
                    msg[1] = step;
                    msg[2..].copy_from_slice(&(errno as i32).to_le_bytes());
                    channel::send_bytes(to_init, &msg)
                }
            };
            sys::exit_now(i32::from(sent.is_err()))
        }
        CloneResult::Parent(pid) => Ok(pid),
    }
}

/// The helper's work: the new network namespace, `lo` up. On failure: the index of the step
/// in [`STEPS`] and its errno.
fn make(userns: &OwnedFd) -> Result<OwnedFd, (u8, Errno)> {
    setns(userns, CloneFlags::CLONE_NEWUSER).map_err(|e| (JOIN, e))?;
    unshare(CloneFlags::CLONE_NEWNET).map_err(|e| (CREATE, e))?;
    let lo = sys::loopback_socket().map_err(|e| (SOCKET, e))?;
    sys::loopback_up(&lo).map_err(|(step, e)| match step {
        sys::LoopbackStep::ReadFlags => (LO_FLAGS, e),
        sys::LoopbackStep::SetFlags => (LO_UP, e),
    })?;
    nix::fcntl::open(
        "/proc/thread-self/ns/net",
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| (OPEN, e))
}

/// init: receives the network namespace the helper made (blocking until it is sent) and
/// enters it. On failure: the step and the message init reports.
pub fn enter(from_helper: &OwnedFd) -> Result<(), (&'static str, String)> {
    let ns = receive(from_helper)?;
    setns(ns, CloneFlags::CLONE_NEWNET).map_err(|e| {
        (
            "enter the sandbox's network namespace (setns)",
            format!(
                "{e}; a security module on this host may refuse it (run `cordon doctor`), or use `--net host`"
            ),
        )
    })
}

/// For `cordon doctor`: makes a network namespace as a run does (a helper joins a new user
/// namespace, makes it there and brings `lo` up) and drops it. On failure: the step and the
/// message a run would report.
pub fn probe() -> Result<(), (&'static str, String)> {
    let fail = |step: &'static str| move |e: Errno| (step, e.to_string());
    // The new user namespace's process: it waits for end-of-file on the pipe, then exits.
    let (hold_r, hold_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(fail("create a pipe"))?;
    let owner = match sys::clone_namespaces(libc::CLONE_NEWUSER)
        .map_err(fail("create a user namespace (clone)"))?
    {
        CloneResult::Child => {
            drop(hold_w);
            let _ = nix::unistd::read(&hold_r, &mut [0u8; 1]);
            sys::exit_now(0)
        }
        CloneResult::Parent(pid) => pid,
    };
    drop(hold_r);
    let made = (|| {
        let userns = nix::fcntl::open(
            format!("/proc/{owner}/ns/user").as_str(),
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(fail("open the new user namespace (/proc/PID/ns/user)"))?;
        let (ours, theirs) = nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::SeqPacket,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        )
        .map_err(fail("create a socketpair"))?;
        let helper = spawn(&userns, &theirs).map_err(fail("fork the helper"))?;
        drop(theirs);
        let got = receive(&ours).map(drop);
        while let Err(Errno::EINTR) = nix::sys::wait::waitpid(helper, None) {}
        got
    })();
    drop(hold_w);
    while let Err(Errno::EINTR) = nix::sys::wait::waitpid(owner, None) {}
    made
}

/// Receives the network namespace the helper made, or the step that failed.
fn receive(from_helper: &OwnedFd) -> Result<OwnedFd, (&'static str, String)> {
    const RECEIVE: &str = "receive the sandbox's network namespace from cordon's helper";
    let mut buf = [0u8; 6];
    let (len, fds) = channel::recv_bytes_and_fds(from_helper, &mut buf).map_err(|e| {
        let why = match e {
            Errno::EBADMSG => "the descriptor did not arrive: init is at its open-file limit, or a security module refused it",
            _ => "a bug in cordon, report it",
        };
        (RECEIVE, format!("{e} ({why})"))
    })?;
    match (len, buf[0], <[OwnedFd; 1]>::try_from(fds)) {
        (1, 1, Ok([ns])) => Ok(ns),
        (6, FAILED, _) if usize::from(buf[1]) < STEPS.len() => {
            let (step, hint) = STEPS[usize::from(buf[1])];
            let errno = Errno::from_raw(i32::from_le_bytes([buf[2], buf[3], buf[4], buf[5]]));
            // Only a refusal is blamed on the namespace limit: a passing shortage is not.
            let hint = match (buf[1], errno) {
                (CREATE, Errno::ENOSPC | Errno::EPERM | Errno::EACCES | Errno::EUSERS) => hint,
                (CREATE, Errno::EAGAIN | Errno::ENOMEM) => SHORTAGE_HINT,
                (CREATE, _) => OTHER_HINT,
                _ => hint,
            };
            Err((step, format!("{errno}{hint}")))
        }
        (0, _, _) => Err((
            RECEIVE,
            "the helper ended without sending it (killed, or a bug in cordon: report it)".into(),
        )),
        _ => Err((
            RECEIVE,
            format!("{} (a bug in cordon, report it)", Errno::EBADMSG),
        )),
    }
}

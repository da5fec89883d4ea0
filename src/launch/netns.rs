//! The sandbox's network namespace, made beside init instead of by the launcher's clone.
//!
//! A new network namespace is the costliest part of that clone: about 0.5 ms of the 0.7 ms
//! the seven namespaces take here, nearly all of it the kernel registering the namespace's
//! IPv4, IPv6 and netfilter sysctl tables. init needs the namespace only once it has built
//! the root, about 1 ms later, and cordon mostly waits meanwhile. So the clone makes the
//! other namespaces, and cordon, after the first go, starts a helper ([`start`]) that joins
//! the sandbox's new user namespace, makes the network namespace there (owned by that user
//! namespace, as the clone's was), brings its `lo` up and sends it to init. init enters it
//! ([`enter`]) as soon as the root is built, before anything that uses the network: the
//! proxy's socket under `--net allow=`, the memory watch's sock_diag socket, the payload.
//! Until then init runs cordon's own code only, in the host's network namespace, and opens
//! no socket there.
//!
//! The helper runs on cordon's memory (`sys::start_netns_helper`: no fork's copying), and
//! cordon waits for it before it makes the cgroup, so that only init and the helper compete
//! for the processors meanwhile; a helper stuck in the kernel holds up neither the run's
//! deadline nor a signal to cordon (`launch::reap_helper`).
//!
//! The owner of a user namespace holds every capability in it, so the helper (cordon's
//! child, with cordon's credentials) may join it and create namespaces there, root caller
//! or not. A failure reaches init as the step and its errno, and init reports it as its own.

use super::channel;
use crate::sys::{self, CloneResult};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sched::{CloneFlags, setns};
use std::os::fd::OwnedFd;

/// The hint for a network namespace refused at its limit (ENOSPC; EUSERS: user namespaces
/// nested too deep).
const LIMIT_HINT: &str = "the limit of network namespaces is reached or 0 (user.max_net_namespaces): raise it with `sysctl -w user.max_net_namespaces=10000` as root; `--net host` runs without one, sharing the host's network";
/// The hint for a network namespace refused by policy (EPERM, EACCES).
const POLICY_HINT: &str = "a security module or seccomp filter on this host refuses new network namespaces (cordon holds every capability in the sandbox's user namespace); `--net host` runs without one, sharing the host's network";
/// The hint for a network namespace the kernel could not make for want of memory or
/// processes (EAGAIN, ENOMEM).
const SHORTAGE_HINT: &str =
    "a shortage of memory or processes on this host, likely passing: try again";
/// The hint for any other failure to make it (EINVAL: a kernel without network namespaces).
const OTHER_HINT: &str = "this kernel may lack network namespaces (CONFIG_NET_NS; `cordon doctor` checks); `--net host` runs without one";
/// The hint for a refused SIOCSIFFLAGS on `lo`: it needs CAP_NET_ADMIN in the namespace,
/// which the helper holds.
const LO_HINT: &str = "the helper holds CAP_NET_ADMIN in the namespace it made: a security module or seccomp filter on this host refused the request; `--net host` runs without a network namespace";

/// The helper's steps, in order: what each does, and the hint for its failure (for
/// [`CREATE`], chosen by errno). Sent to init as the index (`sys::helper_step`).
const STEPS: &[(&str, &str)] = &[
    (
        "join the sandbox's user namespace to make its network namespace (setns)",
        "cordon owns that namespace and holds every capability in it: a security module or seccomp filter on this host refused the join; `--net host` runs without a network namespace",
    ),
    (
        "create the sandbox's network namespace (unshare CLONE_NEWNET)",
        OTHER_HINT,
    ),
    (
        "open a socket in the sandbox's network namespace",
        "EMFILE/ENFILE: raise the open-file limit (`ulimit -n`); EPERM/EACCES: a security module or seccomp filter on this host refuses IPv4 sockets; `--net host` skips this step",
    ),
    (
        "read the sandbox's loopback interface's flags (SIOCGIFFLAGS)",
        "reading an interface's flags needs no privilege: a security module or seccomp filter on this host refused it; `--net host` runs without a network namespace",
    ),
    (
        "bring up the sandbox's loopback interface (SIOCSIFFLAGS)",
        LO_HINT,
    ),
    (
        "open the sandbox's network namespace (/proc/thread-self/ns/net)",
        "cordon needs /proc mounted",
    ),
];

/// The probe's wait for its answer.
const WAIT: &str =
    "wait for the network namespace (made by a helper, entered from its user namespace)";

/// init's own steps.
const RECEIVE: &str = "receive the sandbox's network namespace from cordon's helper";
const ENTER: &str = "enter the sandbox's network namespace (setns)";

// The indices of the steps in STEPS, and the first byte of a failure message, are the
// helper's (sys::helper_step); a success is the byte 1 and the namespace, as
// channel::send_fds sends one descriptor.
use sys::helper_step::{CREATE, FAILED};

/// Why the sandbox's network namespace could not be made or entered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What was being done (a run reports "cannot {step}").
    pub step: &'static str,
    /// What went wrong: the errno, or what was missing.
    pub cause: String,
    /// What to do about it (every failure cordon makes has one; [`Failure::message`] copes
    /// without).
    pub fix: String,
}

impl Failure {
    fn new(step: &'static str, cause: impl ToString, fix: &str) -> Self {
        Failure {
            step,
            cause: cause.to_string(),
            fix: fix.to_string(),
        }
    }

    /// The message a run reports after the step: the cause, then the fix.
    pub fn message(&self) -> String {
        if self.fix.is_empty() {
            self.cause.clone()
        } else {
            format!("{}; {}", self.cause, self.fix)
        }
    }
}

/// What init reports: the step and the message.
impl From<Failure> for (&'static str, String) {
    fn from(f: Failure) -> Self {
        (f.step, f.message())
    }
}

/// What to do about a failure that only a bug in cordon explains.
const BUG: &str = "a bug in cordon: report it";

/// A failure as the probe's user-namespace process writes it on its pipe for
/// [`read_result`]: the step's index in [`all_steps`], the cause and the fix, NUL-separated
/// (a NUL inside the cause or the fix would be taken as a separator: none has one).
fn encode(f: &Failure) -> String {
    let step = all_steps().position(|s| s == f.step).unwrap_or(usize::MAX);
    format!("{step}\0{}\0{}", f.cause, f.fix)
}

/// Every step a [`Failure`] can name, for the probe's pipe, which carries a step as its
/// index here.
fn all_steps() -> impl Iterator<Item = &'static str> {
    STEPS.iter().map(|(s, _)| *s).chain([RECEIVE, ENTER])
}

/// Starts the helper ([`sys::start_netns_helper`]): it joins `userns` (the sandbox's user
/// namespace), makes the network namespace, brings `lo` up and sends the namespace on
/// `to_init`, or the step that failed and its errno, then exits. The caller reaps it
/// ([`sys::NetnsHelper::try_reap`]); it never waits for init.
pub fn start(userns: &OwnedFd, to_init: &OwnedFd) -> Result<sys::NetnsHelper, Errno> {
    use std::os::fd::AsFd;
    sys::start_netns_helper(userns.as_fd(), to_init.as_fd())
}

/// init: receives the network namespace the helper made (blocking until it is sent) and
/// enters it.
pub fn enter(from_helper: &OwnedFd) -> Result<(), Failure> {
    let ns = receive(from_helper)?;
    setns(ns, CloneFlags::CLONE_NEWNET).map_err(|e| {
        Failure::new(
            ENTER,
            e,
            "a security module or seccomp filter on this host refused it; `--net host` runs without a network namespace",
        )
    })
}

/// For `cordon doctor`: makes a network namespace as a run does (a helper joins a new user
/// namespace, makes it there and brings `lo` up; a process of that user namespace enters it)
/// and drops it. On failure: what a run would report. Bounded: a probe
/// that has no answer within 10 s is killed and reported.
pub fn probe() -> Result<(), Failure> {
    let fail = |step: &'static str, fix: &'static str| move |e: Errno| Failure::new(step, e, fix);
    const FDS: &str = "EMFILE/ENFILE: raise the open-file limit (`ulimit -n`)";
    let (ours, theirs) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(fail("create a socketpair", FDS))?;
    // The user namespace's process, in init's place: it enters what the helper sends and
    // writes what failed, if anything, on the result pipe.
    let (result_r, result_w) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(fail("create a pipe", FDS))?;
    let owner = match sys::clone_namespaces(libc::CLONE_NEWUSER).map_err(fail(
        "create a user namespace (clone)",
        "see the namespaces check above",
    ))? {
        CloneResult::Child => {
            drop((theirs, result_r));
            let code = match enter(&ours) {
                Ok(()) => 0,
                Err(f) => {
                    let _ = nix::unistd::write(&result_w, encode(&f).as_bytes());
                    1
                }
            };
            sys::exit_now(code)
        }
        CloneResult::Parent(pid) => pid,
    };
    drop((ours, result_w));
    let helper = nix::fcntl::open(
        format!("/proc/{owner}/ns/user").as_str(),
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(fail(
        "open the new user namespace (/proc/PID/ns/user)",
        "cordon needs /proc mounted",
    ))
    .and_then(|userns| {
        start(&userns, &theirs).map_err(fail(
            "start the helper",
            "EAGAIN: too many processes for this user, see `ulimit -u`; ENOMEM: the host is out of memory",
        ))
    });
    drop(theirs);
    let answer = match &helper {
        Ok(_) => read_result(&result_r),
        Err(_) => Ok(()),
    };
    if answer.is_err() {
        for pid in [Some(owner), helper.as_ref().ok().map(sys::NetnsHelper::pid)]
            .into_iter()
            .flatten()
        {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
    let owner_end = loop {
        match nix::sys::wait::waitpid(owner, None) {
            Err(Errno::EINTR) => continue,
            other => break Some(other),
        }
    };
    let helper = helper?;
    // The owner has ended: the helper has answered (and is exiting) or must stop. One stuck
    // in the kernel dies only when its call returns: waited for at most 1 s after the
    // SIGKILL, then left running with the memory it runs on (its handle is dropped).
    let _ = nix::sys::signal::kill(helper.pid(), nix::sys::signal::Signal::SIGKILL);
    if let Ok(fd) = sys::pidfd_open(helper.pid()) {
        use std::os::fd::AsFd;
        let mut fds = [nix::poll::PollFd::new(
            fd.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(1000u16));
    }
    let _ = helper.try_reap();
    answer?;
    // An empty answer is a success only from a process that entered the namespace and
    // exited 0: killed before it wrote (a filter, the OOM killer), it says nothing either.
    use nix::sys::wait::WaitStatus;
    let how = match owner_end {
        Some(Ok(WaitStatus::Exited(_, 0))) => return Ok(()),
        Some(Ok(WaitStatus::Exited(_, c))) => format!("exited with code {c}"),
        Some(Ok(WaitStatus::Signaled(_, sig, _))) => format!("was killed by {}", sig.as_str()),
        Some(Err(e)) => format!("could not be waited for ({e})"),
        _ => "ended".to_string(),
    };
    Err(Failure::new(
        ENTER,
        format!("the process that enters it {how} without answering"),
        "see the kernel's log (`dmesg`) for what killed it, such as a seccomp filter or security module on this host; `--net host` runs without a network namespace",
    ))
}

/// What the probe's user-namespace process wrote on `pipe` before it exited: nothing when
/// it entered the namespace, else its failure. At most 10 s.
fn read_result(pipe: &OwnedFd) -> Result<(), Failure> {
    use std::os::fd::AsFd;
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [nix::poll::PollFd::new(
            pipe.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
            Ok(0) => {
                return Err(Failure::new(
                    WAIT,
                    "no answer within 10 s",
                    "the kernel is stalled making or entering network namespaces: see its log (`dmesg`)",
                ));
            }
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(Failure::new(WAIT, e, BUG)),
            Ok(_) => {}
        }
        let mut buf = [0u8; 4096];
        match nix::unistd::read(pipe, &mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(Failure::new(WAIT, e, BUG)),
        }
    }
    if out.is_empty() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out);
    let mut fields = text.splitn(3, '\0');
    let (step, cause, fix) = (fields.next(), fields.next(), fields.next());
    let step = step
        .and_then(|i| i.parse::<usize>().ok())
        .and_then(|i| all_steps().nth(i));
    match (step, cause, fix) {
        (Some(step), Some(cause), Some(fix)) => Err(Failure::new(step, cause, fix)),
        _ => Err(Failure::new(
            WAIT,
            format!("an answer cordon cannot read ({text:?})"),
            BUG,
        )),
    }
}

/// Receives the network namespace the helper made, or the step that failed.
fn receive(from_helper: &OwnedFd) -> Result<OwnedFd, Failure> {
    let mut buf = [0u8; 6];
    let (len, fds) = channel::recv_bytes_and_fds(from_helper, &mut buf).map_err(|e| match e {
        Errno::EBADMSG => Failure::new(
            RECEIVE,
            format!("{e}: the descriptor did not arrive (the receiver is at its open-file limit, or a security module refused it)"),
            "raise the open-file limit (`ulimit -n`), or see the security module's log (`dmesg`); `--net host` runs without a network namespace",
        ),
        _ => Failure::new(RECEIVE, e, BUG),
    })?;
    match (len, buf[0], <[OwnedFd; 1]>::try_from(fds)) {
        (1, 1, Ok([ns])) => Ok(ns),
        (6, FAILED, _) if usize::from(buf[1]) < STEPS.len() => {
            let (step, hint) = STEPS[usize::from(buf[1])];
            let errno = Errno::from_raw(i32::from_le_bytes([buf[2], buf[3], buf[4], buf[5]]));
            // The namespace's making: the hint by what the errno says of the cause.
            let hint = match (buf[1], errno) {
                (CREATE, Errno::ENOSPC | Errno::EUSERS) => LIMIT_HINT,
                (CREATE, Errno::EPERM | Errno::EACCES) => POLICY_HINT,
                (CREATE, Errno::EAGAIN | Errno::ENOMEM) => SHORTAGE_HINT,
                _ => hint,
            };
            Err(Failure::new(step, errno, hint))
        }
        (0, _, _) => Err(Failure::new(
            RECEIVE,
            "the helper ended without sending it (killed, or a bug in cordon)",
            "see the kernel's log (`dmesg`) for what killed it, such as a seccomp filter or security module on this host, or report it as a bug; `--net host` runs without a network namespace",
        )),
        _ => Err(Failure::new(
            RECEIVE,
            format!("{}: an answer cordon cannot read", Errno::EBADMSG),
            BUG,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helpers_step_numbers_name_its_steps() {
        use sys::helper_step::*;
        assert_eq!(STEPS.len(), 6);
        for (n, what) in [
            (JOIN, "(setns)"),
            (CREATE, "(unshare CLONE_NEWNET)"),
            (SOCKET, "open a socket"),
            (LO_FLAGS, "(SIOCGIFFLAGS)"),
            (LO_UP, "(SIOCSIFFLAGS)"),
            (OPEN, "/proc/thread-self/ns/net"),
        ] {
            assert!(
                STEPS[usize::from(n)].0.contains(what),
                "step {n}: {}",
                STEPS[usize::from(n)].0
            );
        }
    }

    /// What the probe's user-namespace process writes for `f`, read back by the probe.
    fn round_trip(f: &Failure) -> Result<(), Failure> {
        read_back(&encode(f))
    }

    /// What the probe reads from a pipe that holds `text`.
    fn read_back(text: &str) -> Result<(), Failure> {
        let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
        nix::unistd::write(&w, text.as_bytes()).unwrap();
        drop(w);
        read_result(&r)
    }

    #[test]
    fn a_probe_failure_reaches_doctor_whole() {
        for step in all_steps() {
            let f = Failure::new(step, Errno::EPERM, "do this; then that");
            assert_eq!(round_trip(&f), Err(f.clone()), "{step}");
        }
        let f = Failure::new(ENTER, "no fix", "");
        assert_eq!(round_trip(&f), Err(f.clone()));
        assert_eq!(f.message(), "no fix");
        // A step of no table (a bug): reported as such, not dropped.
        let err = round_trip(&Failure::new("elsewhere", "x", "y")).unwrap_err();
        assert!(
            err.cause.contains("cannot read") && err.fix.contains("bug"),
            "{err:?}"
        );
    }

    #[test]
    fn the_message_is_the_cause_then_the_fix() {
        let f = Failure::new(STEPS[usize::from(CREATE)].0, Errno::ENOSPC, LIMIT_HINT);
        assert_eq!(f.message(), format!("{}; {LIMIT_HINT}", Errno::ENOSPC));
        let (step, message) = <(&str, String)>::from(f);
        assert_eq!(step, STEPS[usize::from(CREATE)].0);
        assert!(message.contains("user.max_net_namespaces"), "{message}");
    }
}

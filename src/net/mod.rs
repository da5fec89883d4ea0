//! Network on request.
//!
//! - `none` (default): the sandbox's own network namespace with only `lo`.
//! - `allow=HOST[:PORT],...`: the same namespace, plus cordon's filtering proxy. Before the
//!   payload starts, the sandbox's init creates a TCP listening socket on
//!   `127.0.0.1:`[`PROXY_PORT`] inside the sandbox's namespace and hands it to cordon over a
//!   unix socketpair (SCM_RIGHTS). cordon forks a helper process that accepts on it — on the
//!   host's network — and serves the allow-listed hosts only ([`proxy`]). Landlock then lets
//!   the payload connect to that port only. No root, no veth, no process inside the sandbox.
//! - `host`: the host's network namespace, unfiltered; reported loudly.
//!
//! Every step fails closed: no socket, no proxy or no Landlock TCP rule is an error of the
//! run, never an open network.

pub mod policy;
pub mod proxy;

pub use policy::{AllowList, Network, PolicyError, parse_network, parse_override};

use nix::errno::Errno;
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use serde::{Deserialize, Serialize};
use std::io::IoSliceMut;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// The proxy's port on the sandbox's loopback interface (the namespace is the sandbox's own,
/// so no other program on the host competes for it).
pub const PROXY_PORT: u16 = 3128;
/// How long cordon waits for init to hand over the listening socket.
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long cordon waits for the proxy helper to report its counters at the end of a run.
const REPORT_TIMEOUT: Duration = Duration::from_secs(3);

/// The proxy URL the payload's environment names.
pub fn proxy_url() -> String {
    format!("http://127.0.0.1:{PROXY_PORT}")
}

/// The environment `allow=` adds: the proxy under every name programs read, `NO_PROXY` empty.
pub fn proxy_env() -> Vec<(String, String)> {
    let url = proxy_url();
    let mut env = Vec::new();
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        env.push((k.to_string(), url.clone()));
        env.push((k.to_ascii_lowercase(), url.clone()));
    }
    env.push(("NO_PROXY".into(), String::new()));
    env.push(("no_proxy".into(), String::new()));
    env
}

/// The first Landlock ABI that scopes abstract unix sockets to the sandbox (Linux 6.12).
pub const SCOPE_ABI: i32 = 6;

/// What `--net host` exposes, for the warning on stderr and `isolation.network`, given the
/// kernel's Landlock ABI. Abstract unix sockets belong to the network namespace: below
/// [`SCOPE_ABI`] nothing keeps the program from the host's (D-Bus, container runtimes'
/// shims, X11), and the warning must say so.
pub fn host_network_exposure(landlock_abi: i32) -> String {
    let mut s = String::from(
        "the sandbox shares this host's network namespace, unfiltered (every address and port this host reaches, its loopback services included)",
    );
    if landlock_abi < SCOPE_ABI {
        s.push_str(&format!(
            ", and on this kernel (Landlock ABI {landlock_abi}, below {SCOPE_ABI}) also the host's abstract unix sockets (D-Bus, container runtimes' shims, X11)"
        ));
    }
    s
}

/// The network part of the result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct NetworkReport {
    /// `none`, `allow` or `host`.
    pub mode: String,
    /// The allow-list in force (`allow` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_list: Vec<String>,
    /// Admitted connections, by host and port.
    pub allowed: Vec<AllowedReport>,
    /// Refused requests, by host, port and reason.
    pub refused: Vec<RefusedReport>,
    /// Connections past the proxy's record cap (counted, not itemised).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub records_dropped: u64,
    /// Set when the counters could not be collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedReport {
    pub host: String,
    pub port: u16,
    pub connections: u64,
    /// Bytes from the sandbox to the host (request heads included).
    pub bytes_up: u64,
    /// Bytes from the host to the sandbox.
    pub bytes_down: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedReport {
    /// `-` when the request could not be parsed far enough to name a host.
    pub host: String,
    pub port: u16,
    pub reason: String,
    pub count: u64,
}

impl NetworkReport {
    /// The report of a mode without a proxy.
    pub fn plain(mode: &str) -> NetworkReport {
        NetworkReport {
            mode: mode.into(),
            ..NetworkReport::default()
        }
    }

    /// Total admitted connections.
    pub fn connections(&self) -> u64 {
        self.allowed.iter().map(|a| a.connections).sum()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("cannot {step}: {errno}; {fix}")]
    Sys {
        step: &'static str,
        errno: Errno,
        fix: &'static str,
    },
    #[error(
        "the sandbox did not hand over the proxy's listening socket within {0:?}; the run is stopped rather than started without its proxy"
    )]
    NoHandover(Duration),
}

/// The two ends of the socketpair that carries the listening socket from init to cordon.
pub struct Handover {
    pub parent: OwnedFd,
    pub child: OwnedFd,
}

/// Creates the handover socketpair (close-on-exec), before the clone.
pub fn handover_pair() -> Result<Handover, NetError> {
    let (parent, child) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|errno| NetError::Sys {
        step: "create the socketpair that hands the proxy socket over",
        errno,
        fix: "check the open-file limit (ulimit -n)",
    })?;
    Ok(Handover { parent, child })
}

/// In init, inside the sandbox's network namespace with `lo` up: listens on
/// 127.0.0.1:[`PROXY_PORT`] and sends the listening socket to cordon. init keeps no copy.
pub fn listen_and_hand_over(to_parent: &OwnedFd) -> Result<(), String> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", PROXY_PORT))
        .map_err(|e| format!("listen on 127.0.0.1:{PROXY_PORT} inside the sandbox: {e}"))?;
    let fds = [listener.as_raw_fd()];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let iov = [std::io::IoSlice::new(b"L")];
    sendmsg::<()>(to_parent.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
        .map_err(|e| format!("send the proxy socket to cordon (SCM_RIGHTS): {e}"))?;
    Ok(())
}

/// In cordon: waits for init's listening socket. `Ok(None)`: init closed its end without
/// sending (it failed, and said why on the report pipe).
pub fn receive_listener(from_child: &OwnedFd) -> Result<Option<OwnedFd>, NetError> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let deadline = Instant::now() + HANDOVER_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(NetError::NoHandover(HANDOVER_TIMEOUT));
        }
        let mut fds = [PollFd::new(from_child.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(left.as_millis().min(60_000) as i32).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) => continue,
            Ok(_) => break,
            Err(Errno::EINTR) => continue,
            Err(errno) => {
                return Err(NetError::Sys {
                    step: "wait for the proxy socket",
                    errno,
                    fix: "this is a bug in cordon or the kernel; report it",
                });
            }
        }
    }
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let msg = loop {
        match recvmsg::<()>(
            from_child.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(m) => break m,
            Err(Errno::EINTR) => continue,
            Err(errno) => {
                return Err(NetError::Sys {
                    step: "receive the proxy socket (SCM_RIGHTS)",
                    errno,
                    fix: "this is a bug in cordon or the kernel; report it",
                });
            }
        }
    };
    let mut got = None;
    for c in msg.cmsgs().map_err(|errno| NetError::Sys {
        step: "read the proxy socket's control message",
        errno,
        fix: "this is a bug in cordon; report it",
    })? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for fd in fds {
                // Every descriptor received is owned (and so closed) here; only the first
                // is used.
                let owned = crate::sys::own_received_fd(fd);
                if got.is_none() {
                    got = Some(owned);
                }
            }
        }
    }
    Ok(got)
}

/// The running proxy helper process. Dropped without [`ProxyHandle::finish`] (an error path,
/// a panic), it still kills and reaps the helper: no tunnel outlives its run.
pub struct ProxyHandle {
    pid: nix::unistd::Pid,
    stop: Option<OwnedFd>,
    report: OwnedFd,
    /// The helper was killed and reaped (by `finish`): its pid may belong to another process.
    reaped: bool,
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        if !self.reaped {
            self.reaped = true;
            let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(self.pid, None);
        }
    }
}

/// Forks the proxy helper, which serves `listener` with `policy` until [`ProxyHandle::finish`].
/// The caller must be single-threaded (the launcher is).
/// A root caller's proxy helper parses what the sandbox sends: it gives up root first, for the
/// sandbox's own unprivileged host uid and gid (no supplementary groups, no capabilities, no
/// way back: no_new_privs). An unprivileged caller's helper already runs as the caller; root
/// of a user namespace that maps no other id (launch::HostIds::Caller) stays that uid but
/// drops every capability.
fn drop_root() -> Result<(), Errno> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let (uid, gid) = match crate::launch::host_ids() {
        Ok(crate::launch::HostIds::Own { uid, gid, .. }) => (uid, gid),
        _ => {
            crate::security::caps::drop_all().map_err(|_| Errno::EPERM)?;
            nix::sys::prctl::set_no_new_privs()?;
            return nix::sys::prctl::set_dumpable(false);
        }
    };
    crate::sys::clear_groups()?;
    let gid = nix::unistd::Gid::from_raw(gid);
    let uid = nix::unistd::Uid::from_raw(uid);
    nix::unistd::setresgid(gid, gid, gid)?;
    nix::unistd::setresuid(uid, uid, uid)?;
    nix::sys::prctl::set_no_new_privs()?;
    nix::sys::prctl::set_dumpable(false)
}

pub fn spawn_proxy(listener: OwnedFd, policy: &AllowList) -> Result<ProxyHandle, NetError> {
    use nix::fcntl::OFlag;
    let pipe = |step| {
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|errno| NetError::Sys {
            step,
            errno,
            fix: "check the open-file limit (ulimit -n)",
        })
    };
    let (stop_r, stop_w) = pipe("create the proxy's stop pipe")?;
    let (rep_r, rep_w) = pipe("create the proxy's report pipe")?;
    let parent = nix::unistd::getpid();
    match crate::sys::fork() {
        Ok(crate::sys::CloneResult::Child) => {
            // The helper keeps the listener, its two pipe ends and stdio: not the sandbox's
            // pipes (holding the stdin pipe would keep the program's stdin open).
            let keep = [listener.as_raw_fd(), stop_r.as_raw_fd(), rep_w.as_raw_fd()];
            let setup = crate::sys::close_fds_except(&keep)
                .map_err(|e| ("close inherited fds", e))
                .and_then(|()| drop_root().map_err(|e| ("give up root", e)))
                // After the id switch, which clears the parent-death signal.
                .and_then(|()| {
                    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                        .map_err(|e| ("set its parent-death signal", e))
                });
            if let Err((step, errno)) = setup {
                // The run goes on with no network (nothing serves the socket): say why.
                let report = NetworkReport {
                    mode: "allow".into(),
                    error: Some(format!(
                        "the proxy helper could not start: cannot {step}: {errno}; no connection was served (run `cordon doctor`)"
                    )),
                    ..NetworkReport::default()
                };
                let mut line = serde_json::to_vec(&report).unwrap_or_default();
                line.push(b'\n');
                let _ = nix::unistd::write(&rep_w, &line);
                crate::sys::exit_now(1);
            }
            // cordon died before the death signal was armed.
            if nix::unistd::getppid() != parent {
                crate::sys::exit_now(1);
            }
            let l = std::net::TcpListener::from(listener);
            let report = proxy::serve(l, policy.clone(), stop_r);
            let mut line = serde_json::to_vec(&report).unwrap_or_default();
            line.push(b'\n');
            let mut rest = &line[..];
            while !rest.is_empty() {
                match nix::unistd::write(&rep_w, rest) {
                    Ok(n) => rest = &rest[n..],
                    Err(Errno::EINTR) => continue,
                    Err(_) => break,
                }
            }
            crate::sys::exit_now(0)
        }
        Ok(crate::sys::CloneResult::Parent(pid)) => Ok(ProxyHandle {
            pid,
            stop: Some(stop_w),
            report: rep_r,
            reaped: false,
        }),
        Err(errno) => Err(NetError::Sys {
            step: "start the proxy process (fork)",
            errno,
            fix: "check the process limit (ulimit -u) and memory",
        }),
    }
}

impl ProxyHandle {
    /// Stops the helper (every tunnel is shut down), collects its counters and reaps it.
    pub fn finish(mut self) -> NetworkReport {
        drop(self.stop.take());
        let mut buf = Vec::new();
        let deadline = Instant::now() + REPORT_TIMEOUT;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let mut fds = [PollFd::new(self.report.as_fd(), PollFlags::POLLIN)];
            match poll(
                &mut fds,
                PollTimeout::try_from(left.as_millis() as i32).unwrap_or(PollTimeout::MAX),
            ) {
                Ok(0) => break,
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(_) => break,
            }
            match nix::unistd::read(&self.report, &mut chunk) {
                Ok(0) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(Errno::EINTR | Errno::EAGAIN) => continue,
                Err(_) => break,
            }
        }
        let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(self.pid, None);
        self.reaped = true;
        match serde_json::from_slice::<NetworkReport>(buf.trim_ascii_end()) {
            Ok(r) => r,
            Err(_) => NetworkReport {
                mode: "allow".into(),
                error: Some("the proxy did not report its counters".into()),
                ..NetworkReport::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle_for(child: &std::process::Child) -> ProxyHandle {
        let (stop_r, stop_w) = nix::unistd::pipe().unwrap();
        drop(stop_r);
        let (rep_r, rep_w) = nix::unistd::pipe().unwrap();
        drop(rep_w);
        ProxyHandle {
            pid: nix::unistd::Pid::from_raw(child.id() as i32),
            stop: Some(stop_w),
            report: rep_r,
            reaped: false,
        }
    }

    #[test]
    fn host_network_warning_names_abstract_sockets_where_unscoped() {
        let old = host_network_exposure(5);
        assert!(old.contains("abstract unix sockets"), "{old}");
        assert!(old.contains("ABI 5"), "{old}");
        let none = host_network_exposure(0);
        assert!(none.contains("abstract unix sockets"), "{none}");
        let new = host_network_exposure(SCOPE_ABI);
        assert!(!new.contains("abstract"), "{new}");
        assert!(new.contains("loopback services"), "{new}");
    }

    /// A handle dropped on an error path kills and reaps its helper.
    #[test]
    fn a_dropped_handle_kills_its_helper() {
        let child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id();
        drop(handle_for(&child));
        // Reaped: no zombie left, the pid is gone.
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "the helper {pid} outlived its handle"
        );
        std::mem::forget(child);
    }

    /// `finish` on a helper that never reports gives up within its timeout, says so, and
    /// reaps the helper (its `Drop` then leaves the pid alone).
    #[test]
    fn finish_reaps_a_silent_helper() {
        let child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id();
        let started = Instant::now();
        let report = handle_for(&child).finish();
        assert!(started.elapsed() < REPORT_TIMEOUT + Duration::from_secs(2));
        assert_eq!(
            report.error.as_deref(),
            Some("the proxy did not report its counters")
        );
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
        std::mem::forget(child);
    }
}

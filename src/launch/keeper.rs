//! The keeper: a small process, forked once the sandbox's init has been told to go, that
//! 1. removes the sandbox cgroup if cordon dies without doing so (SIGKILL, OOM kill of cordon
//!    itself). Without it, a SIGKILLed cordon leaves its (empty) sandbox cgroup behind until
//!    the next run of cordon collects it;
//! 2. holds the sandbox's mount namespace, so that tearing its mounts down happens when the
//!    keeper exits, after cordon has its result, instead of in the exit of the sandbox's init,
//!    which cordon waits for. Each overlay's superblock waits for an RCU grace period when it
//!    goes, and so does the namespace's own unmount: measured here, about half a millisecond
//!    of every run's end. The mounts outlive the sandbox's last process by that long; nothing
//!    runs in them (every process of the namespace is gone: the pid namespace died with init).
//!
//! The keeper lives outside the sandbox and its cgroup, holds nothing but the read end of a
//! pipe whose write end only cordon has (and the namespace), and waits on it:
//! - `u`: the sandbox is gone; the keeper drops the mount namespace at once (its teardown
//!   runs then, beside cordon's last steps) and waits for the next word. Sent only when
//!   cordon's exit waits for the keeper anyway (`launch::wait_for_helpers`). Then the keeper
//!   also watches init (a pidfd cordon opened before the fork) and drops the namespace as soon
//!   as init is gone, without waiting for the word: cordon sends it only after it has woken,
//!   read init's report and reaped it, and the teardown is the last thing such a run waits
//!   for. Init's exit ends every process of its pid namespace first (the kernel kills and
//!   waits for them before init's pidfd reports the exit), so nothing runs in the mounts
//!   any more;
//! - `d`: cordon finished the run and removed the cgroup itself (or had none); the keeper
//!   exits;
//! - `r`: cordon finished the run and read the cgroup's figures; the keeper kills whatever is
//!   still in the cgroup (nothing, normally: the sandbox's processes are gone), removes it and
//!   exits. Removing cgroups costs about 0.2 ms (cgroup v1: three hierarchies), which cordon's
//!   caller then does not wait for; a cgroup the keeper could not remove is collected by the
//!   next run of cordon;
//! - end-of-file without either: cordon is gone. The sandbox dies with it (PDEATHSIG of its
//!   init, then the pid namespace); the keeper kills whatever is still in the cgroup, removes
//!   it (retrying while the last tasks exit), and exits.
//!
//! Forked once the sandbox's init has been told to go: cordon would otherwise sit idle in
//! `poll` while init builds the root, so the fork costs no start-up time. It runs in a session
//! of its own with the terminal's signals ignored (a Ctrl-C meant for cordon must not kill it),
//! and closes every fd it inherited at once.
//!
//! cordon does not wait for it to exit after each sandbox: a keeper not yet gone is reaped,
//! without blocking, when the next sandbox starts. At cordon's own exit the keepers left are
//! handed to the caller's reaper: where PID 1 is an init known to reap every child, cordon
//! returns at once (the teardown is off the caller's path); otherwise it waits for them
//! ([`wait_for_all`]), so that a caller running as a container's PID 1 is left no zombie.

use crate::limits::Cgroup;
use crate::sys::{self, CloneResult};
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use std::os::fd::{AsRawFd, OwnedFd};

/// cordon's side: the write end of the pipe, and the keeper's pid to reap.
pub struct Keeper {
    done: OwnedFd,
    pid: Pid,
    /// What Drop tells the keeper: `d` (done, nothing to remove) or `r` (remove the cgroup).
    last_word: u8,
}

/// Keepers told to exit, and network-namespace helpers killed, but not reaped yet.
static UNREAPED: std::sync::Mutex<Vec<Pid>> = std::sync::Mutex::new(Vec::new());

/// Reaps `pid`, a child of cordon's that is ending (the network namespace's helper, killed),
/// now if it is gone, else with the keepers: without waiting, since a process stuck in the
/// kernel dies only when its system call returns.
pub fn reap_without_waiting(pid: Pid) {
    UNREAPED.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
    reap_finished();
}

/// Reaps the keepers of earlier runs, and killed network-namespace helpers, that have exited
/// since, without waiting.
fn reap_finished() {
    let mut list = UNREAPED.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|&pid| {
        matches!(
            nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG)),
            Ok(nix::sys::wait::WaitStatus::StillAlive)
        )
    });
}

/// Whether every keeper and helper has been reaped.
pub fn none_left() -> bool {
    UNREAPED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_empty()
}

/// Waits, up to `limit` in all, for the keepers and helpers not reaped yet, reaping each as
/// it exits. cordon calls it last, before its own exit: a process it left would otherwise be
/// handed to the caller's reaper (the nearest subreaper, or the pid namespace's init), which
/// is the caller itself when that runs as PID 1 of a container or as a subreaper, and a
/// caller that reaps only the children it knows would keep one zombie per run.
pub fn wait_for_all(limit: std::time::Duration) {
    if limit.is_zero() {
        reap_finished();
        return;
    }
    let deadline = std::time::Instant::now() + limit;
    let list = std::mem::take(&mut *UNREAPED.lock().unwrap_or_else(|e| e.into_inner()));
    for pid in list {
        let fd = match sys::pidfd_open(pid) {
            Ok(fd) => fd,
            // Reaped already: nothing to wait for.
            Err(Errno::ESRCH) => continue,
            // No pidfd (out of descriptors, or a caller's seccomp filter refuses the call):
            // the same wait, by polling.
            Err(_) => {
                use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
                while matches!(
                    waitpid(pid, Some(WaitPidFlag::WNOHANG)),
                    Ok(WaitStatus::StillAlive)
                ) && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                continue;
            }
        };
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
            let mut fds = [nix::poll::PollFd::new(
                std::os::fd::AsFd::as_fd(&fd),
                nix::poll::PollFlags::POLLIN,
            )];
            match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
                Err(Errno::EINTR) => continue,
                _ => break,
            }
        }
        let _ = nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
    }
}

/// Forks the keeper for `cgroup` (if any), holding `mount_ns` (the sandbox's mount namespace,
/// if cordon could open it). With `init` (the sandbox's init, cordon's child, not reaped yet),
/// the keeper drops the namespace as soon as init is gone (see the module's documentation).
/// cordon must be single-threaded (the launcher checks).
pub fn spawn(
    cgroup: Option<&Cgroup>,
    mount_ns: Option<&OwnedFd>,
    init: Option<Pid>,
) -> Result<Keeper, Errno> {
    reap_finished();
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    // Opened here, while init cannot have been reaped: its pid is still its own. Without it
    // (no pidfd on this kernel) the word `u` does the same, later.
    let init_fd = init
        .filter(|_| mount_ns.is_some())
        .and_then(|pid| sys::pidfd_open(pid).ok());
    match sys::fork()? {
        CloneResult::Child => {
            drop(w);
            keep(cgroup, r, mount_ns.map(|f| f.as_raw_fd()), init_fd.as_ref())
        }
        CloneResult::Parent(pid) => {
            drop(r);
            drop(init_fd);
            Ok(Keeper {
                done: w,
                pid,
                last_word: b'd',
            })
        }
    }
}

impl Keeper {
    /// The sandbox is gone (its init has been reaped): the keeper drops the sandbox's mount
    /// namespace now, which unmounts everything in it, instead of when it exits.
    pub fn release_mounts(&self) {
        let _ = nix::unistd::write(&self.done, b"u");
    }

    /// cordon is done with `cgroup` (its figures are read): the keeper removes it.
    pub fn remove_cgroup(mut self, cgroup: Cgroup) {
        cgroup.leave_to_keeper();
        self.last_word = b'r';
    }
}

impl Drop for Keeper {
    /// cordon is still alive, so it removes (or has removed) the cgroup itself: tell the
    /// keeper to exit; it is reaped later (see the module's documentation).
    fn drop(&mut self) {
        let _ = nix::unistd::write(&self.done, &[self.last_word]);
        UNREAPED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(self.pid);
        reap_finished();
    }
}

/// The keeper's life. It leaves with `_exit`: no value here is dropped, so closing an fd by
/// number (the mount namespace, init's pidfd) is never repeated.
fn keep(
    cgroup: Option<&Cgroup>,
    pipe: OwnedFd,
    mount_ns: Option<i32>,
    init: Option<&OwnedFd>,
) -> ! {
    // Nothing of cordon's: not its stdio (a reader waiting for cordon's end-of-file must not
    // wait for the keeper), not the caller's leaked fds.
    let mut keep = vec![pipe.as_raw_fd()];
    keep.extend(mount_ns);
    keep.extend(init.map(|f| f.as_raw_fd()));
    if sys::close_fds_except(&keep).is_err() {
        sys::exit_now(1);
    }
    for fd in 0..=2 {
        let _ = nix::unistd::close(fd);
    }
    let _ = nix::unistd::setsid();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGPIPE,
    ] {
        let _ = sys::ignore_signal(s);
    }
    let mut byte = [0u8; 1];
    let mut mount_ns = mount_ns;
    if let (Some(ns), Some(init)) = (mount_ns, init) {
        // Until init is gone or cordon speaks, whichever comes first.
        let gone = init_gone_first(&pipe, init);
        if gone {
            let _ = nix::unistd::close(ns);
            mount_ns = None;
        }
        let _ = nix::unistd::close(init.as_raw_fd());
    }
    let released = loop {
        match nix::unistd::read(&pipe, &mut byte) {
            Ok(1) if byte[0] == b'u' => {
                if let Some(fd) = mount_ns.take() {
                    let _ = nix::unistd::close(fd);
                }
            }
            Ok(1) => break byte[0] == b'd',
            Ok(_) => break false,
            Err(Errno::EINTR) => continue,
            Err(_) => break false,
        }
    };
    if !released && let Some(cgroup) = cgroup {
        cgroup.clean_up_after_owner();
    }
    sys::exit_now(0)
}

/// Waits until init (`init`, its pidfd) is gone or cordon writes on `pipe` (a word, or its
/// end when cordon dies), and says whether init went first, with nothing from cordon yet.
fn init_gone_first(pipe: &OwnedFd, init: &OwnedFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    loop {
        let mut fds = [
            PollFd::new(pipe.as_fd(), PollFlags::POLLIN),
            PollFd::new(init.as_fd(), PollFlags::POLLIN),
        ];
        match nix::poll::poll(&mut fds, PollTimeout::NONE) {
            Err(Errno::EINTR) => continue,
            Ok(_) => {
                let quiet = fds[0].revents().is_none_or(|r| r.is_empty());
                break quiet && fds[1].revents().is_some_and(|r| !r.is_empty());
            }
            Err(_) => break false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keeper lets the mounts go when init is gone, unless cordon spoke first (then the
    /// word decides).
    #[test]
    fn init_going_first_is_told_from_a_word() {
        let sleeper = |secs: &str| {
            let child = std::process::Command::new("sleep")
                .arg(secs)
                .spawn()
                .unwrap();
            let fd = sys::pidfd_open(Pid::from_raw(child.id() as i32)).unwrap();
            (child, fd)
        };
        // Init exits, cordon says nothing.
        let (r, _w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (mut child, fd) = sleeper("0.05");
        assert!(init_gone_first(&r, &fd));
        child.wait().unwrap();
        // cordon speaks (or dies) while init still runs.
        for word in [Some(b"d"), None] {
            let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
            let (mut child, fd) = sleeper("5");
            match word {
                Some(b) => {
                    nix::unistd::write(&w, b).unwrap();
                }
                None => drop(w),
            }
            assert!(!init_gone_first(&r, &fd), "{word:?}");
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

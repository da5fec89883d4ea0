//! The two roles inside the sandbox.
//!
//! **init** is the process `clone` created: pid 1 of the new pid namespace, holding every
//! capability of the new user namespace. It waits for the parent's first go (uid/gid maps
//! written), builds and enters the new root, enters the network namespace that cordon's
//! helper made meanwhile (see launch::netns), waits for the second go (the sandbox's cgroup
//! exists by then: on cgroup v2 the parent has attached init meanwhile; on v1 the parent
//! made the groups meanwhile and init now moves itself through their `tasks` files, then
//! writes the input files), creates its cgroup namespace, forks the payload, reaps zombies,
//! reports the payload's exit and exits, which makes the kernel kill every process left in
//! the namespace. (On v1, init's own work before the move — mounts, /etc — is charged to
//! cordon's cgroup, not the sandbox's: bounded work of cordon's, no code of the program's.)
//!
//! **payload** is init's child. It wires stdio, starts a new session, sets rlimits, drops every
//! capability, sets no_new_privs, applies Landlock, installs seccomp (last: it would block the
//! steps before it) and execs the command.

use super::channel::{Msg, Reporter, wait_for_go};
use crate::fs::plan::Op;
use crate::limits::Rlimit;
use crate::outcome::exit_codes;
use crate::security::seccomp::Compiled;
use crate::spec::{SANDBOX_GID, SANDBOX_UID, WORKSPACE};
use crate::sys;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Gid, Pid, Uid};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

/// Everything the child needs, prepared by the parent before `clone` (the child gets a copy).
pub struct ChildCtx<'a> {
    pub plan: &'a [Op],
    pub hostname: &'a str,
    pub argv: Vec<CString>,
    pub env: Vec<CString>,
    /// `PATH` entries to search for `argv[0]`.
    pub path: Vec<String>,
    pub rlimits: &'a [Rlimit],
    /// The run's one seccomp program, with the rlimit backend's layers (memory watch, CPU
    /// pin) when those are in use (`seccomp::compile_builtin_layered`).
    pub seccomp: &'a Compiled,
    /// Under the rlimit backend's memory watch: `seccomp` carries its layer and is installed
    /// with a listener, which goes to cordon.
    pub seccomp_listener: bool,
    /// Under the rlimit backend with `--cpus`: the CPUs the payload pins itself to (the
    /// `cpu-pin` layer of `seccomp` keeps it there).
    pub cpu_pin: Option<nix::sched::CpuSet>,
    pub allow_degraded_landlock: bool,
    /// Bind host directories where the kernel refuses to overlay them.
    pub allow_degraded_overlay: bool,
    /// The caller is host root: supplementary groups must be cleared, and the ids switched to
    /// the mapped sandbox ids before any file is created.
    pub root_caller: bool,
    pub go: OwnedFd,
    pub report: Reporter,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The canonical rootfs directory for `--rootfs DIR` (its entries are opened without
    /// following symlinks).
    pub rootfs_dir: Option<&'a std::path::Path>,
    /// The sources of the caller's binds, canonical paths: opened without following symlinks.
    pub bind_sources: Vec<std::path::PathBuf>,
    /// cgroup v1: the socket on which cordon sends the `tasks` files of the sandbox's groups
    /// (opened by cordon, which made them while init built the root); init writes `0` to
    /// each after the second go, moving itself (the parent does not attach it then). Linux
    /// 5.16+ checks the credentials of the file's opener (cordon); older kernels check the
    /// writer's, which pass too since a process may always move itself (its euid is its uid).
    pub cgroup_tasks: Option<OwnedFd>,
    /// Files to write into /workspace before the payload starts.
    pub files: &'a [crate::spec::InputFile],
    /// Files to bring back after the payload exits.
    pub collect: Option<&'a crate::spec::Collect>,
    /// The export tmpfs (see `crate::spec::Export`), with the byte and entry caps of its copy.
    pub export: Option<(&'a crate::spec::Export, u64, u64)>,
    /// `--net allow=`: init's end of the socketpair the proxy's listening socket goes through.
    pub net_handover: Option<OwnedFd>,
    /// The rlimit backend's memory watch: init's end of the socketpair the sandbox's /proc
    /// goes to cordon through.
    pub proc_handover: Option<OwnedFd>,
    /// A root caller's memory limit, for the IPC namespace's SysV shm sysctls (only the
    /// namespace's root uid may write them: an unprivileged caller cannot).
    pub shm_limit: Option<u64>,
    /// What TCP Landlock lets the payload use.
    pub net_access: crate::security::landlock::NetAccess,
    /// The sandbox's network namespace comes on this socket, from cordon's helper (see
    /// launch::netns); init enters it once the root is built. None under `--net host`.
    pub netns_from_helper: Option<OwnedFd>,
    /// Directories (bind targets) the payload may write besides /workspace and /tmp.
    pub extra_writable: Vec<&'a str>,
}

/// init's entry point, right after `clone`. Never returns.
pub fn init_main(mut ctx: ChildCtx) -> ! {
    // Dies with the parent; the go pipe's EOF covers a parent that died before this line.
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        ctx.report
            .fail("set parent-death signal", e, exit_codes::SANDBOX_ERROR);
        sys::exit_now(exit_codes::SANDBOX_ERROR);
    }
    // The payload will see init as /proc/1: not cordon's command line.
    if let Err(e) = sys::scrub_cmdline() {
        ctx.report.fail(
            "clear init's command line (cordon's own, visible as /proc/1/cmdline)",
            e,
            exit_codes::SANDBOX_ERROR,
        );
        sys::exit_now(exit_codes::SANDBOX_ERROR);
    }
    // The payload's empty bounding set, made now, while cordon writes the id maps (see
    // security::caps).
    if let Err(e) = crate::security::caps::drop_bounding() {
        ctx.report.fail(
            "drop capabilities",
            e.to_string(),
            exit_codes::SANDBOX_ERROR,
        );
        sys::exit_now(exit_codes::SANDBOX_ERROR);
    }
    if !wait_for_go(&ctx.go) {
        sys::exit_now(exit_codes::SANDBOX_ERROR);
    }
    // Whatever the caller leaked to cordon (fds without close-on-exec) stops here.
    let mut keep: Vec<i32> = [
        &ctx.go,
        ctx.report.owned(),
        &ctx.stdin,
        &ctx.stdout,
        &ctx.stderr,
    ]
    .map(|f| f.as_raw_fd())
    .to_vec();
    keep.extend(ctx.net_handover.as_ref().map(|f| f.as_raw_fd()));
    keep.extend(ctx.proc_handover.as_ref().map(|f| f.as_raw_fd()));
    keep.extend(ctx.cgroup_tasks.as_ref().map(|f| f.as_raw_fd()));
    keep.extend(ctx.netns_from_helper.as_ref().map(|f| f.as_raw_fd()));
    if let Err(e) = sys::close_fds_except(&keep) {
        ctx.report.fail(
            "close inherited file descriptors",
            e,
            exit_codes::SANDBOX_ERROR,
        );
        sys::exit_now(exit_codes::SANDBOX_ERROR);
    }
    let export_to = match setup_init(&ctx) {
        Ok(fd) => fd,
        Err((step, msg)) => {
            ctx.report.fail(step, msg, exit_codes::SANDBOX_ERROR);
            sys::exit_now(exit_codes::SANDBOX_ERROR);
        }
    };
    // The second go: the sandbox's cgroup exists (cordon made it while we built the root)
    // and, on cgroup v2, cordon has moved us into it. Nothing untrusted runs before this
    // point.
    if !wait_for_go(&ctx.go) {
        sys::exit_now(exit_codes::SANDBOX_ERROR);
    }
    if let Err((step, msg)) = enter_cgroup_v1(&ctx).and_then(|()| {
        // Written now, inside the sandbox's cgroup: the memory of the files counts for it.
        super::collect::write_inputs(ctx.files)
            .map_err(|m| ("write the input files into /workspace", m))?;
        match ctx.export {
            Some((e, _, _)) => super::export::seed(Path::new(&e.dir), &e.seed)
                .map_err(|m| ("write the seed files into the export directory", m)),
            None => Ok(()),
        }
    }) {
        ctx.report.fail(step, msg, exit_codes::SANDBOX_ERROR);
        sys::exit_now(exit_codes::SANDBOX_ERROR);
    }
    drop((ctx.cgroup_tasks.take(), ctx.netns_from_helper.take()));
    if let Err(e) = unshare(CloneFlags::CLONE_NEWCGROUP) {
        ctx.report
            .fail("create the cgroup namespace", e, exit_codes::SANDBOX_ERROR);
        sys::exit_now(exit_codes::SANDBOX_ERROR);
    }
    // SIGCHLD is read from a signalfd (with the go pipe, which may bring "stop"); blocked
    // before the fork, so none is lost. The payload unblocks every signal before exec.
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    if let Err(e) = chld.thread_block() {
        ctx.report
            .fail("block SIGCHLD in init", e, exit_codes::SANDBOX_ERROR);
        sys::exit_now(exit_codes::SANDBOX_ERROR);
    }
    let sfd = match SignalFd::with_flags(&chld, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK) {
        Ok(fd) => fd,
        Err(e) => {
            ctx.report
                .fail("create init's signalfd", e, exit_codes::SANDBOX_ERROR);
            sys::exit_now(exit_codes::SANDBOX_ERROR);
        }
    };
    // The payload's process shares init's memory until it execs (init waits meanwhile): it
    // reads the prepared context and changes nothing init relies on. It inherits the signalfd,
    // which it closes with every other fd before exec.
    let payload = match sys::spawn_shared(&mut || payload_main(&ctx)) {
        Ok(pid) => pid,
        Err(e) => {
            ctx.report
                .fail("fork the payload", e, exit_codes::SANDBOX_ERROR);
            sys::exit_now(exit_codes::SANDBOX_ERROR);
        }
    };
    // init keeps no end of the payload's stdio, so the parent sees EOF once the payload side
    // is gone.
    let ChildCtx {
        stdin,
        stdout,
        stderr,
        report,
        files,
        collect,
        export,
        go,
        ..
    } = ctx;
    drop((stdin, stdout, stderr));
    let full = export.map(|(e, _, _)| e.dir.as_str());
    reap(payload, full, &report, &go, &sfd, |report, exited_ok| {
        if let Some(spec) = collect {
            super::collect::kill_and_reap_all();
            super::collect::collect(report, spec, files);
        }
        if let (Some((e, max_bytes, max_entries)), Some(to)) = (export, &export_to)
            && exited_ok
        {
            super::collect::kill_and_reap_all();
            let error = super::export::copy_out(Path::new(&e.dir), to, max_bytes, max_entries)
                .err()
                .map(|why| format!("cannot copy {} out of the sandbox: {why}", e.dir));
            // Whole, however long the path in the error: init is the only process left.
            let _ = report.send_large(&Msg::Exported { error });
        }
    })
}

/// Builds the sandbox's root and the rest of init's setup; returns the host directory the
/// export tmpfs is copied into, opened while init still has the caller's host identity.
fn setup_init(ctx: &ChildCtx) -> Result<Option<OwnedFd>, (&'static str, String)> {
    let e = |step: &'static str| move |err: Errno| (step, err.to_string());
    // Non-dumpable: the payload cannot read init's memory or /proc/1 details that it does not
    // own (it also lacks the capabilities ptrace would need, and seccomp denies ptrace).
    nix::sys::prctl::set_dumpable(false).map_err(e("make init non-dumpable"))?;
    // init needs none of the caller's stdio (it reports through its pipe): /dev/null on 0-2,
    // and a session of its own, so no terminal of the caller stays reachable through it.
    let null = nix::fcntl::open(
        "/dev/null",
        nix::fcntl::OFlag::O_RDWR | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(e("open /dev/null"))?;
    nix::unistd::dup2_stdin(&null).map_err(e("detach init from the caller's stdin"))?;
    nix::unistd::dup2_stdout(&null).map_err(e("detach init from the caller's stdout"))?;
    nix::unistd::dup2_stderr(&null).map_err(e("detach init from the caller's stderr"))?;
    drop(null);
    nix::unistd::setsid().map_err(e("start init's own session"))?;
    // Host sources are opened while init still has the caller's host identity: a root
    // caller's rootfs may be under /root, which the sandbox's host uid cannot traverse.
    let sources = crate::fs::open_sources(ctx.plan, ctx.rootfs_dir, &ctx.bind_sources)
        .map_err(|err| ("open the root filesystem's sources", err.to_string()))?;
    let export_to = match ctx.export {
        Some((e, _, _)) => Some(
            nix::fcntl::open(
                &e.host,
                nix::fcntl::OFlag::O_PATH
                    | nix::fcntl::OFlag::O_DIRECTORY
                    | nix::fcntl::OFlag::O_NOFOLLOW
                    | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .map_err(|err| {
                (
                    "open the export's host directory",
                    format!("{}: {err}", e.host.display()),
                )
            })?,
        ),
        None => None,
    };
    if ctx.root_caller {
        sys::clear_groups().map_err(e("drop supplementary groups"))?;
    }
    // SysV shm of the sandbox's IPC namespace, bounded by the memory limit. The kernel lets
    // only the namespace's root uid write these; here that is host root (the sandbox's user
    // namespace leaves its uid 0 unmapped), which init still is until the switch below.
    if let Some(limit) = ctx.shm_limit {
        write_shm_sysctls(limit)?;
    }
    // Files created from here on belong to the mapped sandbox ids (an unmapped fsuid cannot
    // create files at all). The namespace's uid 0 is unmapped, so this does not clear the
    // capabilities the creator of the namespace holds; the check below makes sure.
    let (uid, gid) = (Uid::from_raw(SANDBOX_UID), Gid::from_raw(SANDBOX_GID));
    nix::unistd::setresgid(gid, gid, gid).map_err(e("switch to the sandbox gid"))?;
    nix::unistd::setresuid(uid, uid, uid).map_err(e("switch to the sandbox uid"))?;
    // A credential change clears the parent-death signal: set it again. A parent that died in
    // between is noticed at the second go (end-of-file).
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(e("set parent-death signal"))?;
    // ...and resets "dumpable" to fs.suid_dumpable: clear it again.
    nix::sys::prctl::set_dumpable(false).map_err(e("make init non-dumpable"))?;
    if !caps::has_cap(
        None,
        caps::CapSet::Effective,
        caps::Capability::CAP_SYS_ADMIN,
    )
    .unwrap_or(false)
    {
        return Err((
            "keep namespace capabilities",
            "init lost CAP_SYS_ADMIN in its own user namespace after switching ids".into(),
        ));
    }
    let degraded = crate::fs::apply(ctx.plan, sources, ctx.allow_degraded_overlay)
        .map_err(|err| ("build the root filesystem", err.to_string()))?;
    if let Some(why) = degraded {
        ctx.report.send(&Msg::HostViews {
            status: format!(
                "read-only binds ({why}; allowed by --allow-degraded overlay): file locks on them are shared with other sandboxes and the host"
            ),
        });
    }
    nix::unistd::sethostname(ctx.hostname).map_err(|err| {
        let hint = if err == Errno::EPERM {
            // init holds CAP_SYS_ADMIN in the namespace's owner, so only a filter says no.
            "; init holds the capability the UTS namespace asks for, so a seccomp filter that cordon itself runs under refused it: a container runtime's default profile allows sethostname only to a container given CAP_SYS_ADMIN. Run cordon's container with `--security-opt seccomp=unconfined` (or a profile that allows sethostname), or run cordon on the host; `cordon doctor` checks this"
        } else {
            ""
        };
        ("set the hostname", format!("{err}{hint}"))
    })?;
    // The sandbox's network namespace (unless --net host), with `lo` up: made by cordon's
    // helper meanwhile (see launch::netns); everything below and the payload use it.
    if let Some(from_helper) = &ctx.netns_from_helper {
        super::netns::enter(from_helper).map_err(<(&str, String)>::from)?;
    }
    // `--net allow=`: the proxy's socket is created here, inside the sandbox's network
    // namespace, and handed to cordon, which serves it from the host's network.
    if let Some(h) = &ctx.net_handover {
        crate::net::listen_and_hand_over(h)
            .map_err(|m| ("set up the network proxy's socket", m))?;
    }
    // The sandbox's /proc, for the memory watch (it lists exactly the sandbox's processes).
    if let Some(h) = &ctx.proc_handover {
        super::memwatch::send_proc(
            h,
            ctx.netns_from_helper.is_some(),
            ctx.export.map(|(e, _, _)| e.dir.as_str()),
        )
        .map_err(|m| ("hand the sandbox's /proc to cordon", m))?;
    }
    Ok(export_to)
}

/// cgroup v1: init moves itself into each of the sandbox's groups through the `tasks` files
/// cordon sent (see [`ChildCtx::cgroup_tasks`]), before it forks the payload. A thread moving
/// itself takes no global cgroup lock, where moving another process waits for an RCU grace
/// period.
fn enter_cgroup_v1(ctx: &ChildCtx) -> Result<(), (&'static str, String)> {
    let Some(sock) = &ctx.cgroup_tasks else {
        return Ok(());
    };
    let step = "move init into the sandbox cgroup";
    let files = super::channel::recv_fds(sock)
        .map_err(|err| (step, format!("receive the tasks files from cordon: {err}")))?;
    if files.is_empty() {
        return Err((step, "cordon sent no tasks file".into()));
    }
    for f in &files {
        nix::unistd::write(f, b"0").map_err(|err| {
            let name = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd()))
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "a tasks file".into());
            // cgroup v1's cpu controller refuses a real-time task into a group without
            // real-time runtime (cpu.rt_runtime_us = 0, the default for a new group).
            let hint = if sys::realtime_policy() && err == Errno::EINVAL {
                "; cordon runs under a real-time scheduling policy (SCHED_FIFO/SCHED_RR), which cgroup v1's cpu controller refuses in a group without real-time runtime: run cordon under SCHED_OTHER, or pass `--limits-backend rlimit`"
            } else {
                ""
            };
            (step, format!("write 0 to {name}: {err}{hint}"))
        })?;
    }
    Ok(())
}

/// `kernel.shmmax` and `kernel.shmall` = `limit` (so the SysV shm total stays under it) and
/// `kernel.shmmni` = 4096 segments.
fn write_shm_sysctls(limit: u64) -> Result<(), (&'static str, String)> {
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .filter(|&p| p > 0)
        .unwrap_or(4096) as u64;
    for (name, value) in [
        ("shmmax", limit),
        ("shmall", limit.div_ceil(page)),
        ("shmmni", 4096),
    ] {
        let path = format!("/proc/sys/kernel/{name}");
        std::fs::write(&path, value.to_string()).map_err(|err| {
            let hint = if err.raw_os_error() == Some(libc::EROFS) {
                // podman's and Docker's default for a container.
                "; /proc/sys is mounted read-only here, as a container runtime does by default: run cordon's container with its /proc unmasked (podman: `--security-opt unmask=ALL`; Docker: `--security-opt systempaths=unconfined`), which the sandbox's own /proc needs too, or run cordon on the host"
            } else {
                ""
            };
            (
                "bound SysV shared memory in the sandbox's IPC namespace",
                format!("write {value} to {path}: {err}{hint}"),
            )
        })?;
    }
    Ok(())
}

/// The sandbox's size-capped tmpfs mounts, which a program can fill.
const CAPPED_MOUNTS: [&str; 3] = ["/workspace", "/tmp", "/dev/shm"];

/// Says which of [`CAPPED_MOUNTS`] and the export directory (`export`, a tmpfs sized like
/// the workspace) are full ([`Msg::Full`]): a program that failed on ENOSPC ("No space left
/// on device") is then told which limit to raise.
fn report_full_mounts(report: &Reporter, export: Option<&str>) {
    for path in CAPPED_MOUNTS.into_iter().chain(export) {
        let Ok(st) = nix::sys::statvfs::statvfs(path) else {
            continue;
        };
        for (inodes, total, free) in [
            (false, st.blocks(), st.blocks_available()),
            (true, st.files(), st.files_available()),
        ] {
            if total > 0 && free == 0 {
                report.send(&Msg::Full {
                    path: path.to_string(),
                    inodes,
                });
            }
        }
    }
}

/// Reaps every child until the payload exits, then reports how it ended, runs `after` (file
/// collection) and exits. A "stop" from the parent on the go pipe ends the run early: every
/// other process is killed, then `after` runs all the same. End-of-file there means the parent
/// has nothing more to say (it closes the pipe when no files are to be collected) or is gone
/// (then the parent-death signal kills init): init stops watching the pipe.
fn reap(
    payload: Pid,
    export_dir: Option<&str>,
    report: &Reporter,
    go: &OwnedFd,
    sfd: &SignalFd,
    after: impl FnOnce(&Reporter, bool),
) -> ! {
    let flags = WaitPidFlag::__WALL | WaitPidFlag::WNOHANG;
    let mut watch_go = true;
    loop {
        loop {
            match waitpid(None, Some(flags)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == payload => {
                    report_full_mounts(report, export_dir);
                    report.send(&Msg::Exited { code });
                    after(report, code == 0);
                    sys::exit_now(0);
                }
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == payload => {
                    report_full_mounts(report, export_dir);
                    report.send(&Msg::Signaled { signal: sig as i32 });
                    after(report, false);
                    sys::exit_now(0);
                }
                Ok(WaitStatus::StillAlive) => break,
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(e) => {
                    report.fail("wait for the payload", e, exit_codes::SANDBOX_ERROR);
                    sys::exit_now(exit_codes::SANDBOX_ERROR);
                }
            }
        }
        let mut fds = vec![PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
        if watch_go {
            fds.push(PollFd::new(go.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                report.fail("wait for the payload (poll)", e, exit_codes::SANDBOX_ERROR);
                sys::exit_now(exit_codes::SANDBOX_ERROR);
            }
        }
        let go_ready = fds
            .get(1)
            .and_then(PollFd::revents)
            .is_some_and(|r| !r.is_empty());
        while let Ok(Some(_)) = sfd.read_signal() {}
        if go_ready {
            let mut b = [0u8; 1];
            match nix::unistd::read(go, &mut b) {
                Ok(1) if &b == super::channel::STOP => {
                    super::collect::kill_and_reap_all();
                    after(report, false);
                    sys::exit_now(0);
                }
                Err(Errno::EINTR | Errno::EAGAIN) => {}
                _ => watch_go = false,
            }
        }
    }
}

/// The payload's entry point, in the process init started with [`sys::spawn_shared`] (it
/// shares init's memory until exec). Never returns: it execs or exits (`exit_now`).
fn payload_main(ctx: &ChildCtx) -> ! {
    let code = match prepare_payload(ctx) {
        Ok(()) => exec(ctx),
        Err((step, msg)) => {
            ctx.report.fail(step, msg, exit_codes::SANDBOX_ERROR);
            exit_codes::SANDBOX_ERROR
        }
    };
    sys::exit_now(code)
}

fn prepare_payload(ctx: &ChildCtx) -> Result<(), (&'static str, String)> {
    let e = |step: &'static str| move |err: Errno| (step, err.to_string());
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(e("set parent-death signal"))?;
    sys::reset_signals().map_err(e("reset signal dispositions"))?;
    nix::unistd::dup2_stdin(&ctx.stdin).map_err(e("attach stdin"))?;
    nix::unistd::dup2_stdout(&ctx.stdout).map_err(e("attach stdout"))?;
    nix::unistd::dup2_stderr(&ctx.stderr).map_err(e("attach stderr"))?;
    // A new session: no controlling terminal, so TIOCSTI has no terminal to inject into.
    nix::unistd::setsid().map_err(e("start a new session"))?;
    nix::unistd::chdir(WORKSPACE).map_err(e("enter /workspace"))?;
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    // RLIMIT_NOFILE last (below): Landlock's ruleset and the memory watch's listener need
    // descriptors of their own, and `--open-files` is the program's limit, not cordon's.
    let set = |r: &crate::limits::Rlimit| {
        crate::limits::set_rlimit(r.resource, r.value, r.hard()).map_err(|err| {
            let hint = if r.resource == libc::RLIMIT_NOFILE {
                " (the kernel caps open files at fs.nr_open; lower --open-files)"
            } else {
                " (a value above the caller's own hard limit needs root; lower it)"
            };
            ("set a resource limit", format!("{err}{hint}"))
        })
    };
    for r in ctx
        .rlimits
        .iter()
        .filter(|r| r.resource != libc::RLIMIT_NOFILE)
    {
        set(r)?;
    }
    // --cpus without a cgroup: this process and everything it starts run on these CPUs only.
    if let Some(set) = &ctx.cpu_pin {
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), set)
            .map_err(e("pin the sandbox to its CPUs (--cpus)"))?;
    }
    crate::security::caps::drop_all().map_err(|err| ("drop capabilities", err.to_string()))?;
    nix::sys::prctl::set_no_new_privs().map_err(e("set no_new_privs"))?;
    let ll = crate::security::landlock::restrict(
        ctx.allow_degraded_landlock,
        ctx.net_access,
        &ctx.extra_writable,
    )
    .map_err(|err| ("apply Landlock", err.to_string()))?;
    ctx.report.send(&Msg::Landlock {
        status: ll.status,
        abi: ll.abi,
    });
    // Every fd but 0-2 and the report pipe (close-on-exec) goes now; under the memory watch
    // also the socket to cordon (close-on-exec), which the watch's listener goes through.
    let mut keep = vec![ctx.report.fd().as_raw_fd()];
    let watch_sock = ctx
        .seccomp_listener
        .then_some(ctx.proc_handover.as_ref())
        .flatten()
        .map(|s| s.as_raw_fd());
    keep.extend(watch_sock);
    sys::close_fds_except(&keep).map_err(e("close inherited file descriptors"))?;
    // One program, the policy and any layers of the rlimit backend. With the memory watch's
    // layer its listener goes to cordon before exec; from here on, every mmap with MAP_SHARED
    // waits for cordon's answer (nothing of cordon's own code below makes one).
    if ctx.seccomp_listener {
        let Some(sock) = watch_sock else {
            return Err((
                "install seccomp with the memory watch's listener",
                "no channel to cordon to hand its listener over (a bug in cordon: report it)"
                    .into(),
            ));
        };
        let listener =
            crate::security::seccomp::install_with_listener(ctx.seccomp).map_err(|err| {
                (
                    "install seccomp with the memory watch's listener",
                    err.to_string(),
                )
            })?;
        super::memwatch::send_listener(sock, &listener)
            .map_err(|m| ("hand the memory watch's seccomp listener to cordon", m))?;
        // This copy goes now, the socket's at exec (close-on-exec; init keeps its own).
        drop(listener);
    } else {
        crate::security::seccomp::install(ctx.seccomp)
            .map_err(|err| ("install seccomp", err.to_string()))?;
    }
    // The policy lets a process set its own limits (setrlimit, prlimit64 on pid 0).
    for r in ctx
        .rlimits
        .iter()
        .filter(|r| r.resource == libc::RLIMIT_NOFILE)
    {
        set(r)?;
    }
    Ok(())
}

/// Executes `argv[0]` as `execvp` finds it: a name with a `/` as it is, any other in each
/// directory of `path` in turn, past those where it is missing (ENOENT, ENOTDIR) or not
/// executable (EACCES, remembered), stopping at any other failure. Returns only if nothing
/// could be executed: `None` when no candidate exists, else the candidate and its errno. The
/// one search of the payload's command and of an OCI container's process.
pub(crate) fn exec_search(
    argv: &[CString],
    env: &[CString],
    path: &[String],
) -> Option<(CString, Errno)> {
    let mut denied = None;
    for c in candidates(&argv[0], path) {
        let Err(err) = nix::unistd::execve(&c, argv, env);
        match err {
            Errno::ENOENT | Errno::ENOTDIR => continue,
            other => {
                denied = Some((c, other));
                if other != Errno::EACCES {
                    break;
                }
            }
        }
    }
    denied
}

/// Where `execvp` looks for `name`: the name itself when it has a `/`, else each directory of
/// `path`.
fn candidates(name: &CString, path: &[String]) -> Vec<CString> {
    let bytes = name.to_bytes();
    if bytes.contains(&b'/') {
        return vec![name.clone()];
    }
    path.iter()
        .filter_map(|dir| {
            let mut p = dir.as_bytes().to_vec();
            p.push(b'/');
            p.extend_from_slice(bytes);
            CString::new(p).ok()
        })
        .collect()
}

/// Where a file names the interpreter the kernel starts for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NamedBy {
    /// The first word of its `#!` line.
    Shebang,
    /// Its ELF header's `PT_INTERP`: the dynamic loader.
    ElfLoader,
}

impl NamedBy {
    fn describe(self) -> &'static str {
        match self {
            NamedBy::Shebang => "its #! line",
            NamedBy::ElfLoader => "the dynamic loader its ELF header names",
        }
    }
}

/// The interpreter a file asks the kernel for, and where it says so. None for anything else,
/// or a file that cannot be read.
fn interpreter_of(path: &std::path::Path) -> Option<(String, NamedBy)> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).ok()?;
    let mut head = [0u8; 256];
    let n = file.read_at(&mut head, 0).ok()?;
    let head = &head[..n];
    if let Some(line) = head.strip_prefix(b"#!") {
        // As the kernel reads it: blanks are spaces and tabs only (a CR is part of the name).
        let line = line.split(|&b| b == b'\n').next()?;
        let word = line
            .split(|&b| b == b' ' || b == b'\t')
            .find(|w| !w.is_empty())?;
        return Some((String::from_utf8_lossy(word).into_owned(), NamedBy::Shebang));
    }
    elf_interpreter(head, |buf, at| file.read_exact_at(buf, at).ok())
        .map(|i| (i, NamedBy::ElfLoader))
}

/// `PT_INTERP` of the ELF file whose first bytes are `head` (64- or 32-bit, little-endian),
/// read through `read_at(buf, offset)`.
fn elf_interpreter(head: &[u8], read_at: impl Fn(&mut [u8], u64) -> Option<()>) -> Option<String> {
    const PT_INTERP: u64 = 3;
    if head.len() < 52 || &head[..4] != b"\x7fELF" || head[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]) as u64;
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap()) as u64;
    let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    // (e_phoff, e_phentsize, e_phnum), and where p_offset and p_filesz sit in an entry.
    let (phoff, entsize, count, off_at, size_at, wide) = match head[4] {
        2 if head.len() >= 64 => (
            u64_at(head, 0x20),
            u16_at(head, 0x36),
            u16_at(head, 0x38),
            8,
            32,
            true,
        ),
        1 => (
            u32_at(head, 0x1c),
            u16_at(head, 0x2a),
            u16_at(head, 0x2c),
            4,
            16,
            false,
        ),
        _ => return None,
    };
    if entsize < if wide { 56 } else { 32 } {
        return None;
    }
    let mut entry = vec![0u8; entsize as usize];
    for i in 0..count.min(64) {
        read_at(&mut entry, phoff.checked_add(i * entsize)?)?;
        if u32_at(&entry, 0) != PT_INTERP {
            continue;
        }
        let (offset, size) = if wide {
            (u64_at(&entry, off_at), u64_at(&entry, size_at))
        } else {
            (u32_at(&entry, off_at), u32_at(&entry, size_at))
        };
        let mut name = vec![0u8; size.min(4096) as usize];
        read_at(&mut name, offset)?;
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        return Some(String::from_utf8_lossy(&name[..end]).into_owned());
    }
    None
}

/// The command's file when one exists where `execvp` looked (a regular file) although the
/// kernel answered ENOENT: then what is missing is its interpreter, named when it can be read.
fn found_without_interpreter(
    name: &CString,
    path: &[String],
) -> Option<(CString, Option<(String, NamedBy)>)> {
    use std::os::unix::ffi::OsStrExt;
    candidates(name, path).into_iter().find_map(|c| {
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(c.to_bytes()));
        if !std::fs::metadata(p).is_ok_and(|m| m.is_file()) {
            return None;
        }
        let interp = interpreter_of(p);
        Some((c, interp))
    })
}

/// Why the existing file `path` could not be executed (ENOENT): the interpreter it names
/// (`interp`) missing, a CR ending its `#!` line, or the interpreter's own loader missing;
/// with what to do.
fn interpreter_missing(
    path: &str,
    interp: Option<(String, NamedBy)>,
    rootfs_dir: Option<&std::path::Path>,
) -> String {
    let install = |dir: &std::path::Path| format!("install it in {} (--rootfs)", dir.display());
    let Some((i, named_by)) = interp else {
        return format!(
            "cannot execute {path}: the kernel answered ENOENT for a file that exists, so its interpreter (#! line or ELF loader) is missing in the sandbox"
        );
    };
    let by = named_by.describe();
    if named_by == NamedBy::Shebang && i.ends_with('\r') {
        return format!(
            "cannot execute {path}: its #! line ends in a carriage return (Windows line endings), so the kernel looks for an interpreter named {i:?}: convert the file to Unix line endings (`dos2unix FILE`, or `sed -i 's/\\r$//' FILE`)"
        );
    }
    let here = std::path::Path::new(&i);
    if std::fs::metadata(here).is_ok_and(|m| m.is_file()) {
        // The interpreter is there and is what cannot start: its own interpreter is missing.
        return match interpreter_of(here) {
            Some((inner, inner_by)) => format!(
                "cannot execute {path}: its interpreter {i} ({by}) is in the sandbox, but the {} of {i}, {inner}, is not{}",
                match inner_by {
                    NamedBy::Shebang => "#! interpreter",
                    NamedBy::ElfLoader => "dynamic loader",
                },
                rootfs_dir
                    .map(|d| format!("; {}", install(d)))
                    .unwrap_or_default()
            ),
            None => format!(
                "cannot execute {path}: its interpreter {i} ({by}) is in the sandbox, but the kernel could not start it (ENOENT): check that {i} runs in the sandbox itself"
            ),
        };
    }
    let what = match (rootfs_dir, named_by) {
        (Some(dir), _) => install(dir),
        (None, NamedBy::Shebang) => "fix the #! line, or run the script through an interpreter the sandbox has (`sh FILE`, `python3 FILE`)".to_string(),
        (None, NamedBy::ElfLoader) => "the sandbox shows this system's /usr, /bin, /sbin and /lib*, and the loader is not among them: the program was built for another system, or this one lacks a link to its loader (such as /lib64 -> usr/lib64); build the program here, or statically".to_string(),
    };
    format!("cannot execute {path}: its interpreter {i} ({by}) is not in the sandbox; {what}")
}

/// What to do about a command found but not executed (`errno` from execve): for EACCES the
/// usual causes, told apart by a stat of `path` and of its mount.
fn why_not_executable(path: &CString, errno: Errno) -> String {
    use nix::sys::stat::{SFlag, stat};
    use nix::sys::statvfs::{FsFlags, statvfs};
    let shown = path.to_string_lossy();
    let generic = "check that it is an executable file inside the sandbox".to_string();
    if errno != Errno::EACCES {
        return generic;
    }
    let Ok(st) = stat(path.as_c_str()) else {
        return generic;
    };
    let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    if kind == SFlag::S_IFDIR {
        return "it is a directory".into();
    }
    if kind != SFlag::S_IFREG {
        return "it is not a regular file".into();
    }
    let mode = st.st_mode & 0o7777;
    // A noexec mount first: there, chmod +x would not help.
    if statvfs(path.as_c_str()).is_ok_and(|v| v.flags().contains(FsFlags::ST_NOEXEC)) {
        return format!(
            "its filesystem is mounted noexec in the sandbox (as /etc and /dev/shm are){}: put it in /workspace or /tmp, or run it through its interpreter (`sh {shown}`, `python3 {shown}`)",
            if mode & 0o111 == 0 {
                format!(", and it is not executable (mode {mode:o})")
            } else {
                String::new()
            }
        );
    }
    if mode & 0o111 == 0 {
        return format!(
            "it is not executable (mode {mode:o}): run it through its interpreter (`sh {shown}`, `python3 {shown}`), or make it executable on the host (chmod +x) before giving it with --file, which keeps the host file's mode"
        );
    }
    "the sandbox's user has no execute permission on it (or on a directory above it)".into()
}

/// execs the payload's command ([`exec_search`]); on failure, reports why and returns the
/// exit code (126 found but not executable, 127 not found).
fn exec(ctx: &ChildCtx) -> i32 {
    let name = ctx.argv[0].to_bytes();
    let denied = exec_search(&ctx.argv, &ctx.env, &ctx.path);
    let shown = String::from_utf8_lossy(name);
    match denied {
        Some((path, errno)) => {
            let msg = format!(
                "cannot execute {}: {errno}; {}",
                path.to_string_lossy(),
                why_not_executable(&path, errno)
            );
            ctx.report
                .fail("execute the command", msg, exit_codes::CANNOT_EXECUTE);
            exit_codes::CANNOT_EXECUTE
        }
        None if let Some((path, interp)) = found_without_interpreter(&ctx.argv[0], &ctx.path) => {
            let msg = interpreter_missing(&path.to_string_lossy(), interp, ctx.rootfs_dir);
            ctx.report
                .fail("find the command's interpreter", msg, exit_codes::NOT_FOUND);
            exit_codes::NOT_FOUND
        }
        None => {
            let in_workspace = !name.contains(&b'/')
                && std::fs::metadata(std::path::Path::new(WORKSPACE).join(&*shown))
                    .is_ok_and(|m| m.is_file());
            // A path into the sandbox's own writable directories (or relative to the working
            // directory, /workspace): the program's own files, not the root's.
            let own = name.contains(&b'/') && !name.starts_with(b"/")
                || [WORKSPACE, "/tmp", "/dev/shm"].iter().any(|d| {
                    name.strip_prefix(d.as_bytes())
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
                });
            let visible = match ctx.rootfs_dir {
                _ if in_workspace => format!(
                    "{shown} is in the working directory, {WORKSPACE}, which is not on PATH: run it as ./{shown} (or `sh {shown}`, `python3 {shown}` when it is not executable)"
                ),
                _ if own => format!(
                    "{WORKSPACE} and /tmp start empty but for the files given with --file (and, under cordon run, the program's own)"
                ),
                Some(dir) => format!(
                    "the sandbox's root is {} (--rootfs): install the command there",
                    dir.display()
                ),
                None => {
                    "with --rootfs host only /usr, /bin, /sbin and /lib* of the host are visible"
                        .to_string()
                }
            };
            let msg = format!(
                "command not found in the sandbox: {shown} (searched {}); {visible}",
                if name.contains(&b'/') {
                    "that path".to_string()
                } else {
                    format!("PATH={}", ctx.path.join(":"))
                }
            );
            ctx.report
                .fail("find the command", msg, exit_codes::NOT_FOUND);
            exit_codes::NOT_FOUND
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF header of `class` (1: 32-bit, 2: 64-bit) with one program header, a
    /// PT_INTERP naming `interp`.
    fn elf(class: u8, interp: &str) -> Vec<u8> {
        let wide = class == 2;
        let (ehsize, phsize) = if wide { (64, 56) } else { (52, 32) };
        let at = ehsize + phsize;
        let mut f = vec![0u8; at + interp.len() + 1];
        f[..6].copy_from_slice(&[0x7f, b'E', b'L', b'F', class, 1]);
        let put = |f: &mut Vec<u8>, i: usize, v: u64, n: usize| {
            f[i..i + n].copy_from_slice(&v.to_le_bytes()[..n]);
        };
        if wide {
            put(&mut f, 0x20, ehsize as u64, 8);
            put(&mut f, 0x36, phsize as u64, 2);
            put(&mut f, 0x38, 1, 2);
            put(&mut f, ehsize, 3, 4);
            put(&mut f, ehsize + 8, at as u64, 8);
            put(&mut f, ehsize + 32, interp.len() as u64 + 1, 8);
        } else {
            put(&mut f, 0x1c, ehsize as u64, 4);
            put(&mut f, 0x2a, phsize as u64, 2);
            put(&mut f, 0x2c, 1, 2);
            put(&mut f, ehsize, 3, 4);
            put(&mut f, ehsize + 4, at as u64, 4);
            put(&mut f, ehsize + 16, interp.len() as u64 + 1, 4);
        }
        f[at..at + interp.len()].copy_from_slice(interp.as_bytes());
        f
    }

    #[test]
    fn the_interpreter_a_file_asks_for_is_read_from_its_first_line_or_elf_header() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "#!  /opt/nowhere/python3 -u\nprint(1)\n").unwrap();
        assert_eq!(
            interpreter_of(&file),
            Some(("/opt/nowhere/python3".to_string(), NamedBy::Shebang))
        );
        // A CR is part of the name, as the kernel reads it (Windows line endings).
        std::fs::write(&file, "#!/bin/sh\r\necho hi\r\n").unwrap();
        assert_eq!(
            interpreter_of(&file),
            Some(("/bin/sh\r".to_string(), NamedBy::Shebang))
        );
        std::fs::write(&file, "echo plain\n").unwrap();
        assert_eq!(interpreter_of(&file), None);
        for class in [1, 2] {
            let bytes = elf(class, "/lib/ld-test.so.1");
            std::fs::write(&file, &bytes).unwrap();
            assert_eq!(
                interpreter_of(&file),
                Some(("/lib/ld-test.so.1".to_string(), NamedBy::ElfLoader)),
                "class {class}"
            );
            // Truncated anywhere: no name, and no panic.
            for cut in 0..bytes.len() - 1 {
                std::fs::write(&file, &bytes[..cut]).unwrap();
                assert_eq!(interpreter_of(&file), None, "class {class} cut {cut}");
            }
        }
    }

    #[test]
    fn a_missing_interpreter_is_told_by_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let m = |i: &str, by| interpreter_missing("./s", Some((i.to_string(), by)), None);
        let msg = m("/bin/sh\r", NamedBy::Shebang);
        assert!(
            msg.contains("carriage return") && msg.contains("dos2unix"),
            "{msg}"
        );
        let msg = m("/opt/cordon-none/python3", NamedBy::Shebang);
        assert!(
            msg.contains("is not in the sandbox; fix the #! line"),
            "{msg}"
        );
        let msg = m("/lib/ld-none.so.1", NamedBy::ElfLoader);
        assert!(
            msg.contains("is not in the sandbox; the sandbox shows this system's /usr"),
            "{msg}"
        );
        // Present, with its own loader missing; present and static.
        let interp = dir.path().join("interp");
        std::fs::write(&interp, elf(2, "/lib/ld-none.so.1")).unwrap();
        let msg = m(interp.to_str().unwrap(), NamedBy::Shebang);
        assert!(
            msg.contains("is in the sandbox, but the dynamic loader of")
                && msg.contains("/lib/ld-none.so.1, is not"),
            "{msg}"
        );
        std::fs::write(&interp, b"\x7fELF static").unwrap();
        let msg = m(interp.to_str().unwrap(), NamedBy::Shebang);
        assert!(
            msg.contains("is in the sandbox, but the kernel could not start it"),
            "{msg}"
        );
        let msg = interpreter_missing(
            "./s",
            Some(("/x".into(), NamedBy::ElfLoader)),
            Some(std::path::Path::new("/r")),
        );
        assert!(msg.ends_with("install it in /r (--rootfs)"), "{msg}");
    }

    #[test]
    fn candidates_follow_execvp() {
        let path = ["/usr/bin".to_string(), "/bin".to_string()];
        let c = |s: &str| CString::new(s).unwrap();
        assert_eq!(
            candidates(&c("ls"), &path),
            [c("/usr/bin/ls"), c("/bin/ls")]
        );
        assert_eq!(candidates(&c("./ls"), &path), [c("./ls")]);
    }
}

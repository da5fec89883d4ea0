//! The launcher: the parent (this process, the supervisor), init (pid 1 of the sandbox) and
//! the payload. [`run`] is the whole launch, in order; each step says why it sits where it is.

mod channel;
mod child;
pub(crate) use child::exec_search;
mod classify;
mod collect;
pub(crate) use collect::RECEIVED_OMITTED_MAX;
mod export;
mod ids;
#[cfg(test)]
pub(crate) use ids::choose as choose_ids;
pub use ids::{HostIds, IdsError, host_ids};
mod keeper;
mod memwatch;
mod netns;
pub use netns::Failure as NetnsFailure;

/// Before cordon exits: the processes it forked that are still ending a run's teardown
/// (keeper.rs) are handed, at cordon's exit, to the nearest subreaper or else to PID 1 of the
/// pid namespace. An init known to reap every child (systemd, tini, a shell, ...) takes them:
/// cordon returns at once. Any other PID 1 (an agent's server run as a container's first
/// process, which reaps only the children it started) would keep one zombie per run, so
/// cordon waits for them first (at most 2 s; it costs the teardown, 0.1-0.7 ms).
pub fn wait_for_helpers() {
    if keeper::none_left() {
        return;
    }
    let wait = if helpers_are_waited_for() {
        std::time::Duration::from_secs(2)
    } else {
        std::time::Duration::ZERO
    };
    keeper::wait_for_all(wait);
}

/// Whether cordon's exit waits for its helpers ([`wait_for_helpers`]): PID 1 is not an init
/// known to reap every child. Then a run's teardown is on the caller's path anyway, and
/// [`run`] starts it as soon as the sandbox is gone, beside its own last steps, instead of
/// leaving it to the keeper after cordon's exit. Read once per process.
fn helpers_are_waited_for() -> bool {
    static WAITED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WAITED.get_or_init(|| {
        let comm = std::fs::read_to_string("/proc/1/comm").unwrap_or_default();
        !init_reaps(comm.trim_end())
    })
}

/// Whether a PID 1 of this name is an init that reaps every child it is handed.
fn init_reaps(comm: &str) -> bool {
    matches!(
        comm,
        "systemd"
            | "init"
            | "tini"
            | "tini-static"
            | "docker-init"
            | "dumb-init"
            | "catatonit"
            | "s6-svscan"
            | "runit"
            | "openrc-init"
            | "sh"
            | "bash"
            | "dash"
            | "ash"
            | "busybox"
    )
}
mod sockdiag;
mod supervise;
pub(crate) use supervise::CPU_CHECK_EVERY;

use crate::fs::plan::{self, HostView};
use crate::limits::{self, LimitsError};
use crate::net::Network;
use crate::outcome::{IsolationReport, Outcome};
use crate::security::landlock::NetAccess;
use crate::security::seccomp::{self, SeccompError};
use crate::spec::{ParseError, Rootfs, SANDBOX_GID, SANDBOX_UID, SandboxSpec, StdinSource};
use crate::sys::{self, CloneResult};
use channel::Reporter;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::{Pid, pipe2};
use std::ffi::CString;
use std::os::fd::AsFd;
use std::time::Instant;

/// A root caller's sandbox runs as host uid and gid `ROOT_CALLER_ID_BASE + cordon's pid`:
/// never host uid 0, never a real user's (the range sits far above the ids that distributions
/// and /etc/subuid hand out), and different for every concurrently running sandbox, so two
/// root-run sandboxes, or a sandbox and a host daemon running as `nobody`, share no uid.
pub const ROOT_CALLER_ID_BASE: u32 = 2_000_000_000;
/// Width of that range: the kernel's largest possible pid (PID_MAX_LIMIT, 2^22).
pub const ROOT_CALLER_ID_RANGE: u32 = 1 << 22;

/// The namespaces of the launcher's clone. The network namespace (unless `--net host`) is
/// made beside it, in this user namespace, by a helper (see launch::netns); the cgroup
/// namespace by init right after it is in the sandbox's cgroup, so that it is rooted there.
/// Both exist before anything of the program runs.
const CLONE_FLAGS: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS;
const NAMESPACES: &[&str] = &["user", "pid", "mount", "network", "ipc", "uts", "cgroup"];

/// How read-only host directories are shown, unless init reports a downgrade.
const HOST_VIEWS: &str = "private read-only overlays";

impl LaunchError {
    /// Whose to fix (see [`crate::outcome::ErrorKind`]): a spec that cannot be run as given
    /// (an invalid value, a `--stdin` file that is not there) is the request's; the rest, the
    /// host's.
    pub fn kind(&self) -> crate::outcome::ErrorKind {
        match self {
            LaunchError::Spec(_) | LaunchError::Stdin { .. } => crate::outcome::ErrorKind::Request,
            _ => crate::outcome::ErrorKind::Setup,
        }
    }
}

/// Why a sandbox could not be launched. Each variant names the step; the message says what
/// to do.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Spec(#[from] ParseError),
    #[error(transparent)]
    Seccomp(#[from] SeccompError),
    #[error(transparent)]
    Limits(#[from] LimitsError),
    #[error(
        "cannot read the root filesystem {path}: {source}; check the path given to --rootfs (under cordon run, else the language profile's `rootfs`, or the built rootfs that `auto` found: `cordon rootfs build LANG`)"
    )]
    Rootfs {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot open --stdin file {path}: {source}; give a file to read (or a FIFO)")]
    Stdin {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    NestedRoot(String),
    #[error("cannot {step}: {errno}{hint}")]
    Sys {
        step: &'static str,
        errno: Errno,
        hint: String,
    },
    #[error("cannot set up `--net allow=`: {0}")]
    Net(#[from] crate::net::NetError),
    /// The host network with a memory limit held by the memory watch; the limit is named as
    /// whoever set it calls it.
    #[error("{}", host_net_unwatched(*.0))]
    HostNetUnwatched(crate::spec::LimitNaming),
    #[error(
        "cannot keep a crash in the sandbox from starting the host's core-dump helper: kernel.core_pattern is `{0}`, which the kernel runs as root, outside the sandbox, for every crash unless RLIMIT_CORE is 1, and this process's hard core limit is 0 (it may not raise it); raise the hard limit to 1 or more for cordon's caller (`* hard core unlimited` in /etc/security/limits.conf, LimitCORE=0:infinity in a systemd unit, or run as root), or accept crashes reaching the helper with --allow-degraded core-dumps (reported in the result)"
    )]
    CoreDumpHelper(String),
    #[error(
        "cordon must start the sandbox from a single-threaded process (the kernel refuses a new user namespace otherwise); this process has {0} threads"
    )]
    Threads(usize),
}

/// The message of [`LaunchError::HostNetUnwatched`]: the limit and the network named as the
/// caller gave them (flags, a profile, a request), and fixes the caller can apply.
fn host_net_unwatched(naming: crate::spec::LimitNaming) -> String {
    use crate::spec::LimitNaming;
    let why = "under the rlimit backend: the memory watch cannot count the sandbox's socket buffers, which would be among the host's own sockets, so the memory limit would not hold";
    match naming {
        LimitNaming::Request | LimitNaming::CompileRequest => format!(
            "config.network \"host\" with a memory limit ({}, or this cordon's default) {why}; ask for another config.network, or ask this cordon's operator to give it a cgroup (see `cordon doctor`) or to accept uncounted socket buffers (cordon run --allow-degraded socket-memory)",
            naming.name("memory")
        ),
        _ => format!(
            "--net host with a memory limit ({}, or its default: 512M, or the language profile's `memory`) {why}; give cordon a cgroup (run as root, or see `cordon doctor`), drop --net host, lift the limit ({} 0), or accept uncounted socket buffers with --allow-degraded socket-memory (reported in the result)",
            naming.name("memory"),
            naming.name("memory")
        ),
    }
}

/// Whether the rlimit backend's memory watch can read socket buffers here: one sock_diag
/// dump of the caller's own network namespace (for `cordon doctor`; a sandbox's init makes
/// the same dump in its own before the program starts).
pub fn sock_diag_probe() -> Result<(), String> {
    let diag = sockdiag::open()?;
    sockdiag::socket_bytes(
        std::os::fd::AsFd::as_fd(&diag),
        &mut 0,
        Default::default(),
        None,
    )
    .map(drop)
}

/// Whether a network namespace can be made as a run makes it (see launch::netns), for
/// `cordon doctor`: on failure, the step, the cause and the fix a run would give.
pub fn network_namespace_probe() -> Result<(), NetnsFailure> {
    netns::probe()
}

fn sys_err(step: &'static str) -> impl Fn(Errno) -> LaunchError {
    move |errno| LaunchError::Sys {
        step,
        errno,
        hint: String::new(),
    }
}

/// A close-on-exec unix stream socketpair (parent's end, child's end) when `wanted`.
fn socketpair_if(
    wanted: bool,
    step: &'static str,
) -> Result<(Option<std::os::fd::OwnedFd>, Option<std::os::fd::OwnedFd>), LaunchError> {
    typed_socketpair_if(wanted, nix::sys::socket::SockType::Stream, step)
}

/// [`socketpair_if`] of the given type.
fn typed_socketpair_if(
    wanted: bool,
    kind: nix::sys::socket::SockType,
    step: &'static str,
) -> Result<(Option<std::os::fd::OwnedFd>, Option<std::os::fd::OwnedFd>), LaunchError> {
    if !wanted {
        return Ok((None, None));
    }
    let (p, c) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        kind,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(sys_err(step))?;
    Ok((Some(p), Some(c)))
}

/// Runs one sandbox to completion and reports what happened. An `Err` means nothing of the
/// program ran; failures after the clone come back as an `Outcome` with status
/// `sandbox_error`.
pub fn run(spec: &SandboxSpec) -> Result<Outcome, LaunchError> {
    // 1. Everything that can fail without touching the host, and every allocation the child
    //    needs, happens before clone: the child only executes a prepared plan.
    spec.validate()?;
    if let Some(n) = sys::thread_count().filter(|&n| n > 1) {
        return Err(LaunchError::Threads(n));
    }
    // The rootfs directory is resolved once, here; init opens its entries beneath it without
    // following symlinks, so swapping an entry for a symlink later cannot redirect a bind.
    let rootfs = match &spec.rootfs {
        Rootfs::Host => Rootfs::Host,
        Rootfs::Dir(d) => {
            Rootfs::Dir(
                std::fs::canonicalize(d).map_err(|source| LaunchError::Rootfs {
                    path: d.display().to_string(),
                    source,
                })?,
            )
        }
    };
    let host = HostView::read(&rootfs).map_err(|source| LaunchError::Rootfs {
        path: match &rootfs {
            Rootfs::Host => "/".into(),
            Rootfs::Dir(d) => d.display().to_string(),
        },
        source,
    })?;
    plan::check_new_top_dirs(&rootfs, &host, spec)?;
    if !spec.binds.is_empty() {
        // Also checked by the CLI, with its flag's name; here for every caller of the spec.
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| e.to_string())
            .and_then(|t| limits::MountInfo::parse(&t))
            .map_err(|why| {
                ParseError::new(
                    "bind source",
                    "",
                    &format!("cannot read /proc/self/mountinfo: {why}"),
                )
            })?;
        for b in &spec.binds {
            plan::check_bind_canonical(&b.src)
                .and_then(|()| plan::check_bind_source(&b.src, &mounts))
                .map_err(|why| {
                    ParseError::new("bind source", &b.src.display().to_string(), &why)
                })?;
        }
    }
    let mut ops = plan::build(&rootfs, &host, &spec.limits, &spec.hostname);
    if spec.network == Network::Host {
        host_network_etc(&mut ops);
    }
    ops.extend(plan::binds(&spec.binds));
    let bind_sources: Vec<std::path::PathBuf> = spec.binds.iter().map(|b| b.src.clone()).collect();
    if let Some(e) = &spec.export {
        ops.extend(plan::export(e, &spec.limits));
    }
    let rootfs_dir = match &rootfs {
        Rootfs::Dir(d) => Some(d.as_path()),
        Rootfs::Host => None,
    };
    let term = std::env::var("TERM").ok();
    let env = spec.environment(term.as_deref());
    let path = spec.lookup_path(&env);
    let argv = cstrings(spec.argv.iter().cloned())?;
    let envp = cstrings(env.iter().map(|(k, v)| format!("{k}={v}")))?;
    let stdin_file = match &spec.stdin {
        StdinSource::File(p) => {
            let stdin_err = |source| LaunchError::Stdin {
                path: p.display().to_string(),
                source,
            };
            let f = std::fs::File::open(p).map_err(stdin_err)?;
            // A directory opens for reading, and its read fails (EISDIR): the program would
            // see an empty stdin instead of an error.
            if f.metadata().map_err(stdin_err)?.is_dir() {
                return Err(stdin_err(std::io::Error::from_raw_os_error(libc::EISDIR)));
            }
            Some(f)
        }
        _ => None,
    };

    let handover = match &spec.network {
        Network::Allow(_) => Some(crate::net::handover_pair()?),
        _ => None,
    };
    let net_access = match &spec.network {
        Network::None => NetAccess::Deny,
        Network::Allow(_) => NetAccess::ProxyOnly(crate::net::PROXY_PORT),
        Network::Host => NetAccess::Unrestricted,
    };
    let host_exposure = (spec.network == Network::Host)
        .then(|| crate::net::host_network_exposure(crate::sys::landlock_abi().unwrap_or(0)));

    // 2. Limits: the backend is chosen and checked here. A cgroup v2 is made now, with its
    //    limits; a cgroup v1 after the clone, while init builds the root (prepare_deferred).
    //    Either way it exists, with its limits written, before init forks the payload.
    let run_id = run_id();
    let mut prepared = limits::prepare_deferred(&spec.limits, spec.backend, &run_id)?;
    check_hard_limits(spec, &prepared.rlimits)?;
    let ids = host_ids().map_err(|e| LaunchError::NestedRoot(e.to_string()))?;
    let root_caller = ids.root();
    // A crash must not start a piped core_pattern's helper (as host root, outside the
    // sandbox): RLIMIT_CORE 1 stops it, and where the caller's hard limit is 0 and cannot be
    // raised, the run is refused unless the caller accepts it.
    let core_dumps = limits::CoreDumps::of(
        prepared
            .rlimits
            .iter()
            .find(|r| r.resource == libc::RLIMIT_CORE)
            .map_or(0, |r| r.value),
        &limits::core_pattern(),
    );
    if let limits::CoreDumps::ToHelper(pattern) = &core_dumps {
        if !spec.degrade.core_dumps {
            return Err(LaunchError::CoreDumpHelper(pattern.clone()));
        }
        eprintln!("cordon: WARNING: {}", core_dumps.describe());
    }
    // Without a cgroup the supervisor polls the sandbox's memory (see launch::memwatch); init
    // sends it the sandbox's /proc over this socketpair once it is mounted.
    let watch_limit = spec.limits.memory.filter(|_| {
        prepared
            .report
            .memory_bytes
            .as_ref()
            .is_some_and(|m| m.enforcement == crate::outcome::Enforcement::Rlimit)
    });
    // Under --net host the watch cannot tell the sandbox's sockets from the host's: refused,
    // unless the caller accepts socket buffers uncounted.
    if watch_limit.is_some() && spec.network == Network::Host && !spec.degrade.socket_memory {
        return Err(LaunchError::HostNetUnwatched(spec.limit_naming));
    }
    // Said once the run is known to go ahead, in the words the caller used.
    if let Some(x) = &host_exposure {
        let asked = match spec.limit_naming {
            crate::spec::LimitNaming::Request | crate::spec::LimitNaming::CompileRequest => {
                "config.network \"host\""
            }
            _ => "--net host",
        };
        eprintln!("cordon: WARNING: {asked}: {x}");
    }
    // Landlock below ABI 4 cannot refuse TCP on the sandbox's loopback, where a connection
    // whose peer reset holds memory the watch cannot see: with the network off, TCP sockets
    // are refused instead (the no-tcp layer); under --net allow= (Landlock degraded at the
    // caller's request) the note says what is not counted.
    let tcp_unrefused = watch_limit.is_some()
        && spec.network != Network::Host
        && crate::sys::landlock_abi().unwrap_or(0) < crate::security::landlock::NET_ABI;
    let no_tcp = tcp_unrefused && spec.network == Network::None;
    if watch_limit.is_some()
        && let Some(m) = prepared.report.memory_bytes.as_mut()
    {
        m.note = Some(limits::memory_note(
            ids.host_root(),
            spec.network != Network::Host,
            match (tcp_unrefused, no_tcp) {
                (true, true) => limits::TcpUnderWatch::Refused,
                (true, false) => limits::TcpUnderWatch::Uncounted,
                _ => limits::TcpUnderWatch::Landlock,
            },
        ));
    }
    // What the watch cannot count is not offered: memfds (see profiles/seccomp/memory-watch.toml),
    // and shared mappings of /dev/zero, whose objects it could not tell from a file's mapping
    // when the call is made (the descriptor is only a number then; another thread may swap
    // it). /dev/zero is the host's /dev/full: it reads the same zeros, and cannot be mapped.
    if watch_limit.is_some() && !plan::watch_devices(&mut ops) {
        return Err(LaunchError::Sys {
            step: "make /dev/zero unmappable for the memory watch",
            errno: Errno::ENOENT,
            hint: " (the mount plan has no /dev/zero to replace: a bug in cordon, report it; a cgroup holds --memory without the watch: run as root, or see `cordon doctor`)".into(),
        });
    }
    // --cpus without a cgroup: the CPUs the payload pins itself to (limits::cpu_pin).
    let cpu_pin = match &prepared.cpu_pin {
        Some(cpus) => {
            let mut set = nix::sched::CpuSet::new();
            for &c in cpus {
                set.set(c).map_err(sys_err("make the CPU set of --cpus"))?;
            }
            Some(set)
        }
        None => None,
    };
    // The run's seccomp program: the policy, with the memory watch's layer (and no-tcp's), and
    // the layer that keeps the CPU pin, when those are in use, as one program.
    let filter = seccomp::compile_builtin_with(
        &spec.seccomp_policy,
        seccomp::Layers {
            memory_watch: watch_limit.is_some(),
            no_tcp,
            cpu_pin: cpu_pin.is_some(),
        },
    )?;
    let (watch_parent, watch_child) = socketpair_if(
        watch_limit.is_some(),
        "create the memory watch's socketpair",
    )?;

    // 3. Pipes: go (parent → init), report (init/payload → parent), stdio.
    let cloexec = OFlag::O_CLOEXEC;
    let (go_r, go_w) = pipe2(cloexec).map_err(sys_err("create the go pipe"))?;
    let (rep_r, rep_w) = pipe2(cloexec).map_err(sys_err("create the report pipe"))?;
    let (in_r, in_w) = pipe2(cloexec).map_err(sys_err("create the stdin pipe"))?;
    let (out_r, out_w) = pipe2(cloexec).map_err(sys_err("create the stdout pipe"))?;
    let (err_r, err_w) = pipe2(cloexec).map_err(sys_err("create the stderr pipe"))?;

    // 4. SIGINT/SIGTERM/SIGHUP go to a signalfd so the supervisor can kill the sandbox and
    //    still print a result. Blocked before clone; the payload unblocks them.
    let mut mask = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        mask.add(s);
    }
    let mut old_mask = SigSet::empty();
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), Some(&mut old_mask))
        .map_err(sys_err("block signals"))?;

    let (host_uid, host_gid) = (ids.uid(), ids.gid());
    let started = Instant::now();
    // cgroup v1: init moves itself into the sandbox's groups through their `tasks` files,
    // which cordon opens once it has made them and sends over this socketpair.
    let (tasks_parent, tasks_child) = socketpair_if(
        prepared
            .cgroup
            .as_ref()
            .is_some_and(|c| c.self_attach_files().is_some()),
        "create the cgroup socketpair",
    )?;

    // 5. The clone creates the namespaces but the network's (made beside init: launch::netns)
    //    and the cgroup's (made by init once it is in the sandbox's cgroup).
    let (net_parent, net_child) = match handover {
        Some(h) => (Some(h.parent), Some(h.child)),
        None => (None, None),
    };
    // The network namespace comes from cordon's helper, on this socketpair (see launch::netns),
    // in one message: a datagram-like pair keeps it whole.
    let (netns_parent, netns_child) = typed_socketpair_if(
        spec.network != Network::Host,
        nix::sys::socket::SockType::SeqPacket,
        "create the network namespace's socketpair",
    )?;
    let clone_flags = CLONE_FLAGS;
    let child = match sys::clone_namespaces(clone_flags) {
        Ok(CloneResult::Child) => {
            drop((
                go_w,
                rep_r,
                in_w,
                out_r,
                err_r,
                net_parent,
                watch_parent,
                tasks_parent,
                netns_parent,
            ));
            child::init_main(child::ChildCtx {
                plan: &ops,
                hostname: &spec.hostname,
                argv,
                env: envp,
                path,
                rlimits: &prepared.rlimits,
                seccomp: &filter,
                seccomp_listener: watch_limit.is_some(),
                cpu_pin,
                allow_degraded_landlock: spec.degrade.landlock,
                allow_degraded_overlay: spec.degrade.overlay,
                root_caller,
                go: go_r,
                report: Reporter::new(rep_w),
                stdin: in_r,
                stdout: out_w,
                stderr: err_w,
                files: &spec.files,
                rootfs_dir,
                bind_sources,
                cgroup_tasks: tasks_child,
                collect: spec.collect.as_ref(),
                net_handover: net_child,
                proc_handover: watch_child,
                shm_limit: if ids.host_root() {
                    spec.limits.memory
                } else {
                    None
                },
                net_access,
                netns_from_helper: netns_child,
                extra_writable: spec
                    .binds
                    .iter()
                    .filter(|b| b.writable)
                    .map(|b| b.dst.as_str())
                    .chain(spec.export.iter().map(|e| e.dir.as_str()))
                    .collect(),
                export: spec
                    .export
                    .as_ref()
                    .map(|e| (e, spec.limits.workspace_size, spec.limits.workspace_inodes)),
            })
        }
        Ok(CloneResult::Parent(pid)) => pid,
        Err(errno) => {
            let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old_mask), None);
            if let Some(cg) = prepared.cgroup {
                let _ = cg.remove();
            }
            return Err(LaunchError::Sys {
                step: "create the sandbox namespaces (clone)",
                errno,
                hint: crate::doctor::userns_hint(errno),
            });
        }
    };
    drop((
        go_r,
        rep_w,
        in_r,
        out_w,
        err_w,
        net_child,
        watch_child,
        tasks_child,
        netns_child,
    ));
    // The sandbox's mount namespace, for the keeper to hold (see keeper.rs). Opened while init
    // waits for its first go, with the caller's identity. Not having it only makes the run's
    // end slower (init's exit then unmounts everything), so a failure is not an error.
    let mount_ns = nix::fcntl::open(
        format!("/proc/{child}/ns/mnt").as_str(),
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok();

    // The sandbox's user namespace, for the network namespace's helper to join. Opened now,
    // like the mount namespace: after the first go init makes itself non-dumpable and
    // switches ids, and /proc/PID/ns then refuses cordon (an unprivileged caller lacks
    // CAP_SYS_PTRACE).
    // If init has already failed one of its first steps (it says why on the report pipe, then
    // exits), this open and the id maps below can fail for that reason alone. The run then
    // sends no go and goes on to supervision, which reports init's own reason instead of
    // theirs (`init_gone` keeps their error for the case where init said nothing).
    let mut init_gone: Option<LaunchError> = None;
    let userns = match &netns_parent {
        Some(_) => nix::fcntl::open(
            format!("/proc/{child}/ns/user").as_str(),
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map(Some)
        .map_err(|errno| LaunchError::Sys {
            step: "open the sandbox's user namespace (/proc/PID/ns/user)",
            errno,
            hint: " (cordon needs /proc mounted; `--net host` skips this step)".into(),
        }),
        None => Ok(None),
    };
    let userns = match userns {
        Err(e) if init_ended(child, &rep_r) => {
            init_gone = Some(e);
            Ok(None)
        }
        other => other,
    };
    // 6. uid/gid maps (each written once), first go (init builds the root), then, while it
    //    does, the network namespace's helper (first, and waited for: init needs the
    //    namespace once the root is built) and the cgroup: on v2 cordon attaches init (that
    //    can wait for an RCU grace period); on v1 cordon makes the groups only now and sends
    //    init their `tasks` files, through which init moves itself after the second go
    //    (init may start the payload).
    // A failed go write (EPIPE) means init already exited; it reported why on the report
    // pipe, which supervision reads, so it is not an error of its own here.
    let mut netns_helper = None;
    let setup = userns.and_then(|userns| {
        if init_gone.is_some() {
            return Ok(Err(Errno::ESRCH));
        }
        let first = match write_maps(child, root_caller, host_uid, host_gid) {
            Ok(()) => channel::send_go(&go_w),
            Err(e) if init_ended(child, &rep_r) => {
                init_gone = Some(e);
                return Ok(Err(Errno::ESRCH));
            }
            Err(e) => return Err(e),
        };
        if first.is_ok()
            && let (Some(userns), Some(sock)) = (&userns, &netns_parent)
        {
            let helper = netns::start(userns, sock).map_err(|errno| LaunchError::Sys {
                step: "start the helper that makes the sandbox's network namespace",
                errno,
                hint: " (EAGAIN: too many processes for this user, see `ulimit -u`; ENOMEM: the host is out of memory)".into(),
            })?;
            // Waited for now: while the kernel makes the namespace (about 0.5 ms), cordon
            // leaves the processors to init and the helper (on a 2-CPU machine, three
            // processes running at once slowed init); the cgroup below is needed only once
            // init has built the root. Reaped, the helper is not left a zombie for the run
            // (under the rlimit backend's RLIMIT_NPROC, which counts a task until it is
            // reaped, it took one of the program's `--pids`). The wait ends at the run's
            // deadline, a signal to cordon or init's end: a helper stuck in the kernel is
            // then left running (killed and reaped without waiting after the run) and
            // supervision starts (the keeper, forked below, is not there yet: a cordon
            // SIGKILLed meanwhile leaves a v2 cgroup, made before the clone, to a later
            // run's collection; init's work before it is attached is charged to cordon's).
            netns_helper = reap_helper(helper, child, &mask, started + spec.limits.wall);
        }
        match (&first, prepared.cgroup.as_mut()) {
            // cgroup v1: made now, while init builds the root; init moves itself through the
            // `tasks` files sent to it (see ChildCtx::cgroup_tasks).
            (Ok(()), Some(cg)) if cg.self_attach_files().is_some() => {
                cg.create_pending()?;
                let files = cg.self_attach_files().unwrap_or_default();
                let fds = files
                    .iter()
                    .map(|f| {
                        nix::fcntl::open(
                            f,
                            OFlag::O_WRONLY | OFlag::O_CLOEXEC,
                            nix::sys::stat::Mode::empty(),
                        )
                        .map_err(|errno| LaunchError::Sys {
                            step: "open a tasks file of the sandbox's cgroup",
                            errno,
                            hint: format!(
                                " ({}; cordon made that cgroup a moment before: check that nothing else removes cordon-* cgroups)",
                                f.display()
                            ),
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                if let Some(sock) = &tasks_parent {
                    match channel::send_fds(sock, &fds) {
                        // init is gone: it said why on the report pipe.
                        Ok(()) | Err(Errno::EPIPE) => {}
                        Err(e) => return Err(sys_err("send init the tasks files of its cgroup")(e)),
                    }
                }
                Ok(first)
            }
            (Ok(()), Some(cg)) => cg
                .attach(child.as_raw())
                .map_err(LaunchError::from)
                .map(|()| first),
            _ => Ok(first),
        }
    });
    drop((tasks_parent, netns_parent));
    // `--net allow=`: init hands over the proxy's listening socket while it builds the root;
    // the proxy helper starts before the payload may. No socket because init failed: it said
    // why on the report pipe. Any other failure stops the run (fail closed).
    let setup = setup.and_then(|first| {
        let (Some(sock), Network::Allow(policy)) = (&net_parent, &spec.network) else {
            return Ok((first, None));
        };
        if first.is_err() {
            return Ok((first, None));
        }
        match crate::net::receive_listener(sock)? {
            Some(listener) => Ok((first, Some(crate::net::spawn_proxy(listener, policy)?))),
            None => Ok((first, None)),
        }
    });
    drop(net_parent);
    let (first_go, proxy) = match setup {
        Ok(first) => first,
        Err(e) => {
            let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(child, None);
            end_netns_helper(netns_helper);
            if let Some(cg) = prepared.cgroup {
                let _ = cg.remove();
            }
            let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old_mask), None);
            return Err(e);
        }
    };
    let go_sent = first_go.and_then(|()| channel::send_go(&go_w));
    // Removes the cgroup if cordon dies without doing so, and takes the unmounting off the
    // run's end (keeper.rs). Forked while init builds the root (cordon would only wait in poll
    // meanwhile). Failing to fork it is not worth failing the run: the next run of cordon
    // collects a cgroup left behind; the warning says so.
    // Where cordon's exit waits for the keeper anyway, the keeper unmounts as soon as init is
    // gone (keeper.rs).
    let watch_init = helpers_are_waited_for().then_some(child);
    let keeper = match keeper::spawn(prepared.cgroup.as_ref(), mount_ns.as_ref(), watch_init) {
        Ok(k) => Some(k),
        Err(e) if prepared.cgroup.is_some() => {
            eprintln!(
                "cordon: warning: cannot fork the cgroup keeper ({e}); if cordon is killed, its cgroup stays until the next run of cordon removes it"
            );
            None
        }
        Err(_) => None,
    };
    drop(mount_ns);
    // Stale cgroups of earlier runs go now, while init builds the root (limits::StaleGc).
    if let Some(gc) = prepared.stale_gc.take() {
        gc.run();
    }
    // With files to collect, the go pipe stays: an early end of the run goes through init.
    let stop = spec.collect.is_some().then_some(go_w);

    // 7. Supervise until init exits, then measure, classify and clean up.
    let isolation = IsolationReport {
        namespaces: NAMESPACES
            .iter()
            .filter(|n| **n != "network" || spec.network != Network::Host)
            .map(|s| s.to_string())
            .collect(),
        host_uid,
        uid: SANDBOX_UID,
        gid: SANDBOX_GID,
        landlock: "not applied (the payload did not start)".into(),
        landlock_abi: None,
        seccomp: filter.name.clone(),
        network: match &spec.network {
            Network::None => {
                "none (only lo; no TCP bind or connect where Landlock restricts TCP)".into()
            }
            Network::Allow(a) => format!(
                "allow (only lo, plus cordon's proxy at {} for: {})",
                crate::net::proxy_url(),
                a.entries
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Network::Host => format!(
                "HOST NETWORK (--net host: {})",
                host_exposure
                    .as_deref()
                    .unwrap_or("shared with the host, unfiltered")
            ),
        },
        binds: spec
            .binds
            .iter()
            .map(|b| {
                let how = if b.writable {
                    "read-write"
                } else {
                    "read-only"
                };
                format!("{} <- {} ({how})", b.dst, b.src.display())
            })
            .collect(),
        rootfs: match &spec.rootfs {
            Rootfs::Host => "host (read-only /usr)".into(),
            Rootfs::Dir(d) => d.display().to_string(),
        },
        capabilities: "none".into(),
        host_views: HOST_VIEWS.into(),
        no_new_privs: true,
        core_dumps: core_dumps.describe(),
    };
    let io = supervise::Io {
        stdin: in_w,
        stdin_file,
        stdout: out_r,
        stderr: err_r,
        report: rep_r,
        stop,
        memory_watch: watch_limit.zip(watch_parent),
    };
    let mut ended = supervise::supervise(spec, child, io, prepared.cgroup.as_ref(), mask, started);
    // The helper has ended by now, normally (init needs what it sends before the program
    // starts), unless it hung or init failed first: supervision (the timeout, a signal) did
    // not wait for it, and neither does this.
    end_netns_helper(netns_helper);
    if let Err(errno) = go_sent {
        let reported = ended
            .msgs
            .iter()
            .any(|m| matches!(m, channel::Msg::SetupFailed { .. }));
        // How init ended, when known, is classify's to say (it died before the program
        // started, and said nothing).
        let known = matches!(
            ended.init_status,
            Some(
                nix::sys::wait::WaitStatus::Signaled(..)
                    | nix::sys::wait::WaitStatus::Exited(_, 1..)
            )
        );
        if !reported && !known && ended.internal_error.is_none() {
            ended.internal_error = Some(match &init_gone {
                Some(e) => format!(
                    "the sandbox's init exited before it was told to start and reported no reason (then cordon could not go on: {e}); run `cordon doctor`"
                ),
                None => format!(
                    "the sandbox's init exited before it was told to start ({errno}) and reported no reason; run `cordon doctor`"
                ),
            });
        }
    }
    let network = match proxy {
        Some(p) => p.finish(),
        None => {
            let mut r = crate::net::NetworkReport::plain(spec.network.mode());
            if let Network::Allow(a) = &spec.network {
                r.allow_list = a.entries.iter().map(|e| e.to_string()).collect();
            }
            r
        }
    };
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old_mask), None);
    // When cordon's exit will wait for the keeper anyway, the sandbox's mounts go now (the
    // sandbox is gone: init has been reaped), in the keeper, while cordon reads the figures
    // and removes the cgroup itself; otherwise both are left to the keeper, after cordon has
    // returned (keeper.rs).
    let teardown_now = helpers_are_waited_for();
    if teardown_now && let Some(k) = &keeper {
        k.release_mounts();
    }
    let metrics = prepared
        .cgroup
        .as_ref()
        .map(|c| c.metrics())
        .unwrap_or_default();
    match (prepared.cgroup, keeper) {
        (Some(cg), Some(k)) if !teardown_now => k.remove_cgroup(cg),
        (Some(cg), k) => {
            // Removed before the keeper is told it is done: a cordon killed in between
            // leaves the keeper its cleanup. init has been reaped, and every process of its
            // pid namespace with it: what is left in the cgroup is killed only if its
            // removal finds it busy.
            if let Err(e) = cg.remove_emptied() {
                eprintln!("cordon: warning: {e}");
            }
            drop(k);
        }
        (None, k) => drop(k),
    }
    let mut outcome = classify::outcome(spec, ended, metrics, prepared.report, isolation);
    outcome.network = Some(network);
    Ok(outcome)
}

/// Refuses, as the caller's to change, a limit the sandbox's init could not set: one above
/// cordon's own hard limit for it (an unprivileged caller's `ulimit -Hu`, say, under the
/// rlimit backend's --pids), which only a process with CAP_SYS_RESOURCE in the initial user
/// namespace may raise (root, unless its capabilities were cut). Probed by raising cordon's
/// own hard limit to the value: what the kernel allows there it allows init, which inherits
/// it.
fn check_hard_limits(spec: &SandboxSpec, rlimits: &[limits::Rlimit]) -> Result<(), LaunchError> {
    for r in rlimits {
        let Some(res) = limits::nix_resource(r.resource) else {
            continue;
        };
        let Ok((soft, hard)) = nix::sys::resource::getrlimit(res) else {
            continue;
        };
        let want = r.hard();
        if want <= hard || nix::sys::resource::setrlimit(res, soft, want).is_ok() {
            continue;
        }
        // The most that fits under the hard limit (CPU time's hard limit is a second above).
        let most = hard.saturating_sub(want - r.value);
        let fits = if most == 0 {
            "no value fits under it (0 would mean none)".to_string()
        } else {
            format!("give at most {most}")
        };
        let (key, what) = match r.resource {
            libc::RLIMIT_NPROC => ("pids", "processes (`ulimit -Hu`)"),
            libc::RLIMIT_NOFILE => ("open_files", "open files (`ulimit -Hn`)"),
            libc::RLIMIT_FSIZE => ("file_size", "bytes of file size (`ulimit -Hf` in KiB)"),
            libc::RLIMIT_CPU => ("cpu_time", "seconds of CPU time (`ulimit -Ht`)"),
            libc::RLIMIT_DATA => ("memory", "bytes of data (`ulimit -Hd` in KiB)"),
            _ => continue,
        };
        return Err(LaunchError::Spec(ParseError::new(
            &spec.limit_naming.name(key),
            &r.value.to_string(),
            &format!(
                "this is above cordon's own hard limit of {hard} {what}, which only a process with CAP_SYS_RESOURCE (root, usually) can raise; {fits}, or raise the hard limit (/etc/security/limits.conf, or `prlimit` as root)"
            ),
        )));
    }
    Ok(())
}

/// Whether init failed before its first go, asked when opening its user namespace or writing
/// its id maps failed: it wrote on the report pipe (before the first go it writes there only
/// to fail, then exits) or is exiting. A dying init refuses those /proc files from the moment
/// its memory is released, before its descriptors close (which can take a while: it held a
/// copy of cordon's memory, input files included), so an exiting init's pipe is waited for,
/// up to 5 s; an init that is not exiting is not waited for. If init ended, it is killed (in
/// case it has not finished exiting) and left for supervision to reap, which reads what it
/// reported.
fn init_ended(child: Pid, report: &std::os::fd::OwnedFd) -> bool {
    use std::os::fd::AsFd;
    let readable = |ms: u16| loop {
        let mut fds = [nix::poll::PollFd::new(
            report.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
            Ok(n) => break n > 0,
            Err(Errno::EINTR) => continue,
            Err(_) => break false,
        }
    };
    let ended = readable(0) || (is_exiting(child) && readable(5000));
    if ended {
        let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
    }
    ended
}

/// Whether process `pid` is exiting or has exited (PF_EXITING in `/proc/PID/stat`'s flags,
/// which the kernel sets first thing in the exit, or a zombie's state).
pub(super) fn is_exiting(pid: Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| stat_says_exiting(&t))
        .unwrap_or(false)
}

/// [`is_exiting`] from the text of `/proc/PID/stat`: after the command name (in parentheses,
/// and it may hold any byte), the state, then six fields on, the flags.
fn stat_says_exiting(stat: &str) -> Option<bool> {
    const PF_EXITING: u64 = 0x4;
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_ascii_whitespace();
    let state = fields.next()?;
    let flags: u64 = fields.nth(5)?.parse().ok()?;
    Some(matches!(state, "Z" | "X" | "x") || flags & PF_EXITING != 0)
}

/// Waits for the network namespace's helper to exit and reaps it (None). Gives up (the
/// helper back: supervision takes over, and [`end_netns_helper`] reaps it later) at a signal
/// to cordon (left pending for supervision's signalfd), at init's end, or at the run's
/// deadline: a helper stuck in the kernel must not hold them up.
fn reap_helper(
    helper: sys::NetnsHelper,
    init: Pid,
    signals: &SigSet,
    deadline: Instant,
) -> Option<sys::NetnsHelper> {
    let (Ok(helper_fd), Ok(init_fd)) = (sys::pidfd_open(helper.pid()), sys::pidfd_open(init))
    else {
        return Some(helper);
    };
    let Ok(sfd) = SignalFd::with_flags(signals, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
    else {
        return Some(helper);
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
        let mut fds = [
            PollFd::new(helper_fd.as_fd(), PollFlags::POLLIN),
            PollFd::new(init_fd.as_fd(), PollFlags::POLLIN),
            PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
        ];
        match nix::poll::poll(&mut fds, timeout) {
            Err(Errno::EINTR) => continue,
            Err(_) | Ok(0) => return Some(helper),
            Ok(_) => {}
        }
        let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
        if !ready(&fds[0]) {
            return Some(helper);
        }
        return helper.try_reap().err();
    }
}

/// Kills the network namespace's helper, if one is left, and reaps it without waiting (it
/// may be stuck in a system call, which SIGKILL ends only when the call returns). Its pid
/// cannot have been reused: cordon has not reaped it before. One that has not exited yet
/// keeps the memory it runs on (its handle is dropped, which leaks it).
fn end_netns_helper(helper: Option<sys::NetnsHelper>) {
    if let Some(helper) = helper {
        let _ = nix::sys::signal::kill(helper.pid(), Signal::SIGKILL);
        if let Err(left) = helper.try_reap() {
            keeper::reap_without_waiting(left.pid());
        }
    }
}

/// `--net host`: name lookups use the host's resolver configuration.
fn host_network_etc(ops: &mut [plan::Op]) {
    let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    for op in ops.iter_mut() {
        if let plan::Op::File { dst, contents } = op {
            if dst.as_path() == std::path::Path::new("/etc/resolv.conf") {
                *contents = resolv.clone();
            } else if dst.as_path() == std::path::Path::new("/etc/nsswitch.conf") {
                *contents = contents.replace("hosts: files\n", "hosts: files dns\n");
            }
        }
    }
}

fn write_maps(
    child: Pid,
    root_caller: bool,
    host_uid: u32,
    host_gid: u32,
) -> Result<(), LaunchError> {
    let one = |container, host| {
        [crate::spec::IdMap {
            container,
            host,
            size: 1,
        }]
    };
    // An unprivileged caller may only write gid_map once setgroups is denied. Root keeps
    // setgroups allowed so that init can clear the supplementary groups.
    write_id_maps(
        child,
        &one(SANDBOX_UID, host_uid),
        &one(SANDBOX_GID, host_gid),
        !root_caller,
    )
    .map_err(|(step, errno)| LaunchError::Sys {
        step,
        errno,
        hint: "; see `cordon doctor` for user namespace restrictions (AppArmor, sysctls)".into(),
    })
}

/// Writes the id maps of `child`'s new user namespace (each file once, as the kernel allows),
/// denying setgroups first when asked (an unprivileged writer must, before gid_map). The
/// sandbox's launch and cordon-oci's `create` both map through here. `Err`: the step and
/// errno.
pub fn write_id_maps(
    child: Pid,
    uids: &[crate::spec::IdMap],
    gids: &[crate::spec::IdMap],
    deny_setgroups: bool,
) -> Result<(), (&'static str, Errno)> {
    let proc = format!("/proc/{}", child.as_raw());
    let text = |m: &[crate::spec::IdMap]| -> String {
        m.iter()
            .map(|m| format!("{} {} {}\n", m.container, m.host, m.size))
            .collect()
    };
    let write = |file: &str, contents: String, step: &'static str| {
        std::fs::write(format!("{proc}/{file}"), contents)
            .map_err(|e| (step, Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))))
    };
    if deny_setgroups {
        write(
            "setgroups",
            "deny".into(),
            "deny setgroups in the new user namespace",
        )?;
    }
    write("uid_map", text(uids), "write the uid_map")?;
    write("gid_map", text(gids), "write the gid_map")
}

fn cstrings(items: impl Iterator<Item = String>) -> Result<Vec<CString>, LaunchError> {
    items
        .map(|s| {
            CString::new(s)
                .map_err(|_| ParseError::new("argument", "", "NUL bytes are not allowed").into())
        })
        .collect()
}

/// A name unique on this host for this run: pid plus time plus a counter.
fn run_id() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{:x}{:x}",
        t.as_nanos() as u64 & 0xffff_ffff_ffff,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    /// Only a PID 1 known to reap what it is handed lets cordon leave its helpers behind; an
    /// agent's server (or anything else) as PID 1 makes cordon wait for them.
    #[test]
    fn only_known_reaping_inits_spare_the_wait() {
        for comm in [
            "systemd",
            "init",
            "tini",
            "docker-init",
            "dumb-init",
            "catatonit",
            "sh",
            "bash",
        ] {
            assert!(super::init_reaps(comm), "{comm}");
        }
        for comm in [
            "",
            "python3",
            "node",
            "process_api",
            "uvicorn",
            "sleep",
            "systemd-journal",
            "Init",
        ] {
            assert!(!super::init_reaps(comm), "{comm}");
        }
    }

    /// The host network refused for want of a cgroup names the memory limit and the network
    /// as whoever set them does, and gives a request's author fixes a request can use.
    #[test]
    fn host_net_unwatched_names_the_limit_by_its_origin() {
        use crate::spec::LimitNaming;
        let msg = |n| super::LaunchError::HostNetUnwatched(n).to_string();
        let flags = msg(LimitNaming::Flags);
        assert!(
            flags.starts_with("--net host with a memory limit (--memory"),
            "{flags}"
        );
        assert!(
            flags.contains("--memory 0") && flags.contains("--allow-degraded socket-memory"),
            "{flags}"
        );
        let compile = msg(LimitNaming::CompileFlags);
        assert!(compile.contains("(--compile-memory"), "{compile}");
        let req = msg(LimitNaming::Request);
        assert!(req.starts_with("config.network \"host\" with a memory limit (config.memoryLimit, or this cordon's default)"), "{req}");
        assert!(
            req.contains("ask for another config.network")
                && req.contains("this cordon's operator"),
            "{req}"
        );
        assert!(
            !req.contains("--net host") && !req.contains("--memory"),
            "{req}"
        );
    }

    use super::*;

    #[test]
    fn an_exiting_process_is_told_from_its_stat() {
        // A running process (PF_FORKNOEXEC | PF_RANDOMIZE), the same with PF_EXITING, a
        // zombie, and a command name that holds ") Z 1 1 1 0 -1 4 ".
        let line = |comm: &str, state: &str, flags: u64| {
            format!("42 ({comm}) {state} 1 42 42 0 -1 {flags} 126 0 0 0 0 0 0 0 20 0 1 0 400837")
        };
        for (comm, state, flags, exiting) in [
            ("cordon", "S", 0x0040_0040, false),
            ("cordon", "R", 0x0040_0044, true),
            ("cordon", "Z", 0x0040_0040, true),
            ("a) Z 1 1 1 0 -1 4 ", "S", 0, false),
        ] {
            assert_eq!(
                stat_says_exiting(&line(comm, state, flags)),
                Some(exiting),
                "{comm} {state} {flags:x}"
            );
        }
        assert_eq!(stat_says_exiting("42 (cordon) S 1 42"), None);
        // This process is neither.
        assert!(!is_exiting(nix::unistd::getpid()));
    }
}

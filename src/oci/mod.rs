//! cordon as an OCI runtime: runc's commands over a state directory, no daemon.
//!
//! `create` clones the container's init (see [`init`]) into the config's namespaces, writes
//! its id maps, puts it in its cgroup, runs the createRuntime hooks, lets it build its root,
//! and returns once it waits on `exec.fifo`. The init is the container's process: `create`
//! exits and the caller (podman's conmon, containerd's shim: subreapers) waits on that pid.
//! `start` unblocks the fifo. Every later command reads `state.json` and checks the init's
//! pid against its start time ([`state`]).

pub mod apparmor;
pub mod cgroup;
pub mod exe;
pub mod hooks;
mod init;
pub mod state;

use crate::cli::oci::{CreateArgs, ExecArgs, LogFormat, OciCli, OciCommand, OciGlobal, UpdateArgs};
use crate::security::seccomp::oci as seccomp;
use crate::spec::oci::{self as config, Container, ContainerSetup, IdMap, OciConfigError};
use crate::sys::{self, CloneResult};
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use state::{StateError, Status, Stored};
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The newest OCI runtime-spec version cordon-oci implements.
pub const OCI_VERSION: &str = "1.2.0";
/// The `ociVersion` that `spec` writes.
pub const SPEC_VERSION: &str = "1.0.2-dev";

#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error(transparent)]
    Config(#[from] OciConfigError),
    #[error(transparent)]
    Seccomp(#[from] seccomp::OciSeccompError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Cgroup(#[from] cgroup::CgroupError),
    /// A field of linux.resources the cgroup does not take, and where it came from
    /// (config.json at `create`, the command line or --resources at `update`).
    #[error("{origin}: {source}")]
    Resource {
        origin: String,
        source: cgroup::CgroupError,
    },
    #[error(transparent)]
    Hook(#[from] hooks::HookError),
    #[error("cannot {step}: {errno}{hint}")]
    Sys {
        step: &'static str,
        errno: Errno,
        hint: String,
    },
    #[error("cannot {step} {path}: {source}")]
    Io {
        step: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("the container's init failed to {0}")]
    Init(String),
    /// `exec`'s process failed before its program ran ("step: why").
    #[error("cannot start the exec process: {0}")]
    ExecProcess(String),
    /// The process's program cannot run: `code` is 127 (not found) or 126 (not executable).
    #[error("{why}")]
    Exec { code: i32, why: String },
    #[error("cannot start the container's init: its clone helper failed to {0}")]
    CloneHelper(String),
    #[error("container {id} is {status}: {what}")]
    WrongStatus {
        id: String,
        status: Status,
        what: &'static str,
    },
    #[error("{0}")]
    Usage(String),
}

/// A linux.resources error from the cgroup code, said to come from `origin`; other cgroup
/// errors (of the host's cgroups) as they are.
fn resource_err(origin: &str) -> impl Fn(cgroup::CgroupError) -> OciError + '_ {
    move |e| match e {
        cgroup::CgroupError::Resource { .. } => OciError::Resource {
            origin: origin.to_string(),
            source: e,
        },
        other => other.into(),
    }
}

fn sys_err(step: &'static str) -> impl Fn(Errno) -> OciError {
    move |errno| OciError::Sys {
        step,
        errno,
        hint: String::new(),
    }
}

fn io_err(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> OciError {
    let path = path.display().to_string();
    move |source| OciError::Io { step, path, source }
}

/// Where a rootless caller's state goes without XDG_RUNTIME_DIR (below `cordon-EUID`).
const TMP: &str = "/tmp";

/// Global options, resolved.
struct Ctx {
    root: PathBuf,
    log: Option<PathBuf>,
    log_json: bool,
    debug: bool,
    systemd: bool,
    /// `--rootless` given as true.
    rootless_flag: bool,
    /// The root is below `/tmp/cordon-EUID` (no --root, no XDG_RUNTIME_DIR): that base must
    /// be checked before the state is used ([`state::private_tmp_dir`]).
    tmp_base: bool,
}

impl Ctx {
    fn new(g: &OciGlobal) -> Ctx {
        let mut tmp_base = false;
        let root = g.root.clone().unwrap_or_else(|| {
            if !rootless() {
                PathBuf::from("/run/cordon")
            } else {
                let base = std::env::var_os("XDG_RUNTIME_DIR")
                    .filter(|d| !d.is_empty())
                    .map(PathBuf::from)
                    .unwrap_or_else(|| {
                        tmp_base = true;
                        Path::new(TMP).join(format!("cordon-{}", nix::unistd::geteuid()))
                    });
                base.join("cordon")
            }
        });
        Ctx {
            root,
            log: g.log.clone(),
            log_json: g.log_format == LogFormat::Json,
            debug: g.debug,
            systemd: g.systemd_cgroup,
            rootless_flag: g.rootless.as_deref() == Some("true"),
            tmp_base,
        }
    }

    fn log(&self, level: &str, msg: &str) {
        if level == "debug" && !self.debug {
            return;
        }
        let Some(path) = &self.log else {
            if level == "debug" {
                eprintln!("cordon-oci: {msg}");
            }
            return;
        };
        let line = if self.log_json {
            serde_json::json!({"level": level, "msg": msg, "time": now_rfc3339()}).to_string()
        } else {
            format!("{} {level}: {msg}", now_rfc3339())
        };
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

fn now_rfc3339() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = t.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        t.subsec_nanos()
    )
}

/// `cordon-oci ARGS` / `cordon oci ARGS`: returns the exit code.
pub fn main(cli: OciCli) -> i32 {
    let ctx = Ctx::new(&cli.global);
    // Before cordon-oci opens anything: a descriptor number --preserve-fds names but the
    // caller did not open would be taken by one of cordon-oci's own (exec.fifo, a pipe to
    // the init) and handed to the container's program.
    // Socket activation (LISTEN_FDS) passes descriptors from 3 on to create and run, as
    // runc; --preserve-fds counts those after them.
    let (listen, preserve) = match &cli.command {
        OciCommand::Create(a) | OciCommand::Run { create: a, .. } => (listen_fds(), a.preserve_fds),
        OciCommand::Exec(a) => (0, a.preserve_fds),
        _ => (0, 0),
    };
    if let Err(e) = check_listen_fds(listen).and_then(|()| check_preserved_fds(preserve, listen)) {
        ctx.log("error", &e);
        eprintln!("cordon-oci: {e}");
        return 1;
    }
    // A state root under the shared /tmp is vetted before anything reads or writes it (the
    // commands that keep no state do not need it).
    if ctx.tmp_base
        && !matches!(cli.command, OciCommand::Spec { .. } | OciCommand::Features)
        && let Err(e) = state::private_tmp_dir(Path::new(TMP), nix::unistd::geteuid().as_raw())
    {
        ctx.log("error", &e.to_string());
        eprintln!("cordon-oci: {e}");
        return 1;
    }
    // Commands that put a process into a container first move cordon-oci into a sealed
    // in-memory copy of itself (CVE-2019-5736): a container process can then reach only
    // that copy through /proc/PID/exe, never the host's binary.
    if matches!(
        cli.command,
        OciCommand::Create(_) | OciCommand::Run { .. } | OciCommand::Exec(_)
    ) && let Err(e) = exe::run_from_sealed_copy(empty_layer(&ctx.root).as_deref())
    {
        ctx.log("error", &e.to_string());
        eprintln!("cordon-oci: {e}");
        return 1;
    }
    match dispatch(&ctx, cli.command) {
        Ok(code) => code,
        Err(e) => {
            ctx.log("error", &e.to_string());
            eprintln!("cordon-oci: {e}");
            match e {
                OciError::Exec { code, .. } => code,
                _ => 1,
            }
        }
    }
}

/// `--preserve-fds n`: descriptors 3 to 3+n-1 must all be open in cordon-oci as it starts
/// (the caller's, passed on to the container's program).
/// How many socket-activation descriptors (from 3 on) systemd passed this process, as runc's
/// go-systemd activation.Files reads them: `LISTEN_FDS`, when `LISTEN_PID` is this
/// process's pid (they were meant for it, not for an ancestor); else none.
fn listen_fds() -> i32 {
    let ours = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
        == Some(std::process::id());
    let n = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.parse::<i32>().ok())
        .unwrap_or(0);
    if ours && n > 0 { n } else { 0 }
}

/// The `n` socket-activation descriptors must be open: else one cordon-oci opens itself
/// would take a number and be handed to the container.
fn check_listen_fds(n: i32) -> Result<(), String> {
    for fd in 3..3i64.saturating_add(i64::from(n)).min(i64::from(i32::MAX)) as i32 {
        if !sys::fd_is_open(fd) {
            return Err(format!(
                "LISTEN_FDS={n} (socket activation): descriptor {fd} is not open; fix the LISTEN_FDS the caller sets, or unset LISTEN_PID"
            ));
        }
    }
    Ok(())
}

/// `--preserve-fds n`: descriptors from `3 + listen` (after the socket-activation ones) on.
fn check_preserved_fds(n: i32, listen: i32) -> Result<(), String> {
    if n < 0 {
        return Err(format!(
            "--preserve-fds {n}: give a count of descriptors, 0 or more"
        ));
    }
    let first = 3 + i64::from(listen);
    let end = first + i64::from(n);
    let max = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft.min(i64::MAX as u64) as i64);
    if end > max {
        return Err(format!(
            "--preserve-fds {n}: descriptors up to {} exceed this process's limit of open files ({max})",
            end - 1
        ));
    }
    for fd in first as i32..end as i32 {
        if !sys::fd_is_open(fd) {
            return Err(format!(
                "--preserve-fds {n}: descriptor {fd} is not open; pass a count of descriptors the caller opened, from {first} on"
            ));
        }
    }
    Ok(())
}

/// `ROOT/.empty`: an empty directory of ours, the bottom layer of the read-only overlay
/// cordon-oci re-executes through ([`exe::overlay_view`]). `None` when it cannot be made
/// or is not as expected: cordon-oci then makes a sealed memfd copy instead.
fn empty_layer(root: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let d = root.join(".empty");
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&d);
    let m = std::fs::symlink_metadata(&d).ok()?;
    let ours = m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw();
    let empty = std::fs::read_dir(&d).ok()?.next().is_none();
    (ours && empty).then_some(d)
}

fn dispatch(ctx: &Ctx, cmd: OciCommand) -> Result<i32, OciError> {
    match cmd {
        OciCommand::Create(a) => {
            create(ctx, &a, false)?;
            Ok(0)
        }
        OciCommand::Start { id } => start(ctx, &id).map(|()| 0),
        OciCommand::State { id } => {
            let (dir, s) = state::load(&ctx.root, &id)?;
            let st = s.state_output(state::status(&dir, &s));
            println!("{}", serde_json::to_string_pretty(&st).unwrap_or_default());
            Ok(0)
        }
        OciCommand::Kill { id, signal, all } => kill(ctx, &id, &signal, all).map(|()| 0),
        OciCommand::Delete { id, force } => delete(ctx, &id, force).map(|()| 0),
        OciCommand::Run {
            create: a,
            detach,
            keep,
        } => run(ctx, &a, detach, keep),
        OciCommand::Exec(a) => exec(ctx, &a),
        OciCommand::List { format, quiet } => list(ctx, &format, quiet).map(|()| 0),
        OciCommand::Ps {
            id,
            format,
            ps_args,
        } => ps(ctx, &id, &format, &ps_args).map(|()| 0),
        OciCommand::Spec { bundle } => spec(&bundle, ctx.rootless_flag).map(|()| 0),
        OciCommand::Features => {
            println!(
                "{}",
                serde_json::to_string_pretty(&features()).unwrap_or_default()
            );
            Ok(0)
        }
        OciCommand::Pause { id } => pause(ctx, &id, true).map(|()| 0),
        OciCommand::Resume { id } => pause(ctx, &id, false).map(|()| 0),
        OciCommand::Update(a) => update(ctx, &a).map(|()| 0),
        OciCommand::Events {
            id,
            stats,
            interval,
        } => events(ctx, &id, stats, &interval).map(|()| 0),
        OciCommand::Unsupported { .. } => Err(OciError::Usage(
            "checkpoint and restore are not implemented: cordon-oci does not save or restore \
             a container's processes (runc and crun do it through CRIU); use one of them as \
             the runtime for containers you checkpoint (`podman --runtime runc`)"
                .into(),
        )),
    }
}

/// A created container (the init is our child until we exit).
struct Created {
    pid: Pid,
    dir: PathBuf,
}

/// Removes the state directory (and cgroups) of a create that failed half-way.
struct Cleanup {
    dir: Option<PathBuf>,
    cgroups: Vec<PathBuf>,
    child: Option<Pid>,
    /// The OOM kills the cgroup had counted before the init joined it (a reused directory
    /// keeps its count), and whether the config limits memory: for [`Cleanup::init_death`].
    oom_before: u64,
    memory_limited: bool,
}

impl Cleanup {
    /// How the container's init died, when it closed its report without a word: reaped here
    /// (within a second), so the guard no longer signals its pid.
    fn init_death(&mut self) -> String {
        use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
        let Some(pid) = self.child else {
            return "it is gone".into();
        };
        for _ in 0..100 {
            let status = match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
                Ok(s) => s,
                Err(e) => {
                    // ECHILD: reaped already (SIGCHLD ignored by the caller); its pid may
                    // be another process's by now.
                    self.child = None;
                    return format!("it closed its report without one (wait: {e})");
                }
            };
            self.child = None;
            let oom = cgroup::oom_kills(&self.cgroups) > self.oom_before;
            return death_of(status, oom.then_some(self.memory_limited));
        }
        "it closed its report without one".into()
    }
}

/// Words for how a process ended (`status`), for an error; `oom`: its memory cgroup counted
/// an OOM kill meanwhile, with whether the config limits the memory.
fn death_of(status: nix::sys::wait::WaitStatus, oom: Option<bool>) -> String {
    use nix::sys::wait::WaitStatus;
    match status {
        WaitStatus::Signaled(_, Signal::SIGKILL, _) if oom == Some(true) => "the kernel's OOM killer killed it: linux.resources.memory.limit is below what it needs to start (a few MiB); raise the limit".into(),
        WaitStatus::Signaled(_, Signal::SIGKILL, _) if oom == Some(false) => {
            "the kernel's OOM killer killed it (the host is out of memory)".into()
        }
        WaitStatus::Signaled(_, sig, _) => format!("it was killed by {sig}"),
        WaitStatus::Exited(_, code) => format!("it exited with status {code} without a report"),
        other => format!("it ended ({other:?}) without a report"),
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(pid) = self.child {
            let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(pid, None);
        }
        let _ = cgroup::remove(&self.cgroups);
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A scope a systemd manager gave ([`systemd_scope`]): the container's cgroup (its leaf of
/// the scope, below the hierarchy's root) and the unit.
type ScopeGiven = (PathBuf, state::SystemdScope);

/// Why a systemd manager gave no scope ([`systemd_scope`]).
#[derive(Debug)]
struct NoScope {
    why: String,
    /// The manager was reached and refused, or its job did not put cordon-oci in the unit:
    /// the unit may exist, so its cgroup is not cordon-oci's to make. False when it was not
    /// asked or could not be reached.
    answered: bool,
}

impl std::fmt::Display for NoScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

impl NoScope {
    fn unasked(why: String) -> NoScope {
        NoScope {
            why,
            answered: false,
        }
    }
}

/// The leaf of a `--systemd-cgroup` scope that holds cordon-oci itself while it runs (its
/// `create`, and a foreground `run` until the container exits).
const SCOPE_RUNTIME_LEAF: &str = "cordon-oci";
/// The leaf of that scope that is the container's cgroup.
const SCOPE_CONTAINER_LEAF: &str = "container";
/// How long create waits for a scope of the same name to go away.
const SCOPE_EXISTS_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// An unprivileged `--systemd-cgroup` create on a pure cgroup v2 host, as rootless podman
/// runs its runtime on a systemd host: the container's unit (`prefix-name.scope` in `slice`,
/// from `slice:prefix:name`; an empty slice is `user.slice`, as with runc rootless) becomes a
/// transient scope of the caller's systemd user manager, as runc and crun make it, delegated
/// to the caller (Delegate=yes), who may create cgroups only in such a subtree. cordon-oci
/// asks for it holding itself, moves itself into the scope's leaf [`SCOPE_RUNTIME_LEAF`] (a
/// cgroup with processes cannot hand controllers to its children) and returns the
/// container's cgroup, the leaf [`SCOPE_CONTAINER_LEAF`], below the hierarchy's root. The
/// limits go on that leaf: systemd sets the scope's own limit files from the unit's
/// properties, and may set them again. `delete` asks the manager to stop the scope
/// ([`stop_scope`]), which removes its cgroup with the leaves.
///
/// None when there is no such cgroupsPath; Some(Err(NoScope)) when the manager gave no scope
/// (create then fails if the config has limits, else runs without a cgroup).
///
/// `system`: a root cordon-oci on a host booted with systemd asks the system manager (on the
/// system bus) the same way, as runc and crun do, so that the container's scope is a unit
/// systemd knows, not a cgroup made behind its back in a slice it manages (whose controllers
/// it may take away when it next realizes the slice). An empty slice is then `system.slice`.
fn systemd_scope(
    ctx: &Ctx,
    cgroups_path: Option<&str>,
    id: &str,
    system: bool,
) -> Result<Option<Result<ScopeGiven, NoScope>>, OciError> {
    let Some(p) = cgroups_path.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    // runc's rootless default slice; systemd_unit's default is the system manager's.
    let p = &if p.starts_with(':') && !system {
        format!("user.slice{p}")
    } else {
        p.to_string()
    };
    let (slice, unit) = cgroup::systemd_unit(p).map_err(|why| {
        resource_err("config.json")(cgroup::CgroupError::Resource {
            field: "linux.cgroupsPath".into(),
            why: format!("{p:?} (--systemd-cgroup): {why}"),
        })
    })?;
    if !unit.ends_with(".scope") {
        return Ok(Some(Err(NoScope::unasked(format!(
            "linux.cgroupsPath {p:?} names a slice as the container's unit; cordon-oci asks the systemd manager for scopes only (give slice:prefix:name)"
        )))));
    }
    // The manager finds the scope's process by its pid in the manager's pid namespace, and
    // its cgroup is read back from /proc/self/cgroup: both hold only in the host's pid and
    // cgroup namespaces (a nested pid namespace's pid names another process there).
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let nspids = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map_or(0, |v| v.split_whitespace().count());
    if nspids != 1 {
        return Ok(Some(Err(NoScope::unasked(
            "cordon-oci runs in a pid namespace of its own (/proc/self/status NSpid), where the systemd manager cannot name it".into(),
        ))));
    }
    let pid = std::process::id();
    let scope = if system {
        crate::limits::SystemdUserScope::system_from_env()
    } else {
        crate::limits::SystemdUserScope::from_env()
    };
    let description = format!("cordon-oci container {id}");
    // A scope of the same name that is still going away (a container deleted and created
    // again at once, as `podman restart` does) is waited for, briefly.
    let deadline = std::time::Instant::now() + SCOPE_EXISTS_WAIT;
    let obtained = loop {
        match scope.obtain_unit(&unit, pid, Some(&slice), &description) {
            Ok(o) => break o,
            // busctl prints the manager's message ("Unit NAME already exists."), not the
            // error's name (org.freedesktop.systemd1.UnitExists).
            Err(why)
                if (why.contains("already exists") || why.contains("UnitExists"))
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(why) => {
                // Not reached at all (no bus, no busctl, nothing listening), or reached and
                // refused (a unit still there, a failed job, no move into it).
                let answered = crate::limits::UserScope::reachable(&scope).is_ok()
                    && !why.contains("Failed to connect to bus");
                return Ok(Some(Err(NoScope {
                    why: format!("cannot start the scope {unit}: {why}"),
                    answered,
                })));
            }
        }
    };
    let Some(scope_rel) = obtained
        .proc_self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| PathBuf::from(p.trim().trim_start_matches('/')))
        .filter(|p| {
            p.components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
        })
    else {
        return Ok(Some(Err(NoScope {
            why: format!(
                "cordon-oci was moved into {unit}, but /proc/self/cgroup has no cgroup v2 path below the hierarchy's root (a cgroup namespace?)"
            ),
            answered: true,
        })));
    };
    ctx.log(
        "debug",
        &format!(
            "--systemd-cgroup: in the scope {unit} of the {} manager (/{})",
            if system { "system" } else { "user" },
            scope_rel.display()
        ),
    );
    for leaf in cgroup::dirs_for(&scope_rel.join(SCOPE_RUNTIME_LEAF))? {
        match std::fs::create_dir(&leaf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err("create cordon-oci's leaf of its scope", &leaf)(e)),
        }
        let procs = leaf.join("cgroup.procs");
        std::fs::write(&procs, pid.to_string())
            .map_err(io_err("move cordon-oci into its leaf of the scope", &procs))?;
    }
    Ok(Some(Ok((
        scope_rel.join(SCOPE_CONTAINER_LEAF),
        state::SystemdScope { unit, system },
    ))))
}

/// Whether the host was booted with systemd as its system manager (sd_booted(3): the
/// directory /run/systemd/system exists).
fn systemd_booted() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// Not root of the host: another uid, or uid 0 of a user namespace (rootless podman runs
/// its runtime inside one). Such a caller usually may not create cgroups or use /run.
fn rootless() -> bool {
    !nix::unistd::geteuid().is_root() || !in_initial_userns()
}

/// Whether this process is in the host's user namespace (its uid_map is the identity map).
fn in_initial_userns() -> bool {
    std::fs::read_to_string("/proc/self/uid_map")
        .map(|m| {
            let f: Vec<&str> = m.split_whitespace().collect();
            f == ["0", "0", "4294967295"]
        })
        .unwrap_or(true)
}

/// For a caller that cannot enforce linux.resources.devices: an error naming the first node
/// of linux.devices (bound into the container from the host) that the rules would deny it
/// to read or write.
/// A config that binds a host directory over /dev brings that directory's nodes, and
/// cordon-oci makes none of linux.devices there (as runc, which does not look): each device
/// the bound directory lacks, or holds as another node (a USB or input device renumbered
/// since an engine wrote the config with `-v /dev:/dev`), is a warning naming it, not a
/// silent difference. Symlinks are followed, as the bind follows them.
fn bound_dev_mismatches(c: &Container) -> Vec<String> {
    let Some(src) = c
        .setup()
        .mounts
        .iter()
        .rev()
        .find(|m| m.dst == Path::new("/dev") && m.kind == "bind")
        .map(|m| &m.src)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, d) in c.setup().devices.iter().enumerate() {
        let host = src.join(d.path.strip_prefix("/dev").unwrap_or(&d.path));
        let why = match nix::sys::stat::stat(&host) {
            Err(e) => format!("{} is not there ({e})", host.display()),
            Ok(st) if !init::node_matches(&st, d.kind, d.major, d.minor) => format!(
                "{} is device {}:{} (mode {:o}), not the {} {}:{} asked for",
                host.display(),
                nix::sys::stat::major(st.st_rdev),
                nix::sys::stat::minor(st.st_rdev),
                st.st_mode,
                d.kind,
                d.major,
                d.minor
            ),
            Ok(_) => continue,
        };
        out.push(format!(
            "linux.devices[{i}] {}: a mount binds {} over /dev, and cordon-oci makes no node there: {why}; the container sees what the bound directory holds (recreate the container, or bind the node itself)",
            d.path.display(),
            src.display()
        ));
    }
    out
}

fn unenforced_device_rules(
    c: &config::Container,
    allowlist: &[cgroup::DeviceRule],
) -> Result<(), OciError> {
    for d in &c.setup().devices {
        let kind = match d.kind {
            'b' => 'b',
            'c' | 'u' => 'c',
            _ => continue,
        };
        // (No real node has numbers past u32: only wildcard rules can match such a one.)
        let major = u32::try_from(d.major).unwrap_or(u32::MAX);
        let minor = u32::try_from(d.minor).unwrap_or(u32::MAX);
        for (bit, what) in [(cgroup::ACC_READ, "read"), (cgroup::ACC_WRITE, "write")] {
            if !cgroup::device_allowed(allowlist, kind, bit, major, minor) {
                return Err(OciError::Usage(format!(
                    "config.json: `linux.resources.devices` denies {what} access to {} ({kind} {major}:{minor}, in linux.devices), and an unprivileged cordon-oci cannot enforce device rules (the node would be reached with the caller's file permissions): allow that access in linux.resources.devices, leave the node out of linux.devices, or run cordon-oci as root",
                    d.path.display()
                )));
            }
        }
    }
    Ok(())
}

fn create(ctx: &Ctx, a: &CreateArgs, for_run: bool) -> Result<Created, OciError> {
    if let Some(n) = sys::thread_count().filter(|&n| n > 1) {
        return Err(OciError::Usage(format!(
            "cordon-oci must create containers from a single-threaded process; this one has {n} threads"
        )));
    }
    let bundle = std::fs::canonicalize(&a.bundle).map_err(io_err("open the bundle", &a.bundle))?;
    let dir = state::create_dir(&ctx.root, &a.id)?;
    let mut cleanup = Cleanup {
        dir: Some(dir.clone()),
        cgroups: Vec::new(),
        child: None,
        oom_before: 0,
        memory_limited: false,
    };
    let mut c = Container::load(&bundle)?;
    c.setup_mut().new_keyring = !a.no_new_keyring;
    c.setup_mut().apparmor_profile =
        apparmor::to_apply(c.setup().apparmor_profile.as_deref()).map_err(OciError::Usage)?;
    // Socket activation, as runc: the descriptors go to the container's process, before
    // those of --preserve-fds, with LISTEN_FDS (and LISTEN_PID, set by the init below).
    let listen = listen_fds();
    if listen > 0 {
        crate::spec::set_env(&mut c.sandbox.env, "LISTEN_FDS", &listen.to_string());
    }
    c.sandbox.rootfs = crate::spec::Rootfs::Dir(
        std::fs::canonicalize(c.rootfs()).map_err(io_err("open root.path", c.rootfs()))?,
    );
    ContainerSetup::check_container_spec(&c.sandbox).map_err(OciError::Usage)?;
    c.setup().caps.check_known(kernel_cap)?;
    refuse_own_namespace_sysctls(&c)?;
    ctx.log("debug", &format!("create {}: config checked", a.id));
    let filter = match &c.setup().seccomp {
        Some(s) => {
            let f = seccomp::compile(s)?;
            if !f.unknown.is_empty() {
                ctx.log(
                    "debug",
                    &format!(
                        "seccomp: syscalls unknown on every filtered architecture, skipped: {}",
                        f.unknown.join(" ")
                    ),
                );
            }
            Some(f)
        }
        None => None,
    };
    let console = match (&a.console_socket, c.setup().terminal) {
        (Some(p), true) => {
            let s = std::os::unix::net::UnixStream::connect(p)
                .map_err(io_err("connect to --console-socket", p))?;
            Some(OwnedFd::from(s))
        }
        (None, true) if !for_run => {
            return Err(OciError::Usage(
                "process.terminal is true: give --console-socket (or set terminal to false)".into(),
            ));
        }
        (None, true) => {
            return Err(OciError::Usage(
                "process.terminal is true: `run` without --console-socket cannot give the container a terminal; set terminal to false".into(),
            ));
        }
        _ => None,
    };

    // The cgroup and its limits exist before any process of the container does.
    let resources = c.setup().resources.clone();
    let v2_own = cgroup::own_v2_cgroup()?;
    // `--systemd-cgroup` on a pure v2 host: the scope from the caller's user manager
    // (rootless), or from the system manager when the host was booted with systemd (root).
    let system_manager = !rootless() && systemd_booted();
    let mut user_scope = if ctx.systemd && v2_own.is_some() && (rootless() || system_manager) {
        systemd_scope(ctx, c.cgroups_path.as_deref(), &a.id, system_manager)?
    } else {
        None
    };
    // Root with no manager to ask (a host not booted with systemd, where runc refuses
    // --systemd-cgroup; or a cgroup v1 or hybrid one): the cgroup is made at the unit's
    // place, as systemd would name it; said, since no systemd knows it.
    if ctx.systemd && !rootless() && user_scope.is_none() {
        let why = if !systemd_booted() {
            "this host was not booted with systemd (no /run/systemd/system)"
        } else if v2_own.is_none() {
            "cordon-oci asks systemd for a scope on a pure cgroup v2 host only"
        } else {
            "linux.cgroupsPath names no unit (slice:prefix:name)"
        };
        let msg = format!(
            "--systemd-cgroup: {why}; the container's cgroup is made directly where systemd would put its unit, unknown to systemd"
        );
        ctx.log("warning", &msg);
        eprintln!("cordon-oci: warning: {msg}");
    }
    // Root makes the cgroup itself when the system manager gives none (as before it asked):
    // said, since systemd does not know that cgroup.
    if system_manager && let Some(Err(no)) = &user_scope {
        // A manager that answered may hold the unit: its cgroup is systemd's, not ours.
        if no.answered {
            return Err(OciError::Usage(format!(
                "--systemd-cgroup: the systemd system manager gave no scope for the container: {}; see `journalctl -u` with the unit, or run without --systemd-cgroup",
                no.why
            )));
        }
        let msg = format!(
            "--systemd-cgroup: no scope from the systemd system manager ({}); the container's cgroup is made directly at the cgroupsPath's place, unknown to systemd",
            no.why
        );
        ctx.log("warning", &msg);
        eprintln!("cordon-oci: warning: {msg}");
        user_scope = None;
    }
    let rel = match &user_scope {
        Some(Ok((rel, _))) => rel.clone(),
        _ => cgroup::relative_path(
            c.cgroups_path.as_deref(),
            &a.id,
            ctx.systemd,
            v2_own.as_deref(),
        )?,
    };
    // Every hierarchy, cpuset included (seeded from its parent), as runc: a later
    // `update --cpuset-cpus` (podman update) then has the container's own cpuset to write.
    let hugetlb = resources
        .as_ref()
        .and_then(|r| r.hugepage_limits().as_ref())
        .is_some_and(|h| !h.is_empty());
    let mut dirs = cgroup::dirs_for_limits(&rel, hugetlb)?;
    // systemd's named hierarchy, apart: joined only where it can be made (see below).
    let named = match cgroup::named_hierarchy()? {
        Some(mp) => {
            let n = dirs.iter().position(|d| d.starts_with(&mp));
            n.map(|i| dirs.remove(i))
        }
        None => None,
    };
    // What a cgroup must hold: fields of 0 are unset (as cgroup::apply reads them), and a
    // `memory` or `cpu` object with nothing set in it asks for nothing.
    let set = |v: serde_json::Value| v.as_object().is_some_and(|o| !o.is_empty());
    let has_limits = resources
        .as_ref()
        .map(cgroup::zero_is_unset)
        .is_some_and(|r| {
            r.memory()
                .is_some_and(|m| set(serde_json::to_value(m).unwrap_or_default()))
                || r.cpu()
                    .as_ref()
                    .is_some_and(|c| set(serde_json::to_value(c).unwrap_or_default()))
                || r.pids().is_some()
                || r.unified().as_ref().is_some_and(|u| !u.is_empty())
                || r.block_io().as_ref().is_some_and(cgroup::block_io_asks)
                || r.hugepage_limits().as_ref().is_some_and(|h| !h.is_empty())
                || r.network().is_some()
                || r.rdma().is_some()
        });
    if let Some(Err(why)) = &user_scope {
        if has_limits {
            return Err(OciError::Usage(format!(
                "the limits in linux.resources need a cgroup, and an unprivileged --systemd-cgroup \
                 gets it from the caller's systemd user manager: {why}; run it in a login \
                 session whose user manager is reachable (XDG_RUNTIME_DIR with its `bus`, or \
                 DBUS_SESSION_BUS_ADDRESS), or without --systemd-cgroup from a delegated cgroup \
                 (`systemd-run --user --scope -p Delegate=yes`), or without limits"
            )));
        }
        ctx.log(
            "debug",
            &format!("rootless --systemd-cgroup: no scope from the user manager ({why})"),
        );
    }
    let cgroup2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    // The device rules are an allowlist (cgroup::device_allowlist), enforced by the v1
    // devices files or a v2 eBPF device program: apart from the other limits, since an
    // unprivileged cordon-oci can do neither (writing the files takes CAP_SYS_ADMIN, loading
    // a program CAP_BPF, both in the host's user namespace).
    let mut resources = resources;
    let device_rules = resources
        .as_mut()
        .and_then(|r| {
            let d = r.devices().clone();
            r.set_devices(None);
            d
        })
        .unwrap_or_default();
    let allowlist = cgroup::device_allowlist(&device_rules).map_err(resource_err("config.json"))?;
    for msg in bound_dev_mismatches(&c) {
        ctx.log("warning", &msg);
        eprintln!("cordon-oci: warning: {msg}");
    }
    if rootless() {
        // Its container is in a user namespace other than the host's, so it cannot make
        // device nodes: it reaches the default ones and those of linux.devices (the host's
        // nodes, bound), with the caller's file permissions. Leaving the rules out changes
        // nothing only if they allow those nodes; a node they deny would be open to it.
        unenforced_device_rules(&c, &allowlist)?;
        if !device_rules.is_empty() {
            let msg = "linux.resources.devices: not enforced (an unprivileged cordon-oci can neither load a cgroup v2 device program nor write cgroup v1's device rules); every node of linux.devices is allowed by them, and the container's user namespace keeps it from making others (a device node inside a bind mount is reached with the caller's own file permissions)";
            ctx.log("warning", msg);
            eprintln!("cordon-oci: warning: {msg}");
        }
    }
    // The rules the cgroup enforces, kept in the state for `update` (config.json may have
    // changed by then).
    let mut enforced_devices = None;
    match cgroup::create(&dirs) {
        Ok(()) => {
            // As runc, which ignores a failure to join it: a host whose name=systemd
            // hierarchy is not writable still runs the container, in its caller's cgroup there.
            if let Some(n) = named {
                match cgroup::create(std::slice::from_ref(&n)) {
                    Ok(()) => dirs.push(n),
                    Err(e) => ctx.log("debug", &format!("name=systemd: {e}; left out")),
                }
            }
            cleanup.cgroups = dirs.clone();
            if let Some(r) = &resources {
                cgroup::apply(&dirs, r).map_err(resource_err("config.json"))?;
                cleanup.memory_limited = cgroup::zero_is_unset(r)
                    .memory()
                    .is_some_and(|m| m.limit().is_some_and(|l| l > 0));
            }
            cleanup.oom_before = cgroup::oom_kills(&dirs);
            if !rootless() {
                cgroup::apply_device_allowlist(&dirs, &allowlist)
                    .map_err(resource_err("config.json"))?;
                enforced_devices = Some(allowlist);
            }
        }
        // An unprivileged user usually may not create cgroups: fine when no limit was asked.
        Err(e) if rootless() && !has_limits => {
            // As runc rootless. A cgroupsPath the config named is not where the container
            // runs, which its caller may look for: said in the log as a warning.
            let level = if c.cgroups_path.is_some() {
                "warning"
            } else {
                "debug"
            };
            ctx.log(level, &format!("rootless: running without a cgroup ({e})"));
        }
        Err(e) if rootless() => {
            let why = if v2_own.is_some() {
                "an unprivileged cordon-oci creates the container's cgroup next to its own cgroup \
                 (or at linux.cgroupsPath), in a subtree that must be delegated to it: start it in \
                 a delegated scope (`systemd-run --user --scope -p Delegate=yes cordon-oci ...`), \
                 or set linux.cgroupsPath to a cgroup you own"
            } else {
                "cgroup v1 cannot be delegated to an unprivileged user: run the container as \
                 root, or without linux.resources limits"
            };
            return Err(OciError::Usage(format!(
                "{e}: the limits in linux.resources need a cgroup; {why}"
            )));
        }
        Err(e) => return Err(e.into()),
    }

    let fifo_path = state::fifo_path(&dir);
    nix::unistd::mkfifo(&fifo_path, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .map_err(sys_err("create exec.fifo"))?;
    let fifo = nix::fcntl::open(
        &fifo_path,
        nix::fcntl::OFlag::O_RDWR | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(sys_err("open exec.fifo"))?;

    // Namespaces given by path: opened now, joined by the clone helper (below), in runc's
    // order ([`join_in_order`]).
    let mut join = Vec::new();
    for (index, ns) in c.setup().namespaces.iter().enumerate() {
        let Some(p) = &ns.path else { continue };
        let fd = nix::fcntl::open(
            p,
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|errno| OciError::Sys {
            step: "open a namespace to join",
            errno,
            hint: format!(" ({}: linux.namespaces[{}].path)", p.display(), ns.name),
        })?;
        // Checked on the open file, the one joined: not a path that could change between.
        refuse_own_namespace(&c, index, ns, &fd)?;
        let joined = Joined {
            flag: ns.flag,
            fd,
            what: format!(
                "{} namespace {} (linux.namespaces[{}].path)",
                ns.name,
                p.display(),
                ns.name
            ),
        };
        if ns.flag == libc::CLONE_NEWUSER {
            join.insert(0, joined);
        } else {
            join.push(joined);
        }
    }

    let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
    let (go_r, go_w) = nix::unistd::pipe2(cloexec).map_err(sys_err("create the go pipe"))?;
    let (ready_r, ready_w) =
        nix::unistd::pipe2(cloexec).map_err(sys_err("create the ready pipe"))?;
    let flags = c.setup().new_namespaces() & !libc::CLONE_NEWCGROUP;
    // Namespaces given by path are joined before the new ones are made, as runc does: a
    // joined user namespace must own them (a mount namespace owned by another one refuses
    // the container's root its mounts, a uts one its hostname), and a namespace owned by the
    // caller's user namespace cannot be joined from a new one (no capability there). The
    // clone is then made by a short-lived helper that joins them first (clone_after_joining);
    // a joined pid namespace applies to the helper's children only, so the helper's clone
    // still returns the init's pid as the host sees it.
    // The caller's own user namespace, as rootless podman may name it, is not joined: setns
    // refuses it, and the namespaces are made in it anyway.
    join.retain(|j| j.flag != libc::CLONE_NEWUSER || !is_own_user_ns(&j.fd));
    let by_helper = !join.is_empty();
    // Without a new user namespace the init moves itself into the cgroup, which costs no
    // RCU grace period on cgroup v1 (see cgroup::attach_self); in a new one it may lack
    // the right to, so the parent moves it. Through the helper, the helper moves itself
    // first, and the init is born in the cgroup.
    let self_attach = !cleanup.cgroups.is_empty() && flags & libc::CLONE_NEWUSER == 0 && !by_helper;
    let (attached_r, attached_w) = if self_attach {
        let (r, w) = nix::unistd::pipe2(cloexec).map_err(sys_err("create the cgroup pipe"))?;
        (Some(r), Some(w))
    } else {
        (None, None)
    };
    // A `cgroup` mount on a v1/hybrid host shows the container's own cgroups only.
    let cgroup_v1 = if !cgroup2
        && c.setup()
            .mounts
            .iter()
            .any(|m| m.kind == "cgroup" || m.kind == "cgroup2")
    {
        cgroup::v1_view(&cleanup.cgroups)?
    } else {
        cgroup::V1View::default()
    };
    // The cgroups the init joins after its clone: all of them, or, when it is born in its
    // cgroup v2 directory (clone3 CLONE_INTO_CGROUP, which waits for no RCU grace period as
    // a move there does), the v1 ones left (a hybrid host's).
    let (cloned, attach_dirs) = if by_helper {
        (
            clone_after_joining(&join, flags, &cleanup.cgroups, c.setup().oom_score_adj),
            cleanup.cgroups.clone(),
        )
    } else {
        let (cloned, left) = cgroup::clone_into(&cleanup.cgroups, flags, &mut |errno| {
            ctx.log(
                "debug",
                &format!("clone3 into the container's cgroup: {errno}; a clone and a move instead"),
            )
        });
        let cloned = cloned.map_err(|errno| OciError::Sys {
            step: "create the container's namespaces (clone)",
            errno,
            hint: crate::doctor::userns_hint(errno),
        });
        (cloned, left)
    };
    drop(join);
    let child = match cloned {
        Ok(CloneResult::Child) => {
            drop((go_w, ready_r, attached_r));
            // The pid the container's process has in its own pid namespace (1 in one of
            // its own), which the socket-activated program checks LISTEN_PID against.
            if listen > 0 {
                let pid = nix::unistd::getpid().to_string();
                crate::spec::set_env(&mut c.sandbox.env, "LISTEN_PID", &pid);
            }
            // The Cleanup guard belongs to the parent.
            let cleanup_dirs = std::mem::take(&mut cleanup.cgroups);
            std::mem::forget(cleanup);
            init::main(init::InitArgs {
                c: &c,
                go: go_r,
                ready: ready_w,
                fifo,
                console,
                preserve_fds: listen + a.preserve_fds,
                filter: filter.as_ref(),
                no_pivot: a.no_pivot,
                cgroup2,
                cgroup_v1: &cgroup_v1,
                cgroup_v2_own: if cgroup2 {
                    cleanup_dirs.first().map(PathBuf::as_path)
                } else {
                    None
                },
                caller_in_userns: !in_initial_userns(),
                self_attach: attached_w.map(|w| (attach_dirs.as_slice(), w)),
            })
        }
        Ok(CloneResult::Parent(pid)) => pid,
        Err(e) => return Err(e),
    };
    cleanup.child = Some(child);
    drop((go_r, ready_w, fifo, console, attached_w));

    if c.setup().new_namespaces() & libc::CLONE_NEWUSER != 0 {
        write_maps(child, &c.setup().uid_mappings, &c.setup().gid_mappings)?;
    }
    if let Some(r) = attached_r {
        let msg = String::from_utf8_lossy(&read_to_end(&r, "read the container's init report")?)
            .into_owned();
        if msg != "OK" {
            let why = match msg.strip_prefix("ERR ") {
                Some(why) => why.to_string(),
                None => format!("join its cgroup: {}", cleanup.init_death()),
            };
            return Err(OciError::Init(why));
        }
    } else if !attach_dirs.is_empty() && !by_helper {
        cgroup::attach(&attach_dirs, child.as_raw())?;
    }
    if let Some(adj) = c.setup().oom_score_adj.filter(|_| !by_helper) {
        let p = format!("/proc/{child}/oom_score_adj");
        std::fs::write(&p, adj.to_string())
            .map_err(io_err("set process.oomScoreAdj in", Path::new(&p)))?;
    }
    let start_time = state::proc_stat(child.as_raw())
        .map(|(_, t)| t)
        .unwrap_or(0);
    let stored = Stored {
        oci_version: c.spec.version().clone(),
        id: a.id.clone(),
        pid: child.as_raw(),
        bundle: bundle.display().to_string(),
        annotations: c.spec.annotations().clone().unwrap_or_default(),
        start_time,
        created: now_rfc3339(),
        rootfs: c.rootfs().display().to_string(),
        cgroup_dirs: cleanup.cgroups.clone(),
        hooks: c.spec.hooks().clone(),
        rootless: rootless(),
        owner: nix::unistd::geteuid().as_raw(),
        own_pid_ns: c.setup().new_namespaces() & libc::CLONE_NEWPID != 0,
        has_process: c.has_process,
        device_rules: enforced_devices,
        new_keyring: c.setup().new_keyring,
        systemd_scope: match user_scope {
            Some(Ok((_, unit))) => Some(unit),
            _ => None,
        },
    };
    state::save(&dir, &stored)?;
    // The config as checked now: `exec` uses it, not whatever config.json holds later.
    state::save_config(&dir, &serde_json::to_vec(&c.spec).unwrap_or_default())?;
    // The hooks before start see the state `created` (what `state` answers from now on).
    let creating = serde_json::to_vec(&stored.oci(Status::Created)).unwrap_or_default();
    if let Some(h) = c.spec.hooks() {
        for (kind, list) in [
            ("prestart", h.prestart()),
            ("createRuntime", h.create_runtime()),
        ] {
            if let Some(list) = list {
                hooks::run(kind, list, &creating)?;
            }
        }
    }
    // Go: init builds the root and reports.
    let _ = nix::unistd::write(&go_w, &creating);
    drop(go_w);
    let msg = String::from_utf8_lossy(&read_to_end(&ready_r, "read the container's init report")?)
        .into_owned();
    if msg != "OK" {
        // "EXEC127 why": the process's program cannot run (not found, 127; not executable,
        // 126); cordon-oci exits with that code, as a shell would.
        if let Some((code, why)) = exec_failure(&msg) {
            return Err(OciError::Exec { code, why });
        }
        let why = match msg.strip_prefix("ERR ") {
            Some(why) => why.to_string(),
            None => format!("set up the container: {}", cleanup.init_death()),
        };
        return Err(OciError::Init(why));
    }
    if let Some(p) = &a.pid_file {
        write_pid_file(p, child.as_raw())?;
    }
    ctx.log(
        "debug",
        &format!("create {}: init {child} waits for start", a.id),
    );
    cleanup.child = None;
    cleanup.cgroups.clear();
    cleanup.dir = None;
    Ok(Created { pid: child, dir })
}

/// Whether `ns` (an open namespace file) is the user namespace this process is in.
fn is_own_user_ns(ns: &OwnedFd) -> bool {
    is_own_ns(ns, "user").unwrap_or(false)
}

/// Whether `ns` (an open namespace file) is this process's own namespace of that kind
/// (`/proc/self/ns/{proc_name}`): same device and inode.
fn is_own_ns(ns: &OwnedFd, proc_name: &str) -> Result<bool, OciError> {
    use std::os::unix::fs::MetadataExt;
    let own = PathBuf::from(format!("/proc/self/ns/{proc_name}"));
    let ours = std::fs::metadata(&own).map_err(io_err("read cordon-oci's namespace", &own))?;
    let theirs = nix::sys::stat::fstat(ns).map_err(sys_err("inspect a namespace to join"))?;
    Ok(theirs.st_dev == ours.dev() && theirs.st_ino == ours.ino())
}

/// `linux.namespaces[index]` given by path (`fd`, open) is refused when it is cordon-oci's
/// own namespace (the host's, usually) and the container's init would change that namespace
/// for every process in it:
/// - mount: init builds the container's root and pivots into it there, which moves every
///   process of the namespace (with the host's, the whole host) into the container's root;
/// - uts: with `hostname` or `domainname`, init sets them there (without, joining it is
///   sharing it, as leaving the uts namespace out of the list does).
///
/// The others are allowed: joining cordon-oci's own is sharing it, which leaving the entry
/// out does too (podman's pods on the host's network or ipc give such paths), and init
/// changes nothing in them (their sysctls are refused by [`refuse_own_namespace_sysctls`]).
fn refuse_own_namespace(
    c: &Container,
    index: usize,
    ns: &config::Namespace,
    fd: &OwnedFd,
) -> Result<(), OciError> {
    let why = match ns.flag {
        libc::CLONE_NEWNS => {
            "the container's init would build the container's root there and pivot_root into it, moving every process of that namespace into the container's root; remove the path (`{\"type\": \"mount\"}`: a new mount namespace)"
        }
        libc::CLONE_NEWUTS if c.hostname().is_some() || c.setup().domainname.is_some() => {
            "the container's init would set `hostname`/`domainname` there, for every process of that namespace; remove the path (a new uts namespace), or remove hostname and domainname to share that namespace"
        }
        _ => return Ok(()),
    };
    let proc_name = if ns.flag == libc::CLONE_NEWNS {
        "mnt"
    } else {
        "uts"
    };
    let whose = if is_own_ns(fd, proc_name)? {
        "cordon-oci's own"
    } else if is_pid1_ns(fd, proc_name)? {
        // cordon-oci may itself run in a namespace of its own (a private mount namespace):
        // the one of its pid namespace's init is the host's.
        "the host's (that of pid 1)"
    } else {
        return Ok(());
    };
    let path = ns.path.as_deref().unwrap_or(Path::new(""));
    Err(OciConfigError::Invalid {
        field: format!("linux.namespaces[{index}].path"),
        why: format!("{} is {whose} {} namespace: {why}", path.display(), ns.name),
    }
    .into())
}

/// Whether `ns` (an open namespace file) is pid 1's namespace of that kind. An unprivileged
/// cordon-oci may not read pid 1's namespaces (EACCES): it could not change them either.
fn is_pid1_ns(ns: &OwnedFd, proc_name: &str) -> Result<bool, OciError> {
    use std::os::unix::fs::MetadataExt;
    let init = PathBuf::from(format!("/proc/1/ns/{proc_name}"));
    let theirs = match std::fs::metadata(&init) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Ok(false),
        Err(e) => return Err(io_err("read the host's namespace", &init)(e)),
    };
    let joined = nix::sys::stat::fstat(ns).map_err(sys_err("inspect a namespace to join"))?;
    Ok(joined.st_dev == theirs.dev() && joined.st_ino == theirs.ino())
}

/// Joins the namespaces `items` (`is_user`: the user namespace's entry) with `setns`, in runc's
/// order (since 1.2.1): every other namespace first, as far as the caller's own capabilities
/// allow (one owned by the caller's user namespace, such as the host's network namespace,
/// can no longer be joined from inside another user namespace); then the user namespace;
/// then those that failed, again (one owned by the joined user namespace needs the
/// capabilities it gives). Without a user namespace to join, a failure is final at once.
/// The error is the entry that could not be joined and why.
fn join_in_order<T>(
    items: &[T],
    is_user: impl Fn(&T) -> bool,
    mut setns: impl FnMut(&T) -> Result<(), Errno>,
) -> Result<(), (&T, Errno)> {
    let user = items.iter().find(|i| is_user(i));
    let mut later = Vec::new();
    for i in items.iter().filter(|i| !is_user(i)) {
        match setns(i) {
            Ok(()) => {}
            Err(err) if user.is_none() => return Err((i, err)),
            Err(_) => later.push(i),
        }
    }
    if let Some(u) = user {
        setns(u).map_err(|err| (u, err))?;
    }
    for i in later {
        setns(i).map_err(|err| (i, err))?;
    }
    Ok(())
}

/// The name of a namespace's CLONE_NEW* flag, as /proc/PID/ns names it.
fn ns_name(flag: libc::c_int) -> &'static str {
    match flag {
        libc::CLONE_NEWUSER => "user",
        libc::CLONE_NEWIPC => "ipc",
        libc::CLONE_NEWUTS => "uts",
        libc::CLONE_NEWNET => "net",
        libc::CLONE_NEWPID => "pid",
        libc::CLONE_NEWCGROUP => "cgroup",
        libc::CLONE_NEWNS => "mnt",
        _ => "unknown",
    }
}

/// A namespace given by path: its kind, the open namespace file, and how to name it.
struct Joined {
    flag: libc::c_int,
    fd: OwnedFd,
    what: String,
}

/// The clone of the container's init when namespaces are given by path (`join`, joined as
/// [`join_in_order`] says). A short-lived process makes itself non-dumpable (before it enters
/// anything a container's process may share, so none can ptrace it or open its
/// descriptors through /proc; the init inherits this), moves itself into the container's
/// cgroups (`cgroups`, none without), joins the namespaces, and clones the init
/// with `flags` and `CLONE_PARENT`: every new namespace is made from inside the joined ones
/// (a joined user namespace owns them), the init is cordon-oci's child (`run` waits for it;
/// conmon or a shim, as subreapers, reap it), and the pid the clone returns is the host's
/// (a joined pid namespace applies to the helper's children, not to the helper). The init
/// returns `Child` here, as from [`sys::clone_namespaces`]; the parent gets its pid.
///
/// The helper counts in the container's cgroup until it exits: a `pids.max` of 1 refuses
/// the init's clone (EAGAIN), as it would runc's, which also runs more than one process
/// there while it starts a container.
fn clone_after_joining(
    join: &[Joined],
    flags: libc::c_int,
    cgroups: &[PathBuf],
    oom_score_adj: Option<i32>,
) -> Result<CloneResult, OciError> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(sys_err("create the clone helper's pipe"))?;
    let helper = match sys::fork().map_err(sys_err("fork the clone helper"))? {
        CloneResult::Child => {
            drop(r);
            let fail = |msg: String| -> ! {
                let _ = nix::unistd::write(&w, format!("ERR {msg}").as_bytes());
                sys::exit_now(1)
            };
            // process.oomScoreAdj, which the init inherits: once the helper is
            // non-dumpable, an unprivileged parent could no longer write the init's.
            if let Some(adj) = oom_score_adj
                && let Err(err) = std::fs::write("/proc/self/oom_score_adj", adj.to_string())
            {
                fail(format!("set process.oomScoreAdj ({adj}): {err}"));
            }
            if let Err(err) = nix::sys::prctl::set_dumpable(false) {
                fail(format!("make itself non-dumpable: {err}"));
            }
            if let Err(err) = cgroup::attach_self(cgroups) {
                fail(format!("join the container's cgroup: {err}"));
            }
            let joined = join_in_order(
                join,
                |j| j.flag == libc::CLONE_NEWUSER,
                |j| nix::sched::setns(&j.fd, nix::sched::CloneFlags::from_bits_truncate(j.flag)),
            );
            if let Err((j, err)) = joined {
                let hint = if err == Errno::EPERM {
                    "; joining a namespace takes CAP_SYS_ADMIN over the user namespace that owns it (and in the one joining): run as root, or give that user namespace in linux.namespaces too"
                } else {
                    ""
                };
                fail(format!("join the {}: {err}{hint}", j.what));
            }
            match sys::clone_namespaces(flags | libc::CLONE_PARENT) {
                // The init. (The pipe's ends go with this function's frame.)
                Ok(CloneResult::Child) => return Ok(CloneResult::Child),
                Ok(CloneResult::Parent(pid)) => {
                    let _ = nix::unistd::write(&w, format!("PID {pid}").as_bytes());
                    sys::exit_now(0)
                }
                Err(err) => fail(format!(
                    "create the container's namespaces after joining those given by path (clone): {err}{}",
                    crate::doctor::userns_hint(err)
                )),
            }
        }
        CloneResult::Parent(pid) => pid,
    };
    drop(w);
    let msg = read_to_end(&r, "read the clone helper's report");
    let _ = nix::sys::wait::waitpid(helper, None);
    let msg = String::from_utf8_lossy(&msg?).into_owned();
    match msg.strip_prefix("PID ").and_then(|p| p.parse::<i32>().ok()) {
        Some(pid) => Ok(CloneResult::Parent(Pid::from_raw(pid))),
        None => {
            // A helper killed between its clone and its report leaves an init nobody knows
            // the pid of. It dies once the go pipe closes (this create is failing), but the
            // cgroup's removal could race it: whatever the new cgroup holds goes now.
            cgroup::signal_all(cgroups, libc::SIGKILL);
            Err(OciError::CloneHelper(
                msg.strip_prefix("ERR ")
                    .unwrap_or("report (it exited without a word)")
                    .to_string(),
            ))
        }
    }
}

/// A report of the container's init (or its clone helper), up to its end-of-file; `step`
/// names the read in an error.
fn read_to_end(fd: &OwnedFd, step: &'static str) -> Result<Vec<u8>, OciError> {
    let mut msg = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match nix::unistd::read(fd, &mut buf) {
            Ok(0) => return Ok(msg),
            Ok(n) => msg.extend_from_slice(&buf[..n]),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(sys_err(step)(e)),
        }
    }
}

fn write_pid_file(p: &Path, pid: i32) -> Result<(), OciError> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = p.with_extension("cordon-tmp");
    // A new file, never through a symlink someone left at the temporary name (O_EXCL):
    // a root cordon-oci must not truncate whatever that symlink points at.
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)
        .map_err(io_err("write --pid-file", &tmp))?;
    f.write_all(pid.to_string().as_bytes())
        .map_err(io_err("write --pid-file", &tmp))?;
    drop(f);
    std::fs::rename(&tmp, p).map_err(io_err("write --pid-file", p))
}

/// uid_map/gid_map of the container's user namespace: written directly by root, or by an
/// unprivileged user mapping only their own ids; other maps go through newuidmap/newgidmap
/// (the shadow-utils setuid helpers that check /etc/subuid).
fn write_maps(child: Pid, uids: &[IdMap], gids: &[IdMap]) -> Result<(), OciError> {
    let proc = PathBuf::from(format!("/proc/{child}"));
    let (euid, egid) = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let own_only = |m: &[IdMap], id: u32| m.len() == 1 && m[0].host == id && m[0].size == 1;
    let unprivileged = !nix::unistd::geteuid().is_root();
    if unprivileged && !(own_only(uids, euid) && own_only(gids, egid)) {
        for (tool, m) in [("newuidmap", uids), ("newgidmap", gids)] {
            let mut cmd = std::process::Command::new(tool);
            cmd.arg(child.as_raw().to_string());
            for x in m {
                cmd.args([
                    x.container.to_string(),
                    x.host.to_string(),
                    x.size.to_string(),
                ]);
            }
            let st = cmd.status().map_err(io_err(
                "run (is the uidmap package installed?)",
                Path::new(tool),
            ))?;
            if !st.success() {
                return Err(OciError::Usage(format!(
                    "{tool} failed ({st}): check /etc/subuid and /etc/subgid for this user, or map only your own uid and gid"
                )));
            }
        }
        return Ok(());
    }
    crate::launch::write_id_maps(child, uids, gids, unprivileged).map_err(|(step, errno)| {
        OciError::Sys {
            step,
            errno,
            hint: format!(
                " (linux.uidMappings/gidMappings of {}; see `cordon doctor` for user namespace restrictions)",
                proc.display()
            ),
        }
    })
}

fn start(ctx: &Ctx, id: &str) -> Result<(), OciError> {
    let (dir, s) = state::load(&ctx.root, id)?;
    let st = state::status(&dir, &s);
    if st != Status::Created {
        return Err(OciError::WrongStatus {
            id: id.into(),
            status: st,
            what: "only a created container can be started",
        });
    }
    if !s.has_process {
        // Nothing can ever run: the init goes, so the container reads as stopped.
        let _ = nix::sys::signal::kill(Pid::from_raw(s.pid), Signal::SIGKILL);
        return Err(OciError::Usage(format!(
            "container {id} has no `process` in its config.json: there is nothing to start"
        )));
    }
    let fifo = state::fifo_path(&dir);
    let fd = nix::fcntl::open(
        &fifo,
        nix::fcntl::OFlag::O_WRONLY | nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(sys_err("open exec.fifo (did the container's init die?)"))?;
    nix::unistd::write(&fd, b"0").map_err(sys_err("write exec.fifo"))?;
    let _ = std::fs::remove_file(&fifo);
    // Return once the container's process runs the config's program (poststart hooks run
    // after it started, and a signal sent right after `start` reaches the program, not
    // cordon's setup code). The init holds exec.fifo, close-on-exec, until its execve (or
    // its exit): the fifo then has no reader left, which poll reports on this write end as
    // POLLERR. No polling of /proc, and the same for an unprivileged caller, who could not
    // read the non-dumpable init's /proc files. Bounded, in case of a slow setup.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [nix::poll::PollFd::new(
            std::os::fd::AsFd::as_fd(&fd),
            nix::poll::PollFlags::empty(),
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
            Err(Errno::EINTR) if ms > 0 => continue,
            _ => break,
        }
    }
    drop(fd);
    if let Some(list) = s.hooks.as_ref().and_then(|h| h.poststart().clone()) {
        let json = serde_json::to_vec(&s.oci(Status::Running)).unwrap_or_default();
        for e in hooks::run_each("poststart", &list, &json) {
            ctx.log("warning", &e.to_string());
            eprintln!("cordon-oci: warning: {e}");
        }
    }
    Ok(())
}

/// The real-time signals as `kill -l` and podman number them: SIGRTMIN is 34 (the C
/// library keeps 32 and 33), SIGRTMAX 64.
const SIGRTMIN: i32 = 34;
const SIGRTMAX: i32 = 64;

/// "9", "KILL", "SIGKILL", "37", "RTMIN+3", "SIGRTMAX-2" → the signal's number (1..=64).
pub fn parse_signal(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (1..=SIGRTMAX).contains(&n).then_some(n);
    }
    let up = s.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    let rt = |base: i32, rest: &str, sign: i32| -> Option<i32> {
        let off = if rest.is_empty() {
            0
        } else {
            // "+3" after RTMIN, "-2" after RTMAX: digits only.
            let digits = rest.strip_prefix(if sign > 0 { '+' } else { '-' })?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse::<i32>().ok()?
        };
        let n = base + sign * off;
        (SIGRTMIN..=SIGRTMAX).contains(&n).then_some(n)
    };
    if let Some(rest) = name.strip_prefix("RTMIN") {
        return rt(SIGRTMIN, rest, 1);
    }
    if let Some(rest) = name.strip_prefix("RTMAX") {
        return rt(SIGRTMAX, rest, -1);
    }
    format!("SIG{name}")
        .parse::<Signal>()
        .ok()
        .map(|sig| sig as i32)
}

fn kill(ctx: &Ctx, id: &str, signal: &str, all: bool) -> Result<(), OciError> {
    let sig = parse_signal(signal).ok_or_else(|| {
        OciError::Usage(format!(
            "{signal:?} is not a signal: give a number from 1 to 64, a name (TERM, SIGKILL), or a real-time one (RTMIN+3, SIGRTMAX-2)"
        ))
    })?;
    let (dir, s) = state::load(&ctx.root, id)?;
    let st = state::status(&dir, &s);
    // A frozen process dies of SIGKILL only once thawed (cgroup v1 freezer; v2 kills it, but
    // thawing is harmless there): as runc, a SIGKILL to a paused container thaws it after,
    // else `podman kill` of a paused container leaves it frozen, alive, and podman waiting.
    // Other signals stay pending until `resume`.
    let thaw = || {
        if sig == libc::SIGKILL && st == Status::Paused {
            let _ = cgroup::freeze(&s.cgroup_dirs, false);
        }
    };
    // --all, as runc: every process of the container's cgroup, whatever the status (a
    // stopped container's init is gone, but what it left in the cgroup is not), no error.
    // The init too when the container has no cgroup (a rootless one without), once only.
    if all {
        let done = cgroup::signal_all(&s.cgroup_dirs, sig);
        thaw();
        done.check(sig)?;
        if st == Status::Stopped || done.pids.contains(&s.pid) {
            return Ok(());
        }
    }
    if st == Status::Stopped {
        // "container not running" is what containerd's shim matches (runc's ErrNotRunning)
        // to take the container as already gone.
        return Err(OciError::WrongStatus {
            id: id.into(),
            status: st,
            what: "container not running, there is no process to signal (kill --all signals what is left in its cgroup)",
        });
    }
    let sent = sys::kill_raw(Pid::from_raw(s.pid), sig).map_err(sys_err("signal the container"));
    thaw();
    sent
}

fn delete(ctx: &Ctx, id: &str, force: bool) -> Result<(), OciError> {
    let (dir, s) = match state::load(&ctx.root, id) {
        Ok(loaded) => loaded,
        // As runc: with --force, a container that does not exist is deleted already.
        Err(StateError::NotFound(_)) if force => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let st = state::status(&dir, &s);
    // The runtime spec: deleting a container that is not stopped is an error and changes
    // nothing; --force kills it first. runc also deletes a created one (never started)
    // without --force; the spec's MUST is kept here (runtime-tools' delete test checks it):
    // containerd kills a created task before it deletes it (WithProcessKill), and
    // `delete --force` covers the rest.
    if st != Status::Stopped && !force {
        return Err(OciError::WrongStatus {
            id: id.into(),
            status: st,
            what: "stop it first, or use delete --force",
        });
    }
    if st != Status::Stopped {
        if st == Status::Paused {
            let _ = cgroup::freeze(&s.cgroup_dirs, false);
        }
        cgroup::signal_all(&s.cgroup_dirs, libc::SIGKILL);
        let _ = nix::sys::signal::kill(Pid::from_raw(s.pid), Signal::SIGKILL);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while state::init_alive(&s) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    if !s.own_pid_ns {
        cgroup::signal_all(&s.cgroup_dirs, libc::SIGKILL);
    }
    if let Err(e) = cgroup::remove(&s.cgroup_dirs) {
        ctx.log("warning", &e.to_string());
        eprintln!("cordon-oci: warning: {e}");
    }
    if let Some(scope) = &s.systemd_scope {
        stop_scope(ctx, scope, &s.cgroup_dirs);
    }
    std::fs::remove_dir_all(&dir).map_err(io_err("remove the state directory", &dir))?;
    if let Some(list) = s.hooks.as_ref().and_then(|h| h.poststop().clone()) {
        let json = serde_json::to_vec(&s.oci(Status::Stopped)).unwrap_or_default();
        for e in hooks::run_each("poststop", &list, &json) {
            ctx.log("warning", &e.to_string());
            eprintln!("cordon-oci: warning: {e}");
        }
    }
    Ok(())
}

/// How long delete waits for a stopped scope's cgroup to go.
const SCOPE_STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Asks the systemd manager that gave the container its scope to stop it, once nothing of
/// the container runs, and waits briefly for the scope's cgroup (the parent of the
/// container's leaf in `dirs`) to go, so that a container of the same name can be created at
/// once. A manager that cannot be asked is warned about: the scope then goes when the
/// manager sees it empty.
fn stop_scope(ctx: &Ctx, scope: &state::SystemdScope, dirs: &[PathBuf]) {
    // A foreground `run` (or a `run` whose start failed) deletes its container from inside
    // the scope (its leaf `cordon-oci`): stopping the unit would SIGTERM this very process,
    // and the cgroup cannot go while it is there. Once it exits, the scope is empty and
    // systemd removes it.
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    if crate::limits::in_unit(&own, &scope.unit) {
        return;
    }
    let manager = if scope.system {
        crate::limits::SystemdUserScope::system_from_env()
    } else {
        crate::limits::SystemdUserScope::from_env()
    };
    if let Err(why) = manager.stop_unit(&scope.unit) {
        let msg = format!(
            "cannot stop the systemd scope {}: {why}; it is removed when its manager sees it empty",
            scope.unit
        );
        ctx.log("warning", &msg);
        eprintln!("cordon-oci: warning: {msg}");
        return;
    }
    let deadline = std::time::Instant::now() + SCOPE_STOP_WAIT;
    let scope_dirs: Vec<&Path> = dirs.iter().filter_map(|d| d.parent()).collect();
    while scope_dirs.iter().any(|d| d.exists()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// What a foreground `run` passes on to the container's process, as runc does: every
/// signal but those the kernel or cordon-oci itself needs (SIGKILL and SIGSTOP cannot be
/// caught, SIGCHLD tells it the container ended, the synchronous faults and SIGPIPE are
/// its own; SIGWINCH is about the terminal `run` sits in, not the container's pty, and
/// SIGURG is the runtime's, as runc keeps both), real-time ones included: all of the kernel's
/// 32 to 64, blocked through the raw system call ([`sys::block_signals`]).
fn forwarded_signals() -> Vec<libc::c_int> {
    let own = [
        libc::SIGKILL,
        libc::SIGSTOP,
        libc::SIGCHLD,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGILL,
        libc::SIGFPE,
        libc::SIGTRAP,
        libc::SIGSYS,
        libc::SIGPIPE,
        libc::SIGWINCH,
        libc::SIGURG,
    ];
    (1..=SIGRTMAX).filter(|s| !own.contains(s)).collect()
}

fn run(ctx: &Ctx, a: &CreateArgs, detach: bool, keep: bool) -> Result<i32, OciError> {
    // A foreground run stands for the container: a signal sent to it (a terminal's ^C, a
    // supervisor's SIGTERM) goes to the container's process, and run ends when that process
    // does, with its status, having removed the container. Blocked before the container
    // exists, so none is lost or ends cordon-oci in between (the init resets its mask, and
    // hooks start with an empty one); one that arrives before the container's process runs
    // is passed on once it does.
    let mut wanted = forwarded_signals();
    wanted.push(libc::SIGCHLD);
    let signals = if detach {
        None
    } else {
        // A closed stderr (`--debug` logs there) must not end run with the container left
        // behind; the container's init and hooks start with SIGPIPE's default again.
        sys::ignore_signal(nix::sys::signal::Signal::SIGPIPE).map_err(sys_err("ignore SIGPIPE"))?;
        Some(sys::block_signals(&wanted).map_err(sys_err("block the signals to forward"))?)
    };
    let created = create(ctx, a, true)?;
    if let Err(e) = start(ctx, &a.id) {
        let _ = delete(ctx, &a.id, true);
        return Err(e);
    }
    let Some(signals) = signals else {
        return Ok(0);
    };
    use nix::sys::wait::{WaitPidFlag, WaitStatus};
    let code = loop {
        match nix::sys::wait::waitpid(created.pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, c)) => break c,
            Ok(WaitStatus::Signaled(_, sig, _)) => break 128 + sig as i32,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(sys_err("wait for the container")(e)),
        }
        // Blocked, SIGCHLD stays pending when the container ends between the waitpid above
        // and this wait: it returns at once.
        let sig = signals
            .wait()
            .map_err(sys_err("wait for a signal to forward"))?;
        if sig != libc::SIGCHLD {
            ctx.log(
                "debug",
                &format!("run {}: forwarding signal {sig} to {}", a.id, created.pid),
            );
            // ESRCH: it just ended; the next waitpid sees it.
            let _ = sys::kill_raw(created.pid, sig);
        }
    };
    let _ = created.dir;
    if !keep {
        delete(ctx, &a.id, true)?;
    }
    Ok(code)
}

fn list(ctx: &Ctx, format: &str, quiet: bool) -> Result<(), OciError> {
    let mut rows = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&ctx.root) {
        for e in rd.flatten() {
            let id = e.file_name().to_string_lossy().into_owned();
            if let Ok((dir, s)) = state::load(&ctx.root, &id) {
                let st = state::status(&dir, &s);
                rows.push((s, st));
            }
        }
    }
    rows.sort_by(|a, b| a.0.id.cmp(&b.0.id));
    if quiet {
        for (s, _) in &rows {
            println!("{}", s.id);
        }
    } else if format == "json" {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|(s, st)| {
                let mut v = s.state_output(*st);
                // runc's list prints 0 for a stopped container's pid.
                v["pid"] = (if *st == Status::Stopped { 0 } else { s.pid }).into();
                v
            })
            .collect();
        println!("{}", serde_json::Value::Array(v));
    } else {
        println!("ID\tPID\tSTATUS\tBUNDLE\tCREATED\tOWNER");
        for (s, st) in &rows {
            let pid = if *st == Status::Stopped { 0 } else { s.pid };
            println!(
                "{}\t{pid}\t{st}\t{}\t{}\t{}",
                s.id,
                s.bundle,
                s.created,
                s.owner_name()
            );
        }
    }
    Ok(())
}

fn container_pids(s: &Stored, dir: &Path) -> Vec<i32> {
    let mut pids = cgroup::pids(&s.cgroup_dirs);
    if pids.is_empty() && state::status(dir, s) != Status::Stopped {
        pids.push(s.pid);
    }
    pids
}

fn ps(ctx: &Ctx, id: &str, format: &str, ps_args: &[String]) -> Result<(), OciError> {
    let (dir, s) = state::load(&ctx.root, id)?;
    let pids = container_pids(&s, &dir);
    if format == "json" {
        println!("{}", serde_json::to_string(&pids).unwrap_or_default());
        return Ok(());
    }
    let args: Vec<String> = if ps_args.is_empty() {
        vec!["-ef".into()]
    } else {
        ps_args.to_vec()
    };
    let out = std::process::Command::new("ps")
        .args(&args)
        .output()
        .map_err(io_err("run", Path::new("ps")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Ok(());
    };
    let col = header
        .split_whitespace()
        .position(|h| h == "PID")
        .ok_or_else(|| OciError::Usage("ps printed no PID column".into()))?;
    println!("{header}");
    for l in lines {
        if let Some(p) = l
            .split_whitespace()
            .nth(col)
            .and_then(|p| p.parse::<i32>().ok())
            && pids.contains(&p)
        {
            println!("{l}");
        }
    }
    Ok(())
}

/// A sysctl of a namespace joined by path is refused when that namespace is cordon-oci's
/// own (the host's, usually): init would write the host's value as root. runc refuses this
/// for the network namespace ("not allowed in host network namespace"); cordon-oci for the
/// ipc and uts ones too. A namespace made elsewhere for the container (podman's netns,
/// a pod's) is the container's, and its sysctls are set.
fn refuse_own_namespace_sysctls(c: &Container) -> Result<(), OciError> {
    use std::os::unix::fs::MetadataExt;
    for (key, ns, path) in c.sysctl_joined() {
        let own_name = match ns {
            "network" => "net",
            other => other,
        };
        let id = |p: &Path| std::fs::metadata(p).map(|m| (m.dev(), m.ino()));
        let joined = id(path).map_err(io_err("open a namespace to join", path))?;
        let own = format!("/proc/self/ns/{own_name}");
        let own =
            id(Path::new(&own)).map_err(io_err("read cordon-oci's namespace", Path::new(&own)))?;
        if joined == own {
            return Err(OciConfigError::Invalid {
                field: format!("linux.sysctl[{key}]"),
                why: format!(
                    "linux.namespaces[{ns}].path {} is cordon-oci's own {ns} namespace (the host's): setting it would change the host's value; remove the sysctl or give the container its own {ns} namespace",
                    path.display()
                ),
            }
            .into());
        }
    }
    Ok(())
}

/// The capability `name` (`CAP_BPF`), if it is one the running kernel has.
fn kernel_cap(name: &str) -> Result<caps::Capability, String> {
    // Probed once per process (one prctl per capability the crate knows), not once per name.
    static SUPPORTED: std::sync::OnceLock<caps::CapsHashSet> = std::sync::OnceLock::new();
    config::capability(
        name,
        SUPPORTED.get_or_init(caps::runtime::thread_all_supported),
    )
}

fn spec(bundle: &Path, rootless_spec: bool) -> Result<(), OciError> {
    use oci_spec::runtime::Spec;
    let path = bundle.join("config.json");
    if path.exists() {
        return Err(OciError::Usage(format!(
            "{} exists already; remove it first",
            path.display()
        )));
    }
    let mut s = if rootless_spec {
        Spec::rootless(
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        )
    } else {
        Spec::default()
    };
    // The version runc 1.1 writes: older runtimes (crun 1.8) refuse a newer one, and
    // nothing cordon-oci reads needs 1.2.
    s.set_version(SPEC_VERSION.into());
    s.set_hostname(Some("cordon".into()));
    // No inheritable set (as runc since CVE-2022-29162): with one, a non-root program whose
    // file has inheritable capabilities would gain them at execve. No ambient set either: an
    // ambient capability must be inheritable (runc's spec keeps one, which its runtime then
    // fails to raise, with a warning; cordon-oci refuses such a config).
    if let Some(p) = s.process_mut()
        && let Some(mut c) = p.capabilities().clone()
    {
        c.set_inheritable(None);
        c.set_ambient(None);
        p.set_capabilities(Some(c));
    }
    s.save(&path)
        .map_err(|e| OciError::Usage(format!("cannot write {}: {e}", path.display())))
}

fn features() -> serde_json::Value {
    serde_json::json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": OCI_VERSION,
        "hooks": ["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"],
        "mountOptions": ["ro", "rw", "nosuid", "suid", "nodev", "dev", "noexec", "exec", "sync", "async",
            "dirsync", "remount", "mand", "nomand", "atime", "noatime", "diratime", "nodiratime",
            "relatime", "norelatime", "strictatime", "nostrictatime", "bind", "rbind",
            "private", "rprivate", "shared", "rshared", "slave", "rslave", "unbindable", "runbindable",
            "silent", "loud", "nosymfollow", "symfollow", "lazytime", "nolazytime", "iversion",
            "noiversion", "tmpcopyup", "notmpcopyup"],
        "linux": {
            "namespaces": ["cgroup", "ipc", "mount", "network", "pid", "user", "uts"],
            "capabilities": caps::all().iter().map(|c| c.to_string()).collect::<Vec<_>>(),
            "cgroup": {"v1": true, "v2": true, "systemd": true, "systemdUser": true},
            "seccomp": {
                "enabled": true,
                "actions": ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS",
                    "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG", "SCMP_ACT_TRACE", "SCMP_ACT_TRAP"],
                "operators": ["SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT",
                    "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE"],
                "archs": ["SCMP_ARCH_X86", "SCMP_ARCH_X86_64"]
            },
            "apparmor": {"enabled": true},
            "selinux": {"enabled": false}
        },
        "annotations": {"org.cordon.runtime": "cordon-oci"}
    })
}

fn pause(ctx: &Ctx, id: &str, frozen: bool) -> Result<(), OciError> {
    let (dir, s) = state::load(&ctx.root, id)?;
    let st = state::status(&dir, &s);
    let ok = if frozen {
        st == Status::Running
    } else {
        st == Status::Paused
    };
    if !ok {
        return Err(OciError::WrongStatus {
            id: id.into(),
            status: st,
            what: if frozen {
                "only a running container can be paused"
            } else {
                "only a paused container can be resumed"
            },
        });
    }
    Ok(cgroup::freeze(&s.cgroup_dirs, frozen)?)
}

fn update(ctx: &Ctx, a: &UpdateArgs) -> Result<(), OciError> {
    let origin = format!("cannot update container {}", a.id);
    update_resources(ctx, a).map_err(|e| match e {
        OciError::Cgroup(e) => resource_err(&origin)(e),
        other => other,
    })
}

fn update_resources(ctx: &Ctx, a: &UpdateArgs) -> Result<(), OciError> {
    use oci_spec::runtime::{LinuxPids, LinuxResources};
    let (dir, s) = state::load(&ctx.root, &a.id)?;
    if state::status(&dir, &s) == Status::Stopped {
        return Err(OciError::WrongStatus {
            id: a.id.clone(),
            status: Status::Stopped,
            what: "cannot update a stopped container",
        });
    }
    let mut r: LinuxResources = match &a.resources {
        Some(p) => {
            let text = if p == Path::new("-") {
                let mut t = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut t)
                    .map_err(io_err("read", Path::new("stdin")))?;
                t
            } else {
                std::fs::read_to_string(p).map_err(io_err("read", p))?
            };
            config::parse_json(text.as_bytes())
                .map_err(|e| OciError::Usage(format!("{}: {e}", p.display())))?
        }
        None => LinuxResources::default(),
    };
    if a.memory.is_some() || a.memory_swap.is_some() || a.memory_reservation.is_some() {
        let mut m = r.memory().unwrap_or_default();
        if a.memory.is_some() {
            m.set_limit(a.memory);
        }
        if a.memory_swap.is_some() {
            m.set_swap(a.memory_swap);
        }
        if a.memory_reservation.is_some() {
            m.set_reservation(a.memory_reservation);
        }
        r.set_memory(Some(m));
    }
    if a.cpu_quota.is_some()
        || a.cpu_period.is_some()
        || a.cpu_share.is_some()
        || a.cpuset_cpus.is_some()
        || a.cpuset_mems.is_some()
    {
        let mut c = r.cpu().clone().unwrap_or_default();
        if a.cpu_quota.is_some() {
            c.set_quota(a.cpu_quota);
        }
        if a.cpu_period.is_some() {
            c.set_period(a.cpu_period);
        }
        if a.cpu_share.is_some() {
            c.set_shares(a.cpu_share);
        }
        if a.cpuset_cpus.is_some() {
            c.set_cpus(a.cpuset_cpus.clone());
        }
        if a.cpuset_mems.is_some() {
            c.set_mems(a.cpuset_mems.clone());
        }
        r.set_cpu(Some(c));
    }
    if let Some(p) = a.pids_limit {
        let mut pids = LinuxPids::default();
        pids.set_limit(p);
        r.set_pids(Some(pids));
    }
    if let Some(w) = a.blkio_weight {
        let mut b = r.block_io().clone().unwrap_or_default();
        b.set_weight(Some(w));
        r.set_block_io(Some(b));
    }
    if s.cgroup_dirs.is_empty() {
        return Err(OciError::Usage(format!(
            "container {} has no cgroup (created rootless without limits): its resources cannot be updated",
            a.id
        )));
    }
    // A container cordon-oci created before it put every v1 container in a cpuset cgroup
    // may have none: say so rather than write nothing.
    let wants_cpuset = r.cpu().as_ref().is_some_and(|c| {
        c.cpus().as_ref().is_some_and(|v| !v.is_empty())
            || c.mems().as_ref().is_some_and(|v| !v.is_empty())
    });
    if wants_cpuset
        && !cgroup::is_v2(&s.cgroup_dirs)
        && !s.cgroup_dirs.iter().any(|d| d.join("cpuset.cpus").exists())
    {
        return Err(OciError::Usage(format!(
            "cannot update container {}: `linux.resources.cpu.cpus`/`mems` (--cpuset-cpus, --cpuset-mems): the container has no cpuset cgroup (an older cordon-oci created it); recreate it",
            a.id
        )));
    }
    let Some(device_rules) = r.devices().clone() else {
        return Ok(cgroup::apply(&s.cgroup_dirs, &r)?);
    };
    // The device rules: the container's list (from the state, read again under the lock),
    // then the update's, as the v1 devices list appends them.
    let _lock = state::lock(&dir)?;
    let (_, mut s) = state::load(&ctx.root, &a.id)?;
    if !cgroup::is_v2(&s.cgroup_dirs) {
        // The kernel's v1 list is the container's: the update's rules are written after it.
        cgroup::apply(&s.cgroup_dirs, &r)?;
        if let Some(current) = &s.device_rules {
            s.device_rules = Some(cgroup::updated_device_list(current, &device_rules)?);
            state::save(&dir, &s)?;
        }
        return Ok(());
    }
    let Some(current) = &s.device_rules else {
        let why = if s.rootless {
            "it was created by an unprivileged cordon-oci, which cannot enforce device rules (loading a device program takes CAP_BPF or CAP_SYS_ADMIN): create it as root to change them"
        } else {
            "its state does not record the device rules it was created with (it was created by an older cordon-oci), and a new device program built without them could allow what they deny: recreate the container to change them"
        };
        return Err(OciError::Usage(format!(
            "container {}: `linux.resources.devices` cannot be updated on cgroup v2: {why}",
            a.id
        )));
    };
    let updated = cgroup::updated_device_list(current, &device_rules)?;
    r.set_devices(None);
    cgroup::apply(&s.cgroup_dirs, &r)?;
    cgroup::replace_device_program(&s.cgroup_dirs, &updated)?;
    s.device_rules = Some(updated);
    state::save(&dir, &s)?;
    Ok(())
}

fn stats(s: &Stored) -> serde_json::Value {
    let d = &s.cgroup_dirs;
    let mem_usage = cgroup::read_u64(d, "memory.usage_in_bytes", None)
        .or_else(|| cgroup::read_u64(d, "memory.current", None));
    let mem_max = cgroup::read_u64(d, "memory.max_usage_in_bytes", None)
        .or_else(|| cgroup::read_u64(d, "memory.peak", None));
    let mem_limit = cgroup::read_u64(d, "memory.limit_in_bytes", None)
        .or_else(|| cgroup::read_u64(d, "memory.max", None));
    let cpu_total = cgroup::read_u64(d, "cpuacct.usage", None)
        .or_else(|| cgroup::read_u64(d, "cpu.stat", Some("usage_usec")).map(|u| u * 1000));
    let pids = cgroup::read_u64(d, "pids.current", None);
    serde_json::json!({
        "type": "stats",
        "id": s.id,
        "data": {
            "cpu": {"usage": {"total": cpu_total.unwrap_or(0)}},
            "memory": {"usage": {"usage": mem_usage.unwrap_or(0), "max": mem_max.unwrap_or(0),
                                  "limit": mem_limit.unwrap_or(0)}},
            "pids": {"current": pids.unwrap_or(0)}
        }
    })
}

fn events(ctx: &Ctx, id: &str, once: bool, interval: &str) -> Result<(), OciError> {
    let every =
        crate::spec::parse_duration(interval).map_err(|e| OciError::Usage(e.to_string()))?;
    loop {
        let (dir, s) = state::load(&ctx.root, id)?;
        if state::status(&dir, &s) == Status::Stopped {
            if once {
                return Err(OciError::WrongStatus {
                    id: id.into(),
                    status: Status::Stopped,
                    what: "no statistics for a stopped container",
                });
            }
            return Ok(());
        }
        println!("{}", stats(&s));
        if once {
            return Ok(());
        }
        std::thread::sleep(every);
    }
}

/// The config `create` stored for container `id` no longer passes this cordon-oci's checks
/// (one from before an upgrade that refuses what the older one took): said so, not as an
/// error of a config.json the caller could edit.
fn stored_config_refused(id: &str, e: OciConfigError) -> OciError {
    let text = e.to_string();
    let text = text.strip_prefix("config.json: ").unwrap_or(&text);
    OciError::Usage(format!(
        "container {id}'s config, as create stored it: {text}; the cordon-oci that created the \
         container took it, this one does not: delete the container and create it again"
    ))
}

/// `exec`: a new process in a running container's namespaces and cgroup, with the
/// container's seccomp filter, capabilities and ids (or those of --process).
fn exec(ctx: &Ctx, a: &ExecArgs) -> Result<i32, OciError> {
    let (dir, s) = state::load(&ctx.root, &a.id)?;
    let st = state::status(&dir, &s);
    if st != Status::Running && st != Status::Created {
        return Err(OciError::WrongStatus {
            id: a.id.clone(),
            status: st,
            what: "exec needs a running container",
        });
    }
    // The config `create` checked (kept in the state directory): a config.json edited
    // since cannot hand exec'd processes other capabilities, ids or seccomp policy.
    let stored = state::load_config(&dir)?;
    let bundle = Path::new(&s.bundle);
    let mut c = if let Some(p) = &a.process {
        let text = std::fs::read_to_string(p).map_err(io_err("read --process", p))?;
        let proc: oci_spec::runtime::Process = config::parse_json(text.as_bytes())
            .map_err(|e| OciError::Usage(format!("--process {}: {e}", p.display())))?;
        let in_file = |e: OciConfigError| {
            OciError::Usage(e.to_string().replacen(
                "config.json: ",
                &format!("--process {} (the process object): ", p.display()),
                1,
            ))
        };
        // The stored config's own process is replaced, unchecked: only the file's counts.
        let mut spec: oci_spec::runtime::Spec = config::parse_json(&stored).map_err(|why| {
            stored_config_refused(
                &a.id,
                OciConfigError::Load {
                    path: "config.json".into(),
                    why,
                },
            )
        })?;
        config::refuse_unknown_process_fields(spec.version(), &proc, text.as_bytes())
            .map_err(in_file)?;
        // A file without an AppArmor profile keeps the container's, as runc keeps it: an
        // exec'd process is never less confined for a field left out.
        let mut proc = proc;
        if proc.apparmor_profile().as_deref().is_none_or(str::is_empty) {
            let stored = spec
                .process()
                .as_ref()
                .and_then(|p| p.apparmor_profile().clone());
            proc.set_apparmor_profile(stored);
        }
        spec.set_process(Some(proc));
        // Its fields are checked as config.json's `process`: an error in one names the file.
        Container::from_spec(spec, bundle).map_err(|e| match &e {
            OciConfigError::Unsupported { field, .. } | OciConfigError::Invalid { field, .. }
                if !field.starts_with("process") =>
            {
                stored_config_refused(&a.id, e)
            }
            _ => in_file(e),
        })?
    } else {
        Container::from_json(&stored, bundle).map_err(|e| stored_config_refused(&a.id, e))?
    };
    if a.process.is_none() {
        if a.args.is_empty() {
            return Err(OciError::Usage(
                "give the command to run, or --process".into(),
            ));
        }
        c.sandbox.argv = a.args.clone();
        for e in &a.env {
            let (k, v) =
                config::env_entry(e).map_err(|why| OciError::Usage(format!("--env: {why}")))?;
            crate::spec::set_env(&mut c.sandbox.env, k, v);
        }
        let setup = c.setup_mut();
        if let Some(cwd) = &a.cwd {
            setup.cwd = cwd.clone();
        }
        if let Some(u) = &a.user {
            (setup.uid, setup.gid) = exec_user(u, (setup.uid, setup.gid))?;
        }
        setup.terminal = a.tty;
    }
    // As the container's init did (create --no-new-keyring).
    c.setup_mut().new_keyring = s.new_keyring;
    c.setup_mut().apparmor_profile =
        apparmor::to_apply(c.setup().apparmor_profile.as_deref()).map_err(OciError::Usage)?;
    ContainerSetup::check_container_spec(&c.sandbox).map_err(OciError::Usage)?;
    c.setup().caps.check_known(kernel_cap)?;
    let console = if c.setup().terminal || a.tty {
        let p = a.console_socket.as_ref().ok_or_else(|| {
            OciError::Usage("a terminal (--tty or process.terminal) needs --console-socket".into())
        })?;
        let s = std::os::unix::net::UnixStream::connect(p)
            .map_err(io_err("connect to --console-socket", p))?;
        Some(OwnedFd::from(s))
    } else {
        None
    };
    let filter = match &c.setup().seccomp {
        Some(sc) => Some(seccomp::compile(sc)?),
        None => None,
    };
    // The container's namespaces, joined in runc's order ([`join_in_order`]).
    let mut ns = Vec::new();
    for (name, flag) in [
        ("user", libc::CLONE_NEWUSER),
        ("ipc", libc::CLONE_NEWIPC),
        ("uts", libc::CLONE_NEWUTS),
        ("net", libc::CLONE_NEWNET),
        ("pid", libc::CLONE_NEWPID),
        ("cgroup", libc::CLONE_NEWCGROUP),
        ("mnt", libc::CLONE_NEWNS),
    ] {
        let target = format!("/proc/{}/ns/{name}", s.pid);
        let same = std::fs::metadata(&target)
            .ok()
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            == std::fs::metadata(format!("/proc/self/ns/{name}"))
                .ok()
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m));
        if same {
            continue;
        }
        let fd = nix::fcntl::open(
            target.as_str(),
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|errno| OciError::Sys {
            step: "open a namespace of the container",
            errno,
            hint: if errno == Errno::EACCES && st == Status::Created && rootless() {
                format!(
                    " ({target}: until `start`, the container's init is cordon-oci itself, whose /proc files only the host's root may open (a guard against CVE-2019-5736): start the container first, then exec)"
                )
            } else {
                format!(" ({target})")
            },
        })?;
        ns.push((flag, fd));
    }
    let (pid_r, pid_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(sys_err("create a pipe"))?;
    let preserve = a.preserve_fds;
    // Intermediate: joins the cgroup and the namespaces, forks the process (a fork is needed
    // for the pid namespace to apply), reports its pid, and waits for it unless detached.
    // Born in the container's cgroup v2 directory when it can be (see create), it then joins
    // only the v1 ones.
    let (forked, cg) = cgroup::clone_into(&s.cgroup_dirs, 0, &mut |errno| {
        ctx.log(
            "debug",
            &format!("clone3 into the container's cgroup: {errno}; a fork and a move instead"),
        )
    });
    let mid = match forked.map_err(sys_err("fork"))? {
        CloneResult::Child => {
            drop(pid_r);
            let code = exec_mid(
                &c,
                &cg,
                &ns,
                filter.as_ref(),
                preserve,
                &pid_w,
                a.detach,
                console.as_ref(),
            );
            sys::exit_now(code)
        }
        CloneResult::Parent(p) => p,
    };
    drop((pid_w, console));
    // "PID n", or "ERR step: why" (written at once: one read takes it whole).
    let mut buf = [0u8; 4096];
    let n = loop {
        match nix::unistd::read(&pid_r, &mut buf) {
            Err(Errno::EINTR) => continue,
            other => break other.unwrap_or(0),
        }
    };
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    let Some(pid) = text
        .strip_prefix("PID ")
        .and_then(|p| p.trim().parse::<i32>().ok())
    else {
        let _ = nix::sys::wait::waitpid(mid, None);
        // Its program cannot run: 127 (not found) or 126, as `create` fails.
        if let Some((code, why)) = exec_failure(&text) {
            return Err(OciError::Exec { code, why });
        }
        return Err(OciError::ExecProcess(
            text.strip_prefix("ERR ")
                .unwrap_or("it exited without a report")
                .to_string(),
        ));
    };
    if let Some(p) = &a.pid_file {
        write_pid_file(p, pid)?;
    }
    loop {
        match nix::sys::wait::waitpid(mid, None) {
            Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => return Ok(code),
            Ok(nix::sys::wait::WaitStatus::Signaled(_, sig, _)) => return Ok(128 + sig as i32),
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(e) => return Err(sys_err("wait for the exec process")(e)),
        }
    }
}

/// A report "EXEC127 why" (init's or an exec process's): its program cannot run, with the
/// exit code (127 not found, 126 not executable) and why.
fn exec_failure(report: &str) -> Option<(i32, String)> {
    let (code, why) = report.strip_prefix("EXEC")?.split_once(' ')?;
    Some((code.parse().ok()?, why.to_string()))
}

/// `exec --user UID[:GID]` over the process's (`uid`, `gid`), as runc reads it: what is
/// given replaces, what is left out (the gid after a lone uid) stays the config's.
fn exec_user(u: &str, (uid, gid): (u32, u32)) -> Result<(u32, u32), OciError> {
    let bad = || {
        OciError::Usage(format!(
            "bad --user {u:?}: give UID or UID:GID, numbers (names are not looked up)"
        ))
    };
    let (uids, gids) = match u.split_once(':') {
        Some((uids, gids)) => (uids, Some(gids)),
        None => (u, None),
    };
    let uid = match uids {
        "" => uid,
        s => s.parse().map_err(|_| bad())?,
    };
    let gid = match gids {
        None | Some("") => gid,
        Some(s) => s.parse().map_err(|_| bad())?,
    };
    Ok((uid, gid))
}

#[allow(clippy::too_many_arguments)]
fn exec_mid(
    c: &Container,
    cg: &[PathBuf],
    ns: &[(libc::c_int, OwnedFd)],
    filter: Option<&seccomp::OciFilter>,
    preserve: i32,
    report: &OwnedFd,
    detach: bool,
    console: Option<&OwnedFd>,
) -> i32 {
    let fail = |step: &str, e: String| {
        let _ = nix::unistd::write(report, format!("ERR {step}: {e}").as_bytes());
        1
    };
    // process.oomScoreAdj (the container's, or --process's), as runc applies it: here, before
    // the fork, so the process inherits it (and while /proc/self is still this user's: not
    // once non-dumpable); left as it is when it already has that value
    // (an unprivileged caller may not lower its own).
    if let Some(adj) = c.setup().oom_score_adj {
        let p = "/proc/self/oom_score_adj";
        let current = std::fs::read_to_string(p).ok();
        if current.as_deref().map(str::trim) != Some(adj.to_string().as_str())
            && let Err(e) = std::fs::write(p, adj.to_string())
        {
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (lowering it takes CAP_SYS_RESOURCE: run as root, or give a value at or above the caller's)"
            } else {
                ""
            };
            return fail(
                "set process.oomScoreAdj",
                format!("write {adj} to {p}: {e}{hint}"),
            );
        }
    }
    // Before anything of the container is joined (but its cgroup v2 directory, where it may
    // have been born, which names no process to the container): a non-dumpable process cannot be
    // ptraced, nor its /proc/PID/exe, fds or memory opened, by the container's processes
    // (the flag passes to the forked process and is reset by its execve).
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        return fail("make the exec process non-dumpable", e.to_string());
    }
    // Single-threaded (a fork): it may move itself, the cheap way.
    if let Err(e) = cgroup::attach_self(cg) {
        let denied = matches!(&e, cgroup::CgroupError::Io { source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied);
        let hint = if denied && rootless() {
            " (moving a process between cgroups takes write access to the cgroup.procs of the lowest cgroup above both: start `cordon-oci exec` in the subtree delegated to you that holds the container, for a --systemd-cgroup container your systemd user manager's: `systemd-run --user --scope cordon-oci exec ...`)"
        } else {
            ""
        };
        return fail("join the container's cgroup", format!("{e}{hint}"));
    }
    let joined = join_in_order(
        ns,
        |(flag, _)| *flag == libc::CLONE_NEWUSER,
        |(flag, fd)| nix::sched::setns(fd, nix::sched::CloneFlags::from_bits_truncate(*flag)),
    );
    if let Err(((flag, _), e)) = joined {
        return fail(
            "join the container's namespaces",
            format!("{}: {e}", ns_name(*flag)),
        );
    }
    // The process reports here until its execve closes it (see init::exec_process).
    let (status_r, status_w) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => return fail("create the exec process's report pipe", e.to_string()),
    };
    let child = match sys::fork() {
        Ok(CloneResult::Child) => {
            drop(status_r);
            let _ = nix::unistd::chdir("/");
            init::exec_process(c, filter, preserve, status_w.as_fd(), console)
        }
        Ok(CloneResult::Parent(p)) => p,
        Err(e) => return fail("fork the exec process", e.to_string()),
    };
    drop(status_w);
    let status = match read_to_end(&status_r, "read the exec process's report") {
        Ok(s) => s,
        Err(e) => return fail("start the exec process", e.to_string()),
    };
    let (ready, status) = match status.strip_prefix(init::EXEC_READY) {
        Some(rest) => (true, rest),
        None => (false, &status[..]),
    };
    if !ready && status.is_empty() {
        // The report pipe closed without a word or the mark: the process died in its
        // set-up, or a seccomp filter refused the mark's write and its program runs (or
        // ran): died_before_its_program tells which.
        if let Some(why) = died_before_its_program(child) {
            return fail("start the exec process", why);
        }
    }
    if !status.is_empty() {
        // It failed before its program ran: that is exec's error (passed on as it is:
        // "ERR step: why" or "EXEC127 why").
        let _ = nix::sys::wait::waitpid(child, None);
        let _ = nix::unistd::write(report, status);
        return 1;
    }
    // The host pid of the process (we share the caller's pid namespace view).
    let _ = nix::unistd::write(report, format!("PID {child}").as_bytes());
    if detach {
        return 0;
    }
    loop {
        match nix::sys::wait::waitpid(child, None) {
            Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => return code,
            Ok(nix::sys::wait::WaitStatus::Signaled(_, sig, _)) => return 128 + sig as i32,
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(_) => return 1,
        }
    }
}

/// How the exec process `child`, which closed its report pipe without a word before it was
/// set up, died (it is reaped then); None if its program runs.
///
/// End-of-file comes as it exits (its files are closed before it turns into a zombie), so
/// its end is waited for, for up to [`EXEC_DEATH_WAIT`], and looked at without reaping it.
/// Killed by a signal: it died before its program ran (every failure of its own is
/// reported first). Exited with a status, or still running: its program runs or ran (a
/// seccomp filter refused the write of its mark), and exec goes on as for any program.
fn died_before_its_program(child: nix::unistd::Pid) -> Option<String> {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
    let deadline = std::time::Instant::now() + EXEC_DEATH_WAIT;
    let peek = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    loop {
        match waitid(Id::Pid(child), peek) {
            Ok(WaitStatus::Signaled(..)) => break,
            Ok(WaitStatus::StillAlive) | Err(Errno::EINTR)
                if std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            _ => return None,
        }
    }
    let status = loop {
        match waitpid(child, None) {
            Err(Errno::EINTR) => continue,
            other => break other,
        }
    };
    Some(death_before_program(status))
}

/// How long `exec` waits for an exec process that closed its report pipe without its mark.
const EXEC_DEATH_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// [`died_before_its_program`]'s words for how the process ended.
fn death_before_program(status: nix::Result<nix::sys::wait::WaitStatus>) -> String {
    use nix::sys::wait::WaitStatus;
    match status {
        Ok(WaitStatus::Signaled(_, Signal::SIGSYS, _)) => "it was killed by SIGSYS before its program ran: the container's seccomp filter (linux.seccomp) kills a system call that the process's set-up makes; allow that call, or make the rule SCMP_ACT_ERRNO".into(),
        Ok(WaitStatus::Signaled(_, Signal::SIGKILL, _)) => "it was killed by SIGKILL before its program ran: by the kernel's OOM killer if the container's cgroup is at its memory limit (raise linux.resources.memory.limit), or by another process".into(),
        Ok(WaitStatus::Signaled(_, sig, _)) => format!("it was killed by {sig} before its program ran"),
        other => format!("it ended before its program ran ({other:?})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // What `features` says of seccomp is what the compiler takes: every action, operator and
    // architecture it lists compiles in a policy, and the architectures it leaves out do not.
    #[test]
    fn features_lists_what_the_seccomp_compiler_takes() {
        let f = features();
        let sc = &f["linux"]["seccomp"];
        let list = |k: &str| -> Vec<String> {
            sc[k]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect()
        };
        let compile = |json: serde_json::Value| {
            let s: oci_spec::runtime::LinuxSeccomp = serde_json::from_value(json).unwrap();
            crate::security::seccomp::oci::compile(&s)
        };
        for action in list("actions") {
            let p = serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["mkdir"], "action": action}]});
            assert!(compile(p).is_ok(), "{action}");
        }
        for op in list("operators") {
            let p = serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO",
                    "args": [{"index": 0, "value": 1, "valueTwo": 1, "op": op}]}]});
            assert!(compile(p).is_ok(), "{op}");
        }
        let archs = list("archs");
        assert!(archs.contains(&"SCMP_ARCH_X86".to_string()), "{archs:?}");
        for arch in &archs {
            let p = serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW", "architectures": [arch]});
            assert!(compile(p).is_ok(), "{arch}");
        }
        let p = serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_AARCH64"]});
        assert!(compile(p).is_err());
    }

    #[test]
    fn an_exec_report_reads_back() {
        assert_eq!(
            exec_failure(&init::exec_report(127, "not found: x y")),
            Some((127, "not found: x y".to_string()))
        );
        assert_eq!(exec_failure("ERR step: why"), None);
        assert_eq!(exec_failure("PID 12"), None);
    }

    #[test]
    fn an_init_death_is_told_with_its_cause() {
        use nix::sys::wait::WaitStatus;
        let pid = Pid::from_raw(7);
        let killed = WaitStatus::Signaled(pid, Signal::SIGKILL, false);
        assert!(death_of(killed, Some(true)).contains("memory.limit"));
        assert!(death_of(killed, Some(false)).contains("host is out of memory"));
        assert_eq!(death_of(killed, None), "it was killed by SIGKILL");
        assert_eq!(
            death_of(WaitStatus::Signaled(pid, Signal::SIGSEGV, true), Some(true)),
            "it was killed by SIGSEGV"
        );
        assert!(death_of(WaitStatus::Exited(pid, 3), None).contains("status 3"));
    }

    // Item 9 of the second OCI review: `exec --user 1000` set gid 0; runc keeps the config's.
    #[test]
    fn exec_user_keeps_what_it_does_not_give() {
        let cfg = (1000, 1000);
        assert_eq!(exec_user("1001", cfg).unwrap(), (1001, 1000));
        assert_eq!(exec_user("1001:5", cfg).unwrap(), (1001, 5));
        assert_eq!(exec_user(":5", cfg).unwrap(), (1000, 5));
        assert_eq!(exec_user("0:0", cfg).unwrap(), (0, 0));
        assert!(
            exec_user("root", cfg)
                .unwrap_err()
                .to_string()
                .contains("bad --user")
        );
    }

    #[test]
    fn namespaces_are_joined_before_and_after_the_user_namespace() {
        // "net-host": owned by the caller's user namespace (joinable only before the user
        // namespace); "ipc-pod": owned by the joined user namespace (only after it).
        let items = ["net-host", "user", "ipc-pod"];
        let mut in_user = false;
        let mut order = Vec::new();
        let r = join_in_order(
            &items,
            |i| *i == "user",
            |i| {
                let ok = match *i {
                    "user" => {
                        in_user = true;
                        true
                    }
                    "net-host" => !in_user,
                    _ => in_user,
                };
                if ok {
                    order.push(*i);
                    Ok(())
                } else {
                    Err(Errno::EPERM)
                }
            },
        );
        assert_eq!(r, Ok(()));
        assert_eq!(order, ["net-host", "user", "ipc-pod"]);
        // net always refuses: without a user namespace the first failure is the error, and
        // one that fails after the user namespace too is.
        let net_refuses = |i: &&str| {
            if *i == "net" {
                Err(Errno::EPERM)
            } else {
                Ok(())
            }
        };
        let items = ["net", "ipc"];
        let r = join_in_order(&items, |_| false, net_refuses);
        assert_eq!(r, Err((&"net", Errno::EPERM)));
        let items = ["user", "net"];
        let r = join_in_order(&items, |i| *i == "user", net_refuses);
        assert_eq!(r, Err((&"net", Errno::EPERM)));
    }

    #[test]
    fn pid_1s_namespaces_are_recognised() {
        let open = |p: &str| {
            nix::fcntl::open(
                p,
                nix::fcntl::OFlag::O_RDONLY,
                nix::sys::stat::Mode::empty(),
            )
        };
        let Ok(init_mnt) = open("/proc/1/ns/mnt") else {
            eprintln!("SKIP: pid 1's namespaces are not readable by this user");
            return;
        };
        assert!(is_pid1_ns(&init_mnt, "mnt").unwrap());
        // Another kind's file, and this process's net namespace against pid 1's mnt.
        assert!(!is_pid1_ns(&init_mnt, "uts").unwrap());
        let own_net = open("/proc/self/ns/net").unwrap();
        assert!(!is_pid1_ns(&own_net, "mnt").unwrap());
    }

    #[test]
    fn signals() {
        assert_eq!(parse_signal("9"), Some(libc::SIGKILL));
        assert_eq!(parse_signal("KILL"), Some(libc::SIGKILL));
        assert_eq!(parse_signal("sigterm"), Some(libc::SIGTERM));
        assert_eq!(parse_signal("NOPE"), None);
        assert_eq!(parse_signal("0"), None);
        assert_eq!(parse_signal("-1"), None);
    }

    #[test]
    fn real_time_signals_by_number_and_name() {
        for (s, n) in [
            ("37", 37),
            ("34", 34),
            ("64", 64),
            ("RTMIN", 34),
            ("SIGRTMIN+3", 37),
            ("rtmin+3", 37),
            ("RTMAX", 64),
            ("SIGRTMAX-2", 62),
            ("RTMIN+30", 64),
            ("RTMAX-30", 34),
        ] {
            assert_eq!(parse_signal(s), Some(n), "{s}");
        }
        for bad in [
            "65", "RTMIN+31", "RTMAX-31", "RTMIN-1", "RTMAX+1", "RTMIN+", "RTMIN+x", "RTMIN3",
            "RTMIN++3",
        ] {
            assert_eq!(parse_signal(bad), None, "{bad}");
        }
    }

    #[test]
    fn pid_file_never_writes_through_a_symlink() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let p = d.path().join("pid");
        std::os::unix::fs::symlink(&victim, p.with_extension("cordon-tmp")).unwrap();
        write_pid_file(&p, 42).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "42");
        assert!(
            !std::fs::symlink_metadata(&p)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn preserved_fds_are_a_count_within_the_open_files_limit() {
        assert!(check_preserved_fds(0, 0).is_ok());
        let e = check_preserved_fds(-1, 0).unwrap_err();
        assert!(e.contains("0 or more"), "{e}");
        let e = check_preserved_fds(i32::MAX, 0).unwrap_err();
        assert!(e.contains("limit of open files"), "{e}");
    }

    #[test]
    fn rfc3339_shape() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 30, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
    }
}

//! Resource limits behind one interface: cgroup v2, cgroup v1, or rlimits when no cgroup can
//! be had. The launcher calls, in order:
//!
//! 1. [`prepare_deferred`] in the parent, before `clone`: probes the host (unless the caller
//!    forced a backend), creates a cgroup v2 under cordon's own cgroup and writes the limits
//!    (a cgroup v1 is only checked), and returns the rlimits the payload must set plus a
//!    per-limit enforcement report;
//! 2. on cgroup v2, [`Cgroup::attach`] with the child's host pid; on cgroup v1,
//!    [`Cgroup::create_pending`] after the clone, while init builds the root, then init moves
//!    itself in through [`Cgroup::self_attach_files`]; either before the payload may start;
//! 3. [`Cgroup::kill`] at a timeout or an output-limit breach;
//! 4. [`Cgroup::metrics`] after the sandbox is gone;
//! 5. [`Cgroup::remove`] last (dropping a [`Cgroup`] kills and removes it too, best-effort),
//!    or [`Cgroup::leave_to_keeper`] when the launcher's keeper removes it after the run.
//!
//! `Auto` tries cgroup v2 (a delegated subtree with memory, pids and cpu; for an unprivileged
//! caller on a pure v2 host without one, first a transient scope with `Delegate=yes` from its
//! systemd user manager, see `scope`), then cgroup v1
//! (writable own cgroups of memory, pids, cpu and cpuacct), then rlimits, and the report's
//! `backend` says why each skipped one was skipped. A forced backend that is unavailable is an
//! error: never a silent fallback.
//!
//! Sandbox cgroups are named `cordon-<pid>-<run_id>` and created only under the cgroup cordon
//! itself runs in (per hierarchy on v1, from `/proc/self/cgroup`). [`prepare_deferred`] also finds
//! where stale `cordon-<pid>-*` cgroups (whose owner pid is gone) would be; the launcher removes
//! them with [`Prepared::stale_gc`] once the sandbox is under way.

mod host;
mod probe;
mod rlimit;
pub use rlimit::{
    CORE_NO_DUMP, CoreDumps, README_SECTION as MEMORY_WATCH_README, TcpUnderWatch, core_pattern,
    cpu_seconds as rlimit_cpu_seconds, memory_account, memory_note, nix_resource,
    set as set_rlimit,
};
mod scope;
pub use scope::{FromEnv, ManagerInfo, Obtained, SystemdUserScope, UserScope, in_unit};
mod v1;
mod v2;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod real_tests;
#[cfg(test)]
mod tests;

pub use host::fixes::V1_HOST_UNPRIVILEGED;
pub use host::{
    CgroupFs, CgroupVersion, Failure, HostPaths, Layout, Location, MountInfo, ProcCgroup, RealFs,
    V1Line, errno_text,
};
pub use probe::{BackendProbe, ControllerProbe, Probe, probe, probe_with, probe_with_scope};
pub use v1::V1Dirs;

use crate::outcome::{Enforcement, LimitReport, LimitsReport, MetricSource};
use crate::spec::{BackendChoice, Limits};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The backend that enforces the cgroup-type limits (memory, cpus, pids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    CgroupV2,
    CgroupV1,
    Rlimit,
}

#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    #[error("cannot {step} {path}: {source}; {fix}")]
    Io {
        step: &'static str,
        path: std::path::PathBuf,
        source: std::io::Error,
        fix: String,
    },
    #[error("{0}")]
    Unavailable(String),
    /// A forced backend (`--backend cgroup-v2|cgroup-v1`) cannot be used on this host.
    #[error("the {backend} limits backend was requested but is unavailable: {reason}; fix: {fix}")]
    BackendUnavailable {
        backend: &'static str,
        reason: String,
        fix: String,
    },
    #[error("invalid {what} {value:?}: {why}")]
    Invalid {
        what: &'static str,
        value: String,
        why: &'static str,
    },
}

/// The C type of an `RLIMIT_*` number: glibc declares it as an enum, musl as an int.
#[cfg(target_env = "gnu")]
pub type RlimitResource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub type RlimitResource = libc::c_int;

/// One rlimit the payload sets on itself just before `execve` (soft: the value; hard:
/// [`Rlimit::hard`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimit {
    /// `libc::RLIMIT_*`.
    pub resource: RlimitResource,
    pub value: u64,
}

impl Rlimit {
    /// The hard limit the payload gets: the value, except for CPU time, whose hard limit is a
    /// second above (SIGXCPU at the limit, SIGKILL a second later for a program that
    /// ignores it).
    pub fn hard(&self) -> u64 {
        if self.resource == libc::RLIMIT_CPU {
            self.value.saturating_add(1)
        } else {
            self.value
        }
    }
}

/// What the kernel measured for the sandbox.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CgroupMetrics {
    pub cpu_time: Option<Duration>,
    pub peak_memory: Option<u64>,
    pub oom_kills: Option<u64>,
    /// Forks and clones the pids controller refused at the limit (`pids.events` `max`).
    pub pids_limit_hits: Option<u64>,
    pub source: Option<MetricSource>,
}

/// How long [`Cgroup::remove`] retries `rmdir` on EBUSY while the last tasks exit.
pub const REMOVE_TIMEOUT: Duration = Duration::from_secs(2);
/// [`Cgroup::kill`] re-reads `cgroup.procs` and SIGKILLs what it finds up to this many times,
/// [`KILL_PAUSE`] apart (a process may fork between the read and the kill).
const KILL_ROUNDS: u32 = 200;
const KILL_PAUSE: Duration = Duration::from_millis(5);

#[derive(Debug)]
enum Kind {
    V2(PathBuf),
    V1(V1Dirs),
}

/// A sandbox cgroup cordon created (v2: one directory; v1: one per controller hierarchy).
#[derive(Debug)]
pub struct Cgroup {
    backend: Backend,
    kind: Kind,
    fs: Arc<dyn CgroupFs>,
    /// cordon's own pid, never signalled.
    own_pid: u32,
    removed: bool,
    remove_timeout: Duration,
    /// Not created yet ([`prepare_deferred`]): what [`Cgroup::create_pending`] needs.
    pending: Option<Box<Pending>>,
}

/// A cgroup v1 chosen and checked but not yet made (see [`prepare_deferred`]).
#[derive(Debug)]
struct Pending {
    host: HostPaths,
    limits: Limits,
}

impl Cgroup {
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The sandbox's cgroup directories (v1: each hierarchy once).
    pub fn dirs(&self) -> Vec<PathBuf> {
        match &self.kind {
            Kind::V2(d) => vec![d.clone()],
            Kind::V1(d) => d.unique(),
        }
    }

    /// cgroup v1 only: the per-thread `tasks` files through which the sandbox's init moves
    /// itself (it writes `0`). Moving the calling thread needs no global cgroup lock, whereas
    /// moving another process through `cgroup.procs` takes the threadgroup rwsem for writing
    /// and waits for an RCU grace period (5-10 ms here) when it has been idle. `None` on v2.
    pub fn self_attach_files(&self) -> Option<Vec<PathBuf>> {
        match &self.kind {
            Kind::V1(d) => Some(d.unique().iter().map(|d| d.join("tasks")).collect()),
            Kind::V2(_) => None,
        }
    }

    fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs().iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Moves `pid` (a host pid) into the sandbox cgroup(s).
    pub fn attach(&self, pid: libc::pid_t) -> Result<(), LimitsError> {
        for file in self.procs_files() {
            self.fs.write(&file, &pid.to_string()).map_err(|source| LimitsError::Io {
                step: "move the sandbox process into",
                path: file.clone(),
                source,
                fix: format!(
                    "pid {pid} must still exist, and the caller must be allowed to write cgroup.procs of both \
                     its current cgroup and this one (their common ancestor on cgroup v2); run `cordon doctor`"
                ),
            })?;
        }
        Ok(())
    }

    /// Kills every process in the sandbox cgroup (`cgroup.kill`, or SIGKILL to each pid) and
    /// waits (bounded) until `cgroup.procs` is empty.
    pub fn kill(&self) {
        if self.pending.is_some() {
            return;
        }
        if let Kind::V2(dir) = &self.kind {
            // Absent before Linux 5.14: then the pid loop below does the work.
            let _ = self.fs.write(&dir.join("cgroup.kill"), "1");
        }
        kill_loop(
            self.fs.as_ref(),
            &self.procs_files(),
            self.own_pid,
            KILL_ROUNDS,
        );
    }

    pub fn metrics(&self) -> CgroupMetrics {
        if self.pending.is_some() {
            // Never made (the run ended before it could be): no figures of a cgroup that
            // did not exist; the caller falls back to rusage.
            return CgroupMetrics::default();
        }
        match &self.kind {
            Kind::V2(dir) => v2::metrics(self.fs.as_ref(), dir),
            Kind::V1(dirs) => v1::metrics(self.fs.as_ref(), dirs),
        }
    }

    /// Removes the cgroup(s), waiting briefly for the last tasks to leave.
    pub fn remove(mut self) -> Result<(), LimitsError> {
        self.removed = true;
        self.remove_dirs()
    }

    /// Removes the cgroup(s) of a sandbox whose processes should all be gone (its init has
    /// been reaped, and its pid namespace with it): `rmdir` at once, without reading the
    /// `cgroup.procs` files first (four files on cgroup v1), and only where one is still busy
    /// the kill loop, then the removal with its retries.
    pub fn remove_emptied(mut self) -> Result<(), LimitsError> {
        self.removed = true;
        if self.pending.is_some() {
            return Ok(());
        }
        let mut busy = false;
        for dir in self.dirs().iter().rev() {
            match self.fs.rmdir(dir) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(_) => busy = true,
            }
        }
        if !busy {
            return Ok(());
        }
        self.kill();
        self.remove_dirs()
    }

    /// Whether the directories are still to be made ([`Cgroup::create_pending`]).
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Makes a cgroup that [`prepare_deferred`] chose and checked: the directories, then the
    /// limits (removing what it made if a step fails). Nothing to do for one made already.
    pub fn create_pending(&mut self) -> Result<(), LimitsError> {
        let Some(p) = self.pending.as_deref() else {
            return Ok(());
        };
        let Kind::V1(dirs) = &self.kind else {
            return Ok(());
        };
        v1::make(self.fs.as_ref(), dirs, &p.host, &p.limits).map_err(|f| {
            // The checks (access W_OK) passed, so for root the usual fix (run as root) is
            // beside the point: something refused what the permissions allow.
            let fix = if p.host.uid == 0 {
                "check the v1 hierarchies (a security module, a cgroup count limit or a read-only mount refused what their permissions allow)"
            } else {
                f.fix
            };
            LimitsError::Unavailable(format!(
                "cannot create the sandbox's cgroup v1 (its checks had passed): {f}; fix: {fix}, or run with `--limits-backend rlimit`"
            ))
        })?;
        self.pending = None;
        Ok(())
    }

    /// Leaves the removal to the keeper (`launch::keeper`), which kills what is left and
    /// removes the cgroup once cordon tells it to, off the run's critical path: this value
    /// is dropped without removing anything.
    pub fn leave_to_keeper(mut self) {
        self.removed = true;
    }

    /// For the keeper process (`launch::keeper`) once cordon is gone: kill what is left in the
    /// cgroup and remove it, best-effort. The keeper's own copy of this value is never
    /// dropped (it leaves with `_exit`), so cordon's removal is not repeated.
    pub fn clean_up_after_owner(&self) {
        self.kill();
        let _ = self.remove_dirs();
    }

    fn remove_dirs(&self) -> Result<(), LimitsError> {
        if self.pending.is_some() {
            // Never made (or its making failed and removed what it made).
            return Ok(());
        }
        let mut first_err = None;
        for dir in self.dirs().iter().rev() {
            if let Err(e) = rmdir_retry(self.fs.as_ref(), dir, self.remove_timeout) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for Cgroup {
    /// Nothing outlives a run: a cgroup the launcher did not remove is killed and removed here.
    fn drop(&mut self) {
        if !self.removed {
            self.kill();
            let _ = self.remove_dirs();
        }
    }
}

/// SIGKILLs every pid listed in `procs` until they are all empty, at most `rounds` times.
/// Returns whether nothing (but cordon itself) was left to kill.
fn kill_loop(fs: &dyn CgroupFs, procs: &[PathBuf], own_pid: u32, rounds: u32) -> bool {
    for _ in 0..rounds {
        let mut any = false;
        for file in procs {
            let Ok(text) = fs.read(file) else { continue };
            for pid in text.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                // 0: a process of another pid namespace; never ourselves or init.
                if pid <= 1 || pid as u32 == own_pid {
                    continue;
                }
                any = true;
                let _ = fs.kill(pid, file);
            }
        }
        if !any {
            return true;
        }
        std::thread::sleep(KILL_PAUSE);
    }
    false
}

/// `rmdir`, retried on EBUSY until `timeout` (the last tasks may still be exiting). A directory
/// already gone counts as removed.
fn rmdir_retry(fs: &dyn CgroupFs, dir: &Path, timeout: Duration) -> Result<(), LimitsError> {
    let deadline = Instant::now() + timeout;
    loop {
        match fs.rmdir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(source) => {
                return Err(LimitsError::Io {
                    step: "remove the cgroup",
                    path: dir.to_path_buf(),
                    fix: format!(
                        "{}; processes may still be in it: kill the pids in its cgroup.procs, then `rmdir {}`",
                        errno_text(&source),
                        dir.display()
                    ),
                    source,
                });
            }
        }
    }
}

/// `key value` lines (`cpu.stat`, `memory.events`, `memory.oom_control`): the value of `key`.
pub fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key))
            .then(|| it.next()?.parse().ok())
            .flatten()
    })
}

/// The owner pid of a sandbox cgroup name `cordon-<pid>-<run_id>`.
fn owner_pid(name: &str) -> Option<u32> {
    let (pid, run) = name.strip_prefix("cordon-")?.split_once('-')?;
    if run.is_empty() {
        return None;
    }
    pid.parse().ok()
}

/// How old an empty `cordon-<pid>-*` cgroup of an owner not seen alive must be before
/// [`gc_stale`] removes it. A cordon in another pid namespace (a container, `unshare -p`)
/// whose cgroups are below the same parent has a pid this one cannot see; the moment between
/// its making its cgroup and its sandbox's init moving in, the cgroup is empty, and removing
/// it then fails that run. Its keeper removes it anyway when that cordon dies; the collection
/// is for what both left.
pub const STALE_MIN_AGE: Duration = Duration::from_secs(60);

/// Removes `cordon-<pid>-*` cgroups under cordon's own cgroups whose `<pid>` no longer exists
/// (a cordon that was SIGKILLed) and that are [`STALE_MIN_AGE`] old. Best-effort, and only
/// `rmdir`: a cgroup that still holds processes (EBUSY) is left alone, so a live sandbox whose
/// owner we cannot see (another pid namespace) is never touched, and a young one is not
/// either. Returns the directories removed.
pub fn gc_stale(fs: &dyn CgroupFs, layout: &Layout, own_pid: u32) -> Vec<PathBuf> {
    let mut parents: Vec<&Path> = Vec::new();
    for loc in layout.v2.iter().chain(layout.v1.values()) {
        if !parents.contains(&loc.own.as_path()) {
            parents.push(&loc.own);
        }
    }
    let mut removed = Vec::new();
    for parent in parents {
        let Ok(names) = fs.subdirs(parent) else {
            continue;
        };
        for name in names {
            let Some(pid) = owner_pid(&name) else {
                continue;
            };
            if pid == own_pid || pid > i32::MAX as u32 || fs.alive(pid as i32) {
                continue;
            }
            let dir = parent.join(&name);
            if fs.age(&dir).is_none_or(|a| a < STALE_MIN_AGE) {
                continue;
            }
            if fs.rmdir(&dir).is_ok() {
                removed.push(dir);
            }
        }
    }
    removed
}

/// Removal of stale `cordon-<pid>-*` cgroups ([`gc_stale`]) in the hierarchies
/// [`prepare_deferred`] found. The launcher runs it while the sandbox's init builds the root
/// (cordon only waits then), not before the clone, where listing the parent cgroups of every
/// hierarchy cost about 0.1 ms of every start.
#[derive(Debug)]
pub struct StaleGc {
    fs: Arc<dyn CgroupFs>,
    layout: Layout,
    pid: u32,
}

impl StaleGc {
    /// Removes them; returns what was removed.
    pub fn run(self) -> Vec<PathBuf> {
        gc_stale(self.fs.as_ref(), &self.layout, self.pid)
    }
}

/// The outcome of [`prepare_deferred`].
#[derive(Debug)]
pub struct Prepared {
    pub cgroup: Option<Cgroup>,
    /// Stale cgroups to remove once the sandbox is under way (none without a cgroup layout).
    pub stale_gc: Option<StaleGc>,
    /// rlimits for the payload: always NOFILE, FSIZE, CORE=0; plus AS/CPU/NPROC fallbacks.
    pub rlimits: Vec<Rlimit>,
    /// Under the rlimit backend, the CPUs the payload is pinned to for `--cpus` (see
    /// [`cpu_pin`]).
    pub cpu_pin: Option<Vec<usize>>,
    pub report: LimitsReport,
}

/// The CPUs a sandbox without a cgroup is pinned to for `--cpus c`: `ceil(c)` of those cordon
/// may run on (at most all of them), starting at one chosen by cordon's pid so that
/// concurrent sandboxes spread over the machine. The payload sets its affinity before it
/// execs and may not change it (`profiles/seccomp/cpu-pin.toml`): what rlimits cannot do,
/// a CPU set does, in whole CPUs.
pub fn cpu_pin(c: f64) -> Result<Vec<usize>, nix::Error> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))?;
    let allowed: Vec<usize> = (0..nix::sched::CpuSet::count())
        .filter(|&i| set.is_set(i).unwrap_or(false))
        .collect();
    if allowed.is_empty() {
        return Err(nix::Error::EINVAL);
    }
    let n = (c.ceil() as usize).clamp(1, allowed.len());
    let start = std::process::id() as usize % allowed.len();
    Ok((0..n)
        .map(|k| allowed[(start + k) % allowed.len()])
        .collect())
}

/// Chooses the backend and checks it; a cgroup v2 is created with its limits at once. `run_id`
/// makes the cgroup name unique (`cordon-<pid>-<run_id>`).
///
/// A cgroup v1 is only chosen and checked (each controller's hierarchy found, cordon's cgroup
/// there writable), not made: the launcher makes it with [`Cgroup::create_pending`] after its
/// clone, while init builds the sandbox's root. Making four v1 groups and writing their limits
/// (the memory controller's `mkdir` alone is about 0.2 ms) was on the start-up's critical
/// path. A failure then is an error of the run, not a fall-back to rlimits: the backend was
/// already reported chosen.
pub fn prepare_deferred(
    limits: &Limits,
    choice: BackendChoice,
    run_id: &str,
) -> Result<Prepared, LimitsError> {
    validate(limits, run_id)?;
    if choice == BackendChoice::Rlimit {
        return Ok(rlimit_only(limits, "rlimit (forced)".to_string()));
    }
    match HostPaths::from_host() {
        Ok(host) => prepare_inner(
            Arc::new(RealFs),
            &host,
            limits,
            choice,
            run_id,
            Some(&FromEnv::default()),
        ),
        Err(source) if choice == BackendChoice::Auto => Ok(rlimit_only(
            limits,
            format!(
                "rlimit (cannot read {}: {})",
                host::PROC_SELF_CGROUP,
                errno_text(&source)
            ),
        )),
        Err(source) => Err(LimitsError::Io {
            step: "read",
            path: PathBuf::from(host::PROC_SELF_CGROUP),
            source,
            fix: "mount /proc (cordon needs it to find its own cgroup), or use `--limits-backend rlimit`"
                .to_string(),
        }),
    }
}

fn validate(limits: &Limits, run_id: &str) -> Result<(), LimitsError> {
    let ok_id = !run_id.is_empty()
        && run_id.len() <= 64
        && !run_id.starts_with('.')
        && run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !ok_id {
        return Err(LimitsError::Invalid {
            what: "run id",
            value: run_id.to_string(),
            why: "it names a cgroup directory: use 1-64 of [A-Za-z0-9_.-], not starting with '.'",
        });
    }
    if let Some(c) = limits.cpus
        && !(c.is_finite() && c > 0.0)
    {
        return Err(LimitsError::Invalid {
            what: "cpus limit",
            value: c.to_string(),
            why: "give a positive number of CPUs, e.g. 0.5 or 2",
        });
    }
    Ok(())
}

/// [`prepare_deferred`] on given host paths and filesystem (the unit tests pass a fake tree),
/// never asking for a systemd scope, followed by [`Cgroup::create_pending`] as the launcher
/// does after its clone: the result's cgroup, if any, exists with its limits written.
pub fn prepare_with(
    fs: Arc<dyn CgroupFs>,
    host: &HostPaths,
    limits: &Limits,
    choice: BackendChoice,
    run_id: &str,
) -> Result<Prepared, LimitsError> {
    prepare_with_scope(fs, host, limits, choice, run_id, None)
}

/// Whether cordon asks `scope` for a delegated cgroup after its own failed: an unprivileged
/// caller on a pure cgroup v2 host (root needs no delegation; on hybrid and v1 hosts the
/// controllers are not on cgroup v2 at all).
fn wants_user_scope(host: &HostPaths, layout: &Layout) -> bool {
    host.uid != 0 && layout.version == CgroupVersion::V2
}

/// [`prepare_with`], and when cordon's own cgroup v2 is not usable, a delegated scope from
/// `scope` (see [`wants_user_scope`]); `None`: never.
pub fn prepare_with_scope(
    fs: Arc<dyn CgroupFs>,
    host: &HostPaths,
    limits: &Limits,
    choice: BackendChoice,
    run_id: &str,
    scope: Option<&dyn UserScope>,
) -> Result<Prepared, LimitsError> {
    let mut prepared = prepare_inner(fs, host, limits, choice, run_id, scope)?;
    if let Some(cg) = prepared.cgroup.as_mut() {
        cg.create_pending()?;
    }
    Ok(prepared)
}

fn prepare_inner(
    fs: Arc<dyn CgroupFs>,
    host: &HostPaths,
    limits: &Limits,
    choice: BackendChoice,
    run_id: &str,
    scope: Option<&dyn UserScope>,
) -> Result<Prepared, LimitsError> {
    validate(limits, run_id)?;
    if choice == BackendChoice::Rlimit {
        return Ok(rlimit_only(limits, "rlimit (forced)".to_string()));
    }
    let layout = match Layout::discover(fs.as_ref(), host) {
        Ok(l) => l,
        Err(why) if choice == BackendChoice::Auto => {
            return Ok(rlimit_only(limits, format!("rlimit ({why})")));
        }
        Err(why) => {
            return Err(LimitsError::BackendUnavailable {
                backend: choice_name(choice),
                reason: why,
                fix: "check that /proc is mounted, or use `--limits-backend rlimit`".to_string(),
            });
        }
    };
    let stale_gc = StaleGc {
        fs: fs.clone(),
        layout: layout.clone(),
        pid: host.pid,
    };
    match choose(fs, host, &layout, limits, choice, run_id, scope) {
        Ok(mut prepared) => {
            prepared.stale_gc = Some(stale_gc);
            Ok(prepared)
        }
        Err(e) => {
            stale_gc.run();
            Err(e)
        }
    }
}

/// The backend for `choice` on `layout`: the first that works, in the order of the module's
/// documentation, or the error of a forced one.
fn choose(
    fs: Arc<dyn CgroupFs>,
    host: &HostPaths,
    layout: &Layout,
    limits: &Limits,
    choice: BackendChoice,
    run_id: &str,
    scope: Option<&dyn UserScope>,
) -> Result<Prepared, LimitsError> {
    let name = format!("cordon-{}-{run_id}", host.pid);
    // Each backend skipped, why, and its fix.
    let mut skipped: Vec<(String, &'static str)> = Vec::new();

    if matches!(choice, BackendChoice::Auto | BackendChoice::CgroupV2) {
        match v2::create(fs.as_ref(), layout, host, &name, limits) {
            Ok((dir, applied)) => {
                let text = match &applied.moved_to {
                    Some(leaf) => format!(
                        "cgroup v2 ({}; cordon moved itself into the leaf {} first: cgroup v2 \
                         enables controllers only in a cgroup without processes)",
                        dir.display(),
                        leaf.display()
                    ),
                    None => format!("cgroup v2 ({})", dir.display()),
                };
                return Ok(with_cgroup(
                    fs,
                    host,
                    limits,
                    (Backend::CgroupV2, Kind::V2(dir)),
                    text,
                    &skipped,
                    applied.swap_limited,
                ));
            }
            Err(f) if let Some(scope) = scope.filter(|_| wants_user_scope(host, layout)) => {
                match in_user_scope(fs.as_ref(), host, scope, &name, limits, run_id, &f) {
                    Ok((dir, applied, text)) => {
                        return Ok(with_cgroup(
                            fs,
                            host,
                            limits,
                            (Backend::CgroupV2, Kind::V2(dir)),
                            text,
                            &skipped,
                            applied.swap_limited,
                        ));
                    }
                    Err(f) if choice == BackendChoice::CgroupV2 => return Err(forced(choice, f)),
                    Err(f) => skipped.push((format!("cgroup v2 {f}"), f.fix)),
                }
            }
            Err(f) if choice == BackendChoice::CgroupV2 => return Err(forced(choice, f)),
            Err(f) => skipped.push((format!("cgroup v2 {f}"), f.fix)),
        }
    }
    if matches!(choice, BackendChoice::Auto | BackendChoice::CgroupV1) {
        match v1::check(fs.as_ref(), layout, host) {
            Ok(()) => {
                let swap = limits.memory.is_some() && v1::swap_file_exists(fs.as_ref(), layout);
                let sockets = v1::sockets_file_exists(fs.as_ref(), layout);
                let mut prepared = with_cgroup(
                    fs,
                    host,
                    limits,
                    (Backend::CgroupV1, Kind::V1(v1::dirs(layout, &name))),
                    format!("cgroup v1 ({name} in memory, pids, cpu, cpuacct)"),
                    &skipped,
                    swap,
                );
                if let Some(note) = prepared
                    .report
                    .memory_bytes
                    .as_mut()
                    .and_then(|m| m.note.as_mut())
                {
                    note.push_str(if sockets {
                        "; socket buffers held to the same size apart (memory.kmem.tcp.limit_in_bytes)"
                    } else {
                        "; socket buffers NOT limited (this kernel has no memory.kmem.tcp.limit_in_bytes, which cgroup v1 needs for them)"
                    });
                }
                if let Some(cg) = prepared.cgroup.as_mut() {
                    cg.pending = Some(Box::new(Pending {
                        host: host.clone(),
                        limits: limits.clone(),
                    }));
                }
                return Ok(prepared);
            }
            Err(f) if choice == BackendChoice::CgroupV1 => return Err(forced(choice, f)),
            Err(f) => skipped.push((format!("cgroup v1 {f}"), f.fix)),
        }
    }
    Ok(rlimit_only(limits, rlimit_text(&skipped)))
}

/// cordon's own cgroup failed with `own_failure`: asks `scope` for a delegated scope, then
/// creates the sandbox cgroup in it. The error keeps both reasons (the scope's is the bus's
/// own text) and the fix.
fn in_user_scope(
    fs: &dyn CgroupFs,
    host: &HostPaths,
    scope: &dyn UserScope,
    name: &str,
    limits: &Limits,
    run_id: &str,
    own_failure: &Failure,
) -> Result<(PathBuf, v2::V2Applied, String), Failure> {
    let obtained = scope.obtain(host.pid, run_id).map_err(|why| Failure {
        summary: own_failure.summary.clone(),
        step: own_failure.step.clone(),
        path: own_failure.path.clone(),
        cause: format!(
            "{}; and no delegated scope from the systemd user manager: {why}",
            own_failure.cause
        ),
        fix: if own_failure.fix == host::fixes::V2_DELEGATE {
            host::fixes::V2_SCOPE
        } else {
            own_failure.fix
        },
    })?;
    let moved = HostPaths {
        proc_self_cgroup: obtained.proc_self_cgroup.clone(),
        ..host.clone()
    };
    let in_scope = |f: Failure| Failure {
        summary: format!("in the systemd scope {}: {}", obtained.unit, f.summary),
        fix: if f.fix == host::fixes::V2_DELEGATE {
            host::fixes::V2_SCOPE
        } else {
            f.fix
        },
        ..f
    };
    let layout = Layout::discover(fs, &moved).map_err(|why| {
        in_scope(Failure::other(
            "cannot find the scope's cgroup",
            "read",
            Path::new(host::PROC_SELF_CGROUP),
            why,
            host::fixes::V2_SCOPE,
        ))
    })?;
    let (dir, applied) = v2::create(fs, &layout, &moved, name, limits).map_err(in_scope)?;
    let mut text = format!(
        "cgroup v2 ({}; in the transient scope {} that cordon obtained from the systemd user \
         manager with Delegate=yes, since its own cgroup was not usable: {}",
        dir.display(),
        obtained.unit,
        own_failure
    );
    if let Some(leaf) = &applied.moved_to {
        text.push_str(&format!(
            "; cordon moved itself into the leaf {} first: cgroup v2 enables controllers only \
             in a cgroup without processes",
            leaf.display()
        ));
    }
    text.push(')');
    Ok((dir, applied, text))
}

fn choice_name(choice: BackendChoice) -> &'static str {
    match choice {
        BackendChoice::Auto => "auto",
        BackendChoice::CgroupV2 => "cgroup-v2",
        BackendChoice::CgroupV1 => "cgroup-v1",
        BackendChoice::Rlimit => "rlimit",
    }
}

fn forced(choice: BackendChoice, f: Failure) -> LimitsError {
    LimitsError::BackendUnavailable {
        backend: choice_name(choice),
        reason: f.to_string(),
        fix: f.fix.to_string(),
    }
}

fn with_skipped(text: String, skipped: &[(String, &'static str)]) -> String {
    if skipped.is_empty() {
        text
    } else {
        format!("{text}; skipped: {}", with_fixes(skipped).join("; "))
    }
}

/// Each skipped backend with its reason and its fix.
fn with_fixes(skipped: &[(String, &'static str)]) -> Vec<String> {
    skipped
        .iter()
        .map(|(why, fix)| format!("{why} (fix: {fix})"))
        .collect()
}

/// The backend note of the rlimit fallback: why each cgroup backend was skipped, and the fix.
/// An unprivileged caller on a host whose controllers are on cgroup v1 gets one fix for both
/// (run as root, or boot with cgroup v2), said once.
fn rlimit_text(skipped: &[(String, &'static str)]) -> String {
    let fixes: Vec<&str> = skipped.iter().map(|(_, fix)| *fix).collect();
    if fixes == [host::fixes::V2_ON_HYBRID, host::fixes::V1_ROOT] {
        let why: Vec<&str> = skipped.iter().map(|(why, _)| why.as_str()).collect();
        return format!(
            "rlimit ({}; fix: {})",
            why.join("; "),
            host::fixes::V1_HOST_UNPRIVILEGED
        );
    }
    format!("rlimit ({})", with_fixes(skipped).join("; "))
}

/// The prepared run of a cgroup backend; `text` describes it (the skipped backends are
/// appended), `swap_limited`: its swap limit was set.
fn with_cgroup(
    fs: Arc<dyn CgroupFs>,
    host: &HostPaths,
    limits: &Limits,
    (backend, kind): (Backend, Kind),
    text: String,
    skipped: &[(String, &'static str)],
    swap_limited: bool,
) -> Prepared {
    let report = report(limits, backend, with_skipped(text, skipped), swap_limited);
    let cgroup = Cgroup {
        backend,
        kind,
        fs,
        own_pid: host.pid,
        removed: false,
        remove_timeout: REMOVE_TIMEOUT,
        pending: None,
    };
    Prepared {
        cgroup: Some(cgroup),
        stale_gc: None,
        rlimits: rlimit::rlimits(limits, backend),
        cpu_pin: None,
        report,
    }
}

fn rlimit_only(limits: &Limits, backend_text: String) -> Prepared {
    let pin = limits.cpus.map(cpu_pin);
    let mut report = report(limits, Backend::Rlimit, backend_text, false);
    if let (Some(c), Some(pin)) = (limits.cpus, &pin) {
        report.cpus = Some(pin_report(c, pin.as_deref()));
    }
    Prepared {
        cgroup: None,
        stale_gc: None,
        rlimits: rlimit::rlimits(limits, Backend::Rlimit),
        cpu_pin: pin.and_then(Result::ok),
        report,
    }
}

/// A note for a CPU quota of `c` CPUs above the `available` ones cordon may run on (its
/// affinity, its cgroup's quota): the quota is set as asked, but cannot be reached.
fn beyond_the_host(c: f64, available: Option<std::num::NonZeroUsize>) -> String {
    match available {
        Some(n) if c > n.get() as f64 => {
            format!("; more than the {n} CPU(s) available here, so the sandbox gets at most {n}")
        }
        _ => String::new(),
    }
}

/// How `--cpus c` is held without a cgroup: the CPU set of [`cpu_pin`], or why not.
fn pin_report(c: f64, pin: Result<&[usize], &nix::Error>) -> LimitReport {
    match pin {
        Ok(cpus) => {
            let list = cpus
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",");
            let rounded = if (cpus.len() as f64) > c {
                format!("; {c} rounds up to {} whole CPU(s)", cpus.len())
            } else {
                beyond_the_host(c, std::num::NonZeroUsize::new(cpus.len()))
            };
            entry(
                c,
                Enforcement::Affinity,
                format!(
                    "CPU affinity: pinned to CPU {list} (no cgroup here: the sandbox may not change its affinity, sched_setaffinity answers EPERM{rounded}); {}",
                    host::fixes::CPUS_NO_CGROUP
                ),
            )
        }
        Err(e) => entry(
            c,
            Enforcement::NotEnforced,
            format!(
                "cannot read the CPUs cordon may use (sched_getaffinity: {e}); {}",
                host::fixes::CPUS_NO_CGROUP
            ),
        ),
    }
}

fn entry(value: f64, enforcement: Enforcement, note: impl Into<String>) -> LimitReport {
    LimitReport {
        value: Some(value),
        enforcement,
        note: Some(note.into()),
    }
}

/// The per-limit report for `backend`. `swap_limited`: the cgroup's swap file was set.
fn report(
    limits: &Limits,
    backend: Backend,
    backend_text: String,
    swap_limited: bool,
) -> LimitsReport {
    use Enforcement as E;
    let cg = match backend {
        Backend::CgroupV2 => Some(E::CgroupV2),
        Backend::CgroupV1 => Some(E::CgroupV1),
        Backend::Rlimit => None,
    };
    let memory = limits.memory.map(|m| match backend {
        Backend::CgroupV2 if swap_limited => entry(m as f64, E::CgroupV2, "memory.max; memory.swap.max = 0"),
        Backend::CgroupV2 => entry(
            m as f64,
            E::CgroupV2,
            "memory.max; swap not limited (memory.swap.max absent: swap accounting is off)",
        ),
        Backend::CgroupV1 if swap_limited => {
            entry(m as f64, E::CgroupV1, "memory.limit_in_bytes = memory.memsw.limit_in_bytes (no swap)")
        }
        Backend::CgroupV1 => entry(
            m as f64,
            E::CgroupV1,
            "memory.limit_in_bytes; swap not limited (memory.memsw.* absent: boot with swapaccount=1)",
        ),
        // Completed by the launch, which knows the caller and the network (rlimit::memory_note).
        Backend::Rlimit => entry(m as f64, E::Rlimit, rlimit::NOTE_WATCH),
    });
    let cpus = limits.cpus.map(|c| {
        let quota = v2::cpu_quota_us(c);
        let beyond = beyond_the_host(c, std::thread::available_parallelism().ok());
        match backend {
            Backend::CgroupV2 => entry(
                c,
                E::CgroupV2,
                format!("cpu.max = {quota} {}{beyond}", v2::CPU_PERIOD_US),
            ),
            Backend::CgroupV1 => entry(
                c,
                E::CgroupV1,
                format!(
                    "cpu.cfs_quota_us = {quota}, cpu.cfs_period_us = {}{beyond}",
                    v2::CPU_PERIOD_US
                ),
            ),
            Backend::Rlimit => entry(c, E::NotEnforced, host::fixes::CPUS_NO_CGROUP),
        }
    });
    let pids = limits.pids.map(|p| match cg {
        Some(e) => entry(p as f64, e, "pids.max"),
        None => entry(p as f64, E::Rlimit, rlimit::NOTE_NPROC),
    });
    LimitsReport {
        backend: match backend {
            Backend::CgroupV2 => "cgroup-v2",
            Backend::CgroupV1 => "cgroup-v1",
            Backend::Rlimit => "rlimit",
        }
        .to_string(),
        backend_note: Some(backend_text),
        wall_time_ms: Some(entry(
            limits.wall.as_secs_f64() * 1000.0,
            E::Supervisor,
            "wall clock; kills the sandbox",
        )),
        cpu_time_ms: limits.cpu_time.map(|t| match cg {
            // The supervisor reads the cgroup's counter (src/launch/supervise.rs); RLIMIT_CPU
            // is set too, per process.
            Some(e) => entry(
                t.as_secs_f64() * 1000.0,
                e,
                format!(
                    "the sandbox's CPU time summed over its processes (the cgroup's counter, read every {} ms); more kills the sandbox; also RLIMIT_CPU = {} s per process",
                    crate::launch::CPU_CHECK_EVERY.as_millis(),
                    rlimit::cpu_seconds(t)
                ),
            ),
            None => rlimit::cpu_time_report(t),
        }),
        memory_bytes: memory,
        cpus,
        pids,
        output_bytes: Some(entry(
            limits.output as f64,
            E::Supervisor,
            "each of stdout and stderr; more kills the sandbox",
        )),
        file_size_bytes: limits
            .file_size
            .map(|f| rlimit::report(f as f64, Some("RLIMIT_FSIZE".into()))),
        open_files: Some(rlimit::report(
            limits.open_files as f64,
            Some("RLIMIT_NOFILE".into()),
        )),
        workspace_bytes: Some(entry(
            limits.workspace_size as f64,
            E::Tmpfs,
            format!("/workspace tmpfs size, {} inodes", limits.workspace_inodes),
        )),
        tmp_bytes: Some(entry(
            limits.tmp_size as f64,
            E::Tmpfs,
            format!("/tmp and /dev/shm tmpfs size, {} inodes", limits.tmp_inodes),
        )),
    }
}

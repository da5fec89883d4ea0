//! cgroup v2: one leaf directory under cordon's own cgroup, with `memory.max`,
//! `memory.swap.max`, `pids.max` and `cpu.max`; `cgroup.kill` to end it.
//!
//! The "no internal processes" rule (`Documentation/admin-guide/cgroup-v2.rst`): a non-root
//! cgroup may enable controllers for its children only while it holds no process. cordon runs
//! in its own cgroup, so when the controllers are not yet enabled there it does what crun and
//! systemd do: if it is the only process in that cgroup (a `systemd-run --scope -p
//! Delegate=yes cordon ...` scope, say) it first moves itself into the leaf
//! `cordon-<pid>-supervisor`, then enables memory, pids and cpu, then creates the sandbox
//! cgroup next to that leaf. Other processes in cordon's cgroup belong to the caller: cordon
//! does not move them, and says so (the backend is skipped with the pids and the fix). The
//! supervisor leaf holds cordon until it exits, so cordon cannot remove it; the next cordon in
//! the same cgroup removes it as stale (see `gc_stale`), and systemd removes a scope's whole
//! subtree with the scope.
//!
//! `CLONE_INTO_CGROUP` (clone3, Linux 5.7) is not used: the launcher clones init into cordon's
//! cgroup and moves it into the sandbox cgroup before sending "go", and init runs nothing of
//! the sandbox before "go", so the payload never runs outside the sandbox cgroup either way.
//! One clone path serves v2, v1 (where CLONE_INTO_CGROUP does not exist) and rlimits, and
//! `sys::clone_namespaces` stays a plain clone(2) wrapper.

use super::host::{CgroupFs, Failure, HostPaths, Layout, Location, V2_CONTROLLERS, fixes};
use super::{CgroupMetrics, keyed_value};
use crate::outcome::MetricSource;
use crate::spec::Limits;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `cpu.max` period, the kernel's default (`Documentation/admin-guide/cgroup-v2.rst`).
pub const CPU_PERIOD_US: u64 = 100_000;
/// The smallest quota the kernel accepts (1 ms).
pub const CPU_MIN_QUOTA_US: u64 = 1_000;

/// `<quota> <period>` for a bandwidth of `cpus` CPUs.
pub fn cpu_quota_us(cpus: f64) -> u64 {
    ((cpus * CPU_PERIOD_US as f64).round() as u64).max(CPU_MIN_QUOTA_US)
}

/// What the v2 backend managed to set, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V2Applied {
    /// `memory.swap.max` existed and was set to 0.
    pub swap_limited: bool,
    /// The leaf cgroup cordon moved itself into to obey the no-internal-processes rule.
    pub moved_to: Option<PathBuf>,
}

/// The leaf cordon moves itself into (see the module doc). Named like a sandbox cgroup so that
/// stale-cgroup GC removes it once cordon is gone.
pub fn supervisor_leaf(own: &Path, pid: u32) -> PathBuf {
    own.join(format!("cordon-{pid}-supervisor"))
}

/// What to do on a host whose controllers are on cgroup v1: root has them there already.
fn on_hybrid(host: &HostPaths) -> &'static str {
    if host.uid == 0 {
        fixes::V2_ON_HYBRID_ROOT
    } else {
        fixes::V2_ON_HYBRID
    }
}

/// The checks that need no write: a cgroup2 mount, cordon's own cgroup in it, the controllers
/// available there, and `cgroup.procs` writable (moving the child needs it).
pub fn check<'a>(
    fs: &dyn CgroupFs,
    layout: &'a Layout,
    host: &HostPaths,
) -> Result<&'a Location, Failure> {
    let Some(loc) = &layout.v2 else {
        let fix = if layout.v1.is_empty() {
            fixes::V2_NO_MOUNT
        } else {
            on_hybrid(host)
        };
        return Err(Failure::other(
            "not mounted",
            "find a cgroup2 mount at",
            &host.cgroup_root,
            "no cgroup.controllers there or in unified/, or no `0::` line in /proc/self/cgroup",
            fix,
        ));
    };
    let controllers_file = loc.own.join("cgroup.controllers");
    let available = fs.read(&controllers_file).map_err(|e| {
        Failure::io(
            "unreadable",
            "read",
            &controllers_file,
            &e,
            fixes::V2_DELEGATE,
        )
    })?;
    let missing: Vec<&str> = V2_CONTROLLERS
        .iter()
        .copied()
        .filter(|c| !available.split_whitespace().any(|a| a == *c))
        .collect();
    if !missing.is_empty() {
        let on_v1 = missing.iter().any(|c| layout.v1.contains_key(c));
        let (summary, fix) = if on_v1 {
            (
                format!(
                    "has no {} controller (bound to cgroup v1)",
                    missing.join("/")
                ),
                on_hybrid(host),
            )
        } else {
            (
                format!(
                    "has no {} controller delegated to cordon's cgroup",
                    missing.join("/")
                ),
                fixes::V2_DELEGATE,
            )
        };
        return Err(Failure::other(
            summary,
            "find the controllers in",
            &controllers_file,
            format!("it lists only {:?}", available.trim()),
            fix,
        ));
    }
    super::host::check_writable(fs, &loc.own, host.uid, fixes::V2_DELEGATE)?;
    // A delegated cgroup also lets its owner enable controllers for the children; needed only
    // while they are not enabled yet.
    let subtree = loc.own.join("cgroup.subtree_control");
    let enabled = fs.read(&subtree).unwrap_or_default();
    let all_enabled = V2_CONTROLLERS
        .iter()
        .all(|c| enabled.split_whitespace().any(|e| e == *c));
    if !all_enabled && !fs.writable(&subtree) {
        let e = std::io::Error::from_raw_os_error(libc::EACCES);
        return Err(Failure::io(
            format!("not writable by uid {}", host.uid),
            "write to",
            &subtree,
            &e,
            fixes::V2_DELEGATE,
        ));
    }
    Ok(loc)
}

/// Enables the controllers for cordon's children (when not yet), creates `own/name` and
/// writes the limits. On any failure nothing is left behind, except cordon's own leaf (see the
/// module doc) when the controllers were enabled already.
pub fn create(
    fs: &dyn CgroupFs,
    layout: &Layout,
    host: &HostPaths,
    name: &str,
    limits: &Limits,
) -> Result<(PathBuf, V2Applied), Failure> {
    let loc = check(fs, layout, host)?;
    let moved_to = make_room(fs, loc, host)?;
    if let Err(f) = enable_controllers(fs, &loc.own, host) {
        // Nothing was enabled, so cordon may move back, and the leaf goes.
        if let Some(leaf) = &moved_to {
            let back = fs.write(&loc.own.join("cgroup.procs"), &host.pid.to_string());
            if back.is_ok() {
                let _ = fs.rmdir(leaf);
            }
        }
        return Err(f);
    }
    let dir = loc.own.join(name);
    fs.mkdir(&dir).map_err(|e| {
        let summary = match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => format!("not writable by uid {}", host.uid),
            _ => "cannot create the sandbox cgroup".to_string(),
        };
        Failure::io(
            summary,
            "create the cgroup directory",
            &dir,
            &e,
            fixes::V2_DELEGATE,
        )
    })?;
    match write_limits(fs, &dir, limits) {
        Ok(applied) => Ok((
            dir,
            V2Applied {
                moved_to,
                ..applied
            },
        )),
        Err(f) => {
            let _ = fs.rmdir(&dir);
            Err(f)
        }
    }
}

/// The pids in `own/cgroup.procs` other than cordon's own, when enabling the controllers there
/// is still to be done and the no-internal-processes rule applies (not the root cgroup).
/// `None`: nothing to enable, or the rule does not apply.
pub fn internal_processes(
    fs: &dyn CgroupFs,
    loc: &Location,
    own_pid: u32,
) -> Option<(Vec<u32>, bool)> {
    if loc.own == loc.mount {
        return None;
    }
    let enabled = fs
        .read(&loc.own.join("cgroup.subtree_control"))
        .unwrap_or_default();
    if V2_CONTROLLERS
        .iter()
        .all(|c| enabled.split_whitespace().any(|e| e == *c))
    {
        return None;
    }
    let procs = fs.read(&loc.own.join("cgroup.procs")).unwrap_or_default();
    let pids: Vec<u32> = procs
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let has_self = pids.contains(&own_pid);
    let others: Vec<u32> = pids.into_iter().filter(|&p| p != own_pid).collect();
    Some((others, has_self))
}

/// Obeys the no-internal-processes rule before the controllers are enabled in `own`: when
/// cordon is the only process there, it moves itself into [`supervisor_leaf`]; when other
/// processes are there, it fails and names them. Returns the leaf it moved into.
fn make_room(
    fs: &dyn CgroupFs,
    loc: &Location,
    host: &HostPaths,
) -> Result<Option<PathBuf>, Failure> {
    let Some((others, has_self)) = internal_processes(fs, loc, host.pid) else {
        return Ok(None);
    };
    let procs = loc.own.join("cgroup.procs");
    if !others.is_empty() {
        let list: Vec<String> = others.iter().take(8).map(u32::to_string).collect();
        return Err(Failure::other(
            format!(
                "cannot enable controllers for children: cordon's own cgroup holds {} other \
                 process(es), which cordon does not move",
                others.len()
            ),
            "find cordon alone in",
            &procs,
            format!(
                "pids {}{} besides cordon (pid {})",
                list.join(", "),
                if others.len() > 8 { ", ..." } else { "" },
                host.pid
            ),
            fixes::V2_INTERNAL_PROCESSES,
        ));
    }
    if !has_self {
        return Ok(None);
    }
    let leaf = supervisor_leaf(&loc.own, host.pid);
    let fail = |step: &str, path: &Path, e: &std::io::Error| {
        let summary = match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => format!("not writable by uid {}", host.uid),
            _ => "cannot move cordon into a leaf cgroup".to_string(),
        };
        Failure::io(summary, step, path, e, fixes::V2_DELEGATE)
    };
    match fs.mkdir(&leaf) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
        Err(e) => return Err(fail("create cordon's leaf cgroup", &leaf, &e)),
    }
    let leaf_procs = leaf.join("cgroup.procs");
    if let Err(e) = fs.write(&leaf_procs, &host.pid.to_string()) {
        let _ = fs.rmdir(&leaf);
        return Err(fail("move cordon itself into", &leaf_procs, &e));
    }
    Ok(Some(leaf))
}

/// Writes `+memory +pids +cpu` (the missing ones) to `own/cgroup.subtree_control`.
fn enable_controllers(fs: &dyn CgroupFs, own: &Path, host: &HostPaths) -> Result<(), Failure> {
    let file = own.join("cgroup.subtree_control");
    let enabled = fs
        .read(&file)
        .map_err(|e| Failure::io("unreadable", "read", &file, &e, fixes::V2_DELEGATE))?;
    let missing: Vec<String> = V2_CONTROLLERS
        .iter()
        .filter(|c| !enabled.split_whitespace().any(|e| e == **c))
        .map(|c| format!("+{c}"))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    fs.write(&file, &missing.join(" ")).map_err(|e| {
        let (summary, fix) = match e.raw_os_error() {
            Some(libc::EBUSY) => (
                "cannot enable controllers for children (cordon's own cgroup has processes)"
                    .to_string(),
                fixes::V2_INTERNAL_PROCESSES,
            ),
            Some(libc::EACCES) | Some(libc::EPERM) => (
                format!("not writable by uid {}", host.uid),
                fixes::V2_DELEGATE,
            ),
            _ => (
                "cannot enable controllers for children".to_string(),
                fixes::V2_DELEGATE,
            ),
        };
        Failure::io(
            summary,
            &format!("write {:?} to", missing.join(" ")),
            &file,
            &e,
            fix,
        )
    })
}

fn set(fs: &dyn CgroupFs, dir: &Path, file: &str, value: &str) -> Result<(), Failure> {
    let path = dir.join(file);
    fs.write(&path, value).map_err(|e| {
        Failure::io(
            "cannot set a limit",
            &format!("write {value:?} to"),
            &path,
            &e,
            "check that the value is in range and that the controller is enabled in the parent's \
             cgroup.subtree_control",
        )
    })
}

pub fn write_limits(fs: &dyn CgroupFs, dir: &Path, limits: &Limits) -> Result<V2Applied, Failure> {
    if let Some(bytes) = limits.memory {
        set(fs, dir, "memory.max", &bytes.to_string())?;
    }
    // No swap for the sandbox: the file is absent when swap accounting is off.
    let swap_limited = fs.exists(&dir.join("memory.swap.max"));
    if swap_limited {
        set(fs, dir, "memory.swap.max", "0")?;
    }
    if let Some(n) = limits.pids {
        set(fs, dir, "pids.max", &n.to_string())?;
    }
    if let Some(cpus) = limits.cpus {
        set(
            fs,
            dir,
            "cpu.max",
            &format!("{} {CPU_PERIOD_US}", cpu_quota_us(cpus)),
        )?;
    }
    Ok(V2Applied {
        swap_limited,
        moved_to: None,
    })
}

/// `memory.peak` (bytes), `cpu.stat` `usage_usec`, `memory.events` `oom_kill`,
/// `pids.events.local` (else `pids.events`) `max`.
pub fn metrics(fs: &dyn CgroupFs, dir: &Path) -> CgroupMetrics {
    let read = |f: &str| fs.read(&dir.join(f)).ok();
    CgroupMetrics {
        peak_memory: read("memory.peak").and_then(|t| t.trim().parse().ok()),
        cpu_time: read("cpu.stat")
            .and_then(|t| keyed_value(&t, "usage_usec"))
            .map(Duration::from_micros),
        oom_kills: read("memory.events").and_then(|t| keyed_value(&t, "oom_kill")),
        // pids.events.local (Linux 6.10+) counts only this group's own limit; pids.events
        // before it, whose `max` a fork refused by an ancestor's limit also raises.
        pids_limit_hits: read("pids.events.local")
            .or_else(|| read("pids.events"))
            .and_then(|t| keyed_value(&t, "max")),
        source: Some(MetricSource::CgroupV2),
    }
}

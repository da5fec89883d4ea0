//! The container's cgroup: created from `linux.cgroupsPath`, limits from `linux.resources`,
//! frozen by pause, read by ps/events, removed by delete. cgroup v2 (one unified hierarchy
//! with controllers) or v1 (one directory per controller hierarchy; the hybrid layout of
//! this kind of host). Every resource cordon cannot write is an error naming the field.

use oci_spec::runtime::LinuxResources;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cannot {step} {path}: {source}")]
    Io {
        step: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("config.json: `{field}` cannot be applied: {why}")]
    Resource { field: String, why: String },
    #[error("cannot read the cgroup mounts (/proc/self/mountinfo): {0}")]
    Mounts(std::io::Error),
}

fn io(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError {
    let path = path.display().to_string();
    move |source| CgroupError::Io { step, path, source }
}

/// v1 controllers a container gets a directory in (cpuset only on demand: a new cpuset
/// directory starts with no CPUs and refuses tasks).
const V1_CONTROLLERS: &[&str] = &["memory", "cpu", "cpuacct", "pids", "freezer", "devices"];

/// One cgroup hierarchy: its mount point, and its controllers (v1) or `None` (v2).
pub type Hierarchy = (PathBuf, Option<Vec<String>>);

/// Mount points of the cgroup hierarchies.
pub fn hierarchies() -> Result<Vec<Hierarchy>, CgroupError> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").map_err(CgroupError::Mounts)?;
    Ok(parse_mountinfo(&text))
}

pub fn parse_mountinfo(text: &str) -> Vec<Hierarchy> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mp = left.split(' ').nth(4).unwrap_or("");
        let mut r = right.split(' ');
        let fstype = r.next().unwrap_or("");
        let opts = r.nth(1).unwrap_or("");
        match fstype {
            "cgroup2" => out.push((PathBuf::from(mp), None)),
            "cgroup" => {
                let ctrls: Vec<String> = opts
                    .split(',')
                    .filter(|o| V1_CONTROLLERS.contains(o) || *o == "cpuset")
                    .map(String::from)
                    .collect();
                if !ctrls.is_empty() {
                    out.push((PathBuf::from(mp), Some(ctrls)));
                }
            }
            _ => {}
        }
    }
    out
}

/// `linux.cgroupsPath` → a path below each hierarchy's root. `--systemd-cgroup` paths
/// (`slice:prefix:name`) become `slice/prefix-name.scope` (there is no systemd to ask here).
/// An absolute path is below the hierarchy's root. Without one: `cordon/<id>` for root,
/// `cordon-<uid>/<id>` for another user on cgroup v1 (two users' containers may share an id).
///
/// On a pure cgroup v2 host (`v2_own`: cordon-oci's own cgroup, the `0::` line of
/// /proc/self/cgroup) a relative path is below the parent of cordon-oci's own cgroup, as runc
/// and crun place it; so is an unprivileged caller's default, `cordon-<id>`: a user may create
/// cgroups only in a subtree delegated to it, and a `systemd-run --user --scope -p
/// Delegate=yes` scope (or a user manager's app.slice) is such a subtree's child. The parent,
/// not the own cgroup: that one holds cordon-oci, so (no internal processes) it could not
/// hand controllers to a child.
pub fn relative_path(
    cgroups_path: Option<&str>,
    id: &str,
    systemd: bool,
    v2_own: Option<&Path>,
) -> PathBuf {
    relative_path_for(
        cgroups_path,
        id,
        systemd,
        nix::unistd::geteuid().as_raw(),
        v2_own,
    )
}

fn relative_path_for(
    cgroups_path: Option<&str>,
    id: &str,
    systemd: bool,
    uid: u32,
    v2_own: Option<&Path>,
) -> PathBuf {
    let beside_own = |name: &str| {
        let own = v2_own.unwrap_or(Path::new("/"));
        let parent = own.parent().unwrap_or(own);
        parent
            .strip_prefix("/")
            .unwrap_or(parent)
            .join(name.trim_start_matches('/'))
    };
    match cgroups_path {
        Some(p) if systemd && p.split(':').count() == 3 => {
            let v: Vec<&str> = p.split(':').collect();
            let slice = if v[0].is_empty() {
                "system.slice"
            } else {
                v[0]
            };
            PathBuf::from(format!("{slice}/{}-{}.scope", v[1], v[2]))
        }
        Some(p) if !p.is_empty() && !p.starts_with('/') && v2_own.is_some() => beside_own(p),
        Some(p) if !p.is_empty() => PathBuf::from(p.trim_start_matches('/')),
        _ if uid == 0 => PathBuf::from(format!("cordon/{id}")),
        _ if v2_own.is_some() => beside_own(&format!("cordon-{id}")),
        _ => PathBuf::from(format!("cordon-{uid}/{id}")),
    }
}

/// cordon-oci's own cgroup in the v2 hierarchy (the `0::` line of /proc/self/cgroup), when
/// the host is pure cgroup v2 (a cgroup2 mount and no v1 controller hierarchy).
pub fn own_v2_cgroup() -> Result<Option<PathBuf>, CgroupError> {
    let h = hierarchies()?;
    if h.iter().any(|(_, c)| c.is_some()) || !h.iter().any(|(_, c)| c.is_none()) {
        return Ok(None);
    }
    let text = std::fs::read_to_string("/proc/self/cgroup").map_err(|source| CgroupError::Io {
        step: "read",
        path: "/proc/self/cgroup".into(),
        source,
    })?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| PathBuf::from(p.trim())))
}

/// The container's cgroup directories: the v2 one when the host is pure v2, else one per
/// v1 hierarchy with a controller cordon uses (cpuset when `want_cpuset`).
pub fn dirs_for(rel: &Path, want_cpuset: bool) -> Result<Vec<PathBuf>, CgroupError> {
    let h = hierarchies()?;
    let v1: Vec<&Hierarchy> = h.iter().filter(|(_, c)| c.is_some()).collect();
    if v1.is_empty() {
        if let Some((mp, _)) = h.iter().find(|(_, c)| c.is_none()) {
            return Ok(vec![mp.join(rel)]);
        }
        return Ok(Vec::new());
    }
    let mut dirs = Vec::new();
    for (mp, ctrls) in v1 {
        let ctrls = ctrls.as_ref().map(Vec::as_slice).unwrap_or(&[]);
        if ctrls.iter().any(|c| c != "cpuset") || want_cpuset {
            dirs.push(mp.join(rel));
        }
    }
    Ok(dirs)
}

/// Creates the directories (cpuset ones inherit their parent's cpus and mems). An existing
/// directory is reused only while no process is in it: a live one belongs to another
/// container, whose limits this one must not take over.
pub fn create(dirs: &[PathBuf]) -> Result<(), CgroupError> {
    for d in dirs {
        if d.exists() {
            if !pids(std::slice::from_ref(d)).is_empty() {
                return Err(CgroupError::Io {
                    step: "use the cgroup",
                    path: d.display().to_string(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "it already holds processes (of another container?); give linux.cgroupsPath",
                    ),
                });
            }
            continue;
        }
        // Walk down so that every new cpuset level is seeded from its parent.
        let mut cur = PathBuf::new();
        for comp in d.components() {
            cur.push(comp);
            if cur.exists() {
                continue;
            }
            // cgroup v2: a child has the controllers its parent delegates; delegate every
            // controller the parent has (memory, cpu, pids...) before creating the child.
            if let Some(parent) = cur.parent()
                && parent.join("cgroup.subtree_control").exists()
            {
                let have =
                    std::fs::read_to_string(parent.join("cgroup.controllers")).unwrap_or_default();
                let want: Vec<String> = have.split_whitespace().map(|c| format!("+{c}")).collect();
                if !want.is_empty() {
                    let p = parent.join("cgroup.subtree_control");
                    std::fs::write(&p, want.join(" "))
                        .map_err(io("enable the controllers in", &p))?;
                }
            }
            std::fs::create_dir(&cur).map_err(io("create the cgroup", &cur))?;
            for f in ["cpuset.cpus", "cpuset.mems"] {
                if let (Some(parent), true) = (cur.parent(), cur.join(f).exists()) {
                    let v = std::fs::read_to_string(parent.join(f)).unwrap_or_default();
                    let _ = std::fs::write(cur.join(f), v.trim());
                }
            }
        }
    }
    Ok(())
}

/// The first directory that has `file`.
fn with_file(dirs: &[PathBuf], file: &str) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(file)).find(|p| p.exists())
}

fn write(dirs: &[PathBuf], field: &str, file: &str, value: &str) -> Result<(), CgroupError> {
    let path = with_file(dirs, file).ok_or_else(|| CgroupError::Resource {
        field: field.into(),
        why: format!("this host's cgroups have no {file} (is that controller mounted, and is cordon-oci allowed to create cgroups?)"),
    })?;
    std::fs::write(&path, value).map_err(|e| CgroupError::Resource {
        field: field.into(),
        why: format!("write {value:?} to {}: {e}", path.display()),
    })
}

/// Whether these are cgroup v2 directories.
pub fn is_v2(dirs: &[PathBuf]) -> bool {
    with_file(dirs, "cgroup.controllers").is_some() && with_file(dirs, "tasks").is_none()
}

/// Writes `linux.resources`.
pub fn apply(dirs: &[PathBuf], r: &LinuxResources) -> Result<(), CgroupError> {
    let v2 = is_v2(dirs);
    let unsupported = |field: &str, why: &str| {
        Err(CgroupError::Resource {
            field: field.into(),
            why: why.into(),
        })
    };
    if r.block_io().is_some() {
        return unsupported("linux.resources.blockIO", "not implemented");
    }
    if r.hugepage_limits().as_ref().is_some_and(|h| !h.is_empty()) {
        return unsupported("linux.resources.hugepageLimits", "not implemented");
    }
    if r.network().is_some() {
        return unsupported("linux.resources.network", "not implemented");
    }
    if r.rdma().is_some() {
        return unsupported("linux.resources.rdma", "not implemented");
    }
    if let Some(u) = r.unified()
        && !u.is_empty()
    {
        if !v2 {
            return unsupported("linux.resources.unified", "needs cgroup v2");
        }
        for (k, v) in u {
            if k.contains('/') || k.starts_with('.') {
                return unsupported("linux.resources.unified", "not a cgroup file name");
            }
            write(dirs, "linux.resources.unified", k, v)?;
        }
    }
    if let Some(m) = r.memory() {
        // Kernel memory is charged to the memory cgroup's own counter (v2 always; v1 since
        // Linux 4.x with kmem accounting), and current kernels ignore a separate kmem limit.
        // So a `kernel` limit at or above `limit` is enforced by `limit`; a lower one cannot be.
        if let Some(k) = m.kernel() {
            let covered = matches!(m.limit(), Some(l) if l >= 0 && (k < 0 || k >= l));
            if !covered {
                return unsupported(
                    "linux.resources.memory.kernel",
                    "a kernel memory cap below linux.resources.memory.limit cannot be enforced (kernels since 5.16 ignore memory.kmem.limit_in_bytes); drop it or make it at least the memory limit",
                );
            }
        }
        if let Some(t) = m.kernel_tcp() {
            if v2 {
                return unsupported(
                    "linux.resources.memory.kernelTCP",
                    "cgroup v2 has no separate TCP buffer limit",
                );
            }
            write(
                dirs,
                "linux.resources.memory.kernelTCP",
                "memory.kmem.tcp.limit_in_bytes",
                &t.to_string(),
            )?;
            let back = read_u64(dirs, "memory.kmem.tcp.limit_in_bytes", None);
            if t >= 0 && back.is_some_and(|b| b > t as u64) {
                return unsupported(
                    "linux.resources.memory.kernelTCP",
                    "the kernel did not keep the value written to memory.kmem.tcp.limit_in_bytes",
                );
            }
        }
        let f = "linux.resources.memory";
        let limit_str = |v: i64| {
            if v < 0 {
                "max".to_string()
            } else {
                v.to_string()
            }
        };
        if v2 {
            if let Some(l) = m.reservation() {
                write(dirs, f, "memory.low", &limit_str(l))?;
            }
            if let Some(l) = m.limit() {
                write(dirs, f, "memory.max", &limit_str(l))?;
            }
            if let Some(s) = m.swap() {
                // swap is memory+swap (v1's memsw); memory.swap.max is swap alone. Without a
                // limit here (an `update` of the swap only), the current memory.max counts.
                let limit = m.limit().or_else(|| {
                    read_u64(dirs, "memory.max", None).and_then(|v| i64::try_from(v).ok())
                });
                let v = match (s, limit) {
                    (s, _) if s < 0 => "max".to_string(),
                    (s, Some(l)) if l >= 0 => (s - l).max(0).to_string(),
                    (s, _) => s.to_string(),
                };
                write(dirs, f, "memory.swap.max", &v)?;
            }
            if m.swappiness().is_some() {
                return unsupported("linux.resources.memory.swappiness", "cgroup v2 has none");
            }
            if m.disable_oom_killer() == Some(true) {
                return unsupported(
                    "linux.resources.memory.disableOOMKiller",
                    "cgroup v2 has none",
                );
            }
        } else {
            let v1 = |v: i64| {
                if v < 0 {
                    "-1".to_string()
                } else {
                    v.to_string()
                }
            };
            if let Some(l) = m.limit() {
                write(dirs, f, "memory.limit_in_bytes", &v1(l))?;
            }
            if let Some(l) = m.reservation() {
                write(dirs, f, "memory.soft_limit_in_bytes", &v1(l))?;
            }
            if let Some(s) = m.swap() {
                write(
                    dirs,
                    "linux.resources.memory.swap",
                    "memory.memsw.limit_in_bytes",
                    &v1(s),
                )?;
            }
            if let Some(s) = m.swappiness() {
                write(
                    dirs,
                    "linux.resources.memory.swappiness",
                    "memory.swappiness",
                    &s.to_string(),
                )?;
            }
            if m.disable_oom_killer() == Some(true) {
                write(
                    dirs,
                    "linux.resources.memory.disableOOMKiller",
                    "memory.oom_control",
                    "1",
                )?;
            }
            if let Some(h) = m.use_hierarchy() {
                // Always on since Linux 5.x: only `true` can be honoured.
                if !h {
                    return unsupported(
                        "linux.resources.memory.useHierarchy",
                        "the kernel always uses the hierarchy",
                    );
                }
            }
        }
    }
    if let Some(c) = r.cpu() {
        let f = "linux.resources.cpu";
        if v2 {
            if let Some(s) = c.shares() {
                // The conversion runc and crun use: [2, 262144] → [1, 10000].
                let w = 1 + ((s.clamp(2, 262144) - 2) * 9999) / 262142;
                write(dirs, f, "cpu.weight", &w.to_string())?;
            }
            if c.quota().is_some() || c.period().is_some() {
                // cpu.max holds both: what is not given (an `update` of one of them) keeps its
                // current value, as in v1's two files.
                let (cur_q, cur_p) = current_cpu_max(dirs);
                let q = match c.quota() {
                    Some(q) if q > 0 => q.to_string(),
                    Some(_) => "max".into(),
                    None => cur_q,
                };
                let p = c.period().unwrap_or(cur_p);
                write(dirs, f, "cpu.max", &format!("{q} {p}"))?;
            }
            if let Some(i) = c.idle() {
                write(dirs, f, "cpu.idle", &i.to_string())?;
            }
            if let Some(b) = c.burst() {
                write(dirs, f, "cpu.max.burst", &b.to_string())?;
            }
        } else {
            if let Some(s) = c.shares() {
                write(dirs, f, "cpu.shares", &s.to_string())?;
            }
            if let Some(p) = c.period() {
                write(dirs, f, "cpu.cfs_period_us", &p.to_string())?;
            }
            if let Some(q) = c.quota() {
                write(dirs, f, "cpu.cfs_quota_us", &q.to_string())?;
            }
            if let Some(p) = c.realtime_period() {
                write(
                    dirs,
                    "linux.resources.cpu.realtimePeriod",
                    "cpu.rt_period_us",
                    &p.to_string(),
                )?;
            }
            if let Some(rt) = c.realtime_runtime() {
                write(
                    dirs,
                    "linux.resources.cpu.realtimeRuntime",
                    "cpu.rt_runtime_us",
                    &rt.to_string(),
                )?;
            }
            if c.idle().is_some() {
                return unsupported("linux.resources.cpu.idle", "needs cgroup v2");
            }
            if c.burst().is_some() {
                return unsupported("linux.resources.cpu.burst", "needs cgroup v2");
            }
        }
        if let Some(cpus) = c.cpus().as_ref().filter(|s| !s.is_empty()) {
            write(dirs, "linux.resources.cpu.cpus", "cpuset.cpus", cpus)?;
        }
        if let Some(mems) = c.mems().as_ref().filter(|s| !s.is_empty()) {
            write(dirs, "linux.resources.cpu.mems", "cpuset.mems", mems)?;
        }
    }
    if let Some(p) = r.pids() {
        let v = if p.limit() <= 0 {
            "max".to_string()
        } else {
            p.limit().to_string()
        };
        write(dirs, "linux.resources.pids", "pids.max", &v)?;
    }
    if let Some(rules) = r.devices() {
        apply_devices(dirs, rules, v2)?;
    }
    Ok(())
}

/// Device rules every container gets after the config's own (as runc): /dev/null, zero, full,
/// random, urandom, tty, console, ptmx, the ptys, and mknod of anything.
const DEFAULT_ALLOW: &[&str] = &[
    "c *:* m",
    "b *:* m",
    "c 1:3 rwm",
    "c 1:5 rwm",
    "c 1:7 rwm",
    "c 1:8 rwm",
    "c 1:9 rwm",
    "c 5:0 rwm",
    "c 5:1 rwm",
    "c 5:2 rwm",
    "c 136:* rwm",
];

fn apply_devices(
    dirs: &[PathBuf],
    rules: &[oci_spec::runtime::LinuxDeviceCgroup],
    v2: bool,
) -> Result<(), CgroupError> {
    let field = "linux.resources.devices";
    if v2 {
        // A device controller on v2 is an eBPF program; cordon does not load one yet. A
        // deny-only policy is still honoured when the container cannot make device nodes
        // (create() refuses CAP_MKNOD outside a user namespace in that case): its /dev holds
        // only the default nodes. Rules that allow more cannot be expressed without eBPF.
        if rules.iter().any(|r| r.allow()) {
            return Err(CgroupError::Resource {
                field: field.into(),
                why: "device allow rules on cgroup v2 (eBPF device filter) are not implemented"
                    .into(),
            });
        }
        return Ok(());
    }
    let mut lines: Vec<(bool, String)> = Vec::new();
    for r in rules {
        let kind = r
            .typ()
            .map(|t| {
                serde_json::to_value(t)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_else(|| "a".into())
            })
            .unwrap_or_else(|| "a".into());
        let n = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_else(|| "*".into());
        let access = r.access().clone().unwrap_or_else(|| "rwm".into());
        let line = if kind == "a" {
            "a".to_string()
        } else {
            format!("{kind} {}:{} {access}", n(r.major()), n(r.minor()))
        };
        lines.push((r.allow(), line));
    }
    for d in DEFAULT_ALLOW {
        lines.push((true, d.to_string()));
    }
    for (allow, line) in lines {
        let file = if allow {
            "devices.allow"
        } else {
            "devices.deny"
        };
        write(dirs, field, file, &line)?;
    }
    Ok(())
}

/// Moves `pid` into every directory.
pub fn attach(dirs: &[PathBuf], pid: i32) -> Result<(), CgroupError> {
    for d in dirs {
        let p = d.join("cgroup.procs");
        std::fs::write(&p, pid.to_string()).map_err(io("move the container into", &p))?;
    }
    Ok(())
}

/// Moves the calling process, which must be single-threaded, into the directories: on
/// cgroup v1 through `tasks`, where a thread moving itself skips the kernel-wide lock that
/// every move through `cgroup.procs` (or of another process) takes, whose first taker
/// waits for an RCU grace period (5 to 15 ms here); on v2 through `cgroup.procs` ("0":
/// the writer itself).
pub fn attach_self(dirs: &[PathBuf]) -> Result<(), CgroupError> {
    for d in dirs {
        let tasks = d.join("tasks");
        let p = if tasks.exists() {
            tasks
        } else {
            d.join("cgroup.procs")
        };
        std::fs::write(&p, "0").map_err(io("move the container into", &p))?;
    }
    Ok(())
}

/// Pids in the container's cgroup.
pub fn pids(dirs: &[PathBuf]) -> Vec<i32> {
    let Some(p) = with_file(dirs, "cgroup.procs") else {
        return Vec::new();
    };
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Freezes or thaws (v2 cgroup.freeze, v1 freezer.state).
pub fn freeze(dirs: &[PathBuf], frozen: bool) -> Result<(), CgroupError> {
    if let Some(p) = with_file(dirs, "cgroup.freeze") {
        std::fs::write(&p, if frozen { "1" } else { "0" }).map_err(io("write", &p))?;
        // The kernel freezes asynchronously: wait until cgroup.events says `frozen 1` (or 0),
        // so that a paused container has stopped running when pause returns.
        let events = p.with_file_name("cgroup.events");
        let want = if frozen { 1 } else { 0 };
        for _ in 0..2500 {
            let text = std::fs::read_to_string(&events).map_err(io("read", &events))?;
            if crate::limits::keyed_value(&text, "frozen") == Some(want) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        return Err(CgroupError::Io {
            step: "wait for the freeze state in",
            path: events.display().to_string(),
            source: std::io::Error::from(std::io::ErrorKind::TimedOut),
        });
    }
    if let Some(p) = with_file(dirs, "freezer.state") {
        std::fs::write(&p, if frozen { "FROZEN" } else { "THAWED" }).map_err(io("write", &p))?;
        // Wait until the kernel reports the state (FREEZING → FROZEN).
        for _ in 0..500 {
            let s = std::fs::read_to_string(&p).unwrap_or_default();
            if s.trim() == if frozen { "FROZEN" } else { "THAWED" } {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        return Err(CgroupError::Io {
            step: "wait for the freezer in",
            path: p.display().to_string(),
            source: std::io::Error::from(std::io::ErrorKind::TimedOut),
        });
    }
    Err(CgroupError::Resource {
        field: "pause".into(),
        why: "the container has no freezer cgroup (rootless containers without a cgroup cannot be paused)".into(),
    })
}

pub fn is_frozen(dirs: &[PathBuf]) -> bool {
    if let Some(p) = with_file(dirs, "cgroup.freeze") {
        return std::fs::read_to_string(p).is_ok_and(|s| s.trim() == "1");
    }
    if let Some(p) = with_file(dirs, "freezer.state") {
        return std::fs::read_to_string(p).is_ok_and(|s| s.trim() == "FROZEN");
    }
    false
}

/// Removes the directories (retrying briefly while the last processes leave).
pub fn remove(dirs: &[PathBuf]) -> Result<(), CgroupError> {
    for d in dirs {
        let mut last = None;
        for _ in 0..100 {
            match std::fs::remove_dir(d) {
                Ok(()) => {
                    last = None;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    last = None;
                    break;
                }
                Err(e) => last = Some(e),
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if let Some(e) = last {
            return Err(io("remove the cgroup", d)(e));
        }
    }
    Ok(())
}

/// The quota (`max` or microseconds) and period of `cpu.max`; the kernel's defaults when it
/// cannot be read.
fn current_cpu_max(dirs: &[PathBuf]) -> (String, u64) {
    let text = with_file(dirs, "cpu.max")
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let mut f = text.split_whitespace();
    let q = f.next().unwrap_or("max").to_string();
    let p = f.next().and_then(|p| p.parse().ok()).unwrap_or(100_000);
    (q, p)
}

/// Reads one number from the first directory that has `file` (first line, or a `key value`).
pub fn read_u64(dirs: &[PathBuf], file: &str, key: Option<&str>) -> Option<u64> {
    let text = std::fs::read_to_string(with_file(dirs, file)?).ok()?;
    match key {
        None => text.trim().parse().ok(),
        Some(k) => crate::limits::keyed_value(&text, k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_hybrid() {
        let text = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw shared:10 - cgroup2 cgroup2 rw,nsdelegate
33 30 0:29 / /sys/fs/cgroup/memory rw shared:13 - cgroup cgroup rw,memory
34 30 0:30 / /sys/fs/cgroup/cpu,cpuacct rw shared:14 - cgroup cgroup rw,cpu,cpuacct
35 30 0:31 / /sys/fs/cgroup/net_cls rw shared:15 - cgroup cgroup rw,net_cls
";
        let h = parse_mountinfo(text);
        assert_eq!(h.len(), 3);
        assert_eq!(h[0], (PathBuf::from("/sys/fs/cgroup/unified"), None));
        assert_eq!(
            h[2],
            (
                PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"),
                Some(vec!["cpu".to_string(), "cpuacct".to_string()])
            )
        );
    }

    #[test]
    fn cgroups_path_forms() {
        assert_eq!(
            relative_path_for(None, "c1", false, 0, None),
            Path::new("cordon/c1")
        );
        assert_eq!(
            relative_path_for(None, "c1", false, 1001, None),
            Path::new("cordon-1001/c1")
        );
        assert_eq!(
            relative_path(Some("/a/b"), "c1", false, None),
            Path::new("a/b")
        );
        assert_eq!(
            relative_path(Some("a/b"), "c1", false, None),
            Path::new("a/b")
        );
        assert_eq!(
            relative_path(Some("machine.slice:libpod:abc"), "c1", true, None),
            Path::new("machine.slice/libpod-abc.scope")
        );
    }

    #[test]
    fn cgroups_path_forms_on_v2() {
        let own = Some(Path::new(
            "/user.slice/user@1001.service/app.slice/run-7.scope",
        ));
        // Root's default and absolute paths stay below the hierarchy's root.
        assert_eq!(
            relative_path_for(None, "c1", false, 0, own),
            Path::new("cordon/c1")
        );
        assert_eq!(
            relative_path_for(Some("/a/b"), "c1", false, 1001, own),
            Path::new("a/b")
        );
        // A user's default and relative paths go next to cordon-oci's own cgroup.
        assert_eq!(
            relative_path_for(None, "c1", false, 1001, own),
            Path::new("user.slice/user@1001.service/app.slice/cordon-c1")
        );
        assert_eq!(
            relative_path_for(Some("a/b"), "c1", false, 0, own),
            Path::new("user.slice/user@1001.service/app.slice/a/b")
        );
        // In the root cgroup there is no parent: the root it is.
        assert_eq!(
            relative_path_for(None, "c1", false, 1001, Some(Path::new("/"))),
            Path::new("cordon-c1")
        );
        assert_eq!(
            relative_path_for(None, "c1", false, 1001, Some(Path::new("/x"))),
            Path::new("cordon-c1")
        );
    }
}


//! cgroup v1: one directory per controller hierarchy (memory, pids, cpu, cpuacct; a co-mounted
//! `cpu,cpuacct` is one directory), each under cordon's own cgroup in that hierarchy.

use super::host::{CONTROLLERS, CgroupFs, Failure, HostPaths, Layout, fixes};
use super::v2::{CPU_PERIOD_US, cpu_quota_us};
use super::{CgroupMetrics, keyed_value};
use crate::outcome::MetricSource;
use crate::spec::Limits;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The sandbox's directory in each hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1Dirs {
    pub memory: PathBuf,
    pub pids: PathBuf,
    pub cpu: PathBuf,
    pub cpuacct: PathBuf,
}

impl V1Dirs {
    /// Each directory once (co-mounted controllers share one).
    pub fn unique(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for d in [&self.memory, &self.pids, &self.cpu, &self.cpuacct] {
            if !out.contains(d) {
                out.push(d.clone());
            }
        }
        out
    }
}

/// What the v1 backend managed to set, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V1Applied {
    /// `memory.memsw.limit_in_bytes` existed and was set (no swap beyond the limit).
    pub swap_limited: bool,
}

/// The checks that need no write: each controller on a v1 hierarchy, and cordon's own cgroup
/// there writable (`access(W_OK)`; the real test is the `mkdir` in [`create`]).
pub fn check(fs: &dyn CgroupFs, layout: &Layout, host: &HostPaths) -> Result<(), Failure> {
    for c in CONTROLLERS {
        let Some(loc) = layout.v1.get(c) else {
            return Err(Failure::other(
                format!("has no {c} controller"),
                "find the v1 hierarchy of",
                &host.cgroup_root.join(c),
                "not mounted, or no line for it in /proc/self/cgroup",
                fixes::V1_MOUNT,
            ));
        };
        super::host::check_writable(fs, &loc.own, host.uid, fixes::V1_ROOT)?;
    }
    Ok(())
}

/// The sandbox's directory `name` in each hierarchy (nothing is created).
pub fn dirs(layout: &Layout, name: &str) -> V1Dirs {
    let dir = |c: &str| layout.v1[c].own.join(name);
    V1Dirs {
        memory: dir("memory"),
        pids: dir("pids"),
        cpu: dir("cpu"),
        cpuacct: dir("cpuacct"),
    }
}

/// Whether [`write_limits`] will find the swap file: a child cgroup has the files of its
/// parent (`own`, cordon's cgroup in the memory hierarchy). For the report of a cgroup made
/// after the clone ([`super::prepare_deferred`]).
pub fn swap_file_exists(fs: &dyn CgroupFs, layout: &Layout) -> bool {
    fs.exists(&layout.v1["memory"].own.join("memory.memsw.limit_in_bytes"))
}

/// cgroup v1 leaves socket buffers out of `memory.limit_in_bytes`: a sandbox filled its UDP
/// sockets on `lo` with 2.2 GB (the host's whole `net.ipv4.udp_mem`, so the host's own UDP
/// then dropped) under `--memory 64M`. Once `memory.kmem.tcp.limit_in_bytes` is set, the
/// kernel charges the sockets made in the cgroup (TCP, UDP and the rest that account their
/// buffers) to that counter and holds them under it, apart from the memory limit.
pub const SOCKETS_FILE: &str = "memory.kmem.tcp.limit_in_bytes";

/// Whether [`write_limits`] will find [`SOCKETS_FILE`] (as [`swap_file_exists`]).
pub fn sockets_file_exists(fs: &dyn CgroupFs, layout: &Layout) -> bool {
    fs.exists(&layout.v1["memory"].own.join(SOCKETS_FILE))
}

/// Creates `dirs` and writes the limits; on failure removes what it made.
pub fn make(
    fs: &dyn CgroupFs,
    dirs: &V1Dirs,
    host: &HostPaths,
    limits: &Limits,
) -> Result<V1Applied, Failure> {
    let mut made: Vec<PathBuf> = Vec::new();
    let rollback = |made: &[PathBuf]| {
        for d in made.iter().rev() {
            let _ = fs.rmdir(d);
        }
    };
    for d in dirs.unique() {
        if let Err(e) = fs.mkdir(&d) {
            rollback(&made);
            let summary = match e.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) => {
                    format!("not writable by uid {}", host.uid)
                }
                _ => "cannot create the sandbox cgroup".to_string(),
            };
            return Err(Failure::io(
                summary,
                "create the cgroup directory",
                &d,
                &e,
                fixes::V1_ROOT,
            ));
        }
        made.push(d);
    }
    match write_limits(fs, dirs, limits) {
        Ok(applied) => Ok(applied),
        Err(f) => {
            rollback(&made);
            Err(f)
        }
    }
}

fn set(fs: &dyn CgroupFs, dir: &Path, file: &str, value: &str) -> Result<(), Failure> {
    let path = dir.join(file);
    fs.write(&path, value).map_err(|e| {
        Failure::io(
            "cannot set a limit",
            &format!("write {value:?} to"),
            &path,
            &e,
            "check that the value is in range and that the file exists in this kernel's v1 controller",
        )
    })
}

pub fn write_limits(
    fs: &dyn CgroupFs,
    dirs: &V1Dirs,
    limits: &Limits,
) -> Result<V1Applied, Failure> {
    let mut swap_limited = false;
    if let Some(bytes) = limits.memory {
        // limit_in_bytes first: the kernel keeps memsw >= limit_in_bytes at every step.
        set(
            fs,
            &dirs.memory,
            "memory.limit_in_bytes",
            &bytes.to_string(),
        )?;
        // memory+swap = memory: no swap. Absent when swap accounting is off (swapaccount=0).
        if fs.exists(&dirs.memory.join("memory.memsw.limit_in_bytes")) {
            set(
                fs,
                &dirs.memory,
                "memory.memsw.limit_in_bytes",
                &bytes.to_string(),
            )?;
            swap_limited = true;
        }
        // Socket buffers, held to the same size apart (see SOCKETS_FILE); without the file
        // the report says they are not limited.
        if fs.exists(&dirs.memory.join(SOCKETS_FILE)) {
            set(fs, &dirs.memory, SOCKETS_FILE, &bytes.to_string())?;
        }
    }
    if let Some(n) = limits.pids {
        set(fs, &dirs.pids, "pids.max", &n.to_string())?;
    }
    if let Some(cpus) = limits.cpus {
        set(
            fs,
            &dirs.cpu,
            "cpu.cfs_period_us",
            &CPU_PERIOD_US.to_string(),
        )?;
        set(
            fs,
            &dirs.cpu,
            "cpu.cfs_quota_us",
            &cpu_quota_us(cpus).to_string(),
        )?;
    }
    Ok(V1Applied { swap_limited })
}

/// `memory.max_usage_in_bytes`, `cpuacct.usage` (ns), `memory.oom_control` `oom_kill`,
/// `pids.events` `max`.
pub fn metrics(fs: &dyn CgroupFs, dirs: &V1Dirs) -> CgroupMetrics {
    let read = |d: &Path, f: &str| fs.read(&d.join(f)).ok();
    CgroupMetrics {
        peak_memory: read(&dirs.memory, "memory.max_usage_in_bytes")
            .and_then(|t| t.trim().parse().ok()),
        cpu_time: read(&dirs.cpuacct, "cpuacct.usage")
            .and_then(|t| t.trim().parse().ok())
            .map(Duration::from_nanos),
        oom_kills: read(&dirs.memory, "memory.oom_control")
            .and_then(|t| keyed_value(&t, "oom_kill")),
        pids_limit_hits: read(&dirs.pids, "pids.events").and_then(|t| keyed_value(&t, "max")),
        source: Some(MetricSource::CgroupV1),
    }
}

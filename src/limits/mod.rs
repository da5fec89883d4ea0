//! Resource limits behind one interface: cgroup v2, cgroup v1, or rlimits when no cgroup can
//! be had. The launcher calls, in order:
//!
//! 1. [`prepare`] in the parent, before `clone`: probes the host (unless the caller forced a
//!    backend), creates the sandbox cgroup under cordon's own cgroup and writes the limits, and
//!    returns the rlimits the payload must set plus a per-limit enforcement report;
//! 2. [`Cgroup::attach`] with the child's host pid, before the child is told to go;
//! 3. [`Cgroup::kill`] at a timeout or an output-limit breach;
//! 4. [`Cgroup::metrics`] after the sandbox is gone;
//! 5. [`Cgroup::remove`] last.
//!
//! SKELETON: the real backends are being written; this stub compiles and reports every
//! cgroup limit as not enforced.

use crate::outcome::{LimitsReport, MetricSource};
use crate::spec::{BackendChoice, Limits};
use std::time::Duration;

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
}

/// One rlimit the payload sets on itself just before `execve` (soft = hard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimit {
    /// `libc::RLIMIT_*`.
    pub resource: libc::__rlimit_resource_t,
    pub value: u64,
}

/// What the kernel measured for the sandbox.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CgroupMetrics {
    pub cpu_time: Option<Duration>,
    pub peak_memory: Option<u64>,
    pub oom_kills: Option<u64>,
    pub source: Option<MetricSource>,
}

/// A sandbox cgroup cordon created (v2: one directory; v1: one per controller hierarchy).
#[derive(Debug)]
pub struct Cgroup {
    backend: Backend,
}

impl Cgroup {
    pub fn backend(&self) -> Backend {
        self.backend
    }
    /// Moves `pid` (a host pid) into the sandbox cgroup(s).
    pub fn attach(&self, _pid: libc::pid_t) -> Result<(), LimitsError> {
        Ok(())
    }
    /// Kills every process in the sandbox cgroup (`cgroup.kill`, or SIGKILL to each pid).
    pub fn kill(&self) {}
    pub fn metrics(&self) -> CgroupMetrics {
        CgroupMetrics::default()
    }
    /// Removes the cgroup(s), waiting briefly for the last tasks to leave.
    pub fn remove(self) -> Result<(), LimitsError> {
        Ok(())
    }
}

/// The outcome of [`prepare`].
#[derive(Debug)]
pub struct Prepared {
    pub cgroup: Option<Cgroup>,
    /// rlimits for the payload: always NOFILE, FSIZE, CORE=0; plus AS/CPU/NPROC fallbacks.
    pub rlimits: Vec<Rlimit>,
    pub report: LimitsReport,
}

/// Chooses the backend, creates the cgroup and writes the limits. `run_id` makes the cgroup
/// name unique (`cordon-<run_id>`).
pub fn prepare(
    limits: &Limits,
    _choice: BackendChoice,
    _run_id: &str,
) -> Result<Prepared, LimitsError> {
    let mut rlimits = vec![
        Rlimit {
            resource: libc::RLIMIT_NOFILE,
            value: limits.open_files,
        },
        Rlimit {
            resource: libc::RLIMIT_CORE,
            value: 0,
        },
    ];
    if let Some(f) = limits.file_size {
        rlimits.push(Rlimit {
            resource: libc::RLIMIT_FSIZE,
            value: f,
        });
    }
    Ok(Prepared {
        cgroup: None,
        rlimits,
        report: LimitsReport::default(),
    })
}

/// What the host offers for limits (for `cordon doctor`). SKELETON.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Probe {}

impl Probe {
    pub fn summary(&self) -> String {
        String::new()
    }
}

/// Probes the host's cgroup setup. SKELETON.
pub fn probe() -> Probe {
    Probe {}
}

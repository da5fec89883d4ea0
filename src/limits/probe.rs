//! `cordon doctor`'s view of the limits layer: which cgroup setup the host has, each
//! controller's hierarchy and whether cordon's own cgroup there is writable, what `--backend
//! auto` would pick, and the fix for each missing piece. It writes nothing.

use super::host::{
    CONTROLLERS, CgroupFs, CgroupVersion, HostPaths, Layout, RealFs, V2_CONTROLLERS, fixes,
};
use super::scope::{FromEnv, NoScope, UserScope};
use super::{v1, v2};
use serde::Serialize;
use std::path::PathBuf;

/// One controller cordon uses.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerProbe {
    pub name: &'static str,
    pub exists: bool,
    /// `"v2"` or `"v1"`: the hierarchy the controller is on.
    pub hierarchy: Option<&'static str>,
    /// cordon's own cgroup in that hierarchy.
    pub cgroup: Option<PathBuf>,
    /// Whether the caller may create child cgroups there and move processes into them.
    pub writable: bool,
    /// v2 only: already in the own cgroup's `cgroup.subtree_control`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled_for_children: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// Whether one backend is usable, and if not why and how to fix it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackendProbe {
    pub available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl BackendProbe {
    fn from(r: Result<(), super::Failure>) -> Self {
        match r {
            Ok(()) => BackendProbe {
                available: true,
                reason: None,
                fix: None,
            },
            Err(f) => BackendProbe {
                available: false,
                reason: Some(f.to_string()),
                fix: Some(f.fix.to_string()),
            },
        }
    }
}

/// The limits layer's part of `cordon doctor`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// `v2`, `v1`, `hybrid` or `none`.
    pub version: CgroupVersion,
    pub uid: u32,
    pub cgroup_root: PathBuf,
    /// Where cgroup2 is mounted, and cordon's own cgroup in it.
    pub v2_mount: Option<PathBuf>,
    pub v2_cgroup: Option<PathBuf>,
    pub controllers: Vec<ControllerProbe>,
    pub cgroup_v2: BackendProbe,
    pub cgroup_v1: BackendProbe,
    /// What `--backend auto` would use: `cgroup-v2`, `cgroup-v1` or `rlimit`.
    pub auto_backend: &'static str,
    /// How: `own-cgroup-v2` (cordon's own cgroup, root's or a delegated one), `systemd-scope`
    /// (a transient scope with Delegate=yes that cordon will ask the user manager for),
    /// `cgroup-v1`, or `rlimit-fallback`.
    pub auto_path: &'static str,
    /// For an unprivileged caller without a usable cgroup v2 of its own: the scope cordon exec
    /// will ask its systemd user manager for, or why there will be none and the fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delegation: Option<String>,
    /// Set when the host could not be read at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Probes the real host (and, for an unprivileged caller on a pure cgroup v2 host without a
/// usable delegated cgroup, whether its systemd user manager answers on the session bus).
pub fn probe() -> Probe {
    match HostPaths::from_host() {
        Ok(host) => probe_with_scope(&RealFs, &host, &FromEnv::default()),
        Err(e) => Probe {
            version: CgroupVersion::None,
            uid: nix::unistd::geteuid().as_raw(),
            cgroup_root: PathBuf::from(super::host::CGROUP_ROOT),
            v2_mount: None,
            v2_cgroup: None,
            controllers: Vec::new(),
            cgroup_v2: BackendProbe {
                available: false,
                reason: None,
                fix: None,
            },
            cgroup_v1: BackendProbe {
                available: false,
                reason: None,
                fix: None,
            },
            auto_backend: "rlimit",
            auto_path: "rlimit-fallback",
            delegation: None,
            error: Some(format!(
                "cannot read {}: {}; mount /proc",
                super::host::PROC_SELF_CGROUP,
                super::errno_text(&e)
            )),
        },
    }
}

/// Probes the host described by `host` through `fs`, with no user manager to ask.
pub fn probe_with(fs: &dyn CgroupFs, host: &HostPaths) -> Probe {
    probe_with_scope(
        fs,
        host,
        &NoScope("no user scope in this context".to_string()),
    )
}

/// [`probe_with`], asking `scope` whether a delegated scope can be had (see [`super::prepare_deferred`]).
pub fn probe_with_scope(fs: &dyn CgroupFs, host: &HostPaths, scope: &dyn UserScope) -> Probe {
    let layout = match Layout::discover(fs, host) {
        Ok(l) => l,
        Err(e) => {
            let down = BackendProbe {
                available: false,
                reason: Some(e.clone()),
                fix: None,
            };
            return Probe {
                version: CgroupVersion::None,
                uid: host.uid,
                cgroup_root: host.cgroup_root.clone(),
                v2_mount: None,
                v2_cgroup: None,
                controllers: Vec::new(),
                cgroup_v2: down.clone(),
                cgroup_v1: down,
                auto_backend: "rlimit",
                auto_path: "rlimit-fallback",
                delegation: None,
                error: Some(e),
            };
        }
    };
    let read = |p: PathBuf| fs.read(&p).unwrap_or_default();
    let (v2_available, v2_enabled) = match &layout.v2 {
        Some(loc) => (
            read(loc.own.join("cgroup.controllers")),
            read(loc.own.join("cgroup.subtree_control")),
        ),
        None => Default::default(),
    };
    let has = |list: &str, c: &str| list.split_whitespace().any(|x| x == c);
    // Enabling controllers for children fails with EBUSY when cordon's own (non-root) cgroup
    // holds processes. cordon moves itself into a leaf when it is alone there; other processes
    // make it fail: predict that instead of trying. (`cordon doctor` itself counts as cordon.)
    let internal = layout
        .v2
        .as_ref()
        .and_then(|l| v2::internal_processes(fs, l, host.pid));
    let v2_others = internal
        .as_ref()
        .map(|(others, _)| others.len())
        .unwrap_or(0);
    let v2_busy = v2_others > 0;
    let v2_moves_self = internal.as_ref().is_some_and(|(o, me)| o.is_empty() && *me);

    let mut controllers = Vec::new();
    for name in CONTROLLERS {
        let mut p = ControllerProbe {
            name,
            exists: false,
            hierarchy: None,
            cgroup: None,
            writable: false,
            enabled_for_children: None,
            note: None,
            fix: None,
        };
        if let Some(loc) = layout.v2.as_ref().filter(|_| has(&v2_available, name)) {
            p.exists = true;
            p.hierarchy = Some("v2");
            p.cgroup = Some(loc.own.clone());
            p.writable = fs.writable(&loc.own) && fs.writable(&loc.own.join("cgroup.procs"));
            let enabled = has(&v2_enabled, name);
            p.enabled_for_children = Some(enabled);
            if !p.writable {
                p.fix = Some(fixes::V2_DELEGATE.to_string());
            } else if !enabled && v2_busy {
                p.note = Some(format!(
                    "not enabled in cgroup.subtree_control, and enabling it will fail with EBUSY: \
                     cordon's own cgroup holds {v2_others} other process(es)"
                ));
                p.fix = Some(fixes::V2_INTERNAL_PROCESSES.to_string());
            } else if !enabled && v2_moves_self {
                p.note = Some(
                    "not yet enabled in cgroup.subtree_control; cordon moves itself into a leaf \
                     cgroup (cordon-<pid>-supervisor), then enables it"
                        .to_string(),
                );
            } else if !enabled {
                p.note = Some(
                    "not yet enabled in cgroup.subtree_control; cordon enables it".to_string(),
                );
            }
        } else if let Some(loc) = layout.v1.get(name) {
            p.exists = true;
            p.hierarchy = Some("v1");
            p.cgroup = Some(loc.own.clone());
            p.writable = fs.writable(&loc.own) && fs.writable(&loc.own.join("cgroup.procs"));
            if !p.writable {
                p.fix = Some(fixes::V1_ROOT.to_string());
            }
        } else if name == "cpuacct" && layout.v2.is_some() {
            p.note =
                Some("not needed on cgroup v2: cpu.stat usage_usec is always there".to_string());
        } else if layout.v2.is_some() && layout.v1.is_empty() {
            p.fix = Some(fixes::V2_DELEGATE.to_string());
        } else {
            p.fix = Some(fixes::V1_MOUNT.to_string());
        }
        controllers.push(p);
    }

    let cgroup_v2 = BackendProbe::from(v2::check(fs, &layout, host).map(|_| ()).and_then(|()| {
        if v2_busy {
            let loc = layout.v2.as_ref().expect("v2_busy implies a v2 location");
            Err(super::Failure::other(
                "cannot enable controllers for children (cordon's own cgroup has processes)",
                "enable memory, pids and cpu in",
                &loc.own.join("cgroup.subtree_control"),
                format!(
                    "EBUSY expected: {v2_others} process(es) besides cordon in {}",
                    loc.own.join("cgroup.procs").display()
                ),
                fixes::V2_INTERNAL_PROCESSES,
            ))
        } else {
            Ok(())
        }
    }));
    let cgroup_v1 = BackendProbe::from(v1::check(fs, &layout, host));
    // An unprivileged caller on a pure v2 host without a usable cgroup of its own: cordon
    // exec asks the user manager for a scope (see `super::scope`).
    let scope_path = host.uid != 0 && !cgroup_v2.available && layout.version == CgroupVersion::V2;
    // The manager's own cgroup bounds what its scopes get: all of memory, pids and cpu, or
    // cordon will fall back (see `super::in_user_scope`).
    let ping =
        scope_path.then(|| {
            scope.ping().and_then(|info| {
            let mount = layout.v2.as_ref().map(|l| l.mount.clone()).unwrap_or_default();
            let file = mount
                .join(info.control_group.trim_start_matches('/'))
                .join("cgroup.controllers");
            let have = fs.read(&file).map_err(|e| {
                format!(
                    "the systemd user manager (version {}) answers, but cordon cannot read {}: {}",
                    info.version,
                    file.display(),
                    super::errno_text(&e)
                )
            })?;
            let missing: Vec<&str> = V2_CONTROLLERS
                .iter()
                .copied()
                .filter(|c| !has(&have, c))
                .collect();
            if missing.is_empty() {
                Ok(info.version)
            } else {
                Err(format!(
                    "the systemd user manager (version {}) has only {:?} in {}: a scope from it \
                     would lack {}",
                    info.version,
                    have.trim(),
                    file.display(),
                    missing.join(", ")
                ))
            }
        })
        });
    let (auto_backend, auto_path) = if cgroup_v2.available {
        ("cgroup-v2", "own-cgroup-v2")
    } else if matches!(ping, Some(Ok(_))) {
        ("cgroup-v2", "systemd-scope")
    } else if cgroup_v1.available {
        ("cgroup-v1", "cgroup-v1")
    } else {
        ("rlimit", "rlimit-fallback")
    };
    let delegation = match ping {
        Some(Ok(version)) => Some(format!(
            "cordon exec will ask the systemd user manager (version {version}, on {}) for a \
             transient scope with Delegate=yes holding cordon, and use cgroup v2 there (if the \
             scope lacks memory, pids or cpu, it falls back to rlimits and says why)",
            scope.reachable().unwrap_or_default()
        )),
        Some(Err(why)) => Some(format!(
            "no delegated scope from a systemd user manager: {why}; cordon exec falls back to \
             rlimits. Fix: {}",
            fixes::V2_SCOPE
        )),
        None if host.uid != 0 && !cgroup_v2.available && layout.v2.is_some() => Some(format!(
            "none on a {} host: the controllers are on cgroup v1, which cannot be delegated",
            layout.version
        )),
        None => None,
    };
    Probe {
        version: layout.version,
        uid: host.uid,
        cgroup_root: host.cgroup_root.clone(),
        v2_mount: layout.v2.as_ref().map(|l| l.mount.clone()),
        v2_cgroup: layout.v2.as_ref().map(|l| l.own.clone()),
        controllers,
        cgroup_v2,
        cgroup_v1,
        auto_backend,
        auto_path,
        delegation,
        error: None,
    }
}

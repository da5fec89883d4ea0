//! An OCI bundle's config.json → the [`SandboxSpec`] cordon-oci builds the container from (with
//! its [`ContainerSetup`]). Pure: no syscalls, unit-tested.
//!
//! Every field of the runtime spec that cordon cannot honour is an error naming the field
//! ([`OciConfigError::Unsupported`]); nothing is silently dropped. Properties the spec does
//! not define are ignored, as the spec requires of every runtime ("Extensibility").

use oci_spec::runtime::{LinuxNamespaceType, LinuxSeccompAction, Mount, PosixRlimitType, Spec};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Why a config.json cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum OciConfigError {
    #[error("cannot read {path}: {why}")]
    Load { path: String, why: String },
    #[error("config.json: `{field}` is not supported by cordon-oci: {why}")]
    Unsupported { field: String, why: String },
    #[error("config.json: `{field}` is invalid: {why}")]
    Invalid { field: String, why: String },
}

/// The newest runtime spec cordon-oci implements (its `features` says so too).
pub const SPEC_VERSION: (u64, u64) = (1, 2);

/// A config of a runtime spec newer than [`SPEC_VERSION`] may hold fields that version added,
/// which the parser here does not know and would drop: those are refused, naming them (in
/// such a config they are not extensions, which the spec has runtimes ignore, but settings
/// of the container). A config of 1.2 or before keeps the spec's rule: unknown properties
/// are ignored.
fn refuse_unknown_fields_of_newer_versions(spec: &Spec, text: &[u8]) -> Result<(), OciConfigError> {
    refuse_unknown_fields_of(spec.version(), spec, text, "")
}

/// [`refuse_unknown_fields_of_newer_versions`] for an `exec --process` file, the `process`
/// object of a container whose config is of runtime spec `version`: its fields are named
/// as that config's (`process.…`).
pub fn refuse_unknown_process_fields(
    version: &str,
    process: &oci_spec::runtime::Process,
    text: &[u8],
) -> Result<(), OciConfigError> {
    refuse_unknown_fields_of(version, process, text, "process")
}

fn refuse_unknown_fields_of(
    version: &str,
    parsed: &impl serde::Serialize,
    text: &[u8],
    at: &str,
) -> Result<(), OciConfigError> {
    let mut parts = version.split(['.', '-', '+']);
    let mut num = || parts.next().and_then(|p| p.parse::<u64>().ok());
    let (Some(major), Some(minor)) = (num(), num()) else {
        return Ok(()); // from_spec refuses a version that is not 1.x.y.
    };
    if (major, minor) <= SPEC_VERSION {
        return Ok(());
    }
    let (Ok(given), Ok(read)) = (
        serde_json::from_slice::<serde_json::Value>(text),
        serde_json::to_value(parsed),
    ) else {
        return Ok(());
    };
    let mut unknown = Vec::new();
    unknown_fields(&given, &read, at, &mut unknown);
    if unknown.is_empty() {
        return Ok(());
    }
    let ours = format!("{}.{}", SPEC_VERSION.0, SPEC_VERSION.1);
    Err(unsupported(
        unknown.join("`, `"),
        format!(
            "the config is of runtime spec {version}, newer than the {ours} cordon-oci implements, and these fields are not in {ours}: cordon-oci would ignore them; remove them, or write the config for runtime spec {ours}",
        ),
    ))
}

/// The paths of the non-null values of `given` that `read` (the same JSON, parsed and
/// written back) lacks. Maps (annotations, sysctl) come back whole; arrays element by element.
fn unknown_fields(
    given: &serde_json::Value,
    read: &serde_json::Value,
    at: &str,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    match (given, read) {
        (Value::Object(g), Value::Object(r)) => {
            for (k, v) in g {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                match r.get(k) {
                    None if !v.is_null() => out.push(path),
                    None => {}
                    Some(rv) => unknown_fields(v, rv, &path, out),
                }
            }
        }
        (Value::Array(g), Value::Array(r)) => {
            for (i, (v, rv)) in g.iter().zip(r).enumerate() {
                unknown_fields(v, rv, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Parses JSON into `T`; an error names the field it is in (`process.capabilities.bounding[2]:
/// unknown variant ...`), not only its line and column.
pub fn parse_json<T: serde::de::DeserializeOwned>(text: &[u8]) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let v = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.inner().to_string()
        } else {
            format!("`{path}`: {}", e.inner())
        }
    })?;
    de.end().map_err(|e| e.to_string())?;
    Ok(v)
}

fn unsupported(field: impl Into<String>, why: impl Into<String>) -> OciConfigError {
    OciConfigError::Unsupported {
        field: field.into(),
        why: why.into(),
    }
}

/// The namespace that scopes sysctl `key` (`CLONE_NEW*` flag and config name), if any.
pub fn sysctl_namespace(key: &str) -> Option<(libc::c_int, &'static str)> {
    const IPC: [&str; 8] = [
        "kernel.msgmax",
        "kernel.msgmnb",
        "kernel.msgmni",
        "kernel.sem",
        "kernel.shmall",
        "kernel.shmmax",
        "kernel.shmmni",
        "kernel.shm_rmid_forced",
    ];
    if IPC.contains(&key) || key.starts_with("fs.mqueue.") {
        Some((libc::CLONE_NEWIPC, "ipc"))
    } else if key.starts_with("net.") {
        Some((libc::CLONE_NEWNET, "network"))
    } else if key == "kernel.hostname" || key == "kernel.domainname" {
        Some((libc::CLONE_NEWUTS, "uts"))
    } else {
        None
    }
}

/// Whether the container may set sysctl `key`: only those its own namespaces scope (as
/// runc decides). Any other is the host's: the init writes /proc/sys as root, and with
/// `kernel.core_pattern` a container config would run a program as root on the host. A
/// namespace joined by `path` must not be cordon-oci's own (the host's): `create` checks
/// that ([`Container::sysctl_joined`]), this pure check cannot.
fn sysctl_allowed(key: &str, has: impl Fn(libc::c_int) -> bool) -> Result<(), String> {
    let Some((flag, ns)) = sysctl_namespace(key) else {
        return Err("not a namespaced sysctl: setting it would change the host; remove it".into());
    };
    if has(flag) {
        Ok(())
    } else {
        Err(format!(
            "it would change the host's value: the container needs a {ns} namespace (linux.namespaces) to set it"
        ))
    }
}

fn invalid(field: impl Into<String>, why: impl Into<String>) -> OciConfigError {
    OciConfigError::Invalid {
        field: field.into(),
        why: why.into(),
    }
}

/// `process.ioPriority` as ioprio_set(2) takes it: the class in the top bits, the level (0,
/// the highest, to 7) below, as runc builds it.
fn io_priority(p: &oci_spec::runtime::LinuxIOPriority) -> Result<i32, OciConfigError> {
    use oci_spec::runtime::IOPriorityClass;
    let class = match p.class() {
        IOPriorityClass::IoprioClassRt => 1,
        IOPriorityClass::IoprioClassBe => 2,
        IOPriorityClass::IoprioClassIdle => 3,
    };
    if !(0..=7).contains(&p.priority()) {
        return Err(invalid(
            "process.ioPriority.priority",
            format!("{} is not a level from 0 (highest) to 7", p.priority()),
        ));
    }
    Ok(class << 13 | p.priority() as i32)
}

/// `process.scheduler`, checked as runc checks it: a priority only for the real-time
/// policies (1-99), a nice value from -20 to 19, runtime, deadline and period only for
/// `SCHED_DEADLINE`. What the kernel refuses beyond that is named when it is applied.
fn scheduler(
    s: &oci_spec::runtime::Scheduler,
) -> Result<crate::spec::container::SchedAttr, OciConfigError> {
    use oci_spec::runtime::{LinuxSchedulerFlag as F, LinuxSchedulerPolicy as P};
    let policy = match s.policy() {
        P::SchedOther => 0,
        P::SchedFifo => 1,
        P::SchedRr => 2,
        P::SchedBatch => 3,
        P::SchedIso => {
            return Err(unsupported(
                "process.scheduler.policy",
                "SCHED_ISO is not a policy of the Linux kernel; use SCHED_OTHER, SCHED_BATCH, SCHED_IDLE, SCHED_FIFO, SCHED_RR or SCHED_DEADLINE",
            ));
        }
        P::SchedIdle => 5,
        P::SchedDeadline => 6,
    };
    let realtime = matches!(s.policy(), P::SchedFifo | P::SchedRr);
    let priority = s.priority().unwrap_or(0);
    if realtime && !(1..=99).contains(&priority) {
        return Err(invalid(
            "process.scheduler.priority",
            format!("{priority}: SCHED_FIFO and SCHED_RR take a priority from 1 to 99"),
        ));
    }
    if !realtime && priority != 0 {
        return Err(invalid(
            "process.scheduler.priority",
            format!(
                "{priority}: only SCHED_FIFO and SCHED_RR take a priority (1-99); remove it or give 0"
            ),
        ));
    }
    let nice = s.nice().unwrap_or(0);
    if !(-20..=19).contains(&nice) {
        return Err(invalid(
            "process.scheduler.nice",
            format!("{nice} is not a nice value from -20 to 19"),
        ));
    }
    let deadline = s.policy() == &P::SchedDeadline;
    let (runtime, dl, period) = (
        s.runtime().unwrap_or(0),
        s.deadline().unwrap_or(0),
        s.period().unwrap_or(0),
    );
    if !deadline && (runtime, dl, period) != (0, 0, 0) {
        return Err(invalid(
            "process.scheduler",
            "runtime, deadline and period are SCHED_DEADLINE's; remove them or use that policy",
        ));
    }
    if deadline && (runtime == 0 || dl == 0) {
        return Err(invalid(
            "process.scheduler",
            "SCHED_DEADLINE needs a runtime and a deadline (nanoseconds; period defaults to the deadline)",
        ));
    }
    // The kernel's own rule (sched_setattr(2)), said with the field instead of a bare EINVAL.
    if deadline && (runtime < 1024 || runtime > dl || (period != 0 && dl > period)) {
        return Err(invalid(
            "process.scheduler",
            format!(
                "SCHED_DEADLINE needs 1024 <= runtime <= deadline <= period (nanoseconds; period 0 is the deadline): runtime {runtime}, deadline {dl}, period {period}"
            ),
        ));
    }
    let flags = s.flags().iter().flatten().fold(0u64, |bits, f| {
        bits | match f {
            F::SchedResetOnFork => 0x01,
            F::SchedFlagReclaim => 0x02,
            F::SchedFlagDLOverrun => 0x04,
            F::SchedFlagKeepPolicy => 0x08,
            F::SchedFlagKeepParams => 0x10,
            F::SchedFlagUtilClampMin => 0x20,
            F::SchedFlagUtilClampMax => 0x40,
        }
    });
    Ok(crate::spec::container::SchedAttr {
        policy,
        flags,
        nice,
        priority: priority as u32,
        runtime,
        deadline: dl,
        period,
    })
}

pub use crate::spec::IdMap;
pub use crate::spec::container::{CapSets, ContainerSetup, Device, MountOp, Namespace};
use crate::spec::{Rootfs, SandboxSpec};

/// The devices every container gets, as runc and crun create them.
pub const DEFAULT_DEVICES: &[(&str, u64, u64)] = &[
    ("/dev/null", 1, 3),
    ("/dev/zero", 1, 5),
    ("/dev/full", 1, 7),
    ("/dev/random", 1, 8),
    ("/dev/urandom", 1, 9),
    ("/dev/tty", 5, 0),
];

/// A checked config.json: the [`SandboxSpec`] cordon-oci's launcher builds the container from,
/// and what the runtime keeps beside it (the config itself, for hooks, annotations and the
/// state directory).
#[derive(Debug, Clone)]
pub struct Container {
    pub spec: Spec,
    pub bundle: PathBuf,
    /// What runs and how: `argv` (process.args), `env` (process.env: each key once, at its
    /// first place, with its last value, as runc sets it), `rootfs`
    /// (root.path, absolute), `hostname` (empty: not set) and the rest of the set-up in
    /// `container`, which [`Container::from_spec`] always fills.
    pub sandbox: SandboxSpec,
    pub cgroups_path: Option<String>,
    /// config.json has a `process` (without one, `start` is an error).
    pub has_process: bool,
}

/// The capability `name` (`CAP_SYS_ADMIN`) names, or why there is none: a name cordon-oci
/// cannot parse, or one `supported` (the running kernel's, from
/// `caps::runtime::thread_all_supported`) lacks. The one place names become capabilities:
/// create's and exec's check and init's sets all go through it, so no name is dropped.
pub fn capability(name: &str, supported: &caps::CapsHashSet) -> Result<caps::Capability, String> {
    let cap = name
        .parse::<caps::Capability>()
        .map_err(|_| format!("{name:?}: not a capability cordon-oci knows"))?;
    if !supported.contains(&cap) {
        return Err(format!("{name}: not known to the running kernel"));
    }
    Ok(cap)
}

impl CapSets {
    /// An error naming the first set with capabilities that `known` (normally
    /// [`capability`] against the running kernel's list) refuses: a set cordon-oci cannot
    /// give as written is refused, not cut down silently. (runc logs "ignoring unknown or
    /// unavailable capabilities" and goes on; that is not documented behaviour, and
    /// cordon-oci fails closed on config it cannot honour.)
    pub fn check_known(
        &self,
        known: impl Fn(&str) -> Result<caps::Capability, String>,
    ) -> Result<(), OciConfigError> {
        for (name, set) in [
            ("bounding", &self.bounding),
            ("effective", &self.effective),
            ("inheritable", &self.inheritable),
            ("permitted", &self.permitted),
            ("ambient", &self.ambient),
        ] {
            let missing: Vec<String> = set.iter().filter_map(|c| known(c).err()).collect();
            if !missing.is_empty() {
                return Err(unsupported(
                    format!("process.capabilities.{name}"),
                    format!(
                        "{}; remove them (or run on a kernel that has them)",
                        missing.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Container {
    /// Loads `bundle/config.json` and checks it.
    pub fn load(bundle: &Path) -> Result<Container, OciConfigError> {
        let path = bundle.join("config.json");
        // serde_json directly: its errors say what is wrong and where (oci-spec's say "serde
        // failed").
        let text = std::fs::read(&path).map_err(|e| OciConfigError::Load {
            path: path.display().to_string(),
            why: e.to_string(),
        })?;
        Container::from_json(&text, bundle).map_err(|e| match e {
            OciConfigError::Load { why, .. } => OciConfigError::Load {
                path: path.display().to_string(),
                why,
            },
            other => other,
        })
    }

    /// Parses config.json's text and checks it (the bundle path is only joined, never read).
    pub fn from_json(text: &[u8], bundle: &Path) -> Result<Container, OciConfigError> {
        let spec: Spec = parse_json(text).map_err(|why| OciConfigError::Load {
            path: "config.json".into(),
            why,
        })?;
        refuse_mount_id_mappings(text)?;
        refuse_unknown_fields_of_newer_versions(&spec, text)?;
        Container::from_spec(spec, bundle)
    }

    /// Checks a parsed config and resolves it against its bundle directory.
    pub fn from_spec(spec: Spec, bundle: &Path) -> Result<Container, OciConfigError> {
        if spec.solaris().is_some() {
            return Err(unsupported("solaris", "cordon runs Linux containers only"));
        }
        if spec.windows().is_some() {
            return Err(unsupported("windows", "cordon runs Linux containers only"));
        }
        if spec.vm().is_some() {
            return Err(unsupported("vm", "cordon does not run virtual machines"));
        }
        if spec.zos().is_some() {
            return Err(unsupported("zos", "cordon runs Linux containers only"));
        }
        for (field, set) in [
            ("uidMappings", spec.uid_mappings().is_some()),
            ("gidMappings", spec.gid_mappings().is_some()),
        ] {
            if set {
                return Err(unsupported(
                    field,
                    "a top-level id mapping is not a field of the runtime spec (its Linux mappings are linux.uidMappings and linux.gidMappings; a mount's own are mounts[].uidMappings, which cordon-oci refuses too)",
                ));
            }
        }
        if let Some(h) = spec.hooks() {
            check_hooks(h)?;
        }
        let root = spec
            .root()
            .as_ref()
            .ok_or_else(|| invalid("root", "a container needs a root filesystem"))?;
        let rootfs = if root.path().is_absolute() {
            root.path().clone()
        } else {
            bundle.join(root.path())
        };
        let version_ok = {
            let v = spec.version();
            let parts: Vec<&str> = v.split(['.', '-', '+']).collect();
            parts.len() >= 3
                && parts[0] == "1"
                && parts[1..3]
                    .iter()
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        };
        if !version_ok {
            return Err(invalid(
                "ociVersion",
                format!(
                    "{:?} is not a 1.x.y version of the runtime spec",
                    spec.version()
                ),
            ));
        }
        // A config without `process` can be created; `start` then fails (runtime spec).
        let has_process = spec.process().is_some();
        let default_process = oci_spec::runtime::Process::default();
        let process = spec.process().as_ref().unwrap_or(&default_process);
        let args = if has_process {
            process.args().clone().unwrap_or_default()
        } else {
            Vec::new()
        };
        if has_process && args.is_empty() {
            return Err(invalid("process.args", "give at least the program to run"));
        }
        if let Some(i) = args.iter().position(|a| a.contains('\0')) {
            return Err(invalid(format!("process.args[{i}]"), "contains a NUL byte"));
        }
        if process.command_line().is_some() {
            return Err(unsupported("process.commandLine", "a Windows-only field"));
        }
        if process
            .selinux_label()
            .as_ref()
            .is_some_and(|s| !s.is_empty())
        {
            return Err(unsupported(
                "process.selinuxLabel",
                "cordon-oci applies no SELinux label; remove the field (cordon confines with namespaces, capabilities and seccomp)",
            ));
        }
        let apparmor_profile = match process.apparmor_profile().as_deref() {
            None | Some("") => None,
            Some(p) if p.contains(['\0', '\n']) || p.len() > 4096 => {
                return Err(invalid(
                    "process.apparmorProfile",
                    "not a profile name (a NUL or a newline, or longer than 4096 bytes)",
                ));
            }
            Some(p) => Some(p.to_string()),
        };
        let io_priority = process
            .io_priority()
            .as_ref()
            .map(io_priority)
            .transpose()?;
        let scheduler = process.scheduler().as_ref().map(scheduler).transpose()?;
        if process.exec_cpu_affinity().is_some() {
            return Err(unsupported("process.execCPUAffinity", "not implemented"));
        }
        if !process.cwd().is_absolute() {
            return Err(invalid("process.cwd", "must be an absolute path"));
        }
        let user = process.user();
        if user.username().as_ref().is_some_and(|s| !s.is_empty()) {
            return Err(unsupported("process.user.username", "a Windows-only field"));
        }
        let mut rlimits = Vec::new();
        for (i, r) in process.rlimits().as_ref().into_iter().flatten().enumerate() {
            let resource = rlimit_resource(r.typ());
            // The runtime spec: duplicated entries of one type MUST be an error (which one
            // would win is not the config's to leave open).
            if rlimits.iter().any(|(res, _, _)| *res == resource) {
                return Err(invalid(
                    format!("process.rlimits[{i}].type"),
                    format!("{} is listed twice; keep one entry per type", r.typ()),
                ));
            }
            rlimits.push((resource, r.soft(), r.hard()));
        }
        let caps = process
            .capabilities()
            .as_ref()
            .map(|c| {
                let names = |s: &Option<oci_spec::runtime::Capabilities>| -> BTreeSet<String> {
                    s.iter()
                        .flatten()
                        .map(|c| {
                            serde_json::to_value(c)
                                .ok()
                                .and_then(|v| v.as_str().map(String::from))
                                .unwrap_or_default()
                        })
                        .collect()
                };
                CapSets {
                    bounding: names(c.bounding()),
                    effective: names(c.effective()),
                    inheritable: names(c.inheritable()),
                    permitted: names(c.permitted()),
                    ambient: names(c.ambient()),
                }
            })
            .unwrap_or_default();
        let not_raisable: Vec<&str> = caps
            .ambient
            .iter()
            .filter(|c| !caps.inheritable.contains(*c) || !caps.permitted.contains(*c))
            .map(String::as_str)
            .collect();
        if !not_raisable.is_empty() {
            return Err(invalid(
                "process.capabilities.ambient",
                format!(
                    "{}: an ambient capability must also be in the inheritable and permitted sets (the kernel refuses to raise it otherwise); add it there or remove it from ambient",
                    not_raisable.join(", ")
                ),
            ));
        }

        let linux = spec
            .linux()
            .clone()
            .ok_or_else(|| invalid("linux", "a Linux container needs the `linux` object"))?;
        if linux.intel_rdt().is_some() {
            return Err(unsupported("linux.intelRdt", "not implemented"));
        }
        // The execution domain: PER_LINUX (0) or PER_LINUX32 (8), as crun sets it; its flags
        // name no value the runtime spec defines.
        let personality = match linux.personality() {
            None => None,
            Some(p) if p.flags().as_ref().is_some_and(|f| !f.is_empty()) => {
                return Err(unsupported(
                    "linux.personality.flags",
                    "the runtime spec defines no flag; leave it empty",
                ));
            }
            Some(p) => Some(match p.domain() {
                oci_spec::runtime::LinuxPersonalityDomain::PerLinux => 0x0000,
                oci_spec::runtime::LinuxPersonalityDomain::PerLinux32 => 0x0008,
            }),
        };
        if linux.memory_policy().is_some() {
            return Err(unsupported("linux.memoryPolicy", "not implemented"));
        }
        if linux.time_offsets().is_some() {
            return Err(unsupported(
                "linux.timeOffsets",
                "time namespaces are not implemented",
            ));
        }
        if linux.net_devices().is_some() {
            return Err(unsupported("linux.netDevices", "not implemented"));
        }
        if linux.mount_label().as_ref().is_some_and(|s| !s.is_empty()) {
            return Err(unsupported(
                "linux.mountLabel",
                "cordon applies no SELinux labels",
            ));
        }
        let mut namespaces = Vec::new();
        for ns in linux.namespaces().iter().flatten() {
            let (flag, name) = match ns.typ() {
                LinuxNamespaceType::Mount => (libc::CLONE_NEWNS, "mount"),
                LinuxNamespaceType::Cgroup => (libc::CLONE_NEWCGROUP, "cgroup"),
                LinuxNamespaceType::Uts => (libc::CLONE_NEWUTS, "uts"),
                LinuxNamespaceType::Ipc => (libc::CLONE_NEWIPC, "ipc"),
                LinuxNamespaceType::User => (libc::CLONE_NEWUSER, "user"),
                LinuxNamespaceType::Pid => (libc::CLONE_NEWPID, "pid"),
                LinuxNamespaceType::Network => (libc::CLONE_NEWNET, "network"),
                LinuxNamespaceType::Time => {
                    return Err(unsupported(
                        "linux.namespaces[time]",
                        "time namespaces are not implemented",
                    ));
                }
            };
            if namespaces.iter().any(|n: &Namespace| n.flag == flag) {
                return Err(invalid(
                    "linux.namespaces",
                    format!("the {name} namespace is listed twice"),
                ));
            }
            namespaces.push(Namespace {
                flag,
                name,
                path: ns.path().clone(),
            });
        }
        let has_new = |flag| {
            namespaces
                .iter()
                .any(|n| n.flag == flag && n.path.is_none())
        };
        let has = |flag| namespaces.iter().any(|n: &Namespace| n.flag == flag);
        if !has(libc::CLONE_NEWNS) {
            return Err(unsupported(
                "linux.namespaces",
                "cordon-oci needs a mount namespace (`{\"type\": \"mount\"}`, new or by path) to build the root; it never changes the host's mounts",
            ));
        }
        let maps = |m: &Option<Vec<oci_spec::runtime::LinuxIdMapping>>| -> Vec<IdMap> {
            m.iter()
                .flatten()
                .map(|m| IdMap {
                    container: m.container_id(),
                    host: m.host_id(),
                    size: m.size(),
                })
                .collect()
        };
        let uid_mappings = maps(linux.uid_mappings());
        let gid_mappings = maps(linux.gid_mappings());
        if has_new(libc::CLONE_NEWUSER) && (uid_mappings.is_empty() || gid_mappings.is_empty()) {
            return Err(invalid(
                "linux.uidMappings",
                "a new user namespace needs linux.uidMappings and linux.gidMappings",
            ));
        }
        let any_maps = !uid_mappings.is_empty() || !gid_mappings.is_empty();
        if !has_new(libc::CLONE_NEWUSER) && any_maps {
            return Err(invalid(
                "linux.uidMappings",
                "id mappings need a new user namespace in linux.namespaces",
            ));
        }
        let hostname = spec.hostname().clone().filter(|h| !h.is_empty());
        if hostname.is_some() && !has(libc::CLONE_NEWUTS) {
            return Err(invalid(
                "hostname",
                "setting the hostname needs a uts namespace (new or by path)",
            ));
        }
        let domainname = spec.domainname().clone().filter(|h| !h.is_empty());
        if domainname.is_some() && !has(libc::CLONE_NEWUTS) {
            return Err(invalid(
                "domainname",
                "setting the domainname needs a uts namespace (new or by path)",
            ));
        }

        let mut mounts = Vec::new();
        for (i, m) in spec.mounts().iter().flatten().enumerate() {
            mounts.push(mount_op(i, m, bundle)?);
        }
        let default_devices = !mounts
            .iter()
            .any(|m| m.dst == Path::new("/dev") && m.kind == "bind");
        let mut devices = Vec::new();
        for (i, d) in linux.devices().iter().flatten().enumerate() {
            let kind = match serde_json::to_value(d.typ())
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .as_deref()
            {
                Some("c") | Some("u") => 'c',
                Some("b") => 'b',
                Some("p") => 'p',
                other => {
                    return Err(invalid(
                        format!("linux.devices[{i}].type"),
                        format!("{other:?} is not c, b, u or p"),
                    ));
                }
            };
            device_path(d.path())
                .map_err(|why| invalid(format!("linux.devices[{i}].path"), why))?;
            // A FIFO has no numbers; a device's must fit dev_t (major 12 bits, minor 20 bits
            // in the kernel's MAJOR/MINOR; makedev would fold a larger one into another).
            for (field, n, max) in [("major", d.major(), 0xfff), ("minor", d.minor(), 0xfffff)] {
                if kind != 'p' && !(0..=max).contains(&n) {
                    return Err(invalid(
                        format!("linux.devices[{i}].{field}"),
                        format!("{n} is not a device {field} number (0 to {max})"),
                    ));
                }
            }
            devices.push(Device {
                path: d.path().clone(),
                kind,
                major: d.major().max(0) as u64,
                minor: d.minor().max(0) as u64,
                mode: d.file_mode().unwrap_or(0o666),
                uid: d.uid().unwrap_or(0),
                gid: d.gid().unwrap_or(0),
            });
        }
        let root_propagation = match linux.rootfs_propagation().as_deref() {
            None | Some("") => libc::MS_SLAVE | libc::MS_REC,
            Some(p) => propagation_flag(p).ok_or_else(|| {
                invalid(
                    "linux.rootfsPropagation",
                    format!("{p:?} is not one of private, rprivate, slave, rslave, shared, rshared, unbindable, runbindable"),
                )
            })?,
        };
        if let Some(seccomp) = linux.seccomp() {
            // The full check happens when the filter is compiled; the cheap ones here.
            const NO_NOTIFY: &str =
                "seccomp user notification (SCMP_ACT_NOTIFY) is not implemented";
            if seccomp.listener_path().is_some() {
                return Err(unsupported("linux.seccomp.listenerPath", NO_NOTIFY));
            }
            if seccomp.listener_metadata().is_some() {
                return Err(unsupported("linux.seccomp.listenerMetadata", NO_NOTIFY));
            }
            if seccomp.default_action() == LinuxSeccompAction::ScmpActNotify {
                return Err(unsupported("linux.seccomp.defaultAction", NO_NOTIFY));
            }
            if let Some(i) = seccomp
                .syscalls()
                .iter()
                .flatten()
                .position(|s| s.action() == LinuxSeccompAction::ScmpActNotify)
            {
                return Err(unsupported(
                    format!("linux.seccomp.syscalls[{i}].action"),
                    NO_NOTIFY,
                ));
            }
        }
        let mut sysctl: Vec<(String, String)> = linux
            .sysctl()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        sysctl.sort();
        for (k, _) in &sysctl {
            if k.is_empty() || k.contains('/') || k.contains("..") {
                return Err(invalid(format!("linux.sysctl[{k}]"), "not a sysctl name"));
            }
            let has = |flag| namespaces.iter().any(|n: &Namespace| n.flag == flag);
            if let Err(why) = sysctl_allowed(k, has) {
                return Err(invalid(format!("linux.sysctl[{k}]"), why));
            }
        }

        let mut env = Vec::new();
        for (i, e) in process.env().iter().flatten().enumerate() {
            let (k, v) = env_entry(e).map_err(|why| invalid(format!("process.env[{i}]"), why))?;
            crate::spec::set_env(&mut env, k, v);
        }
        let setup = ContainerSetup {
            readonly_root: root.readonly().unwrap_or(false),
            cwd: process.cwd().clone(),
            uid: user.uid(),
            gid: user.gid(),
            additional_gids: user.additional_gids().clone().unwrap_or_default(),
            umask: user.umask(),
            terminal: process.terminal().unwrap_or(false),
            console_size: match process.console_size() {
                None => None,
                // The terminal's winsize holds 16-bit rows and columns.
                Some(b) => Some((
                    u16::try_from(b.height()).map_err(|_| {
                        invalid(
                            "process.consoleSize.height",
                            format!("{} rows is more than a terminal has (65535)", b.height()),
                        )
                    })?,
                    u16::try_from(b.width()).map_err(|_| {
                        invalid(
                            "process.consoleSize.width",
                            format!("{} columns is more than a terminal has (65535)", b.width()),
                        )
                    })?,
                )),
            },
            no_new_privileges: process.no_new_privileges().unwrap_or(false),
            new_keyring: true,
            oom_score_adj: process.oom_score_adj(),
            rlimits,
            io_priority,
            scheduler,
            caps,
            namespaces,
            uid_mappings,
            gid_mappings,
            mounts,
            domainname,
            devices,
            default_devices,
            masked: container_paths("linux.maskedPaths", linux.masked_paths())?,
            readonly: container_paths("linux.readonlyPaths", linux.readonly_paths())?,
            sysctl,
            root_propagation,
            seccomp: linux.seccomp().clone(),
            resources: linux.resources().clone(),
            personality,
            apparmor_profile,
        };
        let mut sandbox = SandboxSpec::new(args);
        sandbox.env = env;
        sandbox.rootfs = Rootfs::Dir(rootfs);
        sandbox.hostname = hostname.unwrap_or_default();
        sandbox.container = Some(Box::new(setup));
        Ok(Container {
            bundle: bundle.to_path_buf(),
            sandbox,
            cgroups_path: match linux.cgroups_path() {
                // A path below the cgroup hierarchy: `..` would lead cordon-oci to create,
                // write limits into, and remove directories outside it.
                Some(p) if p.components().any(|c| c == std::path::Component::ParentDir) => {
                    return Err(invalid(
                        "linux.cgroupsPath",
                        "`..` is not allowed (the path is below the cgroup hierarchy)",
                    ));
                }
                p => p.as_ref().map(|p| p.display().to_string()),
            },
            has_process,
            spec,
        })
    }

    /// The container's set-up (always there: [`Container::from_spec`] fills it).
    pub fn setup(&self) -> &ContainerSetup {
        self.sandbox
            .container
            .as_deref()
            .expect("Container::from_spec always sets the container set-up")
    }

    /// See [`Container::setup`].
    pub fn setup_mut(&mut self) -> &mut ContainerSetup {
        self.sandbox
            .container
            .as_deref_mut()
            .expect("Container::from_spec always sets the container set-up")
    }

    /// The root filesystem's absolute host path.
    pub fn rootfs(&self) -> &Path {
        match &self.sandbox.rootfs {
            Rootfs::Dir(p) => p,
            Rootfs::Host => unreachable!("Container::from_spec always sets root.path"),
        }
    }

    /// The hostname to set, if any.
    pub fn hostname(&self) -> Option<&str> {
        Some(self.sandbox.hostname.as_str()).filter(|h| !h.is_empty())
    }

    /// The process environment as execve takes it: `KEY=VALUE` strings, in the config's order.
    pub fn env_strings(&self) -> Vec<String> {
        self.sandbox
            .environment(None)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }

    /// The sysctls whose namespace is joined by path: (key, namespace name, path). `create`
    /// refuses them when that namespace is its own (the host's), as runc does for the
    /// network namespace.
    pub fn sysctl_joined(&self) -> Vec<(&str, &'static str, &Path)> {
        let c = self.setup();
        c.sysctl
            .iter()
            .filter_map(|(k, _)| {
                let (flag, name) = sysctl_namespace(k)?;
                let ns = c.namespaces.iter().find(|n| n.flag == flag)?;
                Some((k.as_str(), name, ns.path.as_deref()?))
            })
            .collect()
    }

    /// `PATH` from the process environment, else a default.
    pub fn path_dirs(&self) -> Vec<String> {
        self.sandbox
            .env
            .iter()
            .find_map(|(k, v)| (k == "PATH").then_some(v.as_str()))
            .unwrap_or(crate::spec::DEFAULT_PATH)
            .split(':')
            .filter(|d| !d.is_empty())
            .map(String::from)
            .collect()
    }
}

/// One `KEY=VALUE` entry of a container's environment, split; refused (without repeating the
/// value, which may be a secret) when execve could not take it: no `=`, an empty key, a NUL.
pub fn env_entry(e: &str) -> Result<(&str, &str), String> {
    match e.split_once('=') {
        Some(("", _)) => Err("the entry has an empty name; give KEY=VALUE".into()),
        Some((k, _)) if e.contains('\0') => Err(format!(
            "the entry for {:?} contains a NUL byte, which execve cannot pass",
            k.chars().take(64).collect::<String>()
        )),
        Some(kv) => Ok(kv),
        None => Err(format!(
            "{:?} has no `=`; give KEY=VALUE",
            e.chars().take(64).collect::<String>()
        )),
    }
}

fn rlimit_resource(t: PosixRlimitType) -> crate::limits::RlimitResource {
    match t {
        PosixRlimitType::RlimitCpu => libc::RLIMIT_CPU,
        PosixRlimitType::RlimitFsize => libc::RLIMIT_FSIZE,
        PosixRlimitType::RlimitData => libc::RLIMIT_DATA,
        PosixRlimitType::RlimitStack => libc::RLIMIT_STACK,
        PosixRlimitType::RlimitCore => libc::RLIMIT_CORE,
        PosixRlimitType::RlimitRss => libc::RLIMIT_RSS,
        PosixRlimitType::RlimitNproc => libc::RLIMIT_NPROC,
        PosixRlimitType::RlimitNofile => libc::RLIMIT_NOFILE,
        PosixRlimitType::RlimitMemlock => libc::RLIMIT_MEMLOCK,
        PosixRlimitType::RlimitAs => libc::RLIMIT_AS,
        PosixRlimitType::RlimitLocks => libc::RLIMIT_LOCKS,
        PosixRlimitType::RlimitSigpending => libc::RLIMIT_SIGPENDING,
        PosixRlimitType::RlimitMsgqueue => libc::RLIMIT_MSGQUEUE,
        PosixRlimitType::RlimitNice => libc::RLIMIT_NICE,
        PosixRlimitType::RlimitRtprio => libc::RLIMIT_RTPRIO,
        PosixRlimitType::RlimitRttime => libc::RLIMIT_RTTIME,
    }
}

/// `mounts[].uidMappings` / `gidMappings` (id-mapped mounts, runtime spec 1.1): oci-spec's
/// `Mount` has no such fields, so serde would drop them and the mount would be made without
/// the mapping. They are refused here, from the raw JSON.
fn refuse_mount_id_mappings(text: &[u8]) -> Result<(), OciConfigError> {
    use serde::de::IgnoredAny;
    #[derive(serde::Deserialize)]
    struct Probe {
        #[serde(default)]
        mounts: Option<Vec<MountProbe>>,
    }
    #[derive(serde::Deserialize)]
    struct MountProbe {
        #[serde(rename = "uidMappings", default)]
        uid: Option<IgnoredAny>,
        #[serde(rename = "gidMappings", default)]
        gid: Option<IgnoredAny>,
    }
    // The text already parsed as a Spec, so this parse fails only where the two shapes
    // differ; the check must not pass unread.
    let p = serde_json::from_slice::<Probe>(text).map_err(|e| {
        invalid(
            "mounts".to_string(),
            format!("cannot read the mounts to look for id mappings: {e}"),
        )
    })?;
    for (i, m) in p.mounts.iter().flatten().enumerate() {
        for (name, present) in [
            ("uidMappings", m.uid.is_some()),
            ("gidMappings", m.gid.is_some()),
        ] {
            if present {
                return Err(unsupported(
                    format!("mounts[{i}].{name}"),
                    "id-mapped mounts are not implemented; remove the mapping (or map ids with linux.uidMappings and a user namespace)",
                ));
            }
        }
    }
    Ok(())
}

/// A propagation option name → its mount(2) flags.
pub fn propagation_flag(name: &str) -> Option<libc::c_ulong> {
    Some(match name {
        "private" => libc::MS_PRIVATE,
        "rprivate" => libc::MS_PRIVATE | libc::MS_REC,
        "shared" => libc::MS_SHARED,
        "rshared" => libc::MS_SHARED | libc::MS_REC,
        "slave" => libc::MS_SLAVE,
        "rslave" => libc::MS_SLAVE | libc::MS_REC,
        "unbindable" => libc::MS_UNBINDABLE,
        "runbindable" => libc::MS_UNBINDABLE | libc::MS_REC,
        _ => return None,
    })
}

/// mount(8) option names that are flags: (name, set?, flag).
const FLAG_OPTIONS: &[(&str, bool, libc::c_ulong)] = &[
    ("ro", true, libc::MS_RDONLY),
    ("rw", false, libc::MS_RDONLY),
    ("nosuid", true, libc::MS_NOSUID),
    ("suid", false, libc::MS_NOSUID),
    ("nodev", true, libc::MS_NODEV),
    ("dev", false, libc::MS_NODEV),
    ("noexec", true, libc::MS_NOEXEC),
    ("exec", false, libc::MS_NOEXEC),
    ("sync", true, libc::MS_SYNCHRONOUS),
    ("async", false, libc::MS_SYNCHRONOUS),
    ("dirsync", true, libc::MS_DIRSYNC),
    ("remount", true, libc::MS_REMOUNT),
    ("mand", true, libc::MS_MANDLOCK),
    ("nomand", false, libc::MS_MANDLOCK),
    ("atime", false, libc::MS_NOATIME),
    ("noatime", true, libc::MS_NOATIME),
    ("diratime", false, libc::MS_NODIRATIME),
    ("nodiratime", true, libc::MS_NODIRATIME),
    ("relatime", true, libc::MS_RELATIME),
    ("norelatime", false, libc::MS_RELATIME),
    ("strictatime", true, libc::MS_STRICTATIME),
    ("nostrictatime", false, libc::MS_STRICTATIME),
    ("silent", true, libc::MS_SILENT),
    ("loud", false, libc::MS_SILENT),
    ("nosymfollow", true, libc::MS_NOSYMFOLLOW),
    ("symfollow", false, libc::MS_NOSYMFOLLOW),
    ("lazytime", true, libc::MS_LAZYTIME),
    ("nolazytime", false, libc::MS_LAZYTIME),
    ("iversion", true, libc::MS_I_VERSION),
    ("noiversion", false, libc::MS_I_VERSION),
    ("defaults", false, 0),
];

/// Flag options that change the filesystem (its superblock), not the mount: on a bind mount
/// the kernel ignores them.
const SUPERBLOCK_ONLY_OPTIONS: &[&str] = &[
    "lazytime",
    "nolazytime",
    "iversion",
    "noiversion",
    "sync",
    "async",
    "dirsync",
    "mand",
    "nomand",
];

/// Options that are instructions to the engine, not to the runtime: nothing to do here.
/// `z`/`Z`: SELinux relabelling, done by podman before `create` (cordon-oci applies no
/// labels); `notmpcopyup`: the default.
const NO_OP_OPTIONS: &[&str] = &["z", "Z", "notmpcopyup"];

/// Each hook's `timeout` is a positive number of seconds (runc refuses the others: leaving it
/// out is how a hook runs without one), and each `env` entry is `KEY=VALUE`.
fn check_hooks(h: &oci_spec::runtime::Hooks) -> Result<(), OciConfigError> {
    #[allow(deprecated)]
    let prestart = h.prestart();
    for (kind, list) in [
        ("prestart", prestart),
        ("createRuntime", h.create_runtime()),
        ("createContainer", h.create_container()),
        ("startContainer", h.start_container()),
        ("poststart", h.poststart()),
        ("poststop", h.poststop()),
    ] {
        for (i, hook) in list.iter().flatten().enumerate() {
            // Run as given, not looked up in cordon-oci's PATH or relative to its working
            // directory (the runtime spec: an absolute path).
            if !hook.path().is_absolute() {
                return Err(invalid(
                    format!("hooks.{kind}[{i}].path"),
                    format!(
                        "{:?} is not an absolute path (the hook is run as given, never looked up)",
                        hook.path()
                    ),
                ));
            }
            if let Some(t) = hook.timeout()
                && t <= 0
            {
                return Err(invalid(
                    format!("hooks.{kind}[{i}].timeout"),
                    format!(
                        "{t} is not a number of seconds the hook may run: give one above 0, or leave the field out for no timeout"
                    ),
                ));
            }
            for (j, e) in hook.env().iter().flatten().enumerate() {
                env_entry(e).map_err(|why| invalid(format!("hooks.{kind}[{i}].env[{j}]"), why))?;
            }
        }
    }
    Ok(())
}

/// A `linux.devices[].path` is a normalized absolute path of a file below /dev: with a `..`
/// (`/dev/../etc/x`) the node would be made, or in a user namespace the host's node bound,
/// outside the container's /dev.
fn device_path(p: &Path) -> Result<(), String> {
    use std::path::Component;
    let shown = p.display();
    let mut parts = p.components();
    if parts.next() != Some(Component::RootDir) {
        return Err(format!(
            "{shown:?} is not an absolute path; give one below /dev (`/dev/NAME`)"
        ));
    }
    if parts.next() != Some(Component::Normal("dev".as_ref())) {
        return Err(format!(
            "{shown:?} is not below /dev: device nodes are created under /dev only"
        ));
    }
    let mut below = 0;
    for c in parts {
        match c {
            Component::Normal(_) => below += 1,
            _ => {
                return Err(format!(
                    "{shown:?} has a `..` component: give the node's path below /dev without one"
                ));
            }
        }
    }
    if below == 0 {
        return Err(format!(
            "{shown:?} is /dev itself: give the node's path below it (`/dev/NAME`)"
        ));
    }
    Ok(())
}

/// maskedPaths / readonlyPaths: absolute paths inside the container, without `..` (a relative
/// one would be resolved against whatever init's working directory is when it applies them).
fn container_paths(
    name: &str,
    paths: &Option<Vec<String>>,
) -> Result<Vec<PathBuf>, OciConfigError> {
    let mut out = Vec::new();
    for (i, p) in paths.iter().flatten().enumerate() {
        let path = PathBuf::from(p);
        if !path.is_absolute() {
            return Err(invalid(format!("{name}[{i}]"), "must be an absolute path"));
        }
        if path
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(invalid(format!("{name}[{i}]"), "`..` is not allowed"));
        }
        out.push(path);
    }
    Ok(out)
}

fn mount_op(i: usize, m: &Mount, bundle: &Path) -> Result<MountOp, OciConfigError> {
    let field = |f: &str| format!("mounts[{i}].{f}");
    // A relative destination is relative to the container's `/` (runtime spec 1.2, which
    // allows it on Linux for older configs, as runc reads it).
    let dst = Path::new("/").join(m.destination());
    if m.destination().as_os_str().is_empty() {
        return Err(invalid(
            field("destination"),
            "give the path in the container",
        ));
    }
    if dst
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Err(invalid(field("destination"), "`..` is not allowed"));
    }
    let mut flags: libc::c_ulong = 0;
    let mut propagation = Vec::new();
    let mut data = Vec::new();
    let mut bind = false;
    let mut recursive = false;
    let mut copy_up = false;
    for opt in m.options().iter().flatten() {
        let o = opt.as_str();
        if o == "bind" {
            bind = true;
        } else if o == "rbind" {
            bind = true;
            recursive = true;
        } else if let Some(p) = propagation_flag(o) {
            propagation.push(p);
        } else if let Some((_, set, flag)) = FLAG_OPTIONS.iter().find(|(n, _, _)| *n == o) {
            if *set {
                flags |= flag;
            } else {
                flags &= !flag;
            }
        } else if o == "tmpcopyup" {
            copy_up = true;
        } else if NO_OP_OPTIONS.contains(&o) {
        } else if matches!(
            o,
            "idmap" | "ridmap" | "rro" | "rrw" | "rnosuid" | "rnodev" | "rnoexec"
        ) || o.starts_with("idmap=")
            || o.starts_with("ridmap=")
        {
            return Err(unsupported(
                field("options"),
                format!("the option {o:?} is not implemented"),
            ));
        } else {
            data.push(o.to_string());
        }
    }
    let kind = m.typ().clone().unwrap_or_default();
    if kind == "bind" {
        bind = true;
    }
    // tmpcopyup fills a new tmpfs with what the directory held; on any other mount it
    // would do nothing (crun refuses it there too).
    if copy_up && (bind || kind != "tmpfs") {
        return Err(invalid(
            field("options"),
            "\"tmpcopyup\" applies to a tmpfs mount only; remove it",
        ));
    }
    // A filesystem's own options (`mode=`, `size=`, `newinstance`, `lowerdir=`) go to
    // mount(2), which refuses those it does not know. A bind mount takes no filesystem data:
    // the kernel ignores `key=value` data on a bind, and so do runc and crun (the runtime
    // validation suite gives `mode=755,size=1k` to every mount, binds included), so those
    // are left out; any other word is an option cordon-oci would otherwise drop without a
    // word: an error.
    if bind {
        data.retain(|o| !o.contains('='));
        // Superblock flags: a bind shares the source's superblock, and a bind (re)mount
        // changes only per-mount flags, so the kernel drops these without an error (runc and
        // crun pass them to that remount, where they do nothing). Refused, not dropped.
        let sb: Vec<String> = m
            .options()
            .iter()
            .flatten()
            .filter(|o| SUPERBLOCK_ONLY_OPTIONS.contains(&o.as_str()))
            .map(|o| format!("{o:?}"))
            .collect();
        if !sb.is_empty() {
            return Err(unsupported(
                field("options"),
                format!(
                    "{}: a filesystem-wide (superblock) flag, which a bind mount cannot set or clear for its own mount point (the kernel would ignore it); remove it, or set it where the source filesystem is mounted",
                    sb.join(", ")
                ),
            ));
        }
    }
    if bind && !data.is_empty() {
        return Err(unsupported(
            field("options"),
            format!(
                "{}: not a mount option cordon-oci knows for a bind mount (bind, rbind, ro, rw, nosuid, nodev, noexec, nosymfollow, the atime options, propagation); remove it",
                data.iter()
                    .map(|o| format!("{o:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let source = m.source().clone().unwrap_or_default();
    let (kind, src) = if bind {
        let src = if source.is_absolute() {
            source
        } else if source.as_os_str().is_empty() {
            return Err(invalid(field("source"), "a bind mount needs a source"));
        } else {
            bundle.join(source)
        };
        ("bind".to_string(), src)
    } else {
        if kind.is_empty() {
            return Err(invalid(field("type"), "give the filesystem type"));
        }
        let known = [
            "proc", "sysfs", "tmpfs", "devpts", "mqueue", "cgroup", "cgroup2", "overlay",
        ];
        if !known.contains(&kind.as_str()) {
            return Err(unsupported(
                field("type"),
                format!(
                    "{kind:?}: cordon-oci mounts bind, proc, sysfs, tmpfs, devpts, mqueue, cgroup, cgroup2 and overlay"
                ),
            ));
        }
        let src = if source.as_os_str().is_empty() {
            PathBuf::from(&kind)
        } else {
            source
        };
        (kind, src)
    };
    Ok(MountOp {
        dst,
        kind,
        src,
        flags,
        propagation,
        data: data.join(","),
        recursive,
        copy_up,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> Spec {
        serde_json::from_str(json).unwrap()
    }

    const BASE: &str = r#"{
        "ociVersion": "1.0.2",
        "process": {"args": ["sh"], "cwd": "/", "user": {"uid": 0, "gid": 0}},
        "root": {"path": "rootfs", "readonly": true},
        "hostname": "h",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/data", "type": "bind", "source": "data", "options": ["rbind", "ro", "rprivate"]}
        ],
        "linux": {"namespaces": [{"type": "mount"}, {"type": "pid"}, {"type": "uts"}, {"type": "network", "path": "/run/netns/x"}],
                  "maskedPaths": ["/proc/kcore"], "readonlyPaths": ["/proc/sys"]}
    }"#;

    #[test]
    fn only_namespaced_sysctls_are_accepted() {
        let with = |sysctl: &str| {
            let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
            v["linux"]["sysctl"] = serde_json::from_str(sysctl).unwrap();
            Container::from_spec(serde_json::from_value(v).unwrap(), Path::new("/b"))
                .map(|c| c.setup().sysctl.len())
                .map_err(|e| e.to_string())
        };
        // BASE has uts and network namespaces (network joined by path), no ipc one.
        assert_eq!(
            with(r#"{"net.ipv4.ip_forward": "1", "kernel.domainname": "d"}"#),
            Ok(2)
        );
        // Review F4: the sysctls of a namespace joined by path are listed for create's check.
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        v["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "ipc", "path": "/proc/1/ns/ipc"}));
        v["linux"]["sysctl"] = serde_json::json!({"net.core.somaxconn": "4097",
            "kernel.shmmni": "4097", "kernel.domainname": "d"});
        let c = Container::from_spec(serde_json::from_value(v).unwrap(), Path::new("/b")).unwrap();
        assert_eq!(
            c.sysctl_joined(),
            [
                ("kernel.shmmni", "ipc", Path::new("/proc/1/ns/ipc")),
                ("net.core.somaxconn", "network", Path::new("/run/netns/x")),
            ]
        );
        let e = with(r#"{"kernel.core_pattern": "|/tmp/x"}"#).unwrap_err();
        assert!(
            e.contains("linux.sysctl[kernel.core_pattern]") && e.contains("host"),
            "{e}"
        );
        let e = with(r#"{"kernel.shmmax": "1"}"#).unwrap_err();
        assert!(e.contains("ipc namespace"), "{e}");
        let e = with(r#"{"vm.overcommit_memory": "1"}"#).unwrap_err();
        assert!(e.contains("not a namespaced sysctl"), "{e}");
    }

    #[test]
    fn io_priority_and_scheduler_are_mapped_or_named() {
        let with = |field: &str, value: serde_json::Value| {
            let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
            v["process"][field] = value;
            Container::from_spec(serde_json::from_value(v).unwrap(), Path::new("/b"))
                .map(|c| (c.setup().io_priority, c.setup().scheduler))
                .map_err(|e| e.to_string())
        };
        let io = |class: &str, priority: i64| {
            with(
                "ioPriority",
                serde_json::json!({"class": class, "priority": priority}),
            )
        };
        // ioprio_set's value: class << 13 | level (RT 1, BE 2, IDLE 3).
        assert_eq!(io("IOPRIO_CLASS_BE", 4).unwrap().0, Some(2 << 13 | 4));
        assert_eq!(io("IOPRIO_CLASS_RT", 0).unwrap().0, Some(1 << 13));
        assert_eq!(io("IOPRIO_CLASS_IDLE", 7).unwrap().0, Some(3 << 13 | 7));
        for bad in [8, -1] {
            let e = io("IOPRIO_CLASS_BE", bad).unwrap_err();
            assert!(e.contains("process.ioPriority.priority"), "{e}");
        }
        let sched = |value: serde_json::Value| with("scheduler", value);
        let a = sched(serde_json::json!({"policy": "SCHED_BATCH", "nice": 5}))
            .unwrap()
            .1
            .unwrap();
        assert_eq!((a.policy, a.nice, a.priority, a.flags), (3, 5, 0, 0));
        let a = sched(serde_json::json!({"policy": "SCHED_RR", "priority": 99,
            "flags": ["SCHED_RESET_ON_FORK", "SCHED_FLAG_UTIL_CLAMP_MAX"]}))
        .unwrap()
        .1
        .unwrap();
        assert_eq!((a.policy, a.priority, a.flags), (2, 99, 0x41));
        let a = sched(serde_json::json!({"policy": "SCHED_DEADLINE",
            "runtime": 10_000_000u64, "deadline": 30_000_000u64, "period": 30_000_000u64}))
        .unwrap()
        .1
        .unwrap();
        assert_eq!(
            (a.policy, a.runtime, a.deadline, a.period),
            (6, 10_000_000, 30_000_000, 30_000_000)
        );
        for (value, field) in [
            (
                serde_json::json!({"policy": "SCHED_FIFO"}),
                "`process.scheduler.priority`",
            ),
            (
                serde_json::json!({"policy": "SCHED_FIFO", "priority": 100}),
                "`process.scheduler.priority`",
            ),
            (
                serde_json::json!({"policy": "SCHED_OTHER", "priority": 1}),
                "`process.scheduler.priority`",
            ),
            (
                serde_json::json!({"policy": "SCHED_OTHER", "nice": 20}),
                "`process.scheduler.nice`",
            ),
            (
                serde_json::json!({"policy": "SCHED_IDLE", "nice": -21}),
                "`process.scheduler.nice`",
            ),
            (
                serde_json::json!({"policy": "SCHED_ISO"}),
                "`process.scheduler.policy`",
            ),
            (
                serde_json::json!({"policy": "SCHED_BATCH", "runtime": 1}),
                "`process.scheduler`",
            ),
            (
                serde_json::json!({"policy": "SCHED_DEADLINE", "runtime": 1}),
                "`process.scheduler`",
            ),
            (
                serde_json::json!({"policy": "SCHED_DEADLINE", "runtime": 20_000_000u64,
                    "deadline": 10_000_000u64}),
                "runtime <= deadline <= period",
            ),
            (
                serde_json::json!({"policy": "SCHED_DEADLINE", "runtime": 100,
                    "deadline": 10_000_000u64}),
                "1024 <= runtime",
            ),
        ] {
            let e = sched(value.clone()).unwrap_err();
            assert!(e.contains(field), "{value}: want {field}: {e}");
        }
        // Neither given: nothing set.
        let c = Container::from_spec(spec(BASE), Path::new("/b")).unwrap();
        assert_eq!((c.setup().io_priority, c.setup().scheduler), (None, None));
    }

    #[test]
    fn maps_the_base_config() {
        let c = Container::from_spec(spec(BASE), Path::new("/b")).unwrap();
        assert_eq!(c.rootfs(), Path::new("/b/rootfs"));
        assert!(c.setup().readonly_root);
        assert_eq!(c.sandbox.argv, ["sh"]);
        assert_eq!(
            c.setup().new_namespaces(),
            libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWUTS
        );
        assert!(c.setup().has_namespace(libc::CLONE_NEWNET));
        assert_eq!(
            c.setup().mounts[1].flags,
            libc::MS_NOSUID | libc::MS_STRICTATIME
        );
        assert_eq!(c.setup().mounts[1].data, "mode=755,size=65536k");
        assert_eq!(c.setup().mounts[2].kind, "bind");
        assert_eq!(c.setup().mounts[2].src, Path::new("/b/data"));
        assert!(c.setup().mounts[2].recursive);
        assert_eq!(c.setup().mounts[2].flags, libc::MS_RDONLY);
        assert_eq!(
            c.setup().mounts[2].propagation,
            [libc::MS_PRIVATE | libc::MS_REC]
        );
        assert_eq!(c.setup().root_propagation, libc::MS_SLAVE | libc::MS_REC);
        assert!(c.setup().default_devices);
        assert_eq!(c.setup().masked, [PathBuf::from("/proc/kcore")]);
    }

    #[test]
    fn maps_into_the_sandbox_spec_that_cordons_own_runs_use() {
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        v["process"]["env"] = serde_json::json!(["B=2", "A=1=x", "B=3", "E="]);
        let c = Container::from_spec(serde_json::from_value(v).unwrap(), Path::new("/b")).unwrap();
        let s = &c.sandbox;
        assert_eq!(s.argv, ["sh"]);
        assert_eq!(s.rootfs, Rootfs::Dir(PathBuf::from("/b/rootfs")));
        assert_eq!(s.hostname, "h");
        assert_eq!(c.hostname(), Some("h"));
        // The config's environment, nothing added; a key given twice keeps its first place
        // and takes its last value, as runc sets it.
        assert_eq!(c.env_strings(), ["B=3", "A=1=x", "E="].map(String::from));
        assert_eq!(
            c.path_dirs(),
            crate::spec::DEFAULT_PATH.split(':').collect::<Vec<_>>()
        );
        // Nothing of the hardened launcher's is set, and that launcher refuses the spec.
        ContainerSetup::check_container_spec(s).unwrap();
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("cordon-oci run"), "{e}");
        // Without a hostname (or with an empty one) none is set.
        for hostname in [None, Some("")] {
            let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
            match hostname {
                Some(h) => v["hostname"] = serde_json::json!(h),
                None => drop(v.as_object_mut().unwrap().remove("hostname")),
            }
            let c =
                Container::from_spec(serde_json::from_value(v).unwrap(), Path::new("/b")).unwrap();
            assert_eq!(c.sandbox.hostname, "", "{hostname:?}");
        }
    }

    #[test]
    fn environment_entries_and_arguments_that_execve_cannot_take_are_refused() {
        let e = error_of(|v| v["process"]["env"] = serde_json::json!(["A=1", "NOVALUE"]));
        assert!(
            e.contains("process.env[1]") && e.contains("KEY=VALUE"),
            "{e}"
        );
        let e = error_of(|v| v["process"]["env"] = serde_json::json!(["=1"]));
        assert!(e.contains("process.env[0]"), "{e}");
        // The value may be a secret: it is not repeated.
        let e = error_of(|v| v["process"]["env"] = serde_json::json!(["TOKEN=sec\0ret"]));
        assert!(
            e.contains("process.env[0]") && e.contains("\"TOKEN\""),
            "{e}"
        );
        assert!(!e.contains("sec"), "{e}");
        let e = error_of(|v| v["process"]["args"] = serde_json::json!(["sh", "a\0b"]));
        assert!(e.contains("process.args[1]") && e.contains("NUL"), "{e}");
    }

    // process.apparmorProfile is kept for the process's execve; an empty one is none.
    #[test]
    fn an_apparmor_profile_is_kept() {
        let with = |p: &str| {
            let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
            v["process"]["apparmorProfile"] = p.into();
            let s: Spec = serde_json::from_value(v).unwrap();
            Container::from_spec(s, Path::new("/b"))
                .unwrap()
                .setup()
                .apparmor_profile
                .clone()
        };
        assert_eq!(
            with("cri-containerd.apparmor.d"),
            Some("cri-containerd.apparmor.d".into())
        );
        assert_eq!(with(""), None);
    }

    fn error_of(edit: impl FnOnce(&mut serde_json::Value)) -> String {
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        edit(&mut v);
        let s: Spec = serde_json::from_value(v).unwrap();
        Container::from_spec(s, Path::new("/b"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn hook_timeouts_and_env_entries_are_checked() {
        let hooks = |timeout: i64, env: &[&str]| {
            serde_json::json!({"poststop": [{"path": "/bin/true"},
                {"path": "/bin/true", "timeout": timeout, "env": env}]})
        };
        for t in [0, -5] {
            let e = error_of(|v| v["hooks"] = hooks(t, &[]));
            assert!(e.contains("`hooks.poststop[1].timeout`"), "{t}: {e}");
        }
        let e = error_of(|v| v["hooks"] = hooks(3, &["A=1", "NOEQUALS"]));
        assert!(
            e.contains("`hooks.poststop[1].env[1]`") && e.contains("NOEQUALS"),
            "{e}"
        );
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        v["hooks"] = hooks(3, &["A=1", "B="]);
        let s: Spec = serde_json::from_value(v).unwrap();
        assert!(Container::from_spec(s, Path::new("/b")).is_ok());
    }

    #[test]
    fn values_the_spec_forbids_or_cordon_cannot_honour_are_named() {
        // Each: an edit of BASE, and the field the error must name.
        type Edit = fn(&mut serde_json::Value);
        let cases: [(Edit, &str); 12] = [
            (
                |v| {
                    v["process"]["rlimits"] = serde_json::json!([
                        {"type": "RLIMIT_NOFILE", "soft": 10, "hard": 10},
                        {"type": "RLIMIT_CORE", "soft": 0, "hard": 0},
                        {"type": "RLIMIT_NOFILE", "soft": 20, "hard": 20}])
                },
                "`process.rlimits[2].type`",
            ),
            (
                |v| v["hooks"] = serde_json::json!({"poststart": [{"path": "true"}]}),
                "`hooks.poststart[0].path`",
            ),
            (
                |v| v["process"]["consoleSize"] = serde_json::json!({"height": 70000, "width": 80}),
                "`process.consoleSize.height`",
            ),
            (
                |v| v["process"]["consoleSize"] = serde_json::json!({"height": 24, "width": 65536}),
                "`process.consoleSize.width`",
            ),
            (
                |v| {
                    v["linux"]["devices"] = serde_json::json!([
                        {"path": "/dev/a", "type": "c", "major": 1, "minor": 3},
                        {"path": "/dev/b", "type": "c", "major": -1, "minor": 3}])
                },
                "`linux.devices[1].major`",
            ),
            (
                |v| v["linux"]["devices"] = serde_json::json!([{"path": "/dev/b", "type": "b", "major": 8, "minor": 1048576}]),
                "`linux.devices[0].minor`",
            ),
            (
                |v| {
                    v["linux"]["seccomp"] = serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW", "listenerMetadata": "x"})
                },
                "`linux.seccomp.listenerMetadata`",
            ),
            (
                |v| {
                    v["linux"]["seccomp"] = serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW",
                    "syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_ERRNO"},
                                 {"names": ["mkdir"], "action": "SCMP_ACT_NOTIFY"}]})
                },
                "`linux.seccomp.syscalls[1].action`",
            ),
            (
                |v| v["linux"]["seccomp"] = serde_json::json!({"defaultAction": "SCMP_ACT_NOTIFY"}),
                "`linux.seccomp.defaultAction`",
            ),
            (
                |v| v["mounts"][2]["options"] = serde_json::json!(["rbind", "tmpcopyup"]),
                "`mounts[2].options`",
            ),
            (
                |v| {
                    v["gidMappings"] =
                        serde_json::json!([{"containerID": 0, "hostID": 1, "size": 1}])
                },
                "`gidMappings`",
            ),
            (
                |v| v["mounts"][0]["destination"] = serde_json::json!(""),
                "`mounts[0].destination`",
            ),
        ];
        for (edit, field) in cases {
            let e = error_of(edit);
            assert!(e.contains(field), "want {field}: {e}");
        }
        // What the spec allows stays allowed: one entry per rlimit type, a FIFO (no
        // numbers), the largest numbers, tmpcopyup on a tmpfs, and a relative destination
        // (relative to the container's `/`).
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        v["process"]["rlimits"] = serde_json::json!([
            {"type": "RLIMIT_NOFILE", "soft": 10, "hard": 10},
            {"type": "RLIMIT_CORE", "soft": 0, "hard": 0}]);
        v["linux"]["devices"] = serde_json::json!([
            {"path": "/dev/p", "type": "p", "major": 0, "minor": 0},
            {"path": "/dev/c", "type": "c", "major": 4095, "minor": 1048575}]);
        v["mounts"][1]["options"] = serde_json::json!(["tmpcopyup"]);
        v["mounts"][0]["destination"] = serde_json::json!("proc");
        v["process"]["consoleSize"] = serde_json::json!({"height": 65535, "width": 80});
        let c = Container::from_spec(serde_json::from_value(v).unwrap(), Path::new("/b")).unwrap();
        assert_eq!(c.setup().rlimits.len(), 2);
        assert_eq!(
            (c.setup().devices[1].major, c.setup().devices[1].minor),
            (4095, 1048575)
        );
        assert!(c.setup().mounts[1].copy_up);
        assert_eq!(c.setup().mounts[0].dst, Path::new("/proc"));
        assert_eq!(c.setup().console_size, Some((65535, 80)));
    }

    #[test]
    fn a_value_of_the_wrong_kind_names_its_field() {
        let e = |json: &str| {
            Container::from_json(json.as_bytes(), Path::new("/b"))
                .unwrap_err()
                .to_string()
        };
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        v["process"]["capabilities"] =
            serde_json::json!({"bounding": ["CAP_KILL", "CAP_NO_SUCH_THING"]});
        let got = e(&v.to_string());
        assert!(
            got.contains("`process.capabilities.bounding[1]`") && got.contains("CAP_NO_SUCH_THING"),
            "{got}"
        );
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        v["linux"]["namespaces"][0]["type"] = serde_json::json!("bogus");
        let got = e(&v.to_string());
        assert!(got.contains("`linux.namespaces[0].type`"), "{got}");
        // Not JSON at all: the parser's own words, with no field to name.
        let got = e("{\"ociVersion\": ");
        assert!(
            got.starts_with("cannot read config.json: ") && got.contains("EOF while parsing"),
            "{got}"
        );
        // Trailing data after the object is refused, as before.
        let got = e(&format!("{BASE} x"));
        assert!(got.contains("trailing characters"), "{got}");
    }

    // A config of a newer runtime spec: the fields cordon-oci does not know are refused,
    // named; one of 1.2 or before ignores them (extensions, as the spec requires).
    #[test]
    fn fields_of_a_newer_runtime_spec_are_refused_not_dropped() {
        let with = |version: &str| {
            let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
            v["ociVersion"] = serde_json::json!(version);
            v["linux"]["futureKnob"] = serde_json::json!({"on": true});
            v["process"]["rlimits"] =
                serde_json::json!([{"type": "RLIMIT_NOFILE", "soft": 1, "hard": 1, "future": 2}]);
            v["annotations"] = serde_json::json!({"org.example/x": "y"});
            v["linux"]["sysctl"] = serde_json::json!({"net.ipv4.ip_forward": "1"});
            v["hostname"] = serde_json::Value::Null;
            Container::from_json(v.to_string().as_bytes(), Path::new("/b"))
                .map_err(|e| e.to_string())
        };
        let e = with("1.3.0").unwrap_err();
        assert!(
            e.contains("`linux.futureKnob`, `process.rlimits[0].future`") && e.contains("1.3.0"),
            "{e}"
        );
        for v in ["1.2.1", "1.0.2", "1.2.0-rc.1"] {
            assert!(with(v).is_ok(), "{v}: {:?}", with(v));
        }
        // The version `features` reports is the one this check holds configs to.
        assert!(
            crate::oci::OCI_VERSION.starts_with(&format!("{}.{}.", SPEC_VERSION.0, SPEC_VERSION.1)),
            "{} against {SPEC_VERSION:?}",
            crate::oci::OCI_VERSION
        );
        // A 1.3 config with only fields cordon-oci knows runs.
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        v["ociVersion"] = serde_json::json!("1.3.0");
        assert!(Container::from_json(v.to_string().as_bytes(), Path::new("/b")).is_ok());
    }

    // The same for an `exec --process` file: its fields are named as the config's `process`.
    #[test]
    fn fields_of_a_newer_runtime_spec_in_a_process_file_are_refused() {
        let text = br#"{"args": ["true"], "cwd": "/", "futureFlag": true, "user": {"uid": 0, "gid": 0, "future": 1}}"#;
        let proc: oci_spec::runtime::Process = parse_json(text).unwrap();
        let e = refuse_unknown_process_fields("1.3.0", &proc, text)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`process.futureFlag`, `process.user.future`") && e.contains("1.3.0"),
            "{e}"
        );
        assert!(refuse_unknown_process_fields("1.2.1", &proc, text).is_ok());
        let known = br#"{"args": ["true"], "cwd": "/", "user": {"uid": 0, "gid": 0}}"#;
        let proc: oci_spec::runtime::Process = parse_json(known).unwrap();
        assert!(refuse_unknown_process_fields("1.3.0", &proc, known).is_ok());
    }

    #[test]
    fn device_paths_are_normalized_and_below_dev() {
        let dev =
            |path: &str| serde_json::json!([{"path": path, "type": "c", "major": 1, "minor": 3}]);
        for bad in [
            "/dev/../etc/evil",
            "/dev/x/../../etc/evil",
            "/dev/..",
            "dev/null",
            "/devx/null",
            "/etc/null",
            "/dev",
            "/dev/",
        ] {
            let e = error_of(|v| v["linux"]["devices"] = dev(bad));
            assert!(e.contains("`linux.devices[0].path`"), "{bad}: {e}");
        }
        for good in ["/dev/fuse", "/dev/net/tun", "/dev/./null"] {
            let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
            v["linux"]["devices"] = dev(good);
            let s: Spec = serde_json::from_value(v).unwrap();
            let c = Container::from_spec(s, Path::new("/b")).unwrap();
            assert_eq!(c.setup().devices.len(), 1, "{good}");
        }
    }

    #[test]
    fn cgroups_path_without_dotdot() {
        for bad in ["../../tmp/x", "/sys/../../tmp/x", "a/../../b"] {
            let e = error_of(|v| v["linux"]["cgroupsPath"] = serde_json::json!(bad));
            assert!(
                e.contains("linux.cgroupsPath") && e.contains(".."),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn masked_and_readonly_paths_must_be_absolute_without_dotdot() {
        // Found by the oci_config fuzz target: a relative masked path was accepted.
        let e = error_of(|v| {
            v["linux"]["maskedPaths"] = serde_json::json!(["/proc/kcore", "Croc/sysrq-trigger"])
        });
        assert!(
            e.contains("linux.maskedPaths[1]") && e.contains("absolute"),
            "{e}"
        );
        let e = error_of(|v| v["linux"]["readonlyPaths"] = serde_json::json!(["/proc/../etc"]));
        assert!(
            e.contains("linux.readonlyPaths[0]") && e.contains(".."),
            "{e}"
        );
    }

    #[test]
    fn unsupported_fields_are_named() {
        let e = error_of(|v| v["linux"]["intelRdt"] = serde_json::json!({"closID": "x"}));
        assert!(e.contains("`linux.intelRdt`"), "{e}");
        let e =
            error_of(|v| v["process"]["selinuxLabel"] = "system_u:system_r:container_t:s0".into());
        assert!(e.contains("`process.selinuxLabel`"), "{e}");
        let e = error_of(|v| v["process"]["apparmorProfile"] = "p\nchangeprofile x".into());
        assert!(
            e.contains("`process.apparmorProfile`") && e.contains("newline"),
            "{e}"
        );
        let e = error_of(|v| v["mounts"][0]["options"] = serde_json::json!(["idmap"]));
        assert!(e.contains("`mounts[0].options`"), "{e}");
        let e = error_of(|v| v["mounts"][0]["type"] = "nfs".into());
        assert!(e.contains("`mounts[0].type`"), "{e}");
        let e = error_of(|v| v["linux"]["namespaces"] = serde_json::json!([{"type": "pid"}]));
        assert!(e.contains("`linux.namespaces`"), "{e}");
        let e = error_of(|v| {
            v["linux"]["uidMappings"] =
                serde_json::json!([{"containerID": 0, "hostID": 1000, "size": 1}])
        });
        assert!(e.contains("`linux.uidMappings`"), "{e}");
        let e = error_of(|v| v["linux"]["rootfsPropagation"] = "sideways".into());
        assert!(e.contains("`linux.rootfsPropagation`"), "{e}");
    }

    #[test]
    fn mount_options_are_honoured_or_refused() {
        // Review F6: nosymfollow was dropped, unknown bind options ignored, per-mount id
        // mappings dropped by serde.
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        v["mounts"][2]["options"] = serde_json::json!(["rbind", "nosymfollow", "z", "rprivate"]);
        let c = Container::from_spec(serde_json::from_value(v.clone()).unwrap(), Path::new("/b"))
            .unwrap();
        assert_eq!(c.setup().mounts[2].flags, libc::MS_NOSYMFOLLOW);
        assert_eq!(c.setup().mounts[2].data, "");
        let e = error_of(|v| {
            v["mounts"][2]["options"] = serde_json::json!(["rbind", "ro", "nosymlinks", "x=1"])
        });
        assert!(
            e.contains("`mounts[2].options`") && e.contains("\"nosymlinks\"") && !e.contains("x=1"),
            "{e}"
        );
        // Superblock flags cannot be set by a bind: refused, naming them.
        for o in SUPERBLOCK_ONLY_OPTIONS {
            let e = error_of(|v| v["mounts"][2]["options"] = serde_json::json!(["rbind", "ro", o]));
            assert!(
                e.contains("`mounts[2].options`")
                    && e.contains(&format!("\"{o}\""))
                    && e.contains("superblock"),
                "{e}"
            );
        }
        // On a filesystem mount of its own they are flags of mount(2).
        let mut t = v.clone();
        t["mounts"][1]["options"] = serde_json::json!(["nosuid", "lazytime", "iversion"]);
        let c = Container::from_spec(serde_json::from_value(t).unwrap(), Path::new("/b")).unwrap();
        assert_eq!(
            c.setup().mounts[1].flags,
            libc::MS_NOSUID | libc::MS_LAZYTIME | libc::MS_I_VERSION
        );
        // Filesystem data on a bind is ignored, as the kernel ignores it there.
        v["mounts"][2]["options"] = serde_json::json!(["rbind", "nosuid", "mode=755", "size=1k"]);
        let c = Container::from_spec(serde_json::from_value(v.clone()).unwrap(), Path::new("/b"))
            .unwrap();
        assert_eq!(
            (c.setup().mounts[2].flags, c.setup().mounts[2].data.as_str()),
            (libc::MS_NOSUID, "")
        );
        // A filesystem's own options still go to mount(2) (which checks them).
        let c = Container::from_spec(spec(BASE), Path::new("/b")).unwrap();
        assert_eq!(c.setup().mounts[1].data, "mode=755,size=65536k");
        for key in ["uidMappings", "gidMappings"] {
            let mut v = v.clone();
            v["mounts"][2][key] =
                serde_json::json!([{"containerID": 0, "hostID": 100000, "size": 1000}]);
            let text = serde_json::to_vec(&v).unwrap();
            let e = Container::from_json(&text, Path::new("/b"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("`mounts[2].{key}`")), "{e}");
        }
    }

    #[test]
    fn ambient_capabilities_must_be_inheritable_and_permitted() {
        let e = error_of(|v| {
            v["process"]["capabilities"] = serde_json::json!({
                "permitted": ["CAP_KILL", "CAP_CHOWN"], "inheritable": ["CAP_CHOWN"],
                "ambient": ["CAP_KILL", "CAP_CHOWN"]})
        });
        assert!(
            e.contains("`process.capabilities.ambient`") && e.contains("CAP_KILL:"),
            "{e}"
        );
    }

    #[test]
    fn capabilities_the_kernel_lacks_are_named() {
        let sets = CapSets {
            bounding: ["CAP_KILL", "CAP_BPF"].map(String::from).into(),
            effective: ["CAP_KILL"].map(String::from).into(),
            ..Default::default()
        };
        let all = caps::all();
        assert!(sets.check_known(|n| capability(n, &all)).is_ok());
        let mut no_bpf = all.clone();
        no_bpf.remove(&caps::Capability::CAP_BPF);
        let e = sets
            .check_known(|n| capability(n, &no_bpf))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`process.capabilities.bounding`")
                && e.contains("CAP_BPF: not known to the running kernel"),
            "{e}"
        );
        // A name that is no capability at all is named too, not dropped.
        let odd = CapSets {
            effective: ["CAP_KILL", "CAP_NO_SUCH"].map(String::from).into(),
            ..Default::default()
        };
        let e = odd
            .check_known(|n| capability(n, &all))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`process.capabilities.effective`")
                && e.contains("\"CAP_NO_SUCH\": not a capability"),
            "{e}"
        );
    }

    #[test]
    fn capability_parses_names_against_the_supported_list() {
        let all = caps::all();
        assert_eq!(
            capability("CAP_SYS_ADMIN", &all),
            Ok(caps::Capability::CAP_SYS_ADMIN)
        );
        assert!(capability("CAP_SYS_ADMIN", &caps::CapsHashSet::new()).is_err());
        assert!(capability("", &all).is_err());
        assert!(capability("cap_kill_all", &all).is_err());
    }

    #[test]
    fn unknown_properties_are_ignored() {
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        v["org.example.extension"] = serde_json::json!({"a": 1});
        let s: Spec = serde_json::from_value(v).unwrap();
        assert!(Container::from_spec(s, Path::new("/b")).is_ok());
    }

    #[test]
    fn capabilities_by_name() {
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        v["process"]["capabilities"] =
            serde_json::json!({"bounding": ["CAP_KILL", "CAP_CHOWN"], "ambient": []});
        let s: Spec = serde_json::from_value(v).unwrap();
        let c = Container::from_spec(s, Path::new("/b")).unwrap();
        assert_eq!(
            c.setup().caps.bounding.iter().collect::<Vec<_>>(),
            ["CAP_CHOWN", "CAP_KILL"]
        );
        assert!(c.setup().caps.effective.is_empty());
    }
}

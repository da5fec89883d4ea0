//! A sandbox whose process and root the caller sets up field by field: an OCI container.
//!
//! cordon's own runs (`cordon exec`, `cordon run`, JSON requests) have a fixed set-up: the
//! sandbox user, no capabilities, the seven namespaces, cordon's mounts and seccomp policy.
//! An OCI config.json says all of that itself. [`super::oci`] maps it into a [`SandboxSpec`]
//! (argv, environment, root and hostname in the spec's own fields) with this
//! [`ContainerSetup`] in [`SandboxSpec::container`], and cordon-oci's launcher builds the
//! container from that one spec. The hardened launcher refuses a spec that carries a setup
//! ([`SandboxSpec::validate`]); cordon-oci refuses one that sets anything of the hardened
//! launcher's ([`ContainerSetup::check_container_spec`]). Neither drops a field silently.
//!
//! Pure data: the mapping and its checks live in [`super::oci`].
//!
//! [`SandboxSpec`]: super::SandboxSpec
//! [`SandboxSpec::container`]: super::SandboxSpec::container
//! [`SandboxSpec::validate`]: super::SandboxSpec::validate

use super::{IdMap, SandboxSpec};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// A scheduling policy and its parameters (`process.scheduler`), the fields of the kernel's
/// `struct sched_attr` (sched_setattr(2)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedAttr {
    /// `SCHED_OTHER` (0), `SCHED_FIFO` (1), `SCHED_RR` (2), `SCHED_BATCH` (3), `SCHED_IDLE`
    /// (5) or `SCHED_DEADLINE` (6).
    pub policy: u32,
    /// `SCHED_FLAG_*` bits.
    pub flags: u64,
    pub nice: i32,
    /// The static priority of `SCHED_FIFO` and `SCHED_RR` (1-99); 0 for the others.
    pub priority: u32,
    /// `SCHED_DEADLINE`'s runtime, deadline and period, in nanoseconds.
    pub runtime: u64,
    pub deadline: u64,
    pub period: u64,
}

/// One namespace of the container: a new one, or an existing one joined by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// The `CLONE_NEW*` flag.
    pub flag: libc::c_int,
    /// The config's name for it (`network`, `mount`...), for messages.
    pub name: &'static str,
    pub path: Option<PathBuf>,
}

/// How one mount of `mounts[]` is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOp {
    /// Destination, absolute, inside the container's root.
    pub dst: PathBuf,
    /// `bind` for bind mounts, else the filesystem type.
    pub kind: String,
    /// Source: a host path for binds (made absolute against the bundle), else the device
    /// string given to mount(2).
    pub src: PathBuf,
    pub flags: libc::c_ulong,
    /// Propagation flags applied after the mount (`rprivate`, `shared`...).
    pub propagation: Vec<libc::c_ulong>,
    /// Options mount(2) does not know as flags: passed as its data string.
    pub data: String,
    pub recursive: bool,
    /// `tmpcopyup`: copy what the destination held into the new tmpfs.
    pub copy_up: bool,
}

/// A device node to create in /dev.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub path: PathBuf,
    /// `c`, `b` or `p`.
    pub kind: char,
    pub major: u64,
    pub minor: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Capability sets by name (`CAP_SYS_ADMIN`), as the config lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapSets {
    pub bounding: BTreeSet<String>,
    pub effective: BTreeSet<String>,
    pub inheritable: BTreeSet<String>,
    pub permitted: BTreeSet<String>,
    pub ambient: BTreeSet<String>,
}

/// Everything of a container's set-up beyond what runs (the spec's `argv` and `env`), its root
/// directory (`rootfs`) and its hostname (`hostname`; empty: left as it is). With a setup, the
/// spec's `env` is the whole environment, in its order ([`SandboxSpec::environment`]).
#[derive(Debug, Clone)]
pub struct ContainerSetup {
    /// The root is remounted read-only after the mounts.
    pub readonly_root: bool,
    pub cwd: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub additional_gids: Vec<u32>,
    pub umask: Option<u32>,
    pub terminal: bool,
    /// (rows, columns)
    pub console_size: Option<(u16, u16)>,
    pub no_new_privileges: bool,
    /// The process gets a new session keyring of its own (runc's default; `create
    /// --no-new-keyring` keeps the caller's).
    pub new_keyring: bool,
    pub oom_score_adj: Option<i32>,
    /// (resource, soft, hard)
    pub rlimits: Vec<(crate::limits::RlimitResource, u64, u64)>,
    /// `process.ioPriority`, as ioprio_set(2) takes it: `class << 13 | level`.
    pub io_priority: Option<i32>,
    /// `process.scheduler`, checked, as sched_setattr(2) takes it.
    pub scheduler: Option<SchedAttr>,
    pub caps: CapSets,
    pub namespaces: Vec<Namespace>,
    pub uid_mappings: Vec<IdMap>,
    pub gid_mappings: Vec<IdMap>,
    pub mounts: Vec<MountOp>,
    pub domainname: Option<String>,
    pub devices: Vec<Device>,
    /// Create the default device nodes (unless /dev is bound from elsewhere).
    pub default_devices: bool,
    pub masked: Vec<PathBuf>,
    pub readonly: Vec<PathBuf>,
    pub sysctl: Vec<(String, String)>,
    /// Propagation flags for `/` (default `MS_SLAVE | MS_REC`, as runc).
    pub root_propagation: libc::c_ulong,
    /// The seccomp policy in the runtime spec's form, compiled when the container is created
    /// (in place of the spec's `seccomp_policy`, which names one of cordon's own).
    pub seccomp: Option<oci_spec::runtime::LinuxSeccomp>,
    /// The cgroup limits in the runtime spec's form (in place of the spec's `limits`, which
    /// are the hardened launcher's: wall time, output, workspace...).
    pub resources: Option<oci_spec::runtime::LinuxResources>,
    /// `linux.personality`: the execution domain set right before the process's execve
    /// (`PER_LINUX` or `PER_LINUX32`).
    pub personality: Option<libc::c_ulong>,
    /// `process.apparmorProfile`: the AppArmor profile the process's execve enters.
    pub apparmor_profile: Option<String>,
}

impl ContainerSetup {
    /// Namespaces to create (`CLONE_NEW*` flags of the entries without a path).
    pub fn new_namespaces(&self) -> libc::c_int {
        self.namespaces
            .iter()
            .filter(|n| n.path.is_none())
            .fold(0, |acc, n| acc | n.flag)
    }

    /// Whether the container has a namespace (new or joined) of this kind.
    pub fn has_namespace(&self, flag: libc::c_int) -> bool {
        self.namespaces.iter().any(|n| n.flag == flag)
    }

    /// Whether `spec` is one cordon-oci's launcher can build a container from, or an error
    /// naming what is wrong: no container set-up, no root directory, a hostname without a uts
    /// namespace, or a field that is the hardened launcher's and not at its default (a
    /// container's launcher has no use for it: it writes no input files, collects nothing,
    /// binds only what `mounts` say), which would otherwise be dropped silently.
    pub fn check_container_spec(spec: &SandboxSpec) -> Result<(), String> {
        let Some(setup) = spec.container.as_deref() else {
            return Err("the sandbox spec has no container set-up".into());
        };
        if !matches!(spec.rootfs, super::Rootfs::Dir(_)) {
            return Err("a container needs a root directory (root.path)".into());
        }
        if !spec.hostname.is_empty() && !setup.has_namespace(libc::CLONE_NEWUTS) {
            return Err("setting the hostname needs a uts namespace (new or by path)".into());
        }
        let d = SandboxSpec::new(Vec::new());
        // Every field by name, so that a field added to SandboxSpec does not build until it
        // is decided here whether a container honours it.
        let SandboxSpec {
            argv: _,
            command_path,
            env: _,
            rootfs: _,
            hostname: _,
            container: _,
            // Names in messages about limits, which a container does not take from here.
            limit_naming: _,
            limits,
            stdin,
            exact_output,
            degrade,
            backend,
            seccomp_policy,
            passthrough,
            stream,
            stream_phase,
            files,
            collect,
            network,
            binds,
            export,
        } = spec;
        let unhonoured = [
            (
                "limits (a container's are linux.resources)",
                *limits != d.limits,
            ),
            (
                "command_path (a container's command is found on its own PATH)",
                command_path.is_some(),
            ),
            ("stdin", *stdin != d.stdin),
            ("exact_output", *exact_output != d.exact_output),
            ("degrade", *degrade != d.degrade),
            ("backend", *backend != d.backend),
            (
                "seccomp_policy (a container's is linux.seccomp)",
                *seccomp_policy != d.seccomp_policy,
            ),
            ("passthrough", *passthrough != d.passthrough),
            ("stream", stream.is_some() || stream_phase.is_some()),
            ("files", !files.is_empty()),
            ("collect", collect.is_some()),
            (
                "network (a container's is linux.namespaces)",
                *network != d.network,
            ),
            ("binds (a container's are mounts)", !binds.is_empty()),
            ("export", export.is_some()),
        ];
        match unhonoured.iter().find(|(_, set)| *set) {
            Some((field, _)) => Err(format!(
                "the sandbox spec sets `{field}`, which a container's launcher does not honour"
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> ContainerSetup {
        ContainerSetup {
            readonly_root: false,
            cwd: "/".into(),
            uid: 0,
            gid: 0,
            additional_gids: Vec::new(),
            umask: None,
            terminal: false,
            console_size: None,
            no_new_privileges: false,
            new_keyring: true,
            oom_score_adj: None,
            rlimits: Vec::new(),
            io_priority: None,
            scheduler: None,
            caps: CapSets::default(),
            namespaces: vec![Namespace {
                flag: libc::CLONE_NEWNS,
                name: "mount",
                path: None,
            }],
            uid_mappings: Vec::new(),
            gid_mappings: Vec::new(),
            mounts: Vec::new(),
            domainname: None,
            devices: Vec::new(),
            default_devices: true,
            masked: Vec::new(),
            readonly: Vec::new(),
            sysctl: Vec::new(),
            root_propagation: libc::MS_SLAVE | libc::MS_REC,
            seccomp: None,
            resources: None,
            personality: None,
            apparmor_profile: None,
        }
    }

    #[test]
    fn a_container_launcher_refuses_what_only_the_hardened_launcher_honours() {
        let mut base = SandboxSpec::new(vec!["sh".into()]);
        let e = ContainerSetup::check_container_spec(&base).unwrap_err();
        assert!(e.contains("no container set-up"), "{e}");
        base.container = Some(Box::new(setup()));
        let e = ContainerSetup::check_container_spec(&base).unwrap_err();
        assert!(e.contains("root directory"), "{e}");
        base.rootfs = crate::spec::Rootfs::Dir("/b/rootfs".into());
        // SandboxSpec::new's hostname, without a uts namespace.
        let e = ContainerSetup::check_container_spec(&base).unwrap_err();
        assert!(e.contains("uts namespace"), "{e}");
        base.hostname.clear();
        ContainerSetup::check_container_spec(&base).unwrap();
        type Set = Box<dyn Fn(&mut SandboxSpec)>;
        let cases: Vec<(&str, Set)> = vec![
            ("limits", Box::new(|s| s.limits.pids = Some(5))),
            (
                "stdin",
                Box::new(|s| s.stdin = crate::spec::StdinSource::Null),
            ),
            (
                "seccomp_policy",
                Box::new(|s| s.seccomp_policy = "other".into()),
            ),
            ("passthrough", Box::new(|s| s.passthrough = true)),
            (
                "stream",
                Box::new(|s| s.stream = Some(crate::outcome::OutputEncoding::Utf8)),
            ),
            ("degrade", Box::new(|s| s.degrade.landlock = true)),
            (
                "backend",
                Box::new(|s| s.backend = crate::spec::BackendChoice::Rlimit),
            ),
            (
                "export",
                Box::new(|s| {
                    s.export = Some(crate::spec::Export {
                        dir: "/deps".into(),
                        host: "/srv".into(),
                        seed: Vec::new(),
                    })
                }),
            ),
            (
                "files",
                Box::new(|s| {
                    s.files.push(crate::spec::InputFile {
                        path: "a".into(),
                        contents: Vec::new(),
                        mode: 0o644,
                    })
                }),
            ),
            (
                "collect",
                Box::new(|s| s.collect = Some(Default::default())),
            ),
            (
                "network",
                Box::new(|s| s.network = crate::net::Network::Host),
            ),
            (
                "binds",
                Box::new(|s| {
                    s.binds.push(crate::spec::Bind {
                        src: "/srv".into(),
                        dst: "/data".into(),
                        writable: false,
                    })
                }),
            ),
        ];
        for (field, set) in cases {
            let mut s = base.clone();
            set(&mut s);
            let e = ContainerSetup::check_container_spec(&s).unwrap_err();
            assert!(e.contains(&format!("`{field}")), "{field}: {e}");
        }
    }
}

//! The mount plan as data. Built in the parent from the spec and a [`HostView`] (what the
//! host's root looks like), executed in the child by [`super::apply`]. Pure: unit-tested
//! without root.
//!
//! Destination paths are absolute paths inside the new root. Host sources are absolute
//! host paths; the child opens each one (O_PATH) before it mounts anything, so a later
//! mount cannot hide a source.

use crate::spec::{Limits, Rootfs, SANDBOX_GID, SANDBOX_UID, SANDBOX_USER, WORKSPACE};
use std::path::{Path, PathBuf};

/// One step of building the new root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `mkdir -p` (mode 0755).
    Dir { dst: PathBuf },
    /// A read-only, nosuid, nodev view of a host directory or file that shares no inode with
    /// the host or another sandbox: a directory becomes a read-only overlay of it, or a copy
    /// of the mount of one overlay shared with its siblings (see `fs::overlay_ro` and
    /// `fs::bind_shared`: file locks stay private), a regular file is copied in (at most
    /// `fs::MAX_COPIED_FILE` bytes), anything else is bound. Not recursive: mounts below the
    /// source on the host are not carried in (they would keep their own, writable, flags).
    BindRo { src: PathBuf, dst: PathBuf },
    /// A read-write, nosuid, nodev bind of a host directory (a dependency install target).
    BindRw { src: PathBuf, dst: PathBuf },
    /// A read-write bind of a host device node (/dev/null and friends); it keeps the host
    /// /dev mount's flags, since `nodev` would make the node useless.
    BindDev { src: PathBuf, dst: PathBuf },
    /// A symlink `dst -> target`.
    Symlink { target: PathBuf, dst: PathBuf },
    /// A tmpfs with size and inode caps; nosuid, nodev (and noexec when asked).
    Tmpfs {
        dst: PathBuf,
        size: u64,
        inodes: u64,
        mode: u32,
        noexec: bool,
    },
    /// A generated regular file (mode 0644) on a tmpfs created earlier in the plan.
    File { dst: PathBuf, contents: String },
    /// A fresh procfs of the sandbox's pid namespace.
    Proc { dst: PathBuf },
    /// A new devpts instance (ptys private to the sandbox).
    Devpts { dst: PathBuf },
    /// Hide a file: bind /dev/null over it (skipped if it does not exist).
    MaskFile { dst: PathBuf },
    /// Hide a directory: an empty read-only tmpfs over it (skipped if it does not exist).
    MaskDir { dst: PathBuf },
    /// Make an existing path read-only, with every mount below it (`mounts::read_only_tree`).
    ReadOnly { dst: PathBuf },
    /// Remount a tmpfs this plan created read-only, once its files are written.
    RemountRo { dst: PathBuf },
}

/// What the step was for, as an error names it: "(the read-only view of /usr at /usr)".
impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Dir { dst } if dst == Path::new("/") => write!(f, "the sandbox's root"),
            Op::Dir { dst } => write!(f, "the directory {}", dst.display()),
            Op::BindRo { src, dst } => {
                write!(
                    f,
                    "the read-only view of {} at {}",
                    src.display(),
                    dst.display()
                )
            }
            Op::BindRw { src, dst } => {
                write!(
                    f,
                    "the writable bind of {} at {}",
                    src.display(),
                    dst.display()
                )
            }
            Op::BindDev { src, dst } => {
                write!(f, "the device {} at {}", src.display(), dst.display())
            }
            Op::Symlink { target, dst } => {
                write!(f, "the symlink {} -> {}", dst.display(), target.display())
            }
            Op::Tmpfs { dst, .. } => write!(f, "the tmpfs at {}", dst.display()),
            Op::File { dst, .. } => write!(f, "the file {}", dst.display()),
            Op::Proc { dst } => write!(f, "the sandbox's /proc at {}", dst.display()),
            Op::Devpts { dst } => write!(f, "the sandbox's ptys at {}", dst.display()),
            Op::MaskFile { dst } | Op::MaskDir { dst } => {
                write!(f, "the mask over {}", dst.display())
            }
            Op::ReadOnly { dst } | Op::RemountRo { dst } => {
                write!(f, "making {} read-only", dst.display())
            }
        }
    }
}

/// What the plan needs to know about the host, gathered by [`HostView::read`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostView {
    /// Top-level entries of the rootfs: (name, symlink target if it is a symlink, is_dir).
    pub top: Vec<(String, Option<PathBuf>, bool)>,
    /// Host /etc entries that exist: ld.so.cache, ssl/certs, alternatives, ...
    pub etc_present: Vec<String>,
    /// Target of the host's /etc/localtime symlink, if it is one.
    pub localtime: Option<PathBuf>,
    /// The configuration files under /usr that the host's fontconfig includes
    /// (/etc/fonts/conf.d's links, resolved), when the host has /etc/fonts/fonts.conf.
    pub fonts: Option<Vec<PathBuf>>,
}

/// Top-level entries of the host root a `--rootfs host` sandbox sees (binds or symlinks).
pub const HOST_TOP: &[&str] = &["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// Host /etc entries bound read-only into the generated /etc of `--rootfs host`: the
/// dynamic loader's cache, CA certificates, and Debian's alternatives symlinks (without
/// them `awk`, `editor`, `pager`... dangle). Nothing else of the host's /etc.
const HOST_ETC: &[&str] = &["ld.so.cache", "ssl/certs", "alternatives"];

/// Top-level entries of a rootfs directory that the sandbox builds itself.
const OWN_TOP: &[&str] = &["dev", "proc", "sys", "tmp", "run", "workspace"];

/// procfs files that expose the host kernel or let a process poke it, and that the sandbox
/// user could otherwise open (the 0400 root-only ones, such as kpagecount or kmsg, are already
/// closed to it: host root is not mapped into the sandbox).
pub const PROC_MASKED_FILES: &[&str] = &[
    "/proc/kcore",
    "/proc/keys",
    "/proc/key-users",
    "/proc/sysrq-trigger",
    "/proc/timer_list",
    "/proc/latency_stats",
    "/proc/sched_debug",
    "/proc/kallsyms",
    "/proc/config.gz",
    // The host kernel's boot command line, and on some hosts their init's arguments.
    "/proc/cmdline",
    // The boot configuration's parameters (kernels built with CONFIG_BOOT_CONFIG; absent
    // elsewhere, and then nothing is masked).
    "/proc/bootconfig",
    // Per-CPU counts of every host interrupt: watched over time, a timing side channel on
    // what other users do (keystrokes, network traffic).
    "/proc/interrupts",
    // The same channel by softirq kind (NET_RX, TIMER, BLOCK per CPU).
    "/proc/softirqs",
];
/// procfs directories hidden under an empty read-only tmpfs.
pub const PROC_MASKED_DIRS: &[&str] = &["/proc/acpi", "/proc/scsi", "/proc/asound", "/proc/driver"];
/// procfs directories left visible but read-only.
pub const PROC_READONLY: &[&str] = &["/proc/sys", "/proc/bus", "/proc/irq", "/proc/fs"];

/// Device nodes bound from the host into the minimal /dev.
pub const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

impl HostView {
    /// Reads what the plan needs from the host (or the rootfs directory).
    pub fn read(rootfs: &Rootfs) -> std::io::Result<HostView> {
        let root: &Path = match rootfs {
            Rootfs::Host => Path::new("/"),
            Rootfs::Dir(d) => d,
        };
        let mut top = Vec::new();
        for entry in std::fs::read_dir(root)? {
            let entry = entry?;
            let Some(name) = entry.file_name().to_str().map(String::from) else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "its top-level entry {:?} is not a UTF-8 name; rename it",
                        entry.file_name()
                    ),
                ));
            };
            let ft = entry.file_type()?;
            // A socket, FIFO or device node at the top of a rootfs directory is left out:
            // bound in, a socket would be a channel to whatever host process listens on it
            // (Landlock does not govern connecting to a socket by path), a FIFO one a host
            // writer could feed.
            if !(ft.is_dir() || ft.is_file() || ft.is_symlink()) {
                continue;
            }
            let target = if ft.is_symlink() {
                Some(std::fs::read_link(entry.path())?)
            } else {
                None
            };
            top.push((name, target, ft.is_dir()));
        }
        top.sort();
        let etc_present = HOST_ETC
            .iter()
            .filter(|e| Path::new("/etc").join(e).exists())
            .map(|e| e.to_string())
            .collect();
        let localtime = std::fs::read_link("/etc/localtime").ok();
        Ok(HostView {
            top,
            etc_present,
            localtime,
            // Only a `--rootfs host` sandbox gets the generated /etc.
            fonts: matches!(rootfs, Rootfs::Host)
                .then(|| {
                    super::fonts::host_includes(
                        Path::new("/etc/fonts"),
                        Some(&super::fonts::cache_file()),
                    )
                })
                .flatten(),
        })
    }
}

/// /etc/fonts/fonts.conf for the sandbox: the host's font directories and the configuration
/// files it includes from /usr, and caches in /tmp (a cache written under HOME would land in
/// /workspace, among the program's files).
fn fonts_conf(includes: &[PathBuf]) -> String {
    let mut x = String::from(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE fontconfig SYSTEM \"urn:fontconfig:fonts.dtd\">\n\
         <!-- Written by cordon: the host's font directories and the configuration it includes\n     \
         from /usr; caches in /tmp. -->\n<fontconfig>\n\
         \t<dir>/usr/share/fonts</dir>\n\t<dir>/usr/local/share/fonts</dir>\n",
    );
    for i in includes {
        x.push_str(&format!(
            "\t<include ignore_missing=\"yes\">{}</include>\n",
            i.display()
        ));
    }
    x.push_str("\t<cachedir>/var/cache/fontconfig</cachedir>\n\t<cachedir>/tmp/fontconfig</cachedir>\n</fontconfig>\n");
    x
}

/// Under the rlimit backend's memory watch: the sandbox's /dev/zero is a bind of the host's
/// /dev/full, which reads the same zeros (writes fail with ENOSPC) and has no `mmap`
/// (ENODEV). A `MAP_SHARED` mapping of /dev/zero makes a shared memory object like
/// `MAP_SHARED|MAP_ANONYMOUS` does, but its seccomp notification shows only a descriptor
/// number, which another thread can point elsewhere before the kernel reads it: the watch
/// could not know that the call makes an object (see launch::memwatch, "Creations").
/// Whether the plan had a /dev/zero to replace.
pub fn watch_devices(ops: &mut [Op]) -> bool {
    let mut replaced = false;
    for op in ops {
        if let Op::BindDev { src, dst } = op
            && dst == Path::new("/dev/zero")
        {
            *src = PathBuf::from("/dev/full");
            replaced = true;
        }
    }
    replaced
}

/// Builds the whole mount plan for `rootfs`.
/// The ops that bind the spec's extra host directories (after everything else: each gets a
/// new top-level directory on the staging root).
pub fn binds(binds: &[crate::spec::Bind]) -> Vec<Op> {
    let mut ops = Vec::new();
    for b in binds {
        let dst = PathBuf::from(&b.dst);
        ops.push(Op::Dir { dst: dst.clone() });
        ops.push(if b.writable {
            Op::BindRw {
                src: b.src.clone(),
                dst,
            }
        } else {
            Op::BindRo {
                src: b.src.clone(),
                dst,
            }
        });
    }
    ops
}

/// Filesystems of the kernel's own state: a host directory on one of them is not data to
/// show a sandbox (cordon hides /proc's revealing files and gives no /sys at all).
const KERNEL_FILESYSTEMS: &[&str] = &[
    "proc",
    "sysfs",
    "debugfs",
    "tracefs",
    "securityfs",
    "cgroup",
    "cgroup2",
    "bpf",
    "configfs",
    "efivarfs",
    "pstore",
    "fusectl",
    "binfmt_misc",
    "devtmpfs",
    "devpts",
];

/// Whether `src` is a canonical path (absolute, no symlink, `.` or `..` in it): the sandbox's
/// init opens a bind's source without following symlinks, so one that has any now is refused
/// here, with the path to give instead. Reads the filesystem (it resolves `src`).
pub fn check_bind_canonical(src: &Path) -> Result<(), String> {
    let resolved = std::fs::canonicalize(src).map_err(|e| format!("cannot resolve it: {e}"))?;
    if resolved == src {
        Ok(())
    } else {
        Err(format!(
            "is not a canonical path (it resolves to {}): give the resolved path",
            resolved.display()
        ))
    }
}

/// Whether the host directory `src` (canonical) can be shown read-only in a sandbox, given
/// the caller's mounts: not on a kernel filesystem, and with no mount point below it (a bind
/// or overlay is not recursive: what is mounted below would not be there, and the kernel
/// refuses to show a directory whose mounts below it are locked). `Err` says why and what to
/// do.
pub fn check_bind_source(src: &Path, mounts: &[crate::limits::MountInfo]) -> Result<(), String> {
    let holder = mounts
        .iter()
        .filter(|m| src.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.as_os_str().len());
    if let Some(m) = holder.filter(|m| KERNEL_FILESYSTEMS.contains(&m.fs_type.as_str())) {
        return Err(format!(
            "{} is on the kernel's {} filesystem ({}), not data cordon shows a sandbox; bind a directory of files",
            src.display(),
            m.fs_type,
            m.mount_point.display()
        ));
    }
    if let Some(m) = mounts
        .iter()
        .find(|m| m.mount_point != src && m.mount_point.starts_with(src))
    {
        return Err(format!(
            "{} has a mount point below it ({}); binds are not recursive: bind a directory without mounts below it, or bind each one on its own",
            src.display(),
            m.mount_point.display()
        ));
    }
    Ok(())
}

/// A bind's or the export's directory must be new at the top of the root: with `--rootfs DIR`
/// the plan shows every top-level entry of DIR, and a bind over one of them would hide it, or,
/// where it is a symlink (`data -> workspace`), land on whatever it points to.
pub fn check_new_top_dirs(
    rootfs: &Rootfs,
    host: &HostView,
    spec: &crate::spec::SandboxSpec,
) -> Result<(), crate::spec::ParseError> {
    let Rootfs::Dir(dir) = rootfs else {
        // The host root shows only HOST_TOP, which SandboxSpec::validate already reserves.
        return Ok(());
    };
    let dsts = spec
        .binds
        .iter()
        .map(|b| ("bind", &b.dst))
        .chain(spec.export.iter().map(|e| ("export", &e.dir)));
    for (what, dst) in dsts {
        let top = dst.trim_start_matches('/');
        if host.top.iter().any(|(name, _, _)| name == top) {
            return Err(crate::spec::ParseError::new(
                what,
                dst,
                &format!(
                    "the root filesystem {} already has /{top}; give a name it does not have",
                    dir.display()
                ),
            ));
        }
    }
    Ok(())
}

/// The export tmpfs (see [`crate::spec::Export`]): sized like the workspace.
pub fn export(e: &crate::spec::Export, limits: &Limits) -> Vec<Op> {
    let dst = PathBuf::from(&e.dir);
    vec![
        Op::Dir { dst: dst.clone() },
        Op::Tmpfs {
            dst,
            size: limits.workspace_size,
            inodes: limits.workspace_inodes,
            mode: 0o755,
            noexec: false,
        },
    ]
}

pub fn build(rootfs: &Rootfs, host: &HostView, limits: &Limits, hostname: &str) -> Vec<Op> {
    let mut ops = Vec::new();
    match rootfs {
        Rootfs::Host => {
            for (name, target, is_dir) in &host.top {
                if !HOST_TOP.contains(&name.as_str()) {
                    continue;
                }
                let dst = Path::new("/").join(name);
                match target {
                    // Binding a symlink would follow it: replicate it instead (merged /usr).
                    Some(t) => ops.push(Op::Symlink {
                        target: t.clone(),
                        dst,
                    }),
                    None if *is_dir => {
                        ops.push(Op::Dir { dst: dst.clone() });
                        ops.push(Op::BindRo {
                            src: dst.clone(),
                            dst,
                        });
                    }
                    None => {}
                }
            }
            etc_ops(&mut ops, host, hostname);
        }
        Rootfs::Dir(dir) => {
            for (name, target, is_dir) in &host.top {
                if OWN_TOP.contains(&name.as_str()) {
                    continue;
                }
                let dst = Path::new("/").join(name);
                match target {
                    Some(t) => ops.push(Op::Symlink {
                        target: t.clone(),
                        dst,
                    }),
                    None => {
                        if *is_dir {
                            ops.push(Op::Dir { dst: dst.clone() });
                        } else {
                            ops.push(Op::File {
                                dst: dst.clone(),
                                contents: String::new(),
                            });
                        }
                        ops.push(Op::BindRo {
                            src: dir.join(name),
                            dst,
                        });
                    }
                }
            }
        }
    }
    dev_ops(&mut ops, limits);
    ops.push(Op::Dir {
        dst: "/proc".into(),
    });
    ops.push(Op::Proc {
        dst: "/proc".into(),
    });
    for f in PROC_MASKED_FILES {
        ops.push(Op::MaskFile { dst: f.into() });
    }
    for d in PROC_MASKED_DIRS {
        ops.push(Op::MaskDir { dst: d.into() });
    }
    for d in PROC_READONLY {
        ops.push(Op::ReadOnly { dst: d.into() });
    }
    ops.push(Op::Dir { dst: "/tmp".into() });
    ops.push(Op::Tmpfs {
        dst: "/tmp".into(),
        size: limits.tmp_size,
        inodes: limits.tmp_inodes,
        mode: 0o1777,
        noexec: false,
    });
    ops.push(Op::Dir {
        dst: WORKSPACE.into(),
    });
    ops.push(Op::Tmpfs {
        dst: WORKSPACE.into(),
        size: limits.workspace_size,
        inodes: limits.workspace_inodes,
        mode: 0o755,
        noexec: false,
    });
    ops
}

fn etc_ops(ops: &mut Vec<Op>, host: &HostView, hostname: &str) {
    ops.push(Op::Dir { dst: "/etc".into() });
    ops.push(Op::Tmpfs {
        dst: "/etc".into(),
        size: 1 << 20,
        inodes: 256,
        mode: 0o755,
        noexec: true,
    });
    let (u, g) = (SANDBOX_UID, SANDBOX_GID);
    let files = [
        (
            "passwd",
            format!(
                "root:x:0:0:root:/root:/usr/sbin/nologin\n{SANDBOX_USER}:x:{u}:{g}:{SANDBOX_USER}:{WORKSPACE}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            ),
        ),
        ("group", format!("root:x:0:\n{SANDBOX_USER}:x:{g}:\nnogroup:x:65534:\n")),
        ("hosts", format!("127.0.0.1\tlocalhost {hostname}\n::1\tlocalhost ip6-localhost ip6-loopback\n")),
        ("hostname", format!("{hostname}\n")),
        ("nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\nprotocols: files\nservices: files\n".to_string()),
        ("resolv.conf", "# cordon: no network; name lookups go nowhere\n".to_string()),
    ];
    for (name, contents) in files {
        ops.push(Op::File {
            dst: Path::new("/etc").join(name),
            contents,
        });
    }
    for e in &host.etc_present {
        let dst = Path::new("/etc").join(e);
        if e == "ld.so.cache" {
            ops.push(Op::File {
                dst: dst.clone(),
                contents: String::new(),
            });
        } else {
            ops.push(Op::Dir { dst: dst.clone() });
        }
        ops.push(Op::BindRo {
            src: dst.clone(),
            dst,
        });
    }
    if let Some(t) = &host.localtime {
        ops.push(Op::Symlink {
            target: t.clone(),
            dst: "/etc/localtime".into(),
        });
    }
    if let Some(includes) = &host.fonts {
        ops.push(Op::Dir {
            dst: "/etc/fonts".into(),
        });
        ops.push(Op::File {
            dst: "/etc/fonts/fonts.conf".into(),
            contents: fonts_conf(includes),
        });
    }
    ops.push(Op::RemountRo { dst: "/etc".into() });
}

fn dev_ops(ops: &mut Vec<Op>, limits: &Limits) {
    ops.push(Op::Dir { dst: "/dev".into() });
    ops.push(Op::Tmpfs {
        dst: "/dev".into(),
        size: 64 << 10,
        inodes: 64,
        mode: 0o755,
        noexec: true,
    });
    for d in DEVICES {
        let p = Path::new("/dev").join(d);
        ops.push(Op::File {
            dst: p.clone(),
            contents: String::new(),
        });
        ops.push(Op::BindDev {
            src: p.clone(),
            dst: p,
        });
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("core", "/proc/kcore"),
        ("ptmx", "pts/ptmx"),
    ] {
        ops.push(Op::Symlink {
            target: target.into(),
            dst: Path::new("/dev").join(name),
        });
    }
    ops.push(Op::Dir {
        dst: "/dev/pts".into(),
    });
    ops.push(Op::Devpts {
        dst: "/dev/pts".into(),
    });
    ops.push(Op::Dir {
        dst: "/dev/shm".into(),
    });
    ops.push(Op::Tmpfs {
        dst: "/dev/shm".into(),
        size: limits.tmp_size,
        inodes: limits.tmp_inodes,
        mode: 0o1777,
        noexec: true,
    });
    ops.push(Op::RemountRo { dst: "/dev".into() });
}

/// Host paths the plan binds from (each opened with O_PATH before anything is mounted).
pub fn sources(ops: &[Op]) -> Vec<PathBuf> {
    ops.iter()
        .filter_map(|op| match op {
            Op::BindRo { src, .. } | Op::BindRw { src, .. } | Op::BindDev { src, .. } => {
                Some(src.clone())
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_step_is_named_in_words_in_errors() {
        let op = Op::BindRo {
            src: "/usr".into(),
            dst: "/usr".into(),
        };
        assert_eq!(op.to_string(), "the read-only view of /usr at /usr");
        assert_eq!(
            Op::Dir { dst: "/".into() }.to_string(),
            "the sandbox's root"
        );
        let e = crate::fs::ApplyError {
            op: op.to_string(),
            step: "mount a read-only overlay of",
            path: "/usr".into(),
            errno: nix::errno::Errno::EPERM,
            hint: "",
        };
        assert_eq!(
            e.to_string(),
            "cannot build the sandbox root: mount a read-only overlay of /usr: EPERM: Operation not permitted (for the read-only view of /usr at /usr)"
        );
    }

    use super::*;

    #[test]
    fn a_bind_source_must_be_canonical() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().canonicalize().unwrap().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = real.with_file_name("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        check_bind_canonical(&real).unwrap();
        let e = check_bind_canonical(&link).unwrap_err();
        assert!(
            e.contains("not a canonical path") && e.contains(&real.display().to_string()),
            "{e}"
        );
        let e = check_bind_canonical(&real.join("..").join("real")).unwrap_err();
        assert!(e.contains("not a canonical path"), "{e}");
        let e = check_bind_canonical(&real.join("missing")).unwrap_err();
        assert!(e.contains("cannot resolve"), "{e}");
    }

    #[test]
    fn a_bind_source_is_data_without_mounts_below_it() {
        let mounts = crate::limits::MountInfo::parse(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 0:5 / /proc rw - proc proc rw\n\
             3 1 0:6 / /sys rw - sysfs sysfs rw\n\
             4 3 0:7 / /sys/kernel/debug rw - debugfs debugfs rw\n\
             5 1 0:8 / /srv/data/cache rw - tmpfs tmpfs rw\n\
             6 1 0:9 / /srv/data\\040two rw - tmpfs tmpfs rw\n",
        )
        .unwrap();
        let check = |p: &str| check_bind_source(Path::new(p), &mounts);
        check("/srv/other").unwrap();
        check("/srv/data/cache").unwrap();
        check("/srv/data two").unwrap();
        for (p, says) in [
            ("/proc/sys", "proc filesystem"),
            ("/sys/kernel", "sysfs filesystem"),
            ("/sys/kernel/debug/x", "debugfs filesystem"),
            ("/srv/data", "mount point below it (/srv/data/cache)"),
            ("/", "mount point below it"),
        ] {
            let e = check(p).unwrap_err();
            assert!(e.contains(says), "{p}: {e}");
        }
        // `/srv/data` is not a prefix of `/srv/data two`'s mount point: whole components only.
        check("/srv/dat").unwrap();
    }

    #[test]
    fn a_bind_may_not_take_a_name_the_rootfs_directory_has() {
        let mut host = merged_usr();
        host.top
            .push(("data".into(), Some("workspace".into()), false));
        host.top.push(("opt".into(), None, true));
        let mut spec = crate::spec::SandboxSpec::new(vec!["true".into()]);
        let dir = Rootfs::Dir("/srv/root".into());
        for taken in ["/data", "/opt"] {
            spec.binds = vec![crate::spec::Bind {
                src: "/srv/x".into(),
                dst: taken.into(),
                writable: false,
            }];
            let e = check_new_top_dirs(&dir, &host, &spec)
                .unwrap_err()
                .to_string();
            assert!(e.contains("already has"), "{taken}: {e}");
            // The host root shows only its /usr family: any other name is free there.
            check_new_top_dirs(&Rootfs::Host, &host, &spec).unwrap();
        }
        spec.binds[0].dst = "/fresh".into();
        check_new_top_dirs(&dir, &host, &spec).unwrap();
        spec.binds.clear();
        spec.export = Some(crate::spec::Export {
            dir: "/opt".into(),
            host: "/srv/set".into(),
            seed: Vec::new(),
        });
        assert!(check_new_top_dirs(&dir, &host, &spec).is_err());
    }

    fn merged_usr() -> HostView {
        HostView {
            top: vec![
                ("bin".into(), Some("usr/bin".into()), false),
                ("etc".into(), None, true),
                ("home".into(), None, true),
                ("lib".into(), Some("usr/lib".into()), false),
                ("lib64".into(), Some("usr/lib64".into()), false),
                ("root".into(), None, true),
                ("usr".into(), None, true),
                ("var".into(), None, true),
            ],
            etc_present: vec!["ld.so.cache".into(), "ssl/certs".into()],
            localtime: Some("/usr/share/zoneinfo/Etc/UTC".into()),
            fonts: Some(vec![
                "/usr/share/fontconfig/conf.avail/60-latin.conf".into(),
            ]),
        }
    }

    #[test]
    fn fontconfig_gets_the_hosts_fonts_and_caches_in_tmp() {
        let ops = build(&Rootfs::Host, &merged_usr(), &Limits::default(), "cordon");
        let conf = ops
            .iter()
            .find_map(|op| match op {
                Op::File { dst, contents } if dst == Path::new("/etc/fonts/fonts.conf") => {
                    Some(contents.clone())
                }
                _ => None,
            })
            .expect("a generated /etc/fonts/fonts.conf");
        assert!(conf.contains("<dir>/usr/share/fonts</dir>"), "{conf}");
        assert!(
            conf.contains("<include ignore_missing=\"yes\">/usr/share/fontconfig/conf.avail/60-latin.conf</include>"),
            "{conf}"
        );
        // Written caches go to /tmp, never under HOME (/workspace, the program's files).
        assert!(
            conf.contains("<cachedir>/tmp/fontconfig</cachedir>"),
            "{conf}"
        );
        assert!(
            !conf.contains("prefix=\"xdg\"") && !conf.contains('~'),
            "{conf}"
        );
        // A host without fontconfig gets none.
        let host = HostView {
            fonts: None,
            ..merged_usr()
        };
        let ops = build(&Rootfs::Host, &host, &Limits::default(), "cordon");
        assert!(
            !ops.iter()
                .any(|op| matches!(op, Op::File { dst, .. } if dst.starts_with("/etc/fonts")))
        );
    }

    #[test]
    fn host_rootfs_binds_usr_and_replicates_symlinks() {
        let ops = build(&Rootfs::Host, &merged_usr(), &Limits::default(), "cordon");
        assert!(ops.contains(&Op::BindRo {
            src: "/usr".into(),
            dst: "/usr".into()
        }));
        assert!(ops.contains(&Op::Symlink {
            target: "usr/lib".into(),
            dst: "/lib".into()
        }));
        assert!(ops.contains(&Op::Symlink {
            target: "usr/bin".into(),
            dst: "/bin".into()
        }));
        // Nothing of the host's /home, /root, /var, /etc wholesale.
        for op in &ops {
            if let Op::BindRo { src, .. } = op {
                assert!(
                    src.starts_with("/usr")
                        || src.starts_with("/etc/ld.so.cache")
                        || src.starts_with("/etc/ssl/certs"),
                    "unexpected host bind {src:?}"
                );
            }
        }
    }

    #[test]
    fn under_the_memory_watch_dev_zero_is_dev_full() {
        let mut ops = build(&Rootfs::Host, &merged_usr(), &Limits::default(), "cordon");
        assert!(watch_devices(&mut ops));
        let dev = |dst: &str| {
            ops.iter().find_map(|op| match op {
                Op::BindDev { src, dst: d } if d == Path::new(dst) => Some(src.clone()),
                _ => None,
            })
        };
        assert_eq!(dev("/dev/zero"), Some(PathBuf::from("/dev/full")));
        assert_eq!(dev("/dev/full"), Some(PathBuf::from("/dev/full")));
        assert_eq!(dev("/dev/null"), Some(PathBuf::from("/dev/null")));
        // Nothing to replace is said, not ignored.
        let mut none = vec![Op::Dir { dst: "/dev".into() }];
        assert!(!watch_devices(&mut none));
    }

    #[test]
    fn non_merged_usr_binds_directories() {
        let mut h = merged_usr();
        h.top[0] = ("bin".into(), None, true);
        let ops = build(&Rootfs::Host, &h, &Limits::default(), "cordon");
        assert!(ops.contains(&Op::BindRo {
            src: "/bin".into(),
            dst: "/bin".into()
        }));
    }

    #[test]
    fn generated_etc_names_the_sandbox_user_and_is_remounted_ro() {
        let ops = build(&Rootfs::Host, &merged_usr(), &Limits::default(), "box1");
        let passwd = ops
            .iter()
            .find_map(|o| match o {
                Op::File { dst, contents } if dst == Path::new("/etc/passwd") => {
                    Some(contents.clone())
                }
                _ => None,
            })
            .expect("passwd generated");
        assert!(passwd.contains("sandbox:x:1000:1000:sandbox:/workspace:"));
        let hosts = ops.iter().any(|o| matches!(o, Op::File { dst, contents } if dst == Path::new("/etc/hosts") && contents.contains("box1")));
        assert!(hosts);
        let last_etc = ops.iter().rposition(|o| matches!(o, Op::File { dst, .. } | Op::BindRo { dst, .. } if dst.starts_with("/etc")));
        let ro = ops
            .iter()
            .position(|o| *o == Op::RemountRo { dst: "/etc".into() });
        assert!(
            ro.unwrap() > last_etc.unwrap(),
            "/etc is made read-only after its files are written"
        );
    }

    #[test]
    fn workspace_and_tmp_are_capped_tmpfs() {
        let l = Limits {
            workspace_size: 1234,
            workspace_inodes: 55,
            ..Limits::default()
        };
        let ops = build(&Rootfs::Host, &merged_usr(), &l, "cordon");
        assert!(ops.contains(&Op::Tmpfs {
            dst: "/workspace".into(),
            size: 1234,
            inodes: 55,
            mode: 0o755,
            noexec: false
        }));
        assert!(
            ops.iter().any(
                |o| matches!(o, Op::Tmpfs { dst, mode: 0o1777, .. } if dst == Path::new("/tmp"))
            )
        );
    }

    #[test]
    fn proc_is_masked_after_it_is_mounted() {
        let ops = build(&Rootfs::Host, &merged_usr(), &Limits::default(), "cordon");
        let proc = ops
            .iter()
            .position(|o| matches!(o, Op::Proc { .. }))
            .unwrap();
        let kcore = ops
            .iter()
            .position(|o| {
                *o == Op::MaskFile {
                    dst: "/proc/kcore".into(),
                }
            })
            .unwrap();
        let sys = ops
            .iter()
            .position(|o| {
                *o == Op::ReadOnly {
                    dst: "/proc/sys".into(),
                }
            })
            .unwrap();
        assert!(proc < kcore && proc < sys);
        assert!(ops.contains(&Op::MaskFile {
            dst: "/proc/sysrq-trigger".into()
        }));
    }

    #[test]
    fn dir_rootfs_binds_its_entries_but_not_its_own_dev_proc_tmp() {
        let h = HostView {
            top: vec![
                ("bin".into(), Some("usr/bin".into()), false),
                ("dev".into(), None, true),
                ("etc".into(), None, true),
                ("proc".into(), None, true),
                ("tmp".into(), None, true),
                ("usr".into(), None, true),
            ],
            ..Default::default()
        };
        let ops = build(&Rootfs::Dir("/r".into()), &h, &Limits::default(), "cordon");
        assert!(ops.contains(&Op::BindRo {
            src: "/r/usr".into(),
            dst: "/usr".into()
        }));
        assert!(ops.contains(&Op::BindRo {
            src: "/r/etc".into(),
            dst: "/etc".into()
        }));
        assert!(!ops.iter().any(|o| matches!(o, Op::BindRo { src, .. } if src == Path::new("/r/dev") || src == Path::new("/r/tmp"))));
        assert!(ops.contains(&Op::Symlink {
            target: "usr/bin".into(),
            dst: "/bin".into()
        }));
    }

    #[test]
    fn sources_lists_host_binds() {
        let ops = build(&Rootfs::Host, &merged_usr(), &Limits::default(), "cordon");
        let s = sources(&ops);
        assert!(s.contains(&PathBuf::from("/usr")));
        assert!(s.contains(&PathBuf::from("/dev/null")));
    }
}

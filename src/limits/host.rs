//! The host side of the limits layer: where the cgroup filesystems are, which cgroup cordon
//! runs in, and the few filesystem operations the backends need.
//!
//! Everything here takes its host paths as parameters ([`HostPaths`]) and does its I/O through
//! [`CgroupFs`], so the decisions are unit-tested on fake trees in a tempdir.

use nix::errno::Errno;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Where the cgroup filesystems are mounted on a systemd host (v2, v1 and hybrid alike).
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// The hybrid layout mounts cgroup2 here, under the v1 tmpfs (systemd's "unified" mount).
pub const HYBRID_V2_DIR: &str = "unified";
/// cordon's own cgroup membership, one line per hierarchy (`man 7 cgroups`, "/proc/pid/cgroup").
pub const PROC_SELF_CGROUP: &str = "/proc/self/cgroup";

/// The controllers cordon uses. `cpuacct` is v1 only; v2 reports usage in `cpu.stat` always.
pub const CONTROLLERS: [&str; 4] = ["memory", "pids", "cpu", "cpuacct"];
/// The v2 controllers the sandbox cgroup needs enabled.
pub const V2_CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];

/// The host facts the limits layer reads. [`HostPaths::from_host`] reads the real ones; tests
/// build them by hand around a tempdir.
#[derive(Debug, Clone)]
pub struct HostPaths {
    /// Where the cgroup filesystems are mounted (`/sys/fs/cgroup`).
    pub cgroup_root: PathBuf,
    /// The text of `/proc/self/cgroup`.
    pub proc_self_cgroup: String,
    /// cordon's own pid: names the sandbox cgroups, and stale-cgroup GC never touches it.
    pub pid: u32,
    /// The caller's effective uid, for messages.
    pub uid: u32,
}

impl HostPaths {
    /// The real host: `/sys/fs/cgroup`, `/proc/self/cgroup`, our pid and euid.
    pub fn from_host() -> io::Result<Self> {
        Ok(HostPaths {
            cgroup_root: PathBuf::from(CGROUP_ROOT),
            proc_self_cgroup: std::fs::read_to_string(PROC_SELF_CGROUP)?,
            pid: std::process::id(),
            uid: nix::unistd::geteuid().as_raw(),
        })
    }
}

/// The file operations the backends use on cgroupfs. [`RealFs`] is the host; the unit tests
/// use a fake that emulates what the kernel does on `mkdir`, `rmdir` and the special files.
pub trait CgroupFs: fmt::Debug + Send + Sync {
    fn read(&self, path: &Path) -> io::Result<String>;
    /// Writes `data` to an EXISTING file in one `write(2)` (cgroupfs files are never created).
    fn write(&self, path: &Path, data: &str) -> io::Result<()>;
    fn exists(&self, path: &Path) -> bool;
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    fn rmdir(&self, path: &Path) -> io::Result<()>;
    /// Names of the sub-directories (child cgroups) of `path`.
    fn subdirs(&self, path: &Path) -> io::Result<Vec<String>>;
    /// `access(W_OK)` for the caller (root passes everything, as the kernel does).
    fn writable(&self, path: &Path) -> bool;
    /// SIGKILL to a host pid that `procs` (a `cgroup.procs` or `tasks` file) lists: the
    /// process is pinned first (a pidfd), then the file read again, so that a pid that left the
    /// cgroup and was reused by another process of the host is never signalled.
    fn kill(&self, pid: i32, procs: &Path) -> io::Result<()>;
    /// Whether a host pid exists (`kill(pid, 0)` is not ESRCH).
    fn alive(&self, pid: i32) -> bool;
    /// How long ago the directory `path` was made or last changed (its mtime); None when
    /// that cannot be known.
    fn age(&self, path: &Path) -> Option<std::time::Duration> {
        std::fs::metadata(path)
            .ok()?
            .modified()
            .ok()?
            .elapsed()
            .ok()
    }
}

/// The real cgroup filesystems.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

impl CgroupFs for RealFs {
    fn read(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }
    fn write(&self, path: &Path, data: &str) -> io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
        // One write(2): cgroupfs parses each write separately; a short write is an error.
        let n = f.write(data.as_bytes())?;
        if n != data.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "short write to a cgroup file",
            ));
        }
        Ok(())
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }
    fn subdirs(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                out.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        Ok(out)
    }
    fn writable(&self, path: &Path) -> bool {
        nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).is_ok()
    }
    fn kill(&self, pid: i32, procs: &Path) -> io::Result<()> {
        let fd = crate::sys::pidfd_open(nix::unistd::Pid::from_raw(pid))?;
        let listed = std::fs::read_to_string(procs)?
            .lines()
            .any(|l| l.trim().parse::<i32>() == Ok(pid));
        if !listed {
            // Gone from the cgroup since it was listed: the pidfd may be another process's.
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        crate::sys::pidfd_kill(std::os::fd::AsFd::as_fd(&fd), libc::SIGKILL)?;
        Ok(())
    }
    fn alive(&self, pid: i32) -> bool {
        !matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(Errno::ESRCH)
        )
    }
}

/// `EACCES (Permission denied)`: the errno's name, which is what people search for.
pub fn errno_text(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let errno = Errno::from_raw(code);
            format!("{errno:?} ({})", errno.desc())
        }
        None => e.to_string(),
    }
}

/// Why a cgroup backend cannot be used: the step, the path, the cause, and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// A short class, e.g. "not writable by uid 1000" or "has no memory controller".
    pub summary: String,
    /// What was being done, as a verb phrase: "create the cgroup directory".
    pub step: String,
    pub path: PathBuf,
    /// The errno (`EACCES (Permission denied)`) or an explanation.
    pub cause: String,
    pub fix: &'static str,
}

/// Checks that the caller may create child cgroups in `own` and move processes into them
/// (the directory and its `cgroup.procs` writable), else a failure carrying `fix`.
pub fn check_writable(
    fs: &dyn CgroupFs,
    own: &Path,
    uid: u32,
    fix: &'static str,
) -> Result<(), Failure> {
    for path in [own.to_path_buf(), own.join("cgroup.procs")] {
        if !fs.writable(&path) {
            let e = io::Error::from_raw_os_error(libc::EACCES);
            return Err(Failure::io(
                format!("not writable by uid {uid}"),
                "write to",
                &path,
                &e,
                fix,
            ));
        }
    }
    Ok(())
}

impl Failure {
    pub fn io(
        summary: impl Into<String>,
        step: &str,
        path: &Path,
        e: &io::Error,
        fix: &'static str,
    ) -> Self {
        Failure {
            summary: summary.into(),
            step: step.to_string(),
            path: path.to_path_buf(),
            cause: errno_text(e),
            fix,
        }
    }
    pub fn other(
        summary: impl Into<String>,
        step: &str,
        path: &Path,
        cause: impl Into<String>,
        fix: &'static str,
    ) -> Self {
        Failure {
            summary: summary.into(),
            step: step.to_string(),
            path: path.to_path_buf(),
            cause: cause.into(),
            fix,
        }
    }
}

impl fmt::Display for Failure {
    /// `not writable by uid 1000: create the cgroup directory /sys/…/cordon-1-x: EACCES (…)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} {}: {}",
            self.summary,
            self.step,
            self.path.display(),
            self.cause
        )
    }
}

/// One line of `/proc/self/cgroup` for a v1 hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1Line {
    pub hierarchy_id: u32,
    /// e.g. `["cpu", "cpuacct"]`, or `["name=systemd"]` for a named hierarchy.
    pub controllers: Vec<String>,
    /// The cgroup path relative to the hierarchy's root, starting with `/`.
    pub path: String,
}

/// `/proc/self/cgroup`, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcCgroup {
    /// The `0::<path>` line: cordon's cgroup in the v2 (unified) hierarchy.
    pub unified: Option<String>,
    pub v1: Vec<V1Line>,
}

impl ProcCgroup {
    /// Parses `hierarchy-ID:controller-list:cgroup-path` lines (`man 7 cgroups`). The path may
    /// itself contain `:`.
    pub fn parse(text: &str) -> Result<ProcCgroup, String> {
        let mut out = ProcCgroup::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(format!(
                    "malformed line {line:?} (want ID:CONTROLLERS:PATH)"
                ));
            };
            let id: u32 = id
                .parse()
                .map_err(|_| format!("malformed hierarchy id in {line:?}"))?;
            if !path.starts_with('/') {
                return Err(format!("cgroup path in {line:?} is not absolute"));
            }
            if id == 0 && ctrls.is_empty() {
                out.unified = Some(path.to_string());
            } else {
                let controllers = ctrls
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(String::from)
                    .collect();
                out.v1.push(V1Line {
                    hierarchy_id: id,
                    controllers,
                    path: path.to_string(),
                });
            }
        }
        Ok(out)
    }

    /// The v1 line whose hierarchy carries `controller`.
    pub fn v1_line(&self, controller: &str) -> Option<&V1Line> {
        self.v1
            .iter()
            .find(|l| l.controllers.iter().any(|c| c == controller))
    }

    /// Whether any real (not `name=`) controller is on a v1 hierarchy.
    pub fn has_v1_controllers(&self) -> bool {
        self.v1
            .iter()
            .any(|l| l.controllers.iter().any(|c| !c.starts_with("name=")))
    }
}

/// One line of `/proc/self/mountinfo` (`man 5 proc_pid_mountinfo`): the fields cordon reads,
/// the paths with the kernel's octal escapes (`\040` for a space) undone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    pub mount_id: u64,
    /// What of its filesystem the mount shows (field 4: `/` for all of it).
    pub root: PathBuf,
    pub mount_point: PathBuf,
    /// The filesystem type (`cgroup2`, `cgroup`, `tmpfs`).
    pub fs_type: String,
    /// The filesystem's (superblock) options, e.g. `["rw", "memory"]` for a v1 hierarchy.
    pub super_options: Vec<String>,
}

impl MountInfo {
    /// Parses the lines of a mountinfo file: `ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS
    /// [OPTIONAL...] - FSTYPE SOURCE SUPER-OPTIONS`. A line not of that form is an error
    /// naming it.
    pub fn parse(text: &str) -> Result<Vec<MountInfo>, String> {
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let bad = |why: &str| format!("malformed line {line:?}: {why}");
            let f: Vec<&str> = line.split(' ').collect();
            let Some(sep) = f.iter().skip(6).position(|x| *x == "-").map(|i| i + 6) else {
                return Err(bad("no ` - ` separator after the sixth field"));
            };
            let (Some(fs_type), Some(super_options)) = (f.get(sep + 1), f.get(sep + 3)) else {
                return Err(bad("fewer than three fields after ` - `"));
            };
            let mount_id = f[0]
                .parse()
                .map_err(|_| bad("the mount id is not a number"))?;
            out.push(MountInfo {
                mount_id,
                root: unescape_mountinfo(f[3]),
                mount_point: unescape_mountinfo(f[4]),
                fs_type: fs_type.to_string(),
                super_options: super_options.split(',').map(String::from).collect(),
            });
        }
        Ok(out)
    }
}

/// A mountinfo path: `\ooo` (three octal digits) is the byte ooo; anything else as is.
fn unescape_mountinfo(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(v as u8);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Which cgroup setup the host has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// Only cgroup2, mounted at the cgroup root.
    V2,
    /// Only v1 hierarchies.
    V1,
    /// v1 controller hierarchies plus a cgroup2 mount (usually without controllers).
    Hybrid,
    /// No cgroup filesystem cordon can find.
    None,
}

impl fmt::Display for CgroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CgroupVersion::V2 => "v2",
            CgroupVersion::V1 => "v1",
            CgroupVersion::Hybrid => "hybrid",
            CgroupVersion::None => "none",
        })
    }
}

/// cordon's own cgroup in one hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Where the hierarchy is mounted.
    pub mount: PathBuf,
    /// cordon's own cgroup directory in it; sandbox cgroups are created only below this.
    pub own: PathBuf,
}

/// Where everything is, as far as `/proc/self/cgroup` and the mounts tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub version: CgroupVersion,
    /// The cgroup2 hierarchy, when mounted and cordon has a `0::` line.
    pub v2: Option<Location>,
    /// The v1 hierarchy of each controller cordon uses, keyed by controller name.
    pub v1: BTreeMap<&'static str, Location>,
    pub proc: ProcCgroup,
}

fn join_cgroup(mount: &Path, cgroup_path: &str) -> PathBuf {
    let rel = cgroup_path.trim_start_matches('/');
    if rel.is_empty() {
        mount.to_path_buf()
    } else {
        mount.join(rel)
    }
}

impl Layout {
    /// Finds the hierarchies: cgroup2 at the root (pure v2) or at `unified/` (hybrid), and each
    /// v1 controller at `<root>/<controller list>` or `<root>/<controller>` (systemd's names,
    /// which also cover the `cpu,cpuacct` co-mount and its `cpu` / `cpuacct` symlinks).
    pub fn discover(fs: &dyn CgroupFs, host: &HostPaths) -> Result<Layout, String> {
        let proc = ProcCgroup::parse(&host.proc_self_cgroup)
            .map_err(|e| format!("cannot parse {PROC_SELF_CGROUP}: {e}"))?;
        let root = &host.cgroup_root;
        let v2_mount = [root.clone(), root.join(HYBRID_V2_DIR)]
            .into_iter()
            .find(|m| fs.exists(&m.join("cgroup.controllers")));
        let v2 = match (&v2_mount, &proc.unified) {
            (Some(mount), Some(path)) => Some(Location {
                mount: mount.clone(),
                own: join_cgroup(mount, path),
            }),
            _ => None,
        };
        let mut v1 = BTreeMap::new();
        for controller in CONTROLLERS {
            let Some(line) = proc.v1_line(controller) else {
                continue;
            };
            let candidates = [root.join(line.controllers.join(",")), root.join(controller)];
            if let Some(mount) = candidates
                .into_iter()
                .find(|m| fs.exists(&m.join("cgroup.procs")))
            {
                let own = join_cgroup(&mount, &line.path);
                v1.insert(controller, Location { mount, own });
            }
        }
        let version = match (!v1.is_empty(), v2.is_some()) {
            (true, true) => CgroupVersion::Hybrid,
            (true, false) => CgroupVersion::V1,
            (false, true) => CgroupVersion::V2,
            (false, false) => CgroupVersion::None,
        };
        Ok(Layout {
            version,
            v2,
            v1,
            proc,
        })
    }
}

/// Fixes, said once.
pub mod fixes {
    pub const V2_DELEGATE: &str = "run cordon in a delegated cgroup: `systemd-run --user --scope -p Delegate=yes cordon ...`; \
         or delegate to every user session with a drop-in /etc/systemd/system/user@.service.d/delegate.conf \
         containing `[Service]` and `Delegate=memory pids cpu`, then `systemctl daemon-reload` and log in again; \
         or run as root";
    pub const V2_SCOPE: &str = "cordon asks the systemd user manager for a transient scope with Delegate=yes when a \
         session bus is reachable: run cordon in a systemd login session (a user manager with dbus-user-session or \
         dbus-broker, DBUS_SESSION_BUS_ADDRESS or XDG_RUNTIME_DIR set; `loginctl enable-linger $USER` for one \
         without a login), with memory, pids and cpu delegated to user@.service (a drop-in \
         /etc/systemd/system/user@.service.d/delegate.conf containing `[Service]` and `Delegate=memory pids cpu`, \
         then `systemctl daemon-reload` and log in again); or start cordon in a delegated cgroup yourself \
         (`systemd-run --user --scope -p Delegate=yes cordon ...`); or run as root";
    pub const V2_ON_HYBRID: &str = "this host binds memory, pids and cpu to cgroup v1 hierarchies, so cgroup v2 has none: \
         boot with `systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all` on the kernel command line for cgroup v2, \
         or run as root to use cgroup v1";
    /// [`V2_ON_HYBRID`] for a root caller, who has cgroup v1 already.
    pub const V2_ON_HYBRID_ROOT: &str = "this host binds memory, pids and cpu to cgroup v1 hierarchies, so cgroup v2 has none: \
         as root, cordon uses those v1 hierarchies instead (`--limits-backend auto`, the default, or `cgroup-v1`); \
         boot with `systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all` on the kernel command line for cgroup v2";
    pub const V2_NO_MOUNT: &str = "mount cgroup2 (`mount -t cgroup2 none /sys/fs/cgroup`) or boot with \
         `systemd.unified_cgroup_hierarchy=1`";
    pub const V2_INTERNAL_PROCESSES: &str = "cgroup v2 forbids enabling controllers for the children of a cgroup that \
         holds processes (except the root cgroup); cordon moves itself into a leaf when it is alone in its cgroup, \
         but never moves the caller's other processes: start cordon in a cgroup of its own, \
         `systemd-run --user --scope -p Delegate=yes cordon ...` (as root: `systemd-run --scope -p Delegate=yes \
         cordon ...`), or move the other processes into a leaf cgroup first; as root on a v1/hybrid host, \
         `--limits-backend cgroup-v1`";
    pub const V1_ROOT: &str = "cgroup v1 cannot be delegated safely to an unprivileged user: run as root \
         (`sudo cordon ...`), or use a cgroup v2 host with delegation \
         (`systemd-run --user --scope -p Delegate=yes cordon ...`)";
    /// [`V2_ON_HYBRID`] and [`V1_ROOT`] at once, for an unprivileged caller on a host whose
    /// controllers are on cgroup v1 (the rlimit fallback's note, `cordon doctor`).
    pub const V1_HOST_UNPRIVILEGED: &str = "run as root (cgroup v1, which this host's controllers are on, \
         cannot be delegated to a user), or boot the host with cgroup v2 \
         (`systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all` on the kernel command line), where a user's \
         cgroup can be delegated";
    pub const V1_MOUNT: &str = "mount the controller's v1 hierarchy (`mount -t cgroup -o <controller> cgroup \
         /sys/fs/cgroup/<controller>`), or use a cgroup v2 host";
    pub const CPUS_NO_CGROUP: &str = "a fraction of a CPU's time needs a cgroup: run as root for cgroup v1, \
         or on a cgroup v2 host `systemd-run --user --scope -p Delegate=yes cordon ...`";
}

#[cfg(test)]
mod tests {
    use super::*;

    const THIS_VM: &str = "9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n\
        4:memory:/process_api/e820\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";

    #[test]
    fn parses_mountinfo() {
        let text = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
35 30 0:31 /../.. /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:15 master:2 - cgroup cgroup rw,cpu,cpuacct
40 22 0:40 /a\\040b /mnt/with\\040space\\134x rw - tmpfs tmpfs rw,size=1k
41 22 0:41 / /no/optional rw - cgroup2 cgroup2 rw,nsdelegate
";
        let m = MountInfo::parse(text).unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!((m[0].mount_id, m[0].fs_type.as_str()), (22, "ext4"));
        assert_eq!(m[1].root, Path::new("/../.."));
        assert_eq!(m[1].mount_point, Path::new("/sys/fs/cgroup/cpu,cpuacct"));
        assert_eq!(m[1].super_options, ["rw", "cpu", "cpuacct"]);
        assert_eq!(m[2].root, Path::new("/a b"));
        assert_eq!(m[2].mount_point, Path::new("/mnt/with space\\x"));
        assert_eq!(m[3].fs_type, "cgroup2");
        for bad in [
            "22 1 8:1 / / rw,relatime shared:1 ext4 /dev/sda1 rw",
            "x 1 8:1 / / rw - ext4 /dev/sda1 rw",
            "22 1 8:1 / / rw - ext4",
        ] {
            let e = MountInfo::parse(bad).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
        // This process's own mountinfo parses, and shows its root.
        let own =
            MountInfo::parse(&std::fs::read_to_string("/proc/self/mountinfo").unwrap()).unwrap();
        assert!(own.iter().any(|m| m.mount_point == Path::new("/")));
    }

    #[test]
    fn parses_hybrid_proc_cgroup() {
        let p = ProcCgroup::parse(THIS_VM).unwrap();
        assert_eq!(p.unified.as_deref(), Some("/"));
        assert_eq!(p.v1_line("memory").unwrap().path, "/process_api/e820");
        assert_eq!(p.v1_line("pids").unwrap().path, "/");
        assert_eq!(p.v1_line("cpuacct").unwrap().hierarchy_id, 2);
        assert!(p.v1_line("hugetlb").is_none());
        assert!(p.has_v1_controllers());
    }

    #[test]
    fn parses_pure_v2_and_pure_v1_and_comounts() {
        let p = ProcCgroup::parse("0::/user.slice/user-1000.slice/session-2.scope\n").unwrap();
        assert_eq!(
            p.unified.as_deref(),
            Some("/user.slice/user-1000.slice/session-2.scope")
        );
        assert!(p.v1.is_empty() && !p.has_v1_controllers());

        let p = ProcCgroup::parse("3:cpu,cpuacct:/a:b\n2:memory:/m\n1:name=systemd:/s\n").unwrap();
        assert!(p.unified.is_none());
        assert_eq!(
            p.v1_line("cpuacct").unwrap().controllers,
            vec!["cpu", "cpuacct"]
        );
        assert_eq!(
            p.v1_line("cpu").unwrap().path,
            "/a:b",
            "a ':' in the path is kept"
        );
        assert!(p.v1_line("systemd").is_none());

        let named_only = ProcCgroup::parse("1:name=systemd:/s\n0::/\n").unwrap();
        assert!(!named_only.has_v1_controllers());
    }

    #[test]
    fn rejects_malformed_proc_cgroup() {
        assert!(ProcCgroup::parse("garbage\n").is_err());
        assert!(ProcCgroup::parse("x:memory:/\n").is_err());
        assert!(ProcCgroup::parse("4:memory:relative\n").is_err());
    }

    #[test]
    fn errno_text_names_the_errno() {
        let e = io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(errno_text(&e), "EACCES (Permission denied)");
        let f = Failure::io(
            "not writable by uid 7",
            "create the cgroup directory",
            Path::new("/x"),
            &e,
            "fix",
        );
        assert_eq!(
            f.to_string(),
            "not writable by uid 7: create the cgroup directory /x: EACCES (Permission denied)"
        );
    }
}

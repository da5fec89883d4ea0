//! The container's init: the process `create` clones. It becomes the container's process
//! (the pid in `--pid-file`), as with runc: there is no extra reaper inside.
//!
//! Order (namespaces given by path were joined before the clone): join the cgroup (when
//! the parent did not) → wait for the parent's go (maps written, cgroup joined,
//! createRuntime hooks run) → cgroup namespace → hostname → mounts, devices →
//! createContainer hooks → pivot_root → console (bound at /dev/console) → sysctl, masked
//! and read-only paths → session, session keyring and terminal → rlimits → personality →
//! (seccomp here when no_new_privs is off: installing it needs CAP_SYS_ADMIN) →
//! capabilities and ids → cwd → the program's search → tell the parent "ready" (a failure
//! until here fails `create`, as with runc) → block on exec.fifo until `start` →
//! no_new_privs → seccomp → startContainer hooks (with the process's own privileges and
//! filter, as runc) → execve.

use crate::fs::{fd_path, mounts};
use crate::security::seccomp::oci::OciFilter;
use crate::spec::oci::{Container, DEFAULT_DEVICES, MountOp};
use crate::sys;
use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use nix::sys::stat::{Mode, SFlag};
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// What init is handed by `create` (prepared before `clone`).
pub struct InitArgs<'a> {
    pub c: &'a Container,
    /// Read end: the parent writes the state JSON once init may go on (EOF = parent died).
    pub go: OwnedFd,
    /// Write end: "OK" once init waits on the fifo, else "ERR ..." and init exits.
    pub ready: OwnedFd,
    /// exec.fifo, opened read-write by the parent (so opening it never blocks).
    pub fifo: OwnedFd,
    pub console: Option<OwnedFd>,
    pub preserve_fds: i32,
    pub filter: Option<&'a OciFilter>,
    pub no_pivot: bool,
    /// Whether the host is pure cgroup v2 (`cgroup` mounts become cgroup2 mounts).
    pub cgroup2: bool,
    /// On a v1/hybrid host: what a `cgroup` mount shows (the container's own cgroups).
    pub cgroup_v1: &'a super::cgroup::V1View,
    /// On a pure v2 host: the container's own cgroup directory, when it has one (what a
    /// `cgroup` mount binds when the kernel refuses a cgroup2 mount).
    pub cgroup_v2_own: Option<&'a Path>,
    /// Whether cordon-oci itself runs in a user namespace (rootless podman): no mknod there.
    pub caller_in_userns: bool,
    /// When init moves itself into the container's cgroup (no new user namespace: it still
    /// has the parent's rights over the cgroup files), the directories, and the write end
    /// of a pipe for "OK" or "ERR ...". Else the parent moved it already.
    pub self_attach: Option<(&'a [PathBuf], OwnedFd)>,
}

type Step = (&'static str, String);

/// The umask of a process whose config gives none (`process.user.umask`): runc's.
const DEFAULT_UMASK: u32 = 0o022;

fn e(step: &'static str) -> impl Fn(Errno) -> Step {
    move |err| (step, err.to_string())
}

fn ep(step: &'static str, path: &Path) -> impl Fn(Errno) -> Step {
    let p = path.display().to_string();
    move |err| (step, format!("{p}: {err}"))
}

/// init's entry point. Never returns.
pub fn main(mut a: InitArgs) -> ! {
    // First of all, before the parent goes on: into the container's cgroup.
    if let Some((dirs, report)) = a.self_attach.take() {
        let msg = match super::cgroup::attach_self(dirs) {
            Ok(()) => "OK".to_string(),
            Err(err) => format!("ERR join its cgroup: {err}"),
        };
        let _ = nix::unistd::write(&report, msg.as_bytes());
        drop(report);
    }
    let state = match read_all(&a.go) {
        Some(s) if !s.is_empty() => s,
        _ => sys::exit_now(1),
    };
    // The parent is done with /proc/PID of init (id maps, oom_score_adj). From now on no
    // process of the container, even its root in a user namespace (same namespace, same
    // capabilities as init), may ptrace init or open its fds, memory or executable through
    // /proc: non-dumpable needs CAP_SYS_PTRACE over the host's user namespace. execve
    // makes the container's program dumpable again. (An init cloned by the helper that
    // joins namespaces given by path is non-dumpable from its start: see
    // oci::clone_after_joining.)
    if let Err(err) = nix::sys::prctl::set_dumpable(false) {
        let _ = nix::unistd::write(
            &a.ready,
            format!("ERR make the container's init non-dumpable: {err}").as_bytes(),
        );
        sys::exit_now(1)
    }
    // As runc, everything but the no_new_privs filter, the startContainer hooks and the
    // execve is done before `create` returns: the process's session, terminal, rlimits,
    // identity, capabilities and cwd, and the search for its program. So a config that
    // cannot run fails `create` with the reason (and `podman run` with 126 or 127), instead
    // of a container that starts, prints the reason as its own output and exits 1.
    let prepared = setup(&a, &state)
        .and_then(|slave| prepare(a.c, a.filter, slave, a.preserve_fds))
        .map_err(|(step, msg)| format!("ERR {step}: {msg}"))
        .and_then(|()| find_program(a.c).map_err(|(code, msg)| exec_report(code, &msg)));
    match prepared {
        Ok(()) => {
            // Before "OK": from the moment `create` returns, a `kill` with a signal that
            // would end a process ends this one (as with runc), though it is its pid
            // namespace's init, to which the kernel delivers only the signals it handles.
            if let Err(err) = sys::exit_on_terminating_signals(true) {
                let _ = nix::unistd::write(
                    &a.ready,
                    format!(
                        "ERR handle the signals that end a created container (rt_sigaction: {err}): \
                         the container's own filter is not yet installed, so a seccomp filter or \
                         security module that cordon-oci runs under refused it; allow rt_sigaction \
                         in the seccomp profile of the process that runs cordon-oci"
                    )
                    .as_bytes(),
                );
                sys::exit_now(1)
            }
            let _ = nix::unistd::write(&a.ready, b"OK");
            // The parent reads to end-of-file: init's copy is the last one.
            drop(a.ready);
            run_payload_after_start(a.c, a.fifo, a.filter, &state)
        }
        Err(report) => {
            let _ = nix::unistd::write(&a.ready, report.as_bytes());
            sys::exit_now(1)
        }
    }
}

fn read_all(fd: &OwnedFd) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match nix::unistd::read(fd, &mut buf) {
            Ok(0) => return Some(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(Errno::EINTR) => continue,
            Err(_) => return None,
        }
    }
}

fn setup(a: &InitArgs, state: &[u8]) -> Result<Option<OwnedFd>, Step> {
    let c = a.c;
    // Keep 0-2, the preserved fds, and our own (close-on-exec) fds; close what leaked.
    let mut keep: Vec<i32> = (3..3 + a.preserve_fds).collect();
    keep.extend([a.go.as_raw_fd(), a.ready.as_raw_fd(), a.fifo.as_raw_fd()]);
    keep.extend(a.console.iter().map(|f| f.as_raw_fd()));
    sys::close_fds_except(&keep).map_err(e("close inherited file descriptors"))?;
    if c.setup().has_namespace(libc::CLONE_NEWUSER) {
        // Become the namespace's root, new or joined (as runc): uid 0 must be mapped for the
        // mounts below to create files with a known owner.
        nix::unistd::setresgid(0.into(), 0.into(), 0.into()).map_err(e(
            "become gid 0 in the user namespace (is gid 0 mapped: linux.gidMappings, or the joined namespace's gid_map?)",
        ))?;
        nix::unistd::setresuid(0.into(), 0.into(), 0.into()).map_err(e(
            "become uid 0 in the user namespace (is uid 0 mapped: linux.uidMappings, or the joined namespace's uid_map?)",
        ))?;
    }
    if c.setup().new_namespaces() & libc::CLONE_NEWCGROUP != 0 {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWCGROUP)
            .map_err(e("create the cgroup namespace"))?;
    }
    // A network namespace made for the container gets its loopback up, as runc and crun do
    // (runc's "loopback" network): `podman run --network none` and the containers that
    // join that namespace expect 127.0.0.1 to work. One joined by path is its owner's.
    if c.setup().new_namespaces() & libc::CLONE_NEWNET != 0 {
        let lo = sys::loopback_socket().map_err(e("open a socket to bring up lo"))?;
        sys::loopback_up(&lo).map_err(|(step, err)| {
            let what = match step {
                sys::LoopbackStep::ReadFlags => "read lo's flags (SIOCGIFFLAGS)",
                sys::LoopbackStep::SetFlags => "bring up lo (SIOCSIFFLAGS)",
            };
            (
                "set up the container's network namespace",
                format!("{what}: {err}"),
            )
        })?;
    }
    if let Some(h) = c.hostname() {
        nix::unistd::sethostname(h).map_err(e("set the hostname"))?;
    }
    if let Some(d) = &c.setup().domainname {
        sys::set_domainname(d).map_err(e("set the domainname"))?;
    }
    let in_userns = c.setup().has_namespace(libc::CLONE_NEWUSER) || a.caller_in_userns;
    build_root(c, in_userns, a.cgroup2, a.cgroup_v1, a.cgroup_v2_own)?;
    if let Some(hooks) = c
        .spec
        .hooks()
        .as_ref()
        .and_then(|h| h.create_container().clone())
    {
        super::hooks::run("createContainer", &hooks, state)
            .map_err(|err| ("run the createContainer hooks", err.to_string()))?;
    }
    enter_root(c.rootfs(), a.no_pivot)?;
    // The console before the read-only root and paths (as runc): /dev/console is made on
    // the container's /dev.
    let slave = match &a.console {
        Some(sock) if c.setup().terminal => {
            let slave = console(sock, c.setup().console_size)?;
            mount_console(&slave)?;
            Some(slave)
        }
        _ => None,
    };
    finish_root(c)?;
    Ok(slave)
}

/// The container's /dev/null for the masks to bind, opened `O_PATH` without following a
/// symlink and checked to be the character device 1:3, so the mask binds that very inode.
/// A /dev/null the image made a symlink (or a file of its own) would otherwise put a file
/// it chose over the masked ones: a writable host procfs file, say (runc's CVE-2025-31133).
fn container_null() -> Result<OwnedFd, Step> {
    use nix::fcntl::OFlag;
    let step = "open /dev/null to mask with (linux.maskedPaths)";
    let fd = nix::fcntl::open(
        "/dev/null",
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| {
        (
            step,
            format!("/dev/null: {err}: the image or a mount over /dev put no null device there (ELOOP means a symlink); fix the image or the mounts over /dev"),
        )
    })?;
    let st = nix::sys::stat::fstat(&fd).map_err(|err| (step, err.to_string()))?;
    let chr = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFCHR;
    if !chr || st.st_rdev != nix::sys::stat::makedev(1, 3) {
        return Err((
            step,
            "/dev/null in the container is not the null device (a character device 1:3): the image or a mount put something else there; fix the image or the mounts over /dev".into(),
        ));
    }
    Ok(fd)
}

/// The container's /proc, checked to be a procfs (not a directory or mount of the image's):
/// sysctls are written below it and masks bound through its /proc/self/fd.
fn container_proc(what: &'static str) -> Result<OwnedFd, Step> {
    use nix::fcntl::OFlag;
    let fd = nix::fcntl::open(
        "/proc",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| {
        (
            what,
            format!("open /proc: {err}: /proc in the container is not a procfs: mount proc at /proc in mounts[]"),
        )
    })?;
    if !fd_on_procfs(&fd) {
        return Err((
            what,
            "/proc in the container is not a procfs: mount proc at /proc in mounts[]".into(),
        ));
    }
    Ok(fd)
}

/// Opens `rel` below the container's procfs `proc` for writing, with no symlink followed and
/// no mount crossed on the way (openat2): the file is the procfs's own, whatever the image or
/// the container put where.
pub(super) fn write_below_proc(proc: &OwnedFd, rel: &str) -> Result<OwnedFd, Errno> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let how = OpenHow::new()
        .flags(OFlag::O_WRONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY)
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS
                | ResolveFlag::RESOLVE_NO_XDEV,
        );
    loop {
        match openat2(proc, rel, how) {
            Err(Errno::EAGAIN) | Err(Errno::EINTR) => continue,
            r => return r,
        }
    }
}

/// Writes the sysctl `key` (dotted) as `value` below the container's procfs `proc`, with no
/// symlink followed and no mount crossed on the way: the file written is the container's
/// own sysctl, whatever the image put where.
fn write_sysctl(proc: &OwnedFd, key: &str, value: &str) -> Result<(), Step> {
    let step = "set a sysctl (linux.sysctl)";
    let rel = format!("sys/{}", key.replace('.', "/"));
    let fd = match write_below_proc(proc, &rel) {
        Err(err @ (Errno::EXDEV | Errno::ELOOP)) => {
            return Err((
                step,
                format!(
                    "{key}={value}: /proc/{rel}: {err}: a mount or symlink lies on the way to it in the container; remove the mount over /proc"
                ),
            ));
        }
        r => r.map_err(|err| (step, format!("{key}={value}: /proc/{rel}: {err}")))?,
    };
    let mut f = std::fs::File::from(fd);
    std::io::Write::write_all(&mut f, value.as_bytes())
        .map_err(|err| (step, format!("{key}={value}: {err}")))
}

/// The runtime spec's /dev/console with `process.terminal`: the console pty bound there (an
/// empty file made for the mount when the root has none).
fn mount_console(slave: &OwnedFd) -> Result<(), Step> {
    use nix::fcntl::OFlag;
    let dst = Path::new("/dev/console");
    let step = "bind the terminal at /dev/console (process.terminal)";
    match nix::sys::stat::mknod(dst, SFlag::S_IFREG, Mode::from_bits_truncate(0o666), 0) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(err) => return Err((step, format!("create {}: {err}", dst.display()))),
    }
    // Not through a symlink the root put there: the mount would land where it points.
    let target = nix::fcntl::open(
        dst,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| (step, format!("open {}: {err}", dst.display())))?;
    let st = nix::sys::stat::fstat(&target)
        .map_err(|err| (step, format!("inspect {}: {err}", dst.display())))?;
    if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFLNK {
        return Err((
            step,
            format!(
                "{} is a symlink in the root filesystem; remove it",
                dst.display()
            ),
        ));
    }
    // Bound through /proc/self/fd's magic links, which are the kernel's only on a procfs: a
    // /proc of the image's (no proc mount in mounts[]) could send the mount through its
    // symlinks, into a bind shared with the host.
    container_proc(step)?;
    let none: Option<&str> = None;
    mount(
        Some(&fd_path(slave)),
        &fd_path(&target),
        none,
        MsFlags::MS_BIND,
        none,
    )
    .map_err(|err| (step, format!("{err}")))
}

/// `root` joined with `path` (absolute inside the container), resolving symlinks inside
/// `root`, so a symlink in the rootfs cannot send a mount outside it.
pub fn secure_join(root: &Path, path: &Path) -> PathBuf {
    let mut parts: Vec<std::ffi::OsString> = Vec::new();
    let mut todo: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut links = 0;
    while let Some(comp) = todo.pop() {
        if comp == ".." {
            parts.pop();
            continue;
        }
        parts.push(comp);
        let cur: PathBuf = parts.iter().fold(root.to_path_buf(), |p, c| p.join(c));
        if let Ok(target) = std::fs::read_link(&cur) {
            // A link of procfs (/proc/PID/cwd, root, exe, fd/N) is the kernel's magic link:
            // its text names a place in this process's view now (the host's, before the
            // pivot), not in the root, and the kernel resolves it differently later. Never
            // followed: the rest stays as written, and the opens that come after refuse it
            // (RESOLVE_NO_MAGICLINKS).
            if cur.parent().is_some_and(on_procfs) {
                while let Some(rest) = todo.pop() {
                    if rest == ".." {
                        parts.pop();
                    } else {
                        parts.push(rest);
                    }
                }
                break;
            }
            links += 1;
            if links > 40 {
                break;
            }
            parts.pop();
            if target.is_absolute() {
                parts.clear();
            }
            for c in target.components().rev() {
                match c {
                    Component::Normal(n) => todo.push(n.to_os_string()),
                    Component::ParentDir => todo.push("..".into()),
                    _ => {}
                }
            }
        }
    }
    parts.iter().fold(root.to_path_buf(), |p, c| p.join(c))
}

/// Whether what `fd` refers to is on a procfs.
fn fd_on_procfs(fd: &OwnedFd) -> bool {
    nix::sys::statfs::fstatfs(fd)
        .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
}

/// Whether `p` (followed) is on a procfs.
fn on_procfs(p: &Path) -> bool {
    nix::sys::statfs::statfs(p)
        .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
}

/// The destinations inside /proc that a bind may cover (lxcfs' files, as runc allows them):
/// none is a file cordon-oci writes, or a way to the host.
const PROC_BIND_DESTINATIONS: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/diskstats",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/swaps",
    "/proc/uptime",
    "/proc/loadavg",
    "/proc/slabinfo",
    "/proc/net/dev",
    "/proc/sys/kernel/ns_last_pid",
];

/// Refuses a mount whose destination, the image's symlinks followed (`resolved`, absolute
/// inside the root), is /proc or below it, but for a proc mount on /proc and a bind on one
/// of [`PROC_BIND_DESTINATIONS`] (runc's rule). cordon-oci writes into /proc as root of the
/// container (sysctls, masks): a mount of the image's there (a volume reached through a
/// symlink such as `/data -> /proc/sys/net`) could turn those writes onto the host's files.
fn check_proc_destination(m: &MountOp, index: usize, resolved: &Path) -> Result<(), Step> {
    let proc = Path::new("/proc");
    if !resolved.starts_with(proc) {
        return Ok(());
    }
    let allowed = if resolved == proc {
        // A proc mount, or a bind of a procfs (CRI-O's host-pid containers bind the host's).
        m.kind == "proc" || (m.kind == "bind" && on_procfs(&m.src))
    } else {
        m.kind == "bind"
            && PROC_BIND_DESTINATIONS
                .iter()
                .any(|d| resolved == Path::new(d))
    };
    if allowed {
        return Ok(());
    }
    let via = if resolved == m.dst {
        String::new()
    } else {
        format!(
            " (it leads to {} through the image's symlinks)",
            resolved.display()
        )
    };
    Err((
        "mount",
        format!(
            "mounts[{index}].destination {}{via}: a {} mount may not go inside /proc, where cordon-oci writes sysctls and masks as the container's root; only proc (or a bind of a procfs) on /proc and binds on {} are allowed. Fix the image or the mount's destination",
            m.dst.display(),
            m.kind,
            PROC_BIND_DESTINATIONS.join(", ")
        ),
    ))
}

fn to_ms(bits: libc::c_ulong) -> MsFlags {
    MsFlags::from_bits_retain(bits)
}

fn build_root(
    c: &Container,
    in_userns: bool,
    cgroup2: bool,
    v1: &super::cgroup::V1View,
    v2_own: Option<&Path>,
) -> Result<(), Step> {
    let none: Option<&str> = None;
    // Nothing mounted below propagates back to the host: every mount becomes a slave (or
    // private, for `rprivate`), recursively; any other rootfsPropagation (shared, unbindable,
    // a plain `private`, which alone would leave the mounts below `/` shared with the host's)
    // is applied after pivot_root.
    let rprivate = libc::MS_PRIVATE | libc::MS_REC;
    let initial = if c.setup().root_propagation & rprivate == rprivate {
        rprivate
    } else {
        libc::MS_SLAVE | libc::MS_REC
    };
    mount(none, "/", none, to_ms(initial), none).map_err(e("make / non-shared"))?;
    // pivot_root needs the new root to be a mount point.
    mount(
        Some(c.rootfs()),
        c.rootfs(),
        none,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        none,
    )
    .map_err(ep("bind the root filesystem onto itself", c.rootfs()))?;
    // The bind keeps what `/` now is below the root: a slave by default (mounts the host
    // makes below the rootfs later, a volume's, reach the container, as with runc), never
    // shared, so pivot_root takes it.
    for (i, m) in c.setup().mounts.iter().enumerate() {
        do_mount(c, i, m, in_userns, cgroup2, v1, v2_own)?;
    }
    // A config binding a directory over /dev brings its own nodes (cordon-oci makes none
    // there, as runc); `create` says which of linux.devices it lacks (bound_dev_mismatches).
    if c.setup().default_devices {
        make_devices(c, in_userns)?;
    }
    Ok(())
}

/// Whether `st` is the node a device entry asks for: its file type and (but for a FIFO) its
/// numbers.
pub(super) fn node_matches(
    st: &nix::sys::stat::FileStat,
    kind: char,
    major: u64,
    minor: u64,
) -> bool {
    let want = match kind {
        'b' => libc::S_IFBLK,
        'p' => libc::S_IFIFO,
        _ => libc::S_IFCHR,
    };
    st.st_mode & libc::S_IFMT == want
        && (kind == 'p'
            || (nix::sys::stat::major(st.st_rdev) == major
                && nix::sys::stat::minor(st.st_rdev) == minor))
}

/// Remounts a bind mount with `flags` ([`mounts::remount_bind`]).
fn remount_bind(dst: &Path, flags: libc::c_ulong) -> Result<(), Step> {
    mounts::remount_bind(dst, to_ms(flags))
        .map_err(ep("remount a bind mount with its options", dst))
}

/// `path` with `.` dropped and each `..` taking away the component before it (never above
/// `/`), as the kernel resolves it when no symlink is on the way: where a missing cwd is made.
fn lexically_clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// `path` (absolute inside the container) relative to the root, `..` and `.` kept for the
/// kernel to resolve within the root.
fn rel_in_root(path: &Path) -> PathBuf {
    let rel: PathBuf = path
        .components()
        .filter(|c| !matches!(c, Component::RootDir))
        .collect();
    if rel.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        rel
    }
}

/// Opens `path` of the container with every symlink and `..` resolved inside `root`
/// (openat2 RESOLVE_IN_ROOT, magic links refused), so a symlink in the rootfs, or one
/// swapped in by another container sharing a volume while this one is created
/// (CVE-2021-30465), cannot make the operation land on the host.
fn open_in_root(root: &OwnedFd, path: &Path, flags: nix::fcntl::OFlag) -> Result<OwnedFd, Errno> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    loop {
        match openat2(root, &rel_in_root(path), how) {
            Err(Errno::EAGAIN) | Err(Errno::EINTR) => continue,
            r => return r,
        }
    }
}

/// Creates the mount point `path` (and its parents) inside `root`: each missing component
/// is created with mkdirat/openat relative to its parent opened inside the root, never by a
/// path the rootfs's symlinks could redirect.
fn make_mount_point(root: &OwnedFd, path: &Path, file: bool) -> Result<(), Step> {
    use nix::fcntl::OFlag;
    let fail = |what: &str, err: Errno| {
        (
            "create a mount point",
            format!("{}: {what}: {err}", path.display()),
        )
    };
    let comps: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let mut prefix = PathBuf::from("/");
    for (i, name) in comps.iter().enumerate() {
        let last = i + 1 == comps.len();
        let parent = open_in_root(root, &prefix, OFlag::O_PATH | OFlag::O_DIRECTORY)
            .map_err(|err| fail("open its parent", err))?;
        prefix.push(name);
        if open_in_root(root, &prefix, OFlag::O_PATH).is_ok() {
            continue;
        }
        let r = if last && file {
            // O_EXCL: never follows a symlink at the last component.
            nix::fcntl::openat(
                &parent,
                *name,
                OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_WRONLY
                    | OFlag::O_CLOEXEC
                    | OFlag::O_NOFOLLOW,
                Mode::from_bits_truncate(0o644),
            )
            .map(drop)
        } else {
            nix::sys::stat::mkdirat(&parent, *name, Mode::from_bits_truncate(0o755))
        };
        match r {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(err) => return Err(fail("create", err)),
        }
    }
    Ok(())
}

fn do_mount(
    c: &Container,
    index: usize,
    m: &MountOp,
    in_userns: bool,
    cgroup2: bool,
    v1: &super::cgroup::V1View,
    v2_own: Option<&Path>,
) -> Result<(), Step> {
    use nix::fcntl::OFlag;
    let none: Option<&str> = None;
    let root = nix::fcntl::open(
        c.rootfs(),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(ep("open the root filesystem", c.rootfs()))?;
    let data = (!m.data.is_empty()).then_some(m.data.as_str());
    // Where missing directories go: the destination with the image's symlinks followed
    // inside the root (a dangling one is created at its target, within the root). Each
    // step is still created relative to a parent opened inside the root.
    let resolved = secure_join(c.rootfs(), &m.dst);
    let create_at = Path::new("/").join(resolved.strip_prefix(c.rootfs()).unwrap_or(Path::new("")));
    check_proc_destination(m, index, &create_at)?;
    // The destination, opened inside the root; the mount goes onto that very inode. One on
    // a procfs is held to the /proc rule again, by where it really is: the check above
    // followed the image's symlinks as they were then, and a volume shared with a running
    // container can change them since.
    let target = |flags: OFlag| -> Result<OwnedFd, Step> {
        let t = open_in_root(&root, &m.dst, flags).map_err(|err| {
            (
                "open a mount destination inside the root",
                format!("{}: {err}", m.dst.display()),
            )
        })?;
        if fd_on_procfs(&t) {
            let at = std::fs::read_link(fd_path(&t)).unwrap_or_default();
            let inside = at
                .strip_prefix(c.rootfs())
                .map(|r| Path::new("/").join(r))
                .unwrap_or_else(|_| PathBuf::from("/proc/?"));
            check_proc_destination(m, index, &inside)?;
        }
        Ok(t)
    };
    // procfs and sysfs where the config says, not where a symlink of the image points
    // (CVE-2019-19921: procfs moved elsewhere escapes maskedPaths and readonlyPaths).
    if matches!(m.kind.as_str(), "proc" | "sysfs") {
        let lexical = c.rootfs().join(rel_in_root(&m.dst));
        if resolved != lexical || std::fs::symlink_metadata(&lexical).is_ok_and(|md| !md.is_dir()) {
            return Err((
                "mount",
                format!(
                    "mounts[].destination {}: a {} mount must go on a directory of the root filesystem, not through a symlink; fix the image (it has a symlink or a file there)",
                    m.dst.display(),
                    m.kind
                ),
            ));
        }
    }
    // `more`: flags the bind gets besides the mount's own (MS_RDONLY for a host tree the
    // container must not change).
    let bind = |src: &Path, recursive: bool, more: libc::c_ulong| -> Result<(), Step> {
        let is_file = match std::fs::metadata(src) {
            Ok(md) => !md.is_dir(),
            // Said before a mount point is made for it.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let why = if src == m.src {
                    format!(
                        "mounts[{index}].source {}: it does not exist on the host; create it, or fix the path",
                        src.display()
                    )
                } else {
                    // The host's own, bound because a user namespace may not mount the
                    // kind without its own namespace of that kind.
                    let ns = match m.kind.as_str() {
                        "mqueue" => "ipc",
                        "sysfs" => "network",
                        _ => "cgroup",
                    };
                    format!(
                        "mounts[{index}] ({} at {}): the container shares the host's {ns} namespace, in which its user namespace may not mount {}, and the host's {} to bind instead does not exist; add a `{ns}` namespace to linux.namespaces, or remove the mount",
                        m.kind,
                        m.dst.display(),
                        m.kind,
                        src.display()
                    )
                };
                return Err(("bind-mount", why));
            }
            Err(_) => false,
        };
        make_mount_point(&root, &create_at, is_file)?;
        let mut f = MsFlags::MS_BIND;
        if recursive {
            f |= MsFlags::MS_REC;
        }
        let t = target(OFlag::O_PATH)?;
        mount(Some(src), &fd_path(&t), none, f, none).map_err(ep("bind-mount", src))?;
        let extra = (m.flags | more) & !(libc::MS_REMOUNT | libc::MS_BIND | libc::MS_REC);
        if extra != 0 {
            remount_bind(&fd_path(&target(OFlag::O_PATH)?), extra)?;
        }
        Ok(())
    };
    // A user namespace the kernel refuses a cgroup2 mount (it has no cgroup namespace of its
    // own): a bind instead, as runc makes it ([`cgroup2_bind_source`]), read-only with every
    // mount below it when the mount asks for `ro` or when it is the host's whole hierarchy.
    let bind_cgroup2 = || -> Result<(), Step> {
        let (src, force_ro) = cgroup2_bind_source(v2_own);
        let more = if force_ro { libc::MS_RDONLY } else { 0 };
        bind(src, true, more)?;
        if (m.flags | more) & libc::MS_RDONLY != 0 {
            cgroup_read_only_below(&target(OFlag::O_PATH)?, &m.dst)?;
        }
        Ok(())
    };
    // A mount made as binds instead of the filesystem asked for cannot take that
    // filesystem's own options: refused rather than dropped.
    let binds_instead = |how: &str| -> Result<(), Step> {
        if m.data.is_empty() {
            return Ok(());
        }
        Err((
            "mount",
            format!(
                "mounts[{index}] ({} at {}): {how}, which take no filesystem options; remove {:?} from mounts[{index}].options",
                m.kind,
                m.dst.display(),
                m.data
            ),
        ))
    };
    match m.kind.as_str() {
        "bind" => bind(&m.src, m.recursive, 0)?,
        "cgroup" | "cgroup2" if !cgroup2 => {
            // A v1 (or hybrid) host: a tmpfs with, per hierarchy, the container's own cgroup
            // (as runc), never the hierarchies' roots.
            binds_instead("on a cgroup v1 host it is made of binds of the container's cgroups")?;
            make_mount_point(&root, &create_at, false)?;
            mount_cgroup_v1(m, v1, &target)?;
        }
        kind => {
            // Whether the image has the directory the tmpfs covers: only then does the
            // tmpfs take its owner and mode with tmpcopyup (as runc, which restores the
            // mode of an existing destination). A mount point made here is cordon-oci's
            // own 0755 directory: a tmpfs on it keeps the mode it was mounted with (its
            // `mode=`, else tmpfs's 1777), so podman's --read-only /tmp, /run and /var/tmp
            // stay writable by all, as with runc.
            let existed = open_in_root(&root, &create_at, OFlag::O_PATH).is_ok();
            make_mount_point(&root, &create_at, false)?;
            // tmpcopyup: keep a handle on what the tmpfs will cover, copy it in afterwards.
            let under = if m.copy_up {
                Some(target(OFlag::O_RDONLY | OFlag::O_DIRECTORY)?)
            } else {
                None
            };
            let kind = if kind == "cgroup" { "cgroup2" } else { kind };
            let t = target(OFlag::O_PATH | OFlag::O_DIRECTORY)?;
            let r = mount(Some(&m.src), &fd_path(&t), Some(kind), to_ms(m.flags), data);
            drop(t);
            match (r, kind) {
                // Without its own network (sysfs) or ipc (mqueue) namespace, a user namespace
                // may not mount these: bind the host's, as runc does for rootless containers.
                (Err(Errno::EPERM), "sysfs") if in_userns => {
                    binds_instead(
                        "its user namespace may not mount sysfs, so the host's /sys is bound",
                    )?;
                    bind(Path::new("/sys"), true, 0)?
                }
                (Err(Errno::EPERM), "mqueue") if in_userns => {
                    binds_instead(
                        "its user namespace may not mount mqueue, so the host's /dev/mqueue is bound",
                    )?;
                    bind(Path::new("/dev/mqueue"), true, 0)?
                }
                // Pure v2: a cgroup2 mount first (it works in the container's own cgroup
                // namespace, rooted at its cgroup); refused (EPERM, or EBUSY as runc also
                // takes it), a bind.
                (Err(Errno::EPERM | Errno::EBUSY), "cgroup2") if in_userns => {
                    binds_instead(
                        "its user namespace may not mount cgroup2, so its cgroup is bound",
                    )?;
                    bind_cgroup2()?
                }
                (Err(Errno::EINVAL), _) if !m.data.is_empty() => {
                    return Err((
                        "mount",
                        format!(
                            "{}: EINVAL: the kernel refused the {kind} mount of mounts[{index}] with the options {:?}; check mounts[{index}].options: {kind} does not know one of them, or its value",
                            m.dst.display(),
                            m.data
                        ),
                    ));
                }
                (r, _) => r.map_err(ep("mount", &m.dst))?,
            }
            if let Some(f) = under {
                let now = target(OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
                copy_tree(&f, &now, &m.dst, existed).map_err(|err| {
                    (
                        "copy up into a tmpfs (tmpcopyup)",
                        format!("{}: {err}", m.dst.display()),
                    )
                })?;
            }
        }
    }
    if m.flags & libc::MS_NOSYMFOLLOW != 0 {
        let t = target(OFlag::O_PATH)?;
        let flags = sys::fstatvfs_flags(std::os::fd::AsFd::as_fd(&t))
            .map_err(ep("read the flags of a mount (statvfs)", &m.dst))?;
        nosymfollow_held(flags, &m.dst)?;
    }
    for p in &m.propagation {
        let t = target(OFlag::O_PATH)?;
        mount(none, &fd_path(&t), none, to_ms(*p), none)
            .map_err(ep("set the propagation of", &m.dst))?;
    }
    Ok(())
}

/// What a `cgroup`/`cgroup2` mount binds on a pure cgroup v2 host when the kernel refuses the
/// container's user namespace a cgroup2 mount (no cgroup namespace of its own), as runc's
/// mountCgroupV2: the container's own cgroup directory (`own`), so that it sees its cgroup
/// and nothing above; only when it has none (a rootless container without a cgroup), the
/// host's whole hierarchy, then always read-only (`true`): the container must not change the
/// caller's cgroups.
fn cgroup2_bind_source(own: Option<&Path>) -> (&Path, bool) {
    match own {
        Some(dir) => (dir, false),
        None => (Path::new("/sys/fs/cgroup"), true),
    }
}

/// Whether a mount that asked for `nosymfollow` got it (`got`: its statvfs flags). Kernels
/// before 5.10 take MS_NOSYMFOLLOW without an error and ignore it, which would leave the
/// container following symlinks the config wanted refused: fail instead.
fn nosymfollow_held(got: nix::sys::statvfs::FsFlags, dst: &Path) -> Result<(), Step> {
    if got.contains(crate::fs::ST_NOSYMFOLLOW) {
        return Ok(());
    }
    Err((
        "apply the mount option nosymfollow",
        format!(
            "{}: the mount does not have it after mounting (statvfs shows no ST_NOSYMFOLLOW): this kernel ignores MS_NOSYMFOLLOW (it needs Linux 5.10 or later); drop `nosymfollow` from the mount's options, or upgrade the kernel",
            dst.display()
        ),
    ))
}

/// `linux.readonlyPaths` entry `p` (a path of the container, after pivot_root): it and every
/// mount below it read-only, nosuid, nodev and noexec, as runc makes them
/// ([`mounts::read_only_tree`]).
fn read_only_path(p: &Path) -> Result<(), Step> {
    mounts::read_only_tree(p).map_err(|(step, err)| {
        (
            "make read-only (linux.readonlyPaths)",
            format!("{}: {step}: {err}", p.display()),
        )
    })
}

/// [`mounts::read_only_below`] for a cgroup mount that asks for `ro`, with what to do without
/// mount_setattr.
fn cgroup_read_only_below(fd: &OwnedFd, dst: &Path) -> Result<(), Step> {
    mounts::read_only_below(fd).map_err(|err| {
        let hint = if err == Errno::ENOSYS {
            "; this kernel has no mount_setattr (Linux 5.12+): upgrade it, or drop `ro` from the mount (the cgroup tree is then writable as far as the container's user namespace allows)"
        } else {
            ""
        };
        (
            "make a cgroup mount read-only with every mount below it (mount_setattr)",
            format!("{}: {err}{hint}", dst.display()),
        )
    })
}

/// A `cgroup` mount on a cgroup v1 (or hybrid) host, as runc makes it: a tmpfs, and in it,
/// per hierarchy, a bind of the container's own cgroup of that hierarchy (never the
/// hierarchy's root: from there the container's root could rewrite any host cgroup's limits
/// and move itself out of its own). A hierarchy the container has no cgroup of its own in
/// (it stays in the caller's) is always read-only; with `ro` (`cordon-oci spec` and the
/// usual configs) everything is, submounts included.
fn mount_cgroup_v1(
    m: &MountOp,
    v1: &super::cgroup::V1View,
    target: &dyn Fn(nix::fcntl::OFlag) -> Result<OwnedFd, Step>,
) -> Result<(), Step> {
    use nix::fcntl::OFlag;
    let none: Option<&str> = None;
    let ro = m.flags & libc::MS_RDONLY != 0;
    let safe = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let keep = m.flags & !(libc::MS_RDONLY | libc::MS_REMOUNT | libc::MS_BIND | libc::MS_REC);
    let t = target(OFlag::O_PATH | OFlag::O_DIRECTORY)?;
    mount(
        Some("tmpfs"),
        &fd_path(&t),
        Some("tmpfs"),
        to_ms(safe | keep),
        Some("mode=755"),
    )
    .map_err(ep("mount the tmpfs of a cgroup mount", &m.dst))?;
    drop(t);
    let dir = target(OFlag::O_PATH | OFlag::O_DIRECTORY)?;
    let sub = |name: &str| {
        nix::fcntl::openat(
            &dir,
            name,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|err| {
            (
                "open a cgroup hierarchy's mount point",
                format!("{}/{name}: {err}", m.dst.display()),
            )
        })
    };
    for b in &v1.binds {
        nix::sys::stat::mkdirat(&dir, b.name.as_str(), Mode::from_bits_truncate(0o755)).map_err(
            |err| {
                (
                    "create a cgroup hierarchy's mount point",
                    format!("{}/{}: {err}", m.dst.display(), b.name),
                )
            },
        )?;
        // Not recursive: the cgroup alone, nothing mounted below it on the host.
        mount(
            Some(&b.src),
            &fd_path(&sub(&b.name)?),
            none,
            MsFlags::MS_BIND,
            none,
        )
        .map_err(ep("bind the container's cgroup", &b.src))?;
        let flags = if ro || !b.own {
            safe | libc::MS_RDONLY
        } else {
            safe
        };
        remount_bind(&fd_path(&sub(&b.name)?), flags)?;
    }
    // (Without `ro` the tmpfs stays writable: a later mount makes its own mount point.)
    for name in v1.empty.iter().filter(|_| ro) {
        match nix::sys::stat::mkdirat(&dir, name.as_str(), Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(err) => {
                return Err((
                    "create a cgroup hierarchy's mount point",
                    format!("{}/{name}: {err}", m.dst.display()),
                ));
            }
        }
    }
    for (name, to) in &v1.links {
        match nix::unistd::symlinkat(to.as_str(), &dir, name.as_str()) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(err) => {
                return Err((
                    "create a cgroup hierarchy's symlink",
                    format!("{}/{name} -> {to}: {err}", m.dst.display()),
                ));
            }
        }
    }
    drop(dir);
    if ro {
        let top = target(OFlag::O_PATH | OFlag::O_DIRECTORY)?;
        // The tmpfs; each hierarchy is a bind of its own (not recursive), remounted above.
        remount_bind(&fd_path(&top), safe | keep | libc::MS_RDONLY)?;
    }
    Ok(())
}

/// Copies the directory tree under `src` (files, directories, symlinks; modes and owners)
/// into `dst`, both directories opened O_RDONLY. Every entry is reached relative to its
/// parent's descriptor, opened with O_NOFOLLOW (O_DIRECTORY for a directory) and checked
/// with fstat on that descriptor; no path is ever resolved again, so an entry swapped for a
/// symlink during the copy (this runs before pivot_root, with the host's root) cannot make
/// it read a host file (CVE-2021-30465 class). Symlinks are recreated, never followed; an
/// entry whose type changes between fstatat and open fails the copy. `rel` names the
/// directory in errors. `dst` itself takes the owner and mode of `src` when `top_attrs`
/// (the directories below always do).
fn copy_tree(src: &OwnedFd, dst: &OwnedFd, rel: &Path, top_attrs: bool) -> std::io::Result<()> {
    use nix::fcntl::{AtFlags, OFlag, openat};
    use nix::sys::stat::{FileStat, fchmod, fstat, fstatat};
    let fail = |what: &str, name: &std::ffi::OsStr, err: Errno| {
        std::io::Error::other(format!("{}: {what}: {err}", rel.join(name).display()))
    };
    let kind = |st: &FileStat| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    let perm = |st: &FileStat| Mode::from_bits_truncate(st.st_mode & 0o7777);
    let owner = |st: &FileStat| (Some(st.st_uid.into()), Some(st.st_gid.into()));
    // A fresh open file description of `src` to read the entries from.
    let listing = openat(
        src,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| fail("open", "".as_ref(), err))?;
    let mut names = Vec::new();
    for entry in nix::dir::Dir::from_fd(listing)
        .map_err(|err| fail("read the directory", "".as_ref(), err))?
        .iter()
    {
        let entry = entry.map_err(|err| fail("read the directory", "".as_ref(), err))?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name).to_os_string(),
            );
        }
    }
    for name in &names {
        let name = name.as_os_str();
        let st = fstatat(src, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(|err| fail("stat", name, err))?;
        let k = kind(&st);
        if k == SFlag::S_IFLNK {
            let to =
                nix::fcntl::readlinkat(src, name).map_err(|err| fail("readlink", name, err))?;
            nix::unistd::symlinkat(to.as_os_str(), dst, name)
                .map_err(|err| fail("create the symlink", name, err))?;
            let (u, g) = owner(&st);
            nix::unistd::fchownat(dst, name, u, g, AtFlags::AT_SYMLINK_NOFOLLOW)
                .map_err(|err| fail("set the owner", name, err))?;
        } else if k == SFlag::S_IFDIR {
            let open_dir = |at: &OwnedFd| {
                openat(
                    at,
                    name,
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
            };
            let from = open_dir(src).map_err(|err| fail("open the directory", name, err))?;
            nix::sys::stat::mkdirat(dst, name, Mode::from_bits_truncate(0o700))
                .map_err(|err| fail("create the directory", name, err))?;
            let to = open_dir(dst).map_err(|err| fail("open the new directory", name, err))?;
            copy_tree(&from, &to, &rel.join(name), true)?;
        } else if k == SFlag::S_IFREG {
            // O_NONBLOCK: a fifo swapped in would not block the open (and is refused below).
            let from = openat(
                src,
                name,
                OFlag::O_RDONLY
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_NONBLOCK
                    | OFlag::O_NOCTTY
                    | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|err| fail("open", name, err))?;
            let st = fstat(&from).map_err(|err| fail("stat", name, err))?;
            if kind(&st) != SFlag::S_IFREG {
                return Err(fail("changed type during the copy", name, Errno::EINVAL));
            }
            let to = openat(
                dst,
                name,
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            )
            .map_err(|err| fail("create", name, err))?;
            let (mut r, mut w) = (std::fs::File::from(from), std::fs::File::from(to));
            std::io::copy(&mut r, &mut w).map_err(|err| {
                std::io::Error::other(format!("{}: copy: {err}", rel.join(name).display()))
            })?;
            let (u, g) = owner(&st);
            // Owner first: chown clears set-id bits that fchmod then sets.
            nix::unistd::fchown(&w, u, g).map_err(|err| fail("set the owner", name, err))?;
            fchmod(&w, perm(&st)).map_err(|err| fail("set the mode", name, err))?;
        }
        // Devices, fifos and sockets are not copied (as before).
    }
    if top_attrs {
        let st = fstat(src).map_err(|err| fail("stat", "".as_ref(), err))?;
        let (u, g) = owner(&st);
        nix::unistd::fchown(dst, u, g).map_err(|err| fail("set the owner", "".as_ref(), err))?;
        fchmod(dst, perm(&st)).map_err(|err| fail("set the mode", "".as_ref(), err))?;
    }
    Ok(())
}

fn make_devices(c: &Container, in_userns: bool) -> Result<(), Step> {
    let none: Option<&str> = None;
    let mut devs: Vec<(PathBuf, char, u64, u64, u32, u32, u32)> = DEFAULT_DEVICES
        .iter()
        .map(|(p, ma, mi)| (PathBuf::from(p), 'c', *ma, *mi, 0o666, 0, 0))
        .collect();
    for d in &c.setup().devices {
        devs.retain(|x| x.0 != d.path);
        devs.push((
            d.path.clone(),
            d.kind,
            d.major,
            d.minor,
            d.mode,
            d.uid,
            d.gid,
        ));
    }
    use nix::fcntl::OFlag;
    let root = nix::fcntl::open(
        c.rootfs(),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(ep("open the root filesystem", c.rootfs()))?;
    // (directory opened inside the root, name in it) for a path of the container: every
    // step below works relative to that directory, never by a host path that a symlink
    // swapped into the rootfs could redirect.
    let resolved = |path: &Path| -> PathBuf {
        let r = secure_join(c.rootfs(), path);
        Path::new("/").join(r.strip_prefix(c.rootfs()).unwrap_or(Path::new("")))
    };
    let place = |path: &Path| -> Result<(OwnedFd, std::ffi::OsString), Step> {
        let rel = resolved(path);
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Err((
                "create a device",
                format!("{}: not a file path", path.display()),
            ));
        };
        make_mount_point(&root, parent, false)?;
        let dir = open_in_root(&root, parent, OFlag::O_PATH | OFlag::O_DIRECTORY)
            .map_err(ep("open a device directory", parent))?;
        Ok((dir, name.to_os_string()))
    };
    for (path, kind, major, minor, mode, uid, gid) in devs {
        // mknod of a device is refused in a user namespace: bind the host's node, which
        // must be the device asked for (a host node of that name may be another), and no
        // more open than the config's mode (the bind keeps the host's mode and owner). A
        // FIFO needs no privilege: made as outside one.
        if in_userns && kind != 'p' {
            const STEP: &str =
                "bind the host's node of a device (a user namespace cannot make one)";
            // Opened once (a symlink, /dev/disk/by-id/..., followed as a bind follows it):
            // the node checked is the node bound, whatever the path names meanwhile.
            let node = nix::fcntl::open(&path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
                .map_err(|e| {
                    (
                        STEP,
                        format!(
                            "{}: {e}; in a user namespace a device of linux.devices must exist on the host under the same path",
                            path.display()
                        ),
                    )
                })?;
            let st = nix::sys::stat::fstat(&node).map_err(ep("inspect the host's node", &path))?;
            if !node_matches(&st, kind, major, minor) {
                return Err((
                    STEP,
                    format!(
                        "{}: the host's node is not the {kind} {major}:{minor} the config asks for (mode {:o}, device {}:{}); in a user namespace a device of linux.devices must exist on the host under the same path",
                        path.display(),
                        st.st_mode,
                        nix::sys::stat::major(st.st_rdev),
                        nix::sys::stat::minor(st.st_rdev)
                    ),
                ));
            }
            let (host, asked) = (st.st_mode & 0o7777, mode & 0o7777);
            if host & !asked != 0 {
                return Err((
                    STEP,
                    format!(
                        "{}: the host's node has mode {host:o}, more open than the fileMode {asked:o} the config asks for, and a bound node keeps the host's mode; ask for {host:o} or more, or run the container without a user namespace",
                        path.display()
                    ),
                ));
            }
            make_mount_point(&root, &resolved(&path), true)?;
            let t = open_in_root(&root, &path, OFlag::O_PATH)
                .map_err(ep("open a device mount point", &path))?;
            mount(
                Some(&fd_path(&node)),
                &fd_path(&t),
                none,
                MsFlags::MS_BIND,
                none,
            )
            .map_err(ep("bind the device node", &path))?;
            continue;
        }
        let (dir, name) = place(&path)?;
        let _ = nix::unistd::unlinkat(
            &dir,
            name.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        let kind = match kind {
            'b' => SFlag::S_IFBLK,
            'p' => SFlag::S_IFIFO,
            _ => SFlag::S_IFCHR,
        };
        let perm = Mode::from_bits_truncate(mode & 0o7777);
        // The mode the config asked for, not reduced by the umask (init is single-threaded).
        let old = nix::sys::stat::umask(Mode::empty());
        let r = nix::sys::stat::mknodat(
            &dir,
            name.as_os_str(),
            kind,
            perm,
            nix::sys::stat::makedev(major, minor),
        );
        nix::sys::stat::umask(old);
        r.map_err(ep("create the device node", &path))?;
        nix::unistd::fchownat(
            &dir,
            name.as_os_str(),
            Some(uid.into()),
            Some(gid.into()),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(ep("set the owner of", &path))?;
    }
    for (link, target) in [
        ("/dev/fd", "/proc/self/fd"),
        ("/dev/stdin", "/proc/self/fd/0"),
        ("/dev/stdout", "/proc/self/fd/1"),
        ("/dev/stderr", "/proc/self/fd/2"),
        ("/dev/ptmx", "pts/ptmx"),
    ] {
        let (dir, name) = place(Path::new(link))?;
        match nix::unistd::symlinkat(target, &dir, name.as_os_str()) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(err) => return Err(("create a /dev symlink", format!("{link}: {err}"))),
        }
    }
    Ok(())
}

fn enter_root(rootfs: &Path, no_pivot: bool) -> Result<(), Step> {
    if !no_pivot {
        return mounts::pivot_into(rootfs)
            .map_err(|(step, err)| (step, format!("{}: {err}", rootfs.display())));
    }
    let none: Option<&str> = None;
    nix::unistd::chdir(rootfs).map_err(ep("enter the root filesystem", rootfs))?;
    mount(Some("."), "/", none, MsFlags::MS_MOVE, none).map_err(e("move the root (--no-pivot)"))?;
    nix::unistd::chroot(".").map_err(e("chroot (--no-pivot)"))?;
    nix::unistd::chdir("/").map_err(e("enter /"))?;
    Ok(())
}

fn finish_root(c: &Container) -> Result<(), Step> {
    let none: Option<&str> = None;
    // A process.cwd the root lacks is made (0755, as runc and crun make it: `ctr run --cwd`,
    // an image whose WORKDIR is missing), inside the root as mount points are, before the
    // root turns read-only. What exists is left to the chdir (and its checks) as it is.
    let cwd = lexically_clean(&c.setup().cwd);
    if matches!(std::fs::metadata(&cwd), Err(err) if err.kind() == std::io::ErrorKind::NotFound) {
        let root = nix::fcntl::open(
            "/",
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(e("open the root"))?;
        // 0755 whatever the caller's umask (the process's own is set later).
        let old = nix::sys::stat::umask(Mode::from_bits_truncate(0o022));
        let made = make_mount_point(&root, &cwd, false);
        nix::sys::stat::umask(old);
        made.map_err(|(_, why)| ("create process.cwd", why))?;
    }
    if !c.setup().sysctl.is_empty() {
        let proc = container_proc("set a sysctl (linux.sysctl)")?;
        for (k, v) in &c.setup().sysctl {
            write_sysctl(&proc, k, v)?;
        }
    }
    // The masks bind the null device through /proc/self/fd: both checked once, when a file
    // is to be masked.
    let mut null: Option<OwnedFd> = None;
    for p in &c.setup().masked {
        match std::fs::metadata(p) {
            // Nothing to hide; any other error leaves the path unmasked: fail closed.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => {
                return Err((
                    "mask (linux.maskedPaths)",
                    format!("{}: {err}", p.display()),
                ));
            }
            Ok(md) if md.is_dir() => mounts::mask_dir(p).map_err(ep("mask the directory", p))?,
            Ok(_) => {
                let null = match &null {
                    Some(fd) => fd,
                    None => {
                        container_proc("mask (linux.maskedPaths)")?;
                        null.insert(container_null()?)
                    }
                };
                mounts::mask_file(p, &fd_path(null)).map_err(|(step, e)| ep(step, p)(e))?
            }
        }
    }
    for p in &c.setup().readonly {
        match std::fs::symlink_metadata(p) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => {
                return Err((
                    "make read-only (linux.readonlyPaths)",
                    format!("{}: {err}", p.display()),
                ));
            }
            Ok(_) => {}
        }
        read_only_path(p)?;
    }
    if c.setup().readonly_root {
        remount_bind(Path::new("/"), libc::MS_RDONLY)?;
    }
    if c.setup().root_propagation & (libc::MS_SHARED | libc::MS_PRIVATE | libc::MS_UNBINDABLE) != 0
    {
        mount(none, "/", none, to_ms(c.setup().root_propagation), none)
            .map_err(e("set linux.rootfsPropagation"))?;
    }
    Ok(())
}

/// Opens a pty in the container's devpts and sends the master over the console socket.
fn console(sock: &OwnedFd, size: Option<(u16, u16)>) -> Result<OwnedFd, Step> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let master = nix::fcntl::open(
        "/dev/pts/ptmx",
        nix::fcntl::OFlag::O_RDWR | nix::fcntl::OFlag::O_NOCTTY | nix::fcntl::OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(e("open /dev/pts/ptmx (is devpts mounted at /dev/pts?)"))?;
    let slave = sys::pty_open_peer(master.as_raw_fd()).map_err(e("open the pty's peer"))?;
    if let Some((rows, cols)) = size {
        sys::set_winsize(slave.as_raw_fd(), rows, cols).map_err(e("set the console size"))?;
    }
    let fds = [master.as_raw_fd()];
    let name = b"/dev/ptmx";
    let iov = [std::io::IoSlice::new(name)];
    sendmsg::<()>(
        sock.as_raw_fd(),
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map_err(e("send the pty master over --console-socket"))?;
    Ok(slave)
}

fn run_payload_after_start(
    c: &Container,
    fifo: OwnedFd,
    filter: Option<&OciFilter>,
    state: &[u8],
) -> ! {
    // Blocks until `start` writes its byte; a terminating signal ends the process meanwhile
    // (main set that up before telling `create` it was ready).
    let mut b = [0u8; 1];
    loop {
        match nix::unistd::read(&fifo, &mut b) {
            Ok(1) => break,
            Err(Errno::EINTR) => continue,
            _ => sys::exit_now(1),
        }
    }
    if let Err(err) = sys::exit_on_terminating_signals(false) {
        eprintln!("cordon-oci: cannot restore the default actions of signals: {err}");
        sys::exit_now(1)
    }
    // Kept (close-on-exec) until the execve below: `start` waits for the fifo to lose its
    // last reader, so it returns once the program runs.
    let _exec_fifo = fifo;
    let fail = |step: &str, msg: String, code: i32| -> ! {
        eprintln!("cordon-oci: cannot {step}: {msg}");
        sys::exit_now(code)
    };
    if let Err((step, msg)) = no_new_privs_filter(c, filter) {
        fail(step, msg, 1);
    }
    // startContainer hooks run the container's own files (their paths resolve after
    // pivot_root): with the process's final identity, capabilities, no_new_privs and seccomp
    // filter, as runc runs them (after finalizeNamespace and seccomp, right before the
    // execve), never with init's full privileges. A filter that refuses what running a hook
    // takes (fork, execve, wait4, pipes) fails the hook, and so the container.
    if let Some(hooks) = c
        .spec
        .hooks()
        .as_ref()
        .and_then(|h| h.start_container().clone())
        && let Err(err) = super::hooks::run("startContainer", &hooks, state)
    {
        fail("run the startContainer hooks", err.to_string(), 1);
    }
    exec(c, None)
}

/// What an errno from ioprio_set or sched_setattr most likely means for a container.
fn privilege_hint(err: Errno, what: &str) -> String {
    match err {
        Errno::EPERM => format!(
            ": {what} needs CAP_SYS_NICE in the host's user namespace (or a process.rlimits \
             RLIMIT_RTPRIO / RLIMIT_NICE that allows it), which a rootless container, or one in a \
             user namespace of its own, does not have; as root, a real-time policy also needs \
             real-time time of its cgroup (cpu.rt_runtime_us, 0 by default in a child cgroup of \
             cgroup v1); remove the field, or run the container with those"
        ),
        Errno::E2BIG => ": this kernel's sched_setattr predates the utilization clamps (Linux 5.3); remove SCHED_FLAG_UTIL_CLAMP_MIN/MAX".into(),
        Errno::EAGAIN | Errno::EBUSY => ": the kernel refused the deadline's bandwidth (admission control: runtime/period over what the CPUs have left)".into(),
        _ => String::new(),
    }
}

fn prepare(
    c: &Container,
    filter: Option<&OciFilter>,
    slave: Option<OwnedFd>,
    preserve_fds: i32,
) -> Result<(), Step> {
    sys::reset_signals().map_err(e("reset signal dispositions"))?;
    nix::unistd::setsid().map_err(e("start a new session"))?;
    // Before the container's seccomp filter, which may refuse keyctl.
    if c.setup().new_keyring {
        new_session_keyring()?;
    }
    if let Some(s) = slave {
        sys::set_controlling_tty(s.as_raw_fd())
            .map_err(e("make the pty the controlling terminal"))?;
        nix::unistd::dup2_stdin(&s).map_err(e("attach the pty"))?;
        nix::unistd::dup2_stdout(&s).map_err(e("attach the pty"))?;
        nix::unistd::dup2_stderr(&s).map_err(e("attach the pty"))?;
    }
    for fd in 3..3 + preserve_fds {
        sys::clear_cloexec(fd).map_err(e("keep a --preserve-fds descriptor"))?;
    }
    // Still with init's privileges, before any seccomp filter.
    give_stdio_to(c.setup().uid)?;
    for &(res, soft, hard) in &c.setup().rlimits {
        crate::limits::set_rlimit(res, soft, hard).map_err(|err| ("set process.rlimits", err))?;
    }
    // As runc: with init's privileges (a real-time class or policy, or a nice value below
    // the current one, needs CAP_SYS_NICE of the host), before any seccomp filter.
    if let Some(p) = c.setup().io_priority {
        sys::set_io_priority(p).map_err(|err| {
            (
                "set process.ioPriority",
                format!("{err}{}", privilege_hint(err, "the real-time class")),
            )
        })?;
    }
    if let Some(a) = &c.setup().scheduler {
        sys::set_scheduler(a).map_err(|err| {
            (
                "set process.scheduler",
                format!(
                    "{err}{}",
                    privilege_hint(err, "a real-time or deadline policy, or a lower nice value")
                ),
            )
        })?;
    }
    // Before the container's seccomp filter, which may allow only some personalities.
    if let Some(p) = c.setup().personality {
        sys::set_personality(p).map_err(e("set linux.personality"))?;
    }
    // As runc: with init's privileges, before no_new_privs and any seccomp filter; the
    // execve enters it (the startContainer hooks' too).
    if let Some(p) = &c.setup().apparmor_profile {
        let step = "apply process.apparmorProfile";
        let proc = container_proc(step)?;
        super::apparmor::change_onexec(&proc, p).map_err(|why| (step, why))?;
    }
    if !c.setup().no_new_privileges
        && let Some(f) = filter
    {
        crate::security::seccomp::install_program(&f.program, f.flags)
            .map_err(|err| ("install linux.seccomp", err.to_string()))?;
    }
    set_identity(c)?;
    // A change of ids resets "dumpable" to fs.suid_dumpable: init waits for `start` with
    // the process's ids now, and must stay out of reach of ptrace and /proc meanwhile.
    // execve makes the program dumpable again.
    nix::sys::prctl::set_dumpable(false).map_err(e("make the container's init non-dumpable"))?;
    // process.user.umask, else 0022 as runc: never the caller's (a shim's or a shell's).
    nix::sys::stat::umask(Mode::from_bits_truncate(
        c.setup().umask.unwrap_or(DEFAULT_UMASK),
    ));
    nix::unistd::chdir(&c.setup().cwd).map_err(ep("enter process.cwd", &c.setup().cwd))?;
    // CVE-2024-21626: a cwd reached through a magic link (/proc/self/fd/N of a descriptor
    // on a host directory) lies outside the container's root, where getcwd fails (ENOENT,
    // "unreachable"). The program must start inside its root. A container's seccomp filter
    // (installed by now when no_new_privs is off) may refuse getcwd itself: then the walk up
    // from the cwd decides instead.
    let outside = match nix::unistd::getcwd() {
        Ok(_) => None,
        // What a filter answers: the walk decides. Any other failure fails closed, as runc.
        Err(err @ (Errno::EPERM | Errno::EACCES | Errno::ENOSYS)) => match cwd_below_root() {
            Ok(true) => None,
            Ok(false) => Some(format!(
                "getcwd: {err}; the walk up from it misses the root"
            )),
            Err(walk) => Some(format!("getcwd: {err}; walk up from it: {walk}")),
        },
        Err(err) => Some(err.to_string()),
    };
    if let Some(why) = outside {
        return Err((
            "enter process.cwd",
            format!(
                "{}: the directory is outside the container's root filesystem ({why}); give a path inside it",
                c.setup().cwd.display()
            ),
        ));
    }
    Ok(())
}

/// Whether the working directory lies below this process's root: climbing `..` from it
/// reaches the root itself, the directory whose `..` is itself, on the root's mount (device,
/// inode and mount id all the root's), before any other top. The mount id tells the root
/// from another view of the same directory (the host's view of the rootfs, through a
/// descriptor opened outside the container), whose `..` leads on out; a kernel that does
/// not report it (before 5.8) fails the check.
fn cwd_below_root() -> Result<bool, Errno> {
    use nix::fcntl::{OFlag, open, openat};
    use nix::sys::stat::fstat;
    use std::os::fd::AsFd;
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let key = |fd: &OwnedFd| -> Result<(u64, u64, u64), Errno> {
        let st = fstat(fd)?;
        Ok((st.st_dev, st.st_ino, sys::mount_id(fd.as_fd())?))
    };
    let root = key(&open("/", flags, Mode::empty())?)?;
    let mut dir = open(".", flags, Mode::empty())?;
    for _ in 0..4096 {
        let here = key(&dir)?;
        let up = openat(&dir, "..", flags, Mode::empty())?;
        if key(&up)? == here {
            return Ok(here == root);
        }
        dir = up;
    }
    Err(Errno::ELOOP)
}

/// `process.noNewPrivileges`, then the container's seccomp filter under it (with
/// no_new_privs off, [`prepare`] installed it before the identity change): as runc, as close
/// to the execve as can be, so that the fewest calls run under it.
fn no_new_privs_filter(c: &Container, filter: Option<&OciFilter>) -> Result<(), Step> {
    if c.setup().no_new_privileges {
        nix::sys::prctl::set_no_new_privs().map_err(e("set process.noNewPrivileges"))?;
        if let Some(f) = filter {
            crate::security::seccomp::install_program(&f.program, f.flags)
                .map_err(|err| ("install linux.seccomp", err.to_string()))?;
        }
    }
    Ok(())
}

/// What an exec process writes on its report pipe once it is set up and its program found,
/// before its last steps (the no_new_privs filter, the execve); a failure report may follow.
pub const EXEC_READY: &[u8] = b"READY ";

/// The report of a program that cannot run (`code` 127 or 126), which `oci::exec_failure`
/// reads back.
pub fn exec_report(code: i32, why: &str) -> String {
    format!("EXEC{code} {why}")
}

/// Finds the process's program as [`exec`] will (execvp's search of the config's PATH, in
/// the container's root and cwd, with the process's identity), without executing it. On
/// failure: the exit code (127 not found, 126 found but not executable) and a message in
/// the words runtimes use (podman maps "executable file not found" and "permission
/// denied" to those codes).
fn find_program(c: &Container) -> Result<(), (i32, String)> {
    use nix::sys::stat::stat;
    let name = &c.sandbox.argv[0];
    let candidates: Vec<PathBuf> = if name.contains('/') {
        vec![PathBuf::from(name)]
    } else {
        c.path_dirs()
            .iter()
            .map(|d| Path::new(d).join(name))
            .collect()
    };
    let mut denied: Option<(PathBuf, Errno)> = None;
    for p in candidates {
        let err = match stat(&p) {
            Err(Errno::ENOENT | Errno::ENOTDIR) => continue,
            // What a seccomp filter answers: this search cannot tell; execve decides.
            Err(Errno::EPERM | Errno::ENOSYS) => return Ok(()),
            Err(err) => err,
            // execve refuses a directory or a special file with EACCES.
            Ok(st) if st.st_mode & libc::S_IFMT != libc::S_IFREG => Errno::EACCES,
            Ok(_) => {
                let Ok(path) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
                    return Ok(());
                };
                // With the effective ids and capabilities, as execve checks (a uid of 1000
                // with CAP_DAC_OVERRIDE runs a root-only program).
                match sys::executable(&path) {
                    Ok(()) | Err(Errno::EPERM | Errno::ENOSYS) => return Ok(()),
                    Err(err) => err,
                }
            }
        };
        let stop = err != Errno::EACCES;
        denied = Some((p, err));
        if stop {
            break;
        }
    }
    Err(match denied {
        // A name with a `/` is not searched: runc's words for it.
        None if name.contains('/') => (
            127,
            format!("cannot execute {name:?} in the container: no such file or directory"),
        ),
        None => (
            127,
            format!(
                "cannot execute {name:?} in the container: executable file not found in $PATH ({})",
                c.path_dirs().join(":")
            ),
        ),
        Some((p, err)) => (
            126,
            format!(
                "cannot execute {name:?} in the container ({}): {err}",
                p.display()
            ),
        ),
    })
}

/// Makes the process's user (`uid`, of the container) the owner of what its fds 0-2 are (the
/// console's pty, a shim's pipes or files), as runc's fixStdioPermissions: else a non-root
/// process cannot reopen them (`/dev/stdout`, `/proc/self/fd/1`, the pty through
/// /dev/console). Only the owner changes, the group stays. Only pipes, sockets and ptys of
/// the container's own devpts are given: a regular file or a terminal of the host (`run >
/// /var/log/app.log`, `exec` from an admin's shell) would stay the container user's after
/// the container is gone, where runc gives them too. Skipped besides: what `uid` owns
/// already, and what cannot be changed from here (EPERM: its owner is not mapped in the
/// container's user namespace; EINVAL: its group is not; EROFS), as runc skips them; other
/// errors fail.
fn give_stdio_to(uid: u32) -> Result<(), Step> {
    use std::os::fd::AsFd;
    let pts = nix::sys::stat::stat("/dev/pts").ok().map(|s| s.st_dev);
    let (stdin, stdout, stderr) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
    let fds = [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()];
    for (n, fd) in fds.into_iter().enumerate() {
        let st = match nix::sys::stat::fstat(fd) {
            Ok(st) => st,
            // Not open: nothing to give.
            Err(Errno::EBADF) => continue,
            Err(err) => return Err(("inspect the process's stdio", format!("fd {n}: {err}"))),
        };
        let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
        // Unix98 ptys are majors 136-143.
        let own_pty = kind == SFlag::S_IFCHR
            && Some(st.st_dev) == pts
            && (136..=143).contains(&libc::major(st.st_rdev));
        let givable = kind == SFlag::S_IFIFO || kind == SFlag::S_IFSOCK || own_pty;
        if st.st_uid == uid || !givable {
            continue;
        }
        match nix::unistd::fchown(fd, Some(uid.into()), Some(st.st_gid.into())) {
            Ok(()) | Err(Errno::EPERM | Errno::EINVAL | Errno::EROFS) => {}
            Err(err) => {
                return Err((
                    "give the process's stdio to its user (fchown)",
                    format!("fd {n} to uid {uid}: {err}"),
                ));
            }
        }
    }
    Ok(())
}

/// A new anonymous session keyring for the process, as runc joins one (unless `create
/// --no-new-keyring`): else the container's processes would share the caller's session
/// keyring, and read or change the keys in it (a login's, a CI job's).
///
/// ENOSYS (a kernel without keyrings, CONFIG_KEYS off) is let pass, as runc lets it: there is
/// no keyring to share. Anything else fails, EPERM included (a seccomp filter of cordon-oci's
/// caller that refuses keyctl need not refuse add_key too, so the container could still
/// replace keys in the caller's keyring), with the fix: --no-new-keyring. EDQUOT says which
/// quota.
fn new_session_keyring() -> Result<(), Step> {
    match sys::join_session_keyring(None) {
        Ok(_) | Err(Errno::ENOSYS) => Ok(()),
        Err(err) => {
            let hint = if err == Errno::EDQUOT {
                "; the user's key quota is used up (each container holds a keyring): raise /proc/sys/kernel/keys/maxkeys (root_maxkeys for root), or create with --no-new-keyring to keep the caller's"
            } else {
                "; create with --no-new-keyring to keep the caller's session keyring"
            };
            Err((
                "join a new session keyring (keyctl JOIN_SESSION_KEYRING)",
                format!("{err}{hint}"),
            ))
        }
    }
}

/// The process `exec` starts, in the container's namespaces and cgroup: set up as the
/// container's init sets up its process, then its program is searched and executed. Every
/// failure before its program runs goes to `report` (close-on-exec, so a successful execve
/// closes it, which is how `exec` learns the program runs), as "ERR step: why" or, when the
/// program cannot run, "EXEC127 why" / "EXEC126 why": `exec` then fails with that error, as
/// runc's does, instead of starting a process that prints it and exits (containerd and CRI
/// tell a failed exec from a process that failed; podman maps the words to 126 and 127).
pub fn exec_process(
    c: &Container,
    filter: Option<&OciFilter>,
    preserve_fds: i32,
    report: std::os::fd::BorrowedFd<'_>,
    console_sock: Option<&OwnedFd>,
) -> ! {
    let fail = |step: &str, msg: String| -> ! {
        let _ = nix::unistd::write(report, format!("ERR {step}: {msg}").as_bytes());
        sys::exit_now(1)
    };
    // CVE-2024-21626: whatever cordon-oci inherited from its caller without close-on-exec
    // (a host directory, a cgroup, a socket) must not reach the container: keep 0-2, the
    // --preserve-fds ones and our own, close the rest.
    let mut keep: Vec<i32> = (3..3 + preserve_fds).collect();
    keep.push(report.as_raw_fd());
    keep.extend(console_sock.map(|s| s.as_raw_fd()));
    if let Err(err) = sys::close_fds_except(&keep) {
        fail("close inherited file descriptors", err.to_string());
    }
    let slave = match console_sock {
        Some(sock) => match console(sock, c.setup().console_size) {
            Ok(s) => Some(s),
            Err((step, msg)) => fail(step, msg),
        },
        None => None,
    };
    if let Err((step, msg)) = prepare(c, filter, slave, preserve_fds) {
        fail(step, msg);
    }
    if let Err((code, why)) = find_program(c) {
        let _ = nix::unistd::write(report, exec_report(code, &why).as_bytes());
        sys::exit_now(code)
    }
    // Set up and its program found: what is left is the no_new_privs filter and the execve.
    // `exec` tells by this mark a process that died before (killed by a seccomp filter that
    // kills a call of the set-up, or by the OOM killer) from one whose program runs.
    let _ = nix::unistd::write(report, EXEC_READY);
    if let Err((step, msg)) = no_new_privs_filter(c, filter) {
        fail(step, msg);
    }
    exec(c, Some(report))
}

/// The capabilities of `process.capabilities.<set>`; a name that is none, or that the running
/// kernel lacks, is an error (create checked them already; this holds if that ever changes).
fn caps_of(
    set: &str,
    names: &std::collections::BTreeSet<String>,
    supported: &caps::CapsHashSet,
) -> Result<caps::CapsHashSet, Step> {
    names
        .iter()
        .map(|n| crate::spec::oci::capability(n, supported))
        .collect::<Result<_, _>>()
        .map_err(|why| {
            (
                "set capabilities",
                format!("process.capabilities.{set}: {why}"),
            )
        })
}

fn set_identity(c: &Container) -> Result<(), Step> {
    use caps::CapSet;
    let capf = |set: &'static str| {
        move |err: caps::errors::CapsError| ("set capabilities", format!("{set}: {err}"))
    };
    let supported = caps::runtime::thread_all_supported();
    let of = |set: &str, names| caps_of(set, names, &supported);
    let bounding = of("bounding", &c.setup().caps.bounding)?;
    let inheritable = of("inheritable", &c.setup().caps.inheritable)?;
    let ambient = of("ambient", &c.setup().caps.ambient)?;
    let effective = of("effective", &c.setup().caps.effective)?;
    let permitted = of("permitted", &c.setup().caps.permitted)?;
    crate::security::caps::drop_bounding_except(&bounding)
        .map_err(|err| ("set capabilities", format!("bounding: {err}")))?;
    nix::sys::prctl::set_keepcaps(true).map_err(e("keep capabilities across the uid change"))?;
    let gids: Vec<nix::unistd::Gid> = c
        .setup()
        .additional_gids
        .iter()
        .map(|g| (*g).into())
        .collect();
    let setgroups_denied =
        std::fs::read_to_string("/proc/self/setgroups").is_ok_and(|s| s.trim() == "deny");
    if !(setgroups_denied && gids.is_empty()) {
        nix::unistd::setgroups(&gids).map_err(e("set process.user.additionalGids"))?;
    }
    nix::unistd::setresgid(
        c.setup().gid.into(),
        c.setup().gid.into(),
        c.setup().gid.into(),
    )
    .map_err(e("set process.user.gid"))?;
    nix::unistd::setresuid(
        c.setup().uid.into(),
        c.setup().uid.into(),
        c.setup().uid.into(),
    )
    .map_err(e("set process.user.uid"))?;
    caps::set(
        None,
        CapSet::Effective,
        &effective
            .intersection(&caps::read(None, CapSet::Permitted).unwrap_or_default())
            .copied()
            .collect(),
    )
    .map_err(capf("effective"))?;
    caps::set(None, CapSet::Permitted, &permitted).map_err(capf("permitted"))?;
    caps::set(None, CapSet::Effective, &effective).map_err(capf("effective"))?;
    caps::set(None, CapSet::Inheritable, &inheritable).map_err(capf("inheritable"))?;
    caps::clear(None, CapSet::Ambient).map_err(capf("ambient"))?;
    for cap in ambient {
        caps::raise(None, CapSet::Ambient, cap).map_err(capf("ambient"))?;
    }
    nix::sys::prctl::set_keepcaps(false).map_err(e("reset keepcaps"))?;
    Ok(())
}

/// Executes the process's program, searched as [`find_program`] searched it before `create`
/// returned (as runc and crun do: podman maps that failure to 126 or 127). runtime-tools'
/// misc_props creates and starts a config whose program is missing and expects both to
/// succeed: that test fails, as with runc. A program gone between create and start fails
/// here, after `start`.
///
/// A failure is reported on `report` ([`exec_process`]'s) when given, else on stderr, and
/// cordon-oci exits 126 or 127.
fn exec(c: &Container, report: Option<std::os::fd::BorrowedFd<'_>>) -> ! {
    let name = &c.sandbox.argv[0];
    let fail = |code: i32, why: String| -> ! {
        match report {
            Some(fd) => {
                let _ = nix::unistd::write(fd, exec_report(code, &why).as_bytes());
            }
            None => eprintln!("cordon-oci: {why}"),
        }
        sys::exit_now(code)
    };
    let cstrings = |v: Vec<String>| {
        v.into_iter()
            .map(CString::new)
            .collect::<Result<Vec<_>, _>>()
    };
    // (from_spec refuses NUL bytes in both; nothing is dropped if one got through.)
    let mut env = c.env_strings();
    if !env.iter().any(|e| e.starts_with("HOME=")) {
        env.push(format!("HOME={}", home_of(c.setup().uid)));
    }
    let (Ok(args), Ok(env)) = (cstrings(c.sandbox.argv.clone()), cstrings(env)) else {
        fail(
            126,
            format!(
                "cannot execute {name:?} in the container: an argument or environment entry contains a NUL byte"
            ),
        )
    };
    match crate::launch::exec_search(&args, &env, &c.path_dirs()) {
        None => fail(
            127,
            format!(
                "cannot execute {name:?} in the container: {}",
                Errno::ENOENT
            ),
        ),
        Some((path, errno)) => fail(
            126,
            format!(
                "cannot execute {name:?} in the container ({}): {errno}",
                path.to_string_lossy()
            ),
        ),
    }
}

/// The home directory of `uid` in the container's /etc/passwd (read in the container's
/// root, as the process), else `/`: the HOME runc and crun give a process whose `env` has
/// none (podman relies on it). A passwd that is not a regular file, or is larger than
/// 4 MiB, counts as none.
fn home_of(uid: u32) -> String {
    use nix::fcntl::OFlag;
    use std::io::Read;
    let read = || -> Option<String> {
        let fd = nix::fcntl::open(
            "/etc/passwd",
            OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let st = nix::sys::stat::fstat(&fd).ok()?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return None;
        }
        let mut text = String::new();
        std::fs::File::from(fd)
            .take(4 << 20)
            .read_to_string(&mut text)
            .ok()?;
        passwd_home(&text, uid)
    };
    read().unwrap_or_else(|| "/".to_string())
}

/// The home field of the first /etc/passwd line of `uid`, if it has one.
fn passwd_home(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 7 && f[2].parse::<u32>().ok() == Some(uid) && !f[5].is_empty())
            .then(|| f[5].to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chroot that leaves the cwd outside it (the CVE-2024-21626 shape): the walk up
    /// misses the root; after chdir("/") it finds it. In a forked child (chroot is
    /// process-wide); root only.
    #[test]
    fn the_walk_up_tells_a_cwd_outside_the_root() {
        if !nix::unistd::geteuid().is_root() {
            println!("SKIP: the_walk_up_tells_a_cwd_outside_the_root needs root (chroot)");
            return;
        }
        assert_eq!(cwd_below_root(), Ok(true));
        let d = tempfile::tempdir().unwrap();
        let inner = std::ffi::CString::new(d.path().as_os_str().as_encoded_bytes()).unwrap();
        match sys::fork().unwrap() {
            sys::CloneResult::Child => {
                let code = if nix::unistd::chroot(inner.as_c_str()).is_err() {
                    3
                } else if cwd_below_root() != Ok(false) {
                    4
                } else if nix::unistd::chdir("/").is_err() || cwd_below_root() != Ok(true) {
                    5
                } else {
                    0
                };
                sys::exit_now(code)
            }
            sys::CloneResult::Parent(pid) => {
                let st = nix::sys::wait::waitpid(pid, None).unwrap();
                assert_eq!(st, nix::sys::wait::WaitStatus::Exited(pid, 0));
            }
        }
    }

    /// The root's own directory seen through another mount (the host's view of a bind
    /// mounted rootfs, by a descriptor opened before): same device and inode as the root,
    /// but outside it, and the walk must say so. In a forked child with a mount namespace
    /// of its own; root only.
    #[test]
    fn the_walk_up_tells_the_root_from_another_view_of_it() {
        use nix::mount::{MsFlags, mount};
        if !nix::unistd::geteuid().is_root() {
            println!("SKIP: the_walk_up_tells_the_root_from_another_view_of_it needs root");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let none: Option<&str> = None;
        match sys::fork().unwrap() {
            sys::CloneResult::Child => {
                let step = || -> Result<i32, Errno> {
                    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
                    mount(none, "/", none, MsFlags::MS_PRIVATE | MsFlags::MS_REC, none)?;
                    let host_view = nix::fcntl::open(
                        &root,
                        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY,
                        Mode::empty(),
                    )?;
                    mount(Some(&root), &root, none, MsFlags::MS_BIND, none)?;
                    nix::unistd::chroot(&root)?;
                    nix::unistd::chdir("/")?;
                    if cwd_below_root() != Ok(true) {
                        return Ok(4);
                    }
                    nix::unistd::fchdir(&host_view)?;
                    Ok(if cwd_below_root() == Ok(false) { 0 } else { 5 })
                };
                sys::exit_now(step().unwrap_or(3))
            }
            sys::CloneResult::Parent(pid) => {
                let st = nix::sys::wait::waitpid(pid, None).unwrap();
                assert_eq!(st, nix::sys::wait::WaitStatus::Exited(pid, 0));
            }
        }
    }

    #[test]
    fn home_comes_from_the_first_passwd_line_of_the_uid() {
        let passwd = "root:x:0:0:root:/root:/bin/sh\n# comment\nbad line\n\
                      app:x:1000:1000::/home/app:/bin/sh\nagain:x:1000:1000::/other:/bin/sh\n\
                      nohome:x:1001:1001:::/bin/sh\n";
        assert_eq!(passwd_home(passwd, 0).as_deref(), Some("/root"));
        assert_eq!(passwd_home(passwd, 1000).as_deref(), Some("/home/app"));
        assert_eq!(passwd_home(passwd, 1001), None);
        assert_eq!(passwd_home(passwd, 4242), None);
    }

    #[test]
    fn a_refused_cgroup2_mount_binds_the_containers_own_cgroup_first() {
        let own = Path::new("/sys/fs/cgroup/user.slice/cordon-c1");
        assert_eq!(cgroup2_bind_source(Some(own)), (own, false));
        assert_eq!(
            cgroup2_bind_source(None),
            (Path::new("/sys/fs/cgroup"), true)
        );
    }

    #[test]
    fn secure_join_stays_inside() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("a/abs")).unwrap();
        std::os::unix::fs::symlink("../../..", root.join("a/b/up")).unwrap();
        assert_eq!(secure_join(root, Path::new("/a/b/c")), root.join("a/b/c"));
        assert_eq!(
            secure_join(root, Path::new("/a/abs/passwd")),
            root.join("etc/passwd")
        );
        assert_eq!(secure_join(root, Path::new("/a/b/up/x")), root.join("x"));
        assert_eq!(secure_join(root, Path::new("/../../x")), root.join("x"));
        // procfs' magic links are never followed: /proc/self/cwd read now names this
        // process's working directory, not a place in the root.
        assert_eq!(
            secure_join(Path::new("/"), Path::new("/proc/self/cwd/x/../y")),
            PathBuf::from("/proc/self/cwd/y")
        );
    }

    #[test]
    fn caps_of_refuses_a_name_it_cannot_give() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        let all = caps::all();
        assert_eq!(
            caps_of("bounding", &names(&["CAP_KILL", "CAP_CHOWN"]), &all),
            Ok([caps::Capability::CAP_KILL, caps::Capability::CAP_CHOWN].into())
        );
        let (_, msg) = caps_of("ambient", &names(&["CAP_KILL", "CAP_NO_SUCH"]), &all).unwrap_err();
        assert!(
            msg.contains("process.capabilities.ambient") && msg.contains("CAP_NO_SUCH"),
            "{msg}"
        );
        let only_kill = [caps::Capability::CAP_KILL].into();
        let (_, msg) =
            caps_of("permitted", &names(&["CAP_KILL", "CAP_BPF"]), &only_kill).unwrap_err();
        assert!(
            msg.contains("CAP_BPF: not known to the running kernel"),
            "{msg}"
        );
    }

    #[test]
    fn nosymfollow_missing_after_the_mount_is_an_error() {
        use nix::sys::statvfs::FsFlags;
        let dst = Path::new("/data");
        let (step, msg) = nosymfollow_held(FsFlags::ST_NOSUID, dst).unwrap_err();
        assert!(step.contains("nosymfollow"), "{step}");
        assert!(
            msg.contains("/data") && msg.contains("5.10") && msg.contains("drop `nosymfollow`"),
            "{msg}"
        );
        assert!(nosymfollow_held(FsFlags::ST_NOSUID | crate::fs::ST_NOSYMFOLLOW, dst).is_ok());
    }
}

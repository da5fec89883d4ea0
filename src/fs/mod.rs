//! The new root: a mount plan built as data ([`plan`]), then applied in the sandbox's init
//! ([`apply`]), then entered with `pivot_root`.

pub mod fonts;
pub mod mounts;
pub mod plan;

use nix::errno::Errno;
use nix::fcntl::{OFlag, open};
use nix::mount::{MsFlags, mount};
use nix::sys::stat::Mode;
use nix::sys::statvfs::FsFlags;
use plan::Op;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Where the new root is assembled, inside the sandbox's private mount namespace. A tmpfs is
/// mounted over it, which hides the host's /tmp from this namespace only; host sources are
/// opened before that, so a rootfs under /tmp still works.
pub const STAGE: &str = "/tmp";

/// `statvfs`'s `ST_RELATIME` (Linux's value, 4096, under glibc and musl alike; nix names it
/// only for glibc).
pub const ST_RELATIME: FsFlags = FsFlags::from_bits_retain(4096);

/// `statvfs`'s `ST_NOSYMFOLLOW` (Linux 5.10+, 0x2000; nix does not name it).
pub const ST_NOSYMFOLLOW: FsFlags = FsFlags::from_bits_retain(0x2000);

/// statvfs(2)'s flags of the mount at `path`, with the bits nix does not name (nix's
/// `Statvfs::flags` would drop [`ST_RELATIME`] under musl).
pub fn statvfs_flags(path: &Path) -> Result<FsFlags, Errno> {
    use nix::fcntl::OFlag;
    let fd = nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    crate::sys::fstatvfs_flags(std::os::fd::AsFd::as_fd(&fd))
}

/// The second, empty layer of every read-only overlay (the kernel wants two lower layers when
/// there is no upper one): the new root's `/proc` directory, made first and held by an
/// `O_PATH` fd, through which every overlay names it — by path, an overlay made after procfs
/// is mounted there would get procfs. The directory stays empty: procfs covers it, and the
/// root is read-only. A directory of its own would show in `/`, and a tmpfs of its own would
/// cost an unmount (an RCU grace period) before the pivot.
const EMPTY_LAYER: &str = "proc";

/// Largest host file [`Op::BindRo`] copies in (a file is copied, not bound: see there).
pub const MAX_COPIED_FILE: u64 = 4 << 20;

/// Size cap of the new root's own tmpfs: its directories and symlinks, and the regular files
/// at the top of a `--rootfs DIR`, which are copied in. Room for two files of the largest size
/// copied; the root is read-only once entered, so the cap bounds only what cordon puts there.
const ROOT_SIZE: u64 = 2 * MAX_COPIED_FILE;

/// A mount step that failed: which operation, which syscall, on which path, and the errno.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the sandbox root: {step} {path}: {errno} (for {op}){hint}")]
pub struct ApplyError {
    pub op: String,
    pub step: &'static str,
    pub path: PathBuf,
    pub errno: Errno,
    pub hint: &'static str,
}

/// Why a mount in the sandbox's user namespace may be refused (EPERM, EACCES), given whether
/// AppArmor restricts unprivileged user namespaces ([`crate::doctor::apparmor_restricts_userns`]).
fn mount_denied_hint(apparmor_restricts_userns: bool) -> &'static str {
    if apparmor_restricts_userns {
        "; the kernel refused a mount inside the user namespace. This host's AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1): cordon run by a user gets one without capabilities, so it cannot mount. Add an AppArmor profile granting `userns` to cordon, run `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, or run cordon as root; see `cordon doctor`"
    } else {
        "; the kernel refused a mount inside the user namespace: check `cordon doctor` (is the host inside a container that forbids mounts or masks parts of /proc, which podman's `--security-opt unmask=ALL` and Docker's `--security-opt systempaths=unconfined` lift, or does AppArmor restrict user namespaces: kernel.apparmor_restrict_unprivileged_userns?)"
    }
}

fn fail(op: &Op, step: &'static str, path: &Path, errno: Errno) -> ApplyError {
    let hint = match errno {
        Errno::EPERM | Errno::EACCES => {
            mount_denied_hint(crate::doctor::apparmor_restricts_userns())
        }
        Errno::ENOENT => "; a host path the root needs is missing",
        _ => "",
    };
    ApplyError {
        op: op.to_string(),
        step,
        path: path.to_path_buf(),
        errno,
        hint,
    }
}

fn inside(dst: &Path) -> PathBuf {
    Path::new(STAGE).join(dst.strip_prefix("/").unwrap_or(dst))
}

/// The flags of the mount at `path` that a remount must repeat: in a user namespace the kernel
/// locks them (clearing one is EPERM). nosuid, nodev, noexec, the atime flags, read-only. The
/// sandbox's read-only remounts and an OCI container's bind remounts both build on it.
pub fn locked_flags(path: &Path) -> Result<MsFlags, Errno> {
    let f = statvfs_flags(path)?;
    let mut ms = MsFlags::empty();
    let keep = [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (ST_RELATIME, MsFlags::MS_RELATIME),
        (FsFlags::ST_RDONLY, MsFlags::MS_RDONLY),
    ];
    for (st_flag, ms_flag) in keep {
        if f.contains(st_flag) {
            ms |= ms_flag;
        }
    }
    Ok(ms)
}

/// The flags a read-only remount must carry: the locked ones, plus read-only, nosuid.
fn ro_flags(path: &Path) -> Result<MsFlags, Errno> {
    Ok(locked_flags(path)? | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID)
}

fn remount_ro(op: &Op, path: &Path, nodev: bool) -> Result<(), ApplyError> {
    let mut flags = ro_flags(path).map_err(|e| fail(op, "statvfs", path, e))?;
    if nodev {
        flags |= MsFlags::MS_NODEV;
    }
    mounts::remount_bind(path, flags).map_err(|e| fail(op, "remount read-only", path, e))
}

/// The path through which the kernel reaches exactly what `fd` was opened on.
pub fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The host files and directories the plan binds from, opened (`O_PATH`) before anything is
/// mounted and before init drops host root (a root caller's rootfs may sit under /root).
pub struct Sources {
    fds: HashMap<PathBuf, OwnedFd>,
    /// The extracted rootfs directory (`--rootfs DIR`), opened: its top-level directories
    /// share one overlay of it ([`bind_shared`]). On the host's root: the host's /etc, whose
    /// directories shown in the sandbox share one overlay of it the same way.
    root: Option<(PathBuf, OwnedFd)>,
    /// The binds the caller asked for: each keeps an overlay of its own, so that the
    /// sandbox's mountinfo never names their host paths.
    own: Vec<PathBuf>,
}

/// Opens every source of `ops`. Sources under `confined` (an extracted rootfs directory,
/// which someone other than cordon may be able to write) are opened relative to it with
/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`: an entry swapped for a symlink after the plan was
/// made fails the run instead of binding whatever the symlink points at.
///
/// Sources in `canonical` (the binds the caller asked for, whose paths the launcher checked to
/// be canonical) are opened with `RESOLVE_NO_SYMLINKS` too: a component swapped for a symlink
/// after that check fails the run (ELOOP) instead of showing the sandbox another directory.
pub fn open_sources(
    ops: &[Op],
    confined: Option<&Path>,
    canonical: &[PathBuf],
) -> Result<Sources, ApplyError> {
    use nix::fcntl::{OpenHow, ResolveFlag, openat2};
    // The root's path is canonical (no symlinks in it): opened without following any, a
    // component swapped for a symlink since fails the run instead of leading elsewhere.
    let root_fd = match confined {
        Some(root) => Some(
            openat2(
                nix::fcntl::AT_FDCWD,
                root,
                OpenHow::new()
                    .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
                    .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS),
            )
            .map_err(|e| {
                fail(
                    &Op::Dir { dst: root.into() },
                    "open the root filesystem",
                    root,
                    e,
                )
            })?,
        ),
        None => None,
    };
    let mut fds: HashMap<PathBuf, OwnedFd> = HashMap::new();
    for src in plan::sources(ops)
        .into_iter()
        .chain([PathBuf::from("/dev/null")])
    {
        if fds.contains_key(&src) {
            continue;
        }
        let op = Op::BindRo {
            src: src.clone(),
            dst: src.clone(),
        };
        let fd = match (confined, &root_fd) {
            (Some(root), Some(rfd)) if src.starts_with(root) => {
                let rel = src.strip_prefix(root).unwrap_or(&src);
                let how = OpenHow::new()
                    .flags(OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
                    .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
                openat2(rfd, rel, how).map_err(|e| fail(&op, "open (no symlinks)", &src, e))?
            }
            _ if canonical.contains(&src) => openat2(
                nix::fcntl::AT_FDCWD,
                &src,
                OpenHow::new()
                    .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
                    .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS),
            )
            .map_err(|e| {
                let mut err = fail(&op, "open (no symlinks)", &src, e);
                if e == Errno::ELOOP {
                    // The launcher checked that the path had no symlink.
                    err.hint = "; a directory on the path was replaced by a symlink after cordon checked it: check who can write along the path";
                }
                err
            })?,
            _ => open(&src, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
                .map_err(|e| fail(&op, "open", &src, e))?,
        };
        fds.insert(src, fd);
    }
    // On the host's root, the directories shown from the host's /etc (CA certificates,
    // alternatives) share one overlay of /etc: one superblock fewer to make, and one RCU grace
    // period fewer when the sandbox's mounts go.
    let shared = match confined.zip(root_fd) {
        Some((root, fd)) => Some((root.to_path_buf(), fd)),
        None => shared_host_etc(&fds, canonical),
    };
    Ok(Sources {
        fds,
        root: shared,
        own: canonical.to_vec(),
    })
}

/// The host's /etc, opened, when more than one directory is shown from it that the overlay of
/// /etc can show: reached from /etc without a symlink or a mount on the way (where
/// /etc/ssl/certs links elsewhere, as on some distributions, or sits on a mount of its own,
/// the overlay of /etc could not show it). Binds the caller asked for keep overlays of their
/// own and do not count. None otherwise, or when /etc cannot be opened: each directory gets
/// an overlay of its own ([`bind_shared`] returns false).
fn shared_host_etc(
    fds: &HashMap<PathBuf, OwnedFd>,
    canonical: &[PathBuf],
) -> Option<(PathBuf, OwnedFd)> {
    const ETC: &str = "/etc";
    // Directories or not: the open below counts directories only.
    let candidates: Vec<&PathBuf> = fds
        .keys()
        .filter(|src| {
            src.starts_with(ETC) && src.as_path() != Path::new(ETC) && !canonical.contains(src)
        })
        .collect();
    if candidates.len() < 2 {
        return None;
    }
    let fd = open(
        ETC,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let shown = candidates
        .iter()
        .filter(|src| {
            src.strip_prefix(ETC)
                .is_ok_and(|rel| open_dir_beneath(&fd, rel).is_ok())
        })
        .count();
    (shown >= 2).then(|| (PathBuf::from(ETC), fd))
}

/// The directory `rel` below `dir` (`O_PATH`), reached without a symlink, a mount or `..`
/// out of `dir` on the way.
fn open_dir_beneath(dir: &OwnedFd, rel: &Path) -> nix::Result<OwnedFd> {
    use nix::fcntl::{OpenHow, ResolveFlag, openat2};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_XDEV,
        );
    openat2(dir, rel, how)
}

/// The one overlay of a rootfs directory that its top-level directories are shown from (or of
/// the host's /etc, for the directories shown from it).
enum Shared {
    /// Not needed yet.
    Untried,
    /// Made: the root of its detached mount.
    Ready(OwnedFd),
    /// The kernel could not make it, or not show a directory from it: each directory gets
    /// an overlay of its own.
    Unavailable,
}

/// How read-only host directories ([`Op::BindRo`]) are shown.
struct Views<'a> {
    /// The empty second layer of every overlay.
    empty: &'a Path,
    /// The rootfs directory and its opened root, if the root is one; on the host's root, the
    /// host's /etc, opened, if more than one directory is shown from it.
    root: Option<&'a (PathBuf, OwnedFd)>,
    /// Sources that keep an overlay of their own ([`Sources::own`]).
    own: &'a [PathBuf],
    shared: Shared,
    /// The caller accepted binds where the kernel refuses the overlay (`--allow-degraded
    /// overlay`).
    allow_bind: bool,
    /// Why binds were used instead, once that happened.
    degraded: Option<String>,
}

/// Builds the new root at [`STAGE`] following `ops`, then pivots into it and remounts it
/// read-only. Runs in the sandbox's init, inside the new user and mount namespaces.
///
/// Returns why host directories were bound instead of overlaid, when the kernel refused the
/// overlay and `allow_bind` accepted that; without `allow_bind` that refusal is an error.
pub fn apply(ops: &[Op], sources: Sources, allow_bind: bool) -> Result<Option<String>, ApplyError> {
    let Sources {
        fds: sources,
        root,
        own,
    } = sources;
    let null = fd_path(&sources[Path::new("/dev/null")]);

    // 2. No mount event may propagate back to the host.
    let root_op = Op::Dir { dst: "/".into() };
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| fail(&root_op, "make / private", Path::new("/"), e))?;
    // 3. The new root is a small tmpfs: a mount point, as pivot_root requires.
    let root_data = format!("size={ROOT_SIZE},nr_inodes=4096,mode=0755");
    mount(
        Some("tmpfs"),
        STAGE,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(root_data.as_str()),
    )
    .map_err(|e| {
        let mut err = fail(&root_op, "mount tmpfs root", Path::new(STAGE), e);
        if e == Errno::ENOENT {
            err.hint = "; this system has no /tmp directory, over which cordon mounts the sandbox's root in a mount namespace of its own (the system's /tmp is untouched): create it (`mkdir -m 1777 /tmp`; for a container, `--tmpfs /tmp`)";
        }
        err
    })?;

    let empty_dir = Path::new(STAGE).join(EMPTY_LAYER);
    std::fs::create_dir(&empty_dir)
        .map_err(|e| fail(&root_op, "mkdir", &empty_dir, io_errno(&e)))?;
    let empty_fd = open(
        &empty_dir,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| fail(&root_op, "open", &empty_dir, e))?;
    let empty = fd_path(&empty_fd);
    let mut views = Views {
        empty: &empty,
        root: root.as_ref(),
        own: &own,
        shared: Shared::Untried,
        allow_bind,
        degraded: None,
    };
    for op in ops {
        apply_one(op, &sources, &null, &mut views)?;
    }
    let degraded = views.degraded;
    park(views.shared);

    // 4. Enter it.
    let pivot_op = Op::Dir { dst: "/".into() };
    mounts::pivot_into(Path::new(STAGE))
        .map_err(|(step, e)| fail(&pivot_op, step, Path::new(STAGE), e))?;
    drop(sources);
    remount_ro(&pivot_op, Path::new("/"), true)?;
    Ok(degraded)
}

/// A non-recursive bind of an opened source onto `dst` (mounts below the source are not
/// carried in: they would keep their own, possibly writable, flags).
fn bind(op: &Op, src: &OwnedFd, dst: &Path) -> Result<(), ApplyError> {
    mount(
        Some(&fd_path(src)),
        dst,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| fail(op, "bind", dst, e))
}

/// A read-only overlay whose only non-empty layer is the opened host directory `src`. It shows
/// the same files as a bind would, but through inodes of its own superblock: a lock
/// (`flock`, `fcntl`) taken on one of them is private to this sandbox, where a bind would share
/// the host inode's locks with every other sandbox and with the host (a covert channel, and a
/// way to block host processes that lock shared files). The overlay's private copy of the
/// lower mount is read-only and noatime, so reads do not touch the host's atimes either.
fn overlay_ro(op: &Op, src: &OwnedFd, dst: &Path, empty: &Path) -> Result<(), ApplyError> {
    let data = format!("lowerdir={}:{}", fd_path(src).display(), empty.display());
    let flags = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    mount(Some("overlay"), dst, Some("overlay"), flags, Some(data.as_str())).map_err(|e| {
        let mut err = fail(op, "mount a read-only overlay of", dst, e);
        err.hint = match e {
            Errno::ENODEV => "; this kernel has no overlay filesystem (`modprobe overlay` as root loads it; `cordon doctor` checks); cordon needs it so that file locks on shared read-only files stay private to each sandbox, or pass `--allow-degraded overlay` to bind them instead (the result says so)",
            Errno::EPERM | Errno::EINVAL => "; this kernel does not allow overlayfs in a user namespace (Linux 5.11 or later does); cordon needs it so that file locks on shared read-only files stay private to each sandbox, or pass `--allow-degraded overlay` to bind them instead (the result says so)",
            _ => err.hint,
        };
        err
    })
}

/// Shows the directory `src` (opened as `fd`) at `dst` through the one read-only overlay of
/// `views.root` (a `--rootfs DIR`, or the host's /etc for the directories shown from it),
/// made at its first use: a copy of that overlay's mount rooted at `src`'s place in it
/// (`open_tree`), attached at `dst` (`move_mount`). One overlay superblock instead of one per
/// directory: each costs its making, and an RCU grace period when the sandbox's mounts go
/// (about 0.3 ms a run for a Debian root). Locks stay as private as with an overlay per
/// directory: every file is an inode of this sandbox's own superblock. Nothing above `src` is
/// reachable through the copy: `..` at its root leaves the mount.
///
/// False, for an overlay of `src` alone, when `src` is not below `views.root`, not on its
/// mount, or reached through a symlink (the overlay would not show it as it is), was a bind
/// the caller asked for, or the kernel cannot do it (copying from a detached mount needs
/// Linux 6.15; the overlay is refused over a directory with mounts below it, which a new user
/// namespace locks: a container's /etc with its /etc/hosts). After a failure every later
/// directory gets an overlay of its own too.
fn bind_shared(src: &Path, fd: &OwnedFd, dst: &Path, views: &mut Views) -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::ffi::OsStrExt;
    let Some((root, root_fd)) = views.root else {
        return false;
    };
    if matches!(views.shared, Shared::Unavailable) || views.own.iter().any(|o| o == src) {
        return false;
    }
    match src.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => {
            let same_mount = matches!(
                (crate::sys::mount_id(root_fd.as_fd()), crate::sys::mount_id(fd.as_fd())),
                (Ok(a), Ok(b)) if a == b
            );
            if !same_mount {
                return false;
            }
            // Before Linux 6.15 the copies below are refused: spare the overlay.
            if matches!(views.shared, Shared::Untried) && !kernel_at_least(6, 15) {
                views.shared = Shared::Unavailable;
                return false;
            }
            if matches!(views.shared, Shared::Untried) {
                let lower = format!("{}:{}", fd_path(root_fd).display(), views.empty.display());
                views.shared = match std::ffi::CString::new(lower)
                    .ok()
                    .and_then(|l| crate::sys::overlay_lower_only(&l).ok())
                {
                    Some(m) => Shared::Ready(m),
                    None => Shared::Unavailable,
                };
            }
            let Shared::Ready(mount) = &views.shared else {
                return false;
            };
            // The same entry `src` names, without following a symlink swapped in since.
            let to = std::ffi::CString::new(dst.as_os_str().as_bytes());
            let attached = open_dir_beneath(mount, rel)
                .and_then(|dir| crate::sys::open_tree_clone(dir.as_fd()))
                .and_then(|tree| {
                    let to = to.as_deref().map_err(|_| Errno::EINVAL)?;
                    crate::sys::move_mount_to(tree.as_fd(), to)
                });
            if attached.is_err() {
                views.shared = Shared::Unavailable;
            }
            attached.is_ok()
        }
        _ => false,
    }
}

/// Where the shared overlay's own mount goes once the directories shown from it are attached:
/// over the host's /dev in the old root (there on every host: cordon binds its null device),
/// which init detaches right after the pivot. Not over /proc: a failed pivot's message reads
/// the host's AppArmor setting there.
const PARKED_AT: &std::ffi::CStr = c"/dev";

/// Attaches the shared overlay's own (detached) mount in the old root, where the pivot's
/// unmount of the old root takes it too. The directories shown from it are copies of that
/// mount and keep its superblock; the mount itself is no longer needed. Closed as it is, the
/// kernel would dissolve it in an unmount of its own, which waits for an RCU grace period in
/// init (0.09-0.17 ms off a run in interleaved A/Bs here, on a 2-CPU machine with cordon's
/// other processes running). The old root's unmount waits for one grace period for all its mounts.
/// The sandbox never sees it there (the old root is detached before anything runs in the
/// sandbox). If the attach fails, the mount is closed, as before: the cost is that grace
/// period.
fn park(shared: Shared) {
    if let Shared::Ready(mount) = shared {
        use std::os::fd::AsFd;
        let _ = crate::sys::move_mount_to(mount.as_fd(), PARKED_AT);
    }
}

/// Whether the running kernel's release is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let Ok(u) = nix::sys::utsname::uname() else {
        return false;
    };
    let release = u.release().to_string_lossy();
    let mut n = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    (n.next().unwrap_or(0), n.next().unwrap_or(0)) >= (major, minor)
}

/// Copies the opened host file `src` (at most [`MAX_COPIED_FILE`] bytes) to `dst`, mode 0444.
/// The bytes go from file to file inside the kernel (`std::io::copy` uses `copy_file_range`,
/// else `sendfile`), with no buffer in init: reading /etc/ld.so.cache (36 KiB) through one took
/// init about 0.2 ms here (fresh heap pages, in a process still copy-on-write with cordon),
/// the in-kernel copy about 0.06 ms.
fn copy_ro(op: &Op, src: &OwnedFd, dst: &Path) -> Result<(), ApplyError> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let from = fd_path(src);
    let file = std::fs::File::open(&from).map_err(|e| fail(op, "open", &from, io_errno(&e)))?;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(dst)
        .map_err(|e| fail(op, "open", dst, io_errno(&e)))?;
    let copied = std::io::copy(&mut file.take(MAX_COPIED_FILE + 1), &mut out).map_err(|e| {
        let mut err = fail(op, "copy", dst, io_errno(&e));
        if err.errno == Errno::ENOSPC {
            err.hint = "; the regular files at the top of a root filesystem are copied into the sandbox root's own tmpfs (8 MiB in all; /etc's files into 1 MiB): put large files in a directory, which is shown as it is";
        }
        err
    })?;
    if copied > MAX_COPIED_FILE {
        let mut err = fail(op, "copy", dst, Errno::EFBIG);
        err.hint = "; a single file given as part of the root is copied in and must be at most 4 MiB: put it in a directory";
        return Err(err);
    }
    out.set_permissions(std::fs::Permissions::from_mode(0o444))
        .map_err(|e| fail(op, "chmod", dst, io_errno(&e)))?;
    Ok(())
}

fn apply_one(
    op: &Op,
    sources: &HashMap<PathBuf, OwnedFd>,
    null: &Path,
    views: &mut Views,
) -> Result<(), ApplyError> {
    match op {
        Op::Dir { dst } => {
            let p = inside(dst);
            std::fs::create_dir_all(&p).map_err(|e| fail(op, "mkdir", &p, io_errno(&e)))
        }
        Op::BindRo { src, dst } => {
            let p = inside(dst);
            let fd = &sources[src];
            let st = nix::sys::stat::fstat(fd).map_err(|e| fail(op, "fstat", src, e))?;
            match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR if bind_shared(src, fd, &p, views) => Ok(()),
                libc::S_IFDIR => match overlay_ro(op, fd, &p, views.empty) {
                    Err(e)
                        if views.allow_bind
                            && matches!(e.errno, Errno::ENODEV | Errno::EPERM | Errno::EINVAL) =>
                    {
                        views.degraded.get_or_insert_with(|| {
                            format!(
                                "the kernel refused an overlay of {} ({})",
                                src.display(),
                                e.errno
                            )
                        });
                        bind(op, fd, &p)?;
                        remount_ro(op, &p, true)
                    }
                    other => other,
                },
                libc::S_IFREG => copy_ro(op, fd, &p),
                // Only directories and regular files are shown from the host or a rootfs
                // (the plan leaves the rest out; this catches one swapped in since).
                other => {
                    let mut err = fail(op, "bind", src, Errno::EINVAL);
                    err.hint = match other {
                        libc::S_IFSOCK => {
                            "; it is a socket, which cordon never shows from a root filesystem (it appeared after the root was planned): remove it from the rootfs directory"
                        }
                        libc::S_IFIFO => {
                            "; it is a FIFO, which cordon never shows from a root filesystem (it appeared after the root was planned): remove it from the rootfs directory"
                        }
                        _ => {
                            "; it is a device node, which cordon never shows from a root filesystem (it appeared after the root was planned): remove it from the rootfs directory"
                        }
                    };
                    Err(err)
                }
            }
        }
        Op::BindRw { src, dst } => {
            let p = inside(dst);
            bind(op, &sources[src], &p)?;
            let flags = (ro_flags(&p).map_err(|e| fail(op, "statvfs", &p, e))?
                - MsFlags::MS_RDONLY)
                | MsFlags::MS_NODEV;
            mounts::remount_bind(&p, flags).map_err(|e| fail(op, "remount nosuid,nodev", &p, e))
        }
        Op::BindDev { src, dst } => {
            // Read-only, nosuid, noexec: a device node on a read-only mount still reads and
            // writes (the kernel refuses writes there to regular files, directories and
            // symlinks only), but its inode, the host's, cannot be touched (`touch /dev/null`
            // set the host node's times).
            let p = inside(dst);
            bind(op, &sources[src], &p)?;
            mounts::remount_bind(
                &p,
                MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            )
            .map_err(|e| fail(op, "make read-only the bound device", &p, e))
        }
        Op::Symlink { target, dst } => {
            let p = inside(dst);
            std::os::unix::fs::symlink(target, &p)
                .map_err(|e| fail(op, "symlink", &p, io_errno(&e)))
        }
        Op::Tmpfs {
            dst,
            size,
            inodes,
            mode,
            noexec,
        } => {
            let p = inside(dst);
            let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
            if *noexec {
                flags |= MsFlags::MS_NOEXEC;
            }
            let data = format!("size={size},nr_inodes={inodes},mode={mode:o}");
            mount(Some("tmpfs"), &p, Some("tmpfs"), flags, Some(data.as_str()))
                .map_err(|e| fail(op, "mount tmpfs", &p, e))
        }
        Op::File { dst, contents } => {
            let p = inside(dst);
            std::fs::write(&p, contents).map_err(|e| fail(op, "write", &p, io_errno(&e)))
        }
        Op::Proc { dst } => {
            let p = inside(dst);
            let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
            mount(Some("proc"), &p, Some("proc"), flags, None::<&str>)
                .map_err(|e| fail(op, "mount proc", &p, e))
        }
        Op::Devpts { dst } => {
            let p = inside(dst);
            mount(
                Some("devpts"),
                &p,
                Some("devpts"),
                MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
                Some("newinstance,ptmxmode=0666,mode=0620,max=64"),
            )
            .map_err(|e| fail(op, "mount devpts", &p, e))
        }
        // The masks and read-only binds skip a path this kernel's /proc lacks. The mount
        // itself says so (ENOENT; ENOTDIR for a directory mask over a file), which saves a
        // stat per path.
        Op::MaskFile { dst } => {
            let p = inside(dst);
            match mounts::mask_file(&p, null) {
                Ok(()) | Err((mounts::MASK_BIND, Errno::ENOENT)) => Ok(()),
                Err((step, e)) => Err(fail(op, step, &p, e)),
            }
        }
        Op::MaskDir { dst } => {
            let p = inside(dst);
            match mounts::mask_dir(&p) {
                Ok(()) | Err(Errno::ENOENT | Errno::ENOTDIR) => Ok(()),
                Err(e) => Err(fail(op, "mask", &p, e)),
            }
        }
        Op::ReadOnly { dst } => {
            let p = inside(dst);
            match mounts::read_only_tree(&p) {
                Ok(()) => Ok(()),
                Err((mounts::BIND_ONTO_ITSELF, Errno::ENOENT)) => Ok(()),
                Err((step, e)) => Err(fail(op, step, &p, e)),
            }
        }
        Op::RemountRo { dst } => {
            let p = inside(dst);
            remount_ro(op, &p, false)
        }
    }
}

fn io_errno(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

#[cfg(test)]
mod tests {
    /// A refused mount names AppArmor's user-namespace restriction: as the cause when the
    /// sysctl is set, among the things to check otherwise.
    #[test]
    fn a_refused_mount_names_the_apparmor_userns_restriction() {
        let set = super::mount_denied_hint(true);
        assert!(
            set.contains("kernel.apparmor_restrict_unprivileged_userns=1"),
            "{set}"
        );
        assert!(
            set.contains("sysctl -w kernel.apparmor_restrict_unprivileged_userns=0")
                && set.contains("`userns`"),
            "{set}"
        );
        let unset = super::mount_denied_hint(false);
        assert!(
            unset.contains("kernel.apparmor_restrict_unprivileged_userns?"),
            "{unset}"
        );
        assert!(unset.contains("cordon doctor"), "{unset}");
    }

    use super::*;

    #[test]
    fn a_bind_source_is_opened_without_symlinks_when_it_must_be_canonical() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().canonicalize().unwrap().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = real.with_file_name("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        for src in [&real, &link] {
            let ops = plan::binds(&[crate::spec::Bind {
                src: src.clone(),
                dst: "/data".into(),
                writable: false,
            }]);
            // A plain source follows the link; a canonical one must not meet any.
            assert!(open_sources(&ops, None, &[]).is_ok());
            let strict = open_sources(&ops, None, std::slice::from_ref(src));
            if src == &real {
                assert!(strict.is_ok());
            } else {
                let e = strict.err().expect("a symlink was followed");
                assert_eq!(e.errno, Errno::ELOOP, "{e}");
                assert!(e.to_string().contains("replaced by a symlink"), "{e}");
            }
        }
    }

    #[test]
    fn statvfs_flags_sees_relatime() {
        // Every mount of this process whose mountinfo says relatime: statvfs must say so too
        // (nix's Statvfs::flags drops ST_RELATIME under musl).
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mut checked = 0;
        for line in info.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let (point, opts) = (f[4], f[5]);
            if !opts.split(',').any(|o| o == "relatime") || point.contains('\\') {
                continue;
            }
            let Ok(flags) = super::statvfs_flags(std::path::Path::new(point)) else {
                continue;
            };
            // A mount hidden by a later one on the same point shows the later one's flags.
            if !flags.contains(super::ST_RELATIME) {
                let last = info
                    .lines()
                    .rfind(|l| l.split(' ').nth(4) == Some(point))
                    .unwrap();
                assert!(
                    !last.split(' ').nth(5).unwrap().contains("relatime"),
                    "{point}: {flags:?}"
                );
                continue;
            }
            checked += 1;
        }
        assert!(checked > 0, "no relatime mount to check:\n{info}");
    }
}

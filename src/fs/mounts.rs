//! Mount steps that both of cordon's inits take: the sandbox's (building the root of
//! [`super::apply`]) and an OCI container's (`oci::init`). One implementation of each, so a
//! fix to how a root is entered, a path hidden or a tree made read-only reaches both.

use super::{fd_path, io_errno};
use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::stat::Mode;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

/// A mount step that failed: what was being done, and the errno.
pub type StepError = (&'static str, Errno);

/// Enters `dir` (a mount point) as the root of this mount namespace: from inside it,
/// `pivot_root(".", ".")` stacks the old root on the new one, which is then detached, so
/// nothing of the old root stays reachable.
pub fn pivot_into(dir: &Path) -> Result<(), StepError> {
    nix::unistd::chdir(dir).map_err(|e| ("enter the new root (chdir)", e))?;
    nix::unistd::pivot_root(".", ".").map_err(|e| ("pivot_root", e))?;
    umount2(".", MntFlags::MNT_DETACH).map_err(|e| ("detach the old root", e))?;
    nix::unistd::chdir("/").map_err(|e| ("enter /", e))
}

/// Hides the file at `path`: the null device at `null` is bound over it (reads are empty,
/// writes vanish), read-only, nosuid and noexec. The node is the host's (a user namespace
/// cannot make one): on a writable bind the sandbox could set its times (`touch -c
/// /proc/keys` changed the host's /dev/null), a covert channel and a change to a host inode;
/// a device node on a read-only mount still reads and writes. The failed step and its
/// errno otherwise; [`MASK_BIND`]'s ENOENT means `path` does not exist.
pub fn mask_file(path: &Path, null: &Path) -> Result<(), StepError> {
    mount(
        Some(null),
        path,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| (MASK_BIND, e))?;
    remount_bind(
        path,
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
    )
    .map_err(|e| ("make the mask read-only", e))
}

/// The step of [`mask_file`] that binds the null device over the file: its ENOENT means the
/// file does not exist.
pub const MASK_BIND: &str = "mask (bind the null device over)";

/// Hides the directory at `path` under an empty tmpfs that is read-only, nosuid, nodev and
/// noexec, and holds one inode (its root). ENOENT when `path` does not exist, ENOTDIR when it
/// is not a directory.
pub fn mask_dir(path: &Path) -> Result<(), Errno> {
    let flags = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(
        Some("tmpfs"),
        path,
        Some("tmpfs"),
        flags,
        Some("size=4k,nr_inodes=1,mode=0555"),
    )
}

/// Remounts the bind mount at `dst` with `flags` (`MS_REMOUNT | MS_BIND` added). In a user
/// namespace the kernel locks the flags a mount came with (nosuid, nodev, noexec, the atime
/// ones): a remount that would clear one fails with EPERM, and is then tried again with the
/// locked flags repeated ([`super::locked_flags`]; read-only is never added that way).
pub fn remount_bind(dst: &Path, flags: MsFlags) -> Result<(), Errno> {
    let none: Option<&str> = None;
    let base = MsFlags::MS_REMOUNT | MsFlags::MS_BIND;
    match mount(none, dst, none, base | flags, none) {
        Err(Errno::EPERM) => {
            // (statvfs failing leaves the flags as given, and the remount fails as before.)
            let locked = super::locked_flags(dst).unwrap_or(MsFlags::empty()) - MsFlags::MS_RDONLY;
            mount(none, dst, none, base | flags | locked, none)
        }
        other => other,
    }
}

/// The flags of a mount that [`read_only_tree`] makes read-only.
pub const READ_ONLY_TREE_FLAGS: MsFlags = MsFlags::MS_RDONLY
    .union(MsFlags::MS_NOSUID)
    .union(MsFlags::MS_NODEV)
    .union(MsFlags::MS_NOEXEC);

/// The step of [`read_only_tree`] that binds the path onto itself: its ENOENT means the path
/// does not exist.
pub const BIND_ONTO_ITSELF: &str = "bind the path onto itself";

/// Makes `path` and every mount below it read-only, nosuid, nodev and noexec: bound onto itself
/// recursively, then the tree made read-only with mount_setattr (AT_RECURSIVE), or, on a
/// kernel without it (before 5.12), by remounting each mount below `path` that mountinfo
/// lists. A recursive bind copies the submounts writable, and a remount reaches the top one
/// only: both of those alone would leave a writable mount below.
pub fn read_only_tree(path: &Path) -> Result<(), StepError> {
    let none: Option<&str> = None;
    mount(
        Some(path),
        path,
        none,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        none,
    )
    .map_err(|e| (BIND_ONTO_ITSELF, e))?;
    let fd = nix::fcntl::open(
        path,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| ("open the bound path", e))?;
    match read_only_below(&fd) {
        Ok(()) => Ok(()),
        Err(Errno::ENOSYS) => {
            // mountinfo lists the path the kernel resolved `path` to.
            let at = std::fs::read_link(fd_path(&fd))
                .map_err(|e| ("resolve the bound path", io_errno(&e)))?;
            remount_read_only_each(&at)
        }
        Err(e) => Err(("make the tree read-only (mount_setattr)", e)),
    }
}

/// Makes the mount `fd` is on and every mount below it read-only, nosuid, nodev and noexec
/// (mount_setattr AT_RECURSIVE; a remount of the top alone leaves submounts writable).
/// ENOSYS before Linux 5.12.
pub fn read_only_below(fd: &OwnedFd) -> Result<(), Errno> {
    let attrs = libc::MOUNT_ATTR_RDONLY
        | libc::MOUNT_ATTR_NOSUID
        | libc::MOUNT_ATTR_NODEV
        | libc::MOUNT_ATTR_NOEXEC;
    crate::sys::mount_setattr_recursive(fd.as_raw_fd(), attrs)
}

/// Remounts the mount at `top` and every mount below it that mountinfo lists read-only
/// ([`READ_ONLY_TREE_FLAGS`]), one by one: what [`read_only_below`] does in one call where
/// the kernel has mount_setattr.
pub fn remount_read_only_each(top: &Path) -> Result<(), StepError> {
    let list = "list the mounts below it (/proc/thread-self/mountinfo, read on a kernel without mount_setattr)";
    // thread-self: the mount namespace of this thread (a test's thread may have its own).
    let text =
        std::fs::read_to_string("/proc/thread-self/mountinfo").map_err(|e| (list, io_errno(&e)))?;
    let mounts = crate::limits::MountInfo::parse(&text).map_err(|_| (list, Errno::EINVAL))?;
    let remount = "remount read-only";
    remount_bind(top, READ_ONLY_TREE_FLAGS).map_err(|e| (remount, e))?;
    for m in mounts
        .iter()
        .filter(|m| m.mount_point.starts_with(top) && m.mount_point != top)
    {
        remount_bind(&m.mount_point, READ_ONLY_TREE_FLAGS).map_err(|e| (remount, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// The variable that makes the re-run of [`read_only_trees_cover_every_mount_below`] the
    /// process that mounts (in a mount namespace of its own).
    const RO_CHILD: &str = "CORDON_TEST_READ_ONLY_BELOW";

    /// In a new mount namespace, per way of making a tree read-only: a tmpfs at DIR/WAY with
    /// a tmpfs at DIR/WAY/sub, made read-only that way; prints `ro WAY top=ERRNO sub=ERRNO`
    /// for a file created in each afterwards (0: it was writable).
    fn ro_child(dir: &Path) {
        use nix::sched::{CloneFlags, unshare};
        let none: Option<&str> = None;
        unshare(CloneFlags::CLONE_NEWNS).expect("unshare the mount namespace");
        mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
            .expect("make / private");
        type Way = fn(&Path) -> Result<(), StepError>;
        let ways: [(&str, Way); 2] = [
            ("setattr", read_only_tree),
            ("each", |p| {
                mount(
                    Some(p),
                    p,
                    None::<&str>,
                    MsFlags::MS_BIND | MsFlags::MS_REC,
                    None::<&str>,
                )
                .map_err(|e| ("bind", e))?;
                remount_read_only_each(p)
            }),
        ];
        for (way, apply) in ways {
            let top = dir.join(way);
            std::fs::create_dir(&top).unwrap();
            mount(Some("tmpfs"), &top, Some("tmpfs"), MsFlags::empty(), none).unwrap();
            std::fs::create_dir(top.join("sub")).unwrap();
            mount(
                Some("tmpfs"),
                &top.join("sub"),
                Some("tmpfs"),
                MsFlags::empty(),
                none,
            )
            .unwrap();
            // Writable before.
            std::fs::write(top.join("sub/before"), "").unwrap();
            apply(&top).unwrap();
            let errno = |p: PathBuf| {
                std::fs::write(p, "")
                    .err()
                    .and_then(|e| e.raw_os_error())
                    .unwrap_or(0)
            };
            println!(
                "ro {way} top={} sub={}",
                errno(top.join("x")),
                errno(top.join("sub/x"))
            );
        }
        // The masks: a directory's entries and a file's contents are gone, and neither can be
        // written; a missing path or the wrong kind is the kernel's errno, for the caller.
        let masked = dir.join("masked");
        std::fs::create_dir_all(masked.join("d")).unwrap();
        std::fs::write(masked.join("d/secret"), "s").unwrap();
        std::fs::write(masked.join("f"), "secret").unwrap();
        mask_dir(&masked.join("d")).unwrap();
        mask_file(&masked.join("f"), Path::new("/dev/null")).unwrap();
        let entries = std::fs::read_dir(masked.join("d")).unwrap().count();
        let contents = std::fs::read(masked.join("f")).unwrap().len();
        let errno = |r: Result<(), Errno>| r.err().map_or(0, |e| e as i32);
        // The null device under the mask is the host's: its times must stay out of reach.
        let touch = nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            &masked.join("f"),
            &nix::sys::time::TimeSpec::UTIME_NOW,
            &nix::sys::time::TimeSpec::UTIME_NOW,
            nix::sys::stat::UtimensatFlags::FollowSymlink,
        );
        let (missing_step, missing) = match mask_file(&masked.join("none"), Path::new("/dev/null"))
        {
            Ok(()) => ("", 0),
            Err((step, e)) => (step, e as i32),
        };
        println!(
            "mask dir_entries={entries} dir_write={} file_len={contents} file_touch={} missing={}:{} on_file={}",
            std::fs::write(masked.join("d/x"), "")
                .err()
                .and_then(|e| e.raw_os_error())
                .unwrap_or(0),
            errno(touch),
            missing_step,
            missing,
            errno(mask_dir(&masked.join("f"))),
        );
    }

    #[test]
    fn read_only_trees_cover_every_mount_below() {
        if let Ok(dir) = std::env::var(RO_CHILD) {
            return ro_child(Path::new(&dir));
        }
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP: read_only_trees_cover_every_mount_below: mounting needs root");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "fs::mounts::tests::read_only_trees_cover_every_mount_below",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(RO_CHILD, d.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let erofs = libc::EROFS;
        let want = format!(
            "mask dir_entries=0 dir_write={erofs} file_len=0 file_touch={erofs} missing={MASK_BIND}:{} on_file={}",
            libc::ENOENT,
            libc::ENOTDIR
        );
        assert!(
            stdout.contains(&want),
            "{want}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for way in ["setattr", "each"] {
            assert!(
                stdout.contains(&format!("ro {way} top={erofs} sub={erofs}")),
                "{way}: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

//! CVE-2019-5736: a container process must never reach the host's cordon-oci binary.
//!
//! cordon-oci's own processes enter the container (the init until `start` execs the
//! program, the `exec` process until its execve), and a container program can even be a
//! script starting with `#!/proc/self/exe`, which makes the kernel run the runtime's own
//! executable inside the container. Through `/proc/PID/exe` of such a process a container
//! root could open the binary and, once no cordon-oci runs, rewrite it: code execution as
//! root on the host at the next `cordon-oci` call.
//!
//! So `create`, `run` and `exec` first re-execute from a copy nobody can write, so that
//! every `/proc/PID/exe` of the runtime points at that copy:
//!
//! - where cordon-oci may mount (root): the binary seen through a new overlayfs whose
//!   layers are the binary's directory and an empty one, with no upper layer, mounted
//!   read-only and attached nowhere. Nothing on an overlay without an upper layer can be
//!   written, whatever the mount flags (a remount read-write is refused), and no path
//!   but the processes' own exe links leads to it. No copy: this costs a few syscalls.
//! - elsewhere: a memfd copy of the binary sealed against writes, growth and shrinking
//!   (about 5 ms for cordon-oci's 5 MB).

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};
use nix::sys::stat::Mode;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The seals of the copy cordon-oci runs from.
pub const SEALS: SealFlag = SealFlag::F_SEAL_SEAL
    .union(SealFlag::F_SEAL_SHRINK)
    .union(SealFlag::F_SEAL_GROW)
    .union(SealFlag::F_SEAL_WRITE);

#[derive(Debug, thiserror::Error)]
#[error("cannot {step}: {errno}{hint}{detail}")]
pub struct ExeError {
    pub step: &'static str,
    pub errno: Errno,
    pub hint: &'static str,
    /// What else was tried and failed, for the message.
    pub detail: String,
}

fn err(step: &'static str) -> impl Fn(Errno) -> ExeError {
    move |errno| ExeError {
        step,
        errno,
        hint: "",
        detail: String::new(),
    }
}

/// Whether `fd` is a memfd carrying all of [`SEALS`].
pub fn is_sealed(fd: &OwnedFd) -> bool {
    fcntl(fd, FcntlArg::F_GET_SEALS).is_ok_and(|s| SealFlag::from_bits_truncate(s).contains(SEALS))
}

/// Whether `fd` is a file of a read-only overlayfs mount: what [`overlay_view`] makes.
/// (Any read-only mount refuses to open its files for writing; cordon's own overlay has
/// no upper layer, so it cannot even be remounted read-write.)
pub fn is_read_only_overlay(fd: impl AsFd + Copy) -> bool {
    use nix::sys::{statfs, statvfs};
    statfs::fstatfs(fd).is_ok_and(|s| s.filesystem_type() == statfs::OVERLAYFS_SUPER_MAGIC)
        && statvfs::fstatvfs(fd).is_ok_and(|s| s.flags().contains(statvfs::FsFlags::ST_RDONLY))
}

/// Whether `fd` is on a mount attached nowhere in this process's mount namespace (its
/// `mnt_id` in `/proc/self/fdinfo` is not listed in `/proc/self/mountinfo`), as the mount
/// [`overlay_view`] makes is. False when either file cannot be read or parsed.
///
/// A read-only overlay that is attached somewhere may have an upper layer and be remounted
/// read-write later (`mount -o remount,rw`, or a read-only bind of a writable overlay made
/// writable): a container process that kept a descriptor of the binary from
/// `/proc/PID/exe` could then reopen it for writing. cordon-oci's own view cannot be
/// remounted, and no path leads to it, so no one can remount it either.
pub fn is_detached(fd: impl AsFd) -> bool {
    let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_fd().as_raw_fd()))
    else {
        return false;
    };
    let Some(id) = info
        .lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
    else {
        return false;
    };
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let Ok(mounts) = crate::limits::MountInfo::parse(&mounts) else {
        return false;
    };
    !mounts.iter().any(|m| m.mount_id == id)
}

/// Whether this process runs from a copy nobody can write: a sealed memfd, or a read-only
/// overlay attached nowhere (what [`overlay_view`] makes).
pub fn running_sealed() -> Result<bool, ExeError> {
    let me = open_self_exe()?;
    Ok(is_sealed(&me) || (is_read_only_overlay(&me) && is_detached(&me)))
}

fn open_self_exe() -> Result<OwnedFd, ExeError> {
    nix::fcntl::open(
        "/proc/self/exe",
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(err("open /proc/self/exe (is /proc mounted?)"))
}

/// `\` and `:` escaped, for one path in an overlay `lowerdir` list.
fn escape_layer(p: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in p.as_os_str().as_bytes() {
        if b == b'\\' || b == b':' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// This process's executable seen through a new read-only overlayfs (layers: the
/// binary's directory over `empty_dir`, no upper layer) that is mounted nowhere: an
/// `O_PATH` descriptor to execute. Needs the right to mount (root, or a user namespace
/// that owns our mount namespace, Linux 5.11+).
pub fn overlay_view(empty_dir: &Path) -> Result<OwnedFd, ExeError> {
    let exe = std::fs::read_link("/proc/self/exe").map_err(|e| ExeError {
        step: "read /proc/self/exe",
        errno: Errno::from_raw(e.raw_os_error().unwrap_or(0)),
        hint: "",
        detail: String::new(),
    })?;
    let (Some(dir), Some(name)) = (exe.parent(), exe.file_name()) else {
        return Err(err("find the directory of /proc/self/exe")(Errno::EINVAL));
    };
    let mut lower = escape_layer(dir);
    lower.push(b':');
    lower.extend(escape_layer(empty_dir));
    let lower = CString::new(lower).map_err(|_| err("name the overlay layers")(Errno::EINVAL))?;
    let root = crate::sys::overlay_lower_only(&lower).map_err(|(step, errno)| ExeError {
        step,
        errno,
        hint: "",
        detail: String::new(),
    })?;
    let fd = nix::fcntl::openat(
        &root,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(err("open cordon-oci on its overlay"))?;
    // The same file as the one running: a regular file of the same size (not, say, a
    // name that vanished from the binary's directory in the meantime).
    let here = nix::sys::stat::fstat(&fd).map_err(err("stat cordon-oci on its overlay"))?;
    let orig = nix::sys::stat::stat("/proc/self/exe").map_err(err("stat /proc/self/exe"))?;
    if here.st_mode & libc::S_IFMT != libc::S_IFREG || here.st_size != orig.st_size {
        return Err(err("find cordon-oci on its overlay (it changed)")(
            Errno::ESTALE,
        ));
    }
    Ok(fd)
}

/// A sealed memfd copy of this process's executable.
pub fn sealed_copy() -> Result<OwnedFd, ExeError> {
    let mut src = std::fs::File::open("/proc/self/exe")
        .map_err(|e| err("open /proc/self/exe")(Errno::from_raw(e.raw_os_error().unwrap_or(0))))?;
    // MFD_EXEC (Linux 6.3+): executable even where vm.memfd_noexec makes memfds noexec by
    // default; older kernels refuse the flag, and their memfds are executable anyway.
    let flags = MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING;
    let fd = match memfd_create(
        "cordon-oci",
        flags | MFdFlags::from_bits_retain(libc::MFD_EXEC),
    ) {
        Err(Errno::EINVAL) => memfd_create("cordon-oci", flags),
        r => r,
    }
    .map_err(err("create a memfd for the sealed copy of cordon-oci"))?;
    let mut dst = std::fs::File::from(fd);
    std::io::copy(&mut src, &mut dst).map_err(|e| {
        err("copy cordon-oci into a memfd")(Errno::from_raw(e.raw_os_error().unwrap_or(0)))
    })?;
    let fd = OwnedFd::from(dst);
    fcntl(&fd, FcntlArg::F_ADD_SEALS(SEALS)).map_err(err("seal the copy of cordon-oci"))?;
    Ok(fd)
}

/// Re-executes this process from a copy nobody can write unless it already runs from one:
/// its read-only overlay view when that can be made (`empty_dir`: an empty directory for
/// the overlay's bottom layer), else a sealed memfd copy. Returns only when it already did
/// (or with the error: security code fails closed).
pub fn run_from_sealed_copy(empty_dir: Option<&Path>) -> Result<(), ExeError> {
    if running_sealed()? {
        return Ok(());
    }
    // Already on a read-only overlay, yet not accepted above: it may be our own view whose
    // detachment could not be checked. Another overlay view would not be accepted either
    // (an endless re-exec); the sealed memfd always is.
    let on_overlay = is_read_only_overlay(&open_self_exe()?);
    let args: Vec<CString> = std::env::args_os()
        .filter_map(|a| CString::new(a.as_bytes()).ok())
        .collect();
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    // Both copies are unwritable; the overlay only spares copying the binary. Should it
    // fail to be made or executed, the memfd is still tried.
    let overlay_failed = match empty_dir.filter(|_| !on_overlay).map(overlay_view) {
        Some(Ok(fd)) => {
            let Err(errno) = nix::unistd::fexecve(&fd, &args, &env);
            format!("; executing its read-only overlay view failed too: {errno}")
        }
        Some(Err(e)) => format!("; its read-only overlay view could not be made either: {e}"),
        None => String::new(),
    };
    let fd = sealed_copy().map_err(|e| ExeError {
        detail: overlay_failed.clone(),
        ..e
    })?;
    let Err(errno) = nix::unistd::fexecve(&fd, &args, &env);
    Err(ExeError {
        step: "re-execute cordon-oci from its sealed memfd copy (fexecve)",
        errno,
        hint: if errno == Errno::EACCES {
            " (is vm.memfd_noexec set to 2? cordon-oci needs to execute a memfd)"
        } else {
            ""
        },
        detail: overlay_failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_sealed_and_refuses_writes() {
        let fd = sealed_copy().unwrap();
        assert!(is_sealed(&fd));
        let orig = std::fs::metadata("/proc/self/exe").unwrap().len();
        let mut f = std::fs::File::from(fd);
        assert_eq!(f.metadata().unwrap().len(), orig);
        use std::io::Write;
        let e = f.write(b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
        assert!(f.set_len(1).is_err());
    }

    #[test]
    fn the_overlay_view_is_read_only_and_the_same_binary() {
        let empty = tempfile::tempdir().unwrap();
        let fd = match overlay_view(empty.path()) {
            Ok(fd) => fd,
            Err(e) if matches!(e.errno, Errno::EPERM | Errno::ENODEV | Errno::ENOSYS) => {
                eprintln!("SKIP: this process may not mount an overlayfs here: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        // Opened for reading through the O_PATH descriptor: the running binary's bytes,
        // on a read-only overlay that refuses writers.
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
        let f = std::fs::File::open(&path).unwrap();
        assert!(is_read_only_overlay(&f));
        assert!(is_detached(&f), "the view is attached nowhere");
        assert!(!is_sealed(&OwnedFd::from(f)));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            std::fs::read("/proc/self/exe").unwrap()
        );
        let e = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    }

    #[test]
    fn layer_names_are_escaped() {
        assert_eq!(escape_layer(Path::new("/a:b\\c")), b"/a\\:b\\\\c".to_vec());
    }

    #[test]
    fn a_plain_binary_is_not_sealed() {
        assert!(!running_sealed().unwrap());
        assert!(!is_detached(open_self_exe().unwrap()));
    }

    /// The half of the test below that runs (as its own re-run, in a new mount namespace)
    /// where `CORDON_TEST_RO_OVERLAY_FILE` is a file on an attached read-only overlay.
    fn attached_overlay_checks(path: &str) {
        let f = std::fs::File::open(path).unwrap();
        assert!(
            is_read_only_overlay(&f),
            "the file is on a read-only overlay"
        );
        assert!(
            !is_detached(&f),
            "an attached overlay was taken for a detached one"
        );
        println!("ATTACHED-OVERLAY-CHECKED");
    }

    #[test]
    fn a_read_only_overlay_attached_somewhere_is_not_taken_for_the_view() {
        if let Ok(path) = std::env::var("CORDON_TEST_RO_OVERLAY_FILE") {
            return attached_overlay_checks(&path);
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_str().unwrap();
        let me = std::env::current_exe().unwrap();
        let script = format!(
            "mkdir {dir}/l {dir}/e {dir}/m && echo x > {dir}/l/f && \
             mount -t overlay -o ro,lowerdir={dir}/l:{dir}/e none {dir}/m || exit 77; \
             exec \"$0\" --exact oci::exe::tests::a_read_only_overlay_attached_somewhere_is_not_taken_for_the_view --nocapture"
        );
        let out = match std::process::Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
            .arg(&me)
            .env("CORDON_TEST_RO_OVERLAY_FILE", format!("{dir}/m/f"))
            .output()
        {
            Ok(o) => o,
            Err(e) => {
                eprintln!("SKIP: cannot run unshare: {e}");
                return;
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        // 77: the script could not mount the overlay (no overlayfs, or not allowed here).
        if out.status.code() == Some(77) {
            eprintln!(
                "SKIP: cannot mount an overlay in a new mount namespace: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        assert!(
            out.status.success() && stdout.contains("ATTACHED-OVERLAY-CHECKED"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

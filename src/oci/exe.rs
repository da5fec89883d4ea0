//! CVE-2019-5736: a container process must never reach the host's cordon-oci binary.
//!
//! cordon-oci's own processes enter the container (the init until `start` execs the
//! program, the `exec` process until its execve), and a container program can even be a
//! script starting with `#!/proc/self/exe`, which makes the kernel run the runtime's own
//! executable inside the container. Through `/proc/PID/exe` of such a process a container
//! root could open the binary and, once no cordon-oci runs, rewrite it: code execution as
//! root on the host at the next `cordon-oci` call.
//!
//! So `create`, `run` and `exec` first re-execute from a memfd copy of the binary, sealed
//! against writes, growth and shrinking: every `/proc/PID/exe` of the runtime then points
//! at that copy, which nobody can change, and which vanishes with the processes using it.

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};
use nix::sys::stat::Mode;
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;

/// The seals of the copy cordon-oci runs from.
pub const SEALS: SealFlag = SealFlag::F_SEAL_SEAL
    .union(SealFlag::F_SEAL_SHRINK)
    .union(SealFlag::F_SEAL_GROW)
    .union(SealFlag::F_SEAL_WRITE);

#[derive(Debug, thiserror::Error)]
#[error("cannot {step}: {errno}{hint}")]
pub struct ExeError {
    pub step: &'static str,
    pub errno: Errno,
    pub hint: &'static str,
}

fn err(step: &'static str) -> impl Fn(Errno) -> ExeError {
    move |errno| ExeError {
        step,
        errno,
        hint: "",
    }
}

/// Whether `fd` is a memfd carrying all of [`SEALS`].
pub fn is_sealed(fd: &OwnedFd) -> bool {
    fcntl(fd, FcntlArg::F_GET_SEALS).is_ok_and(|s| SealFlag::from_bits_truncate(s).contains(SEALS))
}

/// Whether this process runs from a sealed copy.
pub fn running_sealed() -> Result<bool, ExeError> {
    let me = nix::fcntl::open(
        "/proc/self/exe",
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(err("open /proc/self/exe (is /proc mounted?)"))?;
    Ok(is_sealed(&me))
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

/// Re-executes this process from a sealed copy unless it already runs from one. Returns
/// only when it already did (or with the error: security code fails closed).
pub fn run_from_sealed_copy() -> Result<(), ExeError> {
    if running_sealed()? {
        return Ok(());
    }
    let fd = sealed_copy()?;
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
    let Err(errno) = nix::unistd::fexecve(&fd, &args, &env);
    Err(ExeError {
        step: "re-execute cordon-oci from its sealed copy (fexecve)",
        errno,
        hint: if errno == Errno::EACCES {
            " (is vm.memfd_noexec set to 2? cordon-oci needs to execute a memfd)"
        } else {
            ""
        },
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
    fn a_plain_binary_is_not_sealed() {
        assert!(!running_sealed().unwrap());
    }
}

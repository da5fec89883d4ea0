//! The loopback interface of the sandbox's new network namespace.
//!
//! The launcher's one `clone` makes the network namespace (unless `--net host`), owned by the
//! sandbox's new user namespace; its `lo` starts down. init, which holds `CAP_NET_ADMIN` in
//! that user namespace, brings it up before anything of the program's runs.

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
use std::os::fd::AsRawFd;

/// Brings the loopback interface of the caller's network namespace up. On failure: the step
/// and its errno, for init's report.
pub fn loopback_up() -> Result<(), (&'static str, Errno)> {
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| ("open a socket in the new network namespace", e))?;
    // SAFETY: an all-zero ifreq is a valid value (a C struct of integers and arrays).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    req.ifr_name[0] = b'l' as libc::c_char;
    req.ifr_name[1] = b'o' as libc::c_char;
    // SAFETY: SIOCGIFFLAGS writes the interface's flags into `req`, which outlives the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS as _, &raw mut req) } < 0 {
        return Err((
            "read the loopback interface's flags (SIOCGIFFLAGS)",
            Errno::last(),
        ));
    }
    // SAFETY: ifru_flags is the union member SIOCGIFFLAGS filled.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: SIOCSIFFLAGS reads `req`, which outlives the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS as _, &raw const req) } < 0 {
        return Err((
            "bring up the loopback interface (SIOCSIFFLAGS)",
            Errno::last(),
        ));
    }
    Ok(())
}

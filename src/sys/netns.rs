//! The loopback interface of the sandbox's new network namespace.
//!
//! The launcher's one `clone` makes the network namespace (unless `--net host`), owned by the
//! sandbox's new user namespace; its `lo` starts down. Bringing it up takes about 0.1 ms
//! (IPv4 and IPv6 add their loopback addresses and routes). By default init opens a socket
//! in the namespace as it starts ([`loopback_socket`]) and hands it to cordon, which brings
//! `lo` up through it ([`loopback_up`]) while init builds the root: the owner of a user
//! namespace holds every capability over the namespaces it owns, `CAP_NET_ADMIN` included,
//! from the parent namespace. Under `--net allow=` init brings it up itself, before it
//! binds the proxy's socket to 127.0.0.1.

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
use std::os::fd::{AsRawFd, OwnedFd};

/// A datagram socket in the caller's network namespace, through which [`loopback_up`] can
/// reach that namespace's `lo` from any process holding `CAP_NET_ADMIN` over it.
pub fn loopback_socket() -> Result<OwnedFd, Errno> {
    socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
}

/// Brings up the loopback interface of the network namespace `sock` was opened in. On
/// failure: the step and its errno.
pub fn loopback_up(sock: &OwnedFd) -> Result<(), (&'static str, Errno)> {
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

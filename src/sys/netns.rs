//! The loopback interface of a new network namespace.
//!
//! A new network namespace's `lo` starts down. Bringing it up takes about 0.1 ms (IPv4 and
//! IPv6 add their loopback addresses and routes). The helper that makes the sandbox's network
//! namespace (launch::netns) opens a socket there ([`loopback_socket`]) and brings `lo` up
//! through it ([`loopback_up`]) before it sends the namespace to init.

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
use std::os::fd::{AsRawFd, OwnedFd};

/// A datagram socket in the caller's network namespace, through which [`loopback_up`] reaches
/// that namespace's `lo`.
pub fn loopback_socket() -> Result<OwnedFd, Errno> {
    socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
}

/// Which of [`loopback_up`]'s two requests failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopbackStep {
    /// SIOCGIFFLAGS: reading the interface's flags.
    ReadFlags,
    /// SIOCSIFFLAGS: setting IFF_UP.
    SetFlags,
}

/// Brings up the loopback interface of the network namespace `sock` was opened in. On
/// failure: the request that failed and its errno.
pub fn loopback_up(sock: &OwnedFd) -> Result<(), (LoopbackStep, Errno)> {
    // SAFETY: an all-zero ifreq is a valid value (a C struct of integers and arrays).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    req.ifr_name[0] = b'l' as libc::c_char;
    req.ifr_name[1] = b'o' as libc::c_char;
    // SAFETY: SIOCGIFFLAGS writes the interface's flags into `req`, which outlives the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS as _, &raw mut req) } < 0 {
        return Err((LoopbackStep::ReadFlags, Errno::last()));
    }
    // SAFETY: ifru_flags is the union member SIOCGIFFLAGS filled.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: SIOCSIFFLAGS reads `req`, which outlives the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS as _, &raw const req) } < 0 {
        return Err((LoopbackStep::SetFlags, Errno::last()));
    }
    Ok(())
}

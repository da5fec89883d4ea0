//! The memory watch's seccomp listener (`SECCOMP_FILTER_FLAG_NEW_LISTENER`, the
//! `SECCOMP_IOCTL_NOTIF_*` calls).

use nix::errno::Errno;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Installs `prog` on the calling thread with a new listener, and returns the listener (the
/// kernel opens it close-on-exec). `no_new_privs` must be set.
pub fn seccomp_set_filter_listener(prog: &[seccompiler::sock_filter]) -> Result<OwnedFd, Errno> {
    let fd = super::seccomp_filter_call(
        prog,
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as libc::c_ulong,
    )?;
    // SAFETY: with NEW_LISTENER the kernel returns a new descriptor, which nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// One notification: the notification's id, the calling thread (in cordon's pid namespace),
/// the syscall number and its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification {
    pub id: u64,
    pub pid: u32,
    pub nr: i32,
    pub args: [u64; 6],
}

/// Receives one pending notification (`SECCOMP_IOCTL_NOTIF_RECV`). ENOENT: its caller died
/// meanwhile (or was interrupted by a signal) and the notification went away.
pub fn notif_recv(listener: BorrowedFd) -> Result<Notification, Errno> {
    // SAFETY: seccomp_notif is plain data; the kernel wants it zeroed.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `n` is a valid, writable seccomp_notif of the size the ioctl number encodes.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut n as *mut libc::seccomp_notif,
        )
    };
    if ret < 0 {
        return Err(Errno::last());
    }
    Ok(Notification {
        id: n.id,
        pid: n.pid,
        nr: n.data.nr,
        args: n.data.args,
    })
}

/// Lets the notified call go on as if no filter had stopped it
/// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). ENOENT: the caller is gone.
pub fn notif_continue(listener: BorrowedFd, id: u64) -> Result<(), Errno> {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: `resp` is a valid seccomp_notif_resp; the kernel only reads it.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &resp as *const libc::seccomp_notif_resp,
        )
    };
    if ret < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// Whether notification `id` is still pending (`SECCOMP_IOCTL_NOTIF_ID_VALID`): its caller
/// still waits in the call, so the pid it named is still that caller's (checked after
/// reading anything of it through /proc). ENOENT: it is gone.
pub fn notif_id_valid(listener: BorrowedFd, id: u64) -> Result<(), Errno> {
    // SAFETY: the ioctl reads one u64 (the id) through the pointer, which is valid for it.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id as *const u64,
        )
    };
    if ret < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// include/uapi/linux/seccomp.h `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6).
const SYNC_WAKE_UP: u64 = 1;

/// Asks the kernel to switch between the notifying thread and the thread reading `listener`
/// on one CPU (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`): a notification and its answer then cost
/// no cross-CPU wake-up. EINVAL before Linux 6.6.
pub fn notif_sync_wake_up(listener: BorrowedFd) -> Result<(), Errno> {
    let flags: u64 = SYNC_WAKE_UP;
    // SAFETY: the ioctl takes the flags by value (an integer argument), reading no memory.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            flags,
        )
    };
    if ret < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// Sends `byte` and the descriptor `fd` (SCM_RIGHTS) on the unix socket `sock`, allocating
/// nothing: the payload sends the memory watch's listener with it right after installing the
/// filter, and nothing it runs before that send may depend on the listener being read.
pub fn send_fd_no_alloc(sock: RawFd, byte: u8, fd: RawFd) -> Result<(), Errno> {
    // SAFETY: sendmsg reads the message, which outlives the call.
    let sent = with_fd_message(byte, fd, |msg| unsafe {
        libc::sendmsg(sock, msg, libc::MSG_NOSIGNAL)
    });
    if sent < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// Builds on the stack, allocating nothing and touching no `errno`, a message of the one
/// byte `byte` carrying the descriptor `fd` (SCM_RIGHTS), and hands it to `send`.
pub(super) fn with_fd_message<R>(byte: u8, fd: RawFd, send: impl FnOnce(&libc::msghdr) -> R) -> R {
    /// `CMSG_SPACE(sizeof(int))` on x86_64 (16-byte header, 4-byte int, 8-byte alignment).
    #[repr(C, align(8))]
    struct Space([u8; 24]);
    let mut space = Space([0; 24]);
    let mut data = [byte];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr() as *mut libc::c_void,
        iov_len: 1,
    };
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.0.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space.0.len() as _;
    // SAFETY: msg_control points to `space`, large and aligned enough for one cmsghdr carrying
    // one int (CMSG_SPACE(4) = 24), so CMSG_FIRSTHDR is non-null and CMSG_DATA is in bounds
    // (these libc functions are pointer arithmetic: no errno, no allocation).
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut RawFd, fd);
    }
    // `msg` points to `iov`, `data` and `space`, all of which outlive the call.
    send(&msg)
}

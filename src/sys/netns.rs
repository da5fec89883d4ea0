//! The loopback interface of a new network namespace.
//!
//! A new network namespace's `lo` starts down. Bringing it up takes about 0.1 ms (IPv4 and
//! IPv6 add their loopback addresses and routes). An OCI container's init opens a socket in
//! its namespace ([`loopback_socket`]) and brings `lo` up through it ([`loopback_up`]); the
//! helper that makes `cordon exec`'s network namespace (launch::netns) does the same with
//! direct system calls ([`start_netns_helper`]), since it shares cordon's memory.

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
use nix::unistd::Pid;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

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

/// The steps of the network namespace's helper ([`start_netns_helper`]), numbered as it
/// reports a failure to init: the message is `[0, step, errno as i32 little-endian]` (six
/// bytes); a success is the byte 1 with the namespace's descriptor (SCM_RIGHTS), as
/// `launch::channel::send_fds` sends one descriptor.
pub mod helper_step {
    /// The first byte of a failure message (a success's is the number of descriptors, 1).
    pub const FAILED: u8 = 0;
    /// setns into the sandbox's user namespace.
    pub const JOIN: u8 = 0;
    /// unshare(CLONE_NEWNET).
    pub const CREATE: u8 = 1;
    /// A socket in the new namespace, to reach `lo`.
    pub const SOCKET: u8 = 2;
    /// SIOCGIFFLAGS on `lo`.
    pub const LO_FLAGS: u8 = 3;
    /// SIOCSIFFLAGS on `lo` (IFF_UP).
    pub const LO_UP: u8 = 4;
    /// Opening /proc/thread-self/ns/net.
    pub const OPEN: u8 = 5;
}

/// What the helper reads: set before it starts, not written by anyone while it runs.
#[repr(C)]
struct Job {
    userns: RawFd,
    to_init: RawFd,
}

/// The helper's stack: it needs a few hundred bytes (no allocation, no formatting).
const HELPER_STACK: usize = 64 << 10;

/// The network namespace's helper, started by [`start_netns_helper`]: its pid, and the memory
/// it runs on, which is freed only once it has been reaped ([`NetnsHelper::try_reap`]). A
/// helper never reaped (stuck in the kernel when cordon gave up waiting) keeps that memory
/// to the end of cordon: dropping the handle leaks it on purpose.
pub struct NetnsHelper {
    pid: Pid,
    job: *mut Job,
    stack: *mut libc::c_void,
}

impl NetnsHelper {
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Reaps the helper if it has exited (without waiting) and frees what it ran on;
    /// gives the handle back if it has not.
    pub fn try_reap(self) -> Result<(), NetnsHelper> {
        use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
        match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
            // Reaped now, or ECHILD: reaped already, which only happens after its exit
            // (the kernel's own reaping, where cordon's caller left SIGCHLD ignored). Either
            // way the helper runs no more. Anything else proves nothing: it keeps its memory.
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD) => {
                // SAFETY: the helper has exited, so nothing runs on its stack or reads its
                // job any more; both were allocated by start_netns_helper and are freed once,
                // here, since `self` is consumed.
                unsafe {
                    drop(Box::from_raw(self.job));
                    libc::munmap(self.stack, HELPER_STACK);
                }
                Ok(())
            }
            _ => Err(self),
        }
    }
}

/// Starts the helper that makes the sandbox's network namespace (launch::netns): it joins
/// `userns` (the sandbox's user namespace), makes a network namespace there, brings `lo` up
/// and sends the namespace on `to_init`, or the step that failed and its errno
/// ([`helper_step`]), then exits. It runs beside cordon, on cordon's memory
/// (`CLONE_VM`): unlike a fork, no page table is copied, no copy-on-write fault follows on
/// either side, and its exit frees no address space. Its own descriptor table (a copy),
/// signal dispositions and credentials.
///
/// Sharing memory with a cordon that keeps running, the helper may touch nothing cordon
/// uses: it allocates nothing, reads only its [`Job`], writes only its own stack, and makes
/// its system calls directly, not through libc, whose `errno` is thread-local storage
/// shared with cordon's thread. No panic can be reached with the descriptor numbers and
/// results the kernel gives it (its arithmetic wraps; a release build compiles it to system
/// calls alone, with no call instruction).
pub fn start_netns_helper(
    userns: std::os::fd::BorrowedFd<'_>,
    to_init: std::os::fd::BorrowedFd<'_>,
) -> Result<NetnsHelper, Errno> {
    let stack = super::guarded_stack(HELPER_STACK)?;
    let job = Box::into_raw(Box::new(Job {
        userns: userns.as_raw_fd(),
        to_init: to_init.as_raw_fd(),
    }));
    // SAFETY: the stack is a fresh mapping of HELPER_STACK bytes (its top is passed: x86_64
    // stacks grow down; page-aligned, so 16-byte aligned); `helper_main` is an extern "C" fn
    // that reads `*job` and touches no other memory of cordon's (see above); `job` and the
    // stack stay allocated until the helper is reaped (NetnsHelper::try_reap) or forever.
    let ret = unsafe {
        libc::clone(
            helper_main,
            (stack as *mut u8).add(HELPER_STACK) as *mut libc::c_void,
            libc::CLONE_VM | libc::SIGCHLD,
            job as *mut libc::c_void,
        )
    };
    if ret == -1 {
        let err = Errno::last();
        // SAFETY: no helper was started: nothing uses the job or the stack.
        unsafe {
            drop(Box::from_raw(job));
            libc::munmap(stack, HELPER_STACK);
        }
        return Err(err);
    }
    Ok(NetnsHelper {
        pid: Pid::from_raw(ret),
        job,
        stack,
    })
}

/// A system call made directly (no libc wrapper, no `errno`): the result, or `-errno`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn raw_syscall(nr: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller passes arguments valid for `nr`; the syscall instruction clobbers
    // rcx and r11 only (declared), and touches no stack of ours.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// Elsewhere cordon's launcher refuses to start (its seccomp filter is x86_64's:
/// security::seccomp::check_arch) before any helper runs.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn raw_syscall(_nr: libc::c_long, _a: [usize; 6]) -> isize {
    -(libc::ENOSYS as isize)
}

/// The helper's life (see [`start_netns_helper`]); its return value is its exit code: 0
/// when init was sent the namespace or the failure, 1 when nothing could be sent.
extern "C" fn helper_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the Job start_netns_helper allocated, which outlives this process.
    let job = unsafe { &*(arg as *const Job) };
    // Nothing of cordon's but the two descriptors, not even its stdio: were cordon killed
    // meanwhile, the helper must not hold the ends of cordon's pipes (init notices cordon's
    // death by their end-of-file, cordon's caller its end by its output's).
    let (lo, hi) = if job.userns < job.to_init {
        (job.userns, job.to_init)
    } else {
        (job.to_init, job.userns)
    };
    let ranges = [
        (0, lo.wrapping_sub(1)),
        (lo.wrapping_add(1), hi.wrapping_sub(1)),
        (hi.wrapping_add(1), i32::MAX),
    ];
    for (first, last) in ranges {
        if first <= last {
            // SAFETY: close_range only closes descriptors of this process's own table.
            let r = unsafe {
                raw_syscall(
                    libc::SYS_close_range,
                    [first as usize, last as usize, 0, 0, 0, 0],
                )
            };
            if r < 0 {
                return 1;
            }
        }
    }
    let sent = match make_netns(job.userns) {
        Ok(ns) => send_fd(job.to_init, ns),
        Err((step, errno)) => {
            let e = (errno as i32).to_le_bytes();
            let msg = [helper_step::FAILED, step, e[0], e[1], e[2], e[3]];
            // SAFETY: sendto reads the six bytes of `msg`, which outlives the call.
            unsafe {
                raw_syscall(
                    libc::SYS_sendto,
                    [
                        job.to_init as usize,
                        msg.as_ptr() as usize,
                        msg.len(),
                        libc::MSG_NOSIGNAL as usize,
                        0,
                        0,
                    ],
                )
            }
        }
    };
    libc::c_int::from(sent < 0)
}

/// The helper's work: the new network namespace, `lo` up, and a descriptor of the
/// namespace. On failure: the step ([`helper_step`]) and the errno (positive).
fn make_netns(userns: RawFd) -> Result<RawFd, (u8, isize)> {
    let check = |step: u8, r: isize| {
        if r < 0 {
            Err((step, r.wrapping_neg()))
        } else {
            Ok(r)
        }
    };
    // SAFETY (each call below): the arguments are descriptors and plain integers, or
    // pointers to locals of this frame that outlive the call.
    check(helper_step::JOIN, unsafe {
        raw_syscall(
            libc::SYS_setns,
            [userns as usize, libc::CLONE_NEWUSER as usize, 0, 0, 0, 0],
        )
    })?;
    check(helper_step::CREATE, unsafe {
        raw_syscall(
            libc::SYS_unshare,
            [libc::CLONE_NEWNET as usize, 0, 0, 0, 0, 0],
        )
    })?;
    let sock = check(helper_step::SOCKET, unsafe {
        raw_syscall(
            libc::SYS_socket,
            [
                libc::AF_INET as usize,
                (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as usize,
                0,
                0,
                0,
                0,
            ],
        )
    })?;
    // SAFETY: an all-zero ifreq is a valid value (a C struct of integers and arrays).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    req.ifr_name[0] = b'l' as libc::c_char;
    req.ifr_name[1] = b'o' as libc::c_char;
    // SAFETY: both requests read or write one ifreq, `req`, which outlives the calls.
    let ioctl = |request: libc::c_ulong, req: *mut libc::ifreq| unsafe {
        raw_syscall(
            libc::SYS_ioctl,
            [sock as usize, request as usize, req as usize, 0, 0, 0],
        )
    };
    check(
        helper_step::LO_FLAGS,
        ioctl(libc::SIOCGIFFLAGS, &raw mut req),
    )?;
    // SAFETY: ifru_flags is the union member SIOCGIFFLAGS filled.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    check(helper_step::LO_UP, ioctl(libc::SIOCSIFFLAGS, &raw mut req))?;
    let path = c"/proc/thread-self/ns/net";
    let ns = check(helper_step::OPEN, unsafe {
        raw_syscall(
            libc::SYS_openat,
            [
                libc::AT_FDCWD as usize,
                path.as_ptr() as usize,
                (libc::O_RDONLY | libc::O_CLOEXEC) as usize,
                0,
                0,
                0,
            ],
        )
    })?;
    Ok(ns as RawFd)
}

/// Sends the byte 1 and `fd` (SCM_RIGHTS) on `sock`, as `launch::channel::send_fds` sends
/// one descriptor; the result of sendmsg (or `-errno`).
fn send_fd(sock: RawFd, fd: RawFd) -> isize {
    super::notify::with_fd_message(1, fd, |msg| {
        // SAFETY: sendmsg reads the message, which outlives the call.
        unsafe {
            raw_syscall(
                libc::SYS_sendmsg,
                [
                    sock as usize,
                    msg as *const libc::msghdr as usize,
                    libc::MSG_NOSIGNAL as usize,
                    0,
                    0,
                    0,
                ],
            )
        }
    })
}

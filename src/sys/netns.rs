//! The sandbox's network namespace, made beside init instead of by the launcher's `clone`.
//!
//! A new network namespace is the most expensive namespace to create (the kernel registers
//! its sysctl tables, the loopback device and every protocol's per-namespace state: about
//! half a millisecond here), and bringing `lo` up costs more. Made by the launcher's one
//! `clone`, both sit on the start-up's critical path, one CPU, while the other CPU idles.
//! Instead, init starts a small helper process on the second CPU that makes the namespace
//! (owned by the sandbox's user namespace, as it would be from the clone), brings `lo` up and
//! leaves a descriptor of it in init's descriptor table; init builds the root meanwhile, then
//! waits for the helper and enters the namespace with `setns` before anything of the
//! program's runs.
//!
//! The helper shares init's memory and descriptor table (`CLONE_VM | CLONE_FILES`, no copy of
//! either) and runs at the same time as init, like a thread that Rust and libc do not know
//! about: it must touch nothing of theirs. It therefore runs only raw `syscall` instructions
//! (no libc wrapper: those write `errno`, which lives in the thread-local storage it shares
//! with init), allocates nothing, cannot panic, and reports through a slot of atomics that
//! init reads only after reaping it.

use nix::errno::Errno;
use nix::unistd::Pid;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// What the helper reports: the namespace's fd, or the step that failed and its errno.
#[repr(C)]
struct Slot {
    fd: AtomicI32,
    step: AtomicI32,
    errno: AtomicI32,
}

impl Slot {
    fn boxed() -> Box<Slot> {
        Box::new(Slot {
            fd: AtomicI32::new(-1),
            step: AtomicI32::new(0),
            errno: AtomicI32::new(0),
        })
    }
}

/// The helper's first step, the only one where the kernel refuses the namespace itself
/// (`user.max_net_namespaces`, an LSM, a seccomp filter): for init's hint.
pub const CREATE_STEP: &str = "create the network namespace (unshare CLONE_NEWNET)";

const STEPS: [&str; 6] = [
    "",
    CREATE_STEP,
    "open a socket in the new network namespace",
    "read the loopback interface's flags (SIOCGIFFLAGS)",
    "bring up the loopback interface (SIOCSIFFLAGS)",
    "open the new network namespace (SIOCGSKNS)",
];

const STACK: usize = 64 << 10;

/// The running helper; [`NetnsMaker::join`] waits for it and enters the namespace.
pub struct NetnsMaker {
    pid: Option<Pid>,
    stack: *mut libc::c_void,
    slot: Box<Slot>,
}

/// One raw system call, returning the kernel's value (negative errno on failure) without
/// touching `errno`.
///
/// # Safety
/// As for the system call `n` with these arguments.
#[inline(always)]
unsafe fn raw(n: libc::c_long, a0: usize, a1: usize, a2: usize) -> isize {
    let ret: isize;
    // SAFETY: the x86_64 Linux system call convention: number in rax, arguments in rdi, rsi,
    // rdx; the kernel clobbers rcx and r11 and returns in rax. No stack is used. What the
    // call does with its arguments is the caller's obligation (see the function's contract).
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") n as isize => ret,
            in("rdi") a0,
            in("rsi") a1,
            in("rdx") a2,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// The helper's whole life (see the module doc: raw system calls only).
extern "C" fn helper(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Slot` that NetnsMaker owns in a Box; it is freed only after the
    // helper has been reaped (join, or Drop, which kills and reaps it first).
    let slot = unsafe { &*(arg as *const Slot) };
    let fail = |step: i32, ret: isize| {
        slot.errno.store((-ret) as i32, Ordering::Release);
        slot.step.store(step, Ordering::Release);
        1
    };
    // SAFETY: unshare takes a flag word; no memory.
    let ret = unsafe { raw(libc::SYS_unshare, libc::CLONE_NEWNET as usize, 0, 0) };
    if ret < 0 {
        return fail(1, ret);
    }
    // SAFETY: socket takes integers only.
    let sock = unsafe {
        raw(
            libc::SYS_socket,
            libc::AF_INET as usize,
            (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as usize,
            0,
        )
    };
    if sock < 0 {
        return fail(2, sock);
    }
    // SAFETY: an all-zero ifreq is a valid value (a C struct of integers and arrays).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    req.ifr_name[0] = b'l' as libc::c_char;
    req.ifr_name[1] = b'o' as libc::c_char;
    // SAFETY: SIOCGIFFLAGS writes the flags into `req`, which lives on this stack for the call.
    let ret = unsafe {
        raw(
            libc::SYS_ioctl,
            sock as usize,
            libc::SIOCGIFFLAGS as usize,
            &raw mut req as usize,
        )
    };
    if ret < 0 {
        return fail(3, ret);
    }
    // SAFETY: ifru_flags is the union member SIOCGIFFLAGS filled.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: SIOCSIFFLAGS reads `req`, alive for the call.
    let ret = unsafe {
        raw(
            libc::SYS_ioctl,
            sock as usize,
            libc::SIOCSIFFLAGS as usize,
            &raw const req as usize,
        )
    };
    if ret < 0 {
        return fail(4, ret);
    }
    // SIOCGSKNS: a new close-on-exec descriptor of the socket's network namespace.
    // SAFETY: takes no memory argument.
    let ns = unsafe { raw(libc::SYS_ioctl, sock as usize, libc::SIOCGSKNS as usize, 0) };
    // SAFETY: closes the socket this helper opened; init does not know its number.
    unsafe { raw(libc::SYS_close, sock as usize, 0, 0) };
    if ns < 0 {
        return fail(5, ns);
    }
    slot.fd.store(ns as i32, Ordering::Release);
    0
}

impl NetnsMaker {
    /// Starts the helper. The caller must be single-threaded, must hold
    /// `CAP_SYS_ADMIN` and `CAP_NET_ADMIN` in its user namespace (init does), and must not
    /// close descriptors it does not own until [`join`](Self::join): the helper's socket and
    /// namespace fd appear in the shared table.
    pub fn spawn() -> Result<NetnsMaker, Errno> {
        let stack = super::guarded_stack(STACK)?;
        let mut maker = NetnsMaker {
            pid: None,
            stack,
            slot: Slot::boxed(),
        };
        let slot = &*maker.slot as *const Slot as *mut libc::c_void;
        // SAFETY: the helper runs `helper` on the top of our mapping (page-aligned, so 16-byte
        // aligned; stacks grow down) with the boxed slot, both kept until it is reaped (join or
        // Drop). It shares memory and descriptors but touches only its stack, the slot and raw
        // system calls (module doc); SIGCHLD makes it an ordinary child to wait for.
        let pid = unsafe {
            libc::clone(
                helper,
                (stack as *mut u8).add(STACK) as *mut libc::c_void,
                libc::CLONE_VM | libc::CLONE_FILES | libc::SIGCHLD,
                slot,
            )
        };
        if pid == -1 {
            return Err(Errno::last());
        }
        maker.pid = Some(Pid::from_raw(pid));
        Ok(maker)
    }

    /// Waits for the helper, then moves the calling process into the namespace it made.
    /// On failure: the step and errno, for init's report.
    pub fn join(mut self) -> Result<(), (&'static str, Errno)> {
        let Some(pid) = self.pid else {
            return Err(("create the network namespace (no helper)", Errno::ECHILD));
        };
        loop {
            match nix::sys::wait::waitpid(pid, None) {
                Err(Errno::EINTR) => continue,
                // Not reaped: Drop kills and reaps it before its stack goes.
                Err(e) => return Err(("wait for the network namespace helper", e)),
                Ok(_) => break,
            }
        }
        self.pid = None;
        let step = self.slot.step.load(Ordering::Acquire);
        if step != 0 {
            let errno = Errno::from_raw(self.slot.errno.load(Ordering::Acquire));
            return Err((STEPS.get(step as usize).copied().unwrap_or("?"), errno));
        }
        let fd = self.slot.fd.load(Ordering::Acquire);
        if fd < 0 {
            return Err((
                "create the network namespace: its helper process died before reporting (killed by a signal, or by a seccomp or security-module policy on this host); run `cordon doctor`, which checks that a sandbox can start",
                Errno::EIO,
            ));
        }
        // SAFETY: the helper opened `fd` in the table we share and handed it to us; nothing
        // else owns it.
        let ns = unsafe { OwnedFd::from_raw_fd(fd) };
        nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|e| ("enter the new network namespace (setns)", e))
    }
}

impl Drop for NetnsMaker {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            // Not joined (init failed first): the helper may still run on the stack below.
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            loop {
                match nix::sys::wait::waitpid(pid, None) {
                    Err(Errno::EINTR) => continue,
                    // Reaped (here, or already: ECHILD): nothing runs on the stack any more.
                    Ok(_) | Err(Errno::ECHILD) => break,
                    // Not known to be gone: its stack and slot stay (a leak, never a
                    // use-after-free of memory it may still write).
                    Err(_) => {
                        std::mem::forget(std::mem::replace(&mut self.slot, Slot::boxed()));
                        return;
                    }
                }
            }
        }
        // SAFETY: the helper is reaped (or was never started): nothing runs on the stack.
        unsafe { libc::munmap(self.stack, STACK) };
    }
}

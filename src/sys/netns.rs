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
//! The helper shares init's descriptor table (`CLONE_FILES`: the namespace's fd lands in
//! init's table) but not its memory: it gets a copy-on-write copy, as a fork would. Sharing
//! init's memory (`CLONE_VM`) would be cheaper to start but costs more than it saves: every
//! page init then writes for the first time after the launcher's clone (a copy-on-write fault)
//! must be flushed from the TLB of the other CPU, where the helper runs on the same memory,
//! with an interprocessor interrupt — about 0.3 ms of init's time per run, measured. The
//! helper's own code runs only raw `syscall` instructions (no libc wrapper), allocates
//! nothing and cannot panic (musl's `clone` wrapper resets its own state in the child first,
//! as `fork` does, on the helper's copy), and reports through a slot of atomics at the top of
//! its stack mapping, which is `MAP_SHARED` so that init sees what the helper wrote there;
//! init reads it only after reaping it.

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

/// The helper's mapping: a guard page, its stack, and the page of the [`Slot`] at the top.
const STACK: usize = 64 << 10;
const SLOT_PAGE: usize = 4096;

/// The running helper; [`NetnsMaker::join`] waits for it and enters the namespace.
pub struct NetnsMaker {
    pid: Option<Pid>,
    /// The shared mapping: guard page, the helper's stack, then the slot's page.
    stack: *mut libc::c_void,
    slot: *const Slot,
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
    // SAFETY: `arg` is the `Slot` in the shared mapping NetnsMaker owns; it is unmapped only
    // after the helper has been reaped (join, or Drop, which kills and reaps it first).
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
        let stack = super::guarded_stack(STACK, true)?;
        // SAFETY: the slot's page is the last page of the fresh mapping of STACK bytes made
        // above (page-aligned, so aligned for Slot); nothing else uses it.
        let slot = unsafe {
            let slot = (stack as *mut u8).add(STACK - SLOT_PAGE) as *mut Slot;
            slot.write(Slot {
                fd: AtomicI32::new(-1),
                step: AtomicI32::new(0),
                errno: AtomicI32::new(0),
            });
            slot
        };
        let mut maker = NetnsMaker {
            pid: None,
            stack,
            slot,
        };
        // SAFETY: the helper runs `helper` below the slot's page (page-aligned, so 16-byte
        // aligned; stacks grow down towards the guard page) with the slot, the mapping kept
        // until it is reaped (join or Drop). It gets a copy of init's memory (no CLONE_VM),
        // shares its descriptor table, and runs only raw system calls (module doc); SIGCHLD
        // makes it an ordinary child to wait for.
        let pid = unsafe {
            libc::clone(
                helper,
                (stack as *mut u8).add(STACK - SLOT_PAGE) as *mut libc::c_void,
                libc::CLONE_FILES | libc::SIGCHLD,
                slot as *mut libc::c_void,
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
        // SAFETY: the slot lives in the mapping this maker owns until Drop.
        let slot = unsafe { &*self.slot };
        let step = slot.step.load(Ordering::Acquire);
        if step != 0 {
            let errno = Errno::from_raw(slot.errno.load(Ordering::Acquire));
            return Err((STEPS.get(step as usize).copied().unwrap_or("?"), errno));
        }
        let fd = slot.fd.load(Ordering::Acquire);
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
                    // Not known to be gone: the mapping stays (a leak, never a
                    // use-after-free of memory it may still write).
                    Err(_) => return,
                }
            }
        }
        // SAFETY: the helper is reaped (or was never started): nothing runs on the stack.
        unsafe { libc::munmap(self.stack, STACK) };
    }
}

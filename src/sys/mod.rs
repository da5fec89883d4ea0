//! The only module with `unsafe`: thin wrappers over syscalls that nix and libc's safe
//! surface do not cover. Each block has a `// SAFETY:` comment and turns into a `Result` at once.

/// Raw syscall probes for the seccomp tests (they call what the policy denies).
#[cfg(test)]
pub mod seccomp_probe;

mod netns;
pub use netns::{
    LoopbackStep, NetnsHelper, helper_step, loopback_socket, loopback_up, start_netns_helper,
};
mod notify;
pub use notify::{
    Notification, notif_continue, notif_id_valid, notif_recv, notif_sync_wake_up,
    seccomp_set_filter_listener, send_fd_no_alloc,
};

/// cordon's heap (the binaries install it with `#[global_allocator]`; the library leaves the
/// choice to whoever links it). Blocks under [`LARGE`] come from a TLSF allocator (`rlsf`)
/// that takes memory from the kernel in 64 KiB pieces and keeps what is freed for reuse:
/// musl's allocator returns freed memory to the kernel at once, and a run of `cordon exec`
/// made about 50 `mmap`/`munmap` pairs in the launcher and in init (each a page fault or
/// more, and a TLB flush), 0.3-0.4 ms of the start-up. Larger blocks stay with musl, which
/// maps each one directly, grows it with `mremap` (no copy) and unmaps it when freed: an
/// output buffer or its JSON text (tens of MiB) never lingers, nor is copied on every
/// doubling. The TLSF lock is a pthread mutex with no fork handler (musl's `fork` takes
/// musl's own allocator lock around the fork; nothing does this one's): a process that forks
/// or clones while another of its threads allocates could leave the child's copy locked
/// forever. cordon forks and clones only while single-threaded ([`clone_namespaces`],
/// [`fork`], checked with [`thread_count`]); its multi-threaded proxy helper never forks.
pub struct Heap;

/// Where a block's size sends it (the size at `alloc`/`realloc` is the size at `dealloc`, as
/// `GlobalAlloc` requires of its callers, so both ends agree).
pub const LARGE: usize = 128 << 10;

static SMALL: rlsf::GlobalTlsf = rlsf::GlobalTlsf::new();

// SAFETY: every method forwards to one of two allocators that implement GlobalAlloc
// soundly, choosing by the layout's size, which is the same for a block's alloc and dealloc
// (and its realloc's old layout); a block moving across LARGE is copied to a block of the
// other allocator, and the old one freed by the allocator it came from.
unsafe impl std::alloc::GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract (non-zero size) is passed on unchanged.
        unsafe {
            if layout.size() >= LARGE {
                std::alloc::System.alloc(layout)
            } else {
                SMALL.alloc(layout)
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: as for alloc.
        unsafe {
            if layout.size() >= LARGE {
                std::alloc::System.alloc_zeroed(layout)
            } else {
                SMALL.alloc_zeroed(layout)
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from the allocator its layout's size chose at alloc/realloc.
        unsafe {
            if layout.size() >= LARGE {
                std::alloc::System.dealloc(ptr, layout)
            } else {
                SMALL.dealloc(ptr, layout)
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        // SAFETY: within one allocator, its own realloc; across LARGE, a new block of `new`
        // bytes (same alignment, valid as the caller guarantees for realloc), the smaller of
        // the two sizes copied (the blocks are distinct), and the old block freed by its own.
        unsafe {
            match (layout.size() >= LARGE, new >= LARGE) {
                (true, true) => std::alloc::System.realloc(ptr, layout, new),
                (false, false) => SMALL.realloc(ptr, layout, new),
                _ => {
                    let to = std::alloc::Layout::from_size_align_unchecked(new, layout.align());
                    let q = self.alloc(to);
                    if !q.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new));
                        self.dealloc(ptr, layout);
                    }
                    q
                }
            }
        }
    }
}

use nix::errno::Errno;
use nix::unistd::Pid;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Result of [`clone_namespaces`]: which side of the clone we are on.
pub enum CloneResult {
    Parent(Pid),
    Child,
}

/// `clone(2)` with namespace flags and fork semantics (no new stack, SIGCHLD on exit).
///
/// The caller must be single-threaded: the kernel refuses `CLONE_NEWUSER` otherwise, and the
/// child continues on a copy of the parent's memory, where another thread's locks would stay
/// locked forever.
pub fn clone_namespaces(flags: libc::c_int) -> Result<CloneResult, Errno> {
    // SAFETY: raw clone without CLONE_VM behaves like fork(2): the child gets a copy of the
    // address space and continues on the same (copied) stack. No pointer arguments are passed
    // (stack, parent_tid, child_tid, tls are all null/0). The caller guarantees a
    // single-threaded process, so no lock is held by a thread that does not exist in the child.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_int>(),
            std::ptr::null_mut::<libc::c_int>(),
            0 as libc::c_ulong,
        )
    };
    match ret {
        -1 => Err(Errno::last()),
        0 => Ok(CloneResult::Child),
        pid => Ok(CloneResult::Parent(Pid::from_raw(pid as libc::pid_t))),
    }
}

/// `struct clone_args` of clone3(2) (include/uapi/linux/sched.h), up to `cgroup` (Linux 5.7).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP` (Linux 5.7): the child starts in the cgroup v2 directory `cgroup`.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// [`clone_namespaces`] (or, with `flags` 0, a fork) through clone3(2) with
/// `CLONE_INTO_CGROUP`: the child is born in the cgroup v2 directory open at `cgroup`
/// (O_PATH is enough), so nobody has to move it there, a move that waits for an RCU grace
/// period (milliseconds) whenever the kernel's cgroup-wide lock was idle. The kernel checks
/// the caller's right to move a process there, as for a move. Errors as the kernel gives them:
/// ENOSYS or E2BIG from kernels before 5.3 or 5.7 (or a seccomp filter that hides clone3),
/// for which the caller falls back to [`clone_namespaces`] and a move.
///
/// Same single-thread requirement as [`clone_namespaces`].
pub fn clone_into_cgroup(
    flags: libc::c_int,
    cgroup: std::os::fd::BorrowedFd<'_>,
) -> Result<CloneResult, Errno> {
    use std::os::fd::AsRawFd;
    let args = CloneArgs {
        flags: flags as u32 as u64 | CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // SAFETY: clone3 without CLONE_VM and with a null stack behaves like fork(2): the child
    // gets a copy of the address space and continues on the same (copied) stack. Unlike the
    // C library's fork it runs no atfork handlers and leaves the C library's cached thread id
    // stale in the child: harmless here, since cordon registers no atfork handler and the
    // child, single-threaded, uses no lock that records its owner's thread id. The kernel
    // reads `args` (a live, fully initialised struct of the size passed) during the call only;
    // no pointer in it is set (pidfd, child_tid, parent_tid, set_tid are 0), and `cgroup` is
    // a descriptor the borrow keeps open for the call. The caller guarantees a single-threaded
    // process, so no lock is held by a thread that does not exist in the child.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    match ret {
        -1 => Err(Errno::last()),
        0 => Ok(CloneResult::Child),
        pid => Ok(CloneResult::Parent(Pid::from_raw(pid as libc::pid_t))),
    }
}

/// `fork(2)`, for the sandbox's init to start the payload and for the launcher to start its
/// cgroup keeper and the network proxy helper. Same single-thread requirement.
pub fn fork() -> Result<CloneResult, Errno> {
    // SAFETY: every caller is single-threaded: init is a clone of the single-threaded
    // launcher and starts no threads, and the launcher checked it had one thread before the
    // clone and starts none. So the child may keep running Rust code after fork.
    match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Parent { child } => Ok(CloneResult::Parent(child)),
        nix::unistd::ForkResult::Child => Ok(CloneResult::Child),
    }
}

/// Runs `child` in a new process that shares the caller's memory, but not its file table,
/// signal handlers, credentials, limits or working directory, until it calls `execve` or exits;
/// the caller is suspended until then (`CLONE_VM | CLONE_VFORK`, as `posix_spawn` does).
/// Nothing is copied: no page tables, and no copy-on-write fault afterwards on either side.
/// For the sandbox's init to start the payload.
///
/// `child` runs on a stack of its own and must end in `execve` or [`exit_now`] (never in
/// `exit`, whose handlers would run on the shared memory); if it returns, its value is the
/// exit code; if it panics, the exit code is 125 (`exit_codes::SANDBOX_ERROR`). Whatever it changes in memory, the caller sees when it resumes, so it must
/// change nothing the caller relies on. The caller must be single-threaded: the child may
/// then allocate, because the only thread that could hold the allocator's lock is the
/// suspended caller, which is not inside the allocator while it waits in `clone`.
pub fn spawn_shared(child: &mut dyn FnMut() -> i32) -> Result<Pid, Errno> {
    const STACK: usize = 1 << 20;
    extern "C" fn trampoline(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `&mut &mut dyn FnMut` that spawn_shared passed to clone; it
        // stays valid because spawn_shared's frame is alive (the caller is suspended in clone
        // until this process has called execve or exited).
        let f = unsafe { &mut *(arg as *mut &mut dyn FnMut() -> i32) };
        // A panic must not unwind out of this extern "C" frame: that aborts the child with
        // SIGABRT (reported as the program's own signal) and leaves the panic counts raised
        // in the memory the caller resumes with (the child shares its thread-local storage
        // too), so the caller would count as panicking from then on. Caught, the counts are
        // back down and the child ends with cordon's own failure code.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .unwrap_or(crate::outcome::exit_codes::SANDBOX_ERROR)
    }
    let stack = guarded_stack(STACK)?;
    let mut f: &mut dyn FnMut() -> i32 = child;
    // SAFETY: the stack is our mapping (its top is passed: x86_64 stacks grow down, and the
    // mapping is page-aligned, so 16-byte aligned); `trampoline` is an extern "C" fn taking
    // the pointer to `f`, which outlives the child's use of it (see trampoline). With
    // CLONE_VFORK this call returns in the caller only once the child has exec'd or exited,
    // so the child never runs concurrently with the caller on the shared memory.
    let ret = unsafe {
        libc::clone(
            trampoline,
            (stack as *mut u8).add(STACK) as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &mut f as *mut &mut dyn FnMut() -> i32 as *mut libc::c_void,
        )
    };
    let err = Errno::last();
    // SAFETY: the child no longer runs on this stack: it has exec'd (new address space) or
    // exited, or was never started. Unmapping our own mapping touches nothing else.
    unsafe { libc::munmap(stack, STACK) };
    match ret {
        -1 => Err(err),
        pid => Ok(Pid::from_raw(pid)),
    }
}

/// A stack for a child made with `clone`: `size` bytes of fresh anonymous memory at the
/// returned base (the caller unmaps it with `munmap(base, size)` once no child runs on it),
/// whose lowest page is a guard page, so that an overflow faults instead of writing below it.
fn guarded_stack(size: usize) -> Result<*mut libc::c_void, Errno> {
    const GUARD: usize = 4096;
    // SAFETY: a fresh anonymous mapping; no existing memory is touched.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return Err(Errno::last());
    }
    // SAFETY: the lowest page of the mapping made above, ours alone, becomes inaccessible.
    if unsafe { libc::mprotect(stack, GUARD, libc::PROT_NONE) } != 0 {
        let err = Errno::last();
        // SAFETY: unmaps the mapping made above, which nothing uses yet.
        unsafe { libc::munmap(stack, size) };
        return Err(err);
    }
    Ok(stack)
}

/// The id of the mount `fd` is on (`statx` with `STATX_MNT_ID`, kernel 5.8+): two views of
/// one directory through different mounts share device and inode, not this. ENOSYS when
/// the kernel does not report it.
pub fn mount_id(fd: std::os::fd::BorrowedFd<'_>) -> Result<u64, Errno> {
    const STATX_MNT_ID: libc::c_uint = 0x1000;
    // SAFETY: an all-zero statx is a valid value (integers and padding).
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: statx writes at most one struct statx into `st`, which outlives the call; the
    // empty path with AT_EMPTY_PATH names `fd` itself.
    let r = unsafe {
        libc::syscall(
            libc::SYS_statx,
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            STATX_MNT_ID,
            &raw mut st,
        )
    };
    if r < 0 {
        return Err(Errno::last());
    }
    if st.stx_mask & STATX_MNT_ID == 0 {
        return Err(Errno::ENOSYS);
    }
    Ok(st.stx_mnt_id)
}

/// Whether the caller may execute `path` as execve would decide it: with its effective ids
/// and capabilities (`faccessat2` with `AT_EACCESS`, kernel 5.8+; plain `access` uses the
/// real ids and drops the capabilities of a non-root uid). ENOSYS when the kernel lacks it.
pub fn executable(path: &std::ffi::CStr) -> Result<(), Errno> {
    // SAFETY: faccessat2 reads the NUL-terminated path, which outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_faccessat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::X_OK,
            libc::AT_EACCESS,
        )
    };
    if r < 0 {
        return Err(Errno::last());
    }
    Ok(())
}

/// `personality(2)`: sets the calling process's execution domain (`PER_LINUX32`, ...).
pub fn set_personality(persona: libc::c_ulong) -> Result<(), Errno> {
    // SAFETY: personality takes a number by value and touches no memory of ours.
    if unsafe { libc::personality(persona) } == -1 {
        return Err(Errno::last());
    }
    Ok(())
}

/// `ioprio_set(IOPRIO_WHO_PROCESS, 0, value)`: the calling thread's I/O priority
/// (`class << 13 | level`).
pub fn set_io_priority(value: i32) -> Result<(), Errno> {
    const IOPRIO_WHO_PROCESS: libc::c_int = 1;
    // SAFETY: ioprio_set takes three integers by value and touches no memory of ours.
    let ret = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, value) };
    if ret == -1 {
        return Err(Errno::last());
    }
    Ok(())
}

/// The kernel's `struct sched_attr` (SCHED_ATTR_SIZE_VER1, with the utilization clamps).
#[repr(C)]
struct SchedAttrRaw {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

/// `sched_setattr(0, attr, 0)`: the calling thread's scheduling policy and parameters. The
/// utilization clamps (Linux 5.3+), which a config cannot give values for, are sent only
/// when its flags ask for them, wide open (0-1024); otherwise the original 48-byte struct
/// goes, which every kernel with sched_setattr takes.
pub fn set_scheduler(a: &crate::spec::container::SchedAttr) -> Result<(), Errno> {
    const SCHED_FLAG_UTIL_CLAMP: u64 = 0x20 | 0x40;
    const SCHED_ATTR_SIZE_VER0: u32 = 48;
    let clamps = a.flags & SCHED_FLAG_UTIL_CLAMP != 0;
    let mut raw = SchedAttrRaw {
        size: if clamps {
            std::mem::size_of::<SchedAttrRaw>() as u32
        } else {
            SCHED_ATTR_SIZE_VER0
        },
        policy: a.policy,
        flags: a.flags,
        nice: a.nice,
        priority: a.priority,
        runtime: a.runtime,
        deadline: a.deadline,
        period: a.period,
        util_min: 0,
        util_max: if clamps { 1024 } else { 0 },
    };
    // SAFETY: `raw` is a live, initialised, writable struct sched_attr at least as long as
    // its `size` field says; the kernel reads it, and on E2BIG writes the size it supports
    // back into that field (through the same pointer, which we own for the call).
    let ret =
        unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &mut raw as *mut SchedAttrRaw, 0) };
    if ret == -1 {
        return Err(Errno::last());
    }
    Ok(())
}

/// Whether capability number `cap` is in the calling thread's bounding set
/// (`PR_CAPBSET_READ`); EINVAL for a number this kernel does not know.
pub fn capbset_read(cap: u32) -> Result<bool, Errno> {
    // SAFETY: PR_CAPBSET_READ takes a capability number by value and reads the calling
    // thread's credentials; no memory is passed.
    let ret = unsafe { libc::prctl(libc::PR_CAPBSET_READ, libc::c_ulong::from(cap), 0, 0, 0) };
    match ret {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Errno::last()),
    }
}

/// Removes capability number `cap` from the calling thread's bounding set
/// (`PR_CAPBSET_DROP`; needs CAP_SETPCAP in the thread's user namespace).
pub fn capbset_drop(cap: u32) -> Result<(), Errno> {
    // SAFETY: PR_CAPBSET_DROP takes a capability number by value and changes only the calling
    // thread's credentials; no memory is passed.
    let ret = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) };
    if ret == 0 { Ok(()) } else { Err(Errno::last()) }
}

/// Whether the calling process runs under a real-time scheduling policy (SCHED_FIFO or
/// SCHED_RR), for error messages.
pub fn realtime_policy() -> bool {
    // SAFETY: sched_getscheduler(0) only reads the calling process's policy; no memory.
    // (The raw call: musl's wrapper answers ENOSYS by design.)
    let policy = unsafe { libc::syscall(libc::SYS_sched_getscheduler, 0) } as libc::c_int;
    policy == libc::SCHED_FIFO || policy == libc::SCHED_RR
}

/// Closes every fd from `first` up, with `close_range(2)` (Linux 5.9+).
pub fn close_fds_from(first: RawFd) -> Result<(), Errno> {
    // SAFETY: close_range only closes descriptors; no memory is passed. Closing fds that Rust
    // objects still own would make those objects close an unrelated fd later, so callers use
    // this only right before execve, when no such object will run its destructor.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            0,
        )
    };
    if ret == -1 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// `pidfd_open(2)`: an fd that becomes readable when `pid` exits (Linux 5.3+).
pub fn pidfd_open(pid: Pid) -> Result<OwnedFd, Errno> {
    // SAFETY: plain syscall with integer arguments; it returns a new fd that we own.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if ret < 0 {
        return Err(Errno::last());
    }
    // SAFETY: the kernel just returned this fd to us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// `pidfd_send_signal(2)`: signals the very process `pidfd` refers to; ESRCH once it has
/// been reaped (never a process that reused its pid).
pub fn pidfd_kill(pidfd: std::os::fd::BorrowedFd<'_>, sig: libc::c_int) -> Result<(), Errno> {
    // SAFETY: plain syscall; the fd is borrowed for the call, the info pointer is null (the
    // kernel fills in a SI_USER siginfo) and flags are 0.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            std::os::fd::AsRawFd::as_raw_fd(&pidfd),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if ret < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// `setgroups(0, NULL)`: drops every supplementary group (needs CAP_SETGID in the user ns).
pub fn clear_groups() -> Result<(), Errno> {
    nix::unistd::setgroups(&[])
}

/// Returns the calling thread's count of threads (from /proc/self/status), to check the
/// single-thread precondition of [`clone_namespaces`].
pub fn thread_count() -> Option<usize> {
    // procfs gives a process's task directory one link per thread, plus `.` and the entry in
    // its parent: one stat instead of reading and parsing /proc/self/status.
    use std::os::unix::fs::MetadataExt;
    let links = std::fs::metadata("/proc/self/task").ok()?.nlink();
    usize::try_from(links.checked_sub(2)?).ok()
}

/// Restores every signal to its default disposition and unblocks all of them: the payload
/// must not inherit cordon's blocked mask (used for its signalfd) nor the SIGPIPE "ignore"
/// that the Rust runtime sets, since ignored dispositions survive `execve`.
pub fn reset_signals() -> Result<(), Errno> {
    use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
    for sig in 1..libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: installing SIG_DFL involves no handler code; signal numbers the kernel does
        // not accept (reserved real-time ones) just return an error, which we ignore.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
}

/// The signals a container's init waiting for `start` ends on (see
/// [`exit_on_terminating_signals`]): those that end runc's (a Go program, whose runtime
/// ignores SIGUSR1, SIGUSR2, SIGALRM and SIGPIPE unless asked for them). Not SIGKILL, which
/// ends it anyway.
pub const TERMINATING_SIGNALS: &[libc::c_int] =
    &[libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM];

extern "C" fn exit_by_signal(sig: libc::c_int) {
    // SAFETY: _exit is async-signal-safe; nothing else runs here.
    unsafe { libc::_exit(128 + sig) }
}

/// Makes each of [`TERMINATING_SIGNALS`] end the process with status 128+signal (`on`), or
/// gives them their default action back (`!on`). The init of a pid namespace is sent only
/// the signals it handles, SIGKILL and SIGSTOP aside: a container's init waiting for `start`
/// with default actions would ignore a `kill` with SIGTERM, where runc's (a Go program, which
/// handles every signal) ends.
pub fn exit_on_terminating_signals(on: bool) -> Result<(), Errno> {
    for &sig in TERMINATING_SIGNALS {
        let handler = if on {
            exit_by_signal as extern "C" fn(libc::c_int) as libc::sighandler_t
        } else {
            libc::SIG_DFL
        };
        // SAFETY: sigaction with a zeroed struct (an empty mask, no flags) and either SIG_DFL
        // or `exit_by_signal`, an extern "C" fn of the one-int signature that calls only
        // _exit; the old action is not asked for (null).
        let ret = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler;
            libc::sigaction(sig, &act, std::ptr::null_mut())
        };
        Errno::result(ret)?;
    }
    Ok(())
}

/// `kill(2)` with a signal number: real-time signals too (SIGRTMIN+3, 37, as podman stops a
/// systemd container with), which nix's `Signal` cannot name.
pub fn kill_raw(pid: Pid, sig: libc::c_int) -> Result<(), Errno> {
    // SAFETY: kill takes two integers and touches no memory of this process.
    Errno::result(unsafe { libc::kill(pid.as_raw(), sig) }).map(drop)
}

/// A set of signals blocked in the calling thread (and so in what it forks or clones until
/// the child resets its mask), taken one at a time with [`BlockedSignals::wait`]. The
/// kernel's own 64-bit mask, through the raw system calls: the C library's `sigaddset` (musl's
/// refuses 32 to 34) would leave signals it keeps for itself unblocked, and their default
/// action would end the process.
pub struct BlockedSignals(u64);

/// The kernel's signal set size on x86_64, in bytes (`_NSIG / 8`).
const KERNEL_SIGSET_BYTES: libc::c_long = 8;

/// Blocks `sigs` (1 to 64, real-time ones included). A number outside that range is an
/// error (EINVAL), never left out.
pub fn block_signals(sigs: &[libc::c_int]) -> Result<BlockedSignals, Errno> {
    let mut mask = 0u64;
    for &sig in sigs {
        if !(1..=64).contains(&sig) {
            return Err(Errno::EINVAL);
        }
        mask |= 1 << (sig - 1);
    }
    // SAFETY: rt_sigprocmask reads 8 bytes from `mask`, which lives until the call returns;
    // the old-mask pointer is null (not asked for); the size is the kernel's sigset size.
    Errno::result(unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            &mask as *const u64,
            std::ptr::null_mut::<u64>(),
            KERNEL_SIGSET_BYTES,
        )
    })?;
    Ok(BlockedSignals(mask))
}

impl BlockedSignals {
    /// Waits until one of the signals is pending and takes it (`rt_sigtimedwait` without a
    /// timeout): its number.
    pub fn wait(&self) -> Result<libc::c_int, Errno> {
        loop {
            // SAFETY: the kernel reads 8 bytes of the mask, which lives for the call; the
            // siginfo and timeout pointers may be null (no information, no timeout).
            let r = unsafe {
                libc::syscall(
                    libc::SYS_rt_sigtimedwait,
                    &self.0 as *const u64,
                    std::ptr::null_mut::<libc::siginfo_t>(),
                    std::ptr::null::<libc::timespec>(),
                    KERNEL_SIGSET_BYTES,
                )
            };
            match Errno::result(r) {
                Err(Errno::EINTR) => continue,
                Ok(sig) => return Ok(sig as libc::c_int),
                Err(e) => return Err(e),
            }
        }
    }
}

/// Restores SIGPIPE's default action (the Rust runtime ignores it): a command that only prints
/// then ends quietly when its reader goes away (`cordon doctor | head -1`), as other tools do,
/// instead of failing on EPIPE. Not for `exec`/`run`, whose supervisor handles EPIPE itself.
pub fn default_sigpipe() {
    // SAFETY: SIG_DFL installs no handler code, so nothing can run in signal context.
    let _ = unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        )
    };
}

/// Makes the process that `cmd` spawns die of SIGKILL when the thread that spawns it ends
/// (`PR_SET_PDEATHSIG`: the kernel tracks the parent *thread*, so spawn from a thread that
/// outlives the child, such as the main thread). A parent that died before the signal was
/// armed is caught too: the child then fails to start (ESRCH) instead of running orphaned.
pub fn kill_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = nix::unistd::getpid().as_raw();
    // SAFETY: the closure runs in the forked child between fork and exec. It calls only
    // prctl(2) and getppid(2), both async-signal-safe, allocates nothing (an `io::Error` from
    // an errno is not boxed), and touches no lock or state shared with the parent's threads.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // Reparented already: the parent died before the death signal was armed.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Sets `sig` to be ignored.
pub fn ignore_signal(sig: nix::sys::signal::Signal) -> Result<(), Errno> {
    // SAFETY: SIG_IGN installs no handler code, so nothing can run in signal context.
    unsafe { nix::sys::signal::signal(sig, nix::sys::signal::SigHandler::SigIgn) }.map(drop)
}

/// Overwrites the calling process's command line with NUL bytes: the argument strings on its
/// stack, which `/proc/PID/cmdline` shows to anyone who can see the process. The sandbox's
/// init is a clone of cordon, so its command line is the caller's (host paths, `--env`
/// values meant for the program): the payload would read it as `/proc/1/cmdline`. (Hiding
/// the file under a bind of /dev/null did that too, but a mount under `/proc/1` makes every
/// reap of init wait for an RCU grace period while the kernel detaches it.) The caller must
/// not use `std::env::args` afterwards. The area's length stays visible.
pub fn scrub_cmdline() -> Result<(), String> {
    let (start, end) = argument_area()?;
    // SAFETY: [start, end) is this process's argument area (`argument_area`: found at argv[0]
    // and compared with the arguments byte for byte, or arg_start and arg_end as the kernel
    // reports them, checked to end where the environment starts): the strings execve
    // copied to the top of the initial stack, a private writable mapping that stays mapped
    // for the process's life. No Rust value borrows it: the command line was parsed into
    // owned strings before the clone, and the caller promises not to read it again. Plain
    // bytes, so any value written is valid.
    unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
    Ok(())
}

/// The calling process's argument area `[start, end)`, the strings `/proc/PID/cmdline` shows.
/// Found in memory when it can be: execve copies the arguments to `arg_start` one after
/// another, each with its NUL, and libc keeps `argv[0]`, the first, as
/// `program_invocation_name`; the arguments std copied give the lengths. That holds only when
/// the kernel started this program itself (its entry point is the `AT_ENTRY` the kernel
/// reports): started through the dynamic loader (`ld.so PROGRAM ARGS`), libc's argv skips the
/// loader's own arguments, which stay at the area's start. The bytes found are compared with
/// the arguments before the area is trusted. Otherwise (a loader's start, a changed `argv[0]`)
/// the kernel's own figures from `/proc/self/stat`, which cost about 0.08 ms in the sandbox's
/// init, where this is on the start-up's critical path.
pub fn argument_area() -> Result<(usize, usize), String> {
    unsafe extern "C" {
        // musl and glibc both export it, set to argv[0] before `main`.
        static program_invocation_name: *const libc::c_char;
        // The C runtime's entry point, where the kernel starts a program it loaded itself.
        fn _start();
    }
    // SAFETY: getauxval reads the auxiliary vector the kernel gave this process; AT_ENTRY is
    // a plain number (0 if absent).
    let entry = unsafe { libc::getauxval(libc::AT_ENTRY) } as usize;
    if entry == _start as *const () as usize {
        // SAFETY: a plain read of a pointer-sized static that libc sets once before `main`
        // and cordon never writes.
        let first = unsafe { program_invocation_name };
        if let Some(area) = argument_area_at(first, std::env::args_os()) {
            return Ok(area);
        }
    }
    let stat = std::fs::read_to_string("/proc/self/stat")
        .map_err(|e| format!("read /proc/self/stat: {e}"))?;
    cmdline_area(&stat)
}

/// `[first, first + n)` when the `n` bytes at `first` are `args`, each followed by a NUL; None
/// otherwise (`first` null, or other bytes there).
fn argument_area_at(
    first: *const libc::c_char,
    args: impl Iterator<Item = std::ffi::OsString>,
) -> Option<(usize, usize)> {
    use std::os::unix::ffi::OsStrExt;
    if first.is_null() {
        return None;
    }
    let mut at = first as usize;
    for arg in args {
        // SAFETY: `first` is libc's argv[0], which cordon never changes: the start of the
        // argument area execve laid out, NUL-terminated strings that the environment's
        // strings follow directly. Each read starts right after the NUL of a string that
        // matched an argument and stops at the next NUL, so it stays within those strings
        // (the loop ends at the first mismatch, and there are no more reads than arguments).
        let here = unsafe { std::ffi::CStr::from_ptr(at as *const libc::c_char) };
        if here.to_bytes() != arg.as_bytes() {
            return None;
        }
        at += here.to_bytes_with_nul().len();
    }
    (at > first as usize).then_some((first as usize, at))
}

/// (arg_start, arg_end) from the text of `/proc/PID/stat` (fields 48 and 49; the command
/// name in field 2 may hold spaces and parentheses, so fields are counted after its last
/// `)`). The area must be non-empty and end at or before the environment's start (field 50):
/// execve lays them out back to back, whatever their size (up to a quarter of the stack
/// limit).
pub fn cmdline_area(stat: &str) -> Result<(usize, usize), String> {
    let unparsable = || format!("cannot parse /proc/self/stat ({} bytes)", stat.len());
    let rest = &stat[stat.rfind(')').ok_or_else(unparsable)? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // `rest` starts at field 3 (the state, a letter): field 48 is the 46th from there.
    if fields.nth(44).is_none() {
        return Err(unparsable());
    }
    let mut next = || -> Result<usize, String> {
        fields
            .next()
            .and_then(|f| f.parse().ok())
            .ok_or_else(unparsable)
    };
    let (start, end, env_start) = (next()?, next()?, next()?);
    if start == 0 || end <= start || end > env_start {
        return Err(format!(
            "implausible argument area in /proc/self/stat: {start:#x}..{end:#x}, environment at {env_start:#x}"
        ));
    }
    Ok((start, end))
}

/// `_exit(2)`: leaves a forked child without running destructors or atexit handlers that
/// belong to the parent's copy of the process.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no Rust state.
    unsafe { libc::_exit(code) }
}

/// `wait4(2)` on one child: its wait status and the resource usage of it and every
/// descendant it reaped (CPU time, peak RSS).
pub fn wait4(pid: Pid) -> Result<(nix::sys::wait::WaitStatus, libc::rusage), Errno> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is a plain C struct; all-zero is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both out-pointers point to live locals of the right types for the call.
        let ret = unsafe { libc::wait4(pid.as_raw(), &mut status, libc::__WALL, &mut usage) };
        if ret == -1 {
            let e = Errno::last();
            if e == Errno::EINTR {
                continue;
            }
            return Err(e);
        }
        return Ok((nix::sys::wait::WaitStatus::from_raw(pid, status)?, usage));
    }
}

/// The Landlock ABI version the kernel offers (`landlock_create_ruleset` with the VERSION
/// flag): ENOSYS when not built in, EOPNOTSUPP when built but disabled at boot.
pub fn landlock_abi() -> Result<i32, Errno> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the kernel reads no
    // memory and returns the ABI number.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret as i32)
    }
}

/// Closes every fd above 2 except those in `keep` (fds the caller of cordon leaked to it
/// without close-on-exec, for example), with one `close_range` per gap.
pub fn close_fds_except(keep: &[RawFd]) -> Result<(), Errno> {
    let mut keep: Vec<RawFd> = keep.iter().copied().filter(|&fd| fd > 2).collect();
    keep.sort_unstable();
    let mut from: RawFd = 3;
    for fd in keep {
        if fd > from {
            // SAFETY: as in close_fds_from; the range [from, fd-1] holds no fd the caller keeps.
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_close_range,
                    from as libc::c_uint,
                    (fd - 1) as libc::c_uint,
                    0,
                )
            };
            if ret == -1 {
                return Err(Errno::last());
            }
        }
        from = from.max(fd + 1);
    }
    close_fds_from(from)
}

/// Takes ownership of a descriptor the kernel just installed in this process's table for the
/// caller (an SCM_RIGHTS message received with `recvmsg`).
pub fn own_received_fd(fd: RawFd) -> OwnedFd {
    // SAFETY: the kernel created this descriptor for the recvmsg call that returned it; no
    // other object in this process knows it, so this OwnedFd is its only owner.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// `KEYCTL_JOIN_SESSION_KEYRING`, from <linux/keyctl.h>.
const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;

/// `keyctl(KEYCTL_JOIN_SESSION_KEYRING, name)`: the calling thread gets a session keyring of
/// its own, a new anonymous one (`None`), or the one named `name` (created when the caller
/// has none of that name it may join). Returns its serial number.
pub fn join_session_keyring(name: Option<&std::ffi::CStr>) -> Result<i32, Errno> {
    let name = name.map_or(std::ptr::null(), std::ffi::CStr::as_ptr);
    // SAFETY: keyctl reads only its second argument here, a NUL-terminated string that lives
    // for the call, or NULL (an anonymous keyring); the unused arguments are ignored.
    let ret =
        unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, name, 0, 0, 0) };
    if ret == -1 {
        Err(Errno::last())
    } else {
        Ok(ret as i32)
    }
}

/// `setdomainname(2)` in the calling process's UTS namespace (OCI `domainname`).
pub fn set_domainname(name: &str) -> Result<(), Errno> {
    // SAFETY: the pointer and length describe `name`'s bytes, which live for the call; the
    // kernel copies them and needs no NUL terminator.
    let ret = unsafe { libc::setdomainname(name.as_ptr().cast(), name.len()) };
    if ret == -1 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// Makes `fd` (a terminal) the controlling terminal of the calling session (`TIOCSCTTY`).
pub fn set_controlling_tty(fd: RawFd) -> Result<(), Errno> {
    // SAFETY: TIOCSCTTY takes an integer argument (0: do not steal); no memory is passed.
    let ret = unsafe { libc::ioctl(fd, libc::TIOCSCTTY, 0 as libc::c_int) };
    if ret == -1 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// Sets a terminal's window size (`TIOCSWINSZ`).
pub fn set_winsize(fd: RawFd, rows: u16, cols: u16) -> Result<(), Errno> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads a `struct winsize`, which `ws` is and which lives for the call.
    let ret = unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, &ws) };
    if ret == -1 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// Unlocks a pseudo-terminal master (`TIOCSPTLCK` 0) and opens its peer (`TIOCGPTPEER`,
/// Linux 4.13+), so the slave is found through the master's own devpts, never by name.
pub fn pty_open_peer(master: RawFd) -> Result<OwnedFd, Errno> {
    let unlock: libc::c_int = 0;
    // SAFETY: TIOCSPTLCK reads one int from the pointer, which points to a live local.
    if unsafe { libc::ioctl(master, libc::TIOCSPTLCK, &unlock) } == -1 {
        return Err(Errno::last());
    }
    // SAFETY: TIOCGPTPEER takes open flags as an integer and returns a new fd.
    let fd = unsafe {
        libc::ioctl(
            master,
            libc::TIOCGPTPEER,
            (libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) as libc::c_int,
        )
    };
    if fd == -1 {
        return Err(Errno::last());
    }
    // SAFETY: the kernel just returned this fd to us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Installs a seccomp BPF program with `seccomp(SECCOMP_SET_MODE_FILTER)` and `flags`,
/// WITHOUT setting `no_new_privs`: the payload sets it itself just before; an OCI container
/// keeps it off unless its config asks (the kernel then requires CAP_SYS_ADMIN, which the
/// container's init still holds at that point). Used through
/// `security::seccomp::install_program`.
pub fn seccomp_set_filter(
    prog: &[seccompiler::sock_filter],
    flags: libc::c_ulong,
) -> Result<(), Errno> {
    seccomp_filter_call(prog, flags).map(drop)
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, prog)`: the kernel's non-negative answer (a new
/// listener's fd with `SECCOMP_FILTER_FLAG_NEW_LISTENER`), or the errno.
fn seccomp_filter_call(
    prog: &[seccompiler::sock_filter],
    flags: libc::c_ulong,
) -> Result<libc::c_long, Errno> {
    let fprog = libc::sock_fprog {
        len: prog.len() as libc::c_ushort,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `fprog` points to `prog`, a slice of `struct sock_filter` (same layout as
    // libc's) that outlives the call; the kernel copies the program and does not write to it.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER as libc::c_ulong,
            flags,
            &fprog as *const libc::sock_fprog,
        )
    };
    if ret < 0 { Err(Errno::last()) } else { Ok(ret) }
}

/// Whether descriptor number `fd` is open in this process (`F_GETFD` succeeds).
pub fn fd_is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD on a descriptor number reads its flags; no memory passed, nothing changed.
    unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
}

/// Clears close-on-exec on `fd` (for the `--preserve-fds` descriptors an OCI container keeps).
pub fn clear_cloexec(fd: RawFd) -> Result<(), Errno> {
    // SAFETY: F_SETFD with an integer flag argument on a descriptor number; no memory passed.
    let ret = unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    if ret == -1 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// A new overlayfs over `lowerdir` (colon-separated, at least two layers) with no upper
/// layer, as a detached read-only mount (`fsopen`, `fsconfig`, `fsmount`; Linux 5.2+):
/// returns the fd of its root. Without an upper layer nothing on it can ever be written,
/// not even after a remount; and being attached nowhere, no path leads to it.
pub fn overlay_lower_only(lowerdir: &std::ffi::CStr) -> Result<OwnedFd, (&'static str, Errno)> {
    // The uapi values of <linux/mount.h>.
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_SET_STRING: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    const MOUNT_ATTR_RDONLY_NOSUID_NODEV: libc::c_uint = 0x1 | 0x2 | 0x4;
    // SAFETY: fsopen reads the NUL-terminated filesystem name (a static C string) and
    // returns a new descriptor or -1; no other memory is passed.
    let ctx = unsafe { libc::syscall(libc::SYS_fsopen, c"overlay".as_ptr(), FSOPEN_CLOEXEC) };
    if ctx < 0 {
        return Err(("fsopen overlay", Errno::last()));
    }
    // SAFETY: ctx is a descriptor fsopen just returned to us and nothing else owns.
    let ctx = unsafe { OwnedFd::from_raw_fd(ctx as RawFd) };
    let set = |key: &std::ffi::CStr, value: &std::ffi::CStr| {
        // SAFETY: fsconfig reads two NUL-terminated strings that outlive the call; the
        // descriptor is the fs context we own.
        let r = unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                ctx.as_raw_fd(),
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0 as libc::c_int,
            )
        };
        if r < 0 { Err(Errno::last()) } else { Ok(()) }
    };
    use std::os::fd::AsRawFd;
    set(c"lowerdir", lowerdir).map_err(|e| ("set the overlay's lowerdir", e))?;
    // The source mountinfo names, as `mount -t overlay overlay ...` gives it (else "none").
    let _ = set(c"source", c"overlay");
    // Inode number translation is irrelevant here and only logs warnings when the layers
    // are on different filesystems; kernels without the option refuse it, which is fine.
    let _ = set(c"xino", c"off");
    // SAFETY: FSCONFIG_CMD_CREATE takes no key or value (null pointers, aux 0).
    let r = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            ctx.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0 as libc::c_int,
        )
    };
    if r < 0 {
        return Err(("create the overlay", Errno::last()));
    }
    // SAFETY: fsmount takes the fs context descriptor and two flag words; no memory.
    let m = unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            ctx.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            MOUNT_ATTR_RDONLY_NOSUID_NODEV,
        )
    };
    if m < 0 {
        return Err(("mount the overlay (fsmount)", Errno::last()));
    }
    // SAFETY: m is a descriptor fsmount just returned to us and nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(m as RawFd) })
}

/// `bpf(2)` commands and constants from `include/uapi/linux/bpf.h` (libc does not carry them).
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_DETACH: libc::c_long = 9;
const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_PROG_QUERY: libc::c_long = 16;
/// `enum bpf_prog_type`: BPF_PROG_TYPE_CGROUP_DEVICE.
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
/// `enum bpf_attach_type`: BPF_CGROUP_DEVICE.
const BPF_CGROUP_DEVICE: u32 = 6;
/// More programs may be attached to the cgroup and below it; a device is allowed only when
/// every one of them allows it.
const BPF_F_ALLOW_MULTI: u32 = 1 << 1;

/// The `BPF_PROG_LOAD` part of `union bpf_attr` (field order and sizes of bpf.h), padded with
/// zeros past the union's size in Linux 6.x (the kernel accepts a larger attr whose tail is
/// zero), so that no field the kernel reads is uninitialised.
#[repr(C, align(8))]
struct BpfProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    pad: [u8; 80],
}

/// The `BPF_PROG_ATTACH` part of `union bpf_attr`, zero-padded likewise.
#[repr(C, align(8))]
struct BpfProgAttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
    replace_bpf_fd: u32,
    pad: [u8; 124],
}

/// `bpf(cmd, attr, sizeof attr)`: the kernel's non-negative answer, or the errno.
///
/// # Safety
/// `T` must be one of the `#[repr(C)]` `union bpf_attr` parts above, fully initialised, for
/// `cmd`; every pointer in it must be valid for what `cmd` reads or writes through it for
/// the duration of the call.
unsafe fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> Result<libc::c_long, Errno> {
    // SAFETY: the caller's contract: `attr` is a valid bpf_attr part of the size passed,
    // whose pointers the kernel may follow for `cmd`.
    let ret =
        unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>()) };
    if ret < 0 { Err(Errno::last()) } else { Ok(ret) }
}

/// Loads a `BPF_PROG_TYPE_CGROUP_DEVICE` program (eBPF instructions, 8 bytes each, as
/// encoded by `oci::cgroup::device_program`).
pub fn bpf_load_device_program(insns: &[u64]) -> Result<OwnedFd, Errno> {
    let license = c"Apache-2.0";
    let mut attr = BpfProgLoadAttr {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 0,
        log_size: 0,
        log_buf: 0,
        kern_version: 0,
        prog_flags: 0,
        prog_name: *b"cordon_devices\0\0",
        prog_ifindex: 0,
        expected_attach_type: BPF_CGROUP_DEVICE,
        pad: [0; 80],
    };
    // SAFETY: a fully initialised BPF_PROG_LOAD attr; the pointers in it (the instructions,
    // the NUL-terminated license) stay valid for the call, and no log buffer is given, so
    // the kernel writes nothing into our memory.
    let fd = unsafe { bpf(BPF_PROG_LOAD, &mut attr) }?;
    // SAFETY: the kernel returned a new file descriptor for the program, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Attaches a loaded device program to the cgroup open as `cgroup` (`BPF_F_ALLOW_MULTI`).
/// The attachment holds the program until the cgroup is removed.
pub fn bpf_attach_device_program(
    cgroup: std::os::fd::BorrowedFd<'_>,
    prog: std::os::fd::BorrowedFd<'_>,
) -> Result<(), Errno> {
    let mut attr = device_attach_attr(cgroup, prog, BPF_F_ALLOW_MULTI);
    // SAFETY: a fully initialised BPF_PROG_ATTACH attr naming two fds the caller keeps open
    // for the call; it holds no pointer.
    unsafe { bpf(BPF_PROG_ATTACH, &mut attr) }.map(drop)
}

/// Detaches the device program open as `prog` from the cgroup open as `cgroup` (the same
/// attr as `BPF_PROG_ATTACH`; the kernel finds the attachment by program, as it must for
/// programs attached with `BPF_F_ALLOW_MULTI`).
pub fn bpf_detach_device_program(
    cgroup: std::os::fd::BorrowedFd<'_>,
    prog: std::os::fd::BorrowedFd<'_>,
) -> Result<(), Errno> {
    let mut attr = device_attach_attr(cgroup, prog, 0);
    // SAFETY: a fully initialised BPF_PROG_DETACH attr naming two fds the caller keeps open
    // for the call; it holds no pointer.
    unsafe { bpf(BPF_PROG_DETACH, &mut attr) }.map(drop)
}

/// The attr of `BPF_PROG_ATTACH` and `BPF_PROG_DETACH` for a device program and a cgroup.
fn device_attach_attr(
    cgroup: std::os::fd::BorrowedFd<'_>,
    prog: std::os::fd::BorrowedFd<'_>,
    flags: u32,
) -> BpfProgAttachAttr {
    use std::os::fd::AsRawFd;
    BpfProgAttachAttr {
        target_fd: cgroup.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: flags,
        replace_bpf_fd: 0,
        pad: [0; 124],
    }
}

/// The `BPF_PROG_QUERY` part of `union bpf_attr`, zero-padded likewise (the zeros past
/// `prog_cnt` leave the newer output pointers, `prog_attach_flags` and the link ones, unset).
#[repr(C, align(8))]
struct BpfProgQueryAttr {
    target_fd: u32,
    attach_type: u32,
    query_flags: u32,
    attach_flags: u32,
    prog_ids: u64,
    prog_cnt: u32,
    pad: [u8; 116],
}

/// The ids of the device programs attached directly to the cgroup open as `cgroup` (not
/// those it inherits from its ancestors: no `BPF_F_QUERY_EFFECTIVE`).
pub fn bpf_query_device_programs(cgroup: std::os::fd::BorrowedFd<'_>) -> Result<Vec<u32>, Errno> {
    use std::os::fd::AsRawFd;
    let mut ids: Vec<u32> = vec![0; 16];
    loop {
        let mut attr = BpfProgQueryAttr {
            target_fd: cgroup.as_raw_fd() as u32,
            attach_type: BPF_CGROUP_DEVICE,
            query_flags: 0,
            attach_flags: 0,
            prog_ids: ids.as_mut_ptr() as u64,
            prog_cnt: ids.len() as u32,
            pad: [0; 116],
        };
        // SAFETY: a fully initialised BPF_PROG_QUERY attr; the kernel writes at most
        // `prog_cnt` u32s to `prog_ids`, which points at `ids`, that many long and alive for
        // the call, and writes `prog_cnt` and `attach_flags` back into `attr` (the other
        // output pointers are zero, so it writes nothing else).
        let ret = unsafe { bpf(BPF_PROG_QUERY, &mut attr) };
        let count = attr.prog_cnt as usize;
        if let Err(e) = ret {
            // More programs than room: `prog_cnt` now says how many; ask again.
            if e == Errno::ENOSPC && count > ids.len() {
                ids = vec![0; count];
                continue;
            }
            return Err(e);
        }
        ids.truncate(count);
        return Ok(ids);
    }
}

/// The `BPF_PROG_GET_FD_BY_ID` part of `union bpf_attr`, zero-padded likewise.
#[repr(C, align(8))]
struct BpfGetIdAttr {
    prog_id: u32,
    next_id: u32,
    open_flags: u32,
    pad: [u8; 132],
}

/// Opens the loaded program whose id is `id` (it takes CAP_SYS_ADMIN).
pub fn bpf_prog_fd_by_id(id: u32) -> Result<OwnedFd, Errno> {
    let mut attr = BpfGetIdAttr {
        prog_id: id,
        next_id: 0,
        open_flags: 0,
        pad: [0; 132],
    };
    // SAFETY: a fully initialised BPF_PROG_GET_FD_BY_ID attr; it holds no pointer.
    let fd = unsafe { bpf(BPF_PROG_GET_FD_BY_ID, &mut attr) }?;
    // SAFETY: the kernel returned a new file descriptor for the program, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The `BPF_OBJ_GET_INFO_BY_FD` part of `union bpf_attr`, zero-padded likewise.
#[repr(C, align(8))]
struct BpfInfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
    pad: [u8; 128],
}

/// The id of the program open as `prog` (the `id` of `struct bpf_prog_info`, whose first two
/// u32 fields are `type` and `id`: only those are asked for).
pub fn bpf_prog_id(prog: std::os::fd::BorrowedFd<'_>) -> Result<u32, Errno> {
    use std::os::fd::AsRawFd;
    let mut info = [0u32; 2];
    let mut attr = BpfInfoAttr {
        bpf_fd: prog.as_raw_fd() as u32,
        info_len: std::mem::size_of_val(&info) as u32,
        info: info.as_mut_ptr() as u64,
        pad: [0; 128],
    };
    // SAFETY: a fully initialised BPF_OBJ_GET_INFO_BY_FD attr; the kernel writes at most
    // `info_len` bytes to `info`, which points at `info`, that long and alive for the call,
    // and writes `info_len` back into `attr`.
    unsafe { bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }?;
    Ok(info[1])
}

#[cfg(test)]
mod blocked_signal_tests {
    use super::*;

    #[test]
    fn signals_the_c_library_keeps_are_blocked_and_taken_too() {
        // 34 is SIGRTMIN as `kill -l` numbers it, which musl's sigaddset refuses: unblocked,
        // its default action would end the process. Sent to this thread only (the test
        // harness runs others, which do not block it).
        let blocked = block_signals(&[34, libc::SIGUSR1]).unwrap();
        for sig in [34, libc::SIGUSR1] {
            // SAFETY: tgkill takes integers only; the target is this very thread.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_tgkill,
                    libc::getpid(),
                    libc::syscall(libc::SYS_gettid),
                    sig,
                )
            };
            assert_eq!(r, 0);
            assert_eq!(blocked.wait(), Ok(sig));
        }
        assert_eq!(block_signals(&[65]).err(), Some(Errno::EINVAL));
        assert_eq!(block_signals(&[0]).err(), Some(Errno::EINVAL));
        // SAFETY: as in block_signals; unblocks what this test blocked.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_UNBLOCK,
                &blocked.0 as *const u64,
                std::ptr::null_mut::<u64>(),
                KERNEL_SIGSET_BYTES,
            )
        };
        assert_eq!(r, 0);
    }
}

#[cfg(test)]
mod spawn_shared_tests {
    use super::*;
    use nix::sys::wait::{WaitStatus, waitpid};

    #[test]
    fn the_child_shares_memory_and_its_value_is_the_exit_code() {
        let mut seen = 0;
        let pid = spawn_shared(&mut || {
            seen = 7;
            3
        })
        .unwrap();
        assert_eq!(waitpid(pid, None).unwrap(), WaitStatus::Exited(pid, 3));
        // The caller resumed after the child: its write is visible (no copy).
        assert_eq!(seen, 7);
    }

    #[test]
    fn a_panicking_child_exits_125_and_leaves_the_caller_not_panicking() {
        let pid = spawn_shared(&mut || panic!("in the shared child")).unwrap();
        assert_eq!(waitpid(pid, None).unwrap(), WaitStatus::Exited(pid, 125));
        assert!(
            !std::thread::panicking(),
            "the child's panic count leaked into the caller"
        );
    }
}

/// How many bytes wait unread in the pipe `fd` is an end of (`FIONREAD`).
pub fn pipe_unread(fd: std::os::fd::BorrowedFd<'_>) -> Result<usize, Errno> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which outlives the call; `fd` is a
    // live descriptor borrowed for it.
    let r = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            libc::FIONREAD,
            &raw mut n,
        )
    };
    if r < 0 {
        return Err(Errno::last());
    }
    Ok(usize::try_from(n).unwrap_or(0))
}

/// `open_tree(fd, "", AT_EMPTY_PATH | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)`: a detached
/// copy of the mount `fd` is on, rooted at `fd`'s directory (not recursive), as a new
/// descriptor (kernel 5.2+). Copying from a detached mount (one `fsmount` made) needs Linux
/// 6.15; before, EINVAL.
pub fn open_tree_clone(fd: std::os::fd::BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
    // SAFETY: the path is a NUL-terminated empty string literal; `fd` is a live descriptor
    // borrowed for the call; the kernel returns a new descriptor or -1.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC,
        )
    };
    if ret < 0 {
        return Err(Errno::last());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// `move_mount(tree, "", AT_FDCWD, to, MOVE_MOUNT_F_EMPTY_PATH)`: attaches the detached
/// mount `tree` ([`open_tree_clone`]) at the path `to` (kernel 5.2+).
pub fn move_mount_to(tree: std::os::fd::BorrowedFd<'_>, to: &std::ffi::CStr) -> Result<(), Errno> {
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
    // SAFETY: both paths are NUL-terminated strings that outlive the call; `tree` is a live
    // descriptor borrowed for it.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            std::os::fd::AsRawFd::as_raw_fd(&tree),
            c"".as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if ret < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// `mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, {attr_set: set})`: sets mount
/// attributes (`MOUNT_ATTR_RDONLY`, ...) on the mount `fd` was opened on and on every mount
/// below it (kernel 5.12+; ENOSYS before).
pub fn mount_setattr_recursive(fd: RawFd, set: u64) -> Result<(), Errno> {
    let attr = libc::mount_attr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the path is a NUL-terminated empty string literal, `attr` a live `struct
    // mount_attr` whose size is passed with it; the kernel only reads both during the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd,
            c"".as_ptr(),
            (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if ret < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// fstatvfs(2)'s `f_flag` of the filesystem and mount `fd` is on, every bit of it: nix's
/// `Statvfs::flags` drops the bits nix does not name for the target (under musl
/// `ST_RELATIME`, and `ST_NOSYMFOLLOW` everywhere).
pub fn fstatvfs_flags(
    fd: std::os::fd::BorrowedFd<'_>,
) -> Result<nix::sys::statvfs::FsFlags, Errno> {
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `st` is a writable `struct statvfs` the kernel (through libc) fills in; `fd`
    // is a live descriptor borrowed for the call.
    let ret = unsafe { libc::fstatvfs(std::os::fd::AsRawFd::as_raw_fd(&fd), st.as_mut_ptr()) };
    if ret < 0 {
        return Err(Errno::last());
    }
    // SAFETY: fstatvfs returned 0, so it wrote the whole struct (it was zeroed before, too).
    let st = unsafe { st.assume_init() };
    Ok(nix::sys::statvfs::FsFlags::from_bits_retain(st.f_flag))
}

#[cfg(test)]
mod tests {
    fn listed() -> usize {
        std::fs::read_dir("/proc/self/task").unwrap().count()
    }

    #[test]
    fn fstatvfs_flags_keeps_the_bits_nix_does_not_name() {
        // The kernel sets ST_VALID (0x20) in every answer; nix names no such flag.
        let f = std::fs::File::open("/").unwrap();
        let fd = std::os::fd::AsFd::as_fd(&f);
        let all = super::fstatvfs_flags(fd).unwrap();
        assert_ne!(all.bits() & 0x20, 0, "{all:?}");
        let nix = nix::sys::statvfs::fstatvfs(fd).unwrap().flags();
        assert_eq!(nix.bits() & 0x20, 0, "nix keeps unnamed bits now: {nix:?}");
        assert!(all.contains(nix), "{all:?} lacks some of {nix:?}");
    }

    #[test]
    fn the_heap_keeps_contents_across_its_two_allocators() {
        use std::alloc::{GlobalAlloc, Layout};
        let heap = super::Heap;
        let small = Layout::from_size_align(1000, 16).unwrap();
        // SAFETY: test of the allocator's contract: sizes are non-zero, every block is freed
        // once with the layout it has, and only its own bytes are read and written.
        unsafe {
            let p = heap.alloc(small);
            assert!(!p.is_null() && (p as usize).is_multiple_of(16));
            for i in 0..1000 {
                *p.add(i) = (i % 251) as u8;
            }
            // Small to large (TLSF to musl), then large to larger (musl's own realloc), then
            // back to small: the bytes kept must survive each move.
            let big = heap.realloc(p, small, super::LARGE * 2);
            assert!(!big.is_null() && (big as usize).is_multiple_of(16));
            let big_layout = Layout::from_size_align(super::LARGE * 2, 16).unwrap();
            let bigger = heap.realloc(big, big_layout, super::LARGE * 8);
            let bigger_layout = Layout::from_size_align(super::LARGE * 8, 16).unwrap();
            let back = heap.realloc(bigger, bigger_layout, 500);
            for i in 0..500 {
                assert_eq!(*back.add(i), (i % 251) as u8, "byte {i}");
            }
            heap.dealloc(back, Layout::from_size_align(500, 16).unwrap());
            for size in [64, super::LARGE - 1, super::LARGE, super::LARGE * 3] {
                let l = Layout::from_size_align(size, 8).unwrap();
                let z = heap.alloc_zeroed(l);
                assert!(!z.is_null());
                assert!((0..size).all(|i| *z.add(i) == 0), "alloc_zeroed({size})");
                heap.dealloc(z, l);
            }
        }
    }

    #[test]
    fn the_argument_area_is_read_after_the_command_name() {
        // A command name with spaces and a ')' must not shift the fields; an area of any
        // size is accepted (a command line may exceed 2 MiB with a large stack limit).
        let stat = |start: u64, end: u64, env: u64| {
            let mut s = String::from("42 (a) b (c)) S");
            for n in 4..=52u64 {
                let v = match n {
                    48 => start,
                    49 => end,
                    50 => env,
                    _ => n,
                };
                s.push_str(&format!(" {v}"));
            }
            s
        };
        assert_eq!(
            super::cmdline_area(&stat(1000, 1300, 1300)),
            Ok((1000, 1300))
        );
        let big = 0x7ff0_0000_0000u64;
        assert_eq!(
            super::cmdline_area(&stat(big, big + (5 << 20), big + (5 << 20))),
            Ok((big as usize, (big + (5 << 20)) as usize))
        );
        assert!(
            super::cmdline_area(&stat(1300, 1000, 1300))
                .unwrap_err()
                .contains("implausible")
        );
        assert!(
            super::cmdline_area(&stat(1000, 1300, 1200))
                .unwrap_err()
                .contains("implausible")
        );
        assert!(
            super::cmdline_area("42 (a) S 1 2")
                .unwrap_err()
                .contains("cannot parse")
        );
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        let (start, end) = super::cmdline_area(&own).expect("this process's own area");
        let cmdline = std::fs::read("/proc/self/cmdline").unwrap();
        assert_eq!(end - start, cmdline.len());
    }

    #[test]
    fn the_argument_area_is_found_in_memory_where_the_kernel_has_it() {
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        let kernel = super::cmdline_area(&own).unwrap();
        unsafe extern "C" {
            static program_invocation_name: *const libc::c_char;
        }
        // SAFETY: a read of libc's pointer-sized static, as in argument_area.
        let first = unsafe { program_invocation_name };
        assert_eq!(
            super::argument_area_at(first, std::env::args_os()),
            Some(kernel),
            "found in memory, where /proc/self/stat says"
        );
        assert_eq!(super::argument_area(), Ok(kernel));
        // The test binary was started by the kernel: the memory path is the one taken.
        unsafe extern "C" {
            fn _start();
        }
        // SAFETY: as in argument_area.
        assert_eq!(
            unsafe { libc::getauxval(libc::AT_ENTRY) } as usize,
            _start as *const () as usize
        );
        // Other bytes there than the arguments: not trusted.
        let mut wrong: Vec<std::ffi::OsString> = std::env::args_os().collect();
        wrong[0].push("x");
        assert_eq!(super::argument_area_at(first, wrong.into_iter()), None);
        let mut fewer = std::env::args_os();
        let _ = fewer.next();
        assert_eq!(super::argument_area_at(first, fewer), None);
        assert_eq!(
            super::argument_area_at(std::ptr::null(), std::env::args_os()),
            None
        );
    }

    #[test]
    fn thread_count_matches_the_task_list() {
        // Other tests start and end threads meanwhile: compare only while the list holds
        // still, with a thread of our own alive so that the count is above one.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || rx.recv().ok());
        let mut checked = false;
        for _ in 0..1000 {
            let (a, n, b) = (listed(), super::thread_count(), listed());
            if a == b {
                assert!(a >= 2);
                assert_eq!(n, Some(a));
                checked = true;
                break;
            }
        }
        tx.send(()).unwrap();
        t.join().unwrap();
        assert!(checked, "the task list never held still");
    }
}

//! Raw system calls with deliberately odd arguments, used only by the seccomp tests to probe an
//! installed filter: calls that the safe wrappers (nix, std) will not make, such as an ioctl
//! command with bits above 32, a clone(2) with namespace flags, an x32 syscall number or an
//! i386 `int 0x80`. Each probe is chosen so that, WITHOUT a filter, the kernel answers with
//! something other than what the filter answers (noted on each), which is what lets the
//! tests fail; and so that it is harmless if it unexpectedly succeeds.

use nix::errno::Errno;

// Every argument to the variadic `libc::syscall` is passed as a 64-bit integer or a pointer,
// so no register holds undefined upper bits.

/// The result of a raw `syscall(2)`: `-1` means "see errno".
fn check(ret: libc::c_long) -> Result<i64, Errno> {
    if ret == -1 {
        Err(Errno::last())
    } else {
        Ok(ret)
    }
}

/// `unshare(flags)`. Unfiltered: EINVAL when `flags` has a bit unshare does not know (e.g.
/// CLONE_PTRACE), checked before any permission; otherwise it may succeed, which only changes
/// the calling (test child) process.
pub fn unshare(flags: u64) -> Result<i64, Errno> {
    // SAFETY: unshare takes an integer and touches no memory of ours.
    check(unsafe { libc::syscall(libc::SYS_unshare, flags) })
}

/// `clone(flags | CLONE_THREAD, 0, 0, 0, 0)` without CLONE_SIGHAND. Unfiltered: always EINVAL
/// ("CLONE_THREAD requires CLONE_SIGHAND"), checked in copy_process before the namespace flags
/// are looked at, so no process is ever created.
pub fn clone_invalid_thread(flags: u64) -> Result<i64, Errno> {
    let flags = (flags | libc::CLONE_THREAD as u64) & !(libc::CLONE_SIGHAND as u64);
    // SAFETY: this flag combination is rejected by the kernel before any task is created (see
    // above); the stack and tid pointers are null and never dereferenced.
    check(unsafe { libc::syscall(libc::SYS_clone, flags, 0u64, 0u64, 0u64, 0u64) })
}

/// `clone3(NULL, 0)`. Unfiltered: EINVAL (size below CLONE_ARGS_SIZE_VER0), nothing created.
pub fn clone3_null() -> Result<i64, Errno> {
    // SAFETY: with size 0 the kernel rejects the call before reading the (null) pointer.
    check(unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize) })
}

/// `ptrace(PTRACE_DETACH, getpid(), 0, 0)`. Unfiltered: ESRCH (we do not trace ourselves).
pub fn ptrace_detach_self() -> Result<i64, Errno> {
    // SAFETY: PTRACE_DETACH reads no memory; addr and data are zero.
    check(unsafe {
        libc::syscall(
            libc::SYS_ptrace,
            libc::PTRACE_DETACH as u64,
            i64::from(libc::getpid()),
            0u64,
            0u64,
        )
    })
}

/// `io_uring_setup(1, NULL)`. Unfiltered: EFAULT (or EPERM if the host set
/// kernel.io_uring_disabled=2).
pub fn io_uring_setup_null() -> Result<i64, Errno> {
    // SAFETY: the kernel validates the null params pointer with copy_from_user (EFAULT).
    check(unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u64, std::ptr::null::<u8>()) })
}

/// `bpf(0xffff, NULL, 0)`. Unfiltered: EINVAL for an unknown command (or EPERM for an
/// unprivileged caller when kernel.unprivileged_bpf_disabled is set).
pub fn bpf_bogus_command() -> Result<i64, Errno> {
    // SAFETY: size 0 and an unknown command: the kernel reads no memory.
    check(unsafe { libc::syscall(libc::SYS_bpf, 0xffffu64, std::ptr::null::<u8>(), 0u64) })
}

/// `personality(persona)`, raw so that the full 64-bit register value is passed. Unfiltered it
/// succeeds and returns the previous persona; only the calling process is affected.
pub fn personality(persona: u64) -> Result<i64, Errno> {
    // SAFETY: an integer argument, no memory access.
    check(unsafe { libc::syscall(libc::SYS_personality, persona) })
}

/// `ioctl(fd, cmd, &byte)` with a 64-bit `cmd`, for TIOCSTI-style probes. The argument points
/// to a valid byte. Callers must make `fd` a non-terminal (the tests use /dev/null) so that even
/// unfiltered nothing is injected anywhere: then the answer is ENOTTY.
pub fn ioctl_with_byte(fd: i32, cmd: u64) -> Result<i64, Errno> {
    let byte: u8 = b'#';
    // SAFETY: the third argument points to a live byte on our stack, which is all TIOCSTI and
    // TIOCLINUX read; a non-tty fd fails with ENOTTY before any access.
    check(unsafe { libc::syscall(libc::SYS_ioctl, i64::from(fd), cmd, &byte as *const u8) })
}

/// `socket(domain, SOCK_DGRAM | SOCK_CLOEXEC, 0)`, closing the socket on success.
pub fn socket_dgram(domain: u64) -> Result<i64, Errno> {
    let ty = (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as u64;
    // SAFETY: integer arguments only.
    let fd = check(unsafe { libc::syscall(libc::SYS_socket, domain, ty, 0u64) })?;
    // SAFETY: fd was just returned by socket() and is owned by nobody else.
    unsafe { libc::close(fd as i32) };
    Ok(fd)
}

/// `mount("none", "/nonexistent-cordon-probe", "tmpfs", 0, NULL)`. Unfiltered: ENOENT (the
/// target is looked up before any permission check).
pub fn mount_nonexistent() -> Result<i64, Errno> {
    // SAFETY: all pointers are to NUL-terminated static strings or null.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount,
            c"none".as_ptr(),
            c"/nonexistent-cordon-probe".as_ptr(),
            c"tmpfs".as_ptr(),
            0u64,
            std::ptr::null::<u8>(),
        )
    })
}

/// `syscall(nr)` with no arguments, for numbers that take none or that no table knows: the x32
/// getpid (`0x4000_0000 | 39`) or `-1`. Unfiltered: ENOSYS on kernels without x32.
pub fn no_arg_syscall(nr: i64) -> Result<i64, Errno> {
    // SAFETY: only used with getpid-like or unknown numbers, which read no memory.
    check(unsafe { libc::syscall(nr) })
}

/// i386 `getpid` (20) through `int 0x80` from 64-bit code: the kernel's IA-32 emulation
/// entry, which seccomp sees as AUDIT_ARCH_I386. Returns the raw eax (the pid, or `-errno`).
#[cfg(target_arch = "x86_64")]
pub fn int80_getpid() -> i64 {
    let ret: i64;
    // SAFETY: getpid reads and writes no memory. int 0x80 returns in eax and may clobber
    // r8-r11 on old kernels, declared as clobbered; the stack is not touched.
    unsafe {
        std::arch::asm!(
            "int 0x80",
            inlateout("rax") 20i64 => ret,
            out("r8") _, out("r9") _, out("r10") _, out("r11") _,
            options(nostack),
        );
    }
    ret
}

/// `fork()`; the child `_exit(0)`s at once, the parent reaps it and returns its raw wait status.
pub fn fork_and_reap() -> Result<i32, Errno> {
    // SAFETY: the child only calls the async-signal-safe _exit, so forking a (possibly
    // multi-threaded) test process is sound.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(Errno::last()),
        0 => {
            // SAFETY: _exit never returns and runs no destructors or atexit handlers.
            unsafe { libc::_exit(0) }
        }
        child => {
            let mut status = 0;
            // SAFETY: status is a valid out-pointer for the duration of the call.
            let r = unsafe { libc::waitpid(child, &mut status, 0) };
            if r == -1 {
                Err(Errno::last())
            } else {
                Ok(status)
            }
        }
    }
}

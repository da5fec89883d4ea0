//! seccomp: a policy kept as a data file (`profiles/seccomp/*.toml`, a reason on every entry),
//! compiled to ONE BPF program ([`compile_builtin`] / [`compile_policy_str`]), installed by the
//! payload as its very last step before `execve` ([`install`]).
//!
//! * [`policy`]: the file format, parsed and validated (errors name the entry).
//! * [`compile`](mod@compile): policy → one BPF program: an architecture guard that kills i386
//!   and x32 calls, then a binary search over the named syscalls; the module doc explains why
//!   it decides exactly as the kernel would combine one filter per action.
//! * [`syscalls`]: the x86_64 syscall table (name → number).
//! * [`oci`]: an OCI config's `linux.seccomp` → one BPF program (cordon-oci's containers),
//!   on the same syscall table; installed by the same [`install_program`].
//!
//! The built-in policies are compiled by the build script (`build.rs`, which includes
//! `policy`, `compile`, `syscalls` and `error` with `#[path]`), so `cordon` does not parse
//! TOML or run the compiler on each start: it embeds the program's bytes and decodes them. A
//! unit test checks that the embedded program equals a runtime compile of the same file. User
//! policies (text) are still compiled at run time.
//!
//! Only x86_64 is supported: the syscall table and the architecture guard are x86_64's.

mod compile;
mod error;
pub mod oci;
mod policy;
mod syscalls;
mod syscalls_i386;

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod bpf_eval;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_live;

pub use error::{EntryProblem, SeccompError};
use seccompiler::{BpfProgram, sock_filter};

/// A compiled policy, ready to install.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub name: String,
    pub program: BpfProgram,
}

/// The built-in policies, compiled to BPF by the build script: (name, program bytes), each
/// alone and with the extra layers the rlimit backend adds (`<name>+memory-watch`,
/// `<name>+cpu-pin`, `<name>+memory-watch+cpu-pin`; see [`compile_builtin_layered`]). The
/// names are [`policy::BUILTINS`] (a test checks they agree); each file is
/// `profiles/seccomp/<name>.toml`, and its `name` key is the builtin's name (the build checks).
const EMBEDDED: &[(&str, &[u8])] = &[
    (
        "default",
        include_bytes!(concat!(env!("OUT_DIR"), "/seccomp-default.bpf")),
    ),
    (
        "default+memory-watch",
        include_bytes!(concat!(
            env!("OUT_DIR"),
            "/seccomp-default+memory-watch.bpf"
        )),
    ),
    (
        "default+cpu-pin",
        include_bytes!(concat!(env!("OUT_DIR"), "/seccomp-default+cpu-pin.bpf")),
    ),
    (
        "default+memory-watch+cpu-pin",
        include_bytes!(concat!(
            env!("OUT_DIR"),
            "/seccomp-default+memory-watch+cpu-pin.bpf"
        )),
    ),
    (
        "default+memory-watch+no-tcp",
        include_bytes!(concat!(
            env!("OUT_DIR"),
            "/seccomp-default+memory-watch+no-tcp.bpf"
        )),
    ),
    (
        "default+memory-watch+no-tcp+cpu-pin",
        include_bytes!(concat!(
            env!("OUT_DIR"),
            "/seccomp-default+memory-watch+no-tcp+cpu-pin.bpf"
        )),
    ),
];

/// The rlimit backend's layers on a built-in policy (see [`compile_builtin_with`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layers {
    /// `profiles/seccomp/memory-watch.toml`.
    pub memory_watch: bool,
    /// `profiles/seccomp/no-tcp.toml`: only with `memory_watch`.
    pub no_tcp: bool,
    /// `profiles/seccomp/cpu-pin.toml`.
    pub cpu_pin: bool,
}

/// The x86_64 number of a system call, by name (`None` for a name the table lacks).
pub fn syscall_number(name: &str) -> Option<u32> {
    syscalls::number(name)
}

/// The names [`compile_builtin`] accepts.
pub fn builtin_names() -> &'static [&'static str] {
    policy::BUILTINS
}

/// The built-in policy `name` (`"default"`), as compiled at build time.
pub fn compile_builtin(name: &str) -> Result<Compiled, SeccompError> {
    compile_builtin_layered(name, false, false)
}

/// The built-in policy `name` with the rlimit backend's extra layers, as ONE program compiled
/// at build time (no parsing or compiling on the run's critical path), deciding every call as
/// the separate filters installed one after the other would (`compile::compile_layered`):
/// - `memory_watch`: `profiles/seccomp/memory-watch.toml`, under the rlimit backend's memory
///   watch: memfd_create and memfd_secret answer ENOSYS, since the watch cannot count a memfd
///   that no descriptor or page table of the sandbox shows (see `launch::memwatch`), and a
///   shared mapping notifies the supervisor ([`install_with_listener`]);
/// - `cpu_pin`: `profiles/seccomp/cpu-pin.toml`, under the rlimit backend with `--cpus`:
///   sched_setaffinity answers EPERM, so the sandbox stays on the CPUs it was pinned to.
///
/// Neither layer is a policy of its own ([`builtin_names`] lists neither). The name is the
/// layers' names joined with `+`, as the result reports them.
pub fn compile_builtin_layered(
    name: &str,
    memory_watch: bool,
    cpu_pin: bool,
) -> Result<Compiled, SeccompError> {
    compile_builtin_with(
        name,
        Layers {
            memory_watch,
            no_tcp: false,
            cpu_pin,
        },
    )
}

/// [`compile_builtin_layered`] with every layer: also `no_tcp`,
/// `profiles/seccomp/no-tcp.toml`, under the memory watch with the network off on a kernel
/// whose Landlock cannot refuse TCP (ABI below 4): TCP sockets answer EACCES, since a TCP
/// pair on the sandbox's loopback whose peer reset holds memory the watch cannot see. It
/// comes only with `memory_watch` (an error otherwise).
pub fn compile_builtin_with(name: &str, layers: Layers) -> Result<Compiled, SeccompError> {
    check_arch()?;
    if !builtin_names().contains(&name) {
        return Err(SeccompError::UnknownPolicy { name: name.into() });
    }
    let mut full = name.to_string();
    if layers.memory_watch {
        full.push_str("+memory-watch");
    }
    if layers.no_tcp {
        full.push_str("+no-tcp");
    }
    if layers.cpu_pin {
        full.push_str("+cpu-pin");
    }
    let (_, bytes) = EMBEDDED
        .iter()
        .find(|(n, _)| *n == full)
        .ok_or_else(|| SeccompError::UnknownPolicy { name: full.clone() })?;
    Ok(Compiled {
        name: full,
        program: decode(bytes),
    })
}

/// For the fuzz target `seccomp_optimize` only (feature `fuzzing`): the program of the policy
/// `text`, layered over the default policy when `over_default`, before and after the peephole
/// pass, so that the fuzzer can compare their answers with [`bpf_eval`].
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn unoptimized_and_optimized(
    text: &str,
    over_default: bool,
) -> Result<(BpfProgram, BpfProgram), SeccompError> {
    let policy = policy::parse("the given policy text", text)?;
    let default;
    let mut layers = vec![&policy];
    if over_default {
        default = policy::parse(
            "default",
            include_str!("../../../profiles/seccomp/default.toml"),
        )?;
        layers.insert(0, &default);
    }
    let plain = compile::assemble(&layers)?;
    let optimized = compile::optimize(&plain);
    Ok((plain, optimized))
}

/// Compiles a policy given as TOML text (a user policy).
pub fn compile_policy_str(text: &str) -> Result<Compiled, SeccompError> {
    check_arch()?;
    let policy = policy::parse("the given policy text", text)?;
    if policy.groups.contains_key(&policy::Action::UserNotif) {
        return Err(SeccompError::UserNotifReserved {
            policy: policy.name,
        });
    }
    let program = compile::compile(&policy)?;
    Ok(Compiled {
        name: policy.name,
        program,
    })
}

fn check_arch() -> Result<(), SeccompError> {
    if cfg!(target_arch = "x86_64") {
        Ok(())
    } else {
        Err(SeccompError::UnsupportedArch {
            arch: std::env::consts::ARCH,
        })
    }
}

/// The embedded form of a program: each `struct sock_filter` as 8 little-endian bytes,
/// `code: u16, jt: u8, jf: u8, k: u32` (written by `build.rs`).
fn decode(bytes: &[u8]) -> BpfProgram {
    bytes
        .chunks_exact(8)
        .map(|b| sock_filter {
            code: u16::from_le_bytes([b[0], b[1]]),
            jt: b[2],
            jf: b[3],
            k: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        })
        .collect()
}

/// Whether two byte strings are equal, at compile time.
const fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The embedded programs are of the policy files as they are: cargo reruns the build script
/// when a file's modification time is newer than its last run, which a target directory
/// shared with another checkout (or a file restored with its old time) defeats, and a stale
/// program would enforce an older policy while the result describes the current one. So the
/// build script keeps a copy of each text it compiled, and a difference fails the build.
macro_rules! assert_compiled_from_current {
    ($($name:literal),*) => {$(
        const _: () = assert!(
            same_bytes(
                include_bytes!(concat!(env!("OUT_DIR"), "/seccomp-", $name, ".toml")),
                include_bytes!(concat!("../../../profiles/seccomp/", $name, ".toml")),
            ),
            concat!(
                "the embedded seccomp program of profiles/seccomp/", $name,
                ".toml was compiled from another version of the file (a stale build-script ",
                "output); run `touch build.rs` and build again"
            )
        );
    )*};
}
assert_compiled_from_current!("default", "memory-watch", "no-tcp", "cpu-pin");

/// Installs a program with the memory watch's layer ([`compile_builtin_layered`]) on the
/// calling thread with a listener (`SECCOMP_FILTER_FLAG_NEW_LISTENER`), whose descriptor
/// (close-on-exec) is returned for the supervisor to answer the notifications on.
/// `no_new_privs` must be set first.
pub fn install_with_listener(c: &Compiled) -> Result<std::os::fd::OwnedFd, SeccompError> {
    if c.program.is_empty() {
        return Err(SeccompError::NothingToInstall);
    }
    crate::sys::seccomp_set_filter_listener(&c.program).map_err(|e| SeccompError::Listener {
        errno: std::io::Error::from_raw_os_error(e as i32),
    })
}

/// Installs the program on the calling thread. Meant for the payload, last step before
/// `execve`, after `no_new_privs`. Allocates nothing: the program was built by the parent and
/// the kernel copies it in. If it fails, the caller must not `execve`.
pub fn install(c: &Compiled) -> Result<(), SeccompError> {
    install_program(&c.program, 0)
}

/// Installs a classic-BPF seccomp program with `SECCOMP_SET_MODE_FILTER` flags (`TSYNC`,
/// `LOG`, `SPEC_ALLOW`): the one installer of cordon's policies and of an OCI container's
/// `linux.seccomp`. The caller sets `no_new_privs` first, or holds CAP_SYS_ADMIN (an OCI
/// container without `noNewPrivileges`); the kernel refuses the filter otherwise (EACCES).
/// Sets nothing else, allocates nothing.
pub fn install_program(
    program: &[seccompiler::sock_filter],
    flags: libc::c_ulong,
) -> Result<(), SeccompError> {
    if program.is_empty() {
        return Err(SeccompError::NothingToInstall);
    }
    crate::sys::seccomp_set_filter(program, flags).map_err(|e| SeccompError::Install {
        errno: e.to_string(),
    })
}

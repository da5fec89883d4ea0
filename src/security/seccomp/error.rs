//! Why a policy did not load, compile or install. Shared with the build script (`build.rs`),
//! which compiles the built-in policies with the same parser and compiler.

/// Why a policy did not load, compile or install. Every message says what failed, why, and
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error(
        "seccomp policy `{name}` is not built in (the built-in policies are: {}); \
         pick one of those in the profile's `seccomp_policy`",
        super::policy::BUILTINS.join(", ")
    )]
    UnknownPolicy { name: String },

    #[error(
        "seccomp policy from {origin} is not valid TOML for the policy format: {source}\
         fix the file; the format is described in profiles/seccomp/README.md"
    )]
    Parse {
        origin: String,
        source: Box<toml::de::Error>,
    },

    #[error(
        "seccomp policy name `{name}` is not valid: it must be non-empty and use only ASCII \
         letters, digits, `-` and `_`; rename the policy"
    )]
    InvalidName { name: String },

    #[error(
        "seccomp policy `{policy}`, [[deny]] entry #{entry} (syscall {syscalls}): {problem}; \
         fix that entry (the format is described in profiles/seccomp/README.md)"
    )]
    InvalidEntry {
        policy: String,
        entry: usize,
        syscalls: String,
        problem: EntryProblem,
    },

    #[error(
        "seccomp policy `{policy}`: building the BPF program for the `{action}` rules failed: \
         {source}; simplify the policy (fewer or simpler argument rules)"
    )]
    Compile {
        policy: String,
        action: String,
        source: seccompiler::BackendError,
    },

    #[error(
        "seccomp is not supported on {arch}: cordon's syscall table and architecture guard \
         cover x86_64 only; run cordon on x86_64"
    )]
    UnsupportedArch { arch: &'static str },

    #[error(
        "seccomp policy `{policy}`: seccompiler emitted a rule chain of an unexpected shape \
         ({problem}); this is a bug in cordon (a seccompiler upgrade?): report it"
    )]
    Layout {
        policy: String,
        problem: &'static str,
    },

    #[error(
        "seccomp layers `{layers}`: syscall {nr} answers `{newer}` in a newer layer but \
         `{older}` in an older one, which the kernel would rank higher; one program cannot \
         decide that call as the stacked filters would: this is a bug in cordon's built-in \
         policies, report it"
    )]
    LayerOrder {
        layers: String,
        nr: u32,
        newer: String,
        older: String,
    },

    #[error(
        "seccomp policy `{policy}` uses `action = \"user_notif\"`, which only cordon's own \
         memory-watch layer may use (cordon answers its notifications; nothing would answer \
         a user policy's); use errno, kill_process, trap or log"
    )]
    UserNotifReserved { policy: String },

    #[error(
        "cannot install the memory watch's seccomp filter with a listener \
         (SECCOMP_FILTER_FLAG_NEW_LISTENER): {errno}; EBUSY means cordon itself runs under a \
         seccomp filter that already has a listener (a container runtime's), EINVAL a kernel \
         older than 5.0: without it the rlimit backend cannot hold --memory, so run with a \
         cgroup (`--limits-backend` cgroup v1/v2, see `cordon doctor`) or without a memory \
         limit (`--memory 0`)"
    )]
    Listener { errno: std::io::Error },

    #[error(
        "the compiled seccomp policy has no program to install; refusing to run the payload \
         without one (this is a bug in the caller: build `Compiled` with compile_builtin)"
    )]
    NothingToInstall,

    #[error(
        "cannot install the seccomp filter: {errno}; EACCES means the process had neither \
         no_new_privs nor CAP_SYS_ADMIN, EINVAL that the kernel lacks CONFIG_SECCOMP_FILTER or \
         a flag, ENOMEM that the filter is too long: set no_new_privs first, use a kernel with \
         seccomp filters, or shorten the policy"
    )]
    Install { errno: String },
}

/// What is wrong with one `[[deny]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryProblem {
    #[error("`why` is empty: every entry must say why the call is denied")]
    EmptyWhy,
    #[error("`syscall` is an empty list: name at least one system call")]
    NoSyscall,
    #[error(
        "`{0}` is not an x86_64 system call name (names are the kernel's, e.g. `umount2`, \
         `_sysctl`; see `ausyscall --dump` or arch/x86/entry/syscalls/syscall_64.tbl)"
    )]
    UnknownSyscall(String),
    #[error("`{0}` is listed twice in the same entry")]
    DuplicateSyscall(String),
    #[error(
        "`{syscall}` is also denied by entry #{other_entry} with a different action; one \
         syscall, one action (two errno values could not be ordered), so merge the entries"
    )]
    ConflictingAction { syscall: String, other_entry: usize },
    #[error(
        "`{syscall}` is also denied by entry #{other_entry} and one of the two has no `args`, \
         so the other can never matter; remove one"
    )]
    Redundant { syscall: String, other_entry: usize },
    #[error(
        "errno `{0}` is not known; use one of EPERM, EACCES, ENOSYS, EINVAL, ENOTTY, EAFNOSUPPORT, EOPNOTSUPP"
    )]
    UnknownErrno(String),
    #[error("`errno` is only meaningful with `action = \"errno\"`; remove it or change the action")]
    ErrnoWithoutErrnoAction,
    #[error("argument index {0} is out of range: system calls have arguments 0 to 5")]
    ArgIndex(u8),
    #[error("argument width {0} is not valid: use 32 (int, unsigned int) or 64 (long, pointer)")]
    ArgWidth(u8),
    #[error("`op = \"masked_eq\"` needs a `mask`")]
    MaskRequired,
    #[error("`mask` is only meaningful with `op = \"masked_eq\"`; remove it")]
    MaskNotAllowed,
    #[error(
        "{what} {value:#x} does not fit a 32-bit comparison; use `width = 64` if the kernel \
         reads the whole argument"
    )]
    TooWide { what: &'static str, value: u64 },
    #[error("value {value:#x} has bits outside mask {mask:#x}, so it can never match")]
    ValueOutsideMask { value: u64, mask: u64 },
}
